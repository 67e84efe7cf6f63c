"""Pass infrastructure: a pass is `run(graph) -> PassResult(graph, modified)`; a pipeline is a
comma-separated string of registered pass names that parses and prints back the same
(MLIR's pass-manager habit)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from estimator.errors import UserError
from estimator.ir import Graph


@dataclass(frozen=True)
class PassResult:
    graph: Graph
    modified: bool
    refusals: tuple = ()  # fusions the pass considered and refused (passes.graph_edit.Refusal)


PassFn = Callable[[Graph], PassResult]
_PASSES: dict[str, PassFn] = {}


class PipelineError(UserError):
    pass


def register_pass(name: str) -> Callable[[PassFn], PassFn]:
    def deco(fn: PassFn) -> PassFn:
        if name in _PASSES:
            raise RuntimeError(f"pass {name!r} registered twice")
        _PASSES[name] = fn
        return fn

    return deco


def available_passes() -> list[str]:
    return sorted(_PASSES)


@dataclass(frozen=True)
class Pipeline:
    names: tuple[str, ...]

    @classmethod
    def parse(cls, text: str) -> Pipeline:
        names = tuple(p.strip() for p in text.split(",") if p.strip())
        unknown = [n for n in names if n not in _PASSES]
        if unknown:
            raise PipelineError(f"unknown pass {unknown[0]!r}; available: {', '.join(available_passes())}")
        return cls(names)

    def __str__(self) -> str:
        return ",".join(self.names)

    def run(
        self, graph: Graph, after: Callable[[str, PassResult], None] | None = None, verify_each: bool = False
    ) -> Graph:
        """Run each pass in order; `after(name, result)` sees every result (for --print-after and
        --explain); `verify_each` checks the graph's invariants after every pass."""
        if verify_each:
            from passes.verify import verify
        for name in self.names:
            result = _PASSES[name](graph)
            if verify_each:
                verify(result.graph, name)
            if after is not None:
                after(name, result)
            graph = result.graph
        return graph
