"""No file of the product names a repository path that no longer exists (issue 23): a file moves, and every
README line, docs page, docstring, comment, error message or YAML `source:` that cites it moves with it.

What counts as a repository path, e.g. in "`tools/calibrate.py --fp8` fits both" or "see
estimator/pricing/attention.py":
- a token starting at one of the top-level folders (`estimator/`, `passes/`, `hwdesc/`, `models/`,
  `tools/`, `tests/`, `docs/`) or at a subpackage of `estimator/` written relative to it (`pricing/plan.py`,
  `serve/`), not preceded by a word character, `/`, `.`, `~`, `:` or `-` (so `https://x.org/models/a`,
  `~/.cache/gpu-estimator/` and `transformers/models/llama/...` are not ours);
- `docs/` holds flat pages only, so `docs/source/reference/memory.md` (TensorRT-LLM's) is upstream;
- `<name>` and `*` are placeholders: `hwdesc/<sku>.yaml` or `models/decoder*.py` must match some file;
- `estimator/dtypes.STORED_FORMATS` names `STORED_FORMATS` in `estimator/dtypes.py`;
- a relative Markdown link in README.md or docs/ (`[serving](serving.md#memory)`) must name a file beside
  the page;
- a dotted module `estimator.pricing.plan` (or `passes.shard_tp`) must be a module, or a name found in the
  module it stops at; a single name after a top-level package (`estimator.stored_formats`, an ONNX
  metadata key; `estimator.KvAppend`, an op domain) is not taken for a module.
"""

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
TOP = ("estimator", "passes", "hwdesc", "models", "tools", "tests", "docs")
SUBPACKAGES = tuple(sorted(p.name for p in (ROOT / "estimator").iterdir()
                           if p.is_dir() and (p / "__init__.py").exists()))
# Former subpackages: a relative mention of one (`tiling/plan.py`) is stale, not someone else's path.
FORMER = ("tiling",)
_LEAD = r"(?<![\w./~:@-])"
PATH = re.compile(_LEAD + r"((?:" + "|".join(TOP + SUBPACKAGES + FORMER) + r")/[\w./*<>-]*)")
DOTTED = re.compile(r"(?<![\w./~:@-])((?:estimator|passes|hwdesc|models)(?:\.[A-Za-z_]\w*)+)")
LINK = re.compile(r"\]\(([^)\s#]+)(?:#[^)\s]*)?\)")
# Pages another branch writes, linked before they land: each must not exist yet, so that the day it lands
# the test says to drop it from here (docs/validation.md comes from its own generating command).
SOURCES = ["README.md", "Makefile", "pyproject.toml", "docs",
           "estimator", "passes", "hwdesc", "models", "tools"]
SUFFIXES = (".py", ".yaml", ".yml", ".md", ".toml", ".txt", ".json")


def _files():
    for name in SOURCES:
        path = ROOT / name
        if path.is_file():
            yield path
        elif path.is_dir():
            yield from (p for p in sorted(path.rglob("*"))
                        if p.is_file() and "__pycache__" not in p.parts and p.suffix in SUFFIXES)


def _exists(rel: str) -> bool:
    pattern = re.sub(r"<[^>]*>", "*", rel).rstrip("/")
    if "*" in pattern:
        return any(ROOT.glob(pattern))
    return (ROOT / pattern).exists()


def _path_ok(token: str) -> bool:
    """Whether a path token (already trimmed of sentence punctuation) names something in the tree."""
    if token.split("/")[0] in SUBPACKAGES + FORMER:
        token = "estimator/" + token
    if token.startswith("docs/") and token.count("/") > 1:
        return True  # an upstream project's docs tree; ours is flat
    if _exists(token):
        return True
    # `estimator/dtypes.STORED_FORMATS`: a name inside a module.
    stem, dot, name = token.rpartition(".")
    if dot and not _exists(token) and (ROOT / (stem + ".py")).is_file():
        return re.search(rf"\b{re.escape(name)}\b", (ROOT / (stem + ".py")).read_text()) is not None
    return False


def _dotted_ok(token: str) -> bool:
    parts = token.split(".")
    path = ROOT
    for i, part in enumerate(parts):
        if (path / part).is_dir():
            path = path / part
            continue
        if (path / f"{part}.py").is_file():
            path = path / f"{part}.py"
            rest = parts[i + 1:]
            break
        rest = parts[i:]
        if i == 1 and len(rest) == 1:
            return True  # `estimator.stored_formats`: a key or domain as likely as an attribute
        path = path / "__init__.py"
        break
    else:
        return True
    if not rest:
        return True
    if not path.is_file():
        return False
    return re.search(rf"\b{re.escape(rest[0])}\b", path.read_text()) is not None


def stale_in(text: str):
    """Yield every repository path or dotted module in `text` that does not resolve."""
    for m in PATH.finditer(text):
        token = m.group(1).rstrip(".,;:)")
        if token and not _path_ok(token):
            yield token
    for m in DOTTED.finditer(text):
        token = m.group(1).rstrip(".")
        if token.count(".") and not _dotted_ok(token):
            yield token


def stale_links(page: Path, text: str):
    """Yield the relative Markdown link targets of `page` that name no file."""
    for m in LINK.finditer(text):
        target = m.group(1)
        if re.match(r"[a-z][a-z0-9+.-]*:", target):
            continue  # https:, mailto:
        resolved = (page.parent / target).resolve()
        if not resolved.exists():
            yield target


def test_the_matcher_is_precise():
    assert list(stale_in("see `estimator/price.py` and tiling/points.py")) == [
        "estimator/price.py", "tiling/points.py"]
    assert list(stale_in("python tools/no_such_tool.py --x")) == ["tools/no_such_tool.py"]
    assert list(stale_in("hwdesc/nope/<sku>.yaml, estimator.tiling.plan")) == [
        "hwdesc/nope/<sku>.yaml", "estimator.tiling.plan"]
    ok = ("estimator/pricing/plan.py, `pricing/attention.py`, hwdesc/<sku>.yaml, hwdesc/tiles/, "
          "models/decoder*.py, estimator/dtypes.STORED_FORMATS, estimator.pricing.plan, estimator.estimate, "
          "https://github.com/org/repo/blob/main/tools/x.py, ~/.cache/gpu-estimator/x, "
          "libcudacxx/include/cuda/std/x.h, transformers/models/llama/modeling_llama.py, "
          "TensorRT-LLM docs/source/reference/memory.md, tests/data/sass/gemm_bf16.cu.")
    assert list(stale_in(ok)) == []
    page = ROOT / "docs" / "x.md"
    text = "[a](fusion.md) [b](nope.md#x) [c](https://x.org/y.md) [d](../README.md) [v](validation.md)"
    assert list(stale_links(page, text)) == ["nope.md"]



def test_no_stale_path_in_the_product():
    files = list(_files())
    assert any(p.name == "README.md" for p in files) and any(p.suffix == ".yaml" for p in files)
    hits = [f"{p.relative_to(ROOT)}:{i}: {token}"
            for p in files for i, line in enumerate(p.read_text(errors="replace").splitlines(), 1)
            for token in stale_in(line)]
    hits += [f"{p.relative_to(ROOT)}: link {target}" for p in files if p.suffix == ".md"
             for target in stale_links(p, p.read_text())]
    assert not hits, f"{len(hits)} stale paths:\n" + "\n".join(hits)
