"""Learning curves of one benchmark: the in-training evaluation return against the gradient step, per method, the
mean over seeds with a 95% bootstrap band, from the runs' progress.csv files (runs/ is not committed, so this is a
command of its own rather than part of report.py).

    .venv/bin/python scripts/learning_curves.py --runs runs/toy --methods bc_exp bc_all dwbc oilca --out docs/curves_toy.png

Input: <runs>/<job>/progress.csv, the file every trainer writes (progress.py), with the columns `step` and
`eval_return` (the mean return of the trainer's in-training evaluation episodes, on the training classes of c). The
runner names a training job `<method>_s<seed>`, and the training job of a budget study (runner --budgets)
`<method>_b<largest budget>_s<seed>`. Per method, --budget picks the runs: by default its budget-study runs of the
largest budget if it has any, else its plain runs; `--budget 0` the plain runs, `--budget N` the runs `_bN`.
Rows whose eval_return is empty or not finite (a run trained without in-training evaluation, eval_episodes 0) are
skipped and counted; a run with no row left, or without the two columns (BCND logs rounds, not steps), is left out;
the command says so on stdout.

Statistics: at each step, over the seeds that evaluated at that step, the mean and stats.bootstrap's 95% percentile
interval of the mean (10,000 resamples, generator seed 0; no band with one seed; 3-5 seeds under-cover, see
docs/statistics.md).

Output: one PNG (--out), one curve per method; prints one line per method (runs, seeds, steps, the last step's mean).
Stops with one line on stderr when no method has a usable curve.
"""

import csv
import glob
import math
import os
import re
import sys
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
from oilca import cli  # noqa: E402
from oilca import contract  # noqa: E402
import report  # noqa: E402
from analysis import stats  # noqa: E402

JOB = re.compile(r"^(?P<method>.+?)(?:_b(?P<budget>\d+))?_s(?P<seed>\d+)$")  # runner's training job names


@dataclass
class Args:
    runs: str
    """the benchmark's run folder (runner --root's runs/<slug>), holding one folder per training job"""
    out: str
    """figure path (.png)"""
    methods: Tuple[str, ...] = ("bc_exp", "bc_all", "dwbc", "oilca")
    """the methods to draw, in legend order"""
    budget: Optional[int] = None
    """which runs of a method: unset, its budget-study runs (`<method>_b<steps>_s<seed>`, the largest budget) if it
    has any, else its plain runs (`<method>_s<seed>`); 0: the plain runs; N: the runs `<method>_bN_s<seed>`"""
    resamples: int = stats.N_RESAMPLES
    """bootstrap resamples per band point"""


def find_runs(runs: str, method: str, budget: Optional[int]):
    """(budget of the chosen runs or None for plain runs, {seed: progress.csv path}) of `method` under `runs`."""
    found = {}  # budget or None -> {seed: path}
    for path in sorted(glob.glob(os.path.join(runs, "*", "progress.csv"))):
        m = JOB.match(os.path.basename(os.path.dirname(path)))
        if m and m["method"] == method:
            found.setdefault(int(m["budget"]) if m["budget"] else None, {})[int(m["seed"])] = path
    if budget is None:
        pick = max((b for b in found if b is not None), default=None)
    else:
        pick = budget or None
    return pick, found.get(pick, {})


def read_curve(path: str):
    """({step: eval_return}, rows skipped for an empty or non-finite eval_return); None for the curve when the file
    has no `step` or no `eval_return` column."""
    with open(path, newline="") as f:
        reader = csv.DictReader(f)
        if not {"step", "eval_return"} <= set(reader.fieldnames or ()):
            return None, 0
        curve, skipped = {}, 0
        for row in reader:
            try:
                step, value = int(float(row["step"])), float(row["eval_return"])
            except (TypeError, ValueError):  # empty cell, or a row cut short by a killed run
                skipped += 1
                continue
            if not math.isfinite(value):
                skipped += 1
                continue
            curve[step] = value
    return curve, skipped


def curve_points(curves: dict, n_resamples: int = stats.N_RESAMPLES) -> list:
    """[(step, n seeds, mean, ci or None)] over the steps any seed evaluated, each over the seeds that did."""
    out = []
    for step in sorted({s for c in curves.values() for s in c}):
        vals = [c[step] for c in curves.values() if step in c]
        mean, ci = stats.bootstrap([vals], stats.mean, n_resamples)
        out.append((step, len(vals), mean, ci))
    return out


def main(args: Args) -> dict:
    """{method: {budget, runs, seeds, skipped_rows, left_out, points}}; writes the figure."""
    if not os.path.isdir(args.runs):
        raise ValueError(f"--runs {args.runs}: no such folder")
    info = {}
    for method in args.methods:
        budget, paths = find_runs(args.runs, method, args.budget)
        curves, skipped, left_out = {}, 0, []
        for seed, path in sorted(paths.items()):
            curve, n = read_curve(path)
            skipped += n
            if curve:
                curves[seed] = curve
            else:
                left_out.append(path)
        info[method] = {"budget": budget, "runs": sorted(paths.values()), "seeds": sorted(curves),
                        "skipped_rows": skipped, "left_out": left_out, "points": curve_points(curves, args.resamples)}
    if not any(v["points"] for v in info.values()):
        raise ValueError(f"--runs {args.runs}: no progress.csv with a finite eval_return for "
                         f"{', '.join(args.methods)} (job folders <method>_s<seed> or <method>_b<steps>_s<seed>)")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.5, 4.0))
    for k, (method, v) in enumerate(info.items()):
        if not v["points"]:
            continue
        steps = np.array([p[0] for p in v["points"]], dtype=float)
        means = np.array([p[2] for p in v["points"]])
        label = report.display(method) + (f" (run to {v['budget']:,} steps)" if v["budget"] else "") \
            + f", seeds {','.join(map(str, v['seeds']))}"
        ax.plot(steps, means, "-", marker="o" if len(steps) < 30 else None, ms=3, color=f"C{k % 10}", lw=1.3,
                label=label)
        band = [i for i, p in enumerate(v["points"]) if p[3]]
        if band:
            ax.fill_between(steps[band], [v["points"][i][3][0] for i in band], [v["points"][i][3][1] for i in band],
                            color=f"C{k % 10}", alpha=0.18, lw=0)
    ax.set_xlabel("policy gradient step")
    ax.set_ylabel(f"in-training evaluation return\n(mean over seeds; band: {stats.CI_LEVEL:.0%} bootstrap interval)",
                  fontsize=9)
    ax.set_title(f"{os.path.normpath(args.runs)}: learning curves", fontsize=10)
    ax.legend(fontsize=7, frameon=False)
    fig.tight_layout()
    contract.save_figure(args.out, fig)
    plt.close(fig)
    for method, v in info.items():
        which = f"_b{v['budget']}" if v["budget"] else "plain"
        if not v["runs"]:
            print(f"{method}: no runs ({which}) under {args.runs}; left out")
            continue
        last = f"; at step {v['points'][-1][0]}: {v['points'][-1][2]:.2f} over {v['points'][-1][1]} seeds" \
            if v["points"] else ""
        print(f"{method}: {len(v['runs'])} runs ({which}), seeds {','.join(map(str, v['seeds'])) or 'none'}, "
              f"{len(v['points'])} evaluation step{'' if len(v['points']) == 1 else 's'}{last}")
        if v["skipped_rows"]:
            print(f"  skipped {v['skipped_rows']} rows without a finite eval_return (trained without in-training "
                  f"evaluation?)")
        for path in v["left_out"]:
            print(f"  left out {path}: no step and eval_return columns, or no row with a finite eval_return")
    print(f"wrote {args.out}")
    return info


if __name__ == "__main__":
    cli.run(main, Args)
