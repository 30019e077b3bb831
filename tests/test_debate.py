"""The multi-agent debate against the fake OpenAI server, and once on the embedded model."""

import json
import re

import pytest
from fake_openai import Error, Reply, Together

from evaluators.factors import FACTORS
from evaluators.judge.debate import ROLES, DebateConfig, parse_answer, run_debate, speaking_order
from llm_clients.base import LLMClient
from llm_clients.remote import OpenAICompatibleModel
from storage.records import DebateMessage, FactorScore

LOG = "<interaction>\nUser: Any film like Heat?\nSystem: Try Ronin (1998): a tense heist thriller.\n</interaction>"
NAMES = {
    "debate_user": "Common User",
    "debate_expert": "Domain Expert",
    "debate_linguist": "Linguist",
    "debate_hci": "HCI Expert",
}


def _factors(failed: dict[str, str] | None = None) -> list[FactorScore]:
    failed = failed or {}
    return [
        FactorScore(f, None, "judge", "r1", error=failed[f])
        if f in failed
        else FactorScore(f, 3.0, "judge", "r1", rationale=f"The {f} reason.")
        for f in FACTORS
    ]


def _clients(fake, models: dict[str, str] | None = None) -> dict[str, LLMClient]:
    models = models or {}
    return {
        role: LLMClient(
            OpenAICompatibleModel(
                models.get(role, "fake-model"), base_url=fake.base_url, api_key="k", max_retries=0, timeout=5
            ),
            db_path=None,
        )
        for role in ROLES
    }


def _answer(score, statement="My reasons.") -> Reply:
    return Reply(json.dumps({"evaluator": "someone", "statement": statement, "score": score}))


def _debate(fake, *, factors=None, models=None, on_message=None, **config):
    return run_debate(
        LOG, factors or _factors(), DebateConfig(clients=_clients(fake, models), **config), on_message=on_message
    )


def _prompt(request) -> str:
    """The debate prompt (the first user message) of a request."""
    return request["json"]["messages"][1]["content"]


def _speaker(request) -> str:
    """The role a request was made for, read from the persona in its prompt."""
    text = _prompt(request)
    return next(role for role, name in NAMES.items() if f"YOUR ROLE: {name}\n" in text)


def test_equal_scores_end_after_one_round(fake_openai):
    fake_openai.enqueue(*[_answer(70) for _ in ROLES])
    seen: list[DebateMessage] = []
    result = _debate(fake_openai, on_message=seen.append)
    assert (result.final_score, result.rounds_used, result.consensus) == (70.0, 1, True)
    assert [m.role for m in result.messages] == list(ROLES) and all(m.round == 1 for m in result.messages)
    assert sorted(m.role for m in seen) == sorted(ROLES) and all(m.error is None for m in seen)
    assert len(fake_openai.requests) == 4
    body = fake_openai.requests[0]["json"]
    assert body["response_format"] == {"type": "json_object"} and body["temperature"] == 0.0 and body["seed"] == 0
    assert "<discussion>" not in _prompt(fake_openai.requests[0])


def test_persistent_disagreement_runs_four_rounds_and_averages_the_last(fake_openai):
    rounds = [(10, 20, 30, 40), (20, 30, 40, 50), (30, 40, 50, 60), (40, 50, 60, 90)]
    fake_openai.enqueue(*[_answer(s, f"Round {r} says {s}.") for r, scores in enumerate(rounds, 1) for s in scores])
    result = _debate(fake_openai)
    assert (result.rounds_used, result.consensus, result.final_score) == (4, False, 60.0)
    assert [m.round for m in result.messages] == [r for r in (1, 2, 3, 4) for _ in ROLES]
    assert sorted(m.score for m in result.messages if m.round == 4) == [40, 50, 60, 90]
    assert len(fake_openai.requests) == 16
    # round 4 reads the whole discussion of rounds 1 to 3, oldest first
    last = _prompt(fake_openai.requests[-1])
    discussion = last[last.index("<discussion>") :]
    assert discussion.index("Round 1:") < discussion.index("Round 2:") < discussion.index("Round 3:")
    assert all(f"Round {r} says {s}." in discussion for r in (1, 2, 3) for s in rounds[r - 1])
    assert "Round 4 says" not in discussion and "round 4 of at most 4" in last


@pytest.mark.parametrize("tolerance, consensus", [(5.0, True), (4.9, False)])
def test_tolerance(fake_openai, tolerance, consensus):
    fake_openai.enqueue(*[_answer(s) for s in (70, 72, 74, 75)])
    result = _debate(fake_openai, tolerance=tolerance, max_rounds=1)
    assert (result.consensus, result.rounds_used, result.final_score) == (consensus, 1, 72.75)


@pytest.mark.parametrize(
    "bad, problem",
    [
        ("I would give it a solid seventy.", "no JSON object"),
        ('{"evaluator": "Common User", "statement": "Great.", "score": 120}', "outside 0-100"),
        ('{"evaluator": "Common User", "statement": "Great.", "score": "high"}', "not a number"),
        ('{"evaluator": "Common User", "score": 70}', '"statement" is missing'),
    ],
)
def test_a_malformed_answer_gets_one_repair(fake_openai, bad, problem):
    fake_openai.enqueue(Reply(bad), _answer(65, "Fixed."), *[_answer(65) for _ in range(3)])
    result = _debate(fake_openai, sequential=True)
    first = result.messages[0]
    assert (first.role, first.score, first.statement, first.error) == ("debate_user", 65.0, "Fixed.", None)
    assert bad in first.raw and "Fixed." in first.raw
    assert (result.final_score, result.consensus, len(fake_openai.requests)) == (65.0, True, 5)
    repair = fake_openai.requests[1]["json"]["messages"]
    assert repair[-2] == {"role": "assistant", "content": bad}
    assert problem in repair[-1]["content"] and '"evaluator": "Common User"' in repair[-1]["content"]


def test_malformed_twice_is_stored_as_an_error_and_left_out(fake_openai):
    fake_openai.enqueue(Reply("no idea"), Reply("still no idea"), *[_answer(60) for _ in range(3)])
    seen: list[DebateMessage] = []
    result = _debate(fake_openai, sequential=True, on_message=seen.append, max_rounds=1)
    failed = result.messages[0]
    assert failed.score is None and "after one repair" in failed.error and "no JSON object" in failed.error
    assert "no idea" in failed.raw and "still no idea" in failed.raw
    assert seen[0] is failed  # failed messages are reported too
    # the three valid scores agree, but a persona is missing: no consensus (CoRE: all roles), the mean is the
    # three's, not dragged down by the failure, and the result names the missing persona
    assert (result.final_score, result.consensus, result.rounds_used) == (60.0, False, 1)
    assert result.missing == ("debate_user",)
    # the others never read the failed role's answer
    assert all("no idea" not in _prompt(r) for r in fake_openai.requests[2:])


def test_a_failed_model_call_is_recorded_without_a_repair(fake_openai):
    fake_openai.enqueue(Error(500), *[_answer(50) for _ in range(3)])
    result = _debate(fake_openai, sequential=True, max_rounds=1)
    assert result.messages[0].score is None and "model call failed" in result.messages[0].error
    assert (result.final_score, len(fake_openai.requests)) == (50.0, 4)


def test_no_valid_score_ends_the_debate_without_a_final_score(fake_openai):
    fake_openai.enqueue(*[Reply("nothing useful") for _ in range(8)])
    result = _debate(fake_openai)
    assert (result.final_score, result.consensus, result.rounds_used) == (None, False, 1)
    assert len(result.messages) == 4 and all(m.error for m in result.messages)


@pytest.mark.parametrize(
    "text, expected",
    [
        ('```json\n{"evaluator": "Linguist", "statement": "Fluent.", "score": 80}\n```', ("Fluent.", 80.0)),
        ('Here is my view {as promised}:\n{"statement": " Fine. ", "score": "72.5"} Thanks!', ("Fine.", 72.5)),
        ('{"note": "draft"} then {"statement": "Final.", "score": 0}', ("Final.", 0.0)),
        ('{"statement": "Top.", "score": 100}', ("Top.", 100.0)),
    ],
)
def test_parse_answer_finds_the_json_object(text, expected):
    assert parse_answer(text) == expected


@pytest.mark.parametrize(
    "text, problem",
    [
        ('{"statement": "x", "score": -1}', "outside 0-100"),
        ('{"statement": "x", "score": 100.5}', "outside 0-100"),
        ('{"statement": "x", "score": true}', "not a number"),
        ('{"statement": "x", "score": NaN}', "not a number"),
        ('{"statement": "x", "score": null}', "not a number"),
        ('{"statement": "x"}', 'no "score"'),
        ('{"statement": "", "score": 50}', '"statement" is missing'),
        ("[50]", "no JSON object"),
    ],
)
def test_parse_answer_rejects_what_it_cannot_use(text, problem):
    with pytest.raises(ValueError, match=re.escape(problem)):
        parse_answer(text)


def test_answers_in_prose_and_code_fences_are_accepted(fake_openai):
    fenced = '```json\n{"evaluator": "Linguist", "statement": "Fluent.", "score": 80}\n```'
    fake_openai.enqueue(
        Reply(fenced), Reply('Sure! {"statement": "Good.", "score": "80"}'), *[_answer(80) for _ in range(2)]
    )
    result = _debate(fake_openai, sequential=True)
    assert (result.final_score, result.consensus, len(fake_openai.requests)) == (80.0, True, 4)
    assert [m.statement for m in result.messages[:2]] == ["Fluent.", "Good."]


def test_heterogeneous_debate_uses_each_roles_model(fake_openai):
    models = {role: f"model-{role}" for role in ROLES}
    fake_openai.enqueue(*[_answer(55) for _ in range(8)])
    concurrent = _debate(fake_openai, models=models)
    assert {r["json"]["model"] for r in fake_openai.requests} == set(models.values())
    assert {m.role: m.model for m in concurrent.messages} == models
    # sequential: requests follow the speaking order, so the models do too
    sequential = _debate(fake_openai, models=models, sequential=True)
    assert [r["json"]["model"] for r in fake_openai.requests[4:]] == [models[role] for role in ROLES]
    assert [m.model for m in sequential.messages] == [models[role] for role in ROLES]


def test_sequential_speakers_read_the_earlier_statements_of_their_round(fake_openai):
    fake_openai.enqueue(*[_answer(40 + 10 * i, statement=f"Opinion {i}.") for i in range(8)])
    result = _debate(fake_openai, sequential=True, max_rounds=2)
    assert result.rounds_used == 2 and not result.consensus
    round_one = [_prompt(r) for r in fake_openai.requests[:4]]
    for i, text in enumerate(round_one):
        assert all((f"Opinion {j}." in text) == (j < i) for j in range(4))
    assert "<discussion>" not in round_one[0] and "Round 1 (in progress):" in round_one[1]
    # round 2 starts with the next role; it reads all of round 1 and nothing of round 2 yet
    assert speaking_order(2) == [*ROLES[1:], ROLES[0]]
    assert [m.role for m in result.messages[4:]] == speaking_order(2)
    opener = _prompt(fake_openai.requests[4])
    assert _speaker(fake_openai.requests[4]) == "debate_expert"
    assert all(f"Opinion {j}." in opener for j in range(4)) and "in progress" not in opener


def test_peer_opinions_are_shuffled_per_round(fake_openai):
    fake_openai.enqueue(*[_answer(s) for _ in range(4) for s in (10, 20, 30, 40)])
    _debate(fake_openai)
    orders = []  # per reader in round 4: the order of the speakers of rounds 1, 2 and 3
    for request in fake_openai.requests[12:]:
        discussion = _prompt(request).split("<discussion>")[1].split("</discussion>")[0]
        orders.append([re.findall(r"^\[([A-Za-z ]+), score", block, re.M) for block in discussion.split("Round ")[1:]])
    assert len(orders) == 4 and all(o == orders[0] for o in orders)  # every reader of a round sees the same text
    assert all(sorted(block) == sorted(NAMES.values()) for block in orders[0])
    assert len({block[0] for block in orders[0]}) > 1  # no persona is always read first
    # the order is seeded: the same debate shows the same order
    fake_openai.requests.clear()
    fake_openai.enqueue(*[_answer(s) for s in (10, 20, 30, 40, 10, 20, 30, 40)])
    _debate(fake_openai, max_rounds=2)
    again = _prompt(fake_openai.requests[4]).split("Round 1:")[1]
    assert re.findall(r"^\[([A-Za-z ]+), score", again, re.M) == orders[0][0]


def _together(*replies: Reply) -> list[Together]:
    """One round's answers, each held until all of them are in flight together (the fake answers HTTP 503 to a
    request left waiting alone past its bound): concurrency shown by what happened, never by a clock."""
    group = [Together(len(replies), r) for r in replies]
    for member in group[1:]:
        member.barrier = group[0].barrier
    return group


def test_a_concurrent_round_sends_its_four_requests_together_and_the_next_round_after_it(fake_openai):
    first = _together(*[_answer(s, statement=f"Opinion {s}.") for s in (30, 40, 50, 60)])
    fake_openai.enqueue(*first, *_together(*[_answer(50, statement="Agreed.") for _ in ROLES]))
    config = DebateConfig(clients=_clients(fake_openai))
    result = run_debate(LOG, _factors(), config)
    # every answer came (a request sent alone would have had a 503 and an error): each round's four requests were
    # in flight together
    assert all(m.error is None for m in result.messages) and len(fake_openai.requests) == 8
    assert (result.rounds_used, result.consensus, result.final_score) == (2, True, 50.0)
    # round 2 began after round 1 ended: each of its requests reads all four answers of round 1, and none of round 1's
    # requests read anything of a discussion
    round_one, round_two = fake_openai.requests[:4], fake_openai.requests[4:]
    assert all("<discussion>" not in _prompt(r) for r in round_one)
    assert {_speaker(r) for r in round_one} == {_speaker(r) for r in round_two} == set(ROLES)
    for request in round_two:
        assert all(f"Opinion {s}." in _prompt(request) for s in (30, 40, 50, 60))


def test_prompt_shows_failed_factors_as_not_scored_and_marks_each_roles_factors(fake_openai):
    fake_openai.enqueue(*[_answer(50) for _ in ROLES])
    _debate(fake_openai, factors=_factors({"groundedness": "HTTP 500 from the judge"}), domain="books", sequential=True)
    prompts = {_speaker(r): _prompt(r) for r in fake_openai.requests}
    text = prompts["debate_expert"]
    assert "- Groundedness: not scored (the judge failed: HTTP 500 from the judge)" in text
    assert "Groundedness: 0" not in text and "- Novelty: 3/4. Reasons: The novelty reason." in text
    assert f"<conversation>\n{LOG}\n</conversation>" in text
    assert "You are a literature expert" in text
    assert "recommends books" in fake_openai.requests[0]["json"]["messages"][0]["content"]
    responsible = "responsible for these factors of the report: "
    assert responsible + "Novelty, Diversity and Groundedness" in text
    assert responsible + "Effectiveness, Recoverability and Coherence" in prompts["debate_user"]


def test_config_needs_all_four_roles(fake_openai):
    clients = _clients(fake_openai)
    del clients["debate_hci"]
    with pytest.raises(ValueError, match="debate_hci"):
        run_debate(LOG, _factors(), DebateConfig(clients=clients))
    assert fake_openai.requests == []


def test_embedded_model_debate_plumbing(embedded_model):
    # The 135M model judges badly; only the mechanics are checked here. One round (four calls, about 50 s on two
    # idle cores): a second round with the embedded model, reading the first, is tests/test_pipeline.py's
    # end-to-end test, and the rounds' logic is checked on the fake endpoint above.
    client = LLMClient(embedded_model)
    seen: list[DebateMessage] = []
    config = DebateConfig(clients=dict.fromkeys(ROLES, client), max_rounds=1)
    result = run_debate(LOG, _factors(), config, on_message=seen.append)
    assert result.rounds_used == 1 and len(result.messages) == 4 == len(seen)
    for m in result.messages:
        assert m.model == embedded_model.name and m.raw
        assert (m.score is not None and 0 <= m.score <= 100 and m.statement) or m.error
    # at least one persona scored (four errors would make None == None pass); the overall is their mean (fmean
    # sums otherwise than sum()/len(): compared within a tolerance)
    valid = [m.score for m in result.messages if m.round == result.rounds_used and m.score is not None]
    assert valid and result.final_score == pytest.approx(sum(valid) / len(valid), abs=1e-9)


def test_the_all_factors_reading_gives_every_persona_every_reason(fake_openai):
    """The named setting ``reading="all"`` (this project's earlier reading): every factor's score with its reason."""
    from evaluators.factors import LABELS

    fake_openai.enqueue(*[_answer(50) for _ in ROLES])
    _debate(fake_openai, reading="all")
    prompts = [_prompt(r) for r in fake_openai.requests]
    assert len(prompts) == 4
    for text in prompts:
        for f in FACTORS:
            assert f"- {LABELS[f]}: 3/4. Reasons: The {f} reason." in text
        assert "none given" not in text


def test_the_domain_comes_from_the_conversation(fake_openai):
    fake_openai.enqueue(*[_answer(50) for _ in ROLES])
    run_debate(LOG, _factors(), DebateConfig(clients=_clients(fake_openai), domain="movies"), domain="books")
    assert all("recommends books" in r["json"]["messages"][0]["content"] for r in fake_openai.requests)


def test_the_default_evaluation_hands_the_judges_reasons_to_the_debate(fake_openai, db_path):
    """End to end: the default judge reasons, its scores are read at the rating token, the debate reads
    the reasons."""
    from catalog.catalog import get_catalog
    from evaluators.judge.factor_judge import JudgeConfig
    from evaluators.judge.llm_scorer import llm_judge
    from evaluators.pipeline import EvaluationSetup, evaluate_conversation
    from storage.records import Conversation, ItemRef, Turn

    judge = [
        Reply(f"Reason number {i}: 3 of the 5 replies fit.\n<rating>4</rating>", at={"answer": {"4": 0.6, "3": 0.4}})
        for i in range(12)
    ]
    fake_openai.enqueue(*judge, *[_answer(60) for _ in ROLES])
    conversation = Conversation(
        system_id="x",
        domain="books",
        turns=[
            Turn("user", "A mystery novel?"),
            Turn("system", "Try The Big Sleep.", items=[ItemRef("b1", "The Big Sleep")]),
        ],
        targets=[ItemRef("b2", "Gone Girl")],
    )
    client = LLMClient(
        OpenAICompatibleModel("judge", base_url=fake_openai.base_url, api_key="k", max_retries=0, timeout=5),
        db_path=db_path,
    )
    setup = EvaluationSetup(
        llm_judge(JudgeConfig(clients=[client], max_concurrency=1), DebateConfig(clients=_clients(fake_openai))),
        catalog=get_catalog(),
    )
    evaluation = evaluate_conversation(conversation, setup, db_path=db_path)
    assert evaluation.status == "done" and evaluation.overall == 60.0
    # the rating token's alternatives: 4 (0.6) and 3 (0.4); Appropriateness, 4 or 0 under core, reads 4 alone
    scores = {s.factor: s.score for s in evaluation.factor_scores}
    assert scores.pop("appropriateness") == pytest.approx(4.0)
    assert all(score == pytest.approx(3.6) for score in scores.values())
    debate_prompts = [_prompt(r) for r in fake_openai.requests[12:]]
    assert len(debate_prompts) == 4
    for text in debate_prompts:
        # CoRE §4.2: each persona reads the reasons of its own three factors (the others' scores alone)
        assert text.count("Reasons: Reason number") == 3 and "/4. Reasons: Reason number" in text
    assert "recommends books" in fake_openai.requests[12]["json"]["messages"][0]["content"]
    # CoRE App. D: the common user compares the recommendations with the target item
    by_role = {_speaker(r): _prompt(r) for r in fake_openai.requests[12:]}
    assert "<groundtruth_item>" in by_role["debate_user"] and "Gone Girl" in by_role["debate_user"]
    assert all("<groundtruth_item>" not in by_role[role] for role in ROLES if role != "debate_user")
    assert evaluation.config["debate"]["reading"] == "own"


# CoRE §4.2: "The Common User prioritizes ... Effectiveness, Coherence, and Recoverability. The Domain Expert
# focuses on Novelty, Diversity, and Groundness. The Linguist evaluates ... Appropriateness, Naturalness, and
# Grammatical Correctness. Lastly, the HCI Expert examines Semantic Relevance, Explainability, and Proactiveness."
CORE_ROLES = {
    "debate_user": {"effectiveness", "coherence", "recoverability"},
    "debate_expert": {"novelty", "diversity", "groundedness"},
    "debate_linguist": {"appropriateness", "naturalness", "grammatical_correctness"},
    "debate_hci": {"semantic_relevance", "explainability", "proactiveness"},
}


def test_by_default_each_persona_reads_only_the_scores_and_reasons_of_its_own_factors(fake_openai):
    """CoRE §4.2, round 1: "We provide each role with the factor-wise scores and corresponding reasons relevant
    to their interests". Its own three factors: score and reason; the other nine: nothing, and the task does not
    ask it to take a whole report into account (issue #74, point 6)."""
    from evaluators.factors import LABELS

    fake_openai.enqueue(*[_answer(50) for _ in ROLES])
    _debate(fake_openai, sequential=True)
    prompts = {_speaker(r): _prompt(r) for r in fake_openai.requests}
    assert set(prompts) == set(ROLES)
    for role, text in prompts.items():
        report = text.split("<evaluation_result>")[1].split("</evaluation_result>")[0]
        assert len([line for line in report.splitlines() if line.startswith("- ")]) == 3
        for f in FACTORS:
            if f in CORE_ROLES[role]:
                assert f"- {LABELS[f]}: 3/4. Reasons: The {f} reason." in report
            else:
                assert f"- {LABELS[f]}:" not in report and f"The {f} reason." not in text
    system = fake_openai.requests[0]["json"]["messages"][0]["content"]
    assert "whole report" not in system and "twelve factors, each rated" not in system
    assert "the three factors you are responsible for" in system


def test_the_own_and_scores_reading_adds_the_other_factors_scores_alone(fake_openai):
    """The named variant ``reading="own+scores"`` (this project's default before issue #74): own factors with
    reasons, the other nine with their score alone."""
    from evaluators.factors import LABELS

    fake_openai.enqueue(*[_answer(50) for _ in ROLES])
    _debate(fake_openai, sequential=True, reading="own+scores")
    prompts = {_speaker(r): _prompt(r) for r in fake_openai.requests}
    for role, text in prompts.items():
        for f in FACTORS:
            if f in CORE_ROLES[role]:
                assert f"- {LABELS[f]}: 3/4. Reasons: The {f} reason." in text
            else:
                assert f"- {LABELS[f]}: 3/4.\n" in text + "\n" and f"The {f} reason." not in text
    assert "whole report" in fake_openai.requests[0]["json"]["messages"][0]["content"]


def test_reasons_reach_the_personas_whole(fake_openai):
    """CoRE passes the judge's reasons on as they are: a long one is not cut."""
    long = "Because " + "the list fits the request well " * 80 + "end."
    factors = [FactorScore(f, 3.0, "judge", "r1", rationale=long if f == "coherence" else "ok") for f in FACTORS]
    fake_openai.enqueue(*[_answer(50) for _ in ROLES])
    _debate(fake_openai, factors=factors, sequential=True)
    user = next(_prompt(r) for r in fake_openai.requests if _speaker(r) == "debate_user")
    assert len(long) > 2000 and long in user


def test_targets_go_to_the_common_user_only(fake_openai):
    """CoRE App. D: the Common User checks the recommendations against <groundtruth_item> (Effectiveness)."""
    fake_openai.enqueue(*[_answer(50) for _ in ROLES] * 2)
    run_debate(LOG, _factors(), DebateConfig(clients=_clients(fake_openai)), targets="- Heat (1995)")
    prompts = {_speaker(r): _prompt(r) for r in fake_openai.requests}
    assert "<groundtruth_item>\n- Heat (1995)\n</groundtruth_item>" in prompts["debate_user"]
    assert all("Heat (1995)" not in prompts[r] for r in ROLES if r != "debate_user")
    fake_openai.requests.clear()
    _debate(fake_openai)  # no targets: no block
    assert all("<groundtruth_item>" not in _prompt(r) for r in fake_openai.requests)


def test_only_all_four_agreeing_personas_are_a_consensus_and_the_transcript_says_of_how_many(fake_openai):
    """CoRE §4.2 ends the debate when *all* roles give the same score: two or three valid scores out of four
    never make a consensus (the debate goes on), and the summary says the overall is the mean of two."""
    from evaluators.judge.debate import overall_formed

    fake_openai.enqueue(Error(500), Error(500), _answer(60), _answer(60))
    result = _debate(fake_openai, sequential=True, max_rounds=1)
    assert (result.final_score, result.consensus, result.valid) == (60.0, False, 2)
    assert result.missing == ("debate_user", "debate_expert")
    assert overall_formed(result.messages) == "the mean of 2 of the 4 personas' scores in round 1"
    # three agreeing valid scores are not all roles: a second round is held, where all four agree
    fake_openai.enqueue(Error(500), _answer(60), _answer(60), _answer(60), *[_answer(60) for _ in ROLES])
    result = _debate(fake_openai, sequential=True, max_rounds=3)
    assert (result.final_score, result.consensus, result.valid, result.rounds_used) == (60.0, True, 4, 2)
    assert result.missing == ()


def test_a_debate_missing_a_persona_ends_partial_and_names_it(fake_openai, db_path):
    """CoRE §4.2's overall is the whole panel's: an evaluation whose debate lost a persona is ``partial``, never
    ``done``, and says which persona is missing (issue #74, point 7)."""
    from catalog.catalog import get_catalog
    from evaluators.judge.factor_judge import JudgeConfig
    from evaluators.judge.llm_scorer import llm_judge
    from evaluators.pipeline import EvaluationSetup, evaluate_conversation
    from storage.records import Conversation, ItemRef, Turn

    judge = [Reply("Fits.\n<rating>4</rating>", at={"answer": {"4": 1.0}}) for _ in range(12)]
    # sequential: the Common User speaks first in round 1 and fails twice (no JSON, then no JSON after repair)
    fake_openai.enqueue(*judge, Reply("no idea"), Reply("still none"), *[_answer(70) for _ in range(3)])
    conversation = Conversation(
        system_id="x",
        turns=[Turn("user", "A heist film?"), Turn("system", "Try Ronin.", items=[ItemRef("m1", "Ronin")])],
    )
    client = LLMClient(
        OpenAICompatibleModel("judge", base_url=fake_openai.base_url, api_key="k", max_retries=0, timeout=5),
        db_path=db_path,
    )
    debate = DebateConfig(clients=_clients(fake_openai), sequential=True, max_rounds=1)
    setup = EvaluationSetup(llm_judge(JudgeConfig(clients=[client], max_concurrency=1), debate), catalog=get_catalog())
    evaluation = evaluate_conversation(conversation, setup, db_path=db_path)
    assert evaluation.status == "partial" and evaluation.overall == 70.0 and evaluation.consensus is False
    assert "Common User" in evaluation.error and "debate" in evaluation.error


def test_the_summary_line_says_how_the_overall_was_formed():
    from evaluators.judge.llm_scorer import debate_summary
    from storage.records import Evaluation

    messages = [
        DebateMessage(round=1, role=role, model="m", statement="s", score=70.0 if i else None, error=None if i else "x")
        for i, role in enumerate(ROLES)
    ]
    evaluation = Evaluation(
        conversation_id="c",
        scorer="llm:j",
        status="done",
        overall=70.0,
        rounds_used=1,
        consensus=True,
        debate=messages,
        config={"debate": {"max_rounds": 4}},
    )
    assert "The overall is the mean of 3 of the 4 personas' scores in round 1." in debate_summary(evaluation)


def test_an_unknown_reading_is_refused(fake_openai):
    with pytest.raises(ValueError, match="reading"):
        _debate(fake_openai, reading="some")
    assert fake_openai.requests == []
