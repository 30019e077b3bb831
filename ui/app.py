"""The Gradio app: one tab per module, all wired to a :class:`Services` object."""

from __future__ import annotations

import gradio as gr

from ui import chat_tab
from ui import arena_tab, leaderboard_tab
from ui import evaluate_tab, settings_tab
from ui import simulate_tab
from ui.render import roles_notice
from ui.services import Services

TITLE = "CRS Arena"


def build_app(services: Services) -> gr.Blocks:
    with gr.Blocks(title=TITLE) as demo:
        gr.Markdown(
            f"# {TITLE}\nChat with conversational recommender systems, see what they recommend, "
            "and judge them."
        )
        gr.Markdown(roles_notice(services.role_configs()), elem_id="roles-notice")
        with gr.Tabs():
            with gr.Tab("Chat", id="chat"):
                chat_tab.build(services)
            with gr.Tab("Arena", id="arena"):
                arena_tab.build(services)
            with gr.Tab("Leaderboard", id="leaderboard"):
                leaderboard_tab.build(services)
            with gr.Tab("Evaluate", id="evaluate"):
                evaluate_tab.build(services)
            with gr.Tab("Simulate", id="simulate"):
                simulate_tab.build(services)
            with gr.Tab("Settings", id="settings"):
                settings_tab.build(services)
    return demo
