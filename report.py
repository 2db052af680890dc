"""Rebuild the result table and figures from evaluate.py's JSON files alone (one file per method, seed, split).

Table: per method and split, the mean over seeds of each seed's mean episode return, ± the std over seeds, and
the number of seeds; the best learned method of each column is in bold (reference policies are not ranked).
Fig. 4: returns per method, in-distribution (training classes of c) and on the held-out class.
Fig. 5: OILCA's return against the size of the augmented expert set, |augmented D_E| / |D_U| (DWBC is the point
with no augmented row), over the seeds that have every point.

Usage: python report.py --results results/toy      writes table.md, fig4.png, fig5.png there and prints the table.
"""

import glob
import json
import os
import sys
from collections import defaultdict
from dataclasses import dataclass

import numpy as np
import tyro

import contract

MAIN_METHODS = ("bc_exp", "bc_all", "oril", "bcnd", "lobsdice", "dwbc", "oril_ca", "bcnd_ca", "oilca")  # table / Fig. 4 order
ALL_SPLITS = (("train", "in-distribution (training c)"), ("heldout", "out-of-distribution (held-out c)"),
              ("A", "space A (in-distribution)"), ("B", "space B (out-of-distribution)"))


def present_splits(rows: list) -> tuple:
    """The splits that occur in the results, in the order of ALL_SPLITS (e.g. train/heldout or A/B)."""
    have = {r["split"] for r in rows}
    return tuple(s for s in ALL_SPLITS if s[0] in have)


@dataclass
class Args:
    results: str = "results/toy"
    """folder of evaluate.py's JSON files; the table and figures are written there"""


def load_results(folder: str) -> list:
    rows = []
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        with open(path) as f:
            r = json.load(f)
        if isinstance(r, dict) and {"method", "seed", "split", "returns"} <= set(r):
            rows.append(r)
    if not rows:
        raise SystemExit(f"error: no evaluate.py result JSON in {folder}")
    return rows


def per_seed(rows: list, key: str = "returns") -> dict:
    """{(method, split): {seed: mean return}} (key="success": mean fractional success, CausalWorld)"""
    out = defaultdict(dict)
    for r in rows:
        if r.get(key) is not None:
            out[(r["method"], r["split"])][r["seed"]] = float(np.mean(r[key]))
    return out


def table(rows: list, key: str = "returns") -> str:
    SPLITS = present_splits(rows)
    scores = per_seed(rows, key)
    methods = [m for m in MAIN_METHODS if any((m, s) in scores for s, _ in SPLITS)]
    methods += sorted({m for m, _ in scores if m not in methods and not m.startswith("reference_")})
    refs = sorted({m for m, _ in scores if m.startswith("reference_")})
    best = {}
    for split, _ in SPLITS:
        means = {m: np.mean(list(scores[(m, split)].values())) for m in methods if (m, split) in scores}
        best[split] = max(means, key=means.get) if means else None
    lines = ["| method | " + " | ".join(title for _, title in SPLITS) + " | seeds |", "|---" * (len(SPLITS) + 2) + "|"]
    for m in methods + refs:
        cells, n = [], 0
        for split, _ in SPLITS:
            vals = np.array(list(scores.get((m, split), {}).values()))
            n = max(n, len(vals))
            cell = f"{vals.mean():.2f} ± {vals.std():.2f}" if len(vals) else "—"
            cells.append(f"**{cell}**" if m == best[split] and len(vals) else cell)
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {n} |")
    return "\n".join(lines)


def fig4(rows: list, path: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    SPLITS = present_splits(rows)
    scores = per_seed(rows)
    methods = [m for m in MAIN_METHODS if any((m, s) in scores for s, _ in SPLITS)]
    fig, axes = plt.subplots(1, len(SPLITS), figsize=(5 * len(SPLITS), 3.8), sharey=True, squeeze=False)
    axes = axes[0]
    for ax, (split, title) in zip(axes, SPLITS):
        for i, m in enumerate(methods):
            vals = list(scores.get((m, split), {}).values())
            if vals:
                ax.bar(i, np.mean(vals), yerr=np.std(vals), color=f"C{i}", capsize=4)
                ax.scatter(np.full(len(vals), i), vals, color="k", s=8, zorder=3)
        for ref, style in (("reference_expert", "--"), ("reference_random", ":")):
            vals = list(scores.get((ref, split), {}).values())
            if vals:
                ax.axhline(np.mean(vals), color="gray", ls=style, label=ref.replace("reference_", ""))
        ax.set_xticks(range(len(methods)), methods, rotation=30 if len(methods) > 5 else 0, ha="right" if len(methods) > 5 else "center", fontsize=8)
        ax.set_title(title, fontsize=10)
        if ax.get_legend_handles_labels()[0]:
            ax.legend(fontsize=7)
    axes[0].set_ylabel("return (mean over seeds; dots: seeds)")
    fig.tight_layout()
    contract.save_figure(path, fig)
    plt.close(fig)


def fig5(rows: list, path: str) -> bool:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    points = defaultdict(lambda: defaultdict(dict))  # split -> x -> seed -> return
    for r in rows:
        if (r["method"] == "dwbc" or r["method"].startswith("oilca")) and r.get("augmented_de_over_du") is not None:
            points[r["split"]][round(r["augmented_de_over_du"], 3)][r["seed"]] = float(np.mean(r["returns"]))
    if not points:
        return False
    fig, ax = plt.subplots(figsize=(5, 3.8))
    for i, (split, title) in enumerate(present_splits(rows)):
        xs = sorted(points[split])
        if len(xs) < 2:
            continue
        seeds = set.intersection(*(set(points[split][x]) for x in xs))
        if not seeds:
            continue
        ys = np.array([[points[split][x][s] for s in sorted(seeds)] for x in xs])
        ax.errorbar(xs, ys.mean(1), yerr=ys.std(1), marker="o", capsize=3, color=f"C{i}",
                    label=f"{title}, seeds {','.join(map(str, sorted(seeds)))}")
    ax.set_xlabel("|augmented D_E| / |D_U|  (leftmost point: DWBC, no augmentation)")
    ax.set_ylabel("OILCA return")
    ax.legend(fontsize=7)
    fig.tight_layout()
    contract.save_figure(path, fig)
    plt.close(fig)
    return True


def main(args: Args) -> str:
    rows = load_results(args.results)
    md = table(rows)
    if any(r.get("success") is not None for r in rows):
        md += "\n\nFractional success (CausalWorld), mean ± std over seeds:\n\n" + table(rows, "success")
    header = (f"Returns on {rows[0]['env']}: mean ± std over seeds of each seed's mean episode return "
              f"({rows[0]['episodes']} episodes per split, evaluation seed {rows[0]['eval_seed']}).\n\n")
    contract.save_text(os.path.join(args.results, "table.md"), header + md + "\n")
    fig4(rows, os.path.join(args.results, "fig4.png"))
    has5 = fig5(rows, os.path.join(args.results, "fig5.png"))
    print(header + md)
    print(f"wrote {args.results}/table.md, fig4.png" + (", fig5.png" if has5 else ""))
    return md


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except (ValueError, KeyError) as e:
        sys.exit(f"error: {e}")
