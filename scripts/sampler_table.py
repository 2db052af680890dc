"""The sampler study across data draws and benchmarks: which policy should label OILCA's counterfactual rows?

Input, per result folder (results/toy = draw 0, results/toy_d1, results/toy_d2, results/dmc_<task>, ...):
- summary.json, written by `python report.py --results <folder>` (cells: env, split, method, metric, n, seeds, mean,
  ci; gaps: env, split, x, y, n, seeds, mean, ci; resamples, level, bootstrap_seed). This script never recomputes a
  cell: a folder without summary.json, or whose summary.json is older than its newest result JSON or does not hold
  exactly the (env, method, split, seed) runs of its result JSON, is refused with one line naming the report.py
  command to run.
- sampler_selection.json (optional), written by select_sampler.py (candidates, choice, scores {candidate: {mean}}).
- the per-run result JSON, only to check summary.json's freshness and, where summary.json lacks one of the three
  sampler gaps below, to compute it with report.py's own functions (report.per_seed, stats.cell).

Output (--out, written atomically; also printed; --doc puts it between `<!-- sampler-table -->` and
`<!-- /sampler-table -->` in each doc), in markdown:
1. a header naming where the numbers come from;
2. the sampler table: one row per (folder, env, split), one column per method (BC-exp, BC-all, DWBC, OILCA with BC-exp,
   BC-all, DWBC, oracle and offline-selected labels, the expert reference); a cell is summary.json's `mean [lo, hi]`,
   with the seed count where it differs from the folder's usual count; bold: the best learned method of the row;
3. selection vs rollouts: the offline rule's choice (its mean score and the others'), the candidate whose OILCA run
   has the best mean return on each split, whether they agree, and "the rule picked the rollout-best sampler in k of
   n (folder, split) cases";
4. OILCA − its sampler: the paired gaps oilca − bc_exp, oilca_bc_all − bc_all, oilca_dwbc − dwbc per folder and split.

Usage: python scripts/sampler_table.py --results results/toy results/toy_d1 results/toy_d2 \
           [--out results/sampler_study.md] [--doc docs/sampler.md]
Bad input (a missing or stale summary.json, malformed JSON, a doc without the markers, an output that cannot be
written or would overwrite an input) stops with one line on stderr before anything is written.
"""
import json
import os
import re
import sys
from collections import Counter
from dataclasses import dataclass
from typing import Tuple


ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from oilca import cli  # noqa: E402
from oilca import contract  # noqa: E402
import report  # noqa: E402  (a module: its CLI runs only under its main guard)
from analysis import stats  # noqa: E402

# (method, column title) of the sampler table, in order; the last is the reference, never bold
COLUMNS = (("bc_exp", "BC-exp"), ("bc_all", "BC-all"), ("dwbc", "DWBC"), ("oilca", "OILCA (BC-exp labels)"),
           ("oilca_bc_all", "OILCA (BC-all labels)"), ("oilca_dwbc", "OILCA (DWBC labels)"),
           ("oilca_oracle", "OILCA (oracle labels)"), ("oilca_selected", "OILCA (selected)"),
           ("reference_expert", "expert reference"))
OILCA_OF = {"bc_exp": "oilca", "bc_all": "oilca_bc_all", "dwbc": "oilca_dwbc"}  # sampler candidate → its OILCA run
GAPS = tuple((oilca, sampler) for sampler, oilca in OILCA_OF.items())  # OILCA − the policy that labels it
SUMMARY, SELECTION = "summary.json", "sampler_selection.json"
OPEN, CLOSE = "<!-- sampler-table -->", "<!-- /sampler-table -->"
DIGITS = 2
MISSING = "—"


class TableError(ValueError):
    """Bad input; the message is one line naming the folder or file."""


@dataclass
class Args:
    results: Tuple[str, ...] = ("results/toy", "results/toy_d1", "results/toy_d2")
    """result folders (a data draw or a benchmark each), each with report.py's summary.json"""
    out: str = "results/sampler_study.md"
    """the markdown file written"""
    doc: Tuple[str, ...] = ()
    """markdown docs whose text between `<!-- sampler-table -->` and `<!-- /sampler-table -->` is replaced"""


# ------------------------------------------------------------------------------------------------- input
def read_json(path: str) -> dict:
    try:
        with open(path) as f:
            obj = json.load(f)
    except json.JSONDecodeError as e:
        raise TableError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
    except (OSError, UnicodeDecodeError) as e:
        raise TableError(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
    if not isinstance(obj, dict):
        raise TableError(f"{path}: not a JSON object")
    return obj


def load_folder(folder: str, files: list) -> dict:
    """{folder, summary, rows (the per-run results), selection or None}; refuses a missing or stale summary.json."""
    files_here = []
    rows = report.load_results(folder, files_here)
    files += files_here
    path, hint = os.path.join(folder, SUMMARY), f"run `python report.py --results {folder}`"
    if not os.path.isfile(path):
        raise TableError(f"{folder}: no {SUMMARY}; {hint} first")
    newest = max(files_here, key=os.path.getmtime)
    if os.path.getmtime(path) < os.path.getmtime(newest):
        raise TableError(f"{path} is older than {os.path.basename(newest)}; {hint} to refresh it")
    summary = read_json(path)
    try:
        have = {(c["env"], c["method"], c["split"], s) for c in summary["cells"] if c["metric"] == "return"
                for s in c["seeds"]}
        if not all(isinstance(c["mean"], (int, float)) and isinstance(c["n"], int) and "ci" in c
                   for c in summary["cells"]):
            raise TypeError("a cell's mean, n or ci")
    except (KeyError, TypeError) as e:
        raise TableError(f"{path}: not report.py's summary.json (bad or missing {e}); {hint}") from None
    runs = {(r.get("env") or report.NO_ENV, r["method"], r["split"], r["seed"]) for r in rows}
    if have != runs:
        odd = sorted(runs ^ have, key=str)[0]
        why = "a result file without a cell" if odd in runs else "a cell without a result file"
        raise TableError(f"{path} does not match the result JSON ({odd[1]} seed {odd[3]} {odd[2]}: {why}); {hint} "
                         f"to refresh it")
    files.append(path)
    sel_path, selection = os.path.join(folder, SELECTION), None
    if os.path.exists(sel_path):
        selection = read_json(sel_path)
        try:
            ok = (selection["choice"] in selection["candidates"]
                  and all(isinstance(selection["scores"][c]["mean"], (int, float)) for c in selection["candidates"]))
        except (KeyError, TypeError):
            ok = False
        if not ok:
            raise TableError(f"{sel_path}: not select_sampler.py's record (candidates, choice, scores.<c>.mean)")
        files.append(sel_path)
    return {"folder": folder, "summary": summary, "rows": rows, "selection": selection}


def blocks(data: dict):
    """[(env, split, {method: cell})] of one folder, envs sorted, splits in report.py's order."""
    cells = [c for c in data["summary"]["cells"] if c["metric"] == "return"]
    out = []
    for env in sorted({c["env"] for c in cells}):
        mine = [c for c in cells if c["env"] == env]
        for split, _ in report.present_splits(mine):
            out.append((env, split, {c["method"]: c for c in mine if c["split"] == split}))
    return out


def usual_n(data: dict) -> int:
    """The folder's usual seed count: the commonest n over its learned methods' cells (ties: the largest)."""
    ns = Counter(c["n"] for c in data["summary"]["cells"] if c["metric"] == "return"
                 and not c["method"].startswith("reference_"))
    return max(ns, key=lambda n: (ns[n], n)) if ns else 1


# ------------------------------------------------------------------------------------------------- text
def seeds_note(n: int, usual: int) -> str:
    return "" if n == usual else f" ({n} seed{'s' if n != 1 else ''})"


def cell_text(c: dict, usual: int) -> str:
    """'mean [lo, hi]' (one seed: the mean), plus the seed count where it is not the folder's usual one."""
    return f"{c['mean']:.{DIGITS}f}" + stats.ci_text(c.get("ci"), DIGITS) + seeds_note(c["n"], usual)


def row_label(data: dict, env: str, split: str, several_envs: bool) -> str:
    return f"`{data['folder']}`" + (f" ({env})" if several_envs else "") + f" | {split}"


def sampler_table(folders: list) -> str:
    lines = ["| folder | split | " + " | ".join(t for _, t in COLUMNS) + " |", "|---" * (len(COLUMNS) + 2) + "|"]
    for data in folders:
        usual, bl = usual_n(data), blocks(data)
        for env, split, cells in bl:
            learned = {m: cells[m]["mean"] for m, _ in COLUMNS if m in cells and not m.startswith("reference_")}
            best = max(learned, key=learned.get) if learned else None
            texts = [MISSING if m not in cells else
                     (f"**{cell_text(cells[m], usual)}**" if m == best else cell_text(cells[m], usual))
                     for m, _ in COLUMNS]
            lines.append(f"| {row_label(data, env, split, len({b[0] for b in bl}) > 1)} | " + " | ".join(texts) + " |")
    return "\n".join(lines)


def selection_table(folders: list) -> str:
    """Per (folder, env, split): the rule's choice and scores, OILCA's mean return per sampler, the rollout-best,
    agreement; then the k-of-n line. A case counts when the selection exists, at least two of the candidates' OILCA
    runs exist on that split, and the chosen candidate's is one of them."""
    lines = ["| folder | split | rule's choice (score) | other candidates' scores | OILCA mean return by sampler "
             "| rollout-best | agree |", "|---" * 7 + "|"]
    k = n = 0
    for data in folders:
        sel, usual, bl = data["selection"], usual_n(data), blocks(data)
        if sel:
            scores = sel["scores"]
            chosen = f"{sel['choice']} ({scores[sel['choice']]['mean']:.4f})"
            others = ", ".join(f"{c} {scores[c]['mean']:.4f}" for c in sel["candidates"] if c != sel["choice"])
        else:
            chosen, others = f"{MISSING} (no {SELECTION})", MISSING
        for env, split, cells in bl:
            runs = {c: cells[OILCA_OF[c]] for c in OILCA_OF if OILCA_OF[c] in cells}
            means = ", ".join(f"{c} {runs[c]['mean']:.{DIGITS}f}{seeds_note(runs[c]['n'], usual)}" if c in runs
                              else f"{c} {MISSING}" for c in OILCA_OF)
            top = max(r["mean"] for r in runs.values()) if runs else None
            best = [c for c in runs if runs[c]["mean"] == top]
            if not sel:
                agree = f"{MISSING} (no selection)"
            elif len(runs) < 2:
                agree = f"{MISSING} (one sampler's OILCA run)" if runs else f"{MISSING} (no OILCA run)"
            elif sel["choice"] not in runs:
                agree = f"{MISSING} (no OILCA run with {sel['choice']} labels)"
            else:
                hit = sel["choice"] in best
                k, n, agree = k + hit, n + 1, "yes" if hit else "no"
            lines.append(f"| {row_label(data, env, split, len({b[0] for b in bl}) > 1)} | {chosen} | {others} | "
                         f"{means} | {', '.join(best) if len(runs) > 1 else MISSING} | {agree} |")
    lines.append(f"\nThe rule picked the rollout-best sampler in {k} of {n} (folder, split) cases.")
    return "\n".join(lines)


def gap_cells(data: dict, env: str, split: str) -> dict:
    """{(x, y): (cell of x − y, computed here?)}: summary.json's gap, else report.py's over the per-run JSON."""
    found = {(g["x"], g["y"]): g for g in data["summary"].get("gaps", [])
             if g.get("env") == env and g.get("split") == split}
    scores = report.per_seed([r for r in data["rows"] if (r.get("env") or report.NO_ENV) == env])
    out = {}
    for x, y in GAPS:
        if (x, y) in found:
            out[(x, y)] = (found[(x, y)], False)
            continue
        a, b = scores.get((x, split), {}), scores.get((y, split), {})
        shared = sorted(set(a) & set(b))
        if shared:
            resamples = int(data["summary"].get("resamples", stats.N_RESAMPLES))
            out[(x, y)] = (stats.cell([a[s] - b[s] for s in shared], resamples), True)
    return out


def gap_table(folders: list) -> Tuple[str, bool]:
    """(the markdown of OILCA − its sampler, whether any gap was computed here rather than read)."""
    lines = ["| folder | split | " + " | ".join(f"{x} − {y}" for x, y in GAPS) + " |", "|---" * (len(GAPS) + 2) + "|"]
    computed = False
    for data in folders:
        usual, bl = usual_n(data), blocks(data)
        for env, split, _ in bl:
            gaps, texts = gap_cells(data, env, split), []
            for g in GAPS:
                if g not in gaps:
                    texts.append(MISSING)
                    continue
                c, here = gaps[g]
                computed |= here
                texts.append(cell_text(c, usual) + (" †" if here else ""))
            lines.append(f"| {row_label(data, env, split, len({b[0] for b in bl}) > 1)} | " + " | ".join(texts) + " |")
    return "\n".join(lines), computed


def header(folders: list, argv: str) -> str:
    def boot(data):
        s = data["summary"]
        return (f"{s.get('level', stats.CI_LEVEL):.0%} percentile bootstrap of the mean over seeds, "
                f"{s.get('resamples', stats.N_RESAMPLES):,} resamples, generator seed "
                f"{s.get('bootstrap_seed', stats.BOOT_SEED)}")

    boots = {boot(d) for d in folders}
    parts = [f"`{d['folder']}` ({usual_n(d)} training seeds"
             + (f"; {boot(d)}" if len(boots) > 1 else "")
             + (f"; {SELECTION}: {d['selection'].get('folds', '?')} folds" if d["selection"] else f"; no {SELECTION}")
             + ")" for d in folders]
    return (f"Generated by `python scripts/sampler_table.py --results {argv}`. Every number is read from the "
            f"{SUMMARY} that report.py wrote in each folder and from select_sampler.py's {SELECTION}: "
            + ", ".join(parts) + ". A cell is `mean [lo, hi]` of the training seeds' mean episode returns, [lo, hi] "
            + (f"the {boots.pop()}" if len(boots) == 1 else "the folder's bootstrap interval")
            + f" (one seed: the mean alone; docs/statistics.md); {report.UNDER_COVERS}. A seed count in parentheses "
            f"marks a cell with another number of seeds than its folder's. A score is select_sampler.py's mean "
            f"held-out action error over the folds (the lowest is chosen). The rollout-best sampler is the candidate "
            f"whose OILCA run has the highest mean return on that split, among at least two OILCA runs present (each "
            f"mean over its own seeds, the difference untested); a (folder, split) counts in k of n when the "
            f"selection exists and the chosen candidate's OILCA run is among them. A gap X − Y is summary.json's "
            f"paired gap: the mean of the per-seed differences over the seeds both methods have, with its bootstrap "
            f"interval.")


def markdown(folders: list, argv: str) -> str:
    gaps, computed = gap_table(folders)
    return (header(folders, argv)
            + "\n\n### The sampler table\n\nBold: the best learned method of each row (not the expert reference). "
              f"{MISSING}: no run of that method on that split.\n\n" + sampler_table(folders)
            + "\n\n### Selection vs rollouts\n\n" + selection_table(folders)
            + "\n\n### OILCA − its sampler\n\nPaired gap of OILCA and the policy whose actions label its "
              "counterfactual rows, on the seeds both have (OILCA's seed s is labelled by the sampler's seed s).\n\n"
            + gaps + ("\n\n† not in summary.json: computed here from the per-run JSON with report.py's functions "
                      "(report.per_seed, stats.cell), with the folder's resamples." if computed else ""))


# ------------------------------------------------------------------------------------------------- docs
def fill_doc(path: str, text: str, md: str) -> str:
    """`text` with every block between OPEN and CLOSE replaced by `md`; one-line TableError without the markers."""
    return report.replace_blocks(path, text, lambda line: line.strip() == OPEN, lambda line: line.strip() == CLOSE,
                                 md, OPEN, CLOSE, TableError)


def prepare_docs(paths, md: str) -> dict:
    out = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise TableError(f"{path}: cannot be read ({getattr(e, 'strerror', None) or e})") from None
        out[path] = fill_doc(path, text, md)
    return out


# ------------------------------------------------------------------------------------------------- main
@contract.all_or_nothing
@contract.together()  # its outputs are renamed into place together at the end: all of them or none
def main(args: Args) -> str:
    if not args.results:
        raise TableError("--results: give at least one result folder")
    files = []
    folders = [load_folder(f, files) for f in args.results]
    md = markdown(folders, " ".join(args.results))
    docs = prepare_docs(args.doc, md)  # every check before the first write
    contract.check_paths({"--results": files}, files={"--out": args.out, "--doc": list(args.doc)})
    contract.claim(args.out)
    contract.save_text(args.out, md + "\n")
    for path, text in docs.items():
        contract.save_text(path, text)
    print(md)
    print(f"wrote {args.out}" + "".join(f"; table into {p}" for p in docs))
    return md


if __name__ == "__main__":
    cli.run(main, Args, refused=(ValueError, KeyError))
