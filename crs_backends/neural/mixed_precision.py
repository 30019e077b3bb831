"""Half precision where CRS Arena's wrapper put it, and only there.

CRS Arena builds ``Accelerator(mixed_precision="fp16")`` for KBRD and BARCOR and ``prepare``s their models
(iai-group/iEvaLM-CRS ``src/model/KBRD.py``: both the recommender and the conversation model; ``src/model/BARCOR.py``:
the conversation model only). accelerate 0.18's ``prepare_model`` replaces each prepared model's ``forward`` with
one run under ``torch.autocast``: nothing else of the model is wrapped. So, on a GPU, what ran in half precision was
exactly the prepared models' ``forward`` calls:

- a reply or an option choice (``generate`` in transformers 4.28): the decoder's steps go through the model's
  ``forward`` (fp16), while the encoder runs once through ``get_encoder()`` outside it (fp32); KBRD's user vector for
  the reply comes from the recommender's ``get_node_embeds`` and attention, called outside its ``forward`` (fp32);
- a recommendation from KBRD goes through the recommender's ``forward`` (fp16, the R-GCN included); BARCOR's
  recommender was not prepared (fp32).

:func:`prepared_forward` does the same for the duration of a turn: it wraps the ``forward`` of the modules a model
names (:meth:`crs_backends.neural.engine.NeuralModel.prepared_modules`) and nothing else, so the serving path runs its
calls as they are and each one meets autocast exactly where CRS Arena's did.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence

import torch
from torch import nn


def is_prepared(module: nn.Module) -> bool:
    """Whether ``module``'s ``forward`` is wrapped by :func:`prepared_forward` now (a model whose own code calls its
    parts differently then, as KBRD's recommendation goes through its recommender's ``forward``, asks this)."""
    return "forward" in vars(module)


@contextlib.contextmanager
def prepared_forward(modules: Sequence[nn.Module], device_type: str, dtype: torch.dtype) -> Iterator[None]:
    """Within the block, each of ``modules`` runs its ``forward`` under ``torch.autocast(device_type, dtype)``, as
    accelerate's prepared model did; its other methods, and every other module, run as they are."""
    wrapped: list[nn.Module] = []
    try:
        for module in modules:
            if is_prepared(module):  # already wrapped (a module named twice): once is what accelerate did
                continue
            module.forward = torch.autocast(device_type, dtype=dtype)(module.forward)
            wrapped.append(module)
        yield
    finally:
        for module in wrapped:
            del module.forward
