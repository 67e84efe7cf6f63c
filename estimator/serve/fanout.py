"""Many searches at once: models x GPUs x workloads, one task each, run serially or on Dask's distributed
scheduler (a LocalCluster by default, or the scheduler at `--scheduler ADDRESS` to scale out).

A task is a frozen record of plain values (`SearchTask`: the model name, the descriptor's path, the
pricing choices, the workload, the budget and the SLA), so it pickles to any worker; `run_search(task)`
builds everything from it and returns the rows as plain dicts (estimator/serve/search.py (Row.to_json)). The
same function runs serially and on the cluster, so the results are identical (the pricing is
deterministic and a worker shares no state with another). Tasks are independent: Dask schedules them
(no hand-made pool); the rows come back in the order of the tasks.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

LOCAL_WORKERS = 2


@dataclass(frozen=True)
class SearchTask:
    model: str
    gpu: str  # the name the rows carry
    hw_path: str  # the descriptor file (hwdesc.load)
    precision: str | None
    kv_precision: str | None
    pipeline: str
    framework: str
    tiling: bool
    isl: int
    osl: int
    budget: int
    ttft_s: float | None
    tpot_s: float | None
    disagg: bool = True
    batching: str = "inflight"


def run_search(task: SearchTask) -> list[dict]:
    """Every priced deployment of `task` (SLA met or not), as plain dicts."""
    import hwdesc
    from estimator.pricing import memo
    from estimator.serve.frameworks import framework
    from estimator.serve.search import Sla, price_model, search_agg, search_disagg
    from estimator.serve.serving import Workload
    from estimator.serve.steps import Options

    # every task starts from the same process state: the pricing memo of earlier tasks (in this process,
    # or another worker's history) is dropped, so a task's rows never depend on which tasks ran before it
    # in the same process (NB: a 60-search study on a 2-worker cluster once differed from the serial
    # run with the memo kept across tasks; cause not isolated, see tools/bench_search.py)
    memo.clear()
    hw = hwdesc.load(task.hw_path)
    base = Options(hw, 1, task.precision, task.kv_precision, task.pipeline, framework(task.framework),
                   tiling=task.tiling)
    priced = price_model(task.model, base)
    work = Workload(task.isl, task.osl, 1, task.batching)
    sla = Sla(task.ttft_s, task.tpot_s)
    rows = search_agg(priced, task.gpu, work, task.budget, sla)
    if task.disagg:
        rows += search_disagg(priced, task.gpu, work, task.budget, sla)
    out = []
    for r in rows:
        d = r.to_json()
        d["model"] = task.model
        out.append(d)
    if not rows:
        why = dict(priced.refused)
        for layout, dep in priced.built.items():
            if not dep.memory.fits(work.isl, work.osl):
                gb = dep.memory.non_kv_bytes / 1e9
                why[layout.label] = f"does not fit ({gb:.0f} GB per GPU before any KV cache)"
        reasons = "; ".join(f"{label}: {w}" for label, w in sorted(why.items()))
        out.append({"model": task.model, "gpu": task.gpu,
                    "none_fit": reasons or "no TP up to the budget fits"})
    return out


def fan_out(tasks: Sequence[SearchTask], scheduler: str | None = None, local: bool = False,
            workers: int = LOCAL_WORKERS, processes: bool = True) -> list[list[dict]]:
    """`run_search` of every task: on the Dask scheduler at `scheduler`, on a LocalCluster of `workers`
    when `local`, else serially in this process."""
    if scheduler is None and not local:
        return [run_search(t) for t in tasks]
    from dask.distributed import Client, LocalCluster

    if scheduler is not None:
        with Client(scheduler) as client:
            return client.gather(client.map(run_search, list(tasks), pure=False))
    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=processes,
                      dashboard_address=None) as cluster, Client(cluster) as client:
        return client.gather(client.map(run_search, list(tasks), pure=False))
