"""Fig. 4, Fig. 5 and the budget figure of report.py, drawn from one env's seed scores (report.py reads the result
JSON and builds them).

Input: an `EnvResults` (scores: {(method, split): {seed: the run's mean episode return}}; splits: ((split, panel
title), ...); sizes: {(method, split): the result's augmented_de_over_du}; name: method id → readable name; family:
method id → its family, `oilca_r1.0` → `oilca`). Means and intervals are stats.py's (the bootstrap of the mean over
seeds).
- Fig. 4 (`fig4`): returns per method, one panel per split, each method X beside X+CA (hatched: the same learner on
  OILCA's augmented data; OILCA is DWBC+CA); bars the means, error bars the bootstrap intervals, dots the seeds; a
  reference line (or 0, the bars' base) joins the shared y-axis only while the methods still fill half of it
  (`fig4_limits`), else it is left off and named "off scale" in the legend.
- Fig. 5 (`fig5`): return against |augmented D_E| / |D_U| (log axis when every x > 0), one panel per split, one curve
  per family of FIG5_FAMILIES with two ratios or more (`fig5_curves`), DWBC as the shared no-augmentation point (open
  square), over the seeds every point of a curve has; BC-exp as a horizontal line.
- The budget figure (`budget`): for results of runner --budgets, one row per split; left, return against the
  training budget (log axis) per family with bootstrap bands; right, the paired gaps (report.BUDGET_GAPS: OILCA − DWBC,
  OILCA − BC-exp) against the budget with their bands and a zero line. It draws report.budget_study's numbers.
Each writes one PNG through contract.save_figure; matplotlib (Agg) is imported only when a figure is drawn.
"""

from collections import defaultdict
from dataclasses import dataclass
from typing import Callable

import numpy as np

from oilca import contract
from analysis import stats

# Fig. 4: each method X beside X+CA (the same learner on OILCA's augmented data; OILCA is DWBC+CA)
# (the newer baselines last, so a group's colour C<index> and every earlier figure stay as they were)
FIG4_GROUPS = (("bc_exp",), ("bc_all",), ("oril", "oril_ca"), ("bcnd", "bcnd_ca"), ("lobsdice",), ("dwbc", "oilca"),
               ("ilid", "ilid_ca"), ("iswbc", "iswbc_ca"))
FIG5_FAMILIES = ("oilca", "dwbc_expert_data", "oilca_oracle")  # Fig. 5: a curve per family with >= 2 ratios
MIN_METHOD_FRACTION = 0.5  # Fig. 4: a reference line (or 0) joins the y-axis only if the methods still fill half of it


@dataclass
class EnvResults:
    """One env's results as the figures read them (report.figure_input builds it from the result rows)."""
    scores: dict
    """{(method, split): {seed: seed score}}, reference_expert and reference_random included"""
    splits: tuple
    """((split, panel title), ...): the panels, in order"""
    sizes: dict
    """{(method, split): |augmented D_E| / |D_U|} of the results that record it (Fig. 5's x)"""
    name: Callable[[str], str]
    """the readable name of a method id (tick labels, legend)"""
    family: Callable[[str], str]
    """the family of a method id: `oilca_r1.0` → `oilca`, `oilca` → `oilca`"""


def _pyplot():
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def fig4_limits(spans: list, candidates: dict, min_fraction: float = MIN_METHOD_FRACTION):
    """y-limits for Fig. 4 and the candidates left off the axis. `spans`: every value the methods draw (means, CI
    ends, seed dots); `candidates`: {name: value} of reference lines (and 0, the bars' base). Nearest first, a
    candidate joins the axis if the methods still fill at least `min_fraction` of it. Returns ((lo, hi), off)."""
    lo, hi = float(np.min(spans)), float(np.max(spans))
    width = hi - lo
    off = []
    for name, v in sorted(candidates.items(), key=lambda kv: max(lo - kv[1], kv[1] - hi, 0.0)):
        nlo, nhi = min(lo, v), max(hi, v)
        if nhi - nlo == 0 or width / (nhi - nlo) >= min_fraction:
            lo, hi = nlo, nhi
        else:
            off.append(name)
    pad = 0.06 * (hi - lo) if hi > lo else max(abs(hi) * 0.1, 1.0)
    return (lo - pad, hi + pad), off


def fig4(data: EnvResults, path: str, n_resamples: int = stats.N_RESAMPLES) -> dict:
    """Write Fig. 4 for one env; returns {"ylim": (lo, hi), "off_scale": {split: [reference, ...]}}."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    plt = _pyplot()
    SPLITS = data.splits
    scores = data.scores
    groups = [[m for m in g if any((m, s) in scores for s, _ in SPLITS)] for g in FIG4_GROUPS]
    slots = []  # (x, method, group index, is +CA)
    x = 0.0
    for gi, g in enumerate(groups):
        if not g:
            continue
        for m in g:
            slots.append((x, m, gi, m != FIG4_GROUPS[gi][0]))
            x += 0.85
        x += 0.55
    bars = {}  # (method, split) -> (mean, ci or None, seed values)
    spans = []
    for split, _ in SPLITS:
        for _, m, _, _ in slots:
            vals = list(scores.get((m, split), {}).values())
            if vals:
                mean, ci = stats.bootstrap([vals], stats.mean, n_resamples)
                bars[(m, split)] = (mean, ci, vals)
                spans += vals + [mean] + (list(ci) if ci else [])
    refs = {split: {name: float(np.mean(list(scores[(f"reference_{name}", split)].values())))
                    for name in ("expert", "random") if (f"reference_{name}", split) in scores} for split, _ in SPLITS}
    if not spans:  # only reference policies: scale to them
        spans = [v for r in refs.values() for v in r.values()] or [0.0]
    # one y-axis for all panels (sharey): the references of every panel are candidates, plus 0 (the bars' base)
    candidates = {(split, name): v for split, r in refs.items() for name, v in r.items()}
    candidates[("", "zero")] = 0.0
    ylim, off = fig4_limits(spans, candidates)
    off_scale = {split: [name for s, name in off if s == split] for split, _ in SPLITS}
    base = min(max(0.0, ylim[0]), ylim[1])  # bars grow from 0, or from the axis edge on the side of 0

    fig, axes = plt.subplots(1, len(SPLITS), figsize=(max(5.0, 0.6 * len(slots) + 1.5) * len(SPLITS), 4.2),
                             sharey=True, squeeze=False)
    axes = axes[0]
    for ax, (split, title) in zip(axes, SPLITS):
        for x, m, gi, ca in slots:
            if (m, split) not in bars:
                continue
            mean, ci, vals = bars[(m, split)]
            color = f"C{gi}"
            ax.bar(x, mean - base, bottom=base, width=0.8, color=color, alpha=0.45 if ca else 0.9,
                   hatch="///" if ca else None, edgecolor=color, linewidth=1.0)
            if ci:
                ax.errorbar(x, mean, yerr=[[mean - ci[0]], [ci[1] - mean]], fmt="none", ecolor="k", capsize=4, lw=1.2)
            jitter = np.linspace(-0.18, 0.18, len(vals)) if len(vals) > 1 else np.zeros(1)
            ax.scatter(x + jitter, vals, color="k", s=9, zorder=3)
        handles = []
        for name, style in (("expert", "--"), ("random", ":")):
            if name not in refs[split]:
                continue
            v = refs[split][name]
            if name in off_scale[split]:
                handles.append(Line2D([], [], color="gray", ls=style, label=f"{name}: {v:.1f} (off scale)"))
            else:
                handles.append(ax.axhline(v, color="gray", ls=style, lw=1.2, label=f"{name}: {v:.1f}"))
        if any(ca for *_, ca in slots):
            handles.append(Patch(facecolor="white", edgecolor="gray", hatch="///",
                                 label="hatched: +CA, the same learner on OILCA's augmented data (OILCA = DWBC+CA)"))
        ax.set_xticks([s[0] for s in slots], [data.name(s[1]) for s in slots], rotation=35, ha="right", fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(*ylim)
        if ylim[0] < base < ylim[1]:
            ax.axhline(base, color="k", lw=0.6)
        if handles:
            ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.24), ncol=2,
                      frameon=False)
    axes[0].set_ylabel(f"return: mean over seeds\n(error bars: {stats.CI_LEVEL:.0%} bootstrap interval; dots: seeds)",
                       fontsize=9)
    fig.tight_layout()
    contract.save_figure(path, fig)
    plt.close(fig)
    return {"ylim": ylim, "off_scale": off_scale}


def fig5_curves(data: EnvResults) -> dict:
    """{split: [(family, [(x, method), ...] by x, seeds)]}: the FIG5_FAMILIES with two ratios or more in a split (x:
    each result's augmented_de_over_du; for OILCA, DWBC's point counts as one), led by DWBC's point when it has one,
    over the seeds every point has."""
    x_of, scores = data.sizes, data.scores
    out = defaultdict(list)
    for split, _ in data.splits:
        for fam in FIG5_FAMILIES:
            members = sorted((x, m) for (m, s), x in x_of.items() if s == split and data.family(m) == fam)
            xs = {x for x, _ in members}
            if fam == "oilca" and ("dwbc", split) in x_of:  # OILCA's curve starts at DWBC: it is OILCA at no augmentation
                xs.add(x_of[("dwbc", split)])
            if not members or len(xs) < 2:
                continue
            with_dwbc = ([(x_of[("dwbc", split)], "dwbc")] if ("dwbc", split) in x_of else []) + members
            for points in (with_dwbc, members):  # DWBC is dropped only if it shares no seed with the family
                seeds = sorted(set.intersection(*(set(scores[(m, split)]) for _, m in points)))
                if seeds:
                    out[split].append((fam, points, seeds))
                    break
    return dict(out)


def fig5(data: EnvResults, path: str, n_resamples: int = stats.N_RESAMPLES) -> bool:
    """Write Fig. 5 for one env when a family has two ratios or more on shared seeds; returns whether it did."""
    from matplotlib.lines import Line2D

    curves = fig5_curves(data)
    if not curves:
        return False
    plt = _pyplot()
    scores = data.scores
    splits = [(s, t) for s, t in data.splits if s in curves]
    log = min(x for c in curves.values() for _, pts, _ in c for x, _ in pts) > 0
    fig, axes = plt.subplots(1, len(splits), figsize=(5.5 * len(splits), 4.4), sharey=True, squeeze=False)
    for ax, (split, title) in zip(axes[0], splits):
        for k, (fam, points, seeds) in enumerate(curves[split]):
            color = f"C{FIG5_FAMILIES.index(fam)}"
            step = k - (len(curves[split]) - 1) / 2  # families side by side at the same x, for legibility
            xs = np.array([x for x, _ in points])
            xs = xs * 10 ** (0.015 * step) if log else xs + 0.012 * (xs.max() - xs.min()) * step
            boots = [stats.bootstrap([[scores[(m, split)][s] for s in seeds]], stats.mean, n_resamples)
                     for _, m in points]
            means = np.array([p for p, _ in boots])
            yerr = np.array([[p - c[0], c[1] - p] if c else [0.0, 0.0] for p, c in boots]).T
            is_dwbc = np.array([m == "dwbc" for _, m in points])
            ax.plot(xs, means, color=color, lw=1.2, label=f"{data.name(fam)} (seeds {','.join(map(str, seeds))})")
            ax.errorbar(xs[~is_dwbc], means[~is_dwbc], yerr=yerr[:, ~is_dwbc], fmt="o", color=color, capsize=3)
            if is_dwbc.any():
                ax.errorbar(xs[is_dwbc], means[is_dwbc], yerr=yerr[:, is_dwbc], fmt="s", mfc="white", color=color,
                            capsize=3, ms=7)
        bc = scores.get(("bc_exp", split), {})
        if bc:
            ax.axhline(np.mean(list(bc.values())), color="gray", ls="-.", lw=1.0,
                       label=f"BC-exp (seeds {','.join(map(str, sorted(bc)))})")
        if log:
            ax.set_xscale("log")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("|augmented D_E| / |D_U|" + (" (log scale)" if log else ""))
        handles, _ = ax.get_legend_handles_labels()
        handles.append(Line2D([], [], ls="none", marker="s", mfc="white", mec="k", label="DWBC (no augmentation)"))
        ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=1, frameon=False)
    axes[0][0].set_ylabel(f"return: mean over seeds\n(error bars: {stats.CI_LEVEL:.0%} bootstrap interval)", fontsize=9)
    fig.tight_layout()
    contract.save_figure(path, fig)
    plt.close(fig)
    return True


def budget(study: dict, splits: tuple, name: Callable[[str], str], path: str) -> dict:
    """Write the budget figure of one env: one row of panels per split that has budget results; left, return against
    the training budget (log x) per family, the mean over each budget's seeds with its bootstrap interval as a band;
    right, the paired gaps X − Y against the budget with their intervals and a zero line. `study` is
    report.budget_study's dict (its cells and gaps carry their intervals already). Returns {split: {"families": [...],
    "gaps": [(x, y), ...]}}."""
    rows = [(s, t) for s, t in splits if any(c["split"] == s for c in study["cells"])]
    plt = _pyplot()
    fig, axes = plt.subplots(len(rows), 2, figsize=(11.0, 3.8 * len(rows)), squeeze=False)
    families = list(dict.fromkeys(c["family"] for c in study["cells"]))  # one colour per family in every row
    drawn = {}

    def curve(ax, entries, color, label):
        entries = sorted(entries, key=lambda e: e["budget"])
        xs = np.array([e["budget"] for e in entries], dtype=float)
        means = np.array([e["mean"] for e in entries])
        ax.plot(xs, means, "o-", color=color, lw=1.3, ms=4, label=label)
        with_ci = [i for i, e in enumerate(entries) if e["ci"]]
        if with_ci:
            ax.fill_between(xs[with_ci], [entries[i]["ci"][0] for i in with_ci], [entries[i]["ci"][1] for i in with_ci],
                            color=color, alpha=0.18, lw=0)

    for (split, title), (left, right) in zip(rows, axes):
        fams = [f for f in families if any(c["family"] == f and c["split"] == split for c in study["cells"])]
        for f in fams:
            cs = [c for c in study["cells"] if c["family"] == f and c["split"] == split]
            seeds = max(c["n"] for c in cs)
            curve(left, cs, f"C{families.index(f) % 10}", f"{name(f)} (up to {seeds} seeds)")
        pairs = list(dict.fromkeys((e["x"], e["y"]) for e in study["gaps"] if e["split"] == split))
        for k, (x, y) in enumerate(pairs):
            curve(right, [e for e in study["gaps"] if e["split"] == split and (e["x"], e["y"]) == (x, y)],
                  f"C{(len(families) + k) % 10}", f"{name(x)} − {name(y)} (paired by seed)")
        right.axhline(0.0, color="k", lw=0.8)
        budgets = sorted({c["budget"] for c in study["cells"] if c["split"] == split})
        for ax, what in ((left, "return"), (right, "paired gap")):
            ax.set_xscale("log")
            ax.set_xticks(budgets, [f"{b:,}" for b in budgets], fontsize=8)  # the budgets themselves, no minor ticks
            ax.minorticks_off()
            ax.set_xlabel("training budget (policy gradient steps, log scale)")
            ax.set_ylabel(f"{what}: mean over seeds\n(band: {stats.CI_LEVEL:.0%} bootstrap interval)", fontsize=9)
            ax.set_title(f"{title}: {what}", fontsize=10)
            if ax.get_legend_handles_labels()[0]:
                ax.legend(fontsize=7, frameon=False)
        drawn[split] = {"families": fams, "gaps": pairs}
    fig.tight_layout()
    contract.save_figure(path, fig)
    plt.close(fig)
    return drawn
