"""Log readers: the real CRS Arena files, our JSONL, iEvaLM chat logs, malformed input."""

import json

import pytest

from catalog.catalog import load_ievalm
from evaluators.log_readers import (
    LogFormatError,
    detect_format,
    listed_titles,
    read_ievalm,
    read_logs,
    write_jsonl,
)
from storage.records import Conversation, ItemRef, Turn


@pytest.fixture(scope="module")
def redial(shared_data):
    return load_ievalm(shared_data / "redial")


@pytest.mark.parametrize("name", ["crs_arena_dial_open.json", "crs_arena_dial_closed.json"])
def test_crsarena_dial_reads_every_dialogue(shared_data, name):
    path = shared_data / "crsarena" / name
    raw = json.loads(path.read_text(encoding="utf-8"))
    result = read_logs(path)
    assert result.format == "crsarena_dial"
    assert len(result.conversations) + len(result.skipped) == len(raw)
    assert all(s.reason for s in result.skipped)
    assert [c.id for c in result.conversations] == [r["conversation ID"] for r in raw if r["conversation"]]
    assert {c.system_id for c in result.conversations} == {r["agent"]["id"] for r in raw}
    assert all(c.source == "import" and c.turns for c in result.conversations)
    first, record = result.conversations[0], raw[0]
    assert [t.text for t in first.turns] == [u["utterance"] for u in record["conversation"]]
    assert [t.role for t in first.turns] == [
        "user" if u["participant"] == "USER" else "system" for u in record["conversation"]
    ]
    assert first.metadata["setting"] in name and first.metadata["dataset"] in first.system_id


def test_crsarena_dial_lists_map_to_the_catalog(shared_data, redial):
    path = shared_data / "crsarena" / "crs_arena_dial_open.json"
    plain = read_logs(path).conversations[0]
    mapped = read_logs(path, catalog=redial).conversations[0]
    assert plain.id == "barcor_redial_03368a16-93bd-4b21-885d-b9a21e3498ba"
    listed = plain.turns[3].items
    assert [ref.title for ref in listed] == [
        "Blade Runner 2049 (2017)",
        "Star Wars: Episode VIII – The Last Jedi (2017)",
        "Arrival (2016)",
    ]
    assert all(ref.id == f"title:{ref.title}" for ref in listed)
    assert [redial.get(ref.id).name for ref in mapped.turns[3].items] == [ref.title for ref in listed]
    assert plain.turns[1].items == []  # "Have you seen Blade Runner 2049 (2017)?" has no list


def test_crsarena_eval_dev_has_93_labelled_dialogues(shared_data):
    path = shared_data / "crsarena" / "crs_arena_eval_dev.json"
    raw = json.loads(path.read_text(encoding="utf-8"))
    result = read_logs(path)
    assert result.format == "crsarena_eval" and not result.skipped
    assert len(result.conversations) == len(result.labels) == 93
    assert {c.id for c in result.conversations} == set(result.labels)
    assert len({c.system_id for c in result.conversations}) == 9
    first = result.conversations[0]
    assert first.system_id == "barcor_opendialkg"
    labels = result.labels[first.id]
    assert labels.dialogue == {k: float(v) for k, v in raw[0]["dial_level_aggregated"].items()}
    assert labels.turns[1] == {"relevance": 0.0, "interestingness": 1.0}
    assert first.turns[1].metadata["human_labels"] == labels.turns[1]
    assert sum(len(lab.turns) for lab in result.labels.values()) == sum(
        1 for r in raw for u in r["dialogue"] if "turn_level_aggregated" in u
    )
    assert [ref.title for ref in first.turns[3].items] == ["Larry Crowne", "Zoolander", "Vanilla Sky"]


@pytest.mark.parametrize(
    "text,titles",
    [
        ("I would recommend the following items:  \n1: Heat (1995)  \n2: Up (2009)  \n", ["Heat (1995)", "Up (2009)"]),
        (
            "I would recommend the following items   \n1  Black Panther (2018)  \n2  It (2017)",
            ["Black Panther (2018)", "It (2017)"],
        ),
        (
            "I would recommend the following items: 1: Bambi (2013) 2: 2 Guns (2013) 3: Why Him? (2016) ",
            ["Bambi (2013)", "2 Guns (2013)", "Why Him? (2016)"],
        ),
        (
            "I would recommend the following items:  \n4: Ex Machina (2014)  \n"
            "5: Journey 2: The Mysterious Island (2012)",
            ["Ex Machina (2014)", "Journey 2: The Mysterious Island (2012)"],
        ),
        (
            "I would recommend the following items for your nephew   \n1  Coco (2017)  \n2  Moana (2016)",
            ["Coco (2017)", "Moana (2016)"],
        ),
        (
            "I would recommend the following items   \n1  Iron Man 2  \n2  Deadpool\nEnjoy them!\n3  Zoo",
            ["Iron Man 2", "Deadpool"],
        ),
        ("Have you seen Heat (1995)? 1: not a list", []),
    ],
)
def test_listed_titles(text, titles):
    assert listed_titles(text) == titles


def _conversation(**kw) -> Conversation:
    return Conversation(
        system_id="chatcrs",
        source="import",
        history=[Turn("user", "earlier")],
        turns=[
            Turn("user", "a heist film?"),
            Turn("system", "Heat (1995)!", items=[ItemRef("m1", "Heat (1995)")], metadata={"k": 1}),
        ],
        targets=[ItemRef("m1", "Heat (1995)")],
        metadata={"note": "x"},
        **kw,
    )


def test_our_jsonl_round_trip(tmp_path):
    conversations = [_conversation(), _conversation(domain="books")]
    path = write_jsonl(conversations, tmp_path / "logs.jsonl")
    result = read_logs(path)
    assert result.format == "jsonl" and not result.skipped
    assert [c.to_dict() for c in result.conversations] == [c.to_dict() for c in conversations]


def test_jsonl_reports_a_conversation_without_turns(tmp_path):
    path = tmp_path / "logs.jsonl"
    empty = Conversation(system_id="kbrd", id="empty")
    path.write_text("\n".join(json.dumps(c.to_dict()) for c in (_conversation(), empty)) + "\n\n", encoding="utf-8")
    result = read_logs(path)
    assert len(result.conversations) == 1
    assert [(s.where, s.reason) for s in result.skipped] == [("line 2", "the conversation has no turns")]


@pytest.mark.parametrize(
    "name,content,where",
    [
        ("bad.jsonl", '{"system_id": "a", "turns": []}\n{"system_id": "b", "turns": [\n', "line 2"),
        ("norole.jsonl", '{"system_id": "a", "turns": [{"text": "hi"}]}\n', "line 1"),
        (
            "dial.json",
            json.dumps(
                [
                    {
                        "conversation ID": "x",
                        "agent": {"id": "kbrd_redial"},
                        "conversation": [{"participant": "BOT", "utterance": "hi"}],
                    }
                ]
            ),
            "record 0 (x) conversation[0]",
        ),
        (
            "eval.json",
            json.dumps([{"conv_id": "c", "dialogue": [], "dial_level_aggregated": {"overall": "good"}}]),
            "record 0 (c) dial_level_aggregated",
        ),
        ("broken.json", '[{"conversation ID": "x",', "line 1 column"),
        ("other.json", json.dumps({"hello": "world"}), "top level"),
    ],
)
def test_malformed_input_names_file_place_and_expectation(tmp_path, name, content, where):
    path = tmp_path / name
    path.write_text(content, encoding="utf-8")
    with pytest.raises(LogFormatError) as info:
        read_logs(path)
    message = str(info.value)
    assert str(path) in message and where in message and "expected" in message


def _ievalm_log(redial, entity_ids):
    heat = redial.items[0]
    return {
        "dialog_id": "20001",
        "turn_id": 3,
        "context": ["Hi", "", "I like thrillers"],
        "entity": [],
        "rec": [heat.extra["entity_name"]],
        "resp": "gold",
        "simulator_dialog": {
            "context": [
                {"role": "user", "content": "Hi"},
                {"role": "user", "content": "I like thrillers"},
                {
                    "role": "assistant",
                    "content": "Try these.",
                    "entity": [],
                    "rec_items": entity_ids,
                    "rec_success": False,
                },
                {"role": "user", "content": "Seen them. Something darker?", "entity": []},
                {
                    "role": "assistant",
                    "content": "I would recommend the following items: 1: x",
                    "entity": [],
                    "rec_items": entity_ids[::-1],
                    "rec_success": True,
                },
                {"role": "user", "content": "Perfect, thanks!", "entity": []},
            ]
        },
        "persuasiveness_score": "2",
    }


def test_ievalm_chat_log(tmp_path, redial):
    first, second = redial.items[0], redial.items[1]
    folder = tmp_path / "save_5" / "chat" / "kbrd" / "redial_eval"
    folder.mkdir(parents=True)
    ids = [second.extra["entity_id"], 99_999_999, first.extra["entity_id"]]
    (folder / "20001_3.json").write_text(json.dumps(_ievalm_log(redial, ids)), encoding="utf-8")
    assert detect_format(tmp_path) == "ievalm"
    result = read_logs(tmp_path, catalog=redial)
    (conv,) = result.conversations
    assert conv.system_id == "kbrd" and conv.id == "ievalm:kbrd:redial_eval:20001_3"
    assert [t.text for t in conv.history] == ["Hi", "I like thrillers"]  # the empty utterance is not replayed
    assert [t.role for t in conv.turns] == ["system", "user", "system", "user"]
    assert [r.id for r in conv.turns[0].items] == [second.id, "entity:99999999", first.id]
    assert conv.turns[2].metadata == {"rec_success": True}
    assert conv.targets == [first.ref()]
    assert conv.metadata["persuasiveness"] == 2.0 and conv.metadata["dataset"] == "redial_eval"
    # a single file outside the save layout: the system id is given or unknown
    single = read_ievalm(folder / "20001_3.json", redial, system_id="mine").conversations[0]
    assert single.system_id == "mine"


def test_ievalm_needs_a_catalog_with_entity_ids(tmp_path, redial):
    path = tmp_path / "1_1.json"
    path.write_text(json.dumps(_ievalm_log(redial, [])), encoding="utf-8")
    with pytest.raises(ValueError, match="entity id"):
        read_logs(path)


def test_ievalm_log_without_simulated_turns_is_reported(tmp_path, redial):
    log = _ievalm_log(redial, [])
    log["simulator_dialog"]["context"] = log["simulator_dialog"]["context"][:2]
    path = tmp_path / "1_1.json"
    path.write_text(json.dumps(log), encoding="utf-8")
    result = read_logs(path, catalog=redial)
    assert not result.conversations
    assert result.skipped[0].reason == "no simulated turns after the dataset context"


def test_crsarena_eval_null_label_is_none_not_zero(tmp_path):
    path = tmp_path / "eval.json"
    path.write_text(
        json.dumps(
            [
                {
                    "conv_id": "kbrd_redial_00000000-0000-0000-0000-000000000000",
                    "dialogue": [
                        {"turn_ind": 0, "role": "USER", "utterance": "hi"},
                        {
                            "turn_ind": 1,
                            "role": "ASST",
                            "utterance": "hello",
                            "turn_level_aggregated": {"relevance": None, "interestingness": 1},
                        },
                    ],
                    "dial_level_aggregated": {"dialogue_overall": None},
                }
            ]
        ),
        encoding="utf-8",
    )
    result = read_logs(path)
    labels = result.labels["kbrd_redial_00000000-0000-0000-0000-000000000000"]
    assert result.conversations[0].system_id == "kbrd_redial"
    assert labels.dialogue == {"dialogue_overall": None}
    assert labels.turns == {1: {"relevance": None, "interestingness": 1.0}}
