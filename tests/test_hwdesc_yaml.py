"""hwdesc reads YAML through libyaml's parser where PyYAML has it: every bundled file parses to what the
pure-Python parser gives (same resolver, YAML 1.2 floats included, and same constructor)."""

import re

import pytest
import yaml

from hwdesc import loader


class _PurePython(yaml.SafeLoader):
    pass


_PurePython.add_implicit_resolver(
    "tag:yaml.org,2002:float",
    re.compile(r"^[-+]?(?:[0-9][0-9_]*)(?:\.[0-9_]*)?[eE][-+]?[0-9]+$"),
    list("-+0123456789"),
)


@pytest.mark.parametrize("path", sorted(loader.bundled_dir().rglob("*.yaml")), ids=lambda p: p.name)
def test_bundled_files_parse_as_with_the_pure_python_parser(path):
    text = path.read_text(encoding="utf-8")
    fast, slow = yaml.load(text, Loader=loader._BundledLoader), yaml.load(text, Loader=_PurePython)  # noqa: SLF001
    assert fast == slow
    assert repr(fast) == repr(slow)  # int vs float, key order


def test_yaml_12_floats_and_the_c_parser():
    assert yaml.load("a: 1.98e9\nb: 1e12\n", Loader=loader._BundledLoader) == {"a": 1.98e9, "b": 1e12}  # noqa: SLF001
    if yaml.__with_libyaml__:
        assert issubclass(loader._BundledLoader, yaml.CSafeLoader)  # noqa: SLF001
