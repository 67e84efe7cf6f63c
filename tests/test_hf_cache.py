"""models/hf.py: the export cache names each file by what its bytes depend on, a digest of
models/hf_tiny.py included, so an edited config or export code never reads a stale file."""

from models import hf


def test_the_cache_tag_follows_hf_tiny_source(tmp_path, monkeypatch):
    one, two = tmp_path / "one.py", tmp_path / "two.py"
    one.write_text("FAMILIES = {'llama': ('LlamaConfig', 'LlamaForCausalLM', {'hidden_size': 64})}\n")
    two.write_text("FAMILIES = {'llama': ('LlamaConfig', 'LlamaForCausalLM', {'hidden_size': 128})}\n")
    tags = []
    for source in (one, two, one):
        monkeypatch.setattr(hf.hf_tiny, "__file__", str(source))
        hf._source_tag.cache_clear()
        tags.append(hf._source_tag())
    hf._source_tag.cache_clear()
    assert tags[0] != tags[1]  # an edited config: another file name
    assert tags[0] == tags[2]  # the same source: the same name (the cache is hit)
    assert tags[0].startswith("os")  # onnxscript's version (or "none") leads it
