"""benchmarks/tools/ab_compare.py: export + rename of a commit's package, imported beside jkofast."""

import importlib
import importlib.util
import os
import sys

import numpy as np
import pytest

ROOT = os.path.join(os.path.dirname(__file__), "..")


def _script():
    path = os.path.join(ROOT, "benchmarks", "tools", "ab_compare.py")
    spec = importlib.util.spec_from_file_location("ab_compare", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_rename_source_rewrites_module_references_only():
    ab = _script()
    src = (
        "import jkofast\nfrom jkofast.jko import run_jko\nimport jkofast._numba as nb\n"
        'LAZY = {"warmup": "jkofast.warmup"}\nDATA = "jkofast/datasets/scifact"\n'
        'ENV = "JKOFAST_NUMBA_CACHE"\nx = my_jkofast_helper\nprint("jkofast rerank: done")\n'
    )
    out = ab.rename_source(src, "jkofast_abc")
    assert out == (
        "import jkofast_abc\nfrom jkofast_abc.jko import run_jko\nimport jkofast_abc._numba as nb\n"
        'LAZY = {"warmup": "jkofast_abc.warmup"}\nDATA = "jkofast/datasets/scifact"\n'
        'ENV = "JKOFAST_NUMBA_CACHE"\nx = my_jkofast_helper\nprint("jkofast_abc rerank: done")\n'
    )


def test_export_head_imports_and_matches_jkofast(tmp_path):
    ab = _script()
    try:
        sha = ab.resolve("HEAD")
    except RuntimeError as exc:
        pytest.skip(f"git unavailable: {exc}")
    name = ab.export_package("HEAD", str(tmp_path))
    assert name == f"jkofast_{sha[:12]}"
    pkg_dir = tmp_path / name
    assert (pkg_dir / "jko" / "solver.py").exists() and not (pkg_dir / "datasets" / "scifact").exists()
    for py in pkg_dir.rglob("*.py"):  # no import of the original package is left
        text = py.read_text(encoding="utf-8")
        assert "import jkofast\n" not in text and "from jkofast." not in text and "from jkofast import" not in text
    assert ab.export_package("HEAD", str(tmp_path)) == name  # reused, not re-exported
    sys.path.insert(0, str(tmp_path))
    try:
        copy = importlib.import_module(f"{name}.jko")
        assert copy.__file__.startswith(str(tmp_path))
        from jkofast import jko

        _Z, E, C, K = ab.clustered_pool(m=12, d=8, n_clusters=3, seed=1)
        cfg = "contrib"
        p0 = ab.p0_of(E, jko.operating_point(cfg).tau0)
        p_copy = copy.run_jko(p0, E, C, K, copy.operating_point(cfg, grad="implicit"))
        p_orig = jko.run_jko(p0, E, C, K, jko.operating_point(cfg, grad="implicit"))
        assert type(copy.operating_point(cfg)) is not type(jko.operating_point(cfg))  # two packages
        np.testing.assert_array_equal(p_copy, p_orig)
        assert abs(p_orig.sum() - 1) < 1e-9
    finally:
        sys.path.remove(str(tmp_path))
        for mod in [m for m in sys.modules if m == name or m.startswith(name + ".")]:
            del sys.modules[mod]
