"""The Settings tab's pieces: the settings table (one versioned source, docs/configuration.md a copy of it), the
database facts and the health check, without starting the app."""

from pathlib import Path

import pandas as pd

from llm_clients.config import all_role_configs
from ui.configuration import SETTINGS, configuration_table, settings_markdown, variable_names
from ui.services import Services
from ui.settings_tab import HEALTH_COLUMNS, database_markdown, health_table

CONFIGURATION_DOC = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def documented_configuration_table() -> str:
    """The first table under docs/configuration.md's "## Configuration" heading."""
    text = CONFIGURATION_DOC.read_text(encoding="utf-8")
    section = text.split("\n## Configuration\n", 1)[1].split("\n## ", 1)[0]
    return "\n".join(line for line in section.splitlines() if line.startswith("|"))


def test_the_docs_show_the_settings_the_app_lists():
    assert documented_configuration_table() == configuration_table(), (
        "docs/configuration.md's Configuration table differs from ui/configuration.py: edit SETTINGS there and "
        "paste the output of `python -c 'from ui.configuration import configuration_table as t; print(t())'` "
        "under its '## Configuration' heading"
    )


def test_each_row_says_whether_its_variables_are_set_without_showing_values():
    env = {"CRS_LLM_MODEL": "my-private-model", "HF_TOKEN": "hf_secretsecret"}
    lines = settings_markdown(env).splitlines()
    assert lines[0] == "| Variable | Default | Meaning | Set here |" and len(lines) == len(SETTINGS) + 2
    by_first_name = {line.split("`")[1]: line.rsplit("|", 2)[1].strip() for line in lines[2:]}
    assert by_first_name["CRS_LLM_MODEL"] == "yes" and by_first_name["CRS_LLM_BASE_URL"] == "no"
    assert by_first_name["HF_TOKEN"] == "yes"  # one of the row's two variables is set
    assert by_first_name["CRS_LLM_<ROLE>_MODEL"] == "—"  # a family of variables: no single name to look up
    assert "hf_secretsecret" not in settings_markdown(env) and "my-private-model" not in settings_markdown(env)
    assert variable_names(SETTINGS[0]) == ["CRS_LLM_MODEL"]


def test_the_database_section_names_the_file_and_versions(db_path):
    text = database_markdown(Services(db_path=db_path))
    assert f"`{db_path.resolve()}`" in text
    assert int(text.split("Schema version: ")[1].split("\n")[0]) > 0
    assert text.rsplit("SQLite library: ", 1)[1].count(".") == 2


def test_the_health_check_asks_each_model_once_and_blanks_keys():
    env = {"CRS_LLM_MODEL": "gpt-4o-mini", "CRS_LLM_API_KEY": "sk-abcdefghijkl", "CRS_LLM_JUDGE_MODEL": "other"}
    configs = all_role_configs(env)
    asked = []

    def health(config):
        asked.append(config.model)
        if config.model == "other":
            raise RuntimeError("401 for key sk-abcdefghijkl")  # an error that quotes the configured key
        return True, "ok"

    table = health_table(configs, health)
    assert isinstance(table, pd.DataFrame) and list(table.columns) == HEALTH_COLUMNS
    assert sorted(asked) == ["gpt-4o-mini", "other"]  # one call per distinct model, not per role
    failed = table[table["model"] == "other"].iloc[0]
    assert failed["status"] == "failed" and "sk-abcdefghijkl" not in failed["detail"] and "***" in failed["detail"]
    assert set(table[table["model"] == "gpt-4o-mini"].iloc[0]["roles"].split(", ")) >= {"crs", "simulator"}
