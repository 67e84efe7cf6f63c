"""Where the cost model changes regime along one free dim: per distinct kernel, the dim value where its
limiter changes (memory -> compute, launch -> memory...), and for the whole model where attention time
overtakes MLP time and where compute-limited time overtakes memory-limited time.

Every kernel's time is a Max of terms (compute per unit, memory, launch floor), each a polynomial or a
rational function of the free dims. Along one dim x (the others fixed) the Max switches only at roots of
the pairwise differences of its arguments: those roots, found with sympy (`Poly.nroots`), cut the x axis
into intervals on which every Max resolves to one argument, so every total is a polynomial there and its
roots are found exactly too. A non-polynomial term (floor/ceiling from tile quantization) falls back to
sampling plus bisection. Every crossover reported is checked numerically just below and just above it
(with the true Max, not the resolved piece) and dropped if the sides do not differ.

What counts as attention and as MLP (node names follow torch's exporter scopes; HF-style names):
- attention: kernels of kind "attention" (fused Attention / MultiHeadAttention / GroupQueryAttention),
  and kernels whose node names have a scope segment containing "attn" or "attention" (`/self_attn/`,
  `/attn/`, `/attention/`, `/SelfAttention/`...). This includes the Q/K/V/O projections and RoPE.
- attention core: the attention kernels that read no weight (initializer): scores, softmax, P.V, RoPE,
  the GQA expand and the head reshapes; what a fused FlashAttention kernel replaces. Projections and
  their bias adds read weights and are left out.
- MLP: kernels whose node names have a scope segment `mlp`, `ffn`, `feed_forward`/`feedforward`,
  `fc`, `fc1`, `fc2`, `c_fc`, `intermediate`, `dense_h_to_4h`/`dense_4h_to_h`, or BERT's FFN output
  scope (an `output` segment right after a layer segment such as `layer.3`), unless already attention.
- neither ("other"): norms, residual adds, embeddings, the LM head. A fused kernel whose nodes disagree
  on their scope is "other" too.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import sympy

from estimator.estimate import Result
from estimator.ir import Expr, dim
from estimator.kernel import Kernel
from estimator.pricing.price import Timing
from estimator.pricing.units import CO_LIMITING, dominant_index

HI = float(2**31)  # dims are int32 on every runtime: no crossover beyond
LO = 1.0  # dims are positive integers
REL = 1e-6  # the numeric check looks this far (relative) on each side of a crossover

_ATTN_SEGMENT = re.compile(r"attn|attention", re.IGNORECASE)
_MLP_SEGMENT = re.compile(r"(mlp|ffn|feed_?forward|fc\d*|c_fc|intermediate|dense_h_to_4h|dense_4h_to_h)",
                          re.IGNORECASE)
_LAYER_INDEX = re.compile(r"\.\d+(?=/)")
_LAYER_OUTPUT = re.compile(r"/(layer|layers|h|block|blocks)\.\d+/output/", re.IGNORECASE)


def scope_of(name: str) -> str:
    """"attention", "mlp" or "other" for one node name (see the module docstring)."""
    segments = [s for s in name.split("/") if s][:-1]  # the last segment is the op itself
    if any(_ATTN_SEGMENT.search(s) for s in segments):
        return "attention"
    if any(_MLP_SEGMENT.fullmatch(s) for s in segments) or _LAYER_OUTPUT.search(name):
        return "mlp"
    return "other"


def family_name(name: str) -> str:
    """The name with layer indices starred (`/model/layers.*/mlp/...`): groups of identical kernels in
    different layers that do not share a signature are shown on one line."""
    return _LAYER_INDEX.sub(".*", name)


def kernel_scope(kernel: Kernel) -> str:
    if kernel.kind == "attention":
        return "attention"
    scopes = {scope_of(n.name) for n in kernel.nodes} or {"other"}
    return scopes.pop() if len(scopes) == 1 else "other"


def _reads_weight(result: Result, kernel: Kernel) -> bool:
    tensors = result.graph.tensors
    return any(t in tensors and tensors[t].is_weight for n in kernel.nodes for t in n.inputs if t)


@dataclass(frozen=True)
class Group:
    """Kernels that price alike (one signature) and sit in the same scope, with their call count."""

    name: str  # the first kernel's name
    kind: str
    op: str
    scope: str  # "attention", "mlp" or "other"
    core: bool  # attention that reads no weight
    count: int
    timing: Timing
    flops: Expr
    dram_bytes: Expr
    kernel: Kernel | None = None  # the first kernel of the group (its tile plan, for point pricing)


def groups(result: Result) -> list[Group]:
    out: dict[Any, list] = {}
    for p in result.kernels:
        k = p.kernel
        scope = kernel_scope(k)
        core = scope == "attention" and not _reads_weight(result, k)
        key = (k.signature, scope, core)
        if key in out:
            out[key][0] += 1
        else:
            out[key] = [1, k, p.timing, scope, core]
    return [Group(k.name, k.kind, k.op, scope, core, n, t, k.work.total_flops, k.work.dram_bytes, k)
            for n, k, t, scope, core in out.values()]


# ---------------------------------------------------------------------------------------------------
# Univariate sympy machinery


def real_symbol(name: str) -> sympy.Symbol:
    """The dim as a positive real (sympy drops non-integer roots of an integer symbol)."""
    return sympy.Symbol(name, positive=True)


def max_args(expr: Expr) -> list[Expr]:
    e = sympy.sympify(expr)
    return list(e.args) if isinstance(e, sympy.Max) else [e]


def _polynomial(expr: Expr, x: sympy.Symbol) -> sympy.Poly | None:
    """The numerator of `expr` as a polynomial in x with numeric coefficients, or None."""
    num, _ = sympy.fraction(sympy.together(expr))
    try:
        poly = sympy.Poly(num, x)
    except sympy.PolynomialError:
        return None
    if not all(c.is_number for c in poly.all_coeffs()):
        return None
    return poly


def roots_between(expr: Expr, x: sympy.Symbol, lo: float, hi: float) -> list[float]:
    """Real roots of expr(x) = 0 with lo < x < hi, ascending."""
    expr = sympy.sympify(expr)
    if not expr.has(x):
        return []
    poly = _polynomial(expr, x)
    if poly is None:
        return _numeric_roots(sympy.lambdify([x], expr, "numpy"), lo, hi)
    if poly.degree() <= 0:
        return []
    if poly.degree() == 1:  # most differences are linear: no need for the general root finder
        c1, c0 = (float(c) for c in poly.all_coeffs())
        root = -c0 / c1
        return [root] if lo < root < hi else []
    found = []
    for r in poly.nroots(n=15, maxsteps=200):
        re_, im = (float(v) for v in r.as_real_imag())
        if abs(im) <= 1e-9 * max(1.0, abs(re_)) and lo < re_ < hi:
            found.append(re_)
    return sorted(found)


def _numeric_roots(fn: Callable, lo: float, hi: float, samples: int = 4000) -> list[float]:
    xs = np.geomspace(lo, hi, samples)
    ys = np.broadcast_to(np.asarray(fn(xs), dtype=float), xs.shape)
    found = []
    for i in np.nonzero(np.sign(ys[:-1]) * np.sign(ys[1:]) < 0)[0]:
        a, b = xs[i], xs[i + 1]
        fa = float(fn(a))
        for _ in range(80):
            m = 0.5 * (a + b)
            fm = float(fn(m))
            if (fm < 0) == (fa < 0):
                a, fa = m, fm
            else:
                b = m
        found.append(0.5 * (a + b))
    return found


def _intervals(breaks: Sequence[float], lo: float, hi: float) -> list[tuple[float, float]]:
    edges = [lo, *breaks, hi]
    return [(a, b) for a, b in zip(edges[:-1], edges[1:], strict=True) if b > a]


def _dedupe(values: Sequence[float]) -> list[float]:
    out: list[float] = []
    for v in sorted(values):
        if not out or v > out[-1] * (1 + 1e-9):
            out.append(v)
    return out


@dataclass
class Family:
    """One group's competing terms along x: (limiter label, expression) pairs; its time is their max."""

    group: Group
    labels: list[str]
    exprs: list[Expr]  # in the real symbol x, other dims substituted
    breaks: list[float] = field(default_factory=list)
    # where the limiter's label may change: a term within CO_LIMITING of another's (pricing/units.py)
    label_breaks: list[float] = field(default_factory=list)


class Piecewise:
    """Every group's time as a function of one dim, cut where its Max switches argument.

    which="estimate" uses the estimate's terms (limiters compute / memory / launch); which="bound" uses
    the bound's (compute at peak, memory at peak)."""

    def __init__(self, group_list: Sequence[Group], x_name: str, fixed: Mapping[str, int | float],
                 which: str = "estimate", lo: float = LO, hi: float = HI) -> None:
        self.x = real_symbol(x_name)
        self.lo, self.hi = lo, hi
        # the estimate's labels by the limiter's rule; the bound's where its compute = memory (the ridge)
        self.tolerance = CO_LIMITING if which == "estimate" else 0.0
        sub = {dim(x_name): self.x, **{dim(k): sympy.sympify(v) for k, v in fixed.items()}}
        self.families = []
        for g in group_list:
            t = g.timing
            terms = dict(t.terms) if which == "estimate" else {"compute": t.compute_s, "memory": t.memory_s}
            labels, exprs = [], []
            for label, term in terms.items():
                for a in max_args(sympy.sympify(term).xreplace(sub)):
                    labels.append(label)
                    exprs.append(a)
            stray = set().union(*(e.free_symbols for e in exprs)) - {self.x}
            if stray:
                raise ValueError(f"{g.name}: dims {sorted(map(str, stray))} are neither {x_name} nor fixed")
            fam = Family(g, labels, exprs)
            fam.breaks = self._breaks(fam)
            fam.label_breaks = self._label_breaks(fam)
            self.families.append(fam)
        flat = [e for f in self.families for e in f.exprs]
        self._fn = sympy.lambdify([self.x], flat, "numpy")
        self._slices = np.cumsum([0] + [len(f.exprs) for f in self.families])

    def _breaks(self, fam: Family) -> list[float]:
        found = []
        for i in range(len(fam.exprs)):
            for j in range(i + 1, len(fam.exprs)):
                found += roots_between(fam.exprs[i] - fam.exprs[j], self.x, self.lo, self.hi)
        return _dedupe(found)

    def _label_breaks(self, fam: Family) -> list[float]:
        """Where one label's term is `tolerance` below another's: the limiter's rule changes there."""
        keep = 1 - self.tolerance
        found = []
        for i in range(len(fam.exprs)):
            for j in range(len(fam.exprs)):
                if fam.labels[i] != fam.labels[j]:
                    found += roots_between(fam.exprs[i] - keep * fam.exprs[j], self.x, self.lo, self.hi)
        return _dedupe(found)

    def labels_at(self, xs: np.ndarray) -> list[list[str]]:
        """Per family, its limiter's label at each of xs, by the limiter's rule (pricing/units.py
        `dominant`: the first label, in the terms' order, within `tolerance` of the largest)."""
        out = []
        for f, v in zip(self.families, self.values(xs), strict=True):
            names = list(dict.fromkeys(f.labels))
            per = np.stack([v[[k for k, lab in enumerate(f.labels) if lab == n]].max(axis=0) for n in names])
            out.append([names[k] for k in dominant_index(per, tolerance=self.tolerance)])
        return out

    def values(self, xs: np.ndarray) -> list[np.ndarray]:
        """Per family, its arguments at xs: an array (n_args, len(xs))."""
        xs = np.asarray(xs, dtype=float)
        flat = [np.broadcast_to(np.asarray(v, dtype=float), xs.shape) for v in self._fn(xs)]
        return [np.stack(flat[a:b]) for a, b in zip(self._slices[:-1], self._slices[1:], strict=True)]

    def winners(self, xs: np.ndarray) -> list[np.ndarray]:
        return [np.argmax(v, axis=0) for v in self.values(xs)]

    def breaks(self, families: Sequence[Family] | None = None) -> list[float]:
        """Where any of `families` changes its winning term or its limiter's label."""
        fams = self.families if families is None else families
        return _dedupe([b for f in fams for b in (*f.breaks, *f.label_breaks)])

    # --- per-family limiter changes -----------------------------------------------------------------

    def transitions(self, fam: Family) -> list[tuple[float, str, str]]:
        """(x, limiter below, limiter above) wherever this family's limiter changes, checked on both sides."""
        idx = self.families.index(fam)
        out = []
        for b in fam.label_breaks:
            lb, la = self.labels_at(np.array([b * (1 - REL), b * (1 + REL)]))[idx]
            if lb != la:
                out.append((b, lb, la))
        return out

    # --- totals -------------------------------------------------------------------------------------

    def total(self, at: float, weight: Callable[[Family, str], float]) -> Expr:
        """The weighted total on the piece containing `at`: sum of weight * count * winning argument."""
        win = self.winners(np.array([at]))
        labels = self.labels_at(np.array([at]))
        terms = []
        for f, w, lab in zip(self.families, win, labels, strict=True):
            k = int(w[0])
            c = weight(f, lab[0])
            if c:
                terms.append(c * f.group.count * f.exprs[k])
        return sympy.Add(*terms)

    def numeric(self, xs: np.ndarray, weight: Callable[[Family, str], float]) -> np.ndarray:
        """The weighted total evaluated with the true Max (no piece resolution)."""
        xs = np.asarray(xs, dtype=float)
        out = np.zeros(xs.shape)
        for f, v, labels in zip(self.families, self.values(xs), self.labels_at(xs), strict=True):
            w = np.array([weight(f, label) for label in labels])
            out += w * f.group.count * np.max(v, axis=0)
        return out

    def pieces(self, weight: Callable[[Family, str], float] = lambda f, label: 1.0
               ) -> list[tuple[float, float, Expr]]:
        """(from, to, polynomial) pieces of the weighted total; adjacent equal pieces merged."""
        relevant = [f for f in self.families if any(weight(f, label) for label in set(f.labels))]
        out: list[tuple[float, float, Expr]] = []
        for a, b in _intervals(self.breaks(relevant), self.lo, self.hi):
            expr = sympy.expand(self.total(math.sqrt(a * b), weight))
            if out and out[-1][2] == expr:
                out[-1] = (out[-1][0], b, out[-1][2])
            else:
                out.append((a, b, expr))
        return out

    def crossings(self, weight: Callable[[Family, str], float]) -> list[tuple[float, float, float]]:
        """(x, h below, h above) where the weighted total h changes sign, checked on both sides."""
        relevant = [f for f in self.families if any(weight(f, label) for label in set(f.labels))]
        candidates = []
        for a, b in _intervals(self.breaks(relevant), self.lo, self.hi):
            candidates += roots_between(self.total(math.sqrt(a * b), weight), self.x, a, b)
            if b < self.hi:
                candidates.append(b)  # h may jump across a break (a kernel changing limiter group)
        out = []
        for c in _dedupe(candidates):
            below, above = self.numeric(np.array([c * (1 - REL), c * (1 + REL)]), weight)
            if below * above < 0:
                out.append((c, float(below), float(above)))
        return out


# ---------------------------------------------------------------------------------------------------
# Asymptotics


def _strip_rounding(e: Expr) -> Expr:
    # NB: floor(y) and ceiling(y) grow like y; for leading terms the rounding does not matter.
    return e.replace(lambda n: isinstance(n, (sympy.floor, sympy.ceiling)), lambda n: n.args[0])


def _growth(e: Expr, x: sympy.Symbol, others_at: Mapping[sympy.Symbol, int]) -> tuple[int, float] | None:
    num, den = sympy.fraction(sympy.together(e))
    try:
        pn, pd = sympy.Poly(num, x), sympy.Poly(den, x)
    except sympy.PolynomialError:
        return None
    lc = sympy.sympify(pn.LC() / pd.LC()).xreplace(others_at)
    if not lc.is_number:
        return None
    return pn.degree() - pd.degree(), float(lc)


def _pick_largest(args: Sequence[Expr], x: sympy.Symbol, others_at, sign: int) -> Expr:
    growths = [_growth(a, x, others_at) for a in args]
    if any(g is None for g in growths):
        raise ValueError("not a rational function")
    best = max(range(len(args)), key=lambda i: (sign * growths[i][0], sign * growths[i][1]))
    return args[best]


def leading_term(expr: Expr, name: str) -> tuple[Expr, int] | None:
    """(coefficient, degree) of expr's leading term as dim `name` grows, the other dims fixed (they may
    stay symbolic: Max arguments of equal degree are then ranked with the other dims at 1).
    None when expr is not a rational function of the dim."""
    x = real_symbol(name)
    e = _strip_rounding(sympy.sympify(expr).xreplace({dim(name): x}))
    others_at = {s: 1 for s in e.free_symbols if s != x}
    try:
        e = e.replace(lambda n: isinstance(n, sympy.Max), lambda n: _pick_largest(n.args, x, others_at, 1))
        e = e.replace(lambda n: isinstance(n, sympy.Min), lambda n: _pick_largest(n.args, x, others_at, -1))
    except ValueError:
        return None
    num, den = sympy.fraction(sympy.together(e))
    try:
        pn, pd = sympy.Poly(num, x), sympy.Poly(den, x)
    except sympy.PolynomialError:
        return None
    if pn.is_zero:
        return sympy.Integer(0), 0
    return sympy.simplify(pn.LC() / pd.LC()), pn.degree() - pd.degree()


# ---------------------------------------------------------------------------------------------------
# Crossovers of a Result along one dim


@dataclass(frozen=True)
class Crossover:
    arch: str
    dim: str
    value: float  # the real root; the dim is an integer, so the change shows from ceil(value) on
    fixed: Mapping[str, int]  # the other dims
    # "limiter" (one distinct kernel), "attention_vs_mlp", "attention_core_vs_mlp" or "compute_vs_memory"
    what: str
    subject: str  # the kernel's name, or "model"
    before: str  # e.g. "memory" / "mlp"
    after: str  # e.g. "compute" / "attention"
    count: int = 1  # kernels in the group (limiter crossovers)
    kind: str = ""
    bound_value: float | None = None  # limiter crossovers: where the bound's compute and memory meet
    check: Mapping[str, float] = field(default_factory=dict)  # numeric values just below / above

    def message(self) -> str:
        at = f"{self.dim} = {fmt_value(self.value)}"
        if self.what == "limiter":
            bound = "" if self.bound_value is None else f" (bound: {fmt_value(self.bound_value)})"
            return (f"{self.before} -> {self.after} above {at}{bound}: {self.count} x {self.subject} "
                    f"[{self.kind}]")
        nouns = {"attention": "attention", "attention core": "attention core", "mlp": "MLP",
                 "compute": "compute-limited", "memory": "memory-limited"}
        return f"{nouns[self.after]} time exceeds {nouns[self.before]} time above {at} on {self.arch}"

    def to_json(self) -> dict[str, Any]:
        return {"arch": self.arch, "dim": self.dim, "value": self.value, "from_int": _from_int(self.value),
                "fixed": dict(self.fixed), "what": self.what, "subject": self.subject, "before": self.before,
                "after": self.after, "count": self.count, "kind": self.kind, "bound_value": self.bound_value,
                "check": dict(self.check), "message": self.message()}


def _from_int(v: float) -> int:
    return math.floor(v) + 1


def fmt_value(v: float) -> str:
    return f"{v:,.0f}" if v >= 100 else f"{v:.3g}"


def _scope_weight(a: str, b: str) -> Callable[[Family, str], float]:
    """+1 for family class a, -1 for class b (classes: attention, attention core, mlp)."""
    def cls(f: Family, name: str) -> bool:
        return f.group.core if name == "attention core" else f.group.scope == name

    return lambda f, label: (1.0 if cls(f, a) else 0.0) - (1.0 if cls(f, b) else 0.0)


def _limiter_weight(a: str, b: str) -> Callable[[Family, str], float]:
    return lambda f, label: (1.0 if label == a else 0.0) - (1.0 if label == b else 0.0)


def crossovers(result: Result, name: str, fixed: Mapping[str, int],
               group_list: Sequence[Group] | None = None) -> list[Crossover]:
    """Every crossover along dim `name`, the other free dims at `fixed`."""
    gl = list(group_list) if group_list is not None else groups(result)
    arch = result.hw.name
    est = Piecewise(gl, name, fixed, "estimate")
    bnd = Piecewise(gl, name, fixed, "bound")
    out = []
    whole = (("attention_vs_mlp", _scope_weight, "attention", "mlp"),
             ("attention_core_vs_mlp", _scope_weight, "attention core", "mlp"),
             ("compute_vs_memory", _limiter_weight, "compute", "memory"))
    for what, make, a, b in whole:
        for x, below, above in est.crossings(make(a, b)):
            after, before = (a, b) if above > 0 else (b, a)
            sign = 1.0 if above > 0 else -1.0  # the check holds time(after) - time(before): - below, + above
            out.append(Crossover(arch, name, x, dict(fixed), what, "model", before, after,
                                 check={"x_below": x * (1 - REL), "diff_below": sign * below,
                                        "x_above": x * (1 + REL), "diff_above": sign * above}))
    for fam, bfam in zip(est.families, bnd.families, strict=True):
        bound_x = [x for x, _, _ in bnd.transitions(bfam)]
        for x, before, after in est.transitions(fam):
            g = fam.group
            near = min(bound_x, key=lambda v: abs(math.log(v / x)), default=None)
            out.append(Crossover(arch, name, x, dict(fixed), "limiter", g.name, before, after, g.count,
                                 g.kind, near, check={"x_below": x * (1 - REL), "x_above": x * (1 + REL)}))
    return out


def format_crossovers(items: Sequence[Crossover], header: str, detail: int = 12) -> list[str]:
    """Text lines: whole-model crossovers, then limiter changes per distinct kernel (those into or out of
    compute listed one by one, launch <-> memory changes summarised)."""
    lines = [header]
    model = [c for c in items if c.what != "limiter"]
    kernels = sorted((c for c in items if c.what == "limiter"), key=lambda c: c.value)
    lines.append("  whole model (estimate):")
    if not model:
        lines.append("    no crossover of attention vs MLP or compute- vs memory-limited time for dims >= 1")
    lines += [f"    {c.message()}" for c in model]
    main = _merge_layers([c for c in kernels if "compute" in (c.before, c.after)])
    launch = _merge_layers([c for c in kernels if "compute" not in (c.before, c.after)])
    lines.append("  limiter changes per distinct kernel (estimate terms; where the bound's compute = memory "
                 "in brackets):")
    if not kernels:
        lines.append("    none for dims >= 1")
    for c in main[:detail]:
        lines.append(f"    {c.message()}")
    if len(main) > detail:
        lines.append(f"    ... {len(main) - detail} more (--json lists all)")
    if len(launch) == 1:
        lines.append(f"    {launch[0].message()}")
    elif launch:
        first, last = launch[0], launch[-1]
        lines.append(f"    launch <-> memory: {len(launch)} distinct kernels change between {first.dim} = "
                     f"{fmt_value(first.value)} ({_short(first.subject)}) and {fmt_value(last.value)} "
                     f"({_short(last.subject)})")
    return lines


def _merge_layers(items: Sequence[Crossover]) -> list[Crossover]:
    """Crossovers of the same kernel in different layers (same starred name, same values) as one."""
    merged: dict[tuple, Crossover] = {}
    for c in items:
        key = (family_name(c.subject), c.kind, c.before, c.after, f"{c.value:.6g}",
               f"{c.bound_value or 0:.6g}")
        if key in merged:
            merged[key] = replace(merged[key], count=merged[key].count + c.count)
        else:
            merged[key] = replace(c, subject=key[0])
    return sorted(merged.values(), key=lambda c: c.value)


def _short(name: str, width: int = 40) -> str:
    return name if len(name) <= width else "..." + name[-(width - 3):]
