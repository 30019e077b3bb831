"""CoRE evaluation: the twelve-factor LLM judge, the four-persona debate, deterministic metrics,
meta-evaluation against human labels, and the command line (``python -m evaluators``)."""
