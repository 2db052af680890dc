"""Histogram of the episode returns of a collected dataset, D_E episodes marked (issues 4/5: "the histogram of
episode returns spans poor to good episodes, and the expert episodes are among the best").

    .venv/bin/python scripts/return_hist.py --dataset data/dmc_cartpole-swingup.npz --out results/dmc_cartpole-swingup/returns_hist.png

Prints the return range, quantiles, and the rank of every D_E episode among all episodes.
"""

import os
import sys
from dataclasses import dataclass

import numpy as np
import tyro

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
import contract  # noqa: E402


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


def main(args: Args) -> dict:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    data = contract.load_dataset(args.dataset)
    meta = data["metadata"]
    returns, expert, policy = episode_table(data)
    ranks = np.argsort(np.argsort(-returns, kind="stable"), kind="stable")  # 0 = best episode
    labels = [b.get("label", b.get("name", str(i))) for i, b in enumerate(meta.get("behavior_policies", []))]
    fig, ax = plt.subplots(figsize=(6, 3.6))
    edges = np.histogram_bin_edges(returns, bins=args.bins)
    for p in np.unique(policy):
        name = labels[p] if p < len(labels) else f"policy {p}"
        ax.hist(returns[policy == p], bins=edges, alpha=0.6, label=name)
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
    try:
        main(tyro.cli(Args))
    except contract.ContractError as e:
        sys.exit(f"error: {e}")
