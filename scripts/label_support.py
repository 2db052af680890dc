"""Where the sampler's labels go wrong on the toy: label error against the toy's controller, by the counterfactual
state's distance to the nearest D_E state (docs/labels.md, "Rows near D_E only").

For the augmented rows of one toy dataset (augment.py, any label source) this script computes each row's distance
to its nearest D_E state (augment.support_distance: Euclidean, every state dim divided by its std over D_all; all
of D_E's rows are the reference) and splits the rows into bins at distance quantiles (`--quantiles`). Per bin it
gives the label error, mean_j |a~'_j - π*(s~')_j| as fidelity.py measures it, of
    the dataset's own labels (BC-exp's for plain OILCA), and
    the label copied from the nearest D_E transition (its recorded expert action), the nonparametric source the
    issue proposed as an alternative,
each as median / 90th percentile. It also gives, for the kept share q of the rows nearest D_E (`--keeps`), the
label error of the dataset's labels there: what `augment.py --support-keep q` would keep of these rows (the flag
draws more candidates, so its kept rows are not exactly these). Every row of the table also gives how far its
states lie from the toy's target (median / 90th percentile of ‖s - target‖), with D_E's own states as the last row:
the expert reaches the target early and stays there, so most D_E states, and the rows nearest them, lie at the
target. It trains nothing and changes no dataset.

    python scripts/label_support.py --augmented data/toy_labels_aug_r0.5_s0.npz \
        --out results/toy_labels/label_support.json --table results/toy_labels/label_support.md
"""

import os
import sys
from dataclasses import asdict, dataclass
from typing import Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import augment  # noqa: E402
import envs  # noqa: E402
from envs import toy as toy_env  # noqa: E402
from oilca import cli, contract  # noqa: E402


@dataclass
class Args:
    augmented: str = "data/toy_labels_aug_r0.5_s0.npz"
    """an augmented toy dataset (augment.py)"""
    out: str = "results/toy_labels/label_support.json"
    """output JSON"""
    table: Optional[str] = "results/toy_labels/label_support.md"
    """output markdown table; none with --table None"""
    quantiles: Tuple[float, ...] = (0.25, 0.5, 0.75, 0.9)
    """the distance quantiles where the bins are cut (increasing, in (0, 1))"""
    keeps: Tuple[float, ...] = (0.5, 0.25)
    """shares q of the rows nearest D_E whose label error is also given"""


def stats(x: np.ndarray) -> Optional[dict]:
    return {"median": float(np.median(x)), "p90": float(np.percentile(x, 90)), "n": int(len(x))} if len(x) else None


def main(args: Args) -> dict:
    qs = list(args.quantiles)
    if not qs or any(not 0 < q < 1 for q in qs) or qs != sorted(set(qs)):
        raise ValueError(f"--quantiles: increasing shares in (0, 1), got {qs}")
    if any(not 0 < q <= 1 for q in args.keeps):
        raise ValueError(f"--keeps: shares in (0, 1], got {list(args.keeps)}")
    contract.check_paths({"--augmented": args.augmented}, files={"--out": args.out, "--table": args.table})
    data = envs.load_dataset(args.augmented)
    meta = data["metadata"]
    if meta.get("env_id") != "toy":
        raise ValueError(f"{args.augmented}: a dataset of {meta.get('env_id')}; the label error needs the toy's controller")
    if "augmented" not in data or not data["augmented"].any():
        raise ValueError(f"{args.augmented}: no augmented rows (run augment.py first)")
    env = toy_env.make_env(meta)
    aug, de = data["augmented"], data["expert"] & ~data["augmented"]
    states, labels = data["observations"][aug], data["actions"][aug]
    raw = ~aug
    scale = augment.state_scale(data["observations"][raw])  # D_all: the collected rows, as augment.py measures
    ref, ref_act = data["observations"][de], data["actions"][de]
    dist = augment.support_distance(states, ref, scale)
    # the nearest D_E transition of each row (the same distance), its recorded expert action as the label
    nearest = np.empty(len(states), int)
    for i in range(0, len(states), 1024):
        x = (states[i:i + 1024] / scale)[:, None, :] - (ref / scale)[None]
        nearest[i:i + 1024] = (x ** 2).sum(-1).argmin(1)
    expert = env.expert_action(states)
    err_own = np.abs(labels - expert).mean(-1)
    err_nn = np.abs(ref_act[nearest] - expert).mean(-1)
    to_target = np.linalg.norm(states - env.target, axis=-1)
    cuts = np.quantile(dist, qs)
    edges = [0.0] + [float(c) for c in cuts] + [float(dist.max())]
    bin_of = np.searchsorted(cuts, dist, side="right")
    bins = []
    for b in range(len(edges) - 1):
        m = bin_of == b
        lo = 0.0 if b == 0 else qs[b - 1]
        hi = 1.0 if b == len(qs) else qs[b]
        bins.append({"quantiles": [lo, hi], "distance": [edges[b], edges[b + 1]], "own_labels": stats(err_own[m]),
                     "nearest_transition_labels": stats(err_nn[m]), "to_target": stats(to_target[m])})
    order = np.argsort(dist, kind="stable")
    kept = {q: order[:max(1, int(round(q * len(order))))] for q in args.keeps}
    keeps = [{"keep": float(q), "own_labels": stats(err_own[k]), "to_target": stats(to_target[k])} for q, k in kept.items()]
    sampler = meta.get("augmentation", {}).get("sampler_facts")
    result = {"env": "toy", "dataset": args.augmented, "dataset_fingerprint": contract.fingerprint(data),
              "labels": sampler, "n_rows": int(aug.sum()), "n_reference": int(de.sum()),
              "all": {"own_labels": stats(err_own), "nearest_transition_labels": stats(err_nn),
                      "to_target": stats(to_target)},
              "d_e": {"to_target": stats(np.linalg.norm(ref - env.target, axis=-1))},
              "bins": bins, "keeps": keeps, "args": asdict(args)}
    fmt = lambda s: f"{s['median']:.3f} / {s['p90']:.3f}" if s else "–"  # noqa: E731
    lines = ["| rows (by distance to the nearest D_E state) | rows | distance | own labels, median / 90th pct. | "
             "nearest D_E transition's action, median / 90th pct. | distance to the target, median / 90th pct. |",
             "|---|---|---|---|---|---|"]
    lines.append(f"| all | {result['n_rows']} | – | {fmt(result['all']['own_labels'])} | "
                 f"{fmt(result['all']['nearest_transition_labels'])} | {fmt(result['all']['to_target'])} |")
    for b in bins:
        n = b["own_labels"]["n"] if b["own_labels"] else 0
        lines.append(f"| quantiles {b['quantiles'][0]:g}–{b['quantiles'][1]:g} | {n} | "
                     f"{b['distance'][0]:.3f}–{b['distance'][1]:.3f} | {fmt(b['own_labels'])} | "
                     f"{fmt(b['nearest_transition_labels'])} | {fmt(b['to_target'])} |")
    for k in keeps:
        lines.append(f"| the {k['keep']:g} nearest | {k['own_labels']['n']} | – | {fmt(k['own_labels'])} | – | "
                     f"{fmt(k['to_target'])} |")
    lines.append(f"| D_E's states | {result['n_reference']} | 0 | – | – | {fmt(result['d_e']['to_target'])} |")
    outs = {args.out: lambda p: contract.save_json(p, result)}
    if args.table:
        outs[args.table] = lambda p: contract.save_text(p, "\n".join(lines) + "\n")
    for path, write in outs.items():
        write(path)
    print("\n".join(lines))
    return result


if __name__ == "__main__":
    cli.run(main, Args)
