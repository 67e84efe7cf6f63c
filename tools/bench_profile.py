"""Speed and memory of `estimate profile` on a large Nsight Systems export.

    python -m tools.bench_profile [--kernels 100000] [--names 200] [--streams 4]

Writes a synthetic SQLite export (estimator/profile/synthetic.py: every kernel with its runtime launch
and an NVTX range, `--names` distinct kernel names over `--streams` streams) into a temporary
directory, then runs `estimate profile FILE` (the terminal summary) and `... --json` as child processes
and reports each one's wall time and peak resident memory (getrusage of the child). Target: 100,000
kernels in <= 5 s and <= 500 MB.
"""

from __future__ import annotations

import argparse
import os
import resource
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent

KINDS = (
    "nvjet_hsh_128x256_64x4_2x1_v_bz_coopA_NTN_{i}",
    "void flash_fwd_kernel<Flash_fwd_traits_{i}>(Params)",
    "void at::native::vectorized_elementwise_kernel<4, CUDAFunctor_add_{i}>(int)",
    "void at::native::reduce_kernel<512, 1, ReduceOp_{i}>(int)",
    "ncclDevKernel_AllReduce_Sum_bf16_RING_LL_{i}(ncclDevKernelArgsStorage<4096>)",
)


def launches(n: int, names: int, streams: int):
    from estimator.profile.synthetic import Launch

    t = 1_000_000
    for i in range(n):
        name = KINDS[i % len(KINDS)].format(i=i % names)
        dur = 2_000 + (i * 7919) % 50_000  # 2 to 52 us
        yield Launch(
            name, t, dur, launch_ns=t - 6_000, stream=7 + i % streams, nvtx=f"Op.{i}(node_{i % 500})"
        )
        t += dur // streams + 500


def child(argv: list[str]) -> tuple[float, float, float]:
    """(wall seconds, CPU seconds, peak RSS in MB) of one child process. NB: the RSS is the maximum over
    the children run so far (getrusage keeps one figure); the CPU time is this child's alone."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    start = time.perf_counter()
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    subprocess.run(
        [sys.executable, "-m", "estimator.cli.main", *argv], check=True, stdout=subprocess.DEVNULL, env=env
    )
    wall = time.perf_counter() - start
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime + after.ru_stime) - (before.ru_utime + before.ru_stime)
    return wall, cpu, after.ru_maxrss / 1024  # ru_maxrss is in KB on Linux


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--kernels", type=int, default=100_000)
    p.add_argument("--names", type=int, default=200)
    p.add_argument("--streams", type=int, default=4)
    args = p.parse_args()
    from estimator.profile import synthetic

    with tempfile.TemporaryDirectory(prefix="bench-profile-") as tmp:
        path = str(Path(tmp) / "synthetic.sqlite")
        t0 = time.perf_counter()
        n = synthetic.write(path, launches(args.kernels, args.names, args.streams))
        print(f"wrote {n} kernels ({os.path.getsize(path) / 1e6:.1f} MB) in {time.perf_counter() - t0:.1f} s")
        for label, extra in (("summary", []), ("--json", ["--json"])):
            wall, cpu, rss = child(["profile", path, *extra])
            print(
                f"estimate profile {label:8s}: {wall:.2f} s wall ({cpu:.2f} s CPU), peak RSS {rss:.0f} MB "
                f"(target <= 5 s, <= 500 MB)"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
