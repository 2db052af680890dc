"""The project's findings, generated from the committed result JSON alone (nothing is trained or evaluated).

    .venv/bin/python scripts/findings.py            # fill the findings blocks of README.md and docs/findings.md
    .venv/bin/python scripts/findings.py --print    # print every block, write nothing

Fills each block between `<!-- findings: NAME -->` and `<!-- /findings -->` of README.md and docs/findings.md with the
generated text of NAME (the blocks are listed in BLOCKS). What each block computes:
  * `table`: one row per benchmark family. "The paper's order" is OILCA > DWBC > BC-exp: a row shows it when the
    95% intervals of the paired gaps OILCA − DWBC and DWBC − BC-exp (over the training seeds both have, the same
    data and seed) both lie above 0 (for the CPU budget study, the paired gaps of its summary, over draws). OILCA's rank
    and the best column are by mean return among the paper's seven columns (BC-exp, BC-all, ORIL, BCND, LobsDICE,
    DWBC, OILCA) that ran. The evidence is data draws × training seeds × policy gradient steps, read from the results.
  * `toy`, `tables`, `budget`, `labels`, `oracle`, `copy`, `newer`: the numbers the findings page cites, each a
    generated sentence.
Also fills every inline number of README.md and docs/*.md, `<!--n: FOLDER METHOD SPLIT [success] [mean] [digits=K]-->`
… `<!--/n-->`: one cell (or, with METHOD `x-y`, the paired gap x − y) of a results folder, so that prose can cite a
number that is generated (see `snippet`); and every `<!-- include: FILE -->` … `<!-- /include -->` block with the
committed markdown table FILE that a script wrote (fidelity.py's, mcc_table.py's).
Inputs: results/toy, results/toy_paper, the Table 5-size task folders results/{dmc,cw}_<task>_t5 (report.paper_rows),
results/toy_study_summary.json, results/dmc_{cartpole-swingup,walker-walk}_t5study_summary.json (where committed),
results/toy_budget_gpu, results/dmc_cartpole-swingup_t5_gpu, results/toy_labels_summary.json,
results/toy_main_labels_summary.json, and the control folders results/toy, results/dmc_cartpole-swingup,
results/cw_pushing. `report.py --check-docs` checks that every block is up to date.
"""

import glob
import json
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Dict, Optional, Tuple

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # the repo root

import report  # noqa: E402
from analysis import stats  # noqa: E402
from oilca import cli, contract  # noqa: E402

SEVEN = ("bc_exp", "bc_all", "oril", "bcnd", "lobsdice", "dwbc", "oilca")  # the paper's columns (Tables 1, 2, 6)
PATTERN = "results/{benchmark}_{task}_t5"
DOCS = ("README.md", "docs/findings.md")
CONTROL_SPLITS = (("results/toy", "train"), ("results/toy", "heldout"), ("results/dmc_cartpole-swingup", "train"),
                  ("results/cw_pushing", "A"), ("results/cw_pushing", "B"))  # the folders that ran the controls
SPLIT_WORDS = {"train": "in distribution", "heldout": "held-out c", "A": "space A", "B": "space B"}


@dataclass
class Args:
    print: bool = False
    """print every block and write nothing"""
    root: str = "."
    """the repository root whose results/ and docs are read (and whose docs are filled)"""
    pages: Tuple[str, ...] = ()
    """fill only these pages (paths relative to --root; not given: README.md and every docs/*.md)"""


def name(m: str) -> str:
    return report.display(m)


def ci(c: dict) -> str:
    return f"{c['mean']:.2f} [{c['ci'][0]:.2f}, {c['ci'][1]:.2f}]" if c.get("ci") else f"{c['mean']:.2f}"


def k(n: int) -> str:
    return f"{n:,}"


# ------------------------------------------------------------------------------------------------- one folder
def folder_rows(folder: str, empty_ok: bool = False) -> list:
    """The result rows of a results folder (relative to ROOT), loaded once per run (report.load_results: an error for
    a folder without results unless empty_ok)."""
    if folder not in _ROWS:
        rows = report.load_results(os.path.join(ROOT, folder), empty_ok=empty_ok)
        if not rows:
            return rows
        _ROWS[folder] = rows
    return _ROWS[folder]


def paper_table(number: int) -> list:
    """report.paper_rows of paper table `number` over ROOT's task folders, computed once per run."""
    if number not in _PAPER:
        _PAPER[number] = report.paper_rows(number, os.path.join(ROOT, PATTERN), "{folder}-c{c}")
    return _PAPER[number]


def folder_cells(folder: str, split: str, methods=SEVEN) -> Dict[str, dict]:
    """{method: stats.cell of its per-seed mean returns + seeds, steps} of the `methods` present in `folder`."""
    rows = folder_rows(folder)
    scores = seed_scores(folder)["return"]
    out = {}
    for m in methods:
        v = scores.get((m, split))
        if v:
            steps = sorted({r.get("train_args", {}).get("total_steps") for r in rows
                            if (r["method"], r["split"]) == (m, split)} - {None})
            out[m] = {**stats.cell(list(v.values())), "seeds": v, "steps": steps}
    return out


def above(x: dict, y: dict) -> bool:
    """x above y: the 95% interval of the paired gap x − y over the seeds both have (`seeds`: {seed: score}, the same
    data and training seed) lies above 0."""
    gap = stats.paired_gap(x["seeds"], y["seeds"])
    return bool(gap and gap["ci"] and gap["ci"][0] > 0)


def order_verdict(cells: Dict[str, dict]) -> str:
    """`yes` (OILCA > DWBC > BC-exp, both paired gaps' intervals above 0), `means only` (means in that order, an
    interval holding 0), `no`, or `—` (a column missing)."""
    if not all(m in cells for m in ("oilca", "dwbc", "bc_exp")):
        return "—"
    o, d, b = cells["oilca"], cells["dwbc"], cells["bc_exp"]
    if above(o, d) and above(d, b):
        return "yes"
    return "means only" if o["mean"] > d["mean"] > b["mean"] else "no"


def ranks(cells: Dict[str, dict]) -> Dict[str, int]:
    return stats.ranks({m: round(c["mean"], 9) for m, c in cells.items()})


def evidence(draws: int, seeds, steps) -> str:
    seeds = sorted(set(seeds))
    s = f"{seeds[0]}" if len(seeds) == 1 else f"{seeds[0]}–{seeds[-1]}"
    st = sorted(set(steps))
    b = k(st[0]) if len(st) == 1 else f"{k(st[0])}–{k(st[-1])}"
    return f"{draws} × {s} × {b}"


# ------------------------------------------------------------------------------------------------- table rows
def folder_row(label: str, folder: str, split: str) -> dict:
    cells = folder_cells(folder, split)
    r = ranks(cells)
    best = min(r, key=lambda m: (r[m], m))
    return {"family": label, "order": order_verdict(cells), "oilca_rank": f"{r['oilca']} of {len(cells)}",
            "best": name(best), "evidence": evidence(1, [c["n"] for c in cells.values()],
                                                     [s for c in cells.values() for s in c["steps"]])}


def partly_run(row: dict) -> bool:
    """A paper-table row still running: some of its columns run and some not, or every column run but with unequal
    seed counts (its last seeds still to come)."""
    seeds = [c["ours"]["n"] if c["ours"] else 0 for c in row["cells"].values()]
    return any(seeds) and len(set(seeds)) > 1


def paper_table_row(label: str, number: int) -> dict:
    """The findings row of paper table `number` over the task rows where every column ran with its seeds; rows still
    running (`partly_run`) are left out and named in the evidence."""
    rows = paper_table(number)
    verdicts, oilca_ranks, best, seeds, steps, n_run, partial = Counter(), [], Counter(), [], [], 0, []
    for row in rows:
        cells = {m: {**c["ours"], "steps": c["steps"], "seeds": c["scores"]} for m, c in row["cells"].items()
                 if c["ours"]}
        if partly_run(row):  # a row still running would rank a few columns (or seeds) as if they were all
            partial.append(row["task"])
            continue
        if not cells:
            continue
        n_run += 1
        verdicts[order_verdict(cells)] += 1
        r = ranks(cells)
        if "oilca" in r:
            oilca_ranks.append(r["oilca"])
        for m in r:
            if r[m] == 1:
                best[name(m)] += 1
        seeds += [c["n"] for c in cells.values()]
        steps += [s for c in cells.values() for s in c["steps"]]
    order = f"{verdicts['yes']} of {n_run} rows" + (f" (means only: {verdicts['means only']})"
                                                    if verdicts["means only"] else "")
    first = sum(x == 1 for x in oilca_ranks)
    rank = f"median {np.median(oilca_ranks):g} of 7; first in {first} of {len(oilca_ranks)}"
    tops = ", ".join(f"{m} {n}" for m, n in sorted(best.items(), key=lambda kv: (-kv[1], kv[0])))
    left = f" ({', '.join(partial)} partly run, left out)" if partial else ""
    return {"family": label, "order": order, "oilca_rank": rank, "best": f"rows led: {tops}",
            "evidence": f"{n_run} tasks{left}; " + evidence(1, seeds, steps)}


def budget_summary_row(label: str, path: str) -> dict:
    s = load_json(path)
    top = max(s["budgets"])
    o = next(o for o in s["orderings"] if o["split"] == "train" and o["budget"] == top)
    cells = [c for c in s["cells"] if c["split"] == "train" and c["budget"] == top]
    seeds = [p["n"] for c in cells for p in c.get("per_draw") or [] if p]  # each draw's seeds (draws may differ)
    best = o["over_draws"].split(" > ")
    rank = best.index("OILCA") + 1
    return {"family": label, "order": "yes" if o["paper_order_oilca"]["over_draws"] else "no",
            "oilca_rank": f"{rank} of {len(best)} columns", "best": best[0],
            "evidence": evidence(len(s["draws"]), seeds, [top])}


def budget_folder_cells(folder: str, split: str) -> tuple:
    """({family: cell} at the folder's largest budget, that budget)."""
    rows, scores = folder_rows(folder), seed_scores(folder)["return"]
    study = report.budget_study(scores, report.present_splits(rows), stats.N_RESAMPLES)
    top = max(c["budget"] for c in study["cells"])
    return {c["family"]: {**c, "steps": [top], "seeds": scores[(c["method"], split)]} for c in study["cells"]
            if c["split"] == split and c["budget"] == top}, top, study


def budget_folder_row(label: str, folder: str, split: str) -> dict:
    cells, top, _ = budget_folder_cells(folder, split)
    r = ranks(cells)
    best = min(r, key=lambda m: (r[m], m))
    return {"family": label, "order": order_verdict(cells), "oilca_rank": f"{r['oilca']} of {len(cells)} columns",
            "best": name(best), "evidence": evidence(1, [c["n"] for c in cells.values()], [top])}


# The DeepMind Control rows of the CPU budget study (scripts/budget_study.sh), each once its summary is committed.
BUDGET_DMC = (("cartpole-swingup", "results/dmc_cartpole-swingup_t5study_summary.json"),
              ("walker-walk", "results/dmc_walker-walk_t5study_summary.json"))
# the label study's rows on other benchmarks (scripts/label_study.sh with BENCH=...), counted where their summary exists
LABEL_ROWS = (("cartpole-swingup", "results/dmc_cartpole-swingup_labels_summary.json"),
              ("walker-walk", "results/dmc_walker-walk_labels_summary.json"),
              ("CausalWorld pushing", "results/cw_pushing_labels_summary.json"),
              ("CausalWorld picking", "results/cw_picking_labels_summary.json"))


def committed(rows: tuple) -> list:
    """The (task, summary path) rows of BUDGET_DMC or LABEL_ROWS whose summary is committed."""
    return [(task, path) for task, path in rows if os.path.isfile(os.path.join(ROOT, path))]


def summary_splits(path: str) -> list:
    """The splits a summary JSON under ROOT reports (toy: train and heldout, of which the table shows train;
    DeepMind Control: train; CausalWorld: A and B)."""
    splits = load_json(path)["splits"]
    return ["train"] if "train" in splits else list(splits)


def draws_words(path: str) -> str:
    """'one data draw' or 'N data draws': how many draws a summary JSON under ROOT reads."""
    n = len(load_json(path)["draws"])
    return "one data draw" if n == 1 else f"{n} data draws"


def labels_row(label: str, path: str, split: str = "train") -> dict:
    """The findings row of a label study's summary on one split (CausalWorld: space A or B)."""
    s = load_json(path)
    best_base = s["best_baseline"][split]
    n_draws = len(s["draws"])
    full = [r for r in s["rows"] if r["split"] == split and r["return"].get("n_groups", 1) == n_draws]
    above = [r for r in full if r["method"] in s["sources"] and r.get("minus_best") and r["minus_best"].get("ci")
             and r["minus_best"]["ci"][0] > 0]  # the oracle's row (the ceiling) is not a label source
    ret = {r["method"]: r["return"] for r in full}  # a row on fewer draws than the summary's is left out
    n_seeds = [p["n"] for r in full for p in r.get("per_draw") or [] if p]  # each draw's seeds (draws may differ)
    steps = []
    for folder in s["inputs"]["results"]:
        steps += folder_cells(folder, split, ("oilca",)).get("oilca", {}).get("steps", [])
    baselines = ("bc_exp", "bc_all", "dwbc", "oril", "lobsdice", "bcnd", "iswbc", "ilid")  # label_summary's
    bases = [m for m in baselines if all((m, split) in seed_scores(f)["return"] for f in s["inputs"]["results"])]
    among = f"{name(best_base)}, the best of {', '.join(name(m) for m in bases)}"
    verdict = (f"above {among} (paired gap's interval above 0): " + "; ".join(name(a["method"]) for a in above)) \
        if above else f"no label source above {among}"
    r = stats.ranks({m: round(v["mean"], 9) for m, v in ret.items() if not m.startswith("oilca_oracle")})
    best = min(r, key=lambda m: (r[m], m))
    return {"family": label, "order": verdict, "oilca_rank": f"{r['oilca']} of {len(r)} (oracle left out)",
            "best": name(best), "evidence": evidence(len(s["draws"]), n_seeds, steps)}


def table_block() -> str:
    rows = [
        folder_row("Toy, fast (main job), in distribution", "results/toy", "train"),
        folder_row("Toy, the paper's size (four columns)", "results/toy_paper", "train"),
        paper_table_row("DeepMind Control, Table 1", 1),
        paper_table_row("CausalWorld space A, Table 6", 6),
        paper_table_row("CausalWorld space B, Table 2", 2),
        budget_summary_row("Budget study, toy, CPU (largest budget run)", "results/toy_study_summary.json"),
    ] + [budget_summary_row(f"Budget study, {task} (Table 5 size), CPU (largest budget run)", path)
         for task, path in committed(BUDGET_DMC)] + [
        budget_folder_row("Budget, toy, GPU, 200k steps", "results/toy_budget_gpu", "train"),
        budget_folder_row("Budget, cartpole-swingup (Table 5 size), GPU", "results/dmc_cartpole-swingup_t5_gpu",
                          "train"),
        labels_row("Label sources, toy (3 draws of the main data)", "results/toy_main_labels_summary.json"),
        labels_row("Label sources, toy (label-study data, 3 draws)", "results/toy_labels_summary.json"),
    ] + [labels_row(f"Label sources, {task} (Table 5 size, {draws_words(path)})"
                    + ("" if split == "train" else f", {SPLIT_WORDS[split]}"), path, split)
         for task, path in committed(LABEL_ROWS) for split in summary_splits(path)]
    lines = ["| benchmark | the paper's order OILCA > DWBC > BC-exp | OILCA's rank | best column | evidence: draws × "
             "seeds × steps |", "|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['family']} | {r['order']} | {r['oilca_rank']} | {r['best']} | {r['evidence']} |")
    return ("\n".join(lines) + "\n\nGenerated by `scripts/findings.py` from the committed result JSON. Order: `yes` when "
            "the 95% intervals of the paired gaps OILCA − DWBC and DWBC − BC-exp (bootstrap over the training seeds "
            "both have; for the CPU budget study, over data draws, then seeds) both lie above 0; `means only` when the "
            "means are in that order but an interval holds 0. Ranks and the best column are by mean return among the paper's seven "
            "columns that ran (the label rows: among BC-exp, DWBC, the best baseline, OILCA, OILCA with oracle labels "
            "and each source, those run on every draw of the row). CausalWorld and DeepMind Control rows count tasks; rows without an expert are "
            "included (footnoted in [docs/tables.md](docs/tables.md)).")


# ------------------------------------------------------------------------------------------------- sentences
def toy_block() -> str:
    out = []
    for split in ("train", "heldout"):
        cells = folder_cells("results/toy", split)
        r = ranks(cells)
        order = sorted(cells, key=lambda m: r[m])
        out.append(f"{SPLIT_WORDS[split].capitalize()}: " + " > ".join(f"{name(m)} {ci(cells[m])}" for m in order))
    return ("Toy main job (results/toy, one data draw, 5 seeds, 5,000 steps), mean return [95% bootstrap interval], "
            "best first. " + "; ".join(out) + ".")


def gap(folder: str, x: str, y: str, split: str) -> Optional[dict]:
    s = seed_scores(folder)["return"]
    if (x, split) not in s or (y, split) not in s:
        return None
    return stats.paired_gap(s[(x, split)], s[(y, split)])


def oracle_block() -> str:
    out = []
    for folder, split in CONTROL_SPLITS:
        cells = folder_cells(folder, split,
                             ("oilca", "oilca_oracle", "oilca_bc_all", "bc_exp", "bc_all", "dwbc"))
        g = gap(folder, "oilca_oracle", "oilca", split)
        base = max((m for m in ("bc_exp", "bc_all", "dwbc") if m in cells), key=lambda m: cells[m]["mean"])
        gb = gap(folder, "oilca_oracle", base, split)
        out.append(f"{folder} ({SPLIT_WORDS[split]}, {cells['oilca']['n']} seeds): OILCA {ci(cells['oilca'])}, "
                   f"with oracle labels {ci(cells['oilca_oracle'])} (paired gain {ci(g)}); the best of BC-exp, "
                   f"BC-all and DWBC there is {name(base)} {ci(cells[base])}, oracle-labelled OILCA − it "
                   f"{ci(gb)}")
    return "- " + "\n- ".join(out)


def tables_block() -> str:
    out = []
    for number, label in ((1, "Table 1 (DeepMind Control)"), (6, "Table 6 (CausalWorld space A)"),
                          (2, "Table 2 (CausalWorld space B)")):
        rows = paper_table(number)
        c, paper_above, partial = dict.fromkeys(report.PAPER_VERDICTS, 0), 0, []
        for r in rows:  # one bootstrap per row: the paper's verdict counts every row, ours only the fully run ones
            ours, theirs = report.oilca_vs_dwbc(r)
            paper_above += theirs == "above"
            if partly_run(r):  # a row still running (its OILCA may have few seeds) is left out of our counts
                partial.append(r["task"])
            else:
                c[ours] += 1
        n = c["above"] + c["tie"] + c["below"]
        left = f"; {', '.join(partial)} partly run, left out" if partial else ""
        out.append(f"{label}: OILCA against DWBC (paired gap's 95% interval) above on {c['above']}, tied on {c['tie']}, "
                   f"below on {c['below']} of the {n} tasks run with intervals ({len(rows)} in the table{left}); in "
                   f"the paper above on {paper_above} of {len(rows)} (mean ± s)")
    return "- " + "\n- ".join(out)


def budget_summary_sentences(label: str, path: str) -> list:
    s = load_json(path)
    top = max(s["budgets"])
    gaps = {(g["x"], g["y"], g["split"]): g for g in s["gaps"] if g["budget"] == top}
    out = [f"CPU budget study ({label}, {len(s['draws'])} data draw(s), its largest budget so far {k(top)} steps; "
           f"paired gaps, in distribution): OILCA − DWBC {ci(gaps[('oilca', 'dwbc', 'train')])}, OILCA − BC-exp "
           f"{ci(gaps[('oilca', 'bc_exp', 'train')])}"]
    if ("oilca_matched", "dwbc", "train") in gaps:  # the authors' procedure: the sampler trained as long as the policy
        out[-1] += (f"; with the sampler matched to the budget: OILCA − DWBC "
                    f"{ci(gaps[('oilca_matched', 'dwbc', 'train')])}, OILCA − BC-exp "
                    f"{ci(gaps[('oilca_matched', 'bc_exp', 'train')])}, matched − 5k sampler "
                    f"{ci(gaps[('oilca_matched', 'oilca', 'train')])}")
    sel = {(g["x"], g["y"]): g for g in s["gaps"] if g["budget"] == "selected" and g["split"] == "train"}
    if ("oilca", "dwbc") in sel:
        n_sel = max(g.get("n_groups", 1) for g in sel.values())
        out.append(f"{label}, the same at the budget chosen on held-out D_E ({n_sel} data draw(s) so far): OILCA − DWBC "
                   f"{ci(sel[('oilca', 'dwbc')])}" + (f", OILCA − BC-exp {ci(sel[('oilca', 'bc_exp')])}"
                                                        if ("oilca", "bc_exp") in sel else ""))
    return out


def budget_block() -> str:
    out = budget_summary_sentences("toy", "results/toy_study_summary.json")
    for task, path in committed(BUDGET_DMC):
        out += budget_summary_sentences(f"{task} at Table 5's size", path)
    for folder, label in (("results/toy_budget_gpu", "toy, GPU"),
                          ("results/dmc_cartpole-swingup_t5_gpu", "cartpole-swingup at Table 5's size, GPU")):
        cells, top, study = budget_folder_cells(folder, "train")
        g = {(e["x"], e["y"]): e for e in study["gaps"] if e["split"] == "train" and e["budget"] == top}
        out.append(f"{label} ({k(top)} steps, one data draw, {cells['oilca']['n']} seeds): BC-exp "
                   f"{ci(cells['bc_exp'])}, DWBC {ci(cells['dwbc'])}, OILCA {ci(cells['oilca'])}; paired OILCA − "
                   f"DWBC {ci(g[('oilca', 'dwbc')])}, OILCA − BC-exp {ci(g[('oilca', 'bc_exp')])}")
    return "- " + "\n- ".join(out)


def labels_block() -> str:
    out = []
    for path in ("results/toy_main_labels_summary.json", "results/toy_labels_summary.json") + tuple(
            p for _, p in committed(LABEL_ROWS)):
        s = load_json(path)
        for split in s["splits"]:  # DeepMind Control rows have the training split only
            base = s["best_baseline"][split]
            for r in s["rows"]:
                if r["split"] == split and r.get("minus_best"):
                    share = r.get("oracle_share") or {}
                    sh = (f", share of the oracle's gain {share['share']:.2f}" if share.get("defined") else "")
                    out.append(f"{path} ({len(s['draws'])} draw(s), {SPLIT_WORDS[split]}): {name(r['method'])} "
                               f"{ci(r['return'])} ({r['return']['n']} runs over "
                               f"{r['return'].get('n_groups', 1)} draw(s)); − {name(base)} {ci(r['minus_best'])}{sh}")
    return "- " + "\n- ".join(out)


def copy_block() -> str:
    out = []
    for folder, split in CONTROL_SPLITS:
        g = gap(folder, "oilca", "oilca_copy", split)
        verdict = ("the iVAE's state better" if g["ci"][0] > 0 else
                   "the partner's own s′ better" if g["ci"][1] < 0 else "no difference the interval can tell")
        out.append(f"{folder} ({SPLIT_WORDS[split]}, {g['n']} seeds): OILCA − copy control {ci(g)}: {verdict}")
    return "- " + "\n- ".join(out)


def newer_block() -> str:
    """Where ILID or ISW-BC ran at Table 5's size: the best of every column run and the two newer methods' ranks."""
    methods = SEVEN + ("ilid", "iswbc", "oril_ca", "bcnd_ca", "ilid_ca", "iswbc_ca")
    out = []
    for folder in sorted(os.listdir(os.path.join(ROOT, "results"))):
        if not folder.endswith("_t5") or not os.path.isdir(os.path.join(ROOT, "results", folder)):
            continue
        rows = folder_rows(os.path.join("results", folder), empty_ok=True)
        for split in [s for s, _ in report.present_splits(rows) if s in ("train", "B")]:
            cells = folder_cells(os.path.join("results", folder), split, methods)
            if "ilid" not in cells or "iswbc" not in cells:
                continue
            r = ranks(cells)
            best = min(r, key=lambda m: (r[m], m))
            out.append(f"{folder} ({SPLIT_WORDS[split]}): best {name(best)} {ci(cells[best])}; ISW-BC rank "
                       f"{r['iswbc']}, ILID rank {r['ilid']} of {len(cells)}")
    return "- " + "\n- ".join(out)


BLOCKS = {"table": table_block, "toy": toy_block, "oracle": oracle_block, "tables": tables_block,
          "budget": budget_block, "labels": labels_block, "copy": copy_block, "newer": newer_block}
ROOT = "."


# ------------------------------------------------------------------------------------------------- inline numbers
INCLUDE = re.compile(r"^\s*<!--\s*include:\s*(\S+)\s*-->\s*$", re.M)
SNIPPET = re.compile(r"<!--\s*n:\s*([^>]*?)\s*-->(.*?)<!--\s*/n\s*-->")
_FOLDERS: Dict[str, dict] = {}  # per results folder: report.per_seed of its returns and success
_ROWS: Dict[str, list] = {}  # per results folder: its result rows
_PAPER: Dict[int, list] = {}  # per paper table: report.paper_rows
_JSON: Dict[str, dict] = {}  # per summary JSON under ROOT: its contents (a row reads its summary several times)


def load_json(path: str) -> dict:
    if path not in _JSON:
        with open(os.path.join(ROOT, path)) as f:
            _JSON[path] = json.load(f)
    return _JSON[path]


def seed_scores(folder: str) -> dict:
    """report.per_seed of a results folder, returns and success, loaded once."""
    if folder not in _FOLDERS:
        rows = folder_rows(folder)
        _FOLDERS[folder] = {"return": report.per_seed(rows), "success": report.per_seed(rows, "success")}
    return _FOLDERS[folder]


def snippet(spec: str, where: str) -> str:
    """The text of one inline number `<!--n: FOLDER METHOD SPLIT [success] [mean] [digits=K]-->`: the per-seed mean
    return (or success) of METHOD on SPLIT in the results folder FOLDER, over its training seeds, as `mean [lo, hi]`
    (95% percentile bootstrap, report.py's cell; `mean`: the mean alone). METHOD `x-y` (two method ids joined by a
    hyphen-minus between ids that exist) is the paired gap x − y over the seeds both have. `digits=K`: K decimals
    (default 2). `seeds=A-B` (or `seeds=A,B,…`): those training seeds only, e.g. the seeds a row's summary reads while
    its later seeds land."""
    words = spec.split()
    if len(words) < 3:
        raise ValueError(f"{where}: inline number '{spec}': needs FOLDER METHOD SPLIT")
    folder, method, split, opts = words[0], words[1], words[2], words[3:]
    metric = "success" if "success" in opts else "return"
    digits = next((int(o.split("=", 1)[1]) for o in opts if o.startswith("digits=")), 2)
    bad = [o for o in opts if o not in ("success", "mean") and not o.startswith(("digits=", "seeds="))]
    if bad:
        raise ValueError(f"{where}: inline number '{spec}': unknown option {bad[0]}")
    scores = seed_scores(folder)[metric]
    only = next((o.split("=", 1)[1] for o in opts if o.startswith("seeds=")), None)
    if only is not None:
        try:
            a, _, b = only.partition("-")
            keep = set(range(int(a), int(b) + 1)) if b else {int(x) for x in only.split(",")}
        except ValueError:
            raise ValueError(f"{where}: inline number '{spec}': seeds={only} is not A-B or A,B,…") from None
        scores = {k: {sd: v for sd, v in by.items() if sd in keep} for k, by in scores.items()}
        scores = {k: by for k, by in scores.items() if by}
    if (method, split) in scores:
        c = stats.cell(list(scores[(method, split)].values()))
    else:
        pair = [(method[:i], method[i + 1:]) for i in range(len(method)) if method[i] == "-"
                and (method[:i], split) in scores and (method[i + 1:], split) in scores]
        if not pair:
            raise ValueError(f"{where}: inline number '{spec}': no {metric} of {method} on split {split} in {folder}")
        x, y = pair[0]
        c = stats.paired_gap(scores[(x, split)], scores[(y, split)])
    f = lambda v: f"{v:.{digits}f}".replace("-", "−")  # noqa: E731
    if "mean" in opts or not c.get("ci"):
        return f(c["mean"])
    return f"{f(c['mean'])} [{f(c['ci'][0])}, {f(c['ci'][1])}]"


def fill_snippets(text: str, path: str) -> str:
    """`text` with every inline number's text regenerated, and every `<!-- include: FILE -->` … `<!-- /include -->`
    block replaced by the committed markdown file FILE (a table a script wrote into results/, e.g. fidelity.py's)."""
    text = SNIPPET.sub(lambda m: f"<!--n: {m.group(1)}-->{snippet(m.group(1), path)}<!--/n-->", text)
    for target in dict.fromkeys(INCLUDE.findall(text)):
        try:
            with open(os.path.join(ROOT, target), encoding="utf-8") as f:
                md = f.read()
        except OSError as e:
            raise ValueError(f"{path}: include {target}: cannot be read ({e.strerror})") from None
        opening = f"<!-- include: {target} -->"
        text = report.replace_blocks(path, text, lambda line, o=opening: line.strip() == o,
                                     lambda line: line.strip() == "<!-- /include -->", md, opening,
                                     "<!-- /include -->")
    return text


def fill(text: str, path: str, made: Dict[str, str]) -> str:
    """`text` with every findings block replaced by its generated markdown (README's links point into docs/)."""
    for block, md in made.items():
        opening = f"<!-- findings: {block} -->"
        if opening not in text:
            continue
        if path.endswith("findings.md"):
            md = md.replace("](docs/", "](")
        text = report.replace_blocks(path, text, lambda line, o=opening: line.strip() == o,
                                     lambda line: line.strip() == "<!-- /findings -->", md, opening,
                                     "<!-- /findings -->")
    return text


def main(args: Args) -> Dict[str, str]:
    global ROOT
    ROOT = args.root
    for cache in (_ROWS, _FOLDERS, _PAPER, _JSON):
        cache.clear()  # they hold the previous root's results
    made = {b: f() for b, f in BLOCKS.items()} if args.print or not args.pages \
        or set(map(os.path.normpath, args.pages)) & set(DOCS) else {}
    if args.print:
        for b, md in made.items():
            print(f"<!-- findings: {b} -->\n{md}\n")
        return made
    new = {}
    pages = list(args.pages) or list(DOCS) + sorted(os.path.relpath(p, ROOT)
                                                    for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))
    for doc in dict.fromkeys(os.path.normpath(p) for p in pages):
        if not os.path.isfile(os.path.join(ROOT, doc)):
            raise ValueError(f"--pages {doc}: no such file under {ROOT}")
        path = os.path.join(ROOT, doc)
        with open(path, encoding="utf-8") as f:
            old = f.read()
        text = fill_snippets(fill(old, doc, made) if doc in DOCS else old, doc)
        if text != old:
            new[path] = text
    with contract.together():
        for path, text in new.items():
            contract.save_text(path, text)
    print("filled the findings blocks and inline numbers of " + (", ".join(new) or "no page (all up to date)"))
    return made


if __name__ == "__main__":
    cli.run(main, Args)
