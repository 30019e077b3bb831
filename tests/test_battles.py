"""The battle service: pair choice, concurrent answers, failures, reveal, one vote per battle."""

import random
import threading
import time
from collections import Counter

import pytest

from arena import battles as arena
from arena.battles import BattleClosed, BattleNotReady, DuplicateVote
from crs_backends import registry
from crs_backends.base import CRSSystem, SystemInfo
from crs_backends.session import EmptyMessage, prepare_user_message
from storage.battle_votes import get_vote, save_battle
from storage.conversations import get_conversation, save_conversation
from storage.db import close_thread_connections, get_db
from storage.records import Battle, Conversation, ItemRef, Turn


class ScriptedSystem(CRSSystem):
    """Answers with ``reply`` (formatted with the user's text); ``before`` runs first (wait, fail)."""

    def __init__(self, system_id: str, reply: str, before=None):
        self.system_id, self.reply, self.before = system_id, reply, before

    @property
    def info(self) -> SystemInfo:
        return SystemInfo(id=self.system_id, label=f"Label {self.system_id}", variant="scripted")

    def respond(self, conversation: Conversation) -> Turn:
        if self.before:
            self.before()
        return Turn(
            "system", self.reply.format(user=conversation.turns[-1].text), items=[ItemRef(id="1", title="Heat (1995)")]
        )


@pytest.fixture
def systems(monkeypatch):
    """Install scripted systems in the registry; returns a function to add one."""
    monkeypatch.setattr(registry, "_built", {})

    def add(system_id: str, reply: str = "{user}? Try Heat.", before=None) -> str:
        monkeypatch.setitem(
            registry.SYSTEMS,
            system_id,
            (f"Label {system_id}", lambda db_path: ScriptedSystem(system_id, reply, before)),
        )
        return system_id

    return add


def make_battle(db, a: str, b: str, *, answered: bool = True) -> Battle:
    sides = []
    for system in (a, b):
        turns = [Turn("user", "hi"), Turn("system", "hello")] if answered else []
        sides.append(save_conversation(db, Conversation(system_id=system, source="arena", turns=turns)))
    return save_battle(db, Battle(system_a=a, system_b=b, conversation_a=sides[0].id, conversation_b=sides[1].id))


def test_pair_choice_favours_the_least_fought_pairs(db_path):
    db = get_db(db_path)
    for a, b in [("x", "y"), ("y", "x"), ("x", "z"), ("y", "z"), ("x", "w"), ("w", "y"), ("z", "w")]:
        make_battle(db, a, b)
    # (x, y) has two battles, every other pair one: it must never be chosen
    rng = random.Random(0)
    chosen = Counter(arena.choose_pair(db, ["x", "y", "z", "w"], rng) for _ in range(300))
    assert not {("x", "y"), ("y", "x")} & set(chosen)
    unordered = {tuple(sorted(p)) for p in chosen}
    assert unordered == {("x", "z"), ("y", "z"), ("w", "x"), ("w", "y"), ("w", "z")}
    assert ("x", "z") in chosen and ("z", "x") in chosen  # sides are random
    make_battle(db, "z", "x")
    make_battle(db, "y", "z")
    make_battle(db, "x", "w")
    make_battle(db, "w", "y")
    # now only (w, z) has fewer than two battles
    assert {tuple(sorted(arena.choose_pair(db, ["x", "y", "z", "w"], rng))) for _ in range(50)} == {("w", "z")}
    with pytest.raises(ValueError):
        arena.choose_pair(db, ["x", "x"], rng)


def test_start_battle_stores_two_arena_conversations(db_path, systems):
    db = get_db(db_path)
    battle = arena.start_battle(db, [systems("p"), systems("q")], random.Random(1), session="s1")
    assert {battle.system_a, battle.system_b} == {"p", "q"}
    for side, conversation_id in ((battle.system_a, battle.conversation_a), (battle.system_b, battle.conversation_b)):
        conversation = get_conversation(db, conversation_id)
        assert conversation.source == "arena" and conversation.system_id == side and conversation.turns == []


def test_both_sides_answer_concurrently(db_path, systems):
    both_inside = threading.Barrier(2, timeout=10)  # only passes if the two systems run at the same time
    db = get_db(db_path)
    battle = arena.start_battle(
        db, [systems("p", before=both_inside.wait), systems("q", before=both_inside.wait)], random.Random(2)
    )
    replies = arena.send(battle, "a heist movie", db_path=db_path)
    assert replies["a"].error is None and replies["b"].error is None
    assert replies["a"].turn.text == "a heist movie? Try Heat."
    view = arena.battle_view(db, battle.id)
    assert [t.role for t in view.a.turns] == ["user", "system"] == [t.role for t in view.b.turns]
    assert view.ready and view.reveal is None


def test_one_side_failing_keeps_the_other_sides_answer(db_path, systems):
    def crash():
        raise RuntimeError("backend exploded (label: Label broken)")

    db = get_db(db_path)
    battle = arena.start_battle(db, [systems("fine"), systems("broken", before=crash)], random.Random(3))
    replies = arena.send(battle, "something funny", db_path=db_path)
    broken_side = "a" if battle.system_a == "broken" else "b"
    fine_side = "b" if broken_side == "a" else "a"
    assert replies[fine_side].turn.text == "something funny? Try Heat."
    assert replies[broken_side].turn is None
    assert replies[broken_side].error == f"System {broken_side.upper()} could not answer (the error is recorded)."
    broken = get_conversation(db, getattr(battle, f"conversation_{broken_side}"))
    fine = get_conversation(db, getattr(battle, f"conversation_{fine_side}"))
    assert [t.role for t in broken.turns] == ["user"] and "exploded" in broken.metadata["last_error"]
    assert [t.role for t in fine.turns] == ["user", "system"]
    with pytest.raises(BattleNotReady):
        arena.vote(db, battle.id, "a")


def test_names_are_masked_until_the_vote_and_revealed_after(db_path, systems):
    db = get_db(db_path)
    battle = arena.start_battle(
        db, [systems("p", reply="I am Label p, also known as P."), systems("q")], random.Random(4)
    )
    replies = arena.send(battle, "hello", db_path=db_path)
    p_side = "a" if battle.system_a == "p" else "b"
    assert replies[p_side].turn.text == f"I am {arena.MASK}, also known as {arena.MASK}."
    view = arena.battle_view(db, battle.id)
    shown = repr(view)
    assert "Label p" not in shown and "'p'" not in shown and "Label q" not in shown
    reveal = arena.vote(db, battle.id, "tie", "  both fine  ", voter="v1")
    assert (reveal.system_a, reveal.system_b) == (battle.system_a, battle.system_b)
    assert reveal.label_a == f"Label {battle.system_a}" and reveal.choice == "tie"
    assert arena.battle_view(db, battle.id).reveal == reveal
    stored = get_vote(db, battle.id)
    assert (stored.choice, stored.feedback, stored.voter) == ("tie", "both fine", "v1")
    with pytest.raises(BattleClosed):
        arena.send(battle, "one more", db_path=db_path)


def test_votes_need_answers_a_known_battle_and_a_valid_choice(db_path, systems):
    db = get_db(db_path)
    battle = arena.start_battle(db, [systems("p"), systems("q")], random.Random(5))
    with pytest.raises(BattleNotReady):
        arena.vote(db, battle.id, "a")
    with pytest.raises(EmptyMessage):
        arena.send(battle, "   ", db_path=db_path)
    arena.send(battle, "hi", db_path=db_path)
    with pytest.raises(ValueError):
        arena.vote(db, battle.id, "p")
    with pytest.raises(KeyError):
        arena.vote(db, "no-such-battle", "a")


def test_a_second_vote_is_refused_and_the_first_stands(db_path):
    db = get_db(db_path)
    battle = make_battle(db, "x", "y")
    arena.vote(db, battle.id, "b")
    with pytest.raises(DuplicateVote):
        arena.vote(db, battle.id, "a")
    assert get_vote(db, battle.id).choice == "b"


def test_load_eight_threads_one_vote_per_battle(db_path):
    db = get_db(db_path)
    shared = make_battle(db, "x", "y")  # every battle reuses these two answered conversations
    ids = [
        save_battle(
            db,
            Battle(
                system_a="x", system_b="y", conversation_a=shared.conversation_a, conversation_b=shared.conversation_b
            ),
        ).id
        for _ in range(399)
    ] + [shared.id]
    threads_n = 8
    outcomes: list[Counter] = [Counter() for _ in range(threads_n)]
    start = threading.Barrier(threads_n, timeout=30)

    def worker(t: int) -> None:
        own = ids[t::threads_n]  # 50 distinct battles per thread
        repeats = ids[(t + 1) % threads_n :: threads_n]  # another thread's battles: a race for the same vote
        start.wait()
        try:
            for own_id, other_id in zip(own, repeats):
                for battle_id in (own_id, other_id):
                    try:
                        arena.vote(get_db(db_path), battle_id, "a", voter=f"t{t}")
                        outcomes[t]["recorded"] += 1
                    except DuplicateVote:
                        outcomes[t]["refused"] += 1
                    except Exception as e:
                        outcomes[t][f"error: {e}"] += 1
        finally:
            close_thread_connections()

    threads = [threading.Thread(target=worker, args=(t,)) for t in range(threads_n)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=120)
    assert not any(thread.is_alive() for thread in threads)
    total = sum(outcomes, Counter())
    assert total == Counter(recorded=400, refused=400)
    rows = list(db.query("select battle_id, count(*) as n from votes group by battle_id"))
    assert len(rows) == 400 and {r["n"] for r in rows} == {1} and {r["battle_id"] for r in rows} == set(ids)


def test_a_system_that_failed_sits_out_new_battles_until_it_answers_or_rests(db_path, systems, monkeypatch):
    from crs_backends import health
    from crs_backends.session import ChatSession

    failing = {"on": True}

    def flaky():
        if failing["on"]:
            raise RuntimeError("endpoint down")

    ours = {systems("fine1"), systems("fine2"), systems("flaky", before=flaky)}

    def ready() -> set[str]:
        return set(registry.ready_system_ids(db_path=db_path)) & ours

    db = get_db(db_path)
    assert ready() == ours
    battle = arena.start_battle(db, ["fine1", "flaky"], random.Random(4))
    replies = arena.send(battle, "a heist movie", db_path=db_path)
    assert sum(r.error is not None for r in replies.values()) == 1
    assert health.resting("flaky") and ready() == {"fine1", "fine2"}
    rng = random.Random(5)
    started = [arena.start_battle(db, sorted(ready()), rng) for _ in range(20)]
    drawn = {s for b in started for s in (b.system_a, b.system_b)}
    assert drawn == {"fine1", "fine2"}  # never the failing one
    # the running battle keeps its sides: a retry still asks the failing system
    failing["on"] = False
    replies = arena.send(battle, "a heist movie, again", db_path=db_path)
    assert all(r.error is None for r in replies.values())
    assert not health.resting("flaky") and ready() == ours  # one answer brings it back
    # a system that could not even be loaded counts too; after REST_SECONDS it is drawn again
    monkeypatch.setitem(registry.SYSTEMS, "gone", ("Gone", lambda db_path: (_ for _ in ()).throw(OSError("no such"))))
    battle = arena.start_battle(db, ["fine1", "gone"], random.Random(6))
    arena.send(battle, "hello", db_path=db_path)
    assert health.resting("gone")
    later = time.monotonic() + health.REST_SECONDS + 1
    assert not health.resting("gone", now=later)
    # the chat session notes failures as well (the Chat tab tells the arena)
    failing["on"] = True
    session = ChatSession(registry.get_system("flaky", db_path=db_path), db_path=db_path)
    with pytest.raises(RuntimeError):
        list(session.send(prepare_user_message("hi")))
    assert health.resting("flaky")


def test_the_arena_says_which_systems_sit_out_when_fewer_than_two_can_answer(db_path, systems, monkeypatch):
    import gradio as gr

    from crs_backends import health
    from ui.arena_tab import send_message
    from ui.services import Services

    monkeypatch.setattr(registry, "SYSTEMS", {})
    systems("fine")
    systems("down")
    health.note("down", ok=False)
    with pytest.raises(gr.Error) as raised:
        send_message(Services(db_path=db_path), "a heist movie", None)
    message = str(raised.value.message)
    assert "Label down failed to answer in the last 5 minutes" in message and "Chat tab" in message
    assert "Label fine" not in message
    assert not get_db(db_path).execute("SELECT COUNT(*) FROM battles").fetchone()[0]  # nothing was stored


def test_the_rest_setting_reads_seconds_and_falls_back_on_anything_else():
    from crs_backends.health import DEFAULT_REST_SECONDS, _rest_seconds

    assert _rest_seconds("60") == 60 and _rest_seconds("0") == 0
    for raw in (None, "", "five minutes", "-3", "nan"):
        assert _rest_seconds(raw) == DEFAULT_REST_SECONDS
