"""A small local version is a system of its own (#40): ``kbrd_small``, shown as "KBRD (small)", so that its votes
and scores never count as the published KBRD's. The registry answers under that id wherever the small version runs,
and the migration moves what was recorded under ``kbrd`` while a small version answered."""

from __future__ import annotations

import json

from sqlite_utils import Database

from crs_backends.neural.names import SMALL_IDS, SMALL_LABELS, SYSTEM_OF_SMALL_ID
from crs_backends.neural.sources import CheckpointSource, recorded_recall
from storage.migrations import migrations

T0 = "2026-11-27T10:00:00+00:00"
BEFORE = "m007_small_versions_own_ids"


def test_a_small_source_has_its_own_id_and_name(tmp_path):
    small = CheckpointSource("kbrd", tmp_path, "bundled", tmp_path, "small local", "v5")
    published = CheckpointSource("kbrd", tmp_path, "redial", tmp_path, "archive", "CRS Arena archive")
    assert (small.system_id, small.label) == ("kbrd_small", "KBRD (small)")
    assert (published.system_id, published.label) == ("kbrd", "KBRD")
    assert SMALL_IDS["unicrs"] == "unicrs_small" and SMALL_LABELS["unicrs"] == "UniCRS (small)"
    assert SYSTEM_OF_SMALL_ID["barcor_small"] == "barcor"


def test_the_recorded_recall_is_read_from_the_benchs_record_where_there_is_one(tmp_path):
    figures = {"recall": {"barcor": {"1": 0.05, "10": 0.2057, "50": 0.38}}}
    (tmp_path / "redial_test.json").write_text(json.dumps(figures), encoding="utf-8")
    assert recorded_recall(tmp_path, "barcor")["10"] == 0.2057
    assert recorded_recall(tmp_path, "kbrd") == {}  # the set records none for it
    assert recorded_recall(tmp_path / "nowhere", "barcor") == {}


def _conversation(db: Database, cid: str, system: str, origin: str | None, *, source: str = "arena") -> None:
    db.table("conversations").insert(
        {"id": cid, "system_id": system, "domain": "movies", "source": source, "status": "active", "created_at": T0}
    )
    turns = [("user", "A heist movie?", "{}")]
    if origin is not None:
        turns.append(("system", "Try Heat (1995).", json.dumps({"system": system, "origin": origin})))
    db.table("turns").insert_all(
        {
            "conversation_id": cid,
            "part": "interaction",
            "idx": idx,
            "role": role,
            "text": text,
            "metadata": meta,
            "created_at": T0,
        }
        for idx, (role, text, meta) in enumerate(turns)
    )


def test_the_migration_moves_what_a_small_version_answered_to_its_own_id():
    db = Database(memory=True)
    migrations.apply(db, stop_before=BEFORE)
    _conversation(db, "small-kbrd", "kbrd", "small local")
    _conversation(db, "published-kbrd", "kbrd", "archive")
    _conversation(db, "small-unicrs", "unicrs", "small local")
    _conversation(db, "no-answer", "barcor", None)  # a side that never answered: nothing says what ran
    _conversation(db, "upload", "kbrd", None, source="upload")  # an uploaded log under kbrd: no origin
    _conversation(db, "chat", "chatcrs", "")
    db.table("turns").insert(  # a turn whose metadata is not JSON is read as saying nothing
        {"conversation_id": "upload", "part": "interaction", "idx": 1, "role": "system", "text": "x",
         "metadata": "not json", "created_at": T0}
    )  # fmt: skip
    db.table("battles").insert_all(
        [
            {"id": "b1", "system_a": "kbrd", "system_b": "kbrd", "conversation_a": "small-kbrd",
             "conversation_b": "published-kbrd", "created_at": T0},
            {"id": "b2", "system_a": "barcor", "system_b": "unicrs", "conversation_a": "no-answer",
             "conversation_b": "small-unicrs", "created_at": T0},
        ]
    )  # fmt: skip
    db.execute("insert into votes (battle_id, choice, created_at) values ('b1', 'a', ?), ('b2', 'b', ?)", [T0, T0])
    db.table("human_labels").insert_all(
        {"conversation_id": cid, "system_id": system, "battle_id": "b1", "side": side, "rater": "r", "origin": "arena",
         "dialogue_overall": 3.0, "created_at": T0}
        for cid, system, side in (("small-kbrd", "kbrd", "a"), ("published-kbrd", "kbrd", "b"))
    )  # fmt: skip
    version = db.execute("select version from board_state").fetchone()[0]

    migrations.apply(db)

    systems = {r["id"]: r["system_id"] for r in db.query("select id, system_id from conversations")}
    assert systems == {
        "small-kbrd": "kbrd_small",
        "published-kbrd": "kbrd",
        "small-unicrs": "unicrs_small",
        "no-answer": "barcor",
        "upload": "kbrd",
        "chat": "chatcrs",
    }
    battles = {r["id"]: (r["system_a"], r["system_b"]) for r in db.query("select * from battles")}
    assert battles == {"b1": ("kbrd_small", "kbrd"), "b2": ("barcor", "unicrs_small")}
    labels = {r["conversation_id"]: r["system_id"] for r in db.query("select * from human_labels")}
    assert labels == {"small-kbrd": "kbrd_small", "published-kbrd": "kbrd"}
    assert db.execute("select count(*) from votes").fetchone()[0] == 2  # the votes stay; who they are about moved
    assert db.execute("select version from board_state").fetchone()[0] > version  # the board is computed again


def test_the_line_says_when_the_redial_figure_comes_from_another_budget(tmp_path, monkeypatch):
    """The app's line for a small system quotes the R@10 its recipe reached on ReDial; where the ReDial configuration
    trained for other steps than the running set (UniCRS's prompts: an epoch there, 150 steps in the shipped set),
    the line says both."""
    from crs_backends import registry
    from crs_backends.neural import sources

    source = CheckpointSource("unicrs", tmp_path, "bundled", tmp_path, "small local", "v6")
    monkeypatch.setattr(sources, "small_source", lambda system, root=None: source)
    shipped = {"epochs": 1, "max_steps": 150, "batch_size": 8, "lr": 1e-3}
    kbrd = {"epochs": 10, "max_steps": 2900, "batch_size": 32, "lr": 3e-3}
    manifest = {
        "train_settings": {"unicrs": shipped, "kbrd": kbrd},
        "losses": {"unicrs": {"rec": {"steps": 75}, "conv": {"steps": 75}}, "kbrd": {"rec": {"steps": 1450}}},
    }
    (tmp_path / "manifest.json").write_text(json.dumps(manifest), encoding="utf-8")
    recall = {"1": 0.03, "10": 0.1234, "50": 0.3, "records": 3341}
    longer = {"epochs": 1, "max_steps": None, "stage_steps": {"conv": 150}, "batch_size": 8}
    # recorded before the budget named stage_epochs: a key it lacks reads as unset, the same recipe
    same = {"epochs": 10, "max_steps": 2900, "stage_steps": None, "batch_size": 32}
    figures = {
        "recall": {
            "unicrs": {**recall, "budget": longer, "steps": {"conv": 150, "rec": 1334}},
            # the same budget over another dataset's records: other step counts, the same recipe
            "kbrd": {**recall, "budget": same, "steps": {"rec": 2000}},
        }
    }
    (tmp_path / "redial_test.json").write_text(json.dumps(figures), encoding="utf-8")
    line = registry.small_recall_note("unicrs")
    assert line.startswith("R@10 0.123 on ReDial's test split (")
    assert "trained on ReDial for rec 1,334 + conv 150 steps, this set for rec 75 + conv 75" in line
    assert "(the same recipe trained on ReDial;" in registry.small_recall_note("kbrd")


def test_the_line_says_when_the_redial_figure_comes_from_another_variant(tmp_path, monkeypatch):
    """The ReDial-trained small UniCRS's recommendation prompt is also a per-layer prefix (recipe r8); a set trained
    before it has the input vectors alone: its line says the figure comes from the other form, never "the same"."""
    from crs_backends import registry
    from crs_backends.neural import sources
    from crs_backends.neural.unicrs_smollm import PROMPT_FORMS, REC_SCORES, SETTINGS_FILE

    source = CheckpointSource("unicrs", tmp_path, "bundled", tmp_path, "small local", "v7")
    monkeypatch.setattr(sources, "small_source", lambda system, root=None: source)
    budget = {"epochs": 1, "max_steps": 150, "batch_size": 8, "lr": 1e-3}
    (tmp_path / "manifest.json").write_text(json.dumps({"train_settings": {"unicrs": budget}}), encoding="utf-8")
    settings = tmp_path / "unicrs_conv_bundled" / SETTINGS_FILE
    settings.parent.mkdir()
    settings.write_text(json.dumps({"format": 1, "conv_slots": 8}), encoding="utf-8")  # from before the prefix
    prefix = {"recommendation prompt": PROMPT_FORMS[True]}
    figures = {"recall": {"unicrs": {"10": 0.15, "records": 3341, "budget": budget, "variant": prefix}}}
    (tmp_path / "redial_test.json").write_text(json.dumps(figures), encoding="utf-8")
    line = registry.small_recall_note("unicrs")
    assert "the same" not in line
    assert f"recommendation prompt: {PROMPT_FORMS[True]} there, {PROMPT_FORMS[False]} here" in line
    settings.write_text(json.dumps({"format": 1, "rec_layer_prefix": True}), encoding="utf-8")
    assert "(the same recipe trained on ReDial; bench" in registry.small_recall_note("unicrs")
    # a figure from before the scoring was told apart (recipe r8) is the standardised model's: a set that scores as
    # UniCRS does (r9) is told so
    settings.write_text(json.dumps({"format": 1, "rec_layer_prefix": True, "rec_score": "raw"}), encoding="utf-8")
    line = registry.small_recall_note("unicrs")
    assert f"recommendation score: {REC_SCORES['standardised']} there, {REC_SCORES['raw']} here" in line
    assert "the same" not in line
    # a figure from recipe r14 on read UniCRS's windows, which a set at the short ones is told
    raw = {"recommendation prompt": PROMPT_FORMS[True], "recommendation score": REC_SCORES["raw"]}
    wide = "the last 200 decoder tokens, 200 word pieces and 32 entities"
    figures["recall"]["unicrs"]["variant"] = {**raw, "what it reads": wide}
    (tmp_path / "redial_test.json").write_text(json.dumps(figures), encoding="utf-8")
    line = registry.small_recall_note("unicrs")
    assert f"what it reads: {wide} there, the last 80 decoder tokens, 64 word pieces and 8 entities here" in line
    assert "recommendation score" not in line and "the same" not in line
