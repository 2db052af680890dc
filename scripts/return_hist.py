"""Histogram of the episode returns of a collected dataset, D_E episodes marked: it shows whether the returns span
poor to good episodes, and whether the expert episodes are among the best.

    .venv/bin/python scripts/return_hist.py --dataset data/dmc_cartpole-swingup.npz --out results/dmc_cartpole-swingup/returns_hist.png

Prints the return range, quantiles, and the rank of every D_E episode among all episodes.
"""

import os
import sys
from dataclasses import dataclass

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oilca import cli  # noqa: E402
from oilca import contract  # noqa: E402
import envs


@dataclass
class Args:
    dataset: str
    """collected dataset (.npz)"""
    out: str
    """figure path (.png)"""
    bins: int = 40
    """histogram bins"""


def episode_table(data: dict):
    starts = np.flatnonzero(np.r_[True, data["episode_ids"][1:] != data["episode_ids"][:-1]])
    keep = starts[~data["augmented"][starts]] if "augmented" in data else starts
    returns = data["episode_returns"][keep].astype(np.float64)
    expert = data["expert"][keep]
    policy = data["policy_ids"][keep] if "policy_ids" in data else np.zeros(len(keep), int)
    return returns, expert, policy


def legend_order(policy_ids, behaviors: list) -> list:
    """The behaviour ids present, in numeric order of what tells them apart: snapshots by training step, noisy
    controllers by noise level, both numerically (a dataset collected from `ls step_*.pt` lists step_100000 before
    step_20000); kinds keep their first-listed order (e.g. uniform random last), unknown ids go last by id."""
    kinds = {}
    for b in behaviors:
        kinds.setdefault(b.get("name"), len(kinds))

    def key(p: int):
        if not 0 <= p < len(behaviors):
            return (len(kinds), 0.0, 0.0, p)
        b = behaviors[p]
        num = [float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else 0.0
               for v in (b.get("train_step"), b.get("noise_std"))]
        return (kinds[b.get("name")], *num, p)

    return sorted((int(p) for p in np.unique(policy_ids)), key=key)


def main(args: Args) -> dict:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = envs.load_dataset(args.dataset)
    meta = data["metadata"]
    returns, expert, policy = episode_table(data)
    ranks = np.argsort(np.argsort(-returns, kind="stable"), kind="stable")  # 0 = best episode
    behaviors = meta.get("behavior_policies", [])
    labels = [b.get("label", b.get("name", str(i))) for i, b in enumerate(behaviors)]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    edges = np.histogram_bin_edges(returns, bins=args.bins)
    for k, p in enumerate(legend_order(policy, behaviors)):
        name = labels[p] if 0 <= p < len(labels) else f"policy {p}"
        ax.hist(returns[policy == p], bins=edges, alpha=0.6, label=name, color=f"C{k % 10}")
    for r in returns[expert]:
        ax.axvline(r, color="k", lw=1, ls="--")
    ax.set_xlabel("episode return (dashed: D_E episodes)"), ax.set_ylabel("episodes")
    ax.set_title(f"{meta['env_id']}: {len(returns)} episodes, {expert.sum()} in D_E", fontsize=10)
    ax.legend(fontsize=7)
    fig.tight_layout()
    contract.save_figure(args.out, fig)
    plt.close(fig)
    q = np.quantile(returns, [0, 0.1, 0.5, 0.9, 1])
    pct = 100 * (ranks[expert] + 1) / len(returns)
    print(f"{args.dataset}: {len(returns)} episodes; return min {q[0]:.1f}, p10 {q[1]:.1f}, median {q[2]:.1f}, "
          f"p90 {q[3]:.1f}, max {q[4]:.1f}; D_E episodes rank in the top {', '.join(f'{p:.0f}%' for p in np.sort(pct))} "
          f"-> {args.out}")
    return {"quantiles": q.tolist(), "expert_top_percent": np.sort(pct).tolist(), "n_episodes": len(returns)}


if __name__ == "__main__":
    cli.run(main, Args)
