"""The layers of estimator/layers.py hold: no import cycle, no import from a lower layer into a higher one.

The import graph is read with `ast` from the sources (tests/importgraph.py says what counts as an
import: every statement, at module level, in a function or under TYPE_CHECKING). The last tests run the
checker on a small made-up package, so that these checks are known to fail when they should.
"""

from __future__ import annotations

from pathlib import Path

import importgraph as ig

from estimator.layers import LAYERS

ROOT = Path(__file__).resolve().parent.parent
# tools/ counts once it is a package (a folder of scripts is no module Python can import by that name)
PACKAGES = ["estimator", "passes", "hwdesc", "models", "tools"]


def _edges() -> list[ig.Edge]:
    return ig.import_graph(ROOT, PACKAGES)


def test_every_module_has_a_layer():
    missing = ig.unplaced(ig.modules_under(ROOT, PACKAGES), LAYERS)
    assert not missing, f"place these modules in a layer of estimator/layers.py: {', '.join(missing)}"


def test_a_prefix_is_named_once():
    prefixes = [p for _, names in LAYERS for p in names]
    assert len(prefixes) == len(set(prefixes))


def test_no_import_cycle():
    edges = _edges()
    found = ig.cycles(edges)
    lines = [f"{' <-> '.join(c)}: " + "; ".join(str(e) for e in ig.cycle_path(edges, c)) for c in found]
    assert not found, f"{len(found)} import cycles:\n" + "\n".join(lines)


def test_no_import_goes_up_a_layer():
    bad = ig.upward(_edges(), LAYERS)
    lines = [f"{e} [{LAYERS[ig.layer_of(e.source, LAYERS)][0]} -> {LAYERS[ig.layer_of(e.target, LAYERS)][0]}]"
             for e in bad]
    assert not bad, f"{len(bad)} imports from a lower layer into a higher one:\n" + "\n".join(lines)


# ---- the checker itself, on a made-up package --------------------------------------------------------

FAKE = {
    "pkg/__init__.py": "",
    "pkg/low.py": "import os\n\ndef f():\n    from pkg import high  # upward, inside a function\n",
    "pkg/high.py": "from pkg.low import f\nfrom . import mid\n",
    "pkg/mid.py": "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from .high import g\n",
    "pkg/sub/__init__.py": "",
    "pkg/sub/leaf.py": "from ..low import f\nfrom pkg.sub import leaf\n",
}
FAKE_LAYERS = (("low", ("pkg.low", "pkg.sub", "pkg.__init__")), ("high", ("pkg.high", "pkg.mid")))


def _fake(tmp_path: Path) -> list[ig.Edge]:
    for name, text in FAKE.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    return ig.import_graph(tmp_path, ["pkg"])


def test_checker_reads_every_kind_of_import(tmp_path):
    edges = {(e.source, e.target, e.line) for e in _fake(tmp_path)}
    assert edges == {
        ("pkg.low", "pkg.high", 4),  # function level; `from pkg import high` names the module pkg.high
        ("pkg.high", "pkg.low", 1),  # `from pkg.low import f`: f is a name, the edge is to pkg.low
        ("pkg.high", "pkg.mid", 2),  # relative `from . import mid`
        ("pkg.mid", "pkg.high", 3),  # under TYPE_CHECKING
        ("pkg.sub.leaf", "pkg.low", 1),  # `..` from a module of pkg.sub
        # `from pkg.sub import leaf` in leaf itself: no self-edge; os and typing are outside the graph
    }


def test_checker_finds_the_cycle_and_the_upward_import(tmp_path):
    edges = _fake(tmp_path)
    assert ig.cycles(edges) == [["pkg.high", "pkg.low", "pkg.mid"]]
    walk = ig.cycle_path(edges, ["pkg.high", "pkg.low", "pkg.mid"])
    assert [e.source for e in walk] == ["pkg.high", "pkg.low"] and walk[-1].target == "pkg.high"
    up = ig.upward(edges, FAKE_LAYERS)
    assert [(e.source, e.target, e.path, e.line) for e in up] == [("pkg.low", "pkg.high", "pkg/low.py", 4)]


def test_checker_layer_prefixes():
    assert ig.layer_of("pkg", FAKE_LAYERS) == 0  # pkg.__init__ names the package alone...
    assert ig.layer_of("pkg.other", FAKE_LAYERS) is None  # ...not its modules
    assert ig.layer_of("pkg.sub.leaf", FAKE_LAYERS) == 0
    assert ig.layer_of("pkg.high.x", FAKE_LAYERS) == 1
    assert ig.layer_of("pkg.highest", FAKE_LAYERS) is None  # a prefix ends at a dot
    assert ig.unplaced(["pkg.low", "pkg.other"], FAKE_LAYERS) == ["pkg.other"]


def test_from_package_import_name_is_an_edge_to_the_package():
    edges = ig.imports_of("a.b", "from a import c\nfrom a import d\n", False, {"a", "a.b", "a.d"}, "a/b.py")
    assert [(e.target, e.line) for e in edges] == [("a", 1), ("a.d", 2)]
