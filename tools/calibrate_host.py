#!/usr/bin/env python
"""Measure this machine through onnxruntime and write a hardware descriptor YAML for it.

    python tools/calibrate_host.py                 # into the user cache, where `--arch host` reads it
    python tools/calibrate_host.py my-host.yaml    # anywhere; then `estimate ... --arch my-host.yaml`
    python tools/calibrate_host.py --quick PATH    # fewer sizes and repeats (a few seconds)

Same as `estimate --calibrate-host PATH`. What is measured and how it maps onto the (GPU-shaped)
descriptor schema: estimator/truth/host.py and estimator/truth/host_bench.py.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout without installing

from estimator.truth import host, host_bench  # noqa: E402


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("path", nargs="?", help=f"output YAML (default: the user cache, {host.cache_path()})")
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats")
    args = p.parse_args(argv)
    path = host.calibrate(args.path or host.cache_path(), host_bench.QUICK if args.quick else host_bench.FULL)

    import hwdesc

    hw = hwdesc.load(str(path))  # schema-checks what was written
    print(f"wrote {path}")
    print(f"  fp32 FLOP/s   {hw.cuda_flops_per_s['fp32']:.3e}  (achievable {hw.efficiency['cuda']:.0%})")
    print(f"  SFU ops/s     {hw.sfu_ops_per_s:.3e}  (achievable {hw.efficiency['sfu']:.0%})")
    print(f"  bytes/s       {hw.dram_bytes_per_s:.3e}  (achievable {hw.efficiency['dram']:.0%}; in cache)")
    print(f"  per-op cost   {hw.efficiency.get('op_overhead_s', 0.0) * 1e6:.2f} us")
    return 0


if __name__ == "__main__":
    sys.exit(main())
