"""One small-UniCRS turn through two decoders: torch (the dequantized SmolLM2 copy, KV cache) and llama.cpp (the
package's Q4_1 GGUF, with the prompt vectors given as input embeddings and the context as tokens).

A reply: the conversation prompt's vectors (the prompt module, torch, every route), a prefill of those vectors and
the chat-form context (in torch, in llama.cpp, or in torch with llama.cpp decoding from its cache: torch-prefill,
the default), then ``--tokens`` greedy tokens (a fixed count: no early stop, no n-gram ban, so both routes
do the same work). A ranking: the recommendation prompt's vectors, its per-layer key/value prefix where the set has
one (through llama.cpp's sequence state on that route), a prefill, the final hidden state scored against the items
(``UniCRSSmall.item_scores``, each route as the app runs it). The median over ``--turns`` conversations (one warm-up
turn first) is printed per route. The two routes read the same weights (the torch copy is the GGUF dequantized), but
llama.cpp multiplies in its quantized formats, so their outputs differ a little: the script also prints how often
their first reply token agrees, how many leading tokens agree, and the overlap of their top-10 recommendations.

The model is the built small set's UniCRS when there is one (``python -m crs_backends.neural.small ensure``), else
freshly created prompt modules (random; latency does not depend on the weights, agreement somewhat does).

    python bench/unicrs_backends.py [--threads 2] [--llama-threads 1] [--turns 8] [--tokens 30]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

CONVERSATIONS = [
    (["Hi! I like movies with Tom Hanks. Something like Forrest Gump?"], ["Tom Hanks", "Forrest Gump (1994)"]),
    (["I want a scary movie for tonight."], ["horror"]),
    (
        ["Hello", "Hi! What kind of movies do you like?", "Something funny, maybe a comedy from the nineties."],
        ["comedy"],
    ),
    (["Can you recommend a good science fiction film?", "Have you seen Alien?", "Yes, loved it. More like that"], []),
    (["I loved The Shining and Jaws. What else should I watch?"], ["The Shining (1980)", "Jaws (1975)"]),
    (["Recommend me a drama, please."], ["drama"]),
    (["My kids liked Up. Any other animated films?"], ["Up (2009)"]),
    (["Something with Sigourney Weaver?", "Alien is a classic.", "I saw it already, another one?"], []),
    (["A crime thriller like Heat would be great."], ["Heat (1995)"]),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument(
        "--llama-threads", type=int, default=1, help="as the model serves (unicrs_smollm.LLAMA_THREADS)"
    )
    parser.add_argument("--turns", type=int, default=8)
    parser.add_argument("--tokens", type=int, default=30)
    args = parser.parse_args()

    import torch

    torch.set_num_threads(args.threads)
    from catalog.catalog import get_catalog
    from crs_backends.neural.engine import ConvInput
    from crs_backends.neural.kg_reader import kg_from_catalog, load_kg
    from crs_backends.neural.names import set_dataset, small_models_root
    from crs_backends.neural.smollm_llamacpp import LlamaCppDecoder
    from crs_backends.neural.unicrs_smollm import UniCRSSmall
    from crs_backends.neural.unicrs_smollm_settings import is_smollm_set

    root = small_models_root()
    if root is not None and is_smollm_set(root, set_dataset(root)):
        kg = load_kg(root / f"kg_{set_dataset(root)}")
        model = UniCRSSmall.load(root, set_dataset(root), kg)
        origin = f"trained ({root})"
    else:
        kg = kg_from_catalog(get_catalog("bundled"))
        model = UniCRSSmall.create(kg, seed=0)
        origin = "random prompt modules"
    inputs = [ConvInput(c, [e for e in ents if e in kg.entity2id]) for c, ents in CONVERSATIONS]
    inputs = (inputs * (1 + args.turns // len(inputs)))[: args.turns + 1]
    llama = LlamaCppDecoder(model.backbone.gguf, int(model.lm.config.hidden_size), threads=args.llama_threads)
    model._llama = llama  # the model's rankings run on this decoder (its threads), as on the one it starts itself
    print(
        f"# model: {origin}; torch {args.threads} threads, llama.cpp {args.llama_threads}; "
        f"load {os.getloadavg()[0]:.2f} (1-min average) at start"
    )

    times: dict[str, list[float]] = {
        "reply torch": [],
        "reply llamacpp": [],
        "reply torch-prefill": [],
        "rank torch": [],
        "rank llamacpp": [],
    }
    first_same, split_same, prefix_same, overlaps, routes = 0, 0, [], [], set()
    for n, inp in enumerate(inputs):
        t0 = time.perf_counter()
        torch_ids = torch_turn(model, inp, args.tokens)
        t1 = time.perf_counter()
        llama_ids = llama_turn(model, llama, inp, args.tokens)
        t2 = time.perf_counter()
        split_ids = torch_prefill_turn(model, llama, inp, args.tokens)
        t3 = time.perf_counter()
        model.invalidate()  # each ranking encodes the text again, as in a new turn
        top = {"torch": [e for e, _s in model.recommend(inp, 10, decoder="torch")]}
        t4 = time.perf_counter()
        model.invalidate()
        top["llamacpp"] = [e for e, _s in model.recommend(inp, 10, decoder="llamacpp")]
        t5 = time.perf_counter()
        routes.add(model.rank_route)
        if n == 0:  # warm-up
            continue
        for key, seconds in (
            ("reply torch", t1 - t0),
            ("reply llamacpp", t2 - t1),
            ("reply torch-prefill", t3 - t2),
            ("rank torch", t4 - t3),
            ("rank llamacpp", t5 - t4),
        ):
            times[key].append(seconds)
        first_same += torch_ids[0] == llama_ids[0]
        split_same += torch_ids[0] == split_ids[0]
        prefix_same.append(next((i for i, (a, b) in enumerate(zip(torch_ids, llama_ids)) if a != b), args.tokens))
        overlaps.append(len(set(top["torch"]) & set(top["llamacpp"])) / 10)
    turns = len(overlaps)
    print(
        f"# first reply token agrees with torch's in {first_same}/{turns} turns through llama.cpp, "
        f"{split_same}/{turns} through torch-prefill; leading tokens agreeing, llama.cpp and torch (median) "
        f"{statistics.median(prefix_same)} of {args.tokens}; top-10 overlap (mean) {statistics.mean(overlaps):.2f}; "
        f"the llama.cpp rankings ran on {', '.join(sorted(routes))}"
    )
    print(f"# load {os.getloadavg()[0]:.2f} (1-min average) at the end")
    print(f"BENCH unicrs_turn_median_s_torch {statistics.median(times['reply torch']):.3f} s target <= 1.5")
    print(f"BENCH unicrs_turn_median_s_llamacpp {statistics.median(times['reply llamacpp']):.3f} s")
    print(f"BENCH unicrs_turn_median_s_torch_prefill {statistics.median(times['reply torch-prefill']):.3f} s")
    print(f"BENCH unicrs_rank_median_s_torch {statistics.median(times['rank torch']):.3f} s")
    print(f"BENCH unicrs_rank_median_s_llamacpp {statistics.median(times['rank llamacpp']):.3f} s")
    print(f"BENCH unicrs_rank_top10_overlap {statistics.mean(overlaps):.2f} ratio target >= 0.9")
    llama.close()


def torch_turn(model, inp, tokens: int) -> list[int]:
    """Prompt vectors, prefill, ``tokens`` greedy steps with the KV cache (torch)."""
    import torch

    with torch.inference_mode():
        model.invalidate()  # the text encoder's states are computed again, as in a new turn
        prompt, pmask = model.prompts("conv", [model.entity_ids(inp.entities)], [model.text_ids(inp.context)])
        embeds, mask, positions = model.assemble(prompt, pmask, [model.context_ids(inp.context)])
        hidden, cache = model.run(embeds, mask, positions)
        n, out = embeds.shape[1], []
        embed = model.lm.get_input_embeddings()
        for _ in range(tokens):
            token = int(torch.argmax(model.lm.lm_head(hidden[0, -1])))
            out.append(token)
            mask = torch.ones(1, n + 1, dtype=torch.long)
            hidden, cache = model.run(embed(torch.tensor([[token]])), mask, torch.tensor([[n]]), cache)
            n += 1
    return out


def llama_turn(model, llama, inp, tokens: int) -> list[int]:
    """Prompt vectors (torch), then prefill and ``tokens`` greedy steps in llama.cpp."""
    vectors = prompt_vectors(model, "conv", inp)
    return llama.greedy(vectors, model.context_ids(inp.context), tokens, end_ids=set())


def torch_prefill_turn(model, llama, inp, tokens: int) -> list[int]:
    """Prompt vectors and the prefill in torch, then ``tokens`` greedy steps in llama.cpp from torch's KV cache."""
    import torch

    with torch.inference_mode():
        model.invalidate()
        prompt, pmask = model.prompts("conv", [model.entity_ids(inp.entities)], [model.text_ids(inp.context)])
        embeds, mask, positions = model.assemble(prompt, pmask, [model.context_ids(inp.context)])
        hidden, cache = model.run(embeds, mask, positions)
        logits = model.lm.lm_head(hidden[0, -1]).float().numpy()
        keys, values = model._llama_cache(cache)
    return llama.greedy_after(keys, values, logits, tokens, end_ids=set())


def prompt_vectors(model, which: str, inp):
    import torch

    with torch.inference_mode():
        model.invalidate()
        prompt, pmask = model.prompts(which, [model.entity_ids(inp.entities)], [model.text_ids(inp.context)])
    return prompt[0][pmask[0].bool()].float().numpy()


if __name__ == "__main__":
    main()
