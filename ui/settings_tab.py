"""The Settings tab: which model serves each role, a health check, the settings that exist, versions.

The settings table comes from :mod:`ui.configuration` (the *Configuration* table of docs/configuration.md
is a copy of it); nothing is read from files at run time. Keys are never shown: a role says only whether its
key is set, and health check messages have every configured key blanked out before they are displayed.
"""

from __future__ import annotations

import platform
import re
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from importlib import metadata
from pathlib import Path

import gradio as gr
import pandas as pd

from evaluators.meta.recorded import EMBEDDED_JUDGE_OVERALL
from llm_clients.config import RoleConfig
from ui.configuration import settings_markdown
from ui.services import Services

PACKAGES = (
    "gradio",
    "gradio_client",
    "llama-cpp-python",
    "openai",
    "transformers",
    "torch",
    "huggingface-hub",
    "sqlite-utils",
)
ROLE_COLUMNS = ["role", "model", "endpoint", "api key", "configured by"]
HEALTH_COLUMNS = ["model", "endpoint", "roles", "status", "seconds", "detail"]
_KEY_LIKE = re.compile(r"\b(?:sk-|hf_)[A-Za-z0-9_\-*.]{6,}")  # OpenAI- and Hugging Face-style keys


def build(services: Services) -> None:
    configs = services.role_configs()
    gr.Markdown("### Models by role")
    gr.Dataframe(value=role_table(configs), label="Roles", interactive=False, wrap=True)
    gr.Markdown(embedded_notice(configs))
    check = gr.Button("Check the models", elem_id="settings-check")
    health = gr.Dataframe(
        headers=HEALTH_COLUMNS,
        label="Health check (one short call per distinct model)",
        interactive=False,
        wrap=True,
        elem_id="settings-health",
    )

    def on_check():
        return health_table(configs, services.model_health)

    check.click(on_check, outputs=[health], api_name="settings_health", concurrency_limit=1)

    _registered_systems()

    gr.Markdown(
        "### Settings (environment variables)\n\nNothing is required; values are never shown, "
        "only whether a variable is set.\n\n" + settings_markdown(services.env)
    )
    gr.Markdown(database_markdown(services))
    if services.restore is not None:
        gr.Markdown("### Board restore (Hub dataset)\n\n" + services.restore.sentence(), elem_id="settings-restore")
    gr.Markdown("### Versions\n\n" + "\n".join(f"- {name}: {version}" for name, version in versions()))


def _registered_systems() -> None:
    """The systems file's systems and, on request, the conformance checker's report for each (#14)."""
    from crs_backends.conformance import TABLE_COLUMNS, registered_summary, registered_table

    gr.Markdown("### Registered systems\n\n" + registered_summary(), elem_id="settings-systems")
    button = gr.Button("Check the registered systems", elem_id="settings-conformance")
    table = gr.Dataframe(
        headers=TABLE_COLUMNS,
        label="Conformance (python -m crs_backends check), per rule",
        interactive=False,
        wrap=True,
        elem_id="settings-conformance-table",
    )

    def on_check():
        return pd.DataFrame(registered_table(), columns=TABLE_COLUMNS)

    button.click(
        on_check,
        outputs=[table],
        api_name="settings_conformance",
        concurrency_limit=1,
    )


def role_table(configs: list[RoleConfig]) -> pd.DataFrame:
    """One row per role: model, endpoint, whether a key is set (never the key) and the variable that chose it."""
    rows = []
    for c in configs:
        public = c.public()
        rows.append([public["role"], public["model"], public["endpoint"], public["api_key"], public["configured_by"]])
    return pd.DataFrame(rows, columns=ROLE_COLUMNS)


def embedded_notice(configs: list[RoleConfig]) -> str:
    """Which roles run in-process, and what that means for their answers and scores."""
    local = [c for c in configs if c.is_embedded]
    if not local:
        return "No role uses the embedded model: every role calls the endpoint shown above."
    roles = ", ".join(f"`{c.role}`" for c in local)
    how = (
        "Point a role at a capable model with `CRS_LLM_<ROLE>_MODEL` (plus `_BASE_URL` / `_API_KEY`), "
        "or every role with `CRS_LLM_MODEL`."
    )
    custom = sorted({Path(c.gguf_path).name for c in local if c.gguf_path})
    if custom:
        return f"**Embedded model.** {roles} run {_code(custom[0])} in-process with llama.cpp. {how}"
    return (
        f"⚠️ **Embedded model.** {roles} run **SmolLM2-135M-Instruct** in-process (llama.cpp, no network, "
        "no key). It is a 135-million-parameter demo model: its answers are weak and its scores are "
        f"**not validated** ({EMBEDDED_JUDGE_OVERALL.sentence()}). {how}"
    )


def database_markdown(services: Services) -> str:
    """The database file, its schema version and the SQLite library version."""
    facts = services.database_facts()
    return (
        "### Database\n\n"
        f"- File: {_code(facts.file)}\n"
        f"- Schema version: {facts.schema_version}\n"
        f"- SQLite library: {facts.sqlite_version}"
    )


def health_table(configs: list[RoleConfig], health: Callable[[RoleConfig], tuple[bool, str]]) -> pd.DataFrame:
    """Ask each distinct model (model, endpoint, key) for a short answer with ``health``
    (:meth:`ui.services.Services.model_health`), all at once; ok or the error, keys blanked out."""
    groups: dict[tuple, list[RoleConfig]] = {}
    for c in configs:
        groups.setdefault((c.model, c.base_url, c.api_key, c.gguf_path), []).append(c)
    secrets = [c.api_key for c in configs if c.api_key]

    def check(members: list[RoleConfig]) -> list:
        first = members[0].public()
        start = time.perf_counter()
        try:
            ok, detail = health(members[0])
        except Exception as e:  # a model that cannot even be built (missing file, bad setting) is a failed check
            ok, detail = False, f"{type(e).__name__}: {e}"
        return [
            first["model"],
            first["endpoint"],
            ", ".join(m.role for m in members),
            "ok" if ok else "failed",
            round(time.perf_counter() - start, 2),
            redact(detail, secrets),
        ]

    with ThreadPoolExecutor(max_workers=len(groups)) as pool:
        rows = list(pool.map(check, groups.values()))
    return pd.DataFrame(rows, columns=HEALTH_COLUMNS)


def redact(text: str, secrets: list[str]) -> str:
    """``text`` with every configured key, and anything shaped like a key, replaced by ``***``."""
    for secret in secrets:
        text = text.replace(secret, "***")
    return _KEY_LIKE.sub("***", text)


def _code(value) -> str:
    """``value`` as a Markdown code span (shown literally; a backtick inside would end it)."""
    return "`" + str(value).replace("`", "'") + "`"


def versions() -> list[tuple[str, str]]:
    """Python and the packages whose versions matter, as installed."""
    found = [("python", platform.python_version())]
    for name in PACKAGES:
        try:
            found.append((name, metadata.version(name)))
        except metadata.PackageNotFoundError:
            found.append((name, "not installed"))
    return found
