"""The small local versions' recipes: what each system's small configuration is trained with, for the bundled set
(:data:`TRAIN_SETTINGS`) and on a research dataset (:data:`DATASET_SETTINGS` on top: the benches' ReDial figures,
recipe :data:`DATASET_RECIPE`). A leaf module: :mod:`crs_backends.neural.small` builds with these, and the training
command line (``crs-arena train <system> --data <dataset> --size small``) starts from the dataset recipe, so that the
command the docs give trains the model whose figures they report.
"""

from __future__ import annotations

# optimizer steps are the budget: epochs over the training records, capped by max_steps.
# KBRD shares its steps rec/conv evenly, BARCOR by barcor_training.REC_SHARE (its reply model alone: 35%), UniCRS by
# unicrs_training.STAGE_SHARES. v5 (KBRD and BARCOR on 5,950 synthetic and 15,455 real records): KBRD's recommender
# 1,450 steps, two epochs of ReDial's 23,183 rec examples where the benches train it (R@10 .183 on the first 1,000
# test records at the published entity width that kbrd.entity_width gives a KG of ReDial's size and unclipped,
# DATASET_SETTINGS; clipped, .169, and .164 at the bundled set's 64; with the decaying learning rate of
# crs_backends.neural.training.lr_factor); each reply model about two epochs of its records.
TRAIN_SETTINGS: dict[str, dict] = {
    "kbrd": {"epochs": 10, "max_steps": 2900, "batch_size": 32, "lr": 3e-3, "reply_lr": 5e-4},
    # BARCOR (small-v6): max_steps bounds its reply decoder (1.7 s a step of 32 on 2 cores); its head trains for the
    # epochs over the frozen encoder's states (seconds a step)
    "barcor": {"epochs": 3, "max_steps": 500, "batch_size": 32, "lr": 1e-3, "reply_lr": 1e-3},
    # UniCRS (small-v6): max_steps shared by its two prompt stages (unicrs_smollm_training.STAGE_SHARES); a step of 8
    # through the frozen SmolLM2 takes about 4 s (rec) and 6 s (conv) on one core: 150 steps is what one session's
    # two cores could give it beside the rest (its ranking is near chance at this budget, see docs/neural-systems.md)
    "unicrs": {"epochs": 1, "max_steps": 150, "batch_size": 8, "lr": 1e-3},
}

# what the dataset configuration changes in TRAIN_SETTINGS: KBRD's recommender unclipped, as CRSLab's
# (TrainConfig.rec_clip). The shipped bundled set keeps the clipping it was built with; dropping it there means a new
# set (small-v6), measured on the bundled catalog first
# UniCRS: its recommendation prompt for two epochs of ReDial's records with a target (2,668 steps of 8: 3-6 s a step
# on one thread with the decoder in bfloat16, unicrs_smollm.train_autocast, 2026-11-27; the measured model resumed
# r6's one-epoch state, so its second epoch restarted the decay from half the peak rate), its conversation prompt for
# 150 steps. R@10 on the test split: .063 at 150 steps in all (first 200 records), .139 after one epoch, .148 after two.
# A third epoch (resumed from this state, the rate back at a third of its peak; 2026-11-27, 4,520 s at two threads)
# memorised the training records (rec loss 6.04 -> 5.14) and read R@10 .168 on the validation tenth against these two
# epochs' .189: kept at two, as UniCRS keeps the epoch best on validation (its test split not read). UniCRS's prompt
# pre-training (unicrs_smollm_training's ``pre``, stage_epochs {"pre": 1}) before one recommendation epoch read .180
# there against one epoch alone's .174 (2026-11-27), before two epochs .182 against r7's .189 (2026-11-28): not adopted.
# r8: the recommendation prompt also as UniCRS's per-layer key/value prefix (unicrs_smollm's rec_layer_prefix): one
# epoch read .178 against r6's .174, two epochs .202 against r7's .189 (R@1/10/50 .034 / .202 / .398 against .039 /
# .189 / .376; 2026-11-28, the second epoch resumed from the first as r7's was): adopted. Not in it: the seeker's turns
# that name a film as more recommendation examples (TrainConfig.rec_every_turn, as UniCRS's data has them): r8's first
# 1,334 steps with them read the same R@10 (.178) on the validation tenth, and on a GPU (2026-11-28) 2,668 steps
# with them under one decay .198 against r8's .199 trained the same way there; UniCRS's entity targets (every entity
# a turn names, over all entities) read r8's R@10 after one epoch (.176; docs/neural-systems.md). r9: the items scored
# as UniCRS scores them (unicrs_smollm's rec_score "raw": the final hidden state times the entity embeddings, no
# standardising, no hidden_proj): r8's two epochs so, the second resumed from the first, read R@1/10/50 .037 / .208 /
# .403 on the validation tenth against r8's .034 / .202 / .398 (first epoch .191 against .176; 2026-11-29, float32 at
# two threads; rule fixed before: adopt at .203): adopted; as a fresh build trains it, two epochs under one decay,
# .037 / .204 / .404 (2026-11-30, float32)
DATASET_SETTINGS: dict[str, dict] = {
    "kbrd": {"rec_clip": None},
    # r15: BARCOR's reply decoder for the recipe's three epochs (1,869 steps of 32), no longer capped at 500. Read on
    # the validation tenth by bench/barcor_reply_budget.py (2026-12-02, one thread beside UniCRS's training; rule fixed
    # after reading 250 and 500 only: the lowest validation loss), loss on its 2,147 replies / BLEU-2 (uncased) /
    # Distinct-2 at 300 contexts: 250 steps 3.534 / .007 (.011) / .173; 500 3.302 / .004 (.006) / .300; 1,000
    # 3.117 / .015 (.022) / .430; 1,869 2.984 / .012 (.020) / .993 (people's Distinct-2 there 7.383): adopted
    "barcor": {"max_steps": None},
    # r14: its prompts read UniCRS's windows (200 decoder tokens, 200 word pieces, 32 entities: its ReDial training
    # commands' context, prompt and entity lengths) at half r9's peak rate: R@1/10/50 .042 / .216 / .417 on the
    # validation tenth against r9's .037 / .208 / .403 (2026-11-30, bfloat16 at two threads; rule fixed before: adopt
    # at R@10 .215 with R@50 .403): adopted. On test (read once, 2026-11-30) .029 / .158 / .343 against r9's .027 /
    # .161 / .349. On the tenth r14 minus a fresh build of r9's recipe is +.012 (95% interval -.005 to +.029, train
    # report --against): inside its noise
    "unicrs": {
        "epochs": 2,
        "max_steps": None,
        "stage_steps": {"conv": 150},
        "lr": 5e-4,
        "form": {"context_max_length": 200, "text_max_length": 200, "entity_max_length": 32},
    },
}
# bump when the dataset configuration's recipe changes, so that a cached set of the old one is not read as the new
# (r2: KBRD at the published entity width on a KG of ReDial's size, kbrd.entity_width; r3: its recommender unclipped;
# r4: the validation conversations held out of its training, evaluation.is_validation; r5: each its own architecture,
# real conversations only, #40; r6: UniCRS's recommendation prompt an epoch; r7: BARCOR's recommender fine-tunes its
# copy of the encoder's top two layers, UniCRS's recommendation prompt two epochs; r8: UniCRS's recommendation prompt
# also a per-layer prefix; r9: UniCRS's items scored with its hidden state as it is; r14, named after its trial:
# UniCRS's prompts read UniCRS's windows, trained at half the rate; r15: BARCOR's reply decoder its three epochs)
DATASET_RECIPE = "r15"


def dataset_settings(system: str) -> dict:
    """``system``'s recipe in the dataset configuration: :data:`TRAIN_SETTINGS` with :data:`DATASET_SETTINGS` on top."""
    return {**TRAIN_SETTINGS[system], **DATASET_SETTINGS.get(system, {})}
