"""SGRConfig: defaults, checks in one place, build/query stages, presets, and its use by the retriever."""

import dataclasses

import numpy as np
import pytest

from jkofast.pools.retrievers import get_retriever, param_types, presets
from jkofast.sgr.config import BUILD_PARAMS, PRESETS, SGRConfig, default_params
from jkofast.sgr.retriever import SparseGeometricRetriever


def test_defaults_types_and_stages():
    cfg = SGRConfig()
    d = cfg.to_dict()
    assert d == default_params() and list(d) == [f.name for f in dataclasses.fields(SGRConfig)]
    assert d["pool_size"] == 100 and d["w_lex"] == 4.0 and d["semantic_neighbours"] == "strongest"
    types = SGRConfig.field_types()
    assert types == {k: type(v) for k, v in d.items()}
    assert param_types("sgr") == types
    stages = {f.name: f.metadata["stage"] for f in dataclasses.fields(SGRConfig)}
    assert set(stages.values()) == {"build", "query"}
    assert BUILD_PARAMS == tuple(k for k, s in stages.items() if s == "build")
    assert {"max_features", "code_size", "ppmi_include_self", "postings"} <= set(BUILD_PARAMS)
    assert not {"pool_size", "alpha", "rescue_mode", "tail_gate"} & set(BUILD_PARAMS)


def test_frozen_replace_checks_and_coerces():
    cfg = SGRConfig(w_lex=2, pool_size=np.int64(7))
    assert cfg.w_lex == 2.0 and type(cfg.w_lex) is float
    assert cfg.pool_size == 7 and type(cfg.pool_size) is int
    with pytest.raises(dataclasses.FrozenInstanceError):
        cfg.pool_size = 3
    assert cfg.replace(pool_size=3).pool_size == 3 and cfg.pool_size == 7
    with pytest.raises(ValueError, match="pool_size"):
        cfg.replace(pool_size=0)
    with pytest.raises(ValueError, match="pool_size"):
        dataclasses.replace(cfg, pool_size=0)
    with pytest.raises(TypeError, match="unknown"):
        cfg.replace(poolsize=3)
    with pytest.raises(TypeError, match="params must be a dict"):
        SGRConfig.from_dict([("pool_size", 3)])
    assert SGRConfig(b_final=1.0).build_changes(SGRConfig(code_size=8)) == ["code_size"]


@pytest.mark.parametrize(
    "kw, err, match",
    [
        (dict(semantic_neighbours="best"), ValueError, "semantic_neighbours must be 'strongest' or 'lowest_term_id'"),
        (dict(rescue_mode="fast"), ValueError, "rescue_mode must be 'auto', 'scan' or 'postings'"),
        (dict(reliability_mean="mean"), ValueError, "reliability_mean"),
        (dict(tail_gate="no"), TypeError, "tail_gate"),
        (dict(beta="x"), TypeError, "beta must be a real number"),
        (dict(bm25_weight=float("inf")), ValueError, "bm25_weight must be finite"),
        (dict(b_rescue=1.5), ValueError, r"b_rescue must be in \[0, 1\]"),
        (dict(tau=-1.0), ValueError, "tau"),
        (dict(n_memberships=2.0), TypeError, "n_memberships"),
        (dict(tail_gate=True, gate_min=0, gate_mult=0), ValueError, "gate_min"),
    ],
)
def test_bad_values_name_the_parameter(kw, err, match):
    with pytest.raises(err, match=match):
        SGRConfig(**kw)
    with pytest.raises(err, match=match):
        SparseGeometricRetriever(**kw)


def test_presets():
    pub = SGRConfig.preset("published")
    assert pub == SGRConfig(**PRESETS["published"])
    assert pub.semantic_neighbours == "lowest_term_id" and pub.ppmi_include_self is True
    assert SGRConfig.preset("published", pool_size=5).pool_size == 5
    assert presets("sgr") == {k: dict(v) for k, v in PRESETS.items()}
    with pytest.raises(ValueError, match="unknown SGR preset"):
        SGRConfig.preset("nope")


def test_retriever_takes_a_config_or_keywords():
    cfg = SGRConfig(pool_size=5, w_sem=0.5)
    a = SparseGeometricRetriever(cfg)
    b = SparseGeometricRetriever(config=cfg)
    c = SparseGeometricRetriever(pool_size=5, w_sem=0.5)
    d = get_retriever("sgr", pool_size=5, w_sem=0.5)
    assert a.config is cfg and b.config is cfg and c.config == cfg and d.config == cfg
    assert a.params == cfg.to_dict()
    assert SparseGeometricRetriever(cfg, pool_size=9).config == cfg.replace(pool_size=9)
    with pytest.raises(TypeError, match="config must be an SGRConfig"):
        SparseGeometricRetriever({"pool_size": 5})
    r = SparseGeometricRetriever(cfg).set_params(w_lex=1)
    assert r.config == cfg.replace(w_lex=1.0) and cfg.w_lex == 4.0


def test_config_round_trips_through_save_and_from_parts(tmp_path):
    docs = ["solar panels convert sunlight", "wind turbines make power", "sunlight and wind", "power of sunlight"]
    r = SparseGeometricRetriever(SGRConfig.preset("published", pool_size=3)).fit(docs)
    r.save(str(tmp_path / "ix"))
    r2 = SparseGeometricRetriever.load(str(tmp_path / "ix"))
    assert r2.config == r.config
    r3 = SparseGeometricRetriever.from_parts(r._ix, params=r.config, terms=r.terms_)
    assert r3.config == r.config
    for x in (r2, r3):
        i, s = x.search(["sunlight power"], k=3)
        j, t = r.search(["sunlight power"], k=3)
        np.testing.assert_array_equal(i, j)
        np.testing.assert_array_equal(s, t)


def test_component_rows_follow_the_component_names():
    from jkofast.kernels.sgr import query as kq
    from jkofast.sgr._engine import COMPONENTS

    rows = [getattr(kq, "C_" + ("REL" if c == "relevance" else c.upper())) for c in COMPONENTS]
    assert rows == list(range(kq.N_COMP)) and kq.N_COMP == len(COMPONENTS)
