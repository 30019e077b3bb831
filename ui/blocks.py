"""The Gradio app: one tab per module, all wired to a :class:`Services` object."""

from __future__ import annotations

import os

import gradio as gr

from ui import (
    agreement_tab,
    arena_tab,
    chat_tab,
    evaluate_tab,
    leaderboard_tab,
    research_data_tab,
    settings_tab,
    simulate_tab,
)
from ui.render import roles_notice, safe_text
from ui.services import Services

TITLE = "CRS Arena"


def analytics_wanted(env=os.environ) -> bool:
    """Gradio's usage analytics (calls to its servers) only when the operator sets ``GRADIO_ANALYTICS_ENABLED``
    to a true value: the app runs offline and on laptops with research data, so it does not call home by default."""
    return env.get("GRADIO_ANALYTICS_ENABLED", "").strip().lower() in ("1", "true", "yes")


def build_app(services: Services) -> gr.Blocks:
    with gr.Blocks(title=TITLE, analytics_enabled=analytics_wanted()) as demo:
        gr.Markdown(
            f"# {TITLE}\nChat with conversational recommender systems, see what they recommend, and judge them."
        )
        gr.Markdown(roles_notice(services.role_configs()), elem_id="roles-notice")
        if services.notices:
            gr.Markdown("\n\n".join(f"ℹ️ {safe_text(n)}" for n in services.notices), elem_id="startup-notices")
        with gr.Tabs():
            with gr.Tab("Chat", id="chat"):
                chat_tab.build(services)
            with gr.Tab("Arena", id="arena"):
                votes = arena_tab.build(services)
            with gr.Tab("Leaderboard", id="leaderboard") as leaderboard:
                refresh_board_after = leaderboard_tab.build(services)
            # the board is current when its tab is opened and right after a vote
            refresh_board_after(leaderboard.select)
            for vote in votes:
                refresh_board_after(vote.then)
            with gr.Tab("Judge vs people", id="agreement") as agreement:
                refresh_agreement_after = agreement_tab.build(services)
            refresh_agreement_after(agreement.select)
            with gr.Tab("Research data", id="data"):
                dial_import, label_import = research_data_tab.build(services)
            # an import changes what those two tabs read: show them again after it
            refresh_board_after(dial_import.then)
            refresh_agreement_after(dial_import.then)  # CRSArena-Dial's votes are imported evidence too
            refresh_agreement_after(label_import.then)
            with gr.Tab("Evaluate", id="evaluate"):
                evaluate_tab.build(services)
            with gr.Tab("Simulate", id="simulate"):
                simulate_tab.build(services)
            with gr.Tab("Settings", id="settings"):
                settings_tab.build(services)
    return demo
