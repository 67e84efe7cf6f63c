"""The import graph of the project's packages, read with `ast` (nothing is imported), and the two checks
that `estimator/layers.py` asks for: no import cycle, no import from a lower layer into a higher one.

Every `import` statement counts wherever it stands: at module level, inside a function or a class, under
`if TYPE_CHECKING:` or in a `try:`. A function-level import is still a dependency (it runs the first time
the function does, and it is how the cycles of this code base hid); a `TYPE_CHECKING` import is a
dependency of the code's meaning, and a layer that needs a higher layer's type to be read has the same
design problem as one that calls it. So there is no kind of import the checks skip, and no allow-list.

`from x import y` is an edge to `x.y` when `x.y` is a module of the graph, else to `x` (a name defined
there). An edge to a package is an edge to its `__init__.py`; importing `a.b.c` also runs `a/__init__.py`
and `a/b/__init__.py`, but those edges are not drawn: a package's `__init__` that imports its own modules
would otherwise make every module of it a cycle. An import by a computed name
(`importlib.import_module(name)`: estimator/cli/main.py finds its modes so) is not seen.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path


@dataclass(frozen=True)
class Edge:
    """`source` imports `target` at `path`:`line` (both dotted module names)."""

    source: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target} ({self.path}:{self.line})"


def modules_under(root: Path, packages: list[str]) -> dict[str, tuple[Path, bool]]:
    """{dotted name: (file, is a package)} of every module of `packages` (folders under `root` with an
    `__init__.py`; a folder without one is left out, as Python could not import it by that name)."""
    found: dict[str, tuple[Path, bool]] = {}
    for package in packages:
        top = root / package
        if not (top / "__init__.py").is_file():
            continue
        for path in sorted(top.rglob("*.py")):
            rel = path.relative_to(root).with_suffix("")
            parts = list(rel.parts)
            if any(not (root.joinpath(*parts[:i]) / "__init__.py").is_file() for i in range(1, len(parts))):
                continue  # a folder without __init__.py (data, fixtures) is no package
            is_package = parts[-1] == "__init__"
            if is_package:
                parts = parts[:-1]
            found[".".join(parts)] = (path, is_package)
    return found


def _resolve_relative(module: str, is_package: bool, level: int, name: str | None) -> str:
    """The absolute name of `from .{level}name import ...` written in `module`."""
    base = module.split(".") if is_package else module.split(".")[:-1]
    if level > 1:
        base = base[: len(base) - (level - 1)]
    return ".".join([*base, name] if name else base)


def _owner(name: str, known: set[str]) -> str | None:
    """The longest module of `known` that `name` is or lies in (`a.b.f` -> `a.b`), None when outside."""
    parts = name.split(".")
    for i in range(len(parts), 0, -1):
        candidate = ".".join(parts[:i])
        if candidate in known:
            return candidate
    return None


def imports_of(module: str, source: str, is_package: bool, known: set[str], path: str = "") -> list[Edge]:
    """Every import in `source` (the text of `module`) that names a module of `known`, as edges."""
    edges: list[Edge] = []
    for node in ast.walk(ast.parse(source, filename=path or module)):
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = (_resolve_relative(module, is_package, node.level, node.module) if node.level
                    else node.module or "")
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                targets.append(sub if sub in known else base)
        for target in targets:
            owner = _owner(target, known)
            if owner is None or owner == module:
                continue  # outside the graph (stdlib, third party), or a module importing itself
            edge = Edge(module, owner, path, node.lineno)
            if edge not in edges:  # `from x import a, b` is one edge
                edges.append(edge)
    return sorted(edges, key=lambda e: (e.line, e.target))


def import_graph(root: Path, packages: list[str]) -> list[Edge]:
    """The edges among the modules of `packages` under `root`, in file and line order."""
    found = modules_under(root, packages)
    known = set(found)
    edges: list[Edge] = []
    for name, (path, is_package) in found.items():
        rel = str(path.relative_to(root))
        edges.extend(imports_of(name, path.read_text(encoding="utf-8"), is_package, known, rel))
    return edges


def cycles(edges: list[Edge]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan's algorithm, iterative), each
    as a sorted list of module names; a self-import is not drawn (`imports_of` drops it)."""
    graph: dict[str, list[str]] = {}
    for e in edges:
        graph.setdefault(e.source, []).append(e.target)
        graph.setdefault(e.target, [])
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    found: list[list[str]] = []
    counter = 0
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = low[start] = counter
        counter += 1
        stack.append(start)
        on_stack.add(start)
        while work:
            node, children = work[-1]
            child = next(children, None)
            if child is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        top = stack.pop()
                        on_stack.discard(top)
                        component.append(top)
                        if top == node:
                            break
                    if len(component) > 1:
                        found.append(sorted(component))
            elif child not in index:
                index[child] = low[child] = counter
                counter += 1
                stack.append(child)
                on_stack.add(child)
                work.append((child, iter(graph[child])))
            elif child in on_stack:
                low[node] = min(low[node], index[child])
    return sorted(found)


def cycle_path(edges: list[Edge], component: list[str]) -> list[Edge]:
    """One closed walk through `component` (the edges of a shortest cycle from its first module), so a
    report names the files and lines to change, not only the modules."""
    members = set(component)
    out: dict[str, list[Edge]] = {}
    for e in edges:
        if e.source in members and e.target in members:
            out.setdefault(e.source, []).append(e)
    start = component[0]
    # breadth-first from start back to start
    parents: dict[str, Edge] = {}
    frontier = [start]
    seen = {start}
    while frontier:
        nxt = []
        for node in frontier:
            for e in out.get(node, []):
                if e.target == start:
                    walk = [e]
                    while walk[0].source != start:
                        walk.insert(0, parents[walk[0].source])
                    return walk
                if e.target not in seen:
                    seen.add(e.target)
                    parents[e.target] = e
                    nxt.append(e.target)
        frontier = nxt
    return []


def layer_of(module: str, layers: Sequence[tuple[str, Sequence[str]]]) -> int | None:
    """The index in `layers` of the layer that names `module`, None when none does. A prefix names the
    module itself and the modules under it, the longest one wins; `X.__init__` names the package X alone
    (its own `__init__.py`, not its modules)."""
    best: tuple[int, int] | None = None  # (prefix length, layer index)
    for i, (_, prefixes) in enumerate(layers):
        for prefix in prefixes:
            if prefix == f"{module}.__init__":
                return i
            covers = module == prefix or module.startswith(prefix + ".")
            if covers and (best is None or len(prefix) > best[0]):
                best = (len(prefix), i)
    return None if best is None else best[1]


def upward(edges: list[Edge], layers: Sequence[tuple[str, Sequence[str]]]) -> list[Edge]:
    """The edges from a module into a module of a higher layer."""
    return [e for e in edges
            if (s := layer_of(e.source, layers)) is not None and (t := layer_of(e.target, layers)) is not None
            and t > s]


def unplaced(modules: Iterable[str], layers: Sequence[tuple[str, Sequence[str]]]) -> list[str]:
    """The modules that no layer names."""
    return [m for m in modules if layer_of(m, layers) is None]
