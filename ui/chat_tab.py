"""The Chat tab: talk with one system, see its recommendations beside every answer."""

from __future__ import annotations

import gradio as gr

from crs_backends.registry import catalog_for_chat
from crs_backends.session import ChatSession, EmptyMessage, prepare_user_message
from llm.types import LLMError
from storage.conversations import get_conversation
from storage.db import get_db
from ui.render import chat_messages, items_table, safe_text
from ui.services import Services


def build(services: Services) -> None:
    ids = services.system_ids()
    with gr.Row():
        system = gr.Dropdown(
            choices=[(services.system_info(s).label, s) for s in ids],
            value=ids[0],
            label="System",
            scale=2,
        )
        variant = gr.Markdown(_variant_line(services, ids[0]))
    with gr.Row():
        with gr.Column(scale=3):
            chatbot = gr.Chatbot(label="Conversation", height=460, sanitize_html=True)
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
    state = gr.State({"conversation_id": None, "system_id": ids[0]})

    def on_send(text, system_id, st):
        """Stream one exchange; the DB holds the canonical conversation."""
        st = dict(st or {})
        conversation = None
        if st.get("conversation_id") and st.get("system_id") == system_id:
            conversation = get_conversation(get_db(services.db_path), st["conversation_id"])
        try:
            user_message = prepare_user_message(text)
        except EmptyMessage as e:
            gr.Warning(str(e))
            yield chat_messages(conversation), gr.skip(), str(e), st, gr.skip(), gr.skip()
            return
        session = ChatSession(services.system(system_id), db_path=services.db_path, conversation=conversation)
        st = {"conversation_id": session.conversation.id, "system_id": system_id}
        notice = user_message.notice or ""
        if user_message.notice:
            gr.Warning(user_message.notice)
        catalog = catalog_for_chat()
        pending = ""
        try:
            for piece in session.send(user_message):
                if isinstance(piece, str):
                    pending += piece
                    yield chat_messages(session.conversation, pending), gr.skip(), notice, st, session.conversation.id, ""
        except LLMError as e:
            error = f"⚠️ {safe_text(str(e))} Your message is saved; send again to retry."
            gr.Warning(str(e))
            yield chat_messages(session.conversation), items_table(session.conversation, catalog), error, st, session.conversation.id, text
            return
        yield chat_messages(session.conversation), items_table(session.conversation, catalog), notice, st, session.conversation.id, ""

    def on_new(system_id):
        return [], items_table(None, catalog_for_chat()), "", {"conversation_id": None, "system_id": system_id}, "", _variant_line(services, system_id)

    outputs = [chatbot, items, status, state, conversation_id, message]
    gr.on(
        triggers=[send.click, message.submit],
        fn=on_send,
        inputs=[message, system, state],
        outputs=outputs,
        api_name="chat",
        concurrency_limit=4,
    )
    new_outputs = [chatbot, items, status, state, conversation_id, variant]
    new.click(on_new, inputs=[system], outputs=new_outputs, api_name="new_conversation")
    system.change(on_new, inputs=[system], outputs=new_outputs, api_visibility="undocumented")


def _variant_line(services: Services, system_id: str) -> str:
    info = services.system_info(system_id)
    line = f"Running: **{safe_text(info.label)}**, {safe_text(info.variant)}"
    if info.demo:
        line += " — a small demo version; its replies are not representative."
    return line
