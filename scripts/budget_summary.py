"""The budget study's verdict over data draws (docs/budget.md): one results folder per draw of the same benchmark.

    .venv/bin/python scripts/budget_summary.py --results results/toy_study results/toy_study_d1 results/toy_study_d2 \
        --out results/toy_study_summary.json --doc docs/budget.md

Reads each folder's result JSON as report.py does (a budget run's results are `<family>_b<steps>`; select_budget.py's
copies `<family>_sel`) and writes, per split:
  * the return of every family at every budget and at the budget chosen on held-out D_E episodes, over draws: the
    mean of the draws' seed means with a two-level bootstrap interval (draws, then seeds; analysis/stats.two_level);
    and per draw (mean [95% bootstrap over the draw's seeds]), the draws' tables side by side;
  * the paired gaps OILCA − DWBC, OILCA − BC-exp (plain OILCA: sampler at --steps; OILCA, matched sampler), paired by
    seed within each draw, over draws the same way, and per draw (mean ± s [95% bootstrap over seeds]);
  * the ordering of the families at the largest budget and at the chosen one, per draw and over draws (over draws:
    the families every draw has; one that some draw lacks is named and ranked in the draws that have it), and whether
    the paper's ordering OILCA > DWBC > BC-exp holds (both gaps' intervals above 0);
  * how often the chosen budget's return lies within the interval of the best fixed budget (per draw and family).
The chosen-budget cell of a family is its selection record's budget (budget_selection_<family>.json, one choice per
draw from fold policies of training seed 0) applied to every seed with a result there; the `<family>_sel` copies
select_budget.py wrote must agree with it (a family without a record keeps its copies). `--complete-seeds` keeps each
draw on the seeds every cell of the study's own families has; another family (ORIL, LobsDICE) joins a draw once it has
those seeds, and is named as left out until then. A draw or family missing some budget is reported with what it has ("—"
elsewhere); nothing is filled in.
`--doc FILE` replaces the block between `<!-- budget-summary: NAME -->` and `<!-- /budget-summary -->` (NAME the
--out file's name without .json) in FILE with the markdown; without markers the file is left alone (error).
"""

import glob
import json
import os
import sys
from dataclasses import dataclass
from typing import Dict, List, Optional, Tuple


sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import report  # noqa: E402
from analysis import stats  # noqa: E402
from oilca import cli, contract  # noqa: E402

FAMILIES = ("bc_exp", "bc_all", "dwbc", "oilca", "oilca_matched")
GAPS = (("oilca", "dwbc"), ("oilca", "bc_exp"), ("oilca_matched", "dwbc"), ("oilca_matched", "bc_exp"),
        ("oilca_matched", "oilca"), ("dwbc", "bc_exp"))


@dataclass
class Args:
    results: Tuple[str, ...] = ("results/toy_study",)
    """one results folder per data draw (the same benchmark, budgets and methods)"""
    out: str = "results/toy_study_summary.json"
    """output: the summary (JSON)"""
    doc: Optional[str] = None
    """a markdown file whose budget-summary block is replaced (see above)"""
    resamples: int = stats.N_RESAMPLES
    """bootstrap resamples per interval"""
    seeds: Optional[Tuple[int, ...]] = None
    """only these training seeds of every draw (default: every seed found); lets a draw's later seeds be committed as
    they land while the summary stays on the seeds every method has"""
    complete_seeds: bool = False
    """per draw, only the training seeds that every cell of the study's families (bc_exp, bc_all, dwbc, oilca,
    oilca_matched: every budget, chosen budget and split) has: a draw whose later seeds are landing stays on its
    finished seeds, and the summary names the seeds it left out; a seed missing from one cell leaves that draw's
    summary altogether. Another family (ORIL, LobsDICE at the largest budget) is read on the same seeds once every cell
    of it has them, and left out of that draw, named, until then"""
    again: Optional[str] = None
    """a summary JSON this script wrote: make it again from the folders, doc and resamples it records (what
    scripts/regenerate_tables.sh does); the other flags are then ignored"""


def draw_scores(folder: str, envs_seen: set, seeds: Optional[Tuple[int, ...]] = None
                ) -> Dict[Tuple[str, str], Dict[int, float]]:
    rows = report.load_results(folder)
    envs_seen.update(str(r.get("env")) for r in rows)
    scores = report.per_seed(rows)
    if seeds is None:
        return scores
    kept = {k: {s: v for s, v in by_seed.items() if s in seeds} for k, by_seed in scores.items()}
    return {k: v for k, v in kept.items() if v}


def chosen_budget(folder: str, draw: dict) -> dict:
    """The draw with each family's chosen-budget cell made from its selection record: select_budget.py's choice
    (budget_selection_<family>.json, one budget from the fold policies, whatever the training seed) applied to every
    seed that has a result at that budget. Its `<family>_sel` copies, where present, must agree seed by seed; a family
    with no selection record keeps the copies it has. So a seed that lands after the selection needs no new selection
    run (the fold policies it would have to remake cannot have changed: they do not depend on the seed)."""
    out = dict(draw)
    for path in sorted(glob.glob(os.path.join(folder, "budget_selection_*.json"))):
        try:
            with open(path) as f:
                rec = json.load(f)
            fam, choice = rec["of_method"], int(rec["choice"])
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise ValueError(f"{path}: not a selection record of select_budget.py ({type(e).__name__}: {e})") from None
        for split in {k[1] for k in draw}:
            fixed = draw.get((fam, split, choice))
            if fixed is None:
                continue
            for seed, v in draw.get((fam, split, "selected"), {}).items():
                if seed not in fixed or fixed[seed] != v:
                    raise ValueError(f"{folder}: {fam}_sel seed {seed} ({split}) is not {fam}_b{choice}'s result, the "
                                     f"budget {path} chose")
            out[(fam, split, "selected")] = dict(fixed)
    return out


def complete(draw: dict) -> Tuple[dict, List[int], List[int], Dict[str, List[int]]]:
    """The draw restricted to the seeds every cell of the study's own families (FAMILIES) has; those seeds, the ones
    found but left out, and the other families (e.g. oril_b…, run once at the largest budget) left out of the draw
    because some cell of theirs lacks one of those seeds ({family: the seeds it has}). Such a family lands job by job
    without moving the study's seeds; it joins the draw once it has all of them. A draw without any of FAMILIES is
    restricted to the seeds every cell has."""
    core = {k: v for k, v in draw.items() if k[0] in FAMILIES} or draw
    sets = [set(v) for v in core.values()]
    common = set.intersection(*sets) if sets else set()
    found = set.union(*sets) if sets else set()
    others = {}  # {family outside the core: the seeds every cell of it has}
    for key, v in draw.items():
        if key not in core:  # with no core family every cell is in the core
            others[key[0]] = others.get(key[0], set(v)) & set(v)
    partial = {f: sorted(v) for f, v in others.items() if not common <= v}
    kept = {k: {s: x for s, x in v.items() if s in common} for k, v in draw.items() if k[0] not in partial}
    return kept, sorted(common), sorted(found - common), partial


def seed_text(seeds) -> str:
    return ", ".join(map(str, seeds))


def seeds_line(kept: List[dict]) -> str:
    """The summary's first line under --complete-seeds: each draw's seeds, those it left out, and the families left
    out until they have every one of its seeds."""
    def one(k):
        left, partial = k["left_out"], k.get("families_left_out", {})
        return f"{k['draw']} {seed_text(k['seeds'])}" + (
            f" ({'seeds' if len(left) > 1 else 'seed'} {seed_text(left)} in some cells only, not read)" if left else ""
        ) + "".join(f" ({report.display(f)}: {'seed' if len(v) == 1 else 'seeds'} {seed_text(v) or 'none'} in every "
                    f"cell of it so far, not read "
                    f"until it has the draw's seeds)" for f, v in sorted(partial.items()))
    return "Per draw, the training seeds every cell of the draw has (`--complete-seeds`): " + "; ".join(
        map(one, kept)) + "."


def over(groups: list, n: int) -> dict:
    """The two-level cell over draws; one draw: its cell over seeds (n_groups 1)."""
    return stats.two_level(groups, n) if len(groups) > 1 else {**stats.cell(groups[0], n), "n_groups": 1}


def family_at(scores: dict) -> Dict[Tuple[str, str, object], Dict[int, float]]:
    """{(family, split, budget or "selected"): {seed: score}} of one draw."""
    out = {}
    for (m, split), v in scores.items():
        base, selected = report.split_selected(m)
        if selected:
            out[(base, split, "selected")] = v
            continue
        base, steps = report.split_budget(m)
        if steps is not None:
            out[(base, split, steps)] = v
    return out


def ordering(means: Dict[str, float]) -> str:
    return " > ".join(report.display(f) for f, _ in sorted(means.items(), key=lambda kv: -kv[1]))


def summarise(draws: List[dict], labels: List[str], n: int) -> dict:
    splits = [s for s, _ in report.ALL_SPLITS if any(k[1] == s for d in draws for k in d)]
    fams = [f for f in FAMILIES if any(k[0] == f for d in draws for k in d)]
    fams += sorted({k[0] for d in draws for k in d if k[0] not in fams}, key=report.order_key)  # e.g. oril_b…
    budgets = sorted({k[2] for d in draws for k in d if k[2] != "selected"})
    points = budgets + (["selected"] if any(k[2] == "selected" for d in draws for k in d) else [])
    out = {"draws": labels, "splits": splits, "families": fams, "budgets": budgets, "cells": [], "gaps": [],
           "orderings": [], "selection": []}
    for split in splits:
        for b in points:
            for f in fams:
                groups = [list(d[(f, split, b)].values()) for d in draws if (f, split, b) in d]
                if groups:
                    out["cells"].append({"split": split, "budget": b, "family": f,
                                         "per_draw": [stats.cell(list(d[(f, split, b)].values()), n)
                                                      if (f, split, b) in d else None for d in draws],
                                         **over(groups, n)})
            for x, y in GAPS:
                per_draw, groups = [], []
                for d in draws:
                    g = stats.paired_gap(d[(x, split, b)], d[(y, split, b)], n) \
                        if (x, split, b) in d and (y, split, b) in d else None
                    per_draw.append(g)
                    if g:
                        groups.append([d[(x, split, b)][s] - d[(y, split, b)][s] for s in g["seeds"]])
                if groups:
                    out["gaps"].append({"split": split, "budget": b, "x": x, "y": y, "per_draw": per_draw,
                                        **over(groups, n)})
        for b in ([budgets[-1]] if budgets else []) + (["selected"] if "selected" in points else []):
            cells = {c["family"]: c for c in out["cells"] if c["split"] == split and c["budget"] == b}
            every = {f: c for f, c in cells.items() if all(p is not None for p in c["per_draw"])}
            entry = {"split": split, "budget": b, "over_draws": ordering({f: c["mean"] for f, c in every.items()}),
                     "per_draw": [ordering({f: c["per_draw"][i]["mean"] for f, c in cells.items() if c["per_draw"][i]})
                                  for i in range(len(draws))]}
            gaps = {(g["x"], g["y"]): g for g in out["gaps"] if g["split"] == split and g["budget"] == b}
            above = lambda g: bool(g and g["ci"] is not None and g["ci"][0] > 0)  # noqa: E731
            for oilca in ("oilca", "oilca_matched"):  # the paper's ordering OILCA > DWBC > BC-exp, both gaps above 0
                need = [(oilca, "dwbc"), ("dwbc", "bc_exp")]
                if all(p in gaps for p in need):
                    entry[f"paper_order_{oilca}"] = {
                        "over_draws": all(above(gaps[p]) for p in need),
                        "per_draw": [None if any(gaps[p]["per_draw"][i] is None for p in need)  # not run there
                                     else all(above(gaps[p]["per_draw"][i]) for p in need) for i in range(len(draws))]}
            if len(every) < len(cells):  # a family on some draws only is ranked in those draws, not over draws
                entry["not_on_every_draw"] = sorted(set(cells) - set(every), key=report.order_key)
            out["orderings"].append(entry)
        for f in fams:  # is the chosen budget's return inside the best fixed budget's interval?
            for i, d in enumerate(draws):
                fixed = {b: d[(f, split, b)] for b in budgets if (f, split, b) in d}
                if (f, split, "selected") not in d or not fixed:
                    continue
                cells = {b: stats.cell(list(v.values()), n) for b, v in fixed.items()}
                best = max(cells, key=lambda b: cells[b]["mean"])
                chosen = stats.cell(list(d[(f, split, "selected")].values()), n)
                lo = cells[best]["ci"][0] if cells[best]["ci"] else cells[best]["mean"]
                out["selection"].append({"split": split, "family": f, "draw": labels[i], "best_budget": best,
                                         "best": cells[best], "chosen": chosen,
                                         "within": bool(chosen["mean"] >= lo)})
    return out


def text(c: Optional[dict]) -> str:
    if not c:
        return "—"
    return stats.cell_text(c) + (f" ({c['n_groups']}×)" if c.get("n_groups", 1) > 1 else "")


def markdown(s: dict) -> str:
    titles = dict(report.ALL_SPLITS)
    row = lambda b: f"{b:,}" if b != "selected" else "chosen on held-out D_E"  # noqa: E731
    lines = [f"Over {len(s['draws'])} data draw(s) ({', '.join(s['draws'])}): each cell is the mean of the draws' "
             f"seed means ± the std of the draw means [95% two-level bootstrap: draws, then seeds within a draw] "
             f"(N×: the number of draws it rests on; one draw: mean ± s [bootstrap over seeds]). "
             + (f"With {len(s['draws'])} draws the interval is coarse." if len(s["draws"]) > 1 else
                "With one draw every interval is over training seeds only: it says nothing of another data draw.")]
    for split in s["splits"]:
        cells = {(c["family"], c["budget"]): c for c in s["cells"] if c["split"] == split}
        points = [b for b in s["budgets"] + ["selected"] if any(k[1] == b for k in cells)]
        fams = [f for f in s["families"] if any(k[0] == f for k in cells)]
        lines += ["", f"**{titles[split]}**: return", "",
                  "| budget (steps) | " + " | ".join(report.display(f) for f in fams) + " |",
                  "|---" * (len(fams) + 1) + "|"]
        lines += [f"| {row(b)} | " + " | ".join(text(cells.get((f, b))) for f in fams) + " |" for b in points]
        if len(s["draws"]) > 1:
            lines += ["", f"**{titles[split]}**: return per draw (mean [95% bootstrap over the draw's seeds]; a cell "
                      f"with fewer seeds than its draw's most says how many)", "",
                      "| draw | budget (steps) | " + " | ".join(report.display(f) for f in fams) + " |",
                      "|---" * (len(fams) + 2) + "|"]
            for i, lab in enumerate(s["draws"]):
                mine = {k: c["per_draw"][i] for k, c in cells.items() if c["per_draw"][i]}
                most = max((c["n"] for c in mine.values()), default=0)
                short = lambda c: "—" if not c else f"{c['mean']:.2f}" + stats.ci_text(c["ci"]) + (  # noqa: E731
                    f" ({c['n']} seeds)" if c["n"] < most else "")
                lines += [f"| {lab} ({most} seeds) | {row(b)} | " + " | ".join(short(mine.get((f, b))) for f in fams)
                          + " |" for b in points]
        gaps = {(g["x"], g["y"], g["budget"]): g for g in s["gaps"] if g["split"] == split}
        pairs = [p for p in GAPS if any(k[:2] == p for k in gaps)]
        if pairs:
            lines += ["", f"**{titles[split]}**: paired gaps (by seed within each draw)", "",
                      "| budget (steps) | " + " | ".join(f"{report.display(x)} − {report.display(y)}" for x, y in pairs)
                      + " |", "|---" * (len(pairs) + 1) + "|"]
            lines += [f"| {row(b)} | " + " | ".join(text(gaps.get((x, y, b))) for x, y in pairs) + " |"
                      for b in points]
            if len(s["draws"]) > 1:
                lines += ["", "Per draw, " + "; ".join(
                    f"{report.display(x)} − {report.display(y)} at {row(b)}: " + ", ".join(
                        f"{lab} {text(g)}" for lab, g in zip(s["draws"], gaps[(x, y, b)]["per_draw"]))
                    for x, y in pairs[:2] for b in ([s["budgets"][-1]] if s["budgets"] else []) + ["selected"]
                    if (x, y, b) in gaps) + "."]
        for o in (o for o in s["orderings"] if o["split"] == split):
            verdicts = [f"{report.display(k[len('paper_order_'):])} > DWBC > BC-exp with both gaps' intervals above "
                        f"0: {'yes' if v['over_draws'] else 'no'} over draws, per draw "
                        + ", ".join(f"{lab} {'not run' if p is None else 'yes' if p else 'no'}"
                                    for lab, p in zip(s["draws"], v["per_draw"]))
                        for k, v in o.items() if k.startswith("paper_order_")]
            lines += ["", f"Ordering of the means at {row(o['budget'])} (read the intervals above before calling two "
                      f"methods apart): {o['over_draws']} (over draws"
                      + (f"; {', '.join(map(report.display, o['not_on_every_draw']))} not on every draw, ranked only "
                         f"in the draws that have it" if o.get("not_on_every_draw") else "") + "); per draw: "
                      + "; ".join(f"{lab}: {t or 'not run'}" for lab, t in zip(s["draws"], o["per_draw"]))
                      + (". " + ". ".join(verdicts) if verdicts else "") + "."]
        sel = [e for e in s["selection"] if e["split"] == split]
        if sel:
            lines += ["", f"The chosen budget against the best fixed budget ({sum(e['within'] for e in sel)} of "
                      f"{len(sel)} within the best budget's interval): " + "; ".join(
                          f"{report.display(e['family'])} {e['draw']}: best {e['best_budget']:,} "
                          f"{e['best']['mean']:.2f}, chosen {e['chosen']['mean']:.2f}"
                          + ("" if e["within"] else " (outside)") for e in sel) + "."]
    return "\n".join(lines)


@contract.together()  # its outputs are renamed into place together at the end: all of them or none
def main(args: Args) -> dict:
    if args.again:
        recorded = report.recorded_inputs(args.again)
        with open(args.again) as f:  # readable: recorded_inputs has just read it
            inputs = json.load(f)["inputs"]
        seeds = inputs.get("seeds")
        args = Args(**recorded, seeds=None if seeds is None else tuple(seeds),
                    complete_seeds=bool(inputs.get("complete_seeds")))
    if not args.results:
        raise ValueError("--results needs at least one folder")
    for folder in args.results:
        if not os.path.isdir(folder):
            raise ValueError(f"--results {folder}: no such folder")
    labels = [os.path.basename(os.path.normpath(f)) for f in args.results]
    envs_seen = set()
    if args.seeds is not None and not args.seeds:
        raise ValueError("--seeds: give at least one seed, or leave it out for every seed found")
    draws = [chosen_budget(f, family_at(draw_scores(f, envs_seen, args.seeds))) for f in args.results]
    kept_seeds = []
    if args.complete_seeds:
        for i, (folder, d) in enumerate(zip(args.results, draws)):
            draws[i], common, left, partial = complete(d)
            if d and not common:
                raise ValueError(f"--complete-seeds: no training seed is in every cell of {folder}")
            kept_seeds.append({"draw": labels[i], "seeds": common, "left_out": left,
                               **({"families_left_out": partial} if partial else {})})
    if len(envs_seen) > 1:
        raise ValueError(f"--results: the folders hold results of several envs ({', '.join(sorted(envs_seen))}); give "
                         f"the draws of one benchmark")
    if not any(draws):
        raise ValueError(f"--results: no budget results (<family>_b<steps>) in {' '.join(args.results)}")
    s = summarise(draws, labels, args.resamples)
    md = markdown(s)
    if args.seeds is not None:
        md = f"Training seeds {seed_text(args.seeds)} of every draw only (`--seeds`).\n\n" + md
    if args.complete_seeds:
        md = seeds_line(kept_seeds) + "\n\n" + md
        s["seeds_per_draw"] = kept_seeds
    if args.doc:
        report.replace_block(args.doc, "budget-summary", os.path.splitext(os.path.basename(args.out))[0], md)
    inputs = {"results": list(args.results), "doc": args.doc, "resamples": args.resamples}
    if args.seeds is not None:
        inputs["seeds"] = list(args.seeds)
    if args.complete_seeds:
        inputs["complete_seeds"] = True
    contract.save_json(args.out, {**s, "markdown": md, "inputs": inputs})
    print(md)
    return s


if __name__ == "__main__":
    cli.run(main, Args)
