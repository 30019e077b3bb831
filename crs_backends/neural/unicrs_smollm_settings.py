"""What a small UniCRS set is (:mod:`crs_backends.neural.unicrs_smollm`): its settings file (``smollm.json``), the
sizes and windows the model reads, the forms its recommendation prompt has taken across recipes, and the checks a
set passes before it is loaded (its text encoder's fingerprint; the backbone's is
:func:`crs_backends.neural.smollm_backbone.check_fingerprint`).
"""

from __future__ import annotations

import json
from pathlib import Path

from crs_backends.neural.barcor_backbone import minilm_fingerprint
from crs_backends.neural.checkpoints import CheckpointError, part_dir

SYSTEM = "unicrs"
SETTINGS_FILE = "smollm.json"
NUM_BASES = 8  # UniCRS's default
TEXT_ENCODER = "all-MiniLM-L6-v2"
FORMAT = 1  # of smollm.json: bump when the prompt modules change shape or meaning

# the recommendation prompt's form, by whether it is also a per-layer prefix (UniCRSSmall.variant)
PROMPT_FORMS = {True: "input vectors and UniCRS's per-layer prefix", False: "input vectors alone"}
# how the recommendation prompt scores the items (SoftPrompt.query; ``rec_score`` in smollm.json), as the variant says
REC_SCORES = {
    "raw": "the final hidden state times the entity embeddings (UniCRS's)",
    "standardised": "the final hidden state standardised, through hidden_proj, times the entity embeddings",
}
LEGACY_REC_SCORE = "standardised"  # a set whose smollm.json lacks rec_score was trained so
# the settings that choose the recommendation prompt's form (UniCRSSmall.variant), which ``create`` may be given in
# place of SIZES' (a recipe that keeps an older set's form: small.BUNDLED_FORMS)
FORM_KEYS = ("rec_layer_prefix", "rec_score")
# the windows the prompts read (tokens, word pieces, entities), which ``create`` may also be given: SIZES' are short
# for a CPU turn (the bundled set); the dataset configuration reads UniCRS's own (recipes.DATASET_SETTINGS)
WINDOW_KEYS = ("context_max_length", "text_max_length", "entity_max_length")
# the windows every set and ReDial figure from before recipe r14 read (r14 trained the prompts at UniCRS's own): a
# recorded figure whose variant does not say what it read was read at these
LEGACY_WINDOWS = {"context_max_length": 80, "text_max_length": 64, "entity_max_length": 8}

SIZES: dict[str, dict] = {
    "small": {
        "context_max_length": 80,  # decoder tokens of the conversation (chat form, left-truncated)
        "text_max_length": 64,  # text-encoder word pieces of the conversation (left-truncated)
        "entity_max_length": 8,  # the last linked entities the recommendation prompt reads
        # the task vectors in front of each prompt start as the token embeddings of these instructions (a system turn
        # in SmolLM2's chat form), then train freely: one vector per token
        "rec_instruction": (
            "<|im_start|>system\nYou are a movie recommender. Think of the film to suggest next.<|im_end|>\n"
        ),
        "conv_instruction": (
            "<|im_start|>system\nYou are a movie recommender. Answer in one or two sentences and write <movie> for "
            "each film you suggest.<|im_end|>\n"
        ),
        "conv_slots": 8,  # the conversation prompt's token positions, averaged into this many groups
        "resp_max_length": 40,  # reply tokens trained on
        "max_new_tokens": 40,  # reply tokens generated in a turn
        # the recommendation prompt also as UniCRS's per-layer key/value prefix (SoftPrompt.layer_kv); a set whose
        # smollm.json lacks the key was trained without it (see load)
        "rec_layer_prefix": True,
        # UniCRS's item scores: the final hidden state as it is (REC_SCORES; older sets standardised it, see load)
        "rec_score": "raw",
    }
}


def is_smollm_set(root, dataset: str) -> bool:
    """Whether the set under ``root`` holds this model for ``dataset`` (``unicrs_conv_<ds>/smollm.json``)."""
    return (part_dir(root, SYSTEM, "conv", dataset) / SETTINGS_FILE).is_file()


def read_settings(root: Path, dataset: str) -> dict:
    """A set's ``smollm.json`` (CheckpointError where it is missing, unreadable or of another format)."""
    conv_dir = part_dir(root, SYSTEM, "conv", dataset)
    meta_path = conv_dir / SETTINGS_FILE
    try:
        meta = json.loads(meta_path.read_text(encoding="utf-8"))
    except FileNotFoundError as e:
        raise CheckpointError(f"{meta_path} is missing: {conv_dir} is not a small UniCRS") from e
    except (OSError, ValueError) as e:
        raise CheckpointError(f"cannot read {meta_path}: {e}") from e
    if not isinstance(meta, dict) or meta.get("format") != FORMAT:
        raise CheckpointError(
            f"{meta_path} is of another format ({meta.get('format') if isinstance(meta, dict) else meta!r}, "
            f"this code reads {FORMAT})"
        )
    return meta


def has_layer_prefix(meta: dict) -> bool:
    """Whether a set's settings make its recommendation prompt also a per-layer prefix (absent: a set from before
    it, input vectors alone)."""
    return bool(meta.get("rec_layer_prefix", False))


def rec_score(meta: dict) -> str:
    """How a set's recommendation prompt scores the items (absent: a set from before recipe r9, standardised);
    CheckpointError for a value this code does not know."""
    score = meta.get("rec_score", LEGACY_REC_SCORE)
    if score not in REC_SCORES:
        raise CheckpointError(f"unknown recommendation score {score!r} in the set's {SETTINGS_FILE}")
    return str(score)


def windows_of(meta: dict) -> dict[str, int]:
    """The windows a set's prompts read, as ``load`` takes them (SIZES' where its settings lack one)."""
    return {k: int(meta.get(k, SIZES["small"][k])) for k in WINDOW_KEYS}


def windows_text(windows: dict[str, int]) -> str:
    """What the prompts read, for people (the variant's "what it reads")."""
    return (
        f"the last {windows['context_max_length']} decoder tokens, {windows['text_max_length']} word pieces and "
        f"{windows['entity_max_length']} entities"
    )


def variant_text(layer_prefix: bool, score: str, windows: dict[str, int]) -> dict[str, str]:
    return {
        "recommendation prompt": PROMPT_FORMS[layer_prefix],
        "recommendation score": REC_SCORES[score],
        "what it reads": windows_text(windows),
    }


def check_text_encoder(recorded: str | None, source: Path) -> None:
    """Refuse a set whose prompts were trained on another all-MiniLM-L6-v2 than the installed one (the conversation
    reading its prompts learned from would differ silently). A set saved before the fingerprint was recorded
    (small-v7) has none and is read as it is."""
    from crs_backends.neural.names import SMALL_BUILD_COMMAND

    if not recorded:
        return
    installed = minilm_fingerprint()
    if recorded != installed:
        raise CheckpointError(
            f"{source} was trained on another {TEXT_ENCODER} (weights {recorded[:12]}, installed {installed[:12]}): "
            f"rebuild the set with `{SMALL_BUILD_COMMAND}`"
        )
