"""The ``crs-arena`` command line: every command the project runs from a shell, under one name.

Installed as a console script by ``pip install .`` (``[project.scripts]`` in ``pyproject.toml``); in a clone,
``./crs-arena`` runs it with the project's environment. The ``python -m`` entry points it gathers keep working as
aliases (``python -m evaluators evaluate`` is ``crs-arena evaluate``):

- ``evaluate``, ``meta``, ``calibrate``, ``resume``, ``simulate``: ``python -m evaluators …``;
- ``board``, ``export``, ``export-dial``, ``export-labels``, ``import-crsarena``, ``import-crsarena-eval``,
  ``promote-uploads``: ``python -m arena …``;
- ``systems``, ``check``, ``serve``: ``python -m crs_backends …``;
- ``checkpoints fetch|status|build-small``: ``python -m crs_backends.neural.sources …``;
- ``small info|ensure|build``: ``python -m crs_backends.neural.small …``;
- ``train kbrd|barcor|unicrs|report``: ``python -m crs_backends.train …``;
- ``space publish OWNER/NAME``: the app uploaded as a Hugging Face Space (``arena/space_publish.py``).

A command's module is imported when the command runs (``--help`` imports them all, to list them).
"""

from __future__ import annotations

import importlib

import click

from crs_backends.command_line import CommandGroup

# the sections of ``crs-arena --help``: command name -> (module, attribute, the command's name in that group or
# None when the attribute is the command itself); an attribute ending in "()" is a function that returns it
SECTIONS: dict[str, dict[str, tuple[str, str, str | None]]] = {
    "Evaluate conversations": {
        "evaluate": ("evaluators.cli", "cli", "evaluate"),
        "meta": ("evaluators.cli", "cli", "meta"),
        "calibrate": ("evaluators.cli", "cli", "calibrate"),
        "resume": ("evaluators.cli", "cli", "resume"),
        "simulate": ("evaluators.cli", "cli", "simulate"),
    },
    "Arena data": {
        "board": ("arena.__main__", "cli", "board"),
        "export": ("arena.__main__", "cli", "export"),
        "export-dial": ("arena.__main__", "cli", "export-dial"),
        "export-labels": ("arena.__main__", "cli", "export-labels"),
        "import-crsarena": ("arena.__main__", "cli", "import-crsarena"),
        "import-crsarena-eval": ("arena.__main__", "cli", "import-crsarena-eval"),
        "promote-uploads": ("arena.__main__", "cli", "promote-uploads"),
    },
    "Systems": {
        "systems": ("crs_backends.__main__", "cli", "systems"),
        "check": ("crs_backends.__main__", "cli", "check"),
        "serve": ("crs_backends.__main__", "cli", "serve"),
    },
    "Hugging Face Space": {
        "space": ("arena.space_publish", "cli", None),
    },
    "KBRD, BARCOR and UniCRS": {
        "checkpoints": ("crs_backends.neural.fetch", "cli", None),
        "small": ("crs_backends.neural.small", "command()", None),
        "train": ("crs_backends.neural.train_command", "cli", None),
    },
}
COMMANDS = {name: entry for section in SECTIONS.values() for name, entry in section.items()}


class Commands(CommandGroup):
    """The top-level group: its commands are looked up in :data:`COMMANDS` and imported on use."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return list(COMMANDS)

    def get_command(self, ctx: click.Context, cmd_name: str) -> click.Command | None:
        entry = COMMANDS.get(cmd_name)
        if entry is None:
            return None
        module, attribute, name = entry
        found = getattr(importlib.import_module(module), attribute.removesuffix("()"))
        if attribute.endswith("()"):
            found = found()
        if name is None:
            command = found
        else:
            command = found.get_command(ctx, name)
        if command is None:
            raise RuntimeError(f"{module}.{attribute} has no command {name!r}")
        command.name = cmd_name
        return command

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        for section, commands in SECTIONS.items():
            rows = []
            for name in commands:
                command = self.get_command(ctx, name)
                if command is not None and not command.hidden:
                    rows.append((name, command.get_short_help_str(formatter.width - 6 - len(name))))
            with formatter.section(section):
                formatter.write_dl(rows)


@click.group(cls=Commands, context_settings={"help_option_names": ["-h", "--help"]})
def cli() -> None:
    """crs-arena: chat with, judge and compare conversational recommender systems from the shell.

    The app itself starts with `make run` (or `python app.py`).
    """


def main(argv: list[str] | None = None) -> None:
    cli.main(args=argv, prog_name="crs-arena")


if __name__ == "__main__":
    main()
