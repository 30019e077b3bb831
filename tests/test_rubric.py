"""The CoRE rubric data: complete, consistent with the paper's thresholds, gaps closed as documented."""

import tomllib

import pytest
from pydantic import ValidationError

from catalog.catalog import get_catalog
from evaluators.factors import DIMENSION_OF, FACTORS
from evaluators.judge.rubric import RUBRIC_NAMES, features_for, load_rubric, rubric_from_dict, rubric_path


@pytest.fixture(scope="module")
def rubric():
    return load_rubric()


def _raw(version="core-v3"):
    with open(rubric_path(version), "rb") as f:
        return tomllib.load(f)


def test_all_twelve_factors_with_levels_steps_and_dimension(rubric):
    assert rubric.version == "core-v3"
    assert list(rubric.factors) == list(FACTORS)
    for fid, factor in rubric.factors.items():
        assert factor.id == fid and factor.dimension == DIMENSION_OF[fid]
        # CoRE App. A defines only 4 and 0 for appropriateness; every other factor has the five levels
        expected = [0, 4] if fid == "appropriateness" else [0, 1, 2, 3, 4]
        assert sorted(factor.levels) == expected and list(factor.scores) == expected and all(factor.levels.values())
        assert factor.definition and factor.steps


def test_the_extended_variant_keeps_every_level_and_the_popularity_rank():
    extended = load_rubric("core-extended")
    assert extended.version == "core-v2" and extended.log.item_popularity
    assert extended.factor("appropriateness").scores == (0, 1, 2, 3, 4)
    assert not load_rubric().log.item_popularity  # CoRE's judge knows popularity from its own knowledge


def test_core_states_the_papers_facts_and_core_extended_its_extensions():
    core, extended = load_rubric("core"), load_rubric("core-extended")
    novelty = core.factor("novelty")
    assert "six to nine" in novelty.levels[3] and "item_metadata" not in novelty.sees
    assert "popularity" not in " ".join(novelty.steps)
    assert "popularity rank" in " ".join(extended.factor("novelty").steps)
    # the paper's step: does the reply address the user's request?
    assert "user's request" in core.factor("semantic_relevance").steps[0]
    assert "request" not in extended.factor("semantic_relevance").steps[0]
    # levels in the paper's words: the judge reads no percentages
    for fid in ("proactiveness", "naturalness", "semantic_relevance", "explainability"):
        assert not any("%" in text for text in core.factor(fid).levels.values()), fid
        assert any("%" in text for text in extended.factor(fid).levels.values()), fid
    assert "praise" not in " ".join(core.factor("explainability").steps)
    assert "praise" in " ".join(extended.factor("explainability").steps)
    # the machine-readable bands are the same in both: deterministic metrics do not move
    for fid, factor in core.factors.items():
        assert factor.count == extended.factor(fid).count, fid


def test_only_effectiveness_sees_the_targets(rubric):
    assert [f.id for f in rubric.factors.values() if "targets" in f.sees] == ["effectiveness"]
    assert rubric.factor("effectiveness").levels_without_targets is not None
    assert set(rubric.log.shared) == {"history", "interaction", "recommendations"}


def test_the_load_is_cached_and_versions_are_checked():
    assert load_rubric() is load_rubric("core-v3") is load_rubric("core") is load_rubric(None)
    assert load_rubric("core-extended") is load_rubric("core-v2")
    assert RUBRIC_NAMES == {"core": "core-v3", "core-extended": "core-v2"}
    assert load_rubric("core-v1").version == "core-v1"  # kept: stored scores name it
    with pytest.raises(FileNotFoundError, match="core-extended"):
        load_rubric("core-v0")


@pytest.mark.parametrize("fid", ["coherence", "recoverability", "grammatical_correctness", "groundedness"])
def test_error_counts_cost_one_point_each_and_four_scores_zero(rubric, fid):
    factor = rubric.factor(fid)
    assert [factor.score_for(n) for n in range(7)] == [4, 3, 2, 1, 0, 0, 0]
    deciding = next(b for b in factor.count.bands if b.holds(4, None))
    assert "four" in deciding.note.lower()  # the decision is written next to the band


@pytest.mark.parametrize(
    "count,total,score",
    [
        (0, 10, 0),
        (1, 30, 1),
        (2, 30, 1),
        (3, 30, 2),
        (5, 30, 2),
        (6, 30, 3),
        (9, 40, 3),
        (10, 50, 3),  # exactly ten: "more than ten" read strictly
        (11, 50, 4),
        (2, 4, 4),  # half of a short list
        (3, 12, 3),  # a quarter lifts three items above level 2
        (1, 4, 3),
    ],
)
def test_novelty_bands_try_levels_from_the_top(rubric, count, total, score):
    assert rubric.factor("novelty").score_for(count, total=total) == score


def test_novelty_needs_the_list_length_for_its_share_bands(rubric):
    with pytest.raises(ValueError, match="total"):
        rubric.factor("novelty").score_for(3)
    assert rubric.factor("novelty").score_for(0, total=0) == 0


@pytest.mark.parametrize(
    "counts,score",
    [
        ({"genre": 5, "director": 6, "lead_actor": 2, "decade": 1}, 4),
        ([4, 4, 1, 1], 3),
        ([5, 1, 1, 1], 3),
        ([3, 3, 1, 1], 2),
        ([4, 2, 1, 1], 2),
        ([3, 1, 1, 1], 1),
        ([2, 1, 1, 1], 1),  # the gap between the paper's levels 1 and 0
        ([1, 1, 1, 1], 0),
        ([], 0),
    ],
)
def test_diversity_counts_distinct_values_per_dimension(rubric, counts, score):
    assert rubric.factor("diversity").score_for(counts) == score


def test_diversity_rejects_a_single_number(rubric):
    with pytest.raises(TypeError):
        rubric.factor("diversity").score_for(5)


@pytest.mark.parametrize("fid", ["proactiveness", "semantic_relevance", "explainability"])
def test_share_factors_share_cut_points(rubric, fid):
    shares = [1.0, 0.8, 0.6, 0.5, 0.4, 1 / 3, 0.1, 0.0]
    assert [rubric.factor(fid).score_for(s) for s in shares] == [4, 3, 3, 2, 2, 1, 1, 0]
    with pytest.raises(ValueError):
        rubric.factor(fid).score_for(1.5)


def test_naturalness_mirrors_the_share_cut_points(rubric):
    shares = [0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0]
    assert [rubric.factor("naturalness").score_for(s) for s in shares] == [4, 3, 3, 2, 2, 1, 0]


def test_effectiveness_hit_decides_only_the_top_score(rubric):
    effectiveness = rubric.factor("effectiveness")
    assert effectiveness.score_for(1) == 4
    assert effectiveness.score_for(0) is None


def test_appropriateness_is_judged_only(rubric):
    assert rubric.factor("appropriateness").count is None
    with pytest.raises(ValueError, match="judged only"):
        rubric.factor("appropriateness").score_for(0)


def test_negative_counts_are_rejected(rubric):
    with pytest.raises(ValueError):
        rubric.factor("coherence").score_for(-1)


def test_feature_dimensions_per_domain_with_a_generic_fallback():
    assert [d.id for d in features_for("movies")] == ["genre", "director", "lead_actor", "decade"]
    assert features_for("Movies") == features_for("movies")
    assert [d.id for d in features_for("books")] == ["genre", "author", "language_region"]
    assert features_for("sports") == features_for("generic")


def test_feature_values_come_from_catalog_items():
    godfather = get_catalog().get("the-godfather-1972")
    values = {d.id: d.values(godfather) for d in features_for("movies")}
    assert values["director"] == ("Francis Ford Coppola",)
    assert values["decade"] == ("1970s",)
    assert values["lead_actor"] == ("Marlon Brando",)  # the first-billed actor only (core-v2)
    assert features_for("dining")[0].values(godfather) == ()


def test_incomplete_or_unknown_entries_are_rejected():
    data = _raw()
    assert rubric_from_dict(data).version == "core-v3"
    assert rubric_from_dict(_raw("core-v2")).version == "core-v2"

    missing = _raw()
    del missing["factors"]["novelty"]
    with pytest.raises(ValidationError, match="exactly the factors"):
        rubric_from_dict(missing)

    unknown_key = _raw()
    unknown_key["factors"]["coherence"]["weight"] = 2
    with pytest.raises(ValidationError):
        rubric_from_dict(unknown_key)

    no_level = _raw()
    del no_level["factors"]["coherence"]["levels"]["2"]  # its count standard still gives 2
    with pytest.raises(ValidationError, match="without a level"):
        rubric_from_dict(no_level)

    no_top = _raw()
    del no_top["factors"]["appropriateness"]["levels"]["4"]
    with pytest.raises(ValidationError, match="0 and 4"):
        rubric_from_dict(no_top)

    wrong_dimension = _raw()
    wrong_dimension["factors"]["coherence"]["dimension"] = "language_expression"
    with pytest.raises(ValidationError, match="belongs to"):
        rubric_from_dict(wrong_dimension)


def test_the_llm_judge_runs_core_unless_a_rubric_is_named(tmp_path):
    """Nothing chosen: core (core-v3). `--rubric core-extended` reaches core-v2; resume keeps a stored version."""
    from evaluators.scorer_setup import build_setup, stored_options

    db = tmp_path / "a.db"
    default = build_setup(db_path=db, scorer="llm", debate=False)
    assert default.scorer.rubric_version == "core-v3" and default.describe()["rubric"] == "core-v3"
    extended = build_setup(db_path=db, scorer="llm", debate=False, rubric="core-extended")
    assert extended.scorer.rubric_version == "core-v2" and extended.fingerprint() != default.fingerprint()
    # an evaluation stored under core-v2 is rebuilt with core-v2, so its fingerprint matches again
    [first, *_] = stored_options("llm:x", extended.scorer.describe())
    assert first["rubric"] == "core-v2" and first["debate"] is False
    again = build_setup(db_path=db, **first)
    assert again.scorer.rubric_version == "core-v2" and again.fingerprint() == extended.fingerprint()


def test_the_proxy_says_it_scores_with_the_extended_rubric():
    from evaluators.proxy.scorer import load_proxy_judge

    assert load_proxy_judge().rubric_version == "core-v2"  # its appropriateness has the intermediate levels
