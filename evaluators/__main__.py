from evaluators.cli import cli

cli(prog_name="python -m evaluators")
