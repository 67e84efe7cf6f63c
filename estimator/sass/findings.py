"""Plain-words findings about one analysed kernel, each with the number behind it.

Rules (each a small function returning zero or more findings {kind, text, ...numbers}):
- tensor_path: which tensor-core family; mma.sync (HMMA) on an SM whose fast path is wgmma / tcgen05
  caps the kernel at `mma_sync_dense_flops_per_clk_per_sm x sm_count x clock_hz` (hwdesc/sm + the GPU's
  descriptor) out of the descriptor's dense tensor peak for the dtype;
- emulated_fp8: fp8 mma.sync lowered to F2FP unpacks + HMMA (no QMMA/QGMMA/UTCQMMA);
- spills: spill bytes (ptxas or the annotated LDL/STL) and the spill instructions inside hot loops;
- occupancy: CTAs/SM and the limiting resource with its figure; TMEM columns for tcgen05 kernels;
- loop: tensor / MUFU / TMA instructions per iteration of each hot loop;
- knobs: setmaxnreg dropped by ptxas, cluster dims (occupancy an upper bound), block size assumed.
"""

from __future__ import annotations

from estimator.sass.limits import Target

_FAST_PATH = {90: "wgmma", 100: "tcgen05", 103: "tcgen05"}


def findings(report: dict, target: Target, ptxas_warnings: list[str]) -> list[dict]:
    out: list[dict] = []
    for rule in (_tensor_path, _emulated_fp8, _spills, _occupancy, _loops, _knobs):
        out.extend(rule(report, target, ptxas_warnings))
    return out


def listing_findings(report: dict, target: Target) -> list[dict]:
    """The rules that need only instructions (a saved listing has no resource attributes)."""
    out: list[dict] = []
    for rule in (_tensor_path, _emulated_fp8, _spills, _loops):
        out.extend(rule(report, target, []))
    return out


def _tensor_path(r: dict, t: Target, _w) -> list[dict]:
    tensor = r["tensor"]
    if not tensor["ops"]:
        return [{"kind": "tensor_path", "text": "no tensor-core instructions: a CUDA-core kernel"}]
    out = []
    fast = _FAST_PATH.get(t.limits.sm_number)
    if fast in tensor["families"]:
        fast = None  # the kernel does use the fast path; its mma.sync ops are a side path
    for op in tensor["ops"]:
        shape = "x".join(map(str, op["shape"])) if op["shape"] else "shape in a run-time descriptor"
        what = f"{op['opcode']} ({op['family']}, {op['dtype'] or 'dtype not in the SASS'}, {shape})"
        if op["family"] == "mma.sync" and fast and op["dtype"] not in ("fp64",):
            out.append(_mma_sync_cap(op, what, fast, t))
        else:
            extra = f", {op['cta_group']}-CTA" if op["cta_group"] == 2 else ""
            out.append(
                {"kind": "tensor_path", "text": f"{op['count']} x {what}{extra}", "opcode": op["opcode"]}
            )
    return out


def _mma_sync_cap(op: dict, what: str, fast: str, t: Target) -> dict:
    text = f"{what} on {t.sm}: no {fast}"
    finding = {"kind": "tensor_path", "opcode": op["opcode"], "fast_path": fast}
    hw, rate = t.hw, t.limits.mma_sync_dense_flops_per_clk_per_sm
    dtype = "fp16" if op["dtype"] in ("fp8", None) else op["dtype"]  # emulated fp8 runs as fp16 HMMA
    peak = hw.tensor_flops_per_s.get(dtype) if hw is not None else None
    if rate and peak:
        cap = rate * hw.sm_count * hw.clock_hz
        finding["max_fraction_of_peak"] = round(cap / peak, 3)
        text += (
            f"; expect at most ~{100 * cap / peak:.0f}% of the {hw.name} {dtype} peak "
            f"({rate} FLOP/clk/SM x {hw.sm_count} SMs x {hw.clock_hz / 1e9:.2f} GHz = "
            f"{cap / 1e12:.0f} of {peak / 1e12:.0f} TFLOP/s)"
        )
    finding["text"] = text
    return finding


def _emulated_fp8(r: dict, t: Target, _w) -> list[dict]:
    e = r["tensor"]["emulated_fp8"]
    if not e:
        return []
    return [
        {
            "kind": "emulated_fp8",
            **e,
            "text": f"fp8 MMA emulated by {e['conversions']} conversions + {e['hmma']} HMMA on {t.sm} "
            f"(fp8 at tensor-core rate needs wgmma QGMMA or tcgen05 UTCQMMA)",
        }
    ]


def _spills(r: dict, _t, _w) -> list[dict]:
    res = r["resources"]
    out = []
    if res["spill_store_bytes"] or res["spill_load_bytes"]:
        hot = [lp for lp in r["loops"] if lp["hot"] and lp["spill_instructions"]]
        text = (
            f"{res['spill_store_bytes']} B spill stores, {res['spill_load_bytes']} B spill loads per thread "
            f"({res['spill_source']}); {res['spill_instructions']} spill instructions"
        )
        for lp in hot:
            text += f"; {lp['spill_bytes']} B of spill traffic per iteration of the loop at {lp['header']}"
            text += f" ({lp['spill_instructions']} LDL/STL)"
        out.append(
            {
                "kind": "spills",
                "text": text,
                "spill_store_bytes": res["spill_store_bytes"],
                "spill_load_bytes": res["spill_load_bytes"],
                "hot_loop_spill_bytes": sum(lp["spill_bytes"] for lp in hot),
            }
        )
    elif res["stack_bytes"]:
        out.append(
            {"kind": "stack", "text": f"{res['stack_bytes']} B stack frame without spills: local arrays"}
        )
    return out


def _occupancy(r: dict, t: Target, _w) -> list[dict]:
    o, res = r["occupancy"], r["resources"]
    why = {
        "registers": f"registers ({res['registers']}/thread)",
        "shared_memory": f"shared memory ({o['smem_per_cta_bytes']} B/CTA incl. the 1 KB reserve)",
        "warps": f"the {t.limits.warps_per_sm} warps/SM limit",
        "ctas": f"the {t.limits.ctas_per_sm} CTAs/SM limit",
        "barriers": f"named barriers ({res['barriers']}/CTA)",
        "tmem": f"tensor memory ({o['tmem_columns']} of {t.limits.tmem_columns_per_sm} columns/CTA)",
    }[o["limiter"]]
    bound = "at most " if o["upper_bound"] else ""
    text = (
        f"{bound}{o['ctas_per_sm']} CTA/SM ({o['warps_per_sm']} warps, "
        f"{100 * o['occupancy']:.0f}% occupancy) "
        f"with {o['block_threads']} threads/CTA ({o['block_source']}), limited by {why}"
    )
    out = [{"kind": "occupancy", "text": text, "ctas_per_sm": o["ctas_per_sm"], "limiter": o["limiter"]}]
    if o["tmem_columns"] and t.limits.tmem_columns_per_sm:
        n = t.limits.tmem_columns_per_sm // o["tmem_columns"]
        out.append(
            {
                "kind": "tmem",
                "text": f"TMEM: {o['tmem_columns']} of {t.limits.tmem_columns_per_sm} columns "
                f"per CTA -> at most {n} CTAs/SM",
                "ctas_per_sm": n,
            }
        )
    return out


def _loops(r: dict, _t, _w) -> list[dict]:
    out = []
    for lp in r["loops"]:
        if not lp["hot"]:
            continue
        parts = [f"{n} x {op}" for op, n in {**lp["tensor"], **lp["sfu"], **lp["tma"]}.items()]
        parts += [f"{lp['opcodes'][op]} x {op}" for op in ("LDGSTS", "LDSM", "LDTM") if op in lp["opcodes"]]
        what = ", ".join(parts) if parts else "no tensor, MUFU, TMA or async-copy instructions"
        out.append(
            {
                "kind": "loop",
                "header": lp["header"],
                "instructions": lp["instructions"],
                "text": f"loop at {lp['header']}: {lp['instructions']} instructions per iteration, {what} "
                f"(stall sum {lp['stall_cycles']} cycles)",
            }
        )
    return out


def _knobs(r: dict, _t, warnings: list[str]) -> list[dict]:
    out = []
    # NB: ptxas prints C7508 before naming a kernel; it can only concern a kernel without launch bounds
    # (register count unknown at entry) and without EIATTR_REG_RECONFIG (setmaxnreg kept).
    res = r["resources"]
    dropped = any("setmaxnreg" in w and "ignored" in w for w in warnings)
    if dropped and not res["setmaxnreg"] and not res["launch_bounds_threads"]:
        out.append(
            {"kind": "setmaxnreg", "text": "setmaxnreg ignored by ptxas: give __launch_bounds__(threads, 1)"}
        )
    if r["resources"]["cluster_dims"]:
        dims = "x".join(map(str, r["resources"]["cluster_dims"]))
        out.append(
            {
                "kind": "cluster",
                "text": f"cluster {dims}: CTAs/SM is an upper bound (clusters need the GPC "
                f"layout, known only on a device)",
            }
        )
    if r["occupancy"]["block_source"] == "assumed":
        out.append(
            {
                "kind": "block",
                "text": f"block size not in the cubin: assumed {r['occupancy']['block_threads']} "
                f"threads (give --block)",
            }
        )
    return out
