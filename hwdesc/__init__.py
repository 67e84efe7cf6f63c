"""GPU hardware descriptors: one YAML file per SKU in this folder, read and validated here.

    >>> from hwdesc import load
    >>> load("hopper").tensor_flops_per_s["bf16"]
    989400000000000.0

Adding a GPU means adding a YAML file, never code (see h100-sxm.yaml for the format).
"""

from hwdesc.loader import ALIASES, bundled_dir, list_archs, load, load_file
from hwdesc.schema import HardwareDescriptor, HwdescError

__all__ = ["ALIASES", "HardwareDescriptor", "HwdescError", "bundled_dir", "list_archs", "load", "load_file"]
