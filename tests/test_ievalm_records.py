"""The one reader of JSON Lines files and of the iEvaLM processed records, and the readers built on them."""

from __future__ import annotations

import json

import pytest

from catalog.ievalm_records import ConvInput, Record, RecordError, iter_records, read_records, write_records
from crs_backends.neural.train_command import DataError, read_records_file
from evaluators.simulator import records as simulator_records
from storage.jsonutil import JsonLineError, iter_json_lines, write_json_lines

ROWS = [
    {
        "dialog_id": "d1",
        "turn_id": 1,
        "context": ["Hi! Any good sci-fi?"],
        "entity": ["Alien (1979)"],
        "rec": ["Heat (1995)"],
        "resp": "Try <movie>.",
    },
    {"dialog_id": "d1", "turn_id": 3, "context": ["Hi", "Hello", "Crime?"], "rec": ["Heat (1995)", " "], "resp": ""},
    {"turn_id": 2, "context": ["Bonjour, un film épatant ?"], "entity": None, "rec": None},
]


def write_rows(path, rows):
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
    return path


# -- JSON Lines ------------------------------------------------------------------------------------------------


def test_json_lines_give_line_numbers_and_skip_blank_lines(tmp_path):
    path = tmp_path / "rows.jsonl"
    path.write_bytes(b'{"a": 1}\r\n\n   \n[2, "\xc3\xa9"]\n"three"')
    assert list(iter_json_lines(path)) == [(1, {"a": 1}), (4, [2, "é"]), (5, "three")]


@pytest.mark.parametrize(
    "body, limit, line, detail",
    [
        (b'{"a": 1}\n{oops\n', None, 2, "Expecting property name enclosed in double quotes"),
        (b'{"a": 1}\n\n{"b": "\xff"}\n', None, 3, "can't decode byte 0xff"),
        (b"[" * 100_000 + b"]" * 100_000 + b"\n", None, 1, "nested too deeply"),
        (b'{"a": 1}\n' + b'"' + b"x" * 50 + b'"\n', 40, 2, "longer than 40 bytes"),
    ],
)
def test_a_line_that_cannot_be_read_is_named(tmp_path, body, limit, line, detail):
    path = tmp_path / "bad.jsonl"
    path.write_bytes(body)
    with pytest.raises(JsonLineError) as info:
        list(iter_json_lines(path, max_line_bytes=limit))
    assert info.value.line == line and detail in info.value.detail
    assert str(info.value).startswith(f"{path}:{line}: not a JSON line (")


def test_a_line_of_exactly_the_limit_is_read(tmp_path):
    path = tmp_path / "edge.jsonl"
    path.write_bytes(b'"' + b"x" * 8 + b'"\n' + b'"' + b"y" * 8 + b'"')  # 10 bytes each, the first plus its newline
    assert [v for _n, v in iter_json_lines(path, max_line_bytes=10)] == ["x" * 8, "y" * 8]


def test_json_lines_round_trip_keeps_text_and_key_order(tmp_path):
    rows = [{"z": 1, "a": "épatant \u2028 next"}, [1, 2], None]
    path = write_json_lines(tmp_path / "deep" / "out.jsonl", rows)
    assert path.read_text(encoding="utf-8").split("\n")[0] == '{"z": 1, "a": "épatant \u2028 next"}'
    assert [v for _n, v in iter_json_lines(path)] == rows  # U+2028 inside a value does not split the line


# -- iEvaLM processed records -------------------------------------------------------------------------------


def test_records_are_read_with_their_fields(tmp_path):
    path = write_rows(tmp_path / "test_data_processed.jsonl", ROWS)
    records = read_records(path)
    assert records[0] == Record(
        context=["Hi! Any good sci-fi?"],
        entity=["Alien (1979)"],
        rec=["Heat (1995)"],
        resp="Try <movie>.",
        dialog_id="d1",
        turn_id=1,
    )
    assert records[2] == Record(["Bonjour, un film épatant ?"], [], [], "", "", 2)  # null lists are empty
    assert records[0].conv_input() == ConvInput(["Hi! Any good sci-fi?"], ["Alien (1979)"])
    assert read_records(path, limit=2) == records[:2] and read_records(path, limit=0) == []
    assert [n for n, _r in iter_records(path)] == [1, 2, 3]


def test_written_records_read_back_the_same(tmp_path):
    records = read_records(write_rows(tmp_path / "in.jsonl", ROWS))
    out = write_records(tmp_path / "sub" / "out.jsonl", records)
    assert read_records(out) == records
    first = out.read_text(encoding="utf-8").splitlines()[0]
    assert list(json.loads(first)) == ["context", "entity", "rec", "resp", "dialog_id", "turn_id"]


@pytest.mark.parametrize(
    "row, reason",
    [
        ("{oops", "Expecting property name enclosed in double quotes"),
        ('{"rec": ["Heat (1995)"]}', "'context'"),
        ('{"context": "not a list", "rec": []}', "context must be a list"),
        ('{"context": [], "rec": "Heat (1995)"}', "rec must be a list"),
        ('["context"]', "a JSON object is needed"),
        ('{"context": [], "turn_id": "third"}', "invalid literal for int()"),
    ],
)
def test_one_bad_line_gives_the_same_error_from_every_reader(tmp_path, row, reason):
    """The neural systems' trainer, the simulator and the shared reader say the same thing about a bad line."""
    path = tmp_path / "toy_eval" / "test_data_processed.jsonl"
    path.parent.mkdir()
    path.write_text(json.dumps(ROWS[0]) + "\n" + row + "\n", encoding="utf-8")
    expected = f"{path}:2: not an iEvaLM processed record ("
    with pytest.raises(RecordError) as shared:
        read_records(path)
    with pytest.raises(RecordError) as simulator:
        simulator_records.read_records(path)
    with pytest.raises(DataError) as trainer:
        read_records_file(path, None)
    message = str(shared.value)
    assert message.startswith(expected) and reason in message
    assert str(simulator.value) == message
    assert str(trainer.value) == f"cannot read records from {path}: {message}"


def test_a_line_that_is_not_utf8_is_a_record_error(tmp_path):
    path = tmp_path / "test_data_processed.jsonl"
    path.write_bytes(b'{"context": ["ok"]}\n{"context": ["caf\xe9"]}\n')
    with pytest.raises(RecordError, match=r":2: not an iEvaLM processed record \('utf-8' codec"):
        simulator_records.read_records(path)


def test_the_simulator_names_records_by_dataset_dialogue_and_turn(tmp_path):
    (tmp_path / "toy_eval").mkdir()
    path = write_rows(tmp_path / "toy_eval" / "test_data_processed.jsonl", ROWS)
    seeded = simulator_records.read_records(path)
    assert [r.id for r in seeded] == ["toy:d1:1", "toy:d1:3", "toy:3:2"]  # the line number stands in for a dialog_id
    assert seeded[1].targets == ("Heat (1995)",) and seeded[1].context == ("Hi", "Hello", "Crime?")
    assert [r.record for r in seeded] == read_records(path)
    assert {r.id.split(":")[0] for r in simulator_records.read_records(path, dataset="other")} == {"other"}


def test_real_records_read_alike_for_the_systems_and_the_simulator(shared_data):
    path = shared_data / "redial_eval" / "test_data_processed.jsonl"
    records = read_records(path, limit=200)
    seeded = simulator_records.read_records(path)[:200]
    assert len(records) == 200 and all(r.context and isinstance(r.turn_id, int) for r in records)
    assert [s.record for s in seeded] == records
    assert [s.targets for s in seeded] == [tuple(t for t in r.rec if t.strip()) for r in records]
