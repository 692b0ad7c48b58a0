"""Tokens emitted per step of the step decoder (specdec.Decoder) for each drafter: a draft model, n-gram
prompt lookup and suffix-tree chains, on n-gram models trained on the licence texts every Debian system
has (/usr/share/common-licenses), the prompts the first words of their paragraphs.

    python python/examples/tokens_per_step.py [--output tokens_per_step.png] [--requests 64] [--seed 1]
                                              [--temperature 0]

Each drafter runs the same requests (SampleAndMatch, gamma 6, 48 tokens, temperature 0 unless
--temperature says otherwise: greedy decoding, where these models' drafts are accepted most); every
StepEvent's token count is one sample of "tokens per step". With position-keyed target samples the
three decoders emit the same tokens (checked): only how many steps they take differs. Needs the
specdec package (pip install ./python) and numpy; the figure needs matplotlib, an optional import:
without it the script prints the table and a message saying so, and exits 0. `compute` is the part
without matplotlib (tests/python/test_examples.py runs it)."""

from __future__ import annotations

import argparse
import pathlib
import sys

import numpy as np
from _figure import draw_if_possible  # python/examples/_figure.py

import specdec
from specdec.decoder import ngram_pair

LICENCES = pathlib.Path("/usr/share/common-licenses")
DRAFTERS = ("model", "ngram", "suffix")


def load_texts(names=("Apache-2.0", "GPL-3", "LGPL-2.1", "MPL-2.0")):
    """The licence texts that exist here (an empty list where none does)."""
    return [(LICENCES / n).read_text(errors="replace") for n in names if (LICENCES / n).is_file()]


def compute(texts, *, requests=64, gamma=6, tokens=48, temperature=0.0, seed=1):
    """Runs every drafter on the same requests: a dict drafter -> {"per_step": int array of the tokens
    each step emitted, "steps": steps per request, "acceptance": accepted / drafted, "outputs": the
    requests' tokens}."""
    target, draft = ngram_pair(texts, target_order=4, draft_order=2)
    paragraphs = [p for t in texts for p in t.split("\n\n") if len(p.split()) >= 12]
    rng = np.random.default_rng(seed)
    prompts = [target.encode(" ".join(paragraphs[i].split()[:8])) for i in rng.choice(len(paragraphs), requests)]
    data = {}
    for drafter in DRAFTERS:
        d = specdec.Decoder(target, draft, rule=specdec.SampleAndMatch())
        handles = [d.add(p, seed=seed, request_id=i, gamma=gamma, max_new_tokens=tokens, temperature=temperature,
                         drafter=drafter, ngram=(1, 3)) for i, p in enumerate(prompts)]
        per_step, outputs, drafted, accepted, steps = [], {h: [] for h in handles}, 0, 0, []
        while d.active:
            for e in d.step():
                per_step.append(len(e.tokens))
                outputs[e.request].append(e.tokens)
                if e.finished is not None:
                    s = d.stats(e.request)
                    drafted, accepted = drafted + s["drafted"], accepted + s["accepted"]
                    steps.append(s["iterations"])
        data[drafter] = {"per_step": np.array(per_step), "steps": np.array(steps),
                         "acceptance": accepted / drafted if drafted else 0.0,
                         "outputs": [np.concatenate(outputs[h]) for h in handles]}
    return data


def plot(data, output):
    """Histograms of tokens per step, one per drafter (matplotlib, the Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    top = max(int(d["per_step"].max()) for d in data.values())
    bins = np.arange(0.5, top + 1.5)
    for drafter, d in data.items():
        ax.hist(d["per_step"], bins=bins, histtype="step", density=True,
                label=f"{drafter}: {d['per_step'].mean():.2f} tokens/step")
    ax.set_xlabel("tokens emitted in a step")
    ax.set_ylabel("fraction of steps")
    ax.set_title("specdec.Decoder, n-gram models on licence texts")
    ax.legend()
    fig.tight_layout()
    fig.savefig(output, dpi=120)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="tokens_per_step.png", help="the figure's file (default %(default)s)")
    parser.add_argument("--requests", type=int, default=64, help="requests per drafter (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="the requests' seed (default %(default)s)")
    parser.add_argument("--temperature", type=float, default=0.0, help="the target's temperature (default %(default)s)")
    args = parser.parse_args(argv)
    texts = load_texts()
    if not texts:
        print(f"no licence texts in {LICENCES}: nothing to train the models on")
        return 1
    data = compute(texts, requests=args.requests, seed=args.seed, temperature=args.temperature)
    same = all(np.array_equal(a, b) for a, b in zip(data["model"]["outputs"], data["ngram"]["outputs"])) and all(
        np.array_equal(a, b) for a, b in zip(data["model"]["outputs"], data["suffix"]["outputs"]))
    print(f"{args.requests} requests, 48 tokens each; the same tokens with every drafter: {same}")
    print("drafter  tokens/step  steps/request  acceptance")
    for drafter, d in data.items():
        print(f"{drafter:8s} {d['per_step'].mean():11.2f} {d['steps'].mean():14.1f} {d['acceptance']:11.2f}")
    return draw_if_possible(plot, data, args.output)


if __name__ == "__main__":
    sys.exit(main())
