"""Meta-evaluation against human labels, and the factor correlation matrix."""

import math

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from evaluators.factors import FACTORS
from evaluators.log_readers import read_crsarena_eval
from evaluators.meta.correlation import correlate, crsarena_eval_labels, factor_matrix, read_csv_labels


@pytest.fixture(scope="module")
def dev(shared_data):
    path = shared_data / "crsarena" / "crs_arena_eval_dev.json"
    conversations = read_crsarena_eval(path).conversations
    turns = {c.id: float(sum(t.role == "system" for t in c.turns)) for c in conversations}
    return {
        "path": path,
        "human": crsarena_eval_labels(path, "dialogue_overall"),
        "score": turns,  # a deterministic score: the number of system turns
        "systems": {c.id: c.system_id for c in conversations},
    }


@pytest.fixture(scope="module")
def result(dev):
    return correlate(dev["score"], dev["human"], systems=dev["systems"])


def test_dialogue_level_equals_scipy(dev, result):
    ids = sorted(dev["human"])
    x = [dev["score"][i] for i in ids]
    y = [dev["human"][i] for i in ids]
    level = result["dialogue"]
    assert level.n == 93 and level.skipped == 0
    for method, test in (("pearson", stats.pearsonr), ("spearman", stats.spearmanr), ("kendall", stats.kendalltau)):
        expected = test(x, y)
        assert level[method].value == pytest.approx(expected[0])
        assert level[method].p == pytest.approx(expected[1])


def test_bootstrap_interval_contains_the_estimate_and_is_seeded(dev, result):
    level = result["dialogue"]
    assert level.n_boot == 1000
    for method in ("pearson", "spearman", "kendall"):
        c = level[method]
        assert c.low < c.value < c.high and c.high - c.low < 1
    again = correlate(dev["score"], dev["human"])["dialogue"]
    assert again["kendall"] == level["kendall"]
    other_seed = correlate(dev["score"], dev["human"], seed=1)["dialogue"]
    assert other_seed["kendall"].low != level["kendall"].low


def test_system_level_uses_system_means(dev, result):
    frame = pd.DataFrame({"score": dev["score"], "human": dev["human"], "system": dev["systems"]})
    means = frame.groupby("system")[["score", "human"]].mean()
    level = result["system"]
    assert level.n == 9 == len(means)
    assert level["spearman"].value == pytest.approx(stats.spearmanr(means["score"], means["human"])[0])
    assert level["pearson"].value == pytest.approx(stats.pearsonr(means["score"], means["human"])[0])
    assert level["pearson"].low is not None and level.n_boot > 900


def test_none_values_are_skipped_and_counted(dev):
    scores = dict(dev["score"])
    dropped = sorted(scores)[:10]
    for key in dropped[:5]:
        scores[key] = None
    for key in dropped[5:]:
        del scores[key]
    human = {**dev["human"], "only-human": 2.0}
    level = correlate(scores, human, n_boot=200)["dialogue"]
    assert level.n == 83 and level.skipped == 11
    kept = sorted(set(scores) & set(dev["human"]) - set(dropped))
    assert level["spearman"].value == pytest.approx(
        stats.spearmanr([scores[i] for i in kept], [human[i] for i in kept])[0]
    )


def test_undefined_correlations_are_none_not_zero():
    constant = correlate({"a": 1.0, "b": 1.0, "c": 1.0}, {"a": 0.0, "b": 1.0, "c": 2.0}, n_boot=50)["dialogue"]
    assert constant["pearson"].value is None and constant["kendall"].low is None
    too_few = correlate({"a": 1.0, "b": 2.0}, {"a": 0.0, "b": 1.0}, n_boot=50)["dialogue"]
    assert too_few.n == 2 and too_few["spearman"].value is None


def test_turn_level_labels(dev):
    labels = crsarena_eval_labels(dev["path"], "relevance")
    assert len(labels) == 433
    assert labels["barcor_opendialkg_1cb9615d-e2b0-43ac-ac12-9b3313111f37#3"] == 1.0
    with pytest.raises(ValueError, match="unknown aspect"):
        crsarena_eval_labels(dev["path"], "fun")


def _factor_rows(n=40, seed=3):
    rng = np.random.default_rng(seed)
    base = rng.integers(0, 5, n)
    rows = []
    for k in range(n):
        row = {f: float(min(4, max(0, base[k] + rng.integers(-1, 2)))) for f in FACTORS}
        rows.append(row)
    rows[0]["novelty"] = None
    rows[1]["diversity"] = None
    return rows


def test_factor_matrix_is_12_by_12_and_symmetric():
    rows = _factor_rows()
    matrix, figure = factor_matrix(rows)
    assert matrix.shape == (12, 12) and list(matrix.columns) == list(FACTORS) == list(matrix.index)
    values = matrix.to_numpy()
    assert np.allclose(values, values.T) and np.allclose(np.diag(values), 1.0)
    pairs = [(r["novelty"], r["diversity"]) for r in rows if r["novelty"] is not None and r["diversity"] is not None]
    assert len(pairs) == 38
    assert matrix.loc["novelty", "diversity"] == pytest.approx(stats.spearmanr(*zip(*pairs))[0])
    assert figure.data[0].type == "heatmap" and len(figure.data[0].x) == 12


def test_factor_matrix_keeps_missing_factors_as_nan_and_rejects_unknown_columns():
    rows = [{f: v for f, v in r.items() if f != "groundedness"} for r in _factor_rows()]
    matrix, _ = factor_matrix({str(k): r for k, r in enumerate(rows)})
    assert matrix.shape == (12, 12) and math.isnan(matrix.loc["groundedness", "coherence"])
    with pytest.raises(ValueError, match="unknown factor"):
        factor_matrix([{"coherence": 1.0, "fun": 2.0}])


def test_csv_labels(tmp_path):
    path = tmp_path / "labels.csv"
    path.write_text("id,value\na,1\nb,\nc,2.5\n", encoding="utf-8")
    assert read_csv_labels(path) == {"a": 1.0, "b": None, "c": 2.5}
    path.write_text("id,value\na,1\nb,good\n", encoding="utf-8")
    with pytest.raises(ValueError, match=r"line 3: expected a number"):
        read_csv_labels(path)
    path.write_text("id,value\na,1\na,2\n", encoding="utf-8")
    with pytest.raises(ValueError, match="line 3: id 'a' appears twice"):
        read_csv_labels(path)
    path.write_text("conv,score\na,1\n", encoding="utf-8")
    with pytest.raises(ValueError, match="column 'id'"):
        read_csv_labels(path)
    assert read_csv_labels(path, id_column="conv", value_column="score") == {"a": 1.0}
