"""The Arena and Leaderboard tabs in the real app (`python app.py`), driven with gradio_client."""

import json

import pytest
from app_server import AppServer, scripted_chatcrs_env
from fake_openai import Reply
from gradio_client import Client

from crs_backends.registry import SYSTEMS
from storage.db import open_db

# every way a system could be named on the page: ids and labels, as the registry has them
NAMES = sorted({n.lower() for system_id, (label, _) in SYSTEMS.items() for n in (system_id, label)})


def leaked(outputs) -> list[str]:
    shown = str(outputs).lower()
    return [n for n in NAMES if n in shown]


@pytest.fixture(scope="module")
def app(tmp_path_factory):
    from fake_openai import FakeOpenAI

    with FakeOpenAI() as fake:
        # ChatCRS on a scripted endpoint that even names itself: the arena must hide it
        fake.default = Reply("I am ChatCRS, and I think you will like Heat (1995).")
        env = scripted_chatcrs_env(fake, tmp_path_factory.mktemp("no_data"))
        with AppServer(tmp_path_factory.mktemp("arena") / "app.db", env=env) as server:
            yield server


def test_battle_is_anonymous_until_the_vote(app):
    client = Client(app.url, verbose=False)
    api = client.view_api(return_format="dict", print_info=False)["named_endpoints"]
    assert {"/arena_new", "/arena_send", "/arena_vote_a", "/arena_vote_tie", "/leaderboard"} <= set(api)

    fresh = client.predict(api_name="/arena_new")
    assert not leaked(fresh)
    chat_a, chat_b, status, box = client.predict("I'd like a tense heist movie", api_name="/arena_send")
    assert box == "" and status == ""
    assert [m["role"] for m in chat_a] == ["user", "assistant"] == [m["role"] for m in chat_b]
    assert not leaked((chat_a, chat_b, status)), "a system name reached the page before the vote"
    assert "[name hidden]" in str((chat_a, chat_b))  # ChatCRS introduced itself and was masked
    second = client.predict("Something from the 90s?", api_name="/arena_send")
    assert len(second[0]) == 4 and not leaked(second)

    name_a, name_b, thanks, feedback, *ratings = client.predict("A felt more relevant", api_name="/arena_vote_a")
    assert name_a == name_b == "" and feedback == "" and ratings == [None] * 8  # the ratings come before the names
    assert "A is better" in thanks and "recorded" in thanks and not leaked(thanks)
    _, _, name_a, name_b, status = client.predict(api_name="/arena_reveal")  # skipped the ratings
    assert "System A was" in name_a and "System B was" in name_b and "New battle" in status
    assert {"chatcrs", "retrieval"} == {n for n in ("chatcrs", "retrieval") if n in (name_a + name_b).lower()}
    with pytest.raises(Exception, match="already has its vote"):
        client.predict("", api_name="/arena_vote_b")
    after = client.predict("one more?", api_name="/arena_send")
    assert "already has its vote" in after[2]

    db = open_db(app.db_path)
    votes = list(
        db.query(
            "select v.choice, v.feedback, b.system_a, b.system_b from votes v join battles b on b.id = v.battle_id"
        )
    )
    assert len(votes) == 1 and votes[0]["choice"] == "a" and votes[0]["feedback"] == "A felt more relevant"
    assert {votes[0]["system_a"], votes[0]["system_b"]} == {"chatcrs", "retrieval"}
    sources = {r["source"] for r in db.query("select source from conversations")}
    assert sources == {"arena"}

    client.predict(api_name="/arena_new")
    with pytest.raises(Exception, match="send a message first"):
        client.predict("", api_name="/arena_vote_tie")

    table, plot, line, _, _ = client.predict("All", "All", None, api_name="/leaderboard")
    systems = [row[table["headers"].index("System")] for row in table["data"]]
    assert sorted(systems) == ["chatcrs", "retrieval"] and "1 vote among 2 systems" in line
    assert plot["type"] == "plotly" and '"heatmap"' in plot["plot"]


def test_battle_vote_rating_stores_one_label_per_side_before_the_names(app):
    client = Client(app.url, verbose=False)
    client.predict(api_name="/arena_new")
    client.predict("A funny film for tonight?", api_name="/arena_send")
    with pytest.raises(Exception, match="Vote first"):
        client.predict(4, 3, 2, 3, 1, 0, 1, 1, api_name="/arena_rate")
    client.predict("", api_name="/arena_vote_b")
    with pytest.raises(Exception, match="not in the list of choices"):
        client.predict(4, 3, 2, 9, 1, 0, 1, 1, api_name="/arena_rate")
    pane_a, _, name_a, name_b, status = client.predict(4, 3, 2, 3, 1, 0, 1, 1, api_name="/arena_rate")
    assert "System A was" in name_a and "System B was" in name_b
    assert "ratings are stored" in status
    db = open_db(app.db_path)
    battle_id = next(db.query("select battle_id from votes order by id desc limit 1"))["battle_id"]
    rows = list(
        db.query(
            "select side, understanding, dialogue_overall, names_seen from human_labels where "
            "battle_id = ? order by side",
            [battle_id],
        )
    )
    assert [(r["side"], r["understanding"], r["dialogue_overall"], r["names_seen"]) for r in rows] == [
        ("a", 4.0, 3.0, 0),
        ("b", 1.0, 1.0, 0),
    ]
    *_, again = client.predict(3, 3, 2, 3, 1, 0, 1, 1, api_name="/arena_rate")  # after the reveal: kept, marked
    assert "replaced" in again
    assert {
        r["names_seen"] for r in db.query("select names_seen from human_labels where battle_id = ?", [battle_id])
    } == {1}

    stranger = Client(app.url, verbose=False)  # another session cannot rate or unmask the battle
    with pytest.raises(Exception, match="No battle yet|no battle"):
        stranger.predict(1, 1, 1, 1, 1, 1, 1, 1, api_name="/arena_rate")

    chat = Client(app.url, verbose=False)
    assert "chat first" in chat.predict("", 1, 1, 1, 1, api_name="/rate_conversation")
    chat.predict("A heist movie?", "retrieval", api_name="/chat")
    conversation_id = next(db.query("select id from conversations where source = 'chat' order by created_at desc"))[
        "id"
    ]
    assert "stored" in chat.predict(conversation_id, 3, 4, 2, 3, api_name="/rate_conversation")
    assert "replaced" in chat.predict(conversation_id, 2, 4, 2, 3, api_name="/rate_conversation")
    [row] = db.query("select origin, understanding from human_labels where conversation_id = ?", [conversation_id])
    assert (row["origin"], row["understanding"]) == ("chat", 2.0)

    assert "Recorded: 😊 Satisfied" in chat.predict("satisfied", conversation_id, api_name="/chat_sentiment")
    assert (
        json.loads(next(db.query("select metadata from conversations where id = ?", [conversation_id]))["metadata"])[
            "sentiment"
        ]
        == "satisfied"
    )
    ender = Client(app.url, verbose=False)
    assert "send a message first" in ender.predict("frustrated", api_name="/arena_sentiment_a")
    ender.predict("A funny film?", api_name="/arena_send")
    assert "System A: Recorded: 😠 Frustrated" in ender.predict("frustrated", api_name="/arena_sentiment_a")
    assert not leaked(ender.predict("satisfied", api_name="/arena_sentiment_b"))

    table, figure, setups = client.predict(None, api_name="/judge_vs_people")
    assert figure["type"] == "plotly"


def test_import_without_the_data_says_so(app):
    message = Client(app.url, verbose=False).predict(api_name="/import_crsarena")
    assert "CRSArena-Dial files not found" in message and "CRS_DATA_DIR" in message
