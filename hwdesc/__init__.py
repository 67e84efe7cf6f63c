"""GPU hardware descriptors: one YAML file per SKU in this folder, read and validated here.

    >>> from hwdesc import load
    >>> load("hopper").tensor_flops_per_s["bf16"]
    989400000000000.0

Adding a GPU means adding a YAML file, never code (see h100-sxm.yaml for the format): its datasheet
figures and its `family:`, whose fitted constants (families/<family>.yaml, hwdesc/family.py) the loader
merges in.
"""

from hwdesc.loader import (
    ALIASES,
    bundled_dir,
    families_dir,
    list_archs,
    list_families,
    load,
    load_family,
    load_file,
)
from hwdesc.schema import HardwareDescriptor, HwdescError

__all__ = ["ALIASES", "HardwareDescriptor", "HwdescError", "bundled_dir", "families_dir", "list_archs",
           "list_families", "load", "load_family", "load_file"]
