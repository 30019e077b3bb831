"""The Arena tab: two anonymous systems answer the same messages; vote, then see who they were.

Identities stay on the server until the vote: the only state is the battle id, the chat panes
show texts with system names masked (:func:`arena.battles.battle_view`), and the name panes stay
empty until :func:`arena.battles.vote` returns the reveal.
"""

from __future__ import annotations

import random

import gradio as gr

from arena.battles import (
    BattleClosed,
    BattleNotReady,
    BattleView,
    DuplicateVote,
    NotTheVoter,
    Reveal,
    SideView,
    battle_view,
    find_battle,
    reveal,
    send,
    start_battle,
    vote,
)
from arena.human_ratings import QUESTIONS, SCALE, SENTIMENTS, RatingRefused, end_with_sentiment, rate_battle
from crs_backends import health
from crs_backends.session import EmptyMessage, prepare_user_message
from ui.render import reply_markdown, safe_markdown, safe_text, turn_score_line
from ui.services import Services

VOTES = {"a": "👈 A is better", "b": "👉 B is better", "tie": "🤝 Tie", "both_bad": "👎 Both are bad"}
SHOWN_ITEMS = 5

INTRO = (
    "## Arena\nTwo anonymous systems answer each of your messages. Chat as long as you like, then vote. "
    "After your vote you may rate both sides in a few taps; the systems' names are revealed once you rate or skip. "
    "One vote per battle."
)
RATING_INTRO = (
    "### Rate both sides (optional)\n0 = not at all, 4 = completely. Your ratings check how far the automatic "
    "judge agrees with people, so they are asked before you learn who the systems were."
)


def build(services: Services) -> list:
    """The tab's components; returns the vote events (the leaderboard refreshes after them)."""
    gr.Markdown(INTRO)
    with gr.Row():
        chat_a = gr.Chatbot(label="System A", height=420, sanitize_html=True, allow_tags=False)
        chat_b = gr.Chatbot(label="System B", height=420, sanitize_html=True, allow_tags=False)
    with gr.Row():
        name_a = gr.Markdown("", elem_id="arena-name-a")
        name_b = gr.Markdown("", elem_id="arena-name-b")
    with gr.Row():
        endings = {
            side: gr.Radio(
                [(label, key) for key, label in SENTIMENTS.items()],
                label=f"How did your conversation with System {side.upper()} end? (optional)",
                elem_id=f"arena-sentiment-{side}",
            )
            for side in ("a", "b")
        }
    with gr.Row():
        buttons = {choice: gr.Button(label, interactive=False) for choice, label in VOTES.items()}
    feedback = gr.Textbox(label="Feedback (optional)", placeholder="What made one answer better?", max_lines=4)
    with gr.Group(visible=False, elem_id="arena-ratings") as rating_box:
        gr.Markdown(RATING_INTRO)
        with gr.Row():
            radios = {}
            for side in ("a", "b"):
                with gr.Column():
                    gr.Markdown(f"**System {side.upper()}**")
                    for item, question in QUESTIONS.items():
                        radios[side, item] = gr.Radio(
                            list(SCALE), label=question, elem_id=f"rate-{side}-{item}", elem_classes="rating-item"
                        )
        with gr.Row():
            rate_button = gr.Button("Submit ratings and reveal", variant="primary", elem_id="arena-rate")
            skip_button = gr.Button("Skip and reveal", elem_id="arena-skip")
    with gr.Row():
        message = gr.Textbox(
            placeholder="Ask both systems for a movie recommendation…", show_label=False, scale=5, max_lines=6
        )
        send_button = gr.Button("Send", variant="primary", scale=1)
    status = gr.Markdown("", elem_id="arena-status")
    new = gr.Button("🎲 New battle")
    battle = gr.State(None)  # the battle id, nothing else

    def on_send(text, battle_id, request: gr.Request):
        """Start a battle on the first message, send the message to both sides, show both answers."""
        return send_message(services, text, battle_id, session=_session(request))

    def on_vote(choice):
        def handler(feedback_text, battle_id, request: gr.Request):
            """Record the vote and offer the ratings; the names follow the ratings or their skip."""
            return record_vote(services, choice, feedback_text, battle_id, voter=_session(request))

        return handler

    def on_rate(a1, a2, a3, a4, b1, b2, b3, b4, battle_id, request: gr.Request):
        """Store the voter's 0-4 ratings of both sides (four per side, A first), then reveal both systems."""
        return rate_and_reveal(services, battle_id, [a1, a2, a3, a4, b1, b2, b3, b4], voter=_session(request))

    def on_sentiment(side):
        def handler(choice, battle_id, request: gr.Request):
            """Record how the conversation with this side ended (satisfied or frustrated)."""
            return end_side(services, side, choice, battle_id, session=_session(request))

        return handler

    def on_skip(battle_id, request: gr.Request):
        """Reveal both systems without ratings."""
        return show_reveal(services, battle_id, voter=_session(request), note="")

    def on_controls(battle_id):
        """Vote buttons only once both sides answered; no more messages after the vote."""
        return controls(services, battle_id)

    control_outputs = [*buttons.values(), message, send_button]
    gr.on(
        triggers=[send_button.click, message.submit],
        fn=on_send,
        inputs=[message, battle],
        outputs=[chat_a, chat_b, status, battle, message],
        api_name="arena_send",
        concurrency_limit=4,
    ).then(on_controls, inputs=[battle], outputs=control_outputs, api_visibility="private")
    radio_list = list(radios.values())
    votes = []
    for choice, button in buttons.items():
        voted = button.click(
            on_vote(choice),
            inputs=[feedback, battle],
            outputs=[name_a, name_b, status, feedback, rating_box, *radio_list],
            api_name=f"arena_vote_{choice}",
        )
        voted.then(on_controls, inputs=[battle], outputs=control_outputs, api_visibility="private")
        votes.append(voted)
    reveal_outputs = [chat_a, chat_b, name_a, name_b, status, rating_box]
    rate_button.click(on_rate, inputs=[*radio_list, battle], outputs=reveal_outputs, api_name="arena_rate")
    skip_button.click(on_skip, inputs=[battle], outputs=reveal_outputs, api_name="arena_reveal")
    for side, radio in endings.items():
        radio.input(on_sentiment(side), inputs=[radio, battle], outputs=[status], api_name=f"arena_sentiment_{side}")
    new.click(
        new_battle,
        outputs=[
            chat_a,
            chat_b,
            name_a,
            name_b,
            status,
            battle,
            message,
            feedback,
            rating_box,
            *radio_list,
            *endings.values(),
        ],
        api_name="arena_new",
    ).then(on_controls, inputs=[battle], outputs=control_outputs, api_visibility="private")
    return votes


def send_message(services: Services, text: str, battle_id: str | None, *, session: str = "") -> tuple:
    """(pane A, pane B, status, battle id, message box): start a battle on the first message (two
    ready systems, fewest battles first), send ``text`` to both sides and show both answers masked."""
    db = services.db()
    current = find_battle(db, battle_id)
    try:
        prepare_user_message(text)
        if current is None:
            try:
                current = start_battle(
                    db, services.ready_system_ids(), random.Random(), domain=services.chat_domain(), session=session
                )
            except ValueError as e:  # fewer than two systems installed, or ready now
                resting = services.resting_system_labels()
                if resting:
                    minutes = round(health.REST_SECONDS / 60)
                    raise gr.Error(
                        f"Fewer than two systems can answer right now: {safe_text(', '.join(resting))} failed to "
                        f"answer in the last {minutes} minutes and sit out new battles for that long. "
                        "Try again later, or chat with the others in the Chat tab."
                    ) from None
                raise gr.Error(str(e)) from None
        replies = send(current, text, db_path=services.db_path)
    except (EmptyMessage, BattleClosed) as e:
        view = battle_view(db, current.id) if current else None
        return *_panes(view), safe_text(str(e)), battle_id, text
    services.conversation_changed(current.conversation_a, current.conversation_b)  # scored once idle or voted
    errors = [r.error for r in replies.values() if r.error]
    notice = " ".join(errors + ["Send again to retry."]) if errors else ""
    return *_panes(battle_view(db, current.id)), safe_text(notice), current.id, ("" if not errors else text)


def record_vote(
    services: Services, choice: str, feedback_text: str | None, battle_id: str | None, *, voter: str = ""
) -> tuple:
    """(name A, name B, thanks, feedback box, rating box, 8 emptied ratings): record the vote and offer the ratings;
    the names stay hidden until the voter rates or skips (:mod:`arena.human_ratings` says why). A vote that cannot
    count raises :class:`gradio.Error` with the reason."""
    if not battle_id:
        raise gr.Error("No battle yet: send a message first.")
    try:
        vote(services.db(), battle_id, choice, feedback_text or "", voter=voter)
    except DuplicateVote:
        raise gr.Error("This battle already has its vote. Start a new battle to vote again.") from None
    except BattleNotReady as e:
        raise gr.Error(str(e)) from None
    except KeyError:
        raise gr.Error("This battle does not exist (any more): press New battle to start one.") from None
    battle = find_battle(services.db(), battle_id)
    if battle is not None:  # the vote ends both conversations: score them now, in the background
        services.conversation_changed(battle.conversation_a, battle.conversation_b, ended=True)
    services.board_changed()
    return (
        "",
        "",
        f"Thank you: your vote “{VOTES[choice]}” is recorded. Rate both sides below, or skip, to see who they were.",
        "",
        gr.Group(visible=True),
        *[None] * (2 * len(QUESTIONS)),
    )


def rate_and_reveal(services: Services, battle_id: str | None, values: list, *, voter: str = "") -> tuple:
    """(pane A, pane B, name A, name B, status, rating box): store the voter's ratings of both sides (four per side, in
    :data:`arena.human_ratings.QUESTIONS` order, A first), then reveal; a refused rating raises
    :class:`gradio.Error` saying why, and nothing is stored."""
    items = list(QUESTIONS)
    if not isinstance(values, (list, tuple)) or len(values) != 2 * len(items):
        raise gr.Error(f"Expected {2 * len(items)} ratings: four for System A, then four for System B.")
    side_a, side_b = (
        dict(zip(items, values[: len(items)], strict=True)),
        dict(zip(items, values[len(items) :], strict=True)),
    )
    try:
        receipt = rate_battle(services.db(), battle_id, voter, side_a, side_b)
    except RatingRefused as e:
        raise gr.Error(str(e)) from None
    return show_reveal(services, battle_id, voter=voter, note=receipt.message())


def show_reveal(services: Services, battle_id: str | None, *, voter: str = "", note: str = "") -> tuple:
    """(pane A, pane B, name A, name B, status, rating box hidden): both systems of the voter's voted battle, and
    each reply's turn scores where the conversation is scored (never before the vote and the ratings: they would
    tell the person what the judge thinks)."""
    if not battle_id:
        raise gr.Error("No battle yet: send a message first.")
    try:
        shown: Reveal = reveal(services.db(), battle_id, voter)
    except (BattleNotReady, NotTheVoter) as e:
        raise gr.Error(str(e)) from None
    except KeyError:
        raise gr.Error("This battle does not exist (any more): press New battle to start one.") from None
    scores = [services.turn_scores(c) for c in (shown.conversation_a, shown.conversation_b)]
    return (
        *_panes(battle_view(services.db(), battle_id), scores),
        f"**System A was {safe_text(shown.label_a)}** (`{safe_text(shown.system_a)}`)",
        f"**System B was {safe_text(shown.label_b)}** (`{safe_text(shown.system_b)}`)",
        " ".join(p for p in (note, "Press **New battle** for another round.") if p),
        gr.Group(visible=False),
    )


def new_battle() -> tuple:
    """Empty panes, names, status, battle, message and feedback, the ratings hidden and emptied, the endings cleared:
    the next message starts a new battle."""
    return [], [], "", "", "", None, "", "", gr.Group(visible=False), *[None] * (2 * len(QUESTIONS)), None, None


def end_side(services: Services, side: str, sentiment: str | None, battle_id: str | None, *, session: str = "") -> str:
    """Record how the conversation with one side ended; the status line says what was recorded, or why not."""
    try:
        message = end_with_sentiment(services.db(), sentiment, battle_id=battle_id, side=side, session=session)
    except RatingRefused as e:
        return safe_text(str(e))
    return f"System {side.upper()}: {message}"


def controls(services: Services, battle_id: str | None) -> tuple:
    """The vote buttons (enabled once both sides answered), the message box and Send (disabled after the vote)."""
    view = battle_view(services.db(), battle_id) if battle_id else None
    voted = view is not None and view.reveal is not None
    ready = view is not None and view.ready
    return (
        *[gr.Button(interactive=ready) for _ in VOTES],
        gr.Textbox(interactive=not voted),
        gr.Button(interactive=not voted),
    )


def _session(request: gr.Request | None) -> str:
    """The browser session's hash ('' when the call carries none)."""
    return (request.session_hash if request is not None else "") or ""


def _panes(view: BattleView | None, turn_scores: list[dict[int, dict]] | None = None) -> tuple[list[dict], list[dict]]:
    if view is None:
        return [], []
    a, b = turn_scores or [{}, {}]
    return _messages(view.a, a), _messages(view.b, b)


def _messages(side: SideView, turn_scores: dict[int, dict] | None = None) -> list[dict]:
    """One side's turns as Gradio chat messages, escaped; a system turn lists its first items (and its turn scores
    when given)."""
    messages = []
    for k, turn in enumerate(side.turns):
        if turn.role == "user":
            messages.append({"role": "user", "content": safe_markdown(turn.text)})
            continue
        content = reply_markdown(turn)
        titles = [safe_text(i.title) for i in turn.items[:SHOWN_ITEMS] if i.title]
        if titles:
            content += "\n\n*Recommended:* " + " · ".join(f"{n}. {t}" for n, t in enumerate(titles, 1))
        if turn_scores and k in turn_scores:
            content += "\n\n" + turn_score_line(turn_scores[k])
        messages.append({"role": "assistant", "content": content})
    return messages
