"""The settings that exist: one row per environment variable (or family), with default and meaning.

This is the one place the Settings tab and the *Configuration* table of docs/configuration.md come from:
:func:`configuration_table` renders it as that table, and a test keeps docs/configuration.md equal to it
(edit the rows here, then paste the rendered table under that file's ``## Configuration`` heading).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import NamedTuple

HEADER = ("Variable", "Default", "Meaning")


class Setting(NamedTuple):
    variable: str  # Markdown: the variable names in code spans
    default: str  # Markdown
    meaning: str  # Markdown


SETTINGS: tuple[Setting, ...] = (
    Setting(
        variable="`CRS_LLM_MODEL`",
        default="*(embedded)*",
        meaning="Model for every role, e.g. `gpt-4o-mini`; `embedded` selects the local model",
    ),
    Setting(
        variable="`CRS_LLM_BASE_URL`",
        default="OpenAI",
        meaning=(
            "Base URL of an OpenAI-compatible endpoint (vLLM, Ollama, llama.cpp server, HF router, …). Given "
            "without `CRS_LLM_MODEL` (or `_<ROLE>_` alike), the app uses the first model the endpoint lists "
            "at `<base>/models` and says so on every page; an endpoint that lists none or cannot be reached "
            "stops the start with a message naming `CRS_LLM_MODEL`"
        ),
    ),
    Setting(
        variable="`CRS_LLM_API_KEY`",
        default="—",
        meaning=(
            "Key for that endpoint. With no base URL, `OPENAI_API_KEY` is used; `OPENAI_API_KEY` is only ever "
            "sent to OpenAI's own endpoint"
        ),
    ),
    Setting(
        variable="`CRS_LLM_<ROLE>_MODEL`, `_BASE_URL`, `_API_KEY`, `_PRICE`",
        default="the global ones",
        meaning=(
            "Per-role overrides. Roles: `CRS` (ChatCRS), `SIMULATOR`, `JUDGE`, `DEBATE_USER`, "
            "`DEBATE_EXPERT`, `DEBATE_LINGUIST`, `DEBATE_HCI`; the four debate roles also read "
            "`CRS_LLM_DEBATE_*`. Each falls back along role → debate → global: the model on its own, the "
            "endpoint (base URL and key) as one set, so a role that names only its model keeps the endpoint "
            "above it (`CRS_LLM_BASE_URL=http://127.0.0.1:11434/v1` with `CRS_LLM_JUDGE_MODEL=qwen2.5` sends "
            "the judge to that server). A key without a base URL means OpenAI's endpoint. The header and the "
            "Settings tab show each role's effective endpoint, never a key"
        ),
    ),
    Setting(
        variable="`CRS_LLM_PRICE`",
        default="known OpenAI prices",
        meaning="`in,out` USD per million tokens, for cost accounting of other models",
    ),
    Setting(
        variable="`CRS_LLM_TIMEOUT`",
        default="`60`",
        meaning="Seconds before a remote call times out",
    ),
    Setting(
        variable="`CRS_LLM_MAX_RETRIES`",
        default="`3`",
        meaning=("Retries (exponential backoff, honouring `Retry-After`) on 429, 5xx, timeouts and connection errors"),
    ),
    Setting(
        variable="`CRS_LLM_GGUF`",
        default="SmolLM2-135M",
        meaning="Path of another chat GGUF for the embedded backend",
    ),
    Setting(
        variable="`CRS_LLM_THREADS`",
        default="every core",
        meaning="llama.cpp threads of the embedded model. Its threads spin while they wait: on cores busy with other "
        'turns, fewer can answer faster (`bench/load.py --compare "CRS_LLM_THREADS=1"` reads it)',
    ),
    Setting(
        variable="`CRS_ARENA_DB`",
        default="`./data/crs_arena.db`",
        meaning=(
            "The SQLite file. Its folder must exist: a path in a missing folder stops the start with a "
            "message (so a typo cannot start an empty board); the default folder is created. On a Space "
            "(`SPACE_ID` or `SYSTEM=spaces`) with persistent storage (`/data` writable) the default is "
            "`/data/crs_arena.db`"
        ),
    ),
    Setting(
        variable="`CRS_ARENA_PERSISTENT_DIR`",
        default="`/data`",
        meaning="The Space's persistent folder (tests point it at a temporary one)",
    ),
    Setting(
        variable="`CRS_ARENA_LEADERBOARD_UPLOADS`",
        default="off",
        meaning=(
            "`1`: anonymous uploads' systems (`upload:<name>`) count on the main leaderboard. Off, they never "
            "do (see *Uploads and limits*)"
        ),
    ),
    Setting(
        variable="`CRS_ARENA_REST_SECONDS`",
        default="`300`",
        meaning=(
            "A system whose latest answer failed (a remote endpoint down, a plug-in that raised, in a battle or in "
            "the Chat tab) sits out new arena battles for this long, or until it answers someone in the Chat tab: a "
            "battle whose side cannot answer cannot be voted on. Running battles keep both sides; in memory, a "
            "restart forgets it"
        ),
    ),
    Setting(
        variable="`CRS_ARENA_PAIRING`",
        default="`informative`",
        meaning=(
            "How the arena picks the next two systems. `informative`: every pair meets once, then the pair whose next "
            "vote most settles the board's order (overlapping intervals, few votes), with a fifth of the battles "
            "spread evenly over every pair; `fewest`: a random pair among those with the fewest battles"
        ),
    ),
    Setting(
        variable="`CRS_ARENA_SCORING`",
        default="on",
        meaning=(
            "`off`: chat and arena conversations are not scored in the background. On, each is scored by the "
            "default judge setup (the proxy offline, the configured LLM judge's 12 factors otherwise) once it "
            "goes idle or its battle is voted, and again when it grew; the leaderboard's CoRE columns then cover "
            "the conversations its votes come from. A restart resumes what was left"
        ),
    ),
    Setting(
        variable="`CRS_ARENA_SCORING_IDLE_S`",
        default="`30`",
        meaning="Seconds without a new turn after which a conversation counts as idle and is scored",
    ),
    Setting(
        variable="`CRS_CATALOG`",
        default="`bundled`",
        meaning=(
            "Catalog the systems recommend from: `bundled`, or a dataset folder (e.g. `redial`) under `CRS_DATA_DIR`"
        ),
    ),
    Setting(
        variable="`CRS_DATA_DIR`",
        default="`../shared/data` if present",
        meaning=(
            "Public research data in the iEvaLM layout (tests, benchmarks, training); `none`: no research data, even "
            "with `../shared/data` beside the clone (as a fresh clone runs: the tests that need it skip)"
        ),
    ),
    Setting(
        variable="`HF_TOKEN`, `CRS_ARENA_HUB_DATASET`",
        default="—",
        meaning=(
            "When both are set, conversations, votes and judgments are exported as JSONL to that (private) "
            "Hugging Face dataset in the background; the live database file is never uploaded. At start, an empty "
            "database is restored from that dataset's export (docs/space.md)"
        ),
    ),
    Setting(
        variable="`CRS_ARENA_HUB_EVERY`",
        default="`10`",
        meaning="Minutes between those exports",
    ),
    Setting(
        variable="`GRADIO_SERVER_NAME`, `GRADIO_SERVER_PORT`",
        default="`127.0.0.1`, `7860`",
        meaning="Where the app listens",
    ),
    Setting(
        variable="`GRADIO_ANALYTICS_ENABLED`",
        default="off",
        meaning="`true`: Gradio's usage analytics (calls to Gradio's servers). Off, the app does not call home",
    ),
    Setting(
        variable="`CRS_ARENA_CACHE`",
        default="`~/.cache/crs-arena`",
        meaning="Where `make` keeps the virtual environment and the llama.cpp wheel",
    ),
    Setting(
        variable="`CRS_SYSTEMS_FILE`",
        default="—",
        meaning=(
            "TOML file registering your own systems (remote HTTP or plug-in) beside the built-in ones; see "
            "*Bring your own CRS* in `docs/operations.md`"
        ),
    ),
    Setting(
        variable="`TORCH_INDEX_URL`",
        default="—",
        meaning=(
            "Index for the CPU build of torch, e.g. `https://download.pytorch.org/whl/cpu` on machines where "
            "PyPI would serve the CUDA build"
        ),
    ),
)

_NAME = re.compile(r"`([A-Z][A-Z0-9_]+)`")


def configuration_table() -> str:
    """The settings as docs/configuration.md's Markdown table (variable, default, meaning)."""
    return "\n".join(_table_lines([*HEADER], [[s.variable, s.default, s.meaning] for s in SETTINGS]))


def settings_markdown(env: Mapping[str, str]) -> str:
    """The same table with a column saying whether each variable is set in ``env`` (``yes``/``no``; ``—``
    for a family of variables such as the per-role ones). Values are never shown."""
    rows = [[s.variable, s.default, s.meaning, _is_set(s, env)] for s in SETTINGS]
    return "\n".join(_table_lines([*HEADER, "Set here"], rows))


def variable_names(setting: Setting) -> list[str]:
    """The complete variable names a row names (a family such as ``CRS_LLM_<ROLE>_MODEL`` names none)."""
    return _NAME.findall(setting.variable)


def _is_set(setting: Setting, env: Mapping[str, str]) -> str:
    names = variable_names(setting)
    if not names:
        return "—"
    return "yes" if any(env.get(n) for n in names) else "no"


def _table_lines(header: list[str], rows: list[list[str]]) -> list[str]:
    return [
        "| " + " | ".join(header) + " |",
        "|" + "---|" * len(header),
        *("| " + " | ".join(row) + " |" for row in rows),
    ]
