import json
import os

import pytest

from jkofast.studies.published import published

DATA = os.path.join(os.path.dirname(__file__), "..", "..", "jkofast", "studies", "data")
STUDIES = sorted(f[:-5] for f in os.listdir(DATA) if f.endswith(".json"))


@pytest.mark.parametrize("study", STUDIES)
def test_every_table_names_its_source(study):
    with open(os.path.join(DATA, f"{study}.json"), encoding="utf-8") as fh:
        doc = json.load(fh)
    src = doc.pop("sources")
    assert doc and (isinstance(src, str) or set(src) == set(doc))
    assert set(published(study)) == set(doc)


def test_numeric_keys_come_back_as_numbers():
    assert published("distractors")["paired_leakage"]["scifact"][10] == [-0.2193, -0.2653, -0.1753]
    assert published("dual_rank")["datasets"]["scifact"]["n_kept"][0.95] == 285
    assert published("dual_rank")["coverage"]["fiqa"][0.5]["dual"] == [0.546, 0.540]
    scaling = published("multires")["scaling"]
    assert list(scaling) == [100, 200, 500, 1000] and scaling[200]["pool_size"] == 100
    assert published("theory")["E1"]["kl"]["monotone_frac"] == 1.0


def test_each_call_returns_a_fresh_copy():
    a = published("ablations")
    a["rows"]["W_full"]["ndcg10"] = 0.0
    assert published("ablations")["rows"]["W_full"]["ndcg10"] == 0.6948


def test_unknown_study():
    with pytest.raises(ValueError, match="no published tables"):
        published("nope")
    with pytest.raises(ValueError, match="no published tables"):
        published("../data/ablations")
