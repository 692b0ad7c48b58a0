"""SPRINTER's expected accepted tokens E[N] against the number r of acceptable drafts: the closed form of
Theorem 3.3 (specdec.theory.sprinter.expected_tokens) and the simulated verifier chain
(specdec.simulate.sprinter_chain, mean +- 2 standard errors), one curve per false-positive rate eta_fp.

    python python/examples/sprinter_figure.py [--output sprinter_figure.png] [--draws 20000] [--seed 1]

Needs the specdec package (pip install ./python) and numpy; the figure needs matplotlib, an optional
import: without it the script prints the table and a message saying so, and exits 0. `compute` is the
part without matplotlib (tests/python/test_examples.py runs it)."""

from __future__ import annotations

import argparse
import sys

import numpy as np
from _figure import draw_if_possible  # python/examples/_figure.py

from specdec import simulate, theory


def compute(eta_tp=0.9, eta_fp=(0.0, 0.1, 0.3, 0.5), r=tuple(range(0, 21)), *, draws=20_000, seed=1):
    """E[N] over the grid eta_fp x r: a dict of arrays, each [len(eta_fp), len(r)] but the axes:
    ``theory`` the closed form, ``mean`` and ``std_error`` the simulation, ``z`` (mean - theory) / std_error."""
    eta_fp, r = np.asarray(eta_fp, np.float64), np.asarray(r)
    exact = theory.sprinter.expected_tokens(eta_tp, eta_fp[:, None], r)
    sim = simulate.sprinter_chain(eta_tp, eta_fp[:, None], r, draws=draws, seed=seed)
    return {"eta_tp": eta_tp, "eta_fp": eta_fp, "r": r, "theory": exact, "mean": sim.mean,
            "std_error": sim.std_error, "z": sim.z_score(exact)}


def plot(data, output):
    """Draws the figure into ``output`` (matplotlib, the Agg backend)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.2))
    for i, fp in enumerate(data["eta_fp"]):
        line, = ax.plot(data["r"], data["theory"][i], label=f"eta_fp = {fp:g}")
        ax.errorbar(data["r"], data["mean"][i], yerr=2 * data["std_error"][i], fmt="o", ms=3,
                    color=line.get_color())
    ax.set_xlabel("r (acceptable drafts at the head of the draft)")
    ax.set_ylabel("E[N] (tokens the verifier accepts)")
    ax.set_title(f"SPRINTER, eta_tp = {data['eta_tp']:g}: Theorem 3.3 (lines) and simulation (points, 2 s.e.)")
    ax.title.set_fontsize(9)
    ax.legend()
    fig.tight_layout()
    fig.savefig(output, dpi=120)
    plt.close(fig)


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--output", default="sprinter_figure.png", help="the figure's file (default %(default)s)")
    parser.add_argument("--draws", type=int, default=20_000, help="simulated runs per point (default %(default)s)")
    parser.add_argument("--seed", type=int, default=1, help="the simulation's seed (default %(default)s)")
    args = parser.parse_args(argv)
    data = compute(draws=args.draws, seed=args.seed)
    print(f"SPRINTER E[N], eta_tp = {data['eta_tp']:g}, {args.draws} runs per point (theory / simulated):")
    print("   r " + "".join(f"  eta_fp={fp:<14g}" for fp in data["eta_fp"]))
    for j, r in enumerate(data["r"]):
        print(f"{r:4d} " + "".join(f"  {data['theory'][i, j]:7.3f} / {data['mean'][i, j]:7.3f}"
                                   for i in range(len(data["eta_fp"]))))
    print(f"largest |z| = {np.abs(data['z']).max():.2f} over {data['z'].size} points")
    return draw_if_possible(plot, data, args.output)


if __name__ == "__main__":
    sys.exit(main())
