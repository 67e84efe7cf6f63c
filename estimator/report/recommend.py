"""Recommendations (`--recommend`): every registered recommender run on a Context, and which of their
what-ifs are worth showing (estimator/report/recommendation.py says what a recommendation is and how its
gain is counted).

The recommenders register on import: the model-level ones beside the registry (recommendation.py), the
kernel-level ones (findings.py) and the serving ones (serve_recommend.py). This module imports them all,
and none of them imports this one: the registry sits below its recommenders, the list of them above.
(Registration order, the order of `RECOMMENDERS`: model level, kernel level, serving.)
"""

from __future__ import annotations

from collections.abc import Iterable

from estimator.report import findings, serve_recommend  # noqa: F401  (register their recommenders)
from estimator.report.recommendation import BEST_ONLY, RECOMMENDERS, Context, Recommendation, RecommendError

__all__ = ["DEFAULT_THRESHOLD", "Context", "considered", "recommend", "shown"]

DEFAULT_THRESHOLD = 0.02  # a recommendation must save at least 2% of the total estimate


def considered(ctx: Context, only: Iterable[str] | None = None) -> list[Recommendation]:
    """Every what-if the registered recommenders estimated, whatever its gain, best first."""
    ctx.total_s  # noqa: B018  (raises for a symbolic base, before any what-if runs)
    names = list(only) if only is not None else list(RECOMMENDERS)
    unknown = [n for n in names if n not in RECOMMENDERS]
    if unknown:
        raise RecommendError(f"unknown recommender {unknown[0]!r}; choose from {', '.join(RECOMMENDERS)}")
    found = [Recommendation(**{**vars(rec), "recommender": name}) for name in names
             for rec in RECOMMENDERS[name](ctx)]
    return sorted(found, key=lambda r: (-r.gain_pct, r.action))


def shown(found: Iterable[Recommendation], total_s: float, threshold: float = DEFAULT_THRESHOLD
          ) -> list[Recommendation]:
    """The recommendations worth showing: gain > 0 and >= threshold x its metric's base (for the model's
    estimate: the total, `total_s`); of a BEST_ONLY recommender's, only the largest."""
    if threshold < 0:
        raise RecommendError(f"recommendation threshold {100 * threshold:g}%: must be >= 0")
    keep, seen = [], set()
    for r in sorted(found, key=lambda r: -r.gain_pct):
        big = r.gain_s >= threshold * total_s if r.metric == "estimate_s" else r.gain_pct >= 100 * threshold
        if r.gain_s > 0 and big and r.recommender not in seen:
            keep.append(r)
            if r.recommender in BEST_ONLY:
                seen.add(r.recommender)
    return keep


def recommend(ctx: Context, threshold: float = DEFAULT_THRESHOLD,
              only: Iterable[str] | None = None) -> list[Recommendation]:
    """Every registered recommender's findings with gain >= threshold x the total, best first."""
    return shown(considered(ctx, only), ctx.total_s, threshold)
