"""The public surface is frozen: each wing's names, and the signatures of its functions, as checked in.

``tests/public_api.json`` lists, per namespace (``jkofast`` and each wing's face: ``dir(package)``, the
names its ``__init__`` maps; ``__all__`` too, except the drop-in's, which star-imports the published names only),
every public name and, for a function, its signature.  A change to the surface is a deliberate edit:
rewrite the list with ``python3 tests/test_public_api.py --update`` and say it in CHANGELOG.md.
"""

from __future__ import annotations

import importlib
import importlib.util
import inspect
import json
import pathlib
import pkgutil
import sys
import warnings

import pytest

import jkofast

LIST = pathlib.Path(__file__).with_name("public_api.json")
NAMESPACES = (
    "jkofast",
    "jkofast.jko",
    "jkofast.ot",
    "jkofast.pools",
    "jkofast.sparse",
    "jkofast.sgr",
    "jkofast.text",
    "jkofast.eval",
    "jkofast.datasets",
    "jkofast.encode",
    "jkofast.studies",
    "jkofast.distributed",
    "jkofast.compat",
)


def surface(namespace: str) -> dict[str, str]:
    """Return ``{public name: its function's signature, or its kind}`` of one namespace."""
    pkg = importlib.import_module(namespace)
    out = {}
    for name in dir(pkg):
        obj = getattr(pkg, name)
        if inspect.isclass(obj):
            out[name] = "class"
        elif callable(obj):
            out[name] = str(inspect.signature(obj))
        else:
            out[name] = "data"
    return out


@pytest.fixture(scope="module")
def frozen() -> dict[str, dict[str, str]]:
    return json.loads(LIST.read_text(encoding="utf-8"))


def test_every_wing_is_listed(frozen):
    wings = {f"jkofast.{m.name}" for m in pkgutil.iter_modules(jkofast.__path__) if m.ispkg}
    assert set(frozen) == set(NAMESPACES)
    assert wings - set(NAMESPACES) == {"jkofast.commands", "jkofast.kernels"}  # the CLI and the kernels


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_public_names_and_signatures_are_the_checked_in_ones(frozen, namespace):
    now = surface(namespace)
    assert sorted(now) == sorted(frozen[namespace]), "the names changed: update tests/public_api.json + CHANGELOG"
    changed = {n: (frozen[namespace][n], sig) for n, sig in now.items() if sig != frozen[namespace][n]}
    assert changed == {}, "signatures changed: update tests/public_api.json + CHANGELOG"


@pytest.mark.parametrize("namespace", NAMESPACES)
def test_each_name_is_one_object_and_no_module(namespace):
    pkg = importlib.import_module(namespace)
    face = dir(pkg)
    assert set(pkg.__all__) - {"__version__"} <= set(face)
    for name in face:
        first = getattr(pkg, name)
        assert not inspect.ismodule(first), f"{namespace}.{name} is a module"
        # a sub-module of the same name would rebind the attribute once it is imported
        assert importlib.util.find_spec(f"{namespace}.{name}") is None, f"{namespace}.{name} is also a module"
        assert getattr(pkg, name) is first


def test_the_drop_in_keeps_its_own_names():
    import jkofast.compat
    import jkofast.jko

    assert jkofast.compat.run_jko is not jkofast.jko.run_jko  # the published signature vs jkofast's
    assert jkofast.run_jko is jkofast.jko.run_jko
    assert jkofast.compat.JKOConfig is jkofast.jko.JKOConfig


def test_a_name_no_longer_on_a_face_warns_and_names_its_module():
    import jkofast.jko

    with pytest.warns(DeprecationWarning, match=r"jkofast\.jko\.prepare_chunk .* import it from jkofast\.jko\.stream"):
        old = jkofast.jko.prepare_chunk
    assert old is importlib.import_module("jkofast.jko.stream").prepare_chunk
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        jkofast.jko.rerank_batch  # noqa: B018  (a face name: no warning)
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        jkofast.jko.no_such_name  # noqa: B018


if __name__ == "__main__":
    if sys.argv[1:] != ["--update"]:
        sys.exit("usage: python3 tests/test_public_api.py --update  (rewrites tests/public_api.json)")
    LIST.write_text(json.dumps({ns: surface(ns) for ns in NAMESPACES}, indent=1, sort_keys=True) + "\n")
