"""Property-based fuzzing (hypothesis) of every way text gets in: the log readers and the chat message.

Properties: a reader either returns conversations or raises :class:`LogFormatError` (never another
exception); what it returns is stored whole or refused whole by the upload path (never a partial
write), and every stored text is valid UTF-8. ``prepare_user_message`` either refuses a message as
empty or returns storable text within the limit, and storing it writes exactly one turn.
"""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from catalog.catalog import get_catalog
from crs_backends.session import MAX_MESSAGE_CHARS, EmptyMessage, prepare_user_message
from evaluators.log_readers import FORMATS, LogFormatError, read_logs
from storage.conversations import append_turns
from storage.db import open_db
from storage.records import Conversation, Turn
from storage.uploads import UploadRefused, store

SETTINGS = settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ODD = ["\ud800", "\udfff", "\x00", "\x07", "\u200b", "\u202e", "\ufeff", "é", "🎬", "\n", "<", "]"]
PIECES = ["<script>", "](javascript:x)", "I would recommend the following items: 1: Heat (1995)", "upload:"]
text = st.lists(
    st.one_of(st.text(alphabet=st.one_of(st.characters(), st.sampled_from(ODD)), max_size=20), st.sampled_from(PIECES)),
    max_size=4,
).map("".join)
scalar = st.one_of(st.none(), st.booleans(), st.integers(-10, 10**12), st.floats(allow_nan=False), text)
json_value = st.recursive(
    scalar,
    lambda inner: st.one_of(st.lists(inner, max_size=4), st.dictionaries(text, inner, max_size=4)),
    max_leaves=12,
)
turn = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(["user", "system"]), json_value), "text": st.one_of(text, json_value)},
    optional={"items": json_value, "metadata": json_value},
)
ours = st.fixed_dictionaries(
    {
        "system_id": st.one_of(st.sampled_from(["kbrd", "upload:x", "a.b-c_d"]), text, json_value),
        "turns": st.one_of(st.lists(turn, max_size=5), json_value),
    },
    optional={
        "id": st.one_of(text, json_value),
        "history": st.lists(turn, max_size=2),
        "domain": json_value,
        "targets": json_value,
        "metadata": json_value,
        "status": json_value,
        "created_at": json_value,
    },
)
utterance = st.fixed_dictionaries(
    {"participant": st.one_of(st.sampled_from(["USER", "AGENT"]), json_value), "utterance": st.one_of(text, json_value)}
)
dial = st.fixed_dictionaries(
    {
        "conversation ID": st.one_of(text, json_value),
        "agent": st.one_of(st.fixed_dictionaries({"id": st.one_of(text, json_value)}), json_value),
        "conversation": st.one_of(st.lists(utterance, max_size=4), json_value),
    },
    optional={"user": json_value, "metadata": json_value},
)
eval_turn = st.fixed_dictionaries(
    {"role": st.one_of(st.sampled_from(["USER", "ASST"]), json_value), "utterance": st.one_of(text, json_value)},
    optional={"turn_ind": json_value, "turn_level_aggregated": json_value},
)
eval_record = st.fixed_dictionaries(
    {
        "conv_id": st.one_of(text, json_value),
        "dialogue": st.one_of(st.lists(eval_turn, max_size=4), json_value),
        "dial_level_aggregated": json_value,
    }
)


# mostly well-formed records with odd text: they reach the storage path
valid_names = st.sampled_from(["kbrd", "barcor_redial", "upload:x", "a.b-c_d", "k" * 40])
name = st.one_of(valid_names, valid_names, valid_names, text)
good_turn = st.fixed_dictionaries({"role": st.sampled_from(["user", "system"]), "text": text})
good_ours = st.fixed_dictionaries(
    {
        "system_id": name,
        "turns": st.tuples(st.lists(good_turn, max_size=4), good_turn.map(lambda t: {**t, "role": "system"})).map(
            lambda p: [*p[0], p[1]]
        ),
    },
    optional={"id": st.one_of(st.sampled_from(["a", "b", "c"]), text)},
)
good_dial = st.fixed_dictionaries(
    {
        "conversation ID": st.one_of(st.sampled_from(["a", "b"]), text),
        "agent": st.fixed_dictionaries({"id": name}),
        "conversation": st.lists(
            st.fixed_dictionaries({"participant": st.sampled_from(["USER", "AGENT"]), "utterance": text}), max_size=4
        ),
    }
)


def dump(value) -> str:
    return json.dumps(value, ensure_ascii=True)  # escapes as a file would carry them (\ud800 included)


files = st.one_of(
    st.tuples(st.just("log.jsonl"), st.lists(good_ours, max_size=4).map(lambda rs: "\n".join(dump(r) for r in rs))),
    st.tuples(st.just("crs_arena_dial_closed.json"), st.lists(good_dial, max_size=4).map(dump)),
    st.tuples(st.just("log.jsonl"), st.lists(ours, max_size=4).map(lambda rs: "\n".join(dump(r) for r in rs))),
    st.tuples(st.just("log.jsonl"), st.lists(json_value, max_size=3).map(lambda rs: "\n".join(dump(r) for r in rs))),
    st.tuples(st.just("crs_arena_dial_open.json"), st.lists(dial, max_size=3).map(dump)),
    st.tuples(st.just("crs_arena_eval_dev.json"), st.lists(eval_record, max_size=3).map(dump)),
    st.tuples(st.sampled_from(["log.json", "log.jsonl"]), json_value.map(dump)),
    st.tuples(st.sampled_from(["log.json", "log.jsonl"]), st.binary(max_size=200)),
    st.tuples(st.sampled_from(["log.json", "log.jsonl"]), st.integers(1, 3000).map(lambda n: "[" * n + "]" * n)),
)


def counts(db) -> tuple[int, int]:
    return db["conversations"].count, db["turns"].count


@SETTINGS
@given(file=files, fmt=st.sampled_from(["auto"] * 6 + [f for f in FORMATS if f != "ievalm"]))
def test_readers_never_raise_anything_but_a_format_error_and_never_write_partly(file, fmt):
    name, content = file
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / name
        path.write_bytes(content if isinstance(content, bytes) else content.encode("utf-8", "surrogatepass"))
        try:
            result = read_logs(path, fmt, get_catalog())
        except LogFormatError as e:
            assert e.where and e.expected  # a message naming the place and what was expected
            event("refused by the reader")
            return
        db = open_db(Path(folder) / "fuzz.db")
        try:
            before = counts(db)
            judgeable = [c for c in result.conversations if any(t.role == "system" for t in c.turns)]
            try:
                report = store(db, judgeable, upload=True)
            except UploadRefused:
                assert counts(db) == before  # refused whole: nothing written
                event("refused by the upload rules")
                return
            event(
                f"stored {min(len(report.conversations), 2)}{'+' if len(report.conversations) >= 2 else ''} "
                "conversation(s)"
            )
            distinct = {c.id: c for c in report.conversations}
            assert counts(db)[0] - before[0] == len(distinct)  # whole: every conversation, each once
            assert counts(db)[1] - before[1] == sum(len(c.all_turns) for c in distinct.values())
            for row in db.query("select text from turns"):
                row["text"].encode("utf-8")  # every stored text is valid UTF-8
            for row in db.query("select id, system_id, metadata from conversations"):
                assert row["system_id"].startswith("upload:")
                (row["id"] + row["metadata"]).encode("utf-8")
        finally:
            db.close()


@SETTINGS
@given(message=st.one_of(text, st.text(max_size=5), st.none(), st.integers(), st.just("x" * (MAX_MESSAGE_CHARS + 7))))
def test_prepare_user_message_refuses_or_gives_storable_text(message):
    try:
        prepared = prepare_user_message(message)
    except EmptyMessage as e:
        assert "empty" in str(e)
        return
    assert prepared.text and prepared.text == prepared.text.strip() and len(prepared.text) <= MAX_MESSAGE_CHARS
    prepared.text.encode("utf-8")
    with tempfile.TemporaryDirectory() as folder:
        db = open_db(Path(folder) / "fuzz.db")
        try:
            conversation = Conversation(system_id="retrieval")
            append_turns(db, conversation, [Turn("user", prepared.text)])
            rows = list(db.query("select text from turns"))
            assert [r["text"] for r in rows] == [prepared.text]
        finally:
            db.close()
