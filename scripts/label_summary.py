"""The label-source study's tables (docs/labels.md): one results folder per data draw of one benchmark.

    .venv/bin/python scripts/label_summary.py --results results/toy_labels results/toy_labels_d1 results/toy_labels_d2 \
        --out results/toy_labels_summary.json --doc docs/labels.md

Reads each folder's result JSON as report.py does and writes, per split:
  * the return of BC-exp, DWBC, the best baseline, OILCA (BC-exp labels), OILCA with oracle labels and every label
    source present (runner --methods labels): over draws, the mean of the draws' seed means with a two-level bootstrap
    interval (draws, then seeds; analysis/stats.two_level); with one folder, mean ± s [bootstrap over seeds];
  * per source, the share of the oracle's gain it recovers, (R_source − R_OILCA) / (R_oracle − R_OILCA), with R the
    mean over draws of the seed means, and its 95% interval from the same two-level bootstrap applied to the paired
    per-seed differences (seed s of a draw: the same data and training seed in the three runs). Where the oracle's own
    gain R_oracle − R_OILCA has an interval that includes 0 the share is not defined and is reported as "—";
  * the probability of improvement P(source > OILCA) and P(source > best baseline) (analysis/stats, strata = draws),
    and the paired gap source − best baseline; the same two for OILCA with oracle labels, the ceiling of every label
    source (where the oracle's own gap to the best baseline lies below 0, even exact labels on OILCA's rows stay below it);
  * the best baseline: of BC-exp, BC-all, DWBC, ORIL, LobsDICE, BCND, ISW-BC and ILID (those present), the highest mean
    return over draws on that split (chosen by the evaluation returns themselves: a conservative reference for every
    source, never a training choice).
Within a draw every row averages the same training seeds: those every method of that draw has (a draw whose later
seeds have landed for some methods only is read on the rest, and the block says which seeds it left out).
Also, from each folder's fidelity_labels.json (runner job fidelity_labels, seed 0's rows, toy only): each source's label
error against the toy's controller, median and 90th percentile; and, from label_selection_*.json and
sampler_selection_best.json, what the held-out rule chose and on which D_E episodes.
`--doc FILE` replaces the block between `<!-- label-summary: NAME -->` and `<!-- /label-summary -->` (NAME the --out
file's name without .json); `--again FILE` makes a summary again from the inputs it records.
"""

import json
import os
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import report  # noqa: E402
from analysis import stats  # noqa: E402
from oilca import cli, contract  # noqa: E402

BASELINES = ("bc_exp", "bc_all", "dwbc", "oril", "lobsdice", "bcnd", "iswbc", "ilid")
SOURCES = ("oilca_ens", "oilca_self", "oilca_sup", "oilca_iswbc", "oilca_ilid", "oilca_best", "oilca_bc_all",
           "oilca_dwbc", "oilca_selected")  # the chosen variants first; then every oilca_ens_q<q>, oilca_round<r> and
# oilca_sup_q<q> present
SELECTIONS = ("label_selection_oilca_ens.json", "label_selection_oilca_self.json", "label_selection_oilca_sup.json",
              "sampler_selection_best.json")


@dataclass
class Args:
    results: Tuple[str, ...] = ("results/toy_labels",)
    """one results folder per data draw (the same benchmark and methods)"""
    out: str = "results/toy_labels_summary.json"
    """output: the summary (JSON)"""
    doc: Optional[str] = None
    """a markdown file whose label-summary block is replaced (see above)"""
    resamples: int = stats.N_RESAMPLES
    """bootstrap resamples per interval"""
    again: Optional[str] = None
    """a summary JSON this script wrote: make it again from the folders, doc and resamples it records"""


def over(groups: list, n: int) -> dict:
    return stats.two_level(groups, n) if len(groups) > 1 else {**stats.cell(groups[0], n), "n_groups": 1}


def share(draws: List[Tuple[np.ndarray, np.ndarray]], n: int) -> dict:
    """The share of the oracle's gain, sum-of-means ratio mean_g mean(d_src) / mean_g mean(d_oracle), with d the
    paired per-seed differences to OILCA in each draw g, and its two-level bootstrap interval (draws, then seeds, the
    same resampled seeds for numerator and denominator). `defined` is False where the oracle's gain interval
    includes 0 (then no share is given)."""
    num = np.mean([a.mean() for a, _ in draws])
    den = np.mean([b.mean() for _, b in draws])
    rng = np.random.default_rng(stats.BOOT_SEED)
    G = len(draws)
    nums, dens = np.zeros(n), np.zeros(n)
    for i in range(n):
        picks = rng.integers(0, G, G) if G > 1 else [0]
        a_s, b_s = [], []
        for g in picks:
            a, b = draws[g]
            idx = rng.integers(0, len(a), len(a))
            a_s.append(a[idx].mean())
            b_s.append(b[idx].mean())
        nums[i], dens[i] = np.mean(a_s), np.mean(b_s)
    lo_d, hi_d = np.percentile(dens, [2.5, 97.5])
    out = {"oracle_gain": float(den), "oracle_gain_ci": [float(lo_d), float(hi_d)], "gain": float(num),
           "defined": bool(lo_d > 0 or hi_d < 0), "share": None, "ci": None}
    if out["defined"]:
        r = nums / dens
        out["share"] = float(num / den)
        out["ci"] = [float(x) for x in np.percentile(r, [2.5, 97.5])]
    return out


def selected_as_oilca(folder: str, scores: dict) -> dict:
    """`scores` with OILCA's results standing in for the offline-selected sampler's (`oilca_selected`) where the folder
    has none and its sampler_selection.json chose BC-exp: OILCA's own sampler is BC-exp's policy, so the selected run
    trains on the same augmented data with the same seed (on results/toy, where the rule chose BC-exp and both ran,
    their per-episode returns are equal for every seed and split). Without this a draw where the rule chose BC-exp
    would drop out of the selected sampler's row, and with it, a draw where the choice may have been a poor one."""
    try:
        with open(os.path.join(folder, "sampler_selection.json")) as f:
            choice = json.load(f).get("choice")
    except (OSError, ValueError):
        return scores
    if choice != "bc_exp":
        return scores
    out = dict(scores)
    for (m, split), v in scores.items():
        if m == "oilca" and ("oilca_selected", split) not in scores:
            out[("oilca_selected", split)] = v
    return out


def common_seeds(scores: dict) -> Tuple[dict, List[int], Dict[int, int]]:
    """A draw's `scores` ({(method, split): {seed: value}}) on the training seeds every (method, split) has, those
    seeds, and {left-out seed: how many (method, split) cells have it}: a draw whose later seeds have landed for some
    methods only (a study under way) is read on the seeds all its methods share, so every row of a draw averages the
    same seeds."""
    scores = {k: v for k, v in scores.items() if read(k[0])}
    if not scores:
        return scores, [], {}
    kept = set.intersection(*(set(v) for v in scores.values()))
    every = sorted(set().union(*(set(v) for v in scores.values())))
    left = {s: sum(s in v for v in scores.values()) for s in every if s not in kept}
    return {k: {s: x for s, x in v.items() if s in kept} for k, v in scores.items()}, sorted(kept), left


def read(method: str) -> bool:
    """Whether the summary reads this method's results: a baseline, OILCA, its oracle labels or a label source (not
    the references, the fig. 5 ratios or other variants a folder may hold)."""
    return method in BASELINES + ("oilca", "oilca_oracle") + SOURCES or bool(report.LABEL_VARIANT.match(method))


def summarise(folders: List[str], n: int) -> dict:
    labels = [os.path.basename(os.path.normpath(f)) for f in folders]
    envs_seen, draws, seeds, left_out = set(), [], {}, {}
    for f, label in zip(folders, labels):
        rows = report.load_results(f)
        envs_seen.update(str(r.get("env")) for r in rows)
        scores, seeds[label], left = common_seeds(selected_as_oilca(f, report.per_seed(rows)))
        if not seeds[label]:
            raise ValueError(f"--results {f}: no training seed that every method there has")
        draws.append(scores)
        if left:
            left_out[label] = {"seeds": sorted(left), "cells": len(scores), "cells_with": [left[s] for s in sorted(left)]}
    if len(envs_seen) > 1:
        raise ValueError(f"--results: the folders hold results of several envs ({', '.join(sorted(envs_seen))}); give "
                         f"the draws of one benchmark")
    methods = {m for d in draws for m, _ in d}
    if "oilca" not in methods:
        raise ValueError(f"--results: no OILCA results in {' '.join(folders)}")
    variants = sorted((m for m in methods if report.LABEL_VARIANT.match(m)), key=lambda m: (m[:9], m))
    sources = [m for m in SOURCES if m in methods] + variants
    splits = [s for s, _ in report.ALL_SPLITS if any(k[1] == s for d in draws for k in d)]
    out = {"draws": labels, "seeds": seeds, "left_out": left_out, "splits": splits, "sources": sources, "cells": [],
           "best_baseline": {}, "rows": []}

    def groups(m, split):
        return [list(d[(m, split)].values()) for d in draws if (m, split) in d]

    def paired(x, y, split, seeds_of=None) -> Dict[int, np.ndarray]:
        """{draw index: x − y per seed} over the seeds both have (and `seeds_of`'s, where given)."""
        res = {}
        for i, d in enumerate(draws):
            if (x, split) in d and (y, split) in d and (seeds_of is None or i in seeds_of):
                seeds = set(d[(x, split)]) & set(d[(y, split)])
                seeds = sorted(seeds & set(seeds_of[i]) if seeds_of else seeds)
                if seeds:
                    res[i] = np.array([d[(x, split)][s] - d[(y, split)][s] for s in seeds])
        return res

    def seeds_in(*ms, split):
        return {i: sorted(set.intersection(*(set(d[(m, split)]) for m in ms))) for i, d in enumerate(draws)
                if all((m, split) in d for m in ms)}

    def poi_vs(x, y, split) -> Optional[dict]:
        """P(x > y) over the draws both ran (with its CI), or None."""
        pairs = [(list(d[(x, split)].values()), list(d[(y, split)].values())) for d in draws
                 if (x, split) in d and (y, split) in d]
        if not pairs:
            return None
        p, ci = stats.probability_of_improvement(pairs, n)
        return {"p": p, "ci": list(ci) if ci else None, "vs": y}

    def vs_best(x, best, split) -> dict:
        """x against the row's best baseline: P(x > best) where any draw has both, and the paired gap x − best."""
        if not best:
            return {"minus_best": None}
        poi, gap = poi_vs(x, best, split), paired(x, best, split)
        return ({"poi_best": poi} if poi else {}) | {"minus_best": over([list(v) for v in gap.values()], n) if gap
                                                      else None}

    for split in splits:
        has = [d for d in draws if ("oilca", split) in d]  # a baseline counts if it ran on every draw OILCA ran on
        base = {m: over(groups(m, split), n) for m in BASELINES if all((m, split) in d for d in has)}
        best = max(base, key=lambda m: base[m]["mean"]) if base else None
        out["best_baseline"][split] = best
        shown = [m for m in ("bc_exp", "dwbc") if m in base] + ([best] if best not in ("bc_exp", "dwbc", None) else [])
        shown += ["oilca"] + (["oilca_oracle"] if ("oilca_oracle", split) in {k for d in draws for k in d} else [])
        for m in shown + sources:
            g = groups(m, split)
            if not g:
                continue
            row = {"split": split, "method": m, "return": over(g, n), "per_draw": [
                stats.cell(list(d[(m, split)].values()), n) if (m, split) in d else None for d in draws]}
            if m in sources:
                gap = paired(m, "oilca", split)
                row["minus_oilca"] = over([list(x) for x in gap.values()], n) if gap else None
                trio = seeds_in(m, "oilca", "oilca_oracle", split=split)  # the seeds all three ran, per draw
                src, ora = paired(m, "oilca", split, trio), paired("oilca_oracle", "oilca", split, trio)
                if src:
                    row["oracle_share"] = share([(src[i], ora[i]) for i in src], n)
                poi = poi_vs(m, "oilca", split)
                if poi:
                    row["poi_oilca"] = poi
                row.update(vs_best(m, best, split))
            elif m == "oilca_oracle" and best:  # the ceiling: the most any label source could reach
                row.update(vs_best(m, best, split))
            out["rows"].append(row)
    out["fidelity"], out["selections"] = [], []
    for lab, f in zip(labels, folders):
        path = os.path.join(f, "fidelity_labels.json")
        if os.path.isfile(path):
            with open(path) as fh:
                fid = json.load(fh)
            out["fidelity"].append({"draw": lab, "rows": [{"name": r["name"], "median": r["label_error"]["median"],
                                                           "p90": r["label_error"]["p90"], "n": r["label_error"]["n"]}
                                                          for r in fid["rows"]]})
        for name in SELECTIONS:
            path = os.path.join(f, name)
            if os.path.isfile(path):
                with open(path) as fh:
                    rec = json.load(fh)
                out["selections"].append({"draw": lab, "file": name, "choice": rec["choice"],
                                          "scores": {c: v["mean"] for c, v in rec["scores"].items()},
                                          "heldout_episodes": rec.get("heldout_episodes"), "cv_seed": rec.get("cv_seed")})
    return out


def text(c: Optional[dict], digits: int = 2) -> str:
    if not c:
        return "—"
    return stats.cell_text(c, digits) + (f" ({c['n_groups']}×)" if c.get("n_groups", 1) > 1 else "")


def share_text(s: Optional[dict]) -> str:
    if not s:
        return "—"
    if not s["defined"]:
        return f"— (oracle gain {s['oracle_gain']:+.2f}{stats.ci_text(s['oracle_gain_ci'])} includes 0)"
    return f"{s['share']:.2f}{stats.ci_text(s['ci'])}"


def poi_text(p: Optional[dict]) -> str:
    return "—" if not p else f"{p['p']:.2f}{stats.ci_text(p['ci'])}"


def markdown(s: dict) -> str:
    titles = dict(report.ALL_SPLITS)
    lines = [f"Over {len(s['draws'])} data draw(s) ({', '.join(s['draws'])}). Returns: the mean of the draws' seed means "
             f"± the std of the draw means [95% two-level bootstrap: draws, then seeds] (N×: draws it rests on; one "
             f"draw: mean ± s [bootstrap over seeds]). Share of the oracle's gain: (R_source − R_OILCA) / "
             f"(R_oracle − R_OILCA) over the paired per-seed differences, its interval from the same bootstrap. "
             f"P(X > Y): probability of improvement, strata = draws."]
    for label, lo in s.get("left_out", {}).items():
        lines[0] += (f" {label}: training seeds {', '.join(map(str, s['seeds'][label]))} only; seed(s) "
                     f"{', '.join(map(str, lo['seeds']))} left out, which only {', '.join(map(str, lo['cells_with']))} "
                     f"of its {lo['cells']} method-split cells have so far.")
    verdicts = []
    for split in s["splits"]:
        best = s["best_baseline"][split]
        rows = [r for r in s["rows"] if r["split"] == split]
        lines += ["", f"**{titles[split]}** (best baseline on this split: {report.display(best) if best else '—'})", "",
                  "| method | return | − OILCA (paired) | share of the oracle's gain | P(> OILCA) | "
                  f"P(> {report.display(best) if best else 'best baseline'}) | − {report.display(best) if best else 'best'}"
                  " (paired) |", "|---|---|---|---|---|---|---|"]
        for r in rows:
            if "minus_best" in r and "minus_oilca" not in r:  # the oracle: its gap to the best baseline only
                lines.append(f"| {report.display(r['method'])} | {text(r['return'])} | | | | "
                             f"{poi_text(r.get('poi_best'))} | {text(r.get('minus_best'))} |")
                continue
            if "minus_oilca" not in r:
                lines.append(f"| {report.display(r['method'])} | {text(r['return'])} | | | | | |")
                continue
            lines.append(f"| {report.display(r['method'])} | {text(r['return'])} | {text(r['minus_oilca'])} | "
                         f"{share_text(r.get('oracle_share'))} | {poi_text(r.get('poi_oilca'))} | "
                         f"{poi_text(r.get('poi_best'))} | {text(r.get('minus_best'))} |")
        above = [r for r in rows if r["method"] in s["sources"] and r.get("minus_best")
                 and r["minus_best"].get("ci") and r["minus_best"]["ci"][0] > 0]
        ceiling = next((r["minus_best"] for r in rows if r["method"] == "oilca_oracle" and r.get("minus_best")), None)
        verdicts.append(f"{titles[split]}: " + (
            "sources above the best baseline with the interval of the paired gap above 0: "
            + ", ".join(f"{report.display(r['method'])} {text(r['minus_best'])}" for r in above) if above else
            "no source is above the best baseline with the interval of the paired gap above 0")
            + ("" if not ceiling else f" (the ceiling, OILCA with oracle labels − {report.display(best)}: "
               f"{text(ceiling)}, " + ("above 0" if ceiling.get("ci") and ceiling["ci"][0] > 0 else
                                        "below 0: even exact labels on these rows stay below the best baseline"
                                        if ceiling.get("ci") and ceiling["ci"][1] < 0 else "an interval that holds 0")
               + ")"))
    lines += ["", "Against the best baseline: " + "; ".join(verdicts) + "."]
    if s["fidelity"]:
        names = [r["name"] for r in s["fidelity"][0]["rows"]]
        lines += ["", "Label error against the toy's controller on the augmented states (seed 0's rows of each draw; "
                  "mean |label − expert action| per action dim, actions in [−1, 1]), median / 90th percentile:", "",
                  "| rows | " + " | ".join(f["draw"] for f in s["fidelity"]) + " |",
                  "|---" * (len(s["fidelity"]) + 1) + "|"]
        for name in names:
            cells = []
            for f in s["fidelity"]:
                r = next((x for x in f["rows"] if x["name"] == name), None)
                cells.append(f"{r['median']:.3f} / {r['p90']:.3f}" if r else "—")
            label = report.display(name) if name in report.DISPLAY or report.LABEL_VARIANT.match(name) else name
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    if s["selections"]:
        lines += ["", "Chosen on held-out D_E episodes (select_sampler.py's rule, fold policies of training seed 0; no "
                  "evaluation seed chose anything):", ""]
        for e in s["selections"]:
            lines.append(f"- {e['draw']}, {e['file']}: **{e['choice']}** (held-out action error "
                         + ", ".join(f"{c} {v:.4f}" for c, v in e["scores"].items())
                         + f"; held-out D_E episodes per fold {e['heldout_episodes']}, cv seed {e['cv_seed']})")
    return "\n".join(lines)


@contract.together()  # its outputs are renamed into place together at the end: all of them or none
def main(args: Args) -> dict:
    if args.again:
        args = Args(**report.recorded_inputs(args.again))
    if not args.results:
        raise ValueError("--results needs at least one folder")
    for folder in args.results:
        if not os.path.isdir(folder):
            raise ValueError(f"--results {folder}: no such folder")
    if args.resamples < 100:
        raise ValueError(f"--resamples {args.resamples}: at least 100")
    s = summarise(list(args.results), args.resamples)
    md = markdown(s)
    if args.doc:
        report.replace_block(args.doc, "label-summary", os.path.splitext(os.path.basename(args.out))[0], md)
    contract.save_json(args.out, {**s, "markdown": md, "inputs": {"results": list(args.results), "doc": args.doc,
                                                                  "resamples": args.resamples}})
    print(md)
    return s


if __name__ == "__main__":
    cli.run(main, Args)
