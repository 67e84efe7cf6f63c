"""The product never points at a development machine: no absolute path of one (/work/, /home/, /root/,
/tmp/) in the package files, hardware descriptors, builders, tools, README or docs (issue 11). Figures cite
their public sources instead."""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SHIPPED = ["estimator", "passes", "hwdesc", "models", "tools", "docs", "README.md", "pyproject.toml",
           "Makefile"]
# A path-looking token under one of these roots, e.g. `/work/shared/x.md` or `/home/me/model.onnx`.
DEV_PATH = re.compile(r"(?<![\w.~-])/(work|home|root|tmp)/[\w.-]")


def _files():
    for name in SHIPPED:
        path = ROOT / name
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in sorted(path.rglob("*")) if p.is_file() and "__pycache__" not in p.parts
                        and p.suffix in (".py", ".yaml", ".yml", ".md", ".toml", ".txt", ".json", ""))


def test_the_scanner_finds_a_dev_path():
    assert DEV_PATH.search("# Figures collected in /work/shared/reference/gpu-specs.md")
    assert DEV_PATH.search("model = '/home/alice/llama.onnx'")
    assert not DEV_PATH.search("~/.cache/gpu-estimator/ and hwdesc/tiles/hopper.yaml")


def test_no_development_machine_path_in_the_product():
    files = list(_files())
    assert any(p.suffix == ".yaml" for p in files) and any(p.name == "README.md" for p in files)
    hits = [f"{p.relative_to(ROOT)}:{i}: {line.strip()}"
            for p in files for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
            if DEV_PATH.search(line)]
    assert not hits, "\n".join(hits[:20])
