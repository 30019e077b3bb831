"""The reference rankings and the genre check the fidelity bench prints beside the models (no model is trained
here); their recall is counted by the one Recall@k (crs_backends.neural.evaluation)."""

from types import SimpleNamespace

from catalog.catalog import Catalog
from catalog.ievalm_records import Record
from catalog.items import Item
from crs_backends.neural.evaluation import (
    gold_items,
    named_and_new_gold,
    named_first_ranking,
    named_share,
    popularity_ranking,
    recall_at_k,
    recall_named_and_new,
    recall_named_by_repeats,
    reference_rankings,
    repeated_films,
)
from crs_backends.neural.fidelity import genre_following
from crs_backends.neural.kg_reader import KGData

NAMES = ["A (2001)", "B (2002)", "C (2003)", "D (2004)", "Horror"]


def _model() -> SimpleNamespace:
    kg = KGData({n: i for i, n in enumerate(NAMES)}, {"genre": 0}, {"0": [[0, 4]]}, [0, 1, 2, 3], name="tiny")
    return SimpleNamespace(kg=kg)


def test_named_first_puts_the_conversations_own_titles_before_popularity():
    model = _model()
    train = [Record(["hi"], [], ["D (2004)"], ""), Record(["hi"], [], ["D (2004)", "C (2003)"], "")]
    popular = popularity_ranking(train, model.kg)
    assert popular[:2] == [3, 2]
    # named in order A then B (and a genre, which is no item): the latest named comes first, no repeats
    record = Record(["I liked A (2001)", "", "and B (2002), any horror?"], ["A (2001)", "B (2002)", "Horror"], [], "")
    assert named_first_ranking(record, popular, model.kg) == [1, 0, 3, 2]


def test_recall_of_a_ranking_per_record_and_the_named_share():
    model = _model()
    records = [
        Record(["I liked A (2001)"], ["A (2001)"], ["A (2001)"], ""),  # the gold item was named: a copy hit
        Record(["I liked B (2002)"], ["B (2002)"], ["C (2003)", "Unknown (1999)"], ""),  # unknown gold is not counted
    ]
    popular = [3, 2, 1, 0]
    gold = [gold_items(r, model.kg) for r in records]
    assert gold == [[0], [2]]
    fixed = recall_at_k(((popular, g) for g in gold), ks=(1, 2))
    per_record = recall_at_k(((named_first_ranking(r, popular, model.kg), g) for r, g in zip(records, gold)), ks=(1, 2))
    assert fixed.at == {1: 0.0, 2: 0.5} and fixed.samples == 2  # C is second in the fixed list; A is last
    assert per_record.at == {1: 0.5, 2: 0.5}  # A is first for the record that names it; C falls to third after B
    assert named_share(records, model.kg) == 0.5
    assert named_share([], model.kg) == 0.0


def test_the_references_rank_every_record_from_the_training_counts_and_its_own_named_titles():
    model = _model()
    train = [Record(["hi"], [], ["D (2004)"], ""), Record(["hi"], [], ["D (2004)", "C (2003)"], "")]
    records = [
        Record(["I liked A (2001)"], ["A (2001)"], ["A (2001)"], ""),
        Record(["anything?"], [], ["D (2004)"], ""),
    ]
    refs = reference_rankings(train, records, model.kg)
    assert list(refs) == ["popularity", "named first"]
    assert refs["popularity"] == [[3, 2, 0, 1], [3, 2, 0, 1]]  # one list, counted from the training records only
    assert refs["named first"] == [[0, 3, 2, 1], [3, 2, 0, 1]]  # A first where it was named
    gold = [gold_items(r, model.kg) for r in records]
    assert recall_at_k(zip(refs["popularity"], gold), ks=(1,)).at == {1: 0.5}
    assert recall_at_k(zip(refs["named first"], gold), ks=(1,)).at == {1: 1.0}


def test_recall_on_the_named_and_the_new_gold_items_apart():
    model = _model()
    records = [
        # gold A was named, gold C was not; the genre named is no item
        Record(["I liked A (2001)", "", "any horror?"], ["A (2001)", "Horror"], ["A (2001)", "C (2003)"], ""),
        Record(["I liked B (2002)"], ["B (2002)"], ["D (2004)"], ""),  # a new gold item only
        Record(["hi"], [], [], ""),  # no gold item: counts in neither part
    ]
    assert [named_and_new_gold(r, model.kg) for r in records] == [([0], [2]), ([], [3]), ([], [])]
    rankings = [[0, 1, 2, 3], [1, 0, 2, 3], [3, 2, 1, 0]]  # the first copies what it read; the second repeats B
    parts = recall_named_and_new(rankings, records, model.kg, ks=(1, 3))
    assert parts["named"].at == {1: 1.0, 3: 1.0} and parts["named"].samples == 1 and parts["named"].records == 1
    assert parts["new"].at == {1: 0.0, 3: 0.5} and parts["new"].samples == 2 and parts["new"].records == 2
    whole = recall_at_k(zip(rankings, (gold_items(r, model.kg) for r in records)), ks=(1, 3))
    assert whole.samples == parts["named"].samples + parts["new"].samples
    assert whole.at[3] == (1.0 * 1 + 0.5 * 2) / 3  # the parts weighted by their samples give the whole


def test_the_named_gold_items_parted_by_whether_training_repeats_their_film():
    model = _model()
    train = [
        Record(["I liked A (2001)"], ["A (2001)"], ["A (2001)", "C (2003)"], ""),  # A repeated; C new there
        Record(["B (2002)?"], ["B (2002)"], ["D (2004)"], ""),  # nothing repeated
    ]
    repeated = repeated_films(train, model.kg)
    assert repeated == frozenset({0})  # C was a gold item there, but not one the conversation named
    held_out = [
        Record(["A (2001) again"], ["A (2001)"], ["A (2001)"], ""),  # a repeat training had
        Record(["and C (2003)"], ["C (2003)", "B (2002)"], ["C (2003)", "D (2004)"], ""),  # C named, never repeated
        Record(["hi"], [], ["B (2002)"], ""),  # a new gold item only: in neither part
    ]
    rankings = [[1, 0, 2, 3], [3, 1, 0, 2], [1, 0, 2, 3]]
    parts = recall_named_by_repeats(rankings, held_out, model.kg, repeated, ks=(2,))
    assert parts["named_repeated"].at == {2: 1.0} and parts["named_repeated"].samples == 1
    assert parts["named_other"].at == {2: 0.0} and parts["named_other"].samples == 1  # C is last for its record
    named = recall_named_and_new(rankings, held_out, model.kg, ks=(2,))["named"]
    assert named.samples == parts["named_repeated"].samples + parts["named_other"].samples


def test_genre_following_counts_the_asked_genre_in_the_top_ten():
    kg = KGData({n: i for i, n in enumerate(NAMES)}, {"genre": 0}, {"0": [[0, 4]]}, [0, 1, 2, 3], name="tiny")
    genres = {"A (2001)": ("Horror",), "B (2002)": ("Comedy",), "C (2003)": ("Horror", "Drama"), "D (2004)": ()}
    catalog = Catalog(
        [Item(id=str(i), title=n[:-7], year=2001 + i, genres=genres[n]) for i, n in enumerate(NAMES[:4])], name="tiny"
    )
    items = {i: catalog.items[i] for i in range(4)}
    asked = []

    def recommend(inp, k):
        asked.append((inp.context, inp.entities))
        return [(e, 1.0) for e in (2, 0, 1, 3)[:k]]  # C, A (horror), B, D

    model = SimpleNamespace(kg=kg, recommend=recommend)
    shares = genre_following(model, catalog, items.get, k=4)
    # only the genres the KG knows are asked (Horror; Comedy and Drama have no entity here), each alone
    assert shares == {"Horror": 0.5}
    assert asked == [(["Any good horror films?"], ["Horror"])]
    assert genre_following(model, catalog, items.get, k=1) == {"Horror": 1.0}
