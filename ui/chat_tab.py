"""The Chat tab: talk with one system, see its recommendations beside every answer, and judge it.

Judging streams: :func:`evaluators.service.judge_stream` runs the evaluation in a worker thread and
yields each factor score and debate message as it is ready; :func:`judge` turns those events into
the updated table, radar chart and debate transcript, redrawing once per burst.
"""

from __future__ import annotations

import logging
import time
from typing import TYPE_CHECKING

import gradio as gr
import pandas as pd

from arena.human_ratings import QUESTIONS, SCALE, SENTIMENTS, RatingRefused, end_with_sentiment, rate_conversation
from crs_backends.registry import SystemUnavailable, catalog_for_chat, default_system_id, system_line
from crs_backends.session import ChatSession, EmptyMessage, prepare_user_message
from evaluators.factors import FACTORS
from evaluators.judge.factor_judge import MODES
from evaluators.log_readers import LIMITS
from evaluators.reporting import (
    FACTOR_COLUMNS,
    SCORER_CHOICES,
    debate_lines,
    factor_table,
    radar_figure,
    scorer_label,
    uses_demo_model,
)
from evaluators.scorer_setup import build_setup, default_mode
from evaluators.service import DebateSaid, FactorScored, Failed, judge_stream
from llm_clients.types import LLMError
from ui.render import chat_messages, items_table, safe_markdown, safe_text
from ui.services import Services, clean_text

if TYPE_CHECKING:
    from storage.records import DebateMessage, FactorScore

log = logging.getLogger(__name__)
MAX_TURNS = LIMITS.turns  # turns one chat conversation holds: the same limit an uploaded log has
STREAM_EVERY_S = 0.1  # a streamed reply is redrawn at most this often (each redraw sends the whole chat)


def build(services: Services) -> None:
    ids = services.system_ids()
    default = default_system_id() if default_system_id() in ids else ids[0]  # what answers best offline
    with gr.Row():
        system = gr.Dropdown(
            choices=services.system_choices(),
            value=default,
            label="System",
            scale=2,
            elem_id="chat-system",
        )
        variant = gr.Markdown(_variant_line(services, default), elem_id="system-variant")
    with gr.Accordion("What each system is", open=True):
        gr.Markdown(_about_systems(services, ids), elem_id="system-descriptions")
    with gr.Row():
        with gr.Column(scale=3):
            chatbot = gr.Chatbot(label="Conversation", height=460, sanitize_html=True, allow_tags=False)
            with gr.Row():
                message = gr.Textbox(
                    placeholder="Tell the system what you would like to watch…",
                    show_label=False,
                    scale=5,
                    max_lines=6,
                )
                send = gr.Button("Send", variant="primary", scale=1)
            status = gr.Markdown("", elem_id="chat-status")
        with gr.Column(scale=2):
            items = gr.Dataframe(
                value=items_table(None, catalog_for_chat()),
                label="Recommended items (newest turn first)",
                interactive=False,
                wrap=True,
                column_widths=["9%", "9%", "42%", "12%", "28%"],
            )
            conversation_id = gr.Textbox(label="Conversation id", interactive=False)
            new = gr.Button("New conversation")
    state = gr.State({"conversation_id": None, "system_id": default})
    with gr.Row():
        sentiment = gr.Radio(
            [(label, key) for key, label in SENTIMENTS.items()],
            label="How did this conversation end for you? (optional, as in CRS Arena)",
            elem_id="chat-sentiment",
            scale=2,
        )
        sentiment_status = gr.Markdown("", elem_id="chat-sentiment-status")
    with gr.Accordion("Rate this conversation (optional)", open=False, elem_id="chat-ratings"):
        gr.Markdown(
            "0 = not at all, 4 = completely. Your ratings are compared with the automatic judge's "
            "(the *Judge vs people* tab); rating again replaces your earlier ratings."
        )
        with gr.Row():
            rating_radios = [
                gr.Radio(list(SCALE), label=question, elem_id=f"chat-rate-{item}")
                for item, question in QUESTIONS.items()
            ]
        rate_button = gr.Button("Submit ratings", elem_id="chat-rate")
        rate_status = gr.Markdown("", elem_id="chat-rate-status")
    (judge_button, auto_judge, mode, debate, rounds, scorer), judge_views = _judge_section()

    def on_send(text, system_id, st):
        """Stream one exchange; the DB holds the canonical conversation. No Python error text reaches the user."""
        yield from send_message(services, text, system_id, st)

    def on_new(system_id):
        return new_conversation(services, system_id)

    def on_judge(conv_id, judge_mode, with_debate, max_rounds, scorer_choice="auto"):
        """Judge the conversation, streaming each factor and debate message as it arrives."""
        yield from judge(services, conv_id, judge_mode, with_debate, max_rounds, scorer_choice)
        services.board_changed()

    def on_auto_judge(auto, conv_id, judge_mode, with_debate, max_rounds, scorer_choice="auto"):
        """After a reply, judge again when the box is ticked and the last turn is the system's."""
        yield from auto_judge_after_reply(services, auto, conv_id, judge_mode, with_debate, max_rounds, scorer_choice)

    def on_rate(conv_id, understood, fit, interest, overall, request: gr.Request):
        """Store this session's 0-4 ratings of the conversation shown."""
        rater = (request.session_hash if request else "") or ""
        return rate(services, conv_id, [understood, fit, interest, overall], rater=rater)

    def on_sentiment(choice, conv_id):
        """Record how the conversation ended (satisfied or frustrated); it is then scored at once."""
        return end_chat(services, choice, conv_id)

    def on_reset_judge():
        return "", _no_scores(), radar_figure([]), []

    outputs = [chatbot, items, status, state, conversation_id, message]
    chat_event = gr.on(
        triggers=[send.click, message.submit],
        fn=on_send,
        inputs=[message, system, state],
        outputs=outputs,
        api_name="chat",
        concurrency_limit=4,
    )
    judge_inputs = [conversation_id, mode, debate, rounds, scorer]

    # live judging has its own queue: bulk uploads (Evaluate tab, queue "judge_bulk") cannot hold its slots
    def on_show_turn_scores(conv_id):
        """The conversation again, each reply with its turn scores once it is scored."""
        return show_turn_scores(services, conv_id)

    judge_button.click(
        on_judge,
        inputs=judge_inputs,
        outputs=judge_views,
        api_name="judge",
        concurrency_id="judge_live",
        concurrency_limit=2,
    ).then(on_show_turn_scores, inputs=[conversation_id], outputs=[chatbot], api_visibility="private")
    chat_event.success(
        on_auto_judge,
        inputs=[auto_judge, *judge_inputs],
        outputs=judge_views,
        api_visibility="private",
        concurrency_id="judge_live",
        concurrency_limit=2,
    ).then(on_show_turn_scores, inputs=[conversation_id], outputs=[chatbot], api_visibility="private")
    rate_button.click(
        on_rate, inputs=[conversation_id, *rating_radios], outputs=[rate_status], api_name="rate_conversation"
    )
    sentiment.input(
        on_sentiment, inputs=[sentiment, conversation_id], outputs=[sentiment_status], api_name="chat_sentiment"
    )
    new_outputs = [chatbot, items, status, state, conversation_id, variant]
    new.click(on_new, inputs=[system], outputs=new_outputs, api_name="new_conversation")
    system.change(on_new, inputs=[system], outputs=new_outputs, api_visibility="undocumented")
    gr.on(triggers=[new.click, system.change], fn=on_reset_judge, outputs=judge_views, api_visibility="private")
    gr.on(
        triggers=[new.click, system.change],
        fn=lambda: ("", *[None] * len(rating_radios), None, ""),
        outputs=[rate_status, *rating_radios, sentiment, sentiment_status],
        api_visibility="private",
    )


def send_message(services: Services, text, system_id, st):
    """Stream one exchange: yields (chat, items, status, state, conversation id, message box).

    The database holds the canonical conversation. No Python error text reaches the user.
    """
    # the conversation id output is always a string (the id, or "" before there is one): an API client reads it
    # as the conversation's id, and a component update there broke clients (bench/load.py) when a turn ended early
    conversation_id = (st or {}).get("conversation_id") or ""
    try:
        for out in _send_turn(services, text, system_id, st):
            conversation_id = out[4]
            yield out
    except Exception:  # a bug or a fault below: log it, tell the user plainly, keep what is saved
        log.exception("chat turn failed")
        message = "⚠️ Something went wrong on our side while answering. Your message is saved; send again to retry."
        yield gr.skip(), gr.skip(), message, gr.skip(), conversation_id, gr.skip()


def _box_id(conversation_id: object) -> str | None:
    """The conversation id box's value, cleaned (None when it holds nothing)."""
    if not isinstance(conversation_id, str) or not conversation_id.strip():
        return None
    return clean_text(conversation_id.strip())


def show_turn_scores(services: Services, conversation_id: str | None):
    """The chat pane with each reply's turn scores (unchanged when there is no conversation)."""
    cid = _box_id(conversation_id)
    conversation = services.conversation(cid) if cid else None
    if conversation is None:
        return gr.skip()
    return chat_messages(conversation, turn_scores=services.turn_scores(conversation.id))


def end_chat(services: Services, sentiment: str | None, conversation_id: str | None) -> str:
    """Record the chat conversation's ending; the message says what was recorded, or why nothing was."""
    cid = _box_id(conversation_id)
    try:
        message = end_with_sentiment(services.db(), sentiment, conversation_id=cid)
    except RatingRefused as e:
        return safe_text(str(e))
    services.conversation_changed(cid, ended=True)
    return message


def rate(services: Services, conversation_id: str | None, values: list, *, rater: str = "") -> str:
    """Store the four 0-4 ratings (in :data:`arena.human_ratings.QUESTIONS` order) of a chat conversation; the
    message says what was stored, or why nothing was."""
    if len(values) != len(QUESTIONS):
        return f"Expected {len(QUESTIONS)} ratings, one per item."
    cid = _box_id(conversation_id)
    try:
        receipt = rate_conversation(services.db(), cid, rater, dict(zip(QUESTIONS, values, strict=True)))
    except RatingRefused as e:
        return safe_text(str(e))
    return receipt.message()


def _send_turn(services: Services, text, system_id, st):
    st = dict(st or {})
    shown_id = st.get("conversation_id") or ""  # what the id box keeps when the turn ends before a session
    if system_id not in services.system_ids():
        message = "Unknown system: choose one from the list."
        yield gr.skip(), gr.skip(), message, st, shown_id, gr.skip()
        return
    conversation = None
    if st.get("conversation_id") and st.get("system_id") == system_id:
        conversation = services.conversation(st["conversation_id"])
    try:
        user_message = prepare_user_message(text if isinstance(text, str) else None)
    except EmptyMessage as e:
        gr.Warning(str(e))
        yield chat_messages(conversation), gr.skip(), str(e), st, shown_id, gr.skip()
        return
    if conversation is not None and len(conversation.turns) + 2 > MAX_TURNS:
        message = (
            f"This conversation has reached {MAX_TURNS} turns, the most one conversation holds. "
            "Press **New conversation** to go on."
        )
        yield chat_messages(conversation), gr.skip(), message, st, shown_id, gr.skip()
        return
    try:
        chosen = services.system(system_id)
    except SystemUnavailable as e:
        gr.Warning(str(e).splitlines()[0])
        yield chat_messages(conversation), gr.skip(), f"⚠️ {safe_text(str(e))}", st, shown_id, text
        return
    session = ChatSession(chosen, db_path=services.db_path, conversation=conversation)
    st = {"conversation_id": session.conversation.id, "system_id": system_id}
    notice = user_message.notice or ""
    if user_message.notice:
        gr.Warning(user_message.notice)
    catalog = catalog_for_chat()
    pending = ""
    shown = time.monotonic()
    try:
        for piece in session.send(user_message):
            if isinstance(piece, str):
                pending += piece
                if time.monotonic() - shown >= STREAM_EVERY_S:  # redraw at most 10 times a second
                    shown = time.monotonic()
                    yield (
                        chat_messages(session.conversation, pending),
                        gr.skip(),
                        notice,
                        st,
                        session.conversation.id,
                        "",
                    )
    except LLMError as e:
        error = f"⚠️ {safe_text(str(e))} Your message is saved; send again to retry."
        gr.Warning(str(e))
        yield (
            chat_messages(session.conversation, turn_scores=services.turn_scores(session.conversation.id)),
            items_table(session.conversation, catalog),
            error,
            st,
            session.conversation.id,
            text,
        )
        return
    services.conversation_changed(session.conversation.id)  # scored in the background once it goes idle
    yield (
        chat_messages(session.conversation, turn_scores=services.turn_scores(session.conversation.id)),
        items_table(session.conversation, catalog),
        notice,
        st,
        session.conversation.id,
        "",
    )


def new_conversation(services: Services, system_id: str) -> tuple:
    """An empty chat with ``system_id``: (chat, items, status, state, conversation id, variant line)."""
    return (
        [],
        items_table(None, catalog_for_chat()),
        "",
        {"conversation_id": None, "system_id": system_id},
        "",
        _variant_line(services, system_id),
    )


def auto_judge_after_reply(services: Services, auto: bool, conversation_id, mode, with_debate, rounds, scorer="auto"):
    """Judge again after a reply when ``auto`` is ticked and the last turn is the system's; else change nothing."""
    conversation = services.conversation(conversation_id) if auto and conversation_id else None
    if conversation is None or not conversation.turns or conversation.turns[-1].role != "system":
        yield (gr.skip(),) * 4
        return
    yield from judge(services, conversation_id, mode, with_debate, rounds, scorer)


def _judge_section() -> tuple[list, list]:
    """The judge's controls (button, auto-judge box, mode, debate, rounds) and its views
    (status, factor table, radar chart, debate), the latter in the order :func:`judge` yields them."""
    gr.Markdown("### Judge this conversation")
    with gr.Row():
        judge_button = gr.Button("Judge this conversation", variant="secondary", scale=2, elem_id="judge-button")
        auto_judge = gr.Checkbox(label="Auto-judge after each reply", value=False, scale=1, elem_id="auto-judge")
    with gr.Accordion("Judge settings", open=False):
        scorer = gr.Dropdown(
            SCORER_CHOICES,
            value="auto",
            label="Scorer",
            info="offline, 'auto' uses the proxy: the embedded 135M LLM judge is not validated",
        )
        with gr.Row():
            mode = gr.Dropdown(
                list(MODES),
                value=default_mode(),
                label="Judge mode",
                info="reasoned: CoRE's method (reasons, then the written rating); reasoned+probability "
                "(the default): CoRE's reasons, then G-Eval's expectation over 0-4 at the rating token, finer "
                "than CoRE's integers, with the written rating stored beside it; 'probability' is the fast "
                "rating-only option (no reasons for the debate; preselected for the 135M demo judge)",
            )
            debate = gr.Checkbox(label="Run the four-persona debate", value=True)
            rounds = gr.Slider(1, 4, value=4, step=1, label="Most debate rounds")
    judge_status = gr.Markdown("", elem_id="judge-status")
    with gr.Row():
        factors = gr.Dataframe(
            value=_no_scores(),
            headers=FACTOR_COLUMNS,
            label="Factor scores (0-4)",
            interactive=False,
            wrap=True,
            scale=3,
            column_widths=["13%", "12%", "7%", "16%", "37%", "15%"],
            elem_id="judge-factors",
        )
        radar = gr.Plot(value=radar_figure([]), label="Factors", scale=2, elem_id="judge-radar")
    debate_view = gr.Chatbot(label="Debate", height=420, sanitize_html=True, allow_tags=False, elem_id="debate")
    return [judge_button, auto_judge, mode, debate, rounds, scorer], [judge_status, factors, radar, debate_view]


def judge(services: Services, conversation_id: str | None, mode: str, with_debate: bool, rounds, scorer: str = "auto"):
    """Yield (status, factor table, radar, debate transcript) as the evaluation progresses."""
    cid = _box_id(conversation_id)
    if cid is None:
        message = "Chat first: there is no conversation to judge yet."
        gr.Warning(message)
        yield message, gr.skip(), gr.skip(), gr.skip()
        return
    conversation = services.conversation(cid)
    if conversation is None:
        message = f"No conversation with the id `{safe_text(cid[:120])}` exists."
        gr.Warning("Unknown conversation id")
        yield message, gr.skip(), gr.skip(), gr.skip()
        return
    if not any(t.role == "system" for t in conversation.turns):
        message = "Nothing to judge yet: the conversation has no system reply."
        gr.Warning(message)
        yield message, gr.skip(), gr.skip(), gr.skip()
        return
    try:
        setup = build_setup(
            db_path=services.db_path, scorer=scorer or "auto", mode=mode, debate=bool(with_debate), rounds=int(rounds)
        )
    except (LLMError, ValueError) as e:
        message = f"⚠️ The judge could not be set up: {safe_text(str(e))}"
        yield message, gr.skip(), gr.skip(), gr.skip()
        return
    label, demo = scorer_label(setup), uses_demo_model(setup)
    scores: dict[str, FactorScore] = {}
    messages: list[DebateMessage] = []
    for event in judge_stream(conversation, setup, db_path=services.db_path, force=True):  # it may have grown
        if isinstance(event, FactorScored):
            scores[event.score.factor] = event.score
        elif isinstance(event, DebateSaid):
            messages.append(event.message)
        elif isinstance(event, Failed):
            yield (
                _status(label, f"⚠️ Judging stopped: {safe_text(event.reason)}. What finished is saved."),
                factor_table(scores.values()),
                radar_figure(scores.values(), setup.name, demo),
                _debate_view(messages),
            )
            return
        else:
            evaluation = event.evaluation
            outcome = setup.scorer.summary(evaluation)
            gaps = f" ⚠️ {safe_text(evaluation.error)}" if evaluation.error else ""
            yield (
                _status(label, f"{outcome}{gaps} Evaluation `{evaluation.id}` is saved."),
                factor_table(evaluation.factor_scores),
                radar_figure(evaluation.factor_scores, setup.name, demo),
                _debate_view(evaluation.debate, outcome),
            )
            return
        if event.settled:  # redraw once per burst of results
            done = len(scores)
            step = (
                f"{done}/{len(FACTORS)} factors scored"
                if done < len(FACTORS)
                else f"debate: {len(messages)} statement(s)"
            )
            yield (
                _status(label, f"Judging… {step}"),
                factor_table(scores.values()),
                radar_figure(scores.values(), setup.name, demo),
                _debate_view(messages),
            )


def _no_scores() -> pd.DataFrame:
    """The factor table before anything was judged: headers only."""
    return pd.DataFrame(columns=FACTOR_COLUMNS)


def _status(label: str, text: str) -> str:
    return f"**Judge:** {safe_text(label)}\n\n{text}"


def _debate_view(messages, outcome: str | None = None) -> list[dict]:
    """The debate as chat messages: one per statement, titled with round, persona and score;
    ``outcome`` (our own summary line) closes it."""
    view = []
    for line in debate_lines(messages):
        content = safe_markdown(line.statement)  # shown as written: "<discussion>" reads <discussion>
        if line.error:
            content = f"{content}\n\n⚠️ {safe_text(line.error)}".strip()
        view.append(
            {
                "role": "assistant",
                "content": content,
                "metadata": {"title": safe_text(line.title), "log": safe_text(line.model)},
            }
        )
    if outcome:
        view.append({"role": "assistant", "content": f"**{outcome}**"})
    return view


def _variant_line(services: Services, system_id: str) -> str:
    info = services.system_info(system_id)
    line = f"Running: {safe_text(system_line(info))}"
    if info.demo:
        line += " — a small demo version; its replies are not representative."
    return line


def _about_systems(services: Services, ids: list[str]) -> str:
    """One line per system: what kind of thing runs (published checkpoint, small local version, demo model, …)."""
    return "\n".join(f"- {safe_text(system_line(services.system_info(s)))}" for s in ids)
