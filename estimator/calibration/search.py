"""The search both calibrations use: a small, dependency-free Nelder-Mead, the seeded row sample and the
3-significant-digit rounding of what is printed and written."""

from __future__ import annotations

import numpy as np


def nelder_mead(f, x0: np.ndarray, step: float = 0.2, iters: int = 400, tol: float = 1e-6):
    """Minimize f from x0 (a small, dependency-free Nelder-Mead)."""
    pts = [np.array(x0, float)] + [np.array(x0, float) + step * np.eye(len(x0))[i] for i in range(len(x0))]
    vals = [f(p) for p in pts]
    for _ in range(iters):
        order = np.argsort(vals)
        pts, vals = [pts[i] for i in order], [vals[i] for i in order]
        if vals[-1] - vals[0] < tol:
            break
        c = np.mean(pts[:-1], axis=0)
        xr = c + (c - pts[-1])
        fr = f(xr)
        if fr < vals[0]:
            xe = c + 2 * (c - pts[-1])
            fe = f(xe)
            pts[-1], vals[-1] = (xe, fe) if fe < fr else (xr, fr)
        elif fr < vals[-2]:
            pts[-1], vals[-1] = xr, fr
        else:
            xc = c + 0.5 * (pts[-1] - c)
            fc = f(xc)
            if fc < vals[-1]:
                pts[-1], vals[-1] = xc, fc
            else:
                pts = [pts[0]] + [pts[0] + 0.5 * (p - pts[0]) for p in pts[1:]]
                vals = [vals[0]] + [f(p) for p in pts[1:]]
    i = int(np.argmin(vals))
    return pts[i], vals[i]


def rounded(consts: dict) -> dict:
    return {k: float(f"{v:.3g}") for k, v in consts.items()}


def sample(n: int, size: int, seed: int) -> np.ndarray:
    idx = np.zeros(n, bool)
    idx[np.random.default_rng(seed).choice(n, min(size, n), replace=False)] = True
    return idx



