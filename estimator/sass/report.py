"""The text report of `estimate sass`: per kernel resources, tensor path, hot loops, occupancy, findings."""

from __future__ import annotations


def _res_line(r: dict) -> str:
    res = r["resources"]
    if res["registers"] is None:  # a saved listing: only what its instructions say
        return (f"not in a listing (registers, shared memory, launch bounds: give the cubin); "
                f"{res['spill_instructions']} spill instructions")
    parts = [
        f"{res['registers']} regs",
        f"{res['stack_bytes']} B stack",
        f"{res['spill_store_bytes']}/{res['spill_load_bytes']} B spill st/ld",
        f"{res['static_smem_bytes']} B static smem",
    ]
    if res["dynamic_smem_bytes"]:
        parts.append(f"{res['dynamic_smem_bytes']} B dynamic smem")
    parts.append(f"{res['barriers']} barriers")
    if res["mbarriers"]:
        parts.append(f"{res['mbarriers']} mbarriers")
    if res["launch_bounds_threads"]:
        parts.append(f"launch bounds {res['launch_bounds_threads']} threads")
    if res["cluster_dims"]:
        parts.append("cluster " + "x".join(map(str, res["cluster_dims"])))
    if res["setmaxnreg"]:
        parts.append("setmaxnreg")
    return ", ".join(parts)


def _features_line(r: dict) -> str:
    f = r["features"]
    parts = [
        f"{key} {f[key]}" for key in ("tma_loads", "tma_stores", "cp_async", "ldmatrix", "tmem") if f[key]
    ]
    if f["tcgen05"]:
        parts.append(f"tcgen05 cta_group {f['tcgen05_cta_group'] or 1}")
    return ", ".join(parts) or "none"


def to_text(result: dict, top_loops: int = 4) -> str:
    lines = [
        f"{result['file']}: {len(result['kernels'])} kernel(s) for {result['arch']} "
        f"[{result['sm']}, from {result['source_kind']}]"
    ]
    for k in result["kernels"]:
        lines += [
            "",
            f"kernel {k['name']}  ({k['instructions']} instructions)",
            f"  resources: {_res_line(k)}",
        ]
        fam = k["tensor"]["family"] or "none"
        lines.append(
            f"  tensor: {fam}" + "".join(f"; {op['count']} x {op['opcode']}" for op in k["tensor"]["ops"])
        )
        lines.append(f"  async/memory: {_features_line(k)}")
        o = k["occupancy"]
        lines.append(
            "  occupancy: unknown (a listing has no resource attributes)" if o is None else
            f"  occupancy: {o['ctas_per_sm']} CTA/SM, {o['warps_per_sm']} warps "
            f"({100 * o['occupancy']:.0f}%), limiter {o['limiter']}; per resource: "
            + ", ".join(f"{n} {v}" for n, v in o["limits"].items())
        )
        shown = [lp for lp in k["loops"] if lp["hot"]][:top_loops]
        for lp in shown:
            mix = ", ".join(f"{c} {n}" for c, n in lp["mix"].items())
            lines.append(
                f"  loop {lp['header']}..{lp['end']} (depth {lp['depth']}): {lp['instructions']} instr: {mix}"
            )
        others = len(k["loops"]) - len(shown)
        if others:
            kinds = sorted({lp["kind"] for lp in k["loops"] if not lp["hot"]})
            lines.append(f"  + {others} other loop(s) ({', '.join(kinds)})")
        lines.append("  findings:")
        lines += [f"    - {f['text']}" for f in k["findings"]]
    return "\n".join(lines)
