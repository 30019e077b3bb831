"""Entry point: `python app.py` serves the app (http://127.0.0.1:7860 by default).

GRADIO_SERVER_NAME / GRADIO_SERVER_PORT change the address; see README.md
for the other settings.
"""

from __future__ import annotations

import importlib.util
import logging
import os
import sys
import threading

from arena import hub_restore, hub_sync
from arena.board_cache import Refresher
from crs_backends.command_line import SystemsFileError
from crs_backends.registry import systems
from storage.db import DatabasePathError
from ui.blocks import build_app
from ui.services import Services
from ui.startup import ConfigError, resolve_endpoint_models


def warm_up(services: Services) -> None:
    """Load the models and the catalog index in the background, so the first chat is quick.

    Only systems that are ready are loaded: a neural system without a checkpoint is built on first
    use (or by `make run` before the app starts), never behind the user's back here.
    """
    for system_id in services.ready_system_ids():
        try:
            system = services.system(system_id)
            prepare = getattr(system, "warm_up", None)
            if prepare:
                prepare()
        except Exception:  # a failure here shows up, with a message, on first use instead
            logging.getLogger(__name__).exception("warm-up of %s failed", system_id)


if os.environ.get("CRS_FETCH_AT_START"):
    # A Space has no shell to run `python -m crs_backends.neural.sources fetch` in: on request, fetch what the
    # published set of CRS_MODELS_DATASET lacks (checkpoints, then its dataset files) before the selector is built.
    # Already there (persistent storage): nothing is downloaded. A failure is logged; the app starts anyway.
    from crs_backends.neural.fetch import fetch_at_start

    fetch_at_start()


def skip_missing_optional_imports(names=("matplotlib", "bokeh")) -> None:
    """Gradio tries ``import matplotlib`` twice per request (and ``bokeh`` per session) and ignores the
    ImportError. A failed import is not cached, so each try searches the whole ``sys.path``: measured at
    about 6% of a chat turn's server time. Marking a module that is not installed as absent makes the
    import fail at once; installed modules are left alone."""
    for name in names:
        if name not in sys.modules and importlib.util.find_spec(name) is None:
            # "import name" now raises ModuleNotFoundError at once; None is the documented "absent" mark in
            # sys.modules, which typeshed types as holding modules only
            sys.modules[name] = None  # type: ignore[assignment]


def start_services() -> Services:
    """Check the configuration, open the database (marking evaluations a crash cut off as
    interrupted); a mistake stops the start with a message naming the setting."""
    try:
        notices = resolve_endpoint_models()
        systems()  # the operator's systems file: a bad one stops the start with its file and line
        services = Services.from_env()
    except (ConfigError, DatabasePathError, SystemsFileError) as e:
        print(f"CRS Arena cannot start: {e}", file=sys.stderr)
        raise SystemExit(2) from None
    services.notices = notices
    # before anything serves: an empty database (a Space's disk after a restart) gets the board back from the Hub
    # dataset that hub_sync publishes to; one log line and the Settings tab say what happened
    services.restore = hub_restore.restore_from_env(services.db_path)
    for notice in notices:
        print(notice, file=sys.stderr)
    if services.interrupted:
        print(
            f"{services.interrupted} evaluation(s) were cut off by a stop while judging and are marked "
            "'interrupted': resume them from the Evaluate tab or with `python -m evaluators resume`.",
            file=sys.stderr,
        )
    return services


def start_background_scoring(services: Services):
    """The background scorer (evaluators/background.py), unless ``CRS_ARENA_SCORING=off``."""
    if (os.environ.get("CRS_ARENA_SCORING") or "on").strip().lower() in ("off", "0", "no", "false"):
        return None
    from crs_backends.registry import catalog_for_chat
    from evaluators.background import BackgroundScorer

    try:
        idle = float(os.environ.get("CRS_ARENA_SCORING_IDLE_S") or 30)
    except ValueError:
        print("CRS_ARENA_SCORING_IDLE_S is not a number of seconds: 30 s are used", file=sys.stderr)
        idle = 30.0
    return BackgroundScorer(
        services.db_path,
        idle_s=max(0.0, idle),
        catalog_name=catalog_for_chat().name,
        on_scored=lambda _id: services.board_changed(),
    ).start()


skip_missing_optional_imports()
services = start_services()
demo = build_app(services)

if __name__ == "__main__":
    logging.basicConfig(level=os.environ.get("LOG_LEVEL", "WARNING"))
    threading.Thread(target=warm_up, args=(services,), daemon=True).start()
    services.refresher = Refresher(services.db_path).start()  # stores the leaderboard when votes/evaluations change
    services.scoring = start_background_scoring(services)  # every chat and arena conversation gets CoRE scores
    if services.restore.sync_allowed:
        hub_sync.start_from_env(services.db_path)  # publishes JSONL to a HF dataset only when configured
    else:  # its first commit would replace the dataset's votes with this empty board
        print("Hub sync is paused: the dataset's export was not restored (see the Settings tab)", file=sys.stderr)
    # show_error=False: a Python error's text never reaches a user (handlers give their own messages)
    demo.queue(default_concurrency_limit=4).launch(show_error=False, max_file_size="20mb")
