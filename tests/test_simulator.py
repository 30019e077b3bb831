"""The LLM user simulator: protocols' stopping rules, leaks, persuasiveness, personas, batch runs and resume.

Every model call goes over real HTTP to the fake OpenAI-compatible server (tests/fake_openai.py), routed by
content (tests/simulator_script.py) unless a test queues particular answers.
"""

from __future__ import annotations

import dataclasses
import json
import threading

import pytest
from click.testing import CliRunner
from fake_openai import Error, Reply
from simulator_script import RoutedFake, fake_env

from arena.board_compute import compute_leaderboard
from catalog.catalog import get_catalog
from commands import cli
from crs_backends import registry
from crs_backends.base import CRSSystem, SystemInfo
from evaluators.simulator import (
    Protocol,
    SimulatedUser,
    SimulationConfig,
    UnknownSystem,
    run_dialogue,
    run_simulation,
)
from evaluators.simulator.leaks import REDACTED, find_leaks, redact
from evaluators.simulator.personas import accepts, list_overlap, persona_for, sincerity
from evaluators.simulator.protocols import _llm_choice, persuasiveness
from evaluators.simulator.records import Case, read_records, select_cases
from llm_clients.base import LLMClient
from llm_clients.prompts import prompt
from llm_clients.remote import OpenAICompatibleModel
from llm_clients.types import LLMError
from storage.db import get_db
from storage.records import Conversation, ItemRef, Turn
from storage.simulations import run_dialogues

TARGET = "Inception (2010)"


@pytest.fixture(scope="module")
def catalog():
    return get_catalog("bundled")


@pytest.fixture
def fake():
    with RoutedFake() as server:
        yield server


@pytest.fixture
def routed_env(fake, monkeypatch):
    for key, value in fake_env(fake).items():
        monkeypatch.setenv(key, value)
    monkeypatch.delenv("CRS_CATALOG", raising=False)
    return fake


def client(fake, db_path) -> LLMClient:
    return LLMClient(
        OpenAICompatibleModel("sim", base_url=fake.base_url, api_key="k", max_retries=0, timeout=5),
        role="simulator",
        db_path=db_path,
    )


class ScriptedSystem(CRSSystem):
    """A system under test whose lists hold a target exactly on the given turns (and can fail on one)."""

    def __init__(self, catalog, target_id: str, *, hits_at=(), fail_at: int | None = None, system_id="scripted"):
        self.catalog, self.target_id, self.hits_at, self.fail_at, self.id = (
            catalog,
            target_id,
            set(hits_at),
            fail_at,
            system_id,
        )
        self.filler = [i for i in catalog.items if i.id != target_id]

    @property
    def info(self) -> SystemInfo:
        return SystemInfo(self.id, "Scripted", "test system")

    def respond(self, conversation: Conversation) -> Turn:
        number = sum(1 for t in conversation.turns if t.role == "system") + 1
        if number == self.fail_at:
            raise RuntimeError("the model server is down")
        items = [i.ref() for i in self.filler[number * 10 : number * 10 + 10]]
        if number in self.hits_at:
            items.insert(3, self.catalog.get(self.target_id).ref())
        return Turn("system", f"Here are my picks for turn {number}: {items[0].title}.", items=items)


def case_for(catalog, title=TARGET, context=("Hi, I need a movie for tonight.",)) -> Case:
    return Case(id=f"test:{title}", targets=(catalog.match(title),), context=tuple(context))


def dialogue(
    fake, db_path, catalog, protocol, *, hits_at=(), fail_at=None, context=("Hi, I need a movie.",), seeker="ievalm"
):
    case = case_for(catalog, context=context)
    system = ScriptedSystem(catalog, case.targets[0].id, hits_at=hits_at, fail_at=fail_at)
    user = SimulatedUser(client(fake, db_path), case.targets, seed=1, seeker=seeker)
    conversation = Conversation(system_id="scripted", source="simulation")
    return run_dialogue(case, system, user, protocol, conversation=conversation)


def situations(outcome) -> list[str]:
    return [
        t.metadata.get("situation") or t.metadata.get("source") for t in outcome.conversation.turns if t.role == "user"
    ]


# -- stopping rules ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "hits_at, turns, first_hit, expected",
    [
        ({1, 2, 3, 4, 5}, 3, 1, ["dataset", "tell_more", "follow_up", "accept"]),
        ({3}, 3, 3, ["dataset", "reject", "reject", "accept"]),
        (set(), 5, None, ["dataset", "reject", "reject", "reject", "reject"]),
    ],
)
def test_core_protocol_stopping_rules(fake, db_path, catalog, hits_at, turns, first_hit, expected):
    outcome = dialogue(fake, db_path, catalog, Protocol.named("core"), hits_at=hits_at)
    assert outcome.status == "done"
    assert outcome.system_turns == turns and outcome.first_hit_turn == first_hit
    assert outcome.stop_reason == ("hit" if first_hit else "max_turns")
    assert situations(outcome) == expected
    turns_ = outcome.conversation.turns
    assert turns_[0].text == "Hi, I need a movie." and outcome.conversation.history == []
    if first_hit == 1:  # the early hit: the user asks about that very item, naming it is allowed
        assert "Inception (2010)" in turns_[2].text and "tell me more" in turns_[2].text.lower()
        assert "leak" not in turns_[2].metadata
    result = outcome.result()
    assert len(result["per_turn_lists"]) == turns and all(len(lst) >= 10 for lst in result["per_turn_lists"])


def test_core_early_hit_on_turn_one_ends_at_turn_three_even_when_the_item_is_not_listed_again(fake, db_path, catalog):
    outcome = dialogue(fake, db_path, catalog, Protocol.named("core"), hits_at={1})
    assert outcome.system_turns == 3 and outcome.stop_reason == "hit"
    assert situations(outcome)[1:] == ["tell_more", "follow_up", "accept"]


@pytest.mark.parametrize("hits_at, turns, first_hit", [({1}, 1, 1), ({3}, 3, 3), (set(), 5, None)])
def test_free_protocol_stops_at_the_first_hit(fake, db_path, catalog, hits_at, turns, first_hit):
    outcome = dialogue(fake, db_path, catalog, Protocol.named("free"), hits_at=hits_at)
    assert outcome.system_turns == turns and outcome.first_hit_turn == first_hit
    user_situations = situations(outcome)
    assert user_situations[-1] == ("accept" if first_hit else "reject")
    assert "tell_more" not in user_situations


def test_free_protocol_hit_needs_the_target_within_top_k(fake, db_path, catalog):
    # the target sits at position 4 of the list: top-3 misses it, top-50 (published) finds it
    assert dialogue(fake, db_path, catalog, Protocol.named("free", hit_k=3), hits_at={1}).first_hit_turn is None
    assert dialogue(fake, db_path, catalog, Protocol.named("free", hit_k=50), hits_at={1}).first_hit_turn == 1


def test_empty_context_makes_the_simulated_user_open(fake, db_path, catalog):
    outcome = dialogue(fake, db_path, catalog, Protocol.named("free"), hits_at={1}, context=())
    first = outcome.conversation.turns[0]
    assert first.metadata["situation"] == "open" and "inception" not in first.text.lower()
    outcome = dialogue(fake, db_path, catalog, Protocol.named("free"), hits_at={1}, context=(), seeker="described")
    first = outcome.conversation.turns[0]
    assert first.metadata["situation"] == "open" and "Christopher Nolan" in first.text
    assert "inception" not in first.text.lower()


@pytest.mark.parametrize("hits_at, expected_turns", [({4}, 4), (set(), 5)])
def test_attribute_protocol_policy_asks_then_recommends(fake, db_path, catalog, hits_at, expected_turns):
    outcome = dialogue(fake, db_path, catalog, Protocol.named("attr"), hits_at=hits_at)
    turns = outcome.conversation.turns
    asks = [t for t in turns if t.role == "system" and t.metadata.get("action") == "ask"]
    assert [t.metadata["attribute"] for t in asks] == ["genre", "actor", "director"]
    assert all(t.metadata["choice_by"] == "policy" for t in asks)
    answers = [t.text for t in turns if t.metadata.get("attribute") and t.role == "user"]
    assert "sci-fi" in answers[0] and "Leonardo DiCaprio" in answers[1] and "Christopher Nolan" in answers[2]
    assert outcome.system_turns == expected_turns
    if hits_at:
        assert turns[-1].metadata.get("template") == "attr_accept" and outcome.stop_reason == "hit"
    else:  # five rounds: three questions, two recommendations without a hit
        assert turns[-1].role == "system" and outcome.stop_reason == "max_turns"
        assert [t.metadata.get("template") for t in turns if t.role == "user"][-1] == "attr_reject"
    assert fake.chat_requests() == []  # attribute mode: the user is templates only


def test_attribute_protocol_with_a_system_model_chooses_by_its_own_scores(routed_env, db_path, catalog):
    chatcrs = registry.get_system("chatcrs", db_path=db_path)
    case = case_for(catalog)
    user = SimulatedUser(None, case.targets)
    protocol = Protocol.named("attr", writer=True, max_turns=2)
    outcome = run_dialogue(
        case, chatcrs, user, protocol, conversation=Conversation(system_id="chatcrs", source="simulation")
    )
    asks = [t for t in outcome.conversation.turns if t.metadata.get("action") == "ask"]
    # fixed letters: A (genre), then B (actor) once A is used
    assert [t.metadata["choice_by"] for t in asks] == ["system-llm", "system-llm"]
    assert [t.metadata["attribute"] for t in asks] == ["genre", "actor"]


def test_attribute_answers_are_the_bare_values_or_the_no_information_line(catalog):
    """iEvaLM's ask.py: the targets' values joined by ", " and nothing else, or a fixed line asking for
    another option when the targets have none."""
    inception = catalog.match(TARGET)
    user = SimulatedUser(None, (inception,))
    genres = user.attribute_values("genre")
    assert len(genres) > 1 and user.answer_attribute("genre").text == ", ".join(genres)  # e.g. "sci-fi, action"
    assert user.answer_attribute("director").text == "Christopher Nolan"
    unknown = SimulatedUser(None, (dataclasses.replace(inception, writers=()),)).answer_attribute("writer")
    assert unknown.text == prompt("simulator", "answer_unknown") and unknown.metadata["known"] is False
    assert "no information" in unknown.text and "another option" in unknown.text


def test_the_model_menu_keeps_fixed_letters_and_never_picks_a_used_one(fake, db_path):
    """iEvaLM's ChatCRS attr menu: the full menu with fixed letters, the used letters named with "do not
    repeat", and only the open letters scored, so a model that insists on a used letter never gets it."""
    menu = ["genre", "actor", "director", "writer", "recommend"]
    open_options = ["actor", "director", "writer", "recommend"]  # genre (A) was asked
    conversation = Conversation(system_id="chatcrs", turns=[Turn("user", "Hi")])
    fake.enqueue(Reply("C", logprobs={"C": -0.4, "A": -1.2, "B": -3.0}))
    assert _llm_choice(client(fake, db_path), conversation, menu, open_options, "movies") == "director"
    content = fake.requests[-1]["json"]["messages"][-1]["content"]
    assert "A: ask the user which genre they like" in content and "E: recommend movies now" in content
    assert "already used: A." in content and "Do not choose any of them again" in content
    fake.enqueue(Reply("A", logprobs={"A": -0.01}), *[Reply("A")] * 10)  # only ever the used letter
    other = Conversation(system_id="chatcrs", turns=[Turn("user", "Hello there")])  # not the cached call
    with pytest.raises(LLMError, match="no answer among"):
        _llm_choice(client(fake, db_path), other, menu, open_options, "movies")


def test_a_system_that_fails_on_a_turn_marks_the_dialogue_failed(fake, db_path, catalog):
    outcome = dialogue(fake, db_path, catalog, Protocol.named("core"), fail_at=2)
    assert outcome.status == "failed" and outcome.stop_reason == "system_failed"
    assert "turn 2" in outcome.error and "the model server is down" in outcome.error
    assert outcome.system_turns == 1  # the first turn is kept


def test_a_simulator_endpoint_fault_is_an_error_not_a_turn(fake, db_path, catalog):
    fake.enqueue(Error(500))
    outcome = dialogue(fake, db_path, catalog, Protocol.named("core"))
    assert outcome.status == "error" and "simulator model failed" in outcome.error


# -- leaks --------------------------------------------------------------------------------------------


def test_find_leaks_catches_titles_with_typos_articles_and_years(catalog):
    inception, matrix, up = catalog.match("Inception (2010)"), catalog.match("The Matrix (1999)"), catalog.match("Up")
    assert [x.item_id for x in find_leaks("I loved Incepton (2010) so much", [inception])] == ["inception-2010"]
    assert find_leaks("Something like matrix would be nice", [matrix])
    assert find_leaks("A dream heist with layers, by Nolan", [inception]) == []
    assert find_leaks("Pick me up later; looking up films", [up]) == []  # ordinary words
    assert find_leaks("I'd watch Up again", [up]) and find_leaks("up (2009) is great", [up])
    text = "Maybe Inception (2010)? Or The Matrix."
    assert redact(text, find_leaks(text, [inception, matrix])) == f"Maybe {REDACTED}? Or {REDACTED}."


def test_a_leaking_reply_is_regenerated(fake, db_path, catalog):
    case = case_for(catalog, context=())
    user = SimulatedUser(client(fake, db_path), case.targets, seed=3, seeker="described")
    fake.enqueue(Reply("I want Inception, the dream one."), Reply("A mind-bending heist by Christopher Nolan."))
    turn = user.say(Conversation(system_id="x"), "open")
    assert turn.text == "A mind-bending heist by Christopher Nolan."
    assert turn.metadata["leak"] == {"titles": ["Inception (2010)"], "regenerated": True, "redacted": False}
    reminder = fake.chat_requests()[1]["messages"]
    assert reminder[-2] == {"role": "assistant", "content": "I want Inception, the dream one."}
    assert "gave away the title" in reminder[-1]["content"]
    assert user.leaks == {"regenerated": 1, "redacted": 0, "dropped": 0}


def test_a_reply_that_keeps_leaking_is_redacted_and_counted(fake, db_path, catalog):
    case = case_for(catalog, context=())
    user = SimulatedUser(client(fake, db_path), case.targets, seed=4, seeker="described")
    fake.enqueue(Reply("I want Inception."), Reply("Really, Inception (2010) please."))
    turn = user.say(Conversation(system_id="x"), "open")
    assert turn.text == f"Really, {REDACTED} please." and "Inception" not in turn.text
    assert turn.metadata["leak"]["redacted"] is True and user.leaks == {"regenerated": 1, "redacted": 1, "dropped": 0}


def test_an_empty_answer_is_asked_again_then_is_an_error(fake, db_path, catalog):
    from evaluators.simulator import SimulatorError

    user = SimulatedUser(client(fake, db_path), case_for(catalog).targets)
    fake.enqueue(Reply("   "), Reply("User: Something tense, please."))
    assert user.say(Conversation(system_id="x"), "open").text == "Something tense, please."
    fake.enqueue(Reply(""), Reply('""'))
    with pytest.raises(SimulatorError, match="empty message twice"):
        user.say(Conversation(system_id="x", turns=[Turn("user", "hi")]), "open")


# -- persuasiveness -------------------------------------------------------------------------------------


def _finished(catalog) -> Conversation:
    target = catalog.match(TARGET)
    return Conversation(
        system_id="x",
        targets=[target.ref()],
        turns=[
            Turn("user", "A twisty heist?"),
            Turn("system", "Inception (2010): a heist inside dreams.", items=[target.ref()]),
        ],
    )


def test_persuasiveness_parsing(fake, db_path, catalog):
    c = client(fake, db_path)
    probability = persuasiveness(_finished(catalog), c, "probability")
    # iEvaLM's score is the answer (2); the expected value (~1.89) is the extra field
    assert probability["score"] == 2 and probability["error"] is None
    assert probability["expected"] == pytest.approx(1.89, abs=0.02)
    fake.enqueue(Reply("Convincing, it names what I wanted. <score>2</score>"))
    assert persuasiveness(_finished(catalog), c, "reasoned")["score"] == 2.0
    fake.enqueue(Reply("I think it is fine."), Reply("maybe two"))  # no tag, and the repair has none either
    broken = persuasiveness(_finished(catalog), LLMClient(c.model, role="simulator"), "reasoned")
    assert broken["score"] is None and "unparseable" in broken["error"] and broken["retry"] is False
    fake.enqueue(Error(503))
    down = persuasiveness(_finished(catalog), LLMClient(c.model, role="simulator"), "probability")
    assert down["score"] is None and down["retry"] is True


# -- personas, sincerity, reliability -------------------------------------------------------------------


def test_personas_are_fixed_by_seed_and_case_and_shape_the_prompt(fake, db_path, catalog):
    assert persona_for("redial:1:1", 0) == persona_for("redial:1:1", 0)
    spread = {persona_for(f"redial:{i}:1", 0).id for i in range(200)}
    assert len(spread) > 30  # of the 48 combinations
    persona = persona_for("redial:1:1", 0)
    user = SimulatedUser(client(fake, db_path), case_for(catalog).targets, persona=persona, seeker="described")
    emotion, age = persona.texts()
    assert emotion in user.system_prompt() and age in user.system_prompt()
    assert "Inception" not in user.system_prompt() and "Christopher Nolan" in user.system_prompt()
    named = SimulatedUser(client(fake, db_path), case_for(catalog).targets, persona=persona)  # the ievalm seeker
    assert emotion in named.system_prompt() and "Your target items: Inception (2010)" in named.system_prompt()


def test_sincerity_flags_an_acceptance_with_nothing_matching(catalog):
    inception, toy = catalog.match(TARGET), catalog.match("Toy Story (1995)")
    assert accepts("Sounds perfect, I'll watch it tonight!") and not accepts("That's not what I want.")
    assert not accepts("I won't watch that")
    turns = [
        Turn("user", "hi"),
        Turn("system", "Try Toy Story", items=[toy.ref()]),
        Turn("user", "Sounds perfect, I'll watch it!", metadata={"source": "simulator", "situation": "reject"}),
    ]
    flagged = sincerity(turns, (inception,), catalog, k=50)
    assert flagged == {"accepted": True, "accepted_turn": 2, "matched": False, "deception_suspected": True}
    turns[1] = Turn("system", "Try this", items=[toy.ref(), inception.ref()])
    assert sincerity(turns, (inception,), catalog, k=50)["deception_suspected"] is False
    assert sincerity(turns, (inception,), catalog, k=1)["deception_suspected"] is True  # beyond the top k
    assert sincerity(turns[:2], (inception,), catalog, k=50)["accepted"] is False
    a, b = [ItemRef(x, x) for x in "abcd"], [ItemRef(x, x) for x in "bcxy"]
    assert list_overlap(a, b, k=4) == {"overlap": 0.5, "jaccard": pytest.approx(2 / 6), "same_top1": False}


# -- records ----------------------------------------------------------------------------------------------


def write_records(path, rows):
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="utf-8")
    return path


RECORDS = [
    {"dialog_id": "1", "turn_id": 1, "context": ["Hi! Any good sci-fi?"], "rec": ["Inception (2010)"]},
    {
        "dialog_id": "2",
        "turn_id": 3,
        "context": ["Hello", "Hi, what do you like?", "Tense crime films."],
        "rec": ["Heat (1995)", "A Film Nobody Made (1931)"],
    },
    {"dialog_id": "3", "turn_id": 1, "context": ["Something for the kids?"], "rec": ["Toy Story (1995)"]},
    {"dialog_id": "4", "turn_id": 1, "context": [], "rec": ["Jaws (1975)"]},
    {"dialog_id": "5", "turn_id": 1, "context": ["I want a movie"], "rec": []},
    {"dialog_id": "6", "turn_id": 1, "context": ["Old stuff"], "rec": ["Completely Unknown Picture (1920)"]},
    {"dialog_id": "7", "turn_id": 1, "context": ["A remake?"], "rec": ["Heat (1972)"]},  # another year: not Heat (1995)
]


def test_record_selection_reports_what_it_skipped(tmp_path, catalog):
    records = read_records(write_records(tmp_path / "test_data_processed.jsonl", RECORDS), dataset="toy")
    cases, selection = select_cases(records, catalog, 10, seed=0, source="toy")
    assert len(cases) == 4 and selection.available == 4 and selection.requested == 10
    assert selection.no_targets == 1 and selection.unmatched_records == 2 and selection.unmatched_targets == 1
    assert selection.empty_context == 1
    notes = " ".join(selection.notes())
    assert "Only 4 usable records" in notes and "no targets" in notes and "none of their targets" in notes
    heat = next(c for c in cases if c.id == "toy:2:3")
    assert [t.id for t in heat.targets] == ["heat-1995"] and heat.unmatched_targets == ("A Film Nobody Made (1931)",)
    history, opening = heat.history_and_opening()
    assert [t.role for t in history] == ["user", "system"] and opening.text == "Tense crime films."
    again, _ = select_cases(records, catalog, 2, seed=0)
    assert [c.id for c in again] == [c.id for c in cases[:2]]  # a smaller n is a prefix of a larger one
    with pytest.raises(ValueError):
        read_records(write_records(tmp_path / "bad.jsonl", [{"context": "not a list", "rec": []}]))


# -- batch runs -----------------------------------------------------------------------------------------------


def config(tmp_path, **kw) -> SimulationConfig:
    (tmp_path / "toy_eval").mkdir(exist_ok=True)
    records = write_records(tmp_path / "toy_eval" / "test_data_processed.jsonl", RECORDS)
    base = dict(
        systems=["retrieval", "chatcrs"],
        dataset=str(records),
        n=4,
        protocol="core",
        seed=0,
        scorer="proxy",
        concurrency=4,
        out_dir=tmp_path / "report",
    )
    return SimulationConfig(**(base | kw))


def conversation_count(db_path) -> int:
    return get_db(db_path)["conversations"].count_where("source = 'simulation'")


def test_unknown_systems_are_refused_with_the_known_ones(routed_env, db_path, tmp_path):
    with pytest.raises(UnknownSystem, match="unknown system.*no_such_system.*known systems: .*chatcrs.*retrieval"):
        run_simulation(config(tmp_path, systems=["retrieval", "no_such_system"]), db_path=db_path)
    result = CliRunner().invoke(cli, ["simulate", "--systems", "nope", "--dataset", str(tmp_path / "x.jsonl")])
    assert result.exit_code != 0 and "known systems" in result.output


def test_batch_run_stores_evaluates_reports_and_feeds_the_leaderboard(routed_env, db_path, tmp_path):
    # persuasiveness asked on top of the CoRE protocol (by default iEvaLM's free-form protocol only)
    result = run_simulation(config(tmp_path, persuasiveness="probability"), db_path=db_path)
    assert result.counts["done"] == 8 and result.counts["evaluated"] == 8
    rows = run_dialogues(get_db(db_path), result.run_id)
    assert len(rows) == 8 and all(r["evaluation_id"] for r in rows)
    assert all(r["result"]["persuasiveness"]["score"] == 2 for r in rows)
    assert all(r["result"]["persuasiveness"]["expected"] == pytest.approx(1.89, abs=0.02) for r in rows)
    assert 3 <= min(r["result"]["system_turns"] for r in rows) and max(r["result"]["system_turns"] for r in rows) <= 5
    lines = [json.loads(x) for x in (result.out_dir / "conversations.jsonl").read_text().splitlines()]
    assert len(lines) == 8
    first = lines[0]["conversation"]
    assert first["targets"] and first["source"] == "simulation" and first["turns"][0]["metadata"]["source"] == "dataset"
    assert all(t["items"] for t in first["turns"] if t["role"] == "system")
    assert lines[0]["evaluation"]["metrics"]["persuasiveness"] == 2
    html = (result.out_dir / "report.html").read_text()
    assert "plotly" in html and "Recall@k per system" in html and "none of their targets" in html
    summary = (result.out_dir / "summary.csv").read_text().splitlines()
    assert summary[0].startswith("system,dialogues,done") and len(summary) == 3
    board = {r["system"]: r for r in compute_leaderboard(get_db(db_path))[0]}
    assert board["retrieval"]["simulations"] == 4 and board["chatcrs"]["simulations"] == 4
    assert board["retrieval"]["recall@50"] is not None and board["retrieval"]["judged"] == 4


def test_persuasiveness_judges_the_explanation_the_system_gives_when_asked(routed_env, db_path, tmp_path):
    """iEvaLM asks the CRS to explain its last recommendation after a free-form dialogue and judges that
    answer (appendix C.2.2, Table 6); the request and answer stay out of the dialogue's turns."""
    result = run_simulation(config(tmp_path, protocol="free", systems=["chatcrs"]), db_path=db_path)
    assert result.counts["done"] == 4
    request = prompt("persuasiveness", "request")
    for row in run_dialogues(get_db(db_path), result.run_id):
        p = row["result"]["persuasiveness"]
        assert p["score"] == 2 and p["explanation_request"] == request
        assert p["variant"] == "ievalm_released"  # the free-form protocol runs iEvaLM's released script's reading
        assert p["explanation"].startswith("You might enjoy Heat (1995)")  # ChatCRS's answer, not a stored turn
        turns = _conversation(db_path, row["conversation_id"]).turns
        assert all(t.text != request for t in turns)
    asked = [r for r in routed_env.chat_requests() if request in json.dumps(r)]
    assert len(asked) >= 4  # ChatCRS was asked once per dialogue
    summary = result.report["summary_records"][0]
    assert summary["persuasiveness_n"] == 4 and summary["persuasiveness_errors"] == 0


def test_the_persuasiveness_variant_and_the_request_are_ievalms_and_reachable_from_simulate():
    """iEvaLM C.2.2 asks the system to explain its last recommendation; the released script's reading of the lists
    (``ievalm_released``) is the free-form protocol's default and can be chosen for any (issue #74, point 4)."""
    assert prompt("persuasiveness", "request").strip() == "Please explain your last recommendation."
    assert SimulationConfig(systems=["x"], protocol="free").persuasiveness_variant == "ievalm_released"
    assert SimulationConfig(systems=["x"], protocol="core").persuasiveness_variant == "shown"
    chosen = SimulationConfig(systems=["x"], protocol="core", persuasiveness_variant="ievalm_released")
    assert chosen.persuasiveness_variant == "ievalm_released"
    with pytest.raises(ValueError, match="persuasiveness_variant"):
        SimulationConfig(systems=["x"], persuasiveness_variant="all")
    with pytest.raises(ValueError, match="seeker"):
        SimulationConfig(systems=["x"], seeker="oracle")
    help_text = CliRunner().invoke(cli, ["simulate", "--help"]).output
    assert "--persuasiveness-variant" in help_text and "--seeker" in help_text


def test_persuasiveness_is_off_by_default_outside_the_free_form_protocol(routed_env, db_path, tmp_path):
    result = run_simulation(config(tmp_path, systems=["retrieval"]), db_path=db_path)
    assert result.counts["done"] == 4
    assert all("persuasiveness" not in r["result"] for r in run_dialogues(get_db(db_path), result.run_id))
    summary = result.report["summary_records"][0]
    assert summary["persuasiveness"] is None and summary["persuasiveness_errors"] == 0
    assert any("Persuasiveness was not asked" in n for n in result.report["notes"])


def test_a_system_that_fails_to_explain_is_a_persuasiveness_error_not_a_zero(fake, db_path, catalog):
    class Mute:
        def respond(self, conversation):
            raise RuntimeError("no words")

    p = persuasiveness(_finished(catalog), client(fake, db_path), "probability", system=Mute())
    assert p["score"] is None and "failed to explain" in p["error"] and p["retry"] is False


def test_an_interrupted_run_resumes_without_duplicates_or_losses(routed_env, db_path, tmp_path):
    stop = threading.Event()

    def progress(p):
        if p.done >= 3:
            stop.set()

    first = run_simulation(config(tmp_path, concurrency=2), db_path=db_path, progress=progress, stop=stop)
    finished = first.counts.get("done", 0)
    assert 3 <= finished < 8 and first.counts.get("evaluated") is None  # stopped: evaluation waits
    # a dialogue killed mid-way (its row says running, its conversation half-written) is redone
    db = get_db(db_path)
    killed = next(r for r in run_dialogues(db, first.run_id) if r["status"] == "done")
    db["sim_dialogues"].update((first.run_id, killed["case_id"], killed["system_id"]), {"status": "running"})
    before = len(routed_env.chat_requests())
    second = run_simulation(config(tmp_path, concurrency=2), db_path=db_path)
    assert second.counts["done"] == 8 and second.counts["skipped_now"] == finished - 1
    assert conversation_count(db_path) == 8 and len(run_dialogues(db, second.run_id)) == 8
    assert len((second.out_dir / "conversations.jsonl").read_text().splitlines()) == 8
    assert len(routed_env.chat_requests()) > before
    before = len(routed_env.chat_requests())
    third = run_simulation(config(tmp_path, concurrency=2), db_path=db_path)
    assert third.counts["skipped_now"] == 8 and len(routed_env.chat_requests()) == before  # nothing to redo
    assert conversation_count(db_path) == 8


def test_endpoint_faults_leave_gaps_that_a_rerun_completes(routed_env, db_path, tmp_path):
    routed_env.enqueue(*[Error(500)] * 3)
    first = run_simulation(config(tmp_path, systems=["retrieval"], concurrency=1), db_path=db_path)
    assert first.counts.get("error", 0) >= 1 and first.counts["done"] + first.counts["error"] == 4
    second = run_simulation(config(tmp_path, systems=["retrieval"], concurrency=1), db_path=db_path)
    assert second.counts["done"] == 4 and conversation_count(db_path) == 4


def test_a_failing_system_is_marked_failed_and_the_batch_continues(routed_env, db_path, tmp_path, catalog, monkeypatch):
    monkeypatch.setitem(
        registry.SYSTEMS,
        "flaky",
        ("Flaky", lambda _db: ScriptedSystem(catalog, "no-target", fail_at=2, system_id="flaky")),
    )
    result = run_simulation(config(tmp_path, systems=["flaky", "retrieval"]), db_path=db_path)
    assert result.counts["failed"] == 4 and result.counts["done"] == 4
    rows = [r for r in run_dialogues(get_db(db_path), result.run_id) if r["system_id"] == "flaky"]
    assert all("turn 2" in r["error"] for r in rows)
    summary = {r["system"]: r for r in result.report["summary_records"]}
    assert summary["flaky"]["failed"] == 4 and summary["flaky"]["recall@1"] is None
    again = run_simulation(config(tmp_path, systems=["flaky", "retrieval"]), db_path=db_path)
    assert again.counts["skipped_now"] == 8  # failed is final unless --retry-failed


def test_a_fixed_seed_gives_the_same_results(routed_env, tmp_path):
    def transcript(db_file):
        result = run_simulation(
            config(tmp_path, personas=True, reliability=True, out_dir=db_file.parent / "r"), db_path=db_file
        )
        rows = run_dialogues(get_db(db_file), result.run_id)
        return result.run_id, [
            (
                r["case_id"],
                r["system_id"],
                r["status"],
                json.dumps(r["result"], sort_keys=True),
                [(t.role, t.text, [i.id for i in t.items]) for t in _conversation(db_file, r["conversation_id"]).turns],
            )
            for r in rows
        ]

    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = transcript(tmp_path / "a" / "x.db"), transcript(tmp_path / "b" / "y.db")
    assert first == second
    results = [json.loads(r[3]) for r in first[1]]
    assert all(r["persona"] for r in results)
    assert all(r["reliability"]["overlap"] is not None for r in results)
    assert all("Put differently" in r["reliability"]["paraphrase"] for r in results)


def _conversation(db_file, conversation_id):
    from storage.conversations import get_conversation

    return get_conversation(get_db(db_file), conversation_id)


def test_cli_simulate_writes_the_report(routed_env, db_path, tmp_path):
    records = write_records(tmp_path / "records.jsonl", RECORDS)
    out = tmp_path / "cli-report"
    result = CliRunner().invoke(
        cli,
        [
            "simulate",
            "--systems",
            "retrieval",
            "--dataset",
            str(records),
            "--n",
            "50",
            "--protocol",
            "free",
            "--scorer",
            "proxy",
            "--out",
            str(out),
            "--db",
            str(db_path),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "Only 4 usable records" in result.output and "4 dialogue(s) done" in result.output
    assert (out / "report.html").exists() and (out / "dialogues.csv").exists()


def test_describe_item_names_the_kind_of_item_by_domain(catalog):
    from evaluators.simulator.user import describe_item

    item = catalog.match(TARGET)
    assert describe_item(item).startswith(f"a {item.year} film (")
    assert describe_item(item, "books").startswith(f"a {item.year} book (")
    assert describe_item(item, "sports").startswith(f"a {item.year} item (")


# -- what the seeker is shown and told (issue #74, points 1 and 2) ---------------------------------------------


class RankingSystem(CRSSystem):
    """A neural-like system: each reply names three items and keeps a ranking of 50, the target 16th on the
    turns in ``hits_at`` (a hit by iEvaLM's top 50 that the reply itself never names)."""

    def __init__(self, catalog, target_id: str, *, hits_at=()):
        self.catalog, self.target_id, self.hits_at = catalog, target_id, set(hits_at)
        self.filler = [i for i in catalog.items if i.id != target_id]

    @property
    def info(self) -> SystemInfo:
        return SystemInfo("ranking", "Ranking", "test system")

    def respond(self, conversation: Conversation) -> Turn:
        number = sum(1 for t in conversation.turns if t.role == "system") + 1
        ranking = [i.ref() for i in self.filler[number * 50 : number * 50 + 50]]
        if number in self.hits_at:
            ranking[15] = self.catalog.get(self.target_id).ref()
        return Turn("system", "What kind of films do you like?", items=ranking[:3], ranking=ranking)


def _request_for(fake, words: str) -> str:
    """The user message of the simulator request whose instruction holds ``words``."""
    return next(r["messages"][-1]["content"] for r in fake.chat_requests() if words in r["messages"][-1]["content"])


def test_the_seeker_sees_the_top_of_the_ranking_on_the_turn_that_hits(fake, db_path, catalog):
    """iEvaLM puts its top 50 before the reply on the turn that hits (and the last), so its seeker has seen what it
    accepts; on other turns the seeker sees only the items the reply showed."""
    case = case_for(catalog)
    system = RankingSystem(catalog, case.targets[0].id, hits_at={2})
    user = SimulatedUser(client(fake, db_path), case.targets, seed=1)
    outcome = run_dialogue(case, system, user, Protocol.named("free"), conversation=Conversation(system_id="ranking"))
    assert outcome.first_hit_turn == 2 and situations(outcome) == ["dataset", "reject", "accept"]
    first, second = [t for t in outcome.conversation.turns if t.role == "system"]
    assert "seeker_list" not in first.metadata  # no hit, not the last turn: the reply's three items only
    assert len(second.metadata["seeker_list"]) == 50 and second.metadata["seeker_list"][15] == TARGET
    reject = _request_for(fake, "None of them is what you have in mind")
    shown = ", ".join(r.title for r in first.items)
    assert f"Recommender: What kind of films do you like?\n(The recommender's list: {shown})" in reject
    assert first.ranking[3].title not in reject  # the fourth of the hidden ranking was never shown
    accept = _request_for(fake, "Accept the suggestion")
    listed = ", ".join(second.metadata["seeker_list"])
    assert f"Recommender: What kind of films do you like?\n(The recommender's list: {listed})" in accept
    assert f"The recommender suggested {TARGET}" in accept  # told only of an item it was shown


def test_the_last_turn_shows_the_top_of_the_ranking_too(fake, db_path, catalog):
    case = case_for(catalog)
    system = RankingSystem(catalog, case.targets[0].id)
    user = SimulatedUser(client(fake, db_path), case.targets, seed=1)
    protocol = Protocol.named("free", max_turns=2)
    outcome = run_dialogue(case, system, user, protocol, conversation=Conversation(system_id="ranking"))
    turns = [t for t in outcome.conversation.turns if t.role == "system"]
    assert outcome.stop_reason == "max_turns" and "seeker_list" not in turns[0].metadata
    assert len(turns[-1].metadata["seeker_list"]) == 50


def test_the_ievalm_seeker_is_told_its_targets_and_reads_the_whole_dialogue(fake, db_path, catalog):
    """iEvaLM C.3: "Your target items: …", the whole transcript, at most 128 tokens; the described seeker reads
    descriptions, the last ten turns and answers in 80 tokens."""
    targets = case_for(catalog).targets
    turns = [Turn("user" if n % 2 else "system", f"message number {n}.") for n in range(1, 15)]
    conversation = Conversation(system_id="x", turns=turns)
    SimulatedUser(client(fake, db_path), targets, seed=1).say(conversation, "no_list")
    SimulatedUser(client(fake, db_path), targets, seed=1, seeker="described").say(conversation, "no_list")
    named, described = fake.chat_requests()[-2:]
    assert "Your target items: Inception (2010)" in named["messages"][0]["content"]
    assert "Inception" not in described["messages"][0]["content"]
    assert "message number 1." in named["messages"][1]["content"]
    assert "message number 1." not in described["messages"][1]["content"]
    assert (named["max_tokens"], described["max_tokens"]) == (128, 80)


def test_the_ievalm_seeker_drops_a_sentence_naming_a_target_and_says_sorry_until_a_hit(fake, db_path, catalog):
    """iEvaLM's chat.py: a sentence whose partial ratio with a target title (with or without the year) exceeds 90
    is dropped, and "Sorry, " starts the answer while no target was recommended."""
    from evaluators.simulator.leaks import ievalm_filter

    inception = catalog.match(TARGET)
    text, dropped = ievalm_filter(
        "I adore Inception (2010). Something with dream heists, please.", [inception], sorry=True
    )
    assert text == "Sorry, Something with dream heists, please."
    assert dropped == [("I adore Inception (2010).", TARGET)]
    assert ievalm_filter("It is like inception but lighter! Any tips?", [inception], sorry=False)[0] == "Any tips?"
    user = SimulatedUser(client(fake, db_path), (inception,), seed=2)
    fake.enqueue(Reply("Not those. I really want Inception. A dream heist with layers."))
    turn = user.say(Conversation(system_id="x", turns=[Turn("system", "Try Heat.")]), "reject", shown="Heat (1995)")
    assert turn.text == "Sorry, Not those. A dream heist with layers."
    assert turn.metadata["leak"] == {"titles": [TARGET], "dropped": ["I really want Inception."]}
    assert user.leaks["dropped"] == 1 and len(fake.chat_requests()) == 1  # no regeneration
    fake.enqueue(Reply("I want Inception."))  # nothing left once the sentence is dropped: redacted, never empty
    opened = user.say(Conversation(system_id="x"), "open")
    assert opened.text == f"I want {REDACTED}." and opened.metadata["leak"]["redacted"] is True
    fake.enqueue(Reply("Great, thanks a lot!"))
    accepted = user.say(Conversation(system_id="x"), "accept", title=TARGET, allowed={inception.id})
    assert accepted.text == "Great, thanks a lot!"  # a hit: no "Sorry, "
