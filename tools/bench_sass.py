"""Speed of `estimate sass` on one module (target: <= 2 s; the disassembler's start-up dominates).

Builds the probe cubins once (not timed), then times `analyse_file` on each cubin (ELF read + one nvdisasm
call + Python analysis) and the whole `estimate sass CUBIN --json` command in a fresh interpreter.
Run: python -m tools.bench_sass [--repeat N]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from estimator.sass import tools
from estimator.sass.analyse import analyse_file

ROOT = Path(__file__).resolve().parents[1]

PROBES = [("gemm_bf16", "sm_90a"), ("wgmma", "sm_90a"), ("tcgen05", "sm_100a"), ("fma", "sm_90a"),
          ("lbprobe", "sm_90a")]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeat", type=int, default=3)
    args = ap.parse_args()
    data = ROOT / "tests" / "data" / "sass"
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    with tempfile.TemporaryDirectory() as tmp:
        print(f"{'module':<22} {'kernels':>7} {'instr':>6} {'analyse_s':>10} {'cli_s':>7}")
        for stem, sm in PROBES:
            cubin = Path(tmp) / f"{stem}.{sm}.cubin"
            subprocess.run([tools.find("nvcc"), "-cubin", f"-arch={sm}", "-O3", "-o", str(cubin),
                            str(data / f"{stem}.cu")], check=True, capture_output=True)
            best = cli = float("inf")
            for _ in range(args.repeat):
                t0 = time.perf_counter()
                result = analyse_file(str(cubin))
                best = min(best, time.perf_counter() - t0)
                t0 = time.perf_counter()
                subprocess.run([sys.executable, "-m", "estimator.cli", "sass", str(cubin), "--json"],
                               check=True, capture_output=True, env=env)
                cli = min(cli, time.perf_counter() - t0)
            n_ins = sum(k["instructions"] for k in result["kernels"])
            print(f"{stem + '.' + sm:<22} {len(result['kernels']):>7} {n_ins:>6} {best:>10.2f} {cli:>7.2f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
