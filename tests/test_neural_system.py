"""The common adapter (NeuralCRS, its ``enhanced`` policy) and the registry entries of KBRD, BARCOR and UniCRS.

Adapter behaviour is pinned with a minimal NeuralModel subclass (a scripted model: the test double of
the interface the adapter consumes); the whole path — save in the published layout, resolve, load,
answer — runs with a tiny real KBRD.
"""

from __future__ import annotations

import json
import re
import types

import pytest
from neural_fixtures import catalog, kg  # noqa: F401 (module fixtures)

from catalog.catalog import Catalog
from catalog.items import Item
from crs_backends import registry
from crs_backends.neural import kbrd, names
from crs_backends.neural.engine import TOP_K, ConvInput, NeuralModel
from crs_backends.neural.kg_reader import KGData
from crs_backends.neural.sources import CheckpointSource
from crs_backends.neural.system import NeuralCRS, fallback_sentence, load_neural_system, repair_text
from storage.records import Conversation, Turn


class ScriptedModel(NeuralModel):
    """Ranks items in a given order and answers with scripted texts; records what it was given."""

    system = "unicrs"

    def __init__(self, kg: KGData, order: list[int], replies: list[str]):
        self.kg = kg
        self.order = order
        self.replies = list(replies)
        self.inputs: list[ConvInput] = []
        self.items_given: list[list[str] | None] = []

    def recommend(self, inp, k=TOP_K):
        self.inputs.append(inp)
        return [(e, float(-i)) for i, e in enumerate(self.order[:k])]

    def generate(self, inp, *, items=None):
        self.items_given.append(items)
        return self.replies.pop(0) if self.replies else ""


def conversation(*turns: tuple[str, str]) -> Conversation:
    return Conversation(system_id="unicrs", turns=[Turn(role=r, text=t) for r, t in turns])


def item_named(catalog: Catalog, name: str) -> Item:
    return next(i for i in catalog.items if i.name == name)


def test_context_and_entities_as_crs_arena_builds_them(catalog, kg):
    model = ScriptedModel(kg, kg.item_ids, ["ok"])
    crs = NeuralCRS(model, catalog)
    conv = conversation(
        ("system", "Hello! What do you like?"),
        ("user", "I loved The Godfather (1972)."),
        ("user", "Also crime films with Al Pacino"),
    )
    inp = crs.conv_input(conv)
    assert inp.context == [
        "",
        "Hello! What do you like?",
        "I loved The Godfather (1972). Also crime films with Al Pacino",
    ]
    assert inp.entities[:2] == ["The Godfather (1972)", "Al Pacino"]
    # duplicates are kept: linking and the exact mention both find the title
    assert inp.entities.count("The Godfather (1972)") >= 2
    assert crs.conv_input(conversation(("user", ""))).entities == []


def test_turn_items_top_list_and_slots(catalog, kg):
    godfather = item_named(catalog, "The Godfather (1972)")
    order = [kg.entity2id[godfather.name]] + [e for e in kg.item_ids if e != kg.entity2id[godfather.name]]
    model = ScriptedModel(kg, order, ["Have you seen <movie>? Or <movie> ?"])
    crs = NeuralCRS(model, catalog, list_size=5, policy="enhanced")
    turn = crs.respond(conversation(("user", "I loved The Godfather (1972), something like it?")))
    ids = [r.id for r in turn.items]
    assert len(ids) == 5 and godfather.id not in ids  # the user's own title is not recommended back
    assert all(i in catalog for i in ids)
    assert len(turn.ranking) == TOP_K and turn.ranking[0].id == ids[0]
    names = [r.title for r in turn.items]
    assert model.items_given[0] == names
    assert turn.text == f"Have you seen {names[0]}? Or {names[1]}?"
    assert turn.metadata["system"] == "unicrs" and "The Godfather (1972)" in turn.metadata["entities"]
    assert godfather.id in turn.metadata["user_items"]


@pytest.mark.parametrize("reply", ["Have you seen ?", "Have you seen <pad> ?", "", "   ", "<unk>", '"" ?'])
def test_no_empty_slot_or_empty_reply_survives(catalog, kg, reply):
    model = ScriptedModel(kg, kg.item_ids, [reply])
    crs = NeuralCRS(model, catalog, list_size=3, policy="enhanced")
    turn = crs.respond(conversation(("user", "anything")))
    first = turn.items[0].title
    assert first in turn.text
    assert not re.search(r"seen\s*\?|<\w+>|\"\"", turn.text)
    assert turn.metadata["repaired"] is True and turn.metadata["generated"] == reply


def test_repair_leaves_normal_questions_alone():
    for text in [
        "What kind of movies do you like?",
        "What movies have you seen?",
        "Do you like scary movies?",
        "You should watch Police Academy (1984)",
    ]:
        assert repair_text(text, ["Heat (1995)"]) == (text, False)
    assert fallback_sentence([]).startswith("Could you tell me")
    assert (
        fallback_sentence(["A (1990)", "B (1991)", "C (1992)", "D (1993)"])
        == "You might like A (1990), B (1991) or C (1992)."
    )


def test_items_outside_the_chat_catalog_are_skipped(catalog, kg):
    # a KG whose best item is unknown to the chat catalog (and one with a near title but another year)
    entity2id = {"Made Up Film (2031)": 0, "The Godfather (1950)": 1, "Heat (1995)": 2, "Crime": 3}
    small = KGData(entity2id, {"genre": 0}, {"0": [[0, 3]], "2": [[0, 3]]}, [0, 1, 2])
    model = ScriptedModel(small, [0, 1, 2], ["Try <movie>."])
    turn = NeuralCRS(model, catalog, policy="enhanced").respond(conversation(("user", "a crime movie")))
    assert [r.title for r in turn.items] == ["Heat (1995)"] and turn.text == "Try Heat (1995)."


def test_info_marks_small_versions(catalog, kg, tmp_path):
    model = ScriptedModel(kg, kg.item_ids, [])
    small = CheckpointSource("unicrs", tmp_path, "bundled", tmp_path, "small local", "v1")
    info = NeuralCRS(model, catalog, source=small).info
    # a small version answers under its own id and name: its votes are not the published UniCRS's (#40)
    assert info.id == "unicrs_small" and info.label == "UniCRS (small)" and info.demo
    assert info.variant == "small local version (trained here for the bundled catalog, v1)"
    published = CheckpointSource("unicrs", tmp_path, "redial", tmp_path, "archive", "CRS Arena archive")
    info = NeuralCRS(model, catalog, source=published).info
    assert not info.demo and info.variant == "published checkpoint (redial, CRS Arena archive)"
    assert info.id == "unicrs" and info.label == "UniCRS"


# ---------------------------------------------------------------- a tiny real KBRD, end to end


@pytest.fixture(scope="module")
def kbrd_set(tmp_path_factory, catalog, kg):
    """A tiny KBRD saved in the published layout with its KG, as a CRS_MODELS_DIR."""
    texts = [
        f"I like {i.name}. You should watch {i.name}, a {' '.join(i.genres).lower()} film" for i in catalog.items[:200]
    ]
    model = kbrd.KBRD.create(kg, texts, size="small", seed=0)
    root = tmp_path_factory.mktemp("models")
    model.save(root, "bundled")
    kg.save(root / "kg_bundled")
    return root


@pytest.fixture
def configured(kbrd_set, tmp_path, monkeypatch):
    monkeypatch.setenv("CRS_MODELS_DIR", str(kbrd_set))
    monkeypatch.setenv("CRS_MODELS_DATASET", "bundled")
    monkeypatch.setenv("CRS_ARENA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(registry, "_built", {})
    return kbrd_set


def test_real_kbrd_answers_through_the_adapter(configured, catalog):
    """The enhanced policy end to end (CRS Arena's policy: tests/test_neural_policy.py)."""
    crs = load_neural_system("kbrd", catalog, policy="enhanced")
    assert crs.source.origin == "local dir" and crs.info.label == "KBRD" and not crs.info.demo
    conv = conversation(("user", "Hi! I love crime movies like The Godfather (1972) with Al Pacino"))
    turn = crs.respond(conv)
    assert turn.text.strip() and not re.search(r"seen\s*\?|<movie>", turn.text)
    assert len(turn.items) == crs.list_size and all(r.id in catalog for r in turn.items)
    assert "the-godfather-1972" not in [r.id for r in turn.items]
    assert turn.metadata["origin"] == "local dir" and turn.metadata["dataset"] == "bundled"
    conv.turns.append(turn)
    conv.turns.append(Turn(role="user", text="Something more recent?"))
    second = crs.respond(conv)
    assert second.text.strip() and second.items


def test_registry_builds_kbrd_from_the_configured_set(configured):
    info = registry.system_info("kbrd")
    assert info.label == "KBRD" and "local directory" in info.variant and not registry._built  # nothing loaded
    system = registry.get_system("kbrd")
    assert isinstance(system, NeuralCRS) and registry.get_system("kbrd") is system
    assert registry.system_info("kbrd") == system.info


def test_registry_gives_a_clear_error_without_any_checkpoint(tmp_path, monkeypatch):
    monkeypatch.delenv("CRS_MODELS_DIR", raising=False)
    monkeypatch.setenv("CRS_ARENA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setenv("CRS_NEURAL_BUILD", "never")
    monkeypatch.setattr(names, "SHIPPED_SMALL_ROOT", tmp_path / "no_shipped_set")  # a trimmed copy of the repository
    monkeypatch.setattr(registry, "_built", {})
    with pytest.raises(registry.SystemUnavailable) as err:
        registry.get_system("barcor")
    assert "No checkpoint for BARCOR" in str(err.value) and "sources fetch" in str(err.value)
    info = registry.system_info("barcor")
    assert info.variant.startswith("not available") and "sources fetch" in info.variant


def test_registry_reports_a_broken_checkpoint(tmp_path, monkeypatch, kg):
    root = tmp_path / "broken"
    for part in ("rec", "conv"):
        (root / f"kbrd_{part}_bundled").mkdir(parents=True)
    (root / "kbrd_rec_bundled" / "model.pt").write_bytes(b"not a checkpoint")
    (root / "kbrd_conv_bundled" / "config.json").write_text(json.dumps({}))
    kg.save(root / "kg_bundled")
    monkeypatch.setenv("CRS_MODELS_DIR", str(root))
    monkeypatch.setenv("CRS_MODELS_DATASET", "bundled")
    monkeypatch.setattr(registry, "_built", {})
    with pytest.raises(registry.SystemUnavailable) as err:
        registry.get_system("kbrd")
    assert str(root / "kbrd_rec_bundled" / "model.pt") in str(err.value)


def test_registry_builds_the_small_versions_once(tmp_path, monkeypatch, kbrd_set):
    """No published set and building allowed (CRS_NEURAL_BUILD=auto; the default is never, a build takes hours): the
    factory asks the builder, then loads what it built."""
    monkeypatch.delenv("CRS_MODELS_DIR", raising=False)
    monkeypatch.setenv("CRS_NEURAL_BUILD", "auto")
    monkeypatch.setenv("CRS_ARENA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(registry, "_built", {})
    monkeypatch.setattr(names, "SHIPPED_SMALL_ROOT", tmp_path / "no_shipped_set")
    built_root = names.small_models_dir()
    calls = []

    def ensure_small_models(progress=None):
        import shutil

        calls.append(1)
        shutil.copytree(kbrd_set, built_root)
        manifest = {"dataset": "bundled", "version": "v1", "complete": True}
        (built_root / "manifest.json").write_text(json.dumps(manifest))
        if progress:
            progress("kbrd", 1, 1)

    builder = types.SimpleNamespace(ensure_small_models=ensure_small_models)
    monkeypatch.setattr(registry, "_small_builder", lambda: builder)
    info = registry.system_info("kbrd")
    assert info.demo and "built on first use" in info.variant
    system = registry.get_system("kbrd")
    assert calls == [1] and system.info.demo and system.source.small
    assert system.info.variant == "small local version (trained here for the bundled catalog, v1)"
    # what runs is the small version, under its own id and name; "kbrd" offers it, one loaded copy for both
    assert (system.info.id, system.info.label) == ("kbrd_small", "KBRD (small)")
    assert registry.get_system("kbrd_small") is system and calls == [1]
    assert registry.system_info("kbrd_small") == system.info
    assert "kbrd" in registry.system_ids() and "kbrd_small" not in registry.system_ids()  # one entry to choose
    ready = registry.ready_system_ids()
    assert "kbrd_small" in ready and "kbrd" not in ready  # the arena pairs (and records) what runs
    line = registry.system_line(system.info)
    assert line.startswith("KBRD (small) · KBRD's architecture at small size")
    assert line.endswith("trained here for the bundled catalog, v1; not measured on ReDial's test split.")  # no figure


def test_ready_systems_leave_out_neural_ones_without_checkpoints(tmp_path, monkeypatch, kbrd_set):
    monkeypatch.delenv("CRS_MODELS_DIR", raising=False)
    monkeypatch.setenv("CRS_ARENA_CACHE", str(tmp_path / "cache"))
    monkeypatch.setattr(registry, "_built", {})
    monkeypatch.setattr(names, "SHIPPED_SMALL_ROOT", tmp_path / "no_shipped_set")
    monkeypatch.setattr(registry, "_small_builder", lambda: None)
    assert registry.ready_system_ids() == ["chatcrs", "retrieval"]
    monkeypatch.setenv("CRS_MODELS_DIR", str(kbrd_set))
    monkeypatch.setenv("CRS_MODELS_DATASET", "bundled")
    assert registry.ready_system_ids() == ["chatcrs", "retrieval", "kbrd"]
