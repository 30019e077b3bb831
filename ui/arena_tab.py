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
    SideView,
    battle_view,
    send,
    start_battle,
    vote,
)
from crs_backends.registry import catalog_for_chat
from crs_backends.session import EmptyMessage, prepare_user_message
from storage.arena import get_battle
from storage.db import get_db
from storage.text import clean_text
from ui.render import safe_markdown, safe_text
from ui.services import Services

VOTES = {"a": "👈 A is better", "b": "👉 B is better", "tie": "🤝 Tie", "both_bad": "👎 Both are bad"}
SHOWN_ITEMS = 5

INTRO = (
    "## Arena\nTwo anonymous systems answer each of your messages. Chat as long as you like, then vote. "
    "The systems' names are revealed only after your vote; one vote per battle."
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
        buttons = {choice: gr.Button(label, interactive=False) for choice, label in VOTES.items()}
    feedback = gr.Textbox(label="Feedback (optional)", placeholder="What made one answer better?", max_lines=4)
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
        db = get_db(services.db_path)
        current = get_battle(db, battle_id) if battle_id else None
        try:
            prepare_user_message(text)
            if current is None:
                session = request.session_hash if request is not None else ""
                try:
                    current = start_battle(
                        db,
                        services.ready_system_ids(),
                        random.Random(),
                        domain=catalog_for_chat().domain,
                        session=session or "",
                    )
                except ValueError as e:  # fewer than two systems installed
                    raise gr.Error(str(e)) from None
            replies = send(current, text, db_path=services.db_path)
        except (EmptyMessage, BattleClosed) as e:
            view = battle_view(db, current.id) if current else None
            return *_panes(view), safe_text(str(e)), battle_id, text
        errors = [r.error for r in replies.values() if r.error]
        notice = " ".join(errors + ["Send again to retry."]) if errors else ""
        return *_panes(battle_view(db, current.id)), safe_text(notice), current.id, ("" if not errors else text)

    def on_vote(choice):
        def handler(feedback_text, battle_id, request: gr.Request):
            """Record the vote and reveal both systems."""
            if not battle_id:
                raise gr.Error("No battle yet: send a message first.")
            voter = request.session_hash if request is not None else ""
            try:
                reveal = vote(
                    get_db(services.db_path),
                    battle_id,
                    choice,
                    clean_text(feedback_text or "")[:2000],
                    voter=voter or "",
                )
            except DuplicateVote:
                raise gr.Error("This battle already has its vote. Start a new battle to vote again.") from None
            except BattleNotReady as e:
                raise gr.Error(str(e)) from None
            except KeyError:
                raise gr.Error("This battle does not exist (any more): press New battle to start one.") from None
            services.board_changed()
            return (
                f"**System A was {safe_text(reveal.label_a)}** (`{safe_text(reveal.system_a)}`)",
                f"**System B was {safe_text(reveal.label_b)}** (`{safe_text(reveal.system_b)}`)",
                f"Thank you: your vote “{VOTES[choice]}” is recorded. Press **New battle** for another round.",
                "",
            )

        return handler

    def on_new():
        return [], [], "", "", "", None, "", ""

    def controls(battle_id):
        """Vote buttons only once both sides answered; no more messages after the vote."""
        view = battle_view(get_db(services.db_path), battle_id) if battle_id else None
        voted = view is not None and view.reveal is not None
        ready = view is not None and view.ready
        return (
            *[gr.Button(interactive=ready) for _ in VOTES],
            gr.Textbox(interactive=not voted),
            gr.Button(interactive=not voted),
        )

    control_outputs = [*buttons.values(), message, send_button]
    gr.on(
        triggers=[send_button.click, message.submit],
        fn=on_send,
        inputs=[message, battle],
        outputs=[chat_a, chat_b, status, battle, message],
        api_name="arena_send",
        concurrency_limit=4,
    ).then(controls, inputs=[battle], outputs=control_outputs, api_visibility="private")
    votes = []
    for choice, button in buttons.items():
        voted = button.click(
            on_vote(choice),
            inputs=[feedback, battle],
            outputs=[name_a, name_b, status, feedback],
            api_name=f"arena_vote_{choice}",
        )
        voted.then(controls, inputs=[battle], outputs=control_outputs, api_visibility="private")
        votes.append(voted)
    new.click(
        on_new,
        outputs=[chat_a, chat_b, name_a, name_b, status, battle, message, feedback],
        api_name="arena_new",
    ).then(controls, inputs=[battle], outputs=control_outputs, api_visibility="private")
    return votes


def _panes(view: BattleView | None) -> tuple[list[dict], list[dict]]:
    if view is None:
        return [], []
    return _messages(view.a), _messages(view.b)


def _messages(side: SideView) -> list[dict]:
    """One side's turns as Gradio chat messages, escaped; a system turn lists its first items."""
    messages = []
    for turn in side.turns:
        if turn.role == "user":
            messages.append({"role": "user", "content": safe_markdown(turn.text)})
            continue
        content = safe_markdown(turn.text)
        titles = [safe_text(i.title) for i in turn.items[:SHOWN_ITEMS] if i.title]
        if titles:
            content += "\n\n*Recommended:* " + " · ".join(f"{n}. {t}" for n, t in enumerate(titles, 1))
        messages.append({"role": "assistant", "content": content})
    return messages
