"""Rebuild the result tables and figures from evaluate.py's JSON files alone (one file per method, seed, split).

Input: a folder of result JSON (keys method, seed, split, env, returns: the per-episode returns; optional success,
augmented_de_over_du, episodes, eval_seed); other JSON (timing.json, summary.json) is skipped. A seed's score is the
mean of its episode returns. The reference runs are the methods reference_expert and reference_random.

Statistics: the estimators are stats.py's, whose docstring states each one exactly (docs/statistics.md explains them).
A cell is `mean ± s [lo, hi]` over training seeds (sample std; 95% percentile bootstrap of the mean, 10,000 resamples,
generator seed 0; one seed: the mean alone; the header warns that 3–5 seeds under-cover). Normalised scores use the
reference runs of the same env and split; P(X > Y) (rliable) and paired gaps X − Y over shared seeds are per split;
--aggregate gives each method's IQM and mean of normalised scores with stratified-bootstrap intervals, and P(X > Y)
averaged over the (task, split) strata both methods have.

Outputs of `--results F`, written into F:
- table.md, per env (a folder with several envs gets one block per env, headed by the env id): returns, normalised
  scores (when both references exist), P(X > Y) for the default pairs that exist (oilca vs dwbc, oril_ca vs oril,
  bcnd_ca vs bcnd, ilid_ca vs ilid, iswbc_ca vs iswbc, every oilca_<x> vs oilca; more with --pairs), the paired gaps (oilca − dwbc, oilca − bc_exp,
  oilca_bc_all − bc_all, oilca_dwbc − dwbc, each control − oilca; more with --gaps) and CausalWorld's fractional success. Rows carry the
  method id and a readable name; method order: MAIN_METHODS, then CONTROLS, each followed by its `_r<ratio>` variants.
  With budget results (runner --budgets: policies of one run saved at several steps; the method id takes the
  result's `_b<policy_step>`, read from the JSON, see budget_method) also the budget table: rows = budgets, columns = family × split, then the paired
  gaps oilca − dwbc and oilca − bc_exp and P(oilca > dwbc) at each budget (BUDGET_GAPS, BUDGET_POI).
- summary.json: cells (env, split, method, name, metric, n, seeds, mean, std, ci, normalised {mean, std, ci} or null),
  probability_of_improvement (env, split, x, y, p, ci, n_x, n_y), gaps (env, split, x, y, seeds, n, mean, std, ci);
  with budget results also budget_cells (env, split, family, budget, method, seeds, n, mean, std, ci), budget_gaps
  (env, split, budget, x, y, seeds, n, mean, std, ci), budget_probability_of_improvement (env, split, budget, x, y, p,
  ci, n_x, n_y).
- fig4.png and fig5.png, drawn by figures.py (its docstring describes them): Fig. 4, returns per method with each X
  beside X+CA; Fig. 5, return against |augmented D_E| / |D_U| per family with two ratios or more (no fig5.png when no
  family has two).
  budget.png, only with budget results (figures.budget): return and the two gaps against the budget.
  With several envs the figures are fig4_<env>.png, fig5_<env>.png and budget_<env>.png, one per env (in the env id,
  every run of characters other than letters and digits becomes `_`: fig4_dmc_walker_stand.png).
Outputs of `--aggregate F1 F2 ... --out A`: A/aggregate.md and A/aggregate.json (methods: iqm, iqm_ci, mean, mean_ci,
runs, strata; probability_of_improvement: x, y, p, ci, strata; the strata used and those left out).
Output of `--paper-table N` (N = 1, 2, 4, 6, 7): the paper's Table N (paper_results.py) with ours beside every cell,
printed and put into each --doc; nothing else is written. One results folder per task row, --results-pattern with
{benchmark} (dmc, cw) and {task}; Table 7's C = c from --c-pattern ({folder}-c{c}: C = 3, the default feature set, is
the task folder itself). A cell: ours (the cell format above over the seeds of that method and split; Table 1 and the
DeepMind Control rows of Table 4 split train, Table 2, Table 7 and Table 4's CausalWorld rows split B, Table 6 split A)
with its seed count and its rank within the row among the columns we ran, then the paper's mean ± s and its rank among
all the paper's columns; a missing folder, method or split is "not run". Per row Kendall's τ-b between our means and
the paper's; per table the count of tasks where OILCA is above DWBC, tied or below (ours: 95% bootstrap intervals
disjoint or not; the paper's: mean ± s), and for CausalWorld a second table of our fractional success (raw CausalWorld
returns are on another scale than the paper's, so only orders are compared there). A one-line `note.md` in a task's
folder becomes a footnote on its row.

Usage: python report.py --results results/toy      writes table.md, summary.json, fig4.png, fig5.png there and prints
                                                   the table.
       python report.py --results results/toy --doc docs/toy.md
                                                   also puts the table between `<!-- report: results/toy -->` and
                                                   `<!-- /report -->` in docs/toy.md.
       python report.py --aggregate results/toy results/dmc_cartpole-swingup --out results/aggregate
                                                   (--doc markers then name the --out folder).
       python report.py --paper-table 2 --results-pattern 'results/{benchmark}_{task}_t5' --doc docs/tables.md
                                                   (--doc markers `<!-- report: paper table 2 -->`).
Bad input (no result JSON, a file that is not valid JSON or not a valid result, a NaN or infinite number in one,
two files for the same env, method, seed and split, a doc without the markers, a malformed --pairs/--gaps, an
output that cannot be written; for --aggregate also one env in two folders, or no env and split with both
references; for --paper-table a table number the paper lacks, a pattern with other fields, a task folder holding
another env) stops with one line on stderr naming the file or flag, before anything is written.
"""

import glob
import json
import math
import os
import re
import shutil
import string
import subprocess
import sys
import tempfile
from collections import defaultdict
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

from oilca import checks
from oilca import cli
from oilca import contract
from analysis import figures
from analysis import paper_results
from analysis import stats

MAIN_METHODS = ("bc_exp", "bc_all", "oril", "bcnd", "lobsdice", "dwbc", "oril_ca", "bcnd_ca", "ilid", "ilid_ca", "iswbc",
                "iswbc_ca", "oilca")  # table order: the paper's columns, then the newer baselines, then OILCA
CONTROLS = ("oilca_bc_all", "oilca_dwbc", "oilca_oracle", "oilca_selected", "oilca_copy", "oilca_authors",
            "oilca_reconstruct", "oilca_adaptive_eta", "dwbc_expert_data")  # control rows, after MAIN_METHODS
DISPLAY = {"bc_exp": "BC-exp", "bc_all": "BC-all", "oril": "ORIL", "oril_ca": "ORIL+CA", "bcnd": "BCND",
           "bcnd_ca": "BCND+CA", "lobsdice": "LobsDICE", "dwbc": "DWBC", "oilca": "OILCA", "ilid": "ILID",
           "ilid_ca": "ILID+CA", "iswbc": "ISW-BC", "iswbc_ca": "ISW-BC+CA",
           "oilca_bc_all": "OILCA, BC-all labels", "oilca_dwbc": "OILCA, DWBC labels",
           "oilca_oracle": "OILCA, oracle labels (env expert)", "oilca_selected": "OILCA, offline-selected sampler",
           "oilca_copy": "no counterfactual (partner's own s′)",
           "oilca_authors": "authors' path (reconstruct + adaptive η)",
           "oilca_reconstruct": "authors' reconstruct rows, fixed η", "oilca_adaptive_eta": "OILCA with the authors' adaptive η",
           "dwbc_expert_data": "DWBC + true expert rows", "oilca_matched": "OILCA, sampler matched to the budget",
           "oilca_ens": "OILCA, ensemble labels (keep share chosen on held-out D_E)",
           "oilca_self": "OILCA, self-improving labels (round chosen on held-out D_E)",
           "oilca_iswbc": "OILCA, ISW-BC labels", "oilca_ilid": "OILCA, ILID labels",
           "oilca_best": "OILCA, sampler chosen on held-out D_E among every trained policy",
           "oilca_sup": "OILCA, rows near D_E only (keep share chosen on held-out D_E)",
           "reference_expert": "expert (reference)", "reference_random": "random (reference)"}
LABEL_VARIANT = re.compile(r"^oilca_(?:ens_q(?P<keep>\d+(?:\.\d*)?)|round(?P<round>\d+)"
                           r"|sup_q(?P<sup>\d+(?:\.\d*)?))$")  # docs/labels.md
RATIO = re.compile(r"^(?P<base>.+)_r(?P<ratio>\d+(?:\.\d*)?)$")  # `<method>_r<ratio>`: the same method at another ratio
BUDGET = re.compile(r"^(?P<base>.+)_b(?P<steps>\d+)$")  # `<method>_b<steps>`: the policy after <steps> gradient steps
SELECTED = re.compile(r"^(?P<base>.+)_sel$")  # `<method>_sel`: the method at the budget select_budget.py chose
BUDGET_GAPS = (("oilca", "dwbc"), ("oilca", "bc_exp"), ("oilca_matched", "dwbc"),
               ("oilca_matched", "bc_exp"))  # the budget table's paired gaps, at each budget (where both ran)
BUDGET_POI = (("oilca", "dwbc"), ("oilca_matched", "dwbc"))  # and its P(X > Y)
DEFAULT_PAIRS = (("oilca", "dwbc"), ("oril_ca", "oril"), ("bcnd_ca", "bcnd"), ("ilid_ca", "ilid"),
                 ("iswbc_ca", "iswbc"))  # P(X > Y); + every oilca_<x> vs oilca
DEFAULT_GAPS = (("oilca", "dwbc"), ("oilca", "bc_exp"), ("oilca_bc_all", "bc_all"), ("oilca_dwbc", "dwbc"),
                ("oilca_copy", "oilca"), ("oilca_oracle", "oilca"), ("dwbc_expert_data", "oilca"),
                ("oilca_authors", "oilca"))  # the sampler gaps, then each control against OILCA
ALL_SPLITS = (("train", "in-distribution (training c)"), ("heldout", "out-of-distribution (held-out c)"),
              ("A", "space A (in-distribution)"), ("B", "space B (out-of-distribution)"))
NO_ENV = "env not recorded"
DOC_OPEN = re.compile(r"^\s*<!--\s*report:\s*(.*?)\s*-->\s*$")
DOC_CLOSE = re.compile(r"^\s*<!--\s*/report\s*-->\s*$")
PAPER_NOTE = "note.md"  # a one-line note in a task's results folder: a footnote on its row of the paper tables
N_ORDER_RESAMPLES = stats.N_RESAMPLES  # the paired gaps behind the OILCA-against-DWBC counts
PAPER_VERDICTS = ("above", "tie", "below", "one seed", "not run")  # OILCA against DWBC on one task row
UNDER_COVERS = ("a percentile bootstrap over 3–5 seeds under-covers: its intervals are narrower than a 95% interval "
                "should be, so read them as a description of these seeds, not as a guarantee")


class ReportError(ValueError):
    """Bad input; the message is one line that names the folder or file and the problem."""


class NonFinite(Exception):
    """A NaN or Infinity token in a result JSON."""


def _refuse_constant(name: str):
    raise NonFinite(name)


@dataclass
class Args:
    results: str = "results/toy"
    """folder of evaluate.py's JSON files; the tables, summary.json and figures are written there"""
    doc: Tuple[str, ...] = ()
    """markdown docs whose text between `<!-- report: <results> -->` and `<!-- /report -->` is replaced by the table
    (with --aggregate: `<!-- report: <out> -->`)"""
    aggregate: Tuple[str, ...] = ()
    """result folders to aggregate across tasks (IQM of normalised scores, P(X > Y)); --results is then unused"""
    out: str = "results/aggregate"
    """--aggregate only: the folder that gets aggregate.md and aggregate.json"""
    pairs: Tuple[str, ...] = ()
    """extra `x:y` method pairs for the probability of improvement P(x > y), after the default pairs"""
    gaps: Tuple[str, ...] = ()
    """extra `x:y` paired gaps x − y over the training seeds both have, after the default gaps"""
    resamples: int = stats.N_RESAMPLES
    """bootstrap resamples per interval"""
    paper_table: Optional[int] = None
    """1, 2, 4, 6 or 7: that table of the paper (paper_results.py) with our numbers beside each cell, from one results
    folder per task (--results-pattern); printed and put between `<!-- report: paper table <n> -->` and
    `<!-- /report -->` of each --doc; --results is then unused"""
    results_pattern: str = "results/{benchmark}_{task}_t5"
    """--paper-table: a task's results folder; {task} is our task name, {benchmark} `dmc` or `cw`"""
    c_pattern: str = "{folder}-c{c}"
    """--paper-table 7: the results folder of feature set C = {c}, {folder} the task's --results-pattern folder; C = 3,
    the default feature set, is the task's folder itself"""
    check_docs: bool = False
    """regenerate every generated table, figure and doc block (scripts/regenerate_tables.sh) on a scratch copy of
    docs/, results/ and README.md, list each file that differs from the committed one, check that README.md and
    docs/*.md cite no hand-typed decimal number outside generated blocks, inline generated numbers, code and recorded
    output, and exit non-zero on any finding; nothing in the repository is written"""


def present_splits(rows: list) -> tuple:
    """The splits that occur in the results, in the order of ALL_SPLITS (e.g. train/heldout or A/B)."""
    have = {r["split"] for r in rows}
    return tuple(s for s in ALL_SPLITS if s[0] in have)


# ------------------------------------------------------------------------------------------------- methods
def split_ratio(method: str):
    """(base, ratio text or None): `oilca_r1.0` → ("oilca", "1.0"); a method without a known base → (method, None)."""
    m = RATIO.match(method)
    return (m["base"], m["ratio"]) if m and m["base"] in DISPLAY else (method, None)


def split_budget(method: str):
    """(base, steps or None): `dwbc_b20000` → ("dwbc", 20000), `oilca_r1.0_b5000` → ("oilca_r1.0", 5000); any base
    counts (budget variants come from runner --budgets' result files, see budget_method); else (method, None)."""
    m = BUDGET.match(method)
    return (m["base"], int(m["steps"])) if m and not m["base"].startswith("reference_") else (method, None)


def split_selected(method: str):
    """(base, True) for `<base>_sel` (select_budget.py's choice of budget), else (method, False)."""
    m = SELECTED.match(method)
    return (m["base"], True) if m else (method, False)


def display(method: str) -> str:
    """The readable name: DISPLAY's, `<name> (ratio r)` for a `_r<ratio>` variant, `<name> (n steps)` for a
    `_b<steps>` variant, `<name> (selected budget)` for a `_sel` one, else the id itself."""
    base, selected = split_selected(method)
    if selected:
        return f"{display(base)} (budget chosen on held-out D_E)"
    base, steps = split_budget(method)
    if steps is not None:
        return f"{display(base)} ({steps:,} steps)"
    base, ratio = split_ratio(method)
    if ratio is not None:
        return f"{DISPLAY[base]} (ratio {ratio})"
    m = LABEL_VARIANT.match(method)
    if m:
        return (f"OILCA, ensemble labels, keep {m['keep']}" if m["keep"] else
                f"OILCA, rows near D_E only, keep {m['sup']}" if m["sup"] else
                f"OILCA, self-improving labels, round {m['round']}")
    return DISPLAY.get(method, method)


def order_key(method: str):
    """Table order: MAIN_METHODS, then CONTROLS (each family: the plain method, then its ratios ascending, each
    followed by its `_b<steps>` budgets ascending), then other methods by name (each before its budgets), then the
    references."""
    plain, selected = split_selected(method)
    plain, steps = split_budget(plain)
    steps = math.inf if selected else steps  # a family's selected budget after its fixed budgets
    base, ratio = split_ratio(plain)
    families = MAIN_METHODS + CONTROLS + ("oilca_matched",)
    if method.startswith("reference_"):
        return (2, 0, 0, 0.0, method)
    if base in families:
        return (0, families.index(base), ratio is not None, float(ratio or 0), plain, steps or 0)
    return (1, 0, 0, 0.0, plain, steps or 0)


def parse_pairs(flag: str, values) -> list:
    """[(x, y)] from `x:y` strings; one-line ValueError naming the flag otherwise."""
    out = []
    for v in values:
        x, sep, y = v.partition(":")
        if not sep or not x.strip() or not y.strip() or ":" in y or x.strip() == y.strip():
            raise ValueError(f"{flag} {v!r}: give two different methods as x:y (e.g. oilca:dwbc)")
        out.append((x.strip(), y.strip()))
    return out


def method_pairs(methods, extra: list) -> list:
    """DEFAULT_PAIRS, then every oilca_<x> vs oilca (budget variants aside: the budget table compares them), then
    `extra`; only pairs whose two methods are in `methods`."""
    pairs = list(DEFAULT_PAIRS) + [(m, "oilca") for m in sorted(methods, key=order_key)
                                   if m.startswith("oilca_") and split_budget(m)[1] is None
                                   and not split_selected(m)[1]]
    pairs += [p for p in extra if p not in pairs]
    return [(x, y) for x, y in pairs if x in methods and y in methods]


# ------------------------------------------------------------------------------------------------- input
def _numbers(value) -> bool:
    return (isinstance(value, list) and len(value) > 0
            and all(isinstance(v, (int, float)) and not isinstance(v, bool) and math.isfinite(v) for v in value))


def check_row(path: str, r: dict) -> None:
    if not isinstance(r["method"], str) or not r["method"]:
        raise ReportError(f"{path}: 'method' must be a non-empty string")
    if not isinstance(r["split"], str) or not r["split"]:
        raise ReportError(f"{path}: 'split' must be a non-empty string")
    if not isinstance(r["seed"], int) or isinstance(r["seed"], bool):
        raise ReportError(f"{path}: 'seed' must be an integer, got {r['seed']!r}")
    if r.get("env") is not None and (not isinstance(r["env"], str) or not r["env"].strip()):
        raise ReportError(f"{path}: 'env' must be a non-empty string (or absent), got {r['env']!r}")
    if not _numbers(r["returns"]):
        raise ReportError(f"{path}: 'returns' must be a non-empty list of finite numbers")
    if r.get("success") is not None and not _numbers(r["success"]):
        raise ReportError(f"{path}: 'success' must be a non-empty list of finite numbers (or absent)")
    for key in ("mean_return", "std_return", "mean_success"):
        if key in r and r[key] is not None and not _numbers([r[key]]):
            raise ReportError(f"{path}: '{key}' must be a finite number, got {r[key]!r}")
    with np.errstate(over="ignore"):
        mean = float(np.mean(np.asarray(r["returns"], dtype=np.float64)))
    if not math.isfinite(mean):
        raise ReportError(f"{path}: the mean of 'returns' is not a finite number (returns of size up to 1e308?)")
    if r.get("mean_return") is not None and not math.isclose(r["mean_return"], mean, rel_tol=1e-6, abs_tol=1e-6):
        raise ReportError(f"{path}: 'mean_return' {r['mean_return']!r} is not the mean of its 'returns' ({mean!r})")
    x = r.get("augmented_de_over_du")
    if x is not None and (not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x)):
        raise ReportError(f"{path}: 'augmented_de_over_du' must be a finite number (or absent)")


def budget_method(path: str, r: dict) -> str:
    """The method id of a result, from the facts inside it: its `method`, with `_b<steps>` appended when the policy
    comes from a budget run (its train_args has --checkpoints: one run saved the policies of several budgets) and the
    method does not carry a budget itself; <steps> is the result's `policy_step`, or the run's --total-steps for its
    final policy (results written before `policy_step` was recorded for final policies). `dwbc` trained to 50,000
    steps with --checkpoints 5000 20000 → `dwbc_b50000`; its policy saved at step 20,000 → `dwbc_b20000`. The file
    name plays no part."""
    train_args = r.get("train_args") if isinstance(r.get("train_args"), dict) else {}
    labelled = split_budget(r["method"])[1]
    if labelled is not None and isinstance(r.get("policy_step"), int) and r["policy_step"] != labelled:
        raise ReportError(f"{path}: method {r['method']} names {labelled} steps, but its policy_step is "
                          f"{r['policy_step']}")
    if "budget_selection" in r or not train_args.get("checkpoints") or labelled is not None:
        return r["method"]
    steps = r.get("policy_step") if r.get("policy_step") is not None else train_args.get("total_steps")
    if not isinstance(steps, int) or isinstance(steps, bool) or steps < 1:
        raise ReportError(f"{path}: a budget run's result without a step count (policy_step or train_args.total_steps)")
    return f"{r['method']}_b{steps}"


def replace_block(path: str, tag: str, name: str, md: str) -> None:
    """Replace the text between `<!-- tag: name -->` and `<!-- /tag -->` in the markdown file `path` by `md` (the
    summary scripts' generated blocks); a file without the markers is an error."""
    start, end = f"<!-- {tag}: {name} -->", f"<!-- /{tag} -->"
    with open(path) as f:
        doc = f.read()
    i = doc.find(start)
    j = doc.find(end, i)
    if i < 0 or j < 0:
        raise ValueError(f"--doc {path}: no block '{start}' … '{end}' to replace")
    contract.save_text(path, doc[:i + len(start)] + "\n\n" + md + "\n\n" + doc[j:])


def recorded_inputs(path: str) -> dict:
    """The `inputs` a summary script recorded in its JSON (its --again)."""
    try:
        with open(path) as f:
            rec = json.load(f)["inputs"]
        return {"results": tuple(rec["results"]), "out": path, "doc": rec["doc"], "resamples": rec["resamples"]}
    except (OSError, ValueError, KeyError, TypeError) as e:
        raise ValueError(f"--again {path}: not a summary this script wrote ({type(e).__name__}: {e})") from None


def load_results(folder: str, files: list = None, empty_ok: bool = False) -> list:
    """The result rows of `folder` (JSON objects with method, seed, split, returns; other JSON such as timing.json
    is skipped; a budget file's method gets its `_b<steps>`, see budget_method); their paths are appended to
    `files`. Raises ReportError on a missing folder, invalid JSON, a malformed result, duplicates (same env, method,
    seed, split), no result (unless empty_ok: then [])."""
    if not os.path.isdir(folder):
        raise ReportError(f"{folder}: no such folder")
    rows, seen = [], {}
    for path in sorted(glob.glob(os.path.join(folder, "*.json"))):
        try:
            with open(path) as f:
                r = json.load(f, parse_constant=_refuse_constant)
        except NonFinite as e:
            raise ReportError(f"{path}: holds the non-finite number {e} (a diverged policy?); results must be finite") from None
        except json.JSONDecodeError as e:
            raise ReportError(f"{path}: not valid JSON ({e.msg} at line {e.lineno}, column {e.colno})") from None
        except (OSError, UnicodeDecodeError) as e:
            raise ReportError(f"{path}: cannot be read ({e})") from None
        if not isinstance(r, dict) or not {"method", "seed", "split", "returns"} & set(r):
            continue  # not a result (e.g. timing.json, summary.json)
        missing = sorted({"method", "seed", "split", "returns"} - set(r))
        if missing:
            raise ReportError(f"{path}: result JSON without {', '.join(missing)}")
        check_row(path, r)
        r["method"] = budget_method(path, r)
        key = (r.get("env"), r["method"], r["seed"], r["split"])
        if key in seen:
            raise ReportError(f"{folder}: {os.path.basename(seen[key])} and {os.path.basename(path)} both hold "
                              f"method {key[1]}, seed {key[2]}, split {key[3]}")
        seen[key] = path
        rows.append(r)
        if files is not None:
            files.append(path)
    if not rows and not empty_ok:
        raise ReportError(f"{folder}: no result JSON (objects with method, seed, split, returns)")
    return rows


def by_env(rows: list) -> dict:
    """{env id: its rows}, envs sorted (results without an env under NO_ENV)."""
    out = defaultdict(list)
    for r in rows:
        out[r.get("env") or NO_ENV].append(r)
    return dict(sorted(out.items()))


def env_slug(env: str) -> str:
    return re.sub(r"[^A-Za-z0-9]+", "_", env).strip("_") or "env"


# ------------------------------------------------------------------------------------------------- seed scores
def per_seed(rows: list, key: str = "returns") -> dict:
    """{(method, split): {seed: mean return}} (key="success": mean fractional success, CausalWorld)"""
    out = defaultdict(dict)
    for r in rows:
        if r.get(key) is not None:
            out[(r["method"], r["split"])][r["seed"]] = float(np.mean(r[key]))
    return dict(out)


def normalise(scores: dict) -> dict:
    """{(method, split): {seed: 100·(R − R_random)/(R_expert − R_random)}} for the learned methods of every split whose
    reference_expert and reference_random both exist and differ (R_ref: the mean over the reference's seeds)."""
    out = {}
    for split in {s for _, s in scores}:
        ex, rd = scores.get(("reference_expert", split)), scores.get(("reference_random", split))
        if not ex or not rd:
            continue
        r_ex, r_rd = np.mean(list(ex.values())), np.mean(list(rd.values()))
        if r_ex == r_rd:
            continue
        for (m, s), v in scores.items():
            if s == split and not m.startswith("reference_"):
                out[(m, s)] = {seed: stats.normalise(x, r_ex, r_rd) for seed, x in v.items()}
    return out


# ------------------------------------------------------------------------------------------------- tables
def table(cells: dict, splits: tuple, digits: int = 2) -> str:
    """Markdown table of `cells` ({(method, split): cell}); bold: the best learned method (highest mean) per column."""
    methods = sorted({m for m, s in cells if s in dict(splits)}, key=order_key)
    best = {}
    for split, _ in splits:
        means = {m: cells[(m, split)]["mean"] for m in methods
                 if (m, split) in cells and not m.startswith("reference_")}
        best[split] = max(means, key=means.get) if means else None
    lines = ["| method | name | " + " | ".join(title for _, title in splits) + " | seeds |",
             "|---" * (len(splits) + 3) + "|"]
    for m in methods:
        texts = [stats.cell_text(cells[(m, s)], digits) if (m, s) in cells else "—" for s, _ in splits]
        texts = [f"**{t}**" if m == best[s] else t for t, (s, _) in zip(texts, splits)]
        n = max(cells[(m, s)]["n"] for s, _ in splits if (m, s) in cells)
        lines.append(f"| {m} | {display(m)} | " + " | ".join(texts) + f" | {n} |")
    return "\n".join(lines)


def ratio_table(cells: dict, sizes: dict, splits: tuple, digits: int = 2) -> str:
    """Markdown of Table 8's layout, or "" when no family of figures.FIG5_FAMILIES has two amounts: rows = the
    amounts (each result's augmented_de_over_du), columns = family × split; cells over each run's own seeds."""
    at = defaultdict(dict)  # (family, split) -> {amount: method}
    for (m, s), x in sizes.items():
        fam = split_ratio(m)[0]
        if fam in figures.FIG5_FAMILIES and (m, s) in cells:
            at[(fam, s)][x] = m
    columns = [(f, s, t) for f in figures.FIG5_FAMILIES for s, t in splits if len(at.get((f, s), {})) >= 2]
    if not columns:
        return ""
    amounts = sorted({x for f, s, _ in columns for x in at[(f, s)]})
    lines = ["| amount | " + " | ".join(f"{DISPLAY.get(f, f)}, {t}" for f, _, t in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for x in amounts:
        texts = []
        for f, s, _ in columns:
            m = at[(f, s)].get(x)
            texts.append(f"{stats.cell_text(cells[(m, s)], digits)} ({cells[(m, s)]['n']})" if m else "—")
        lines.append(f"| {x:g} | " + " | ".join(texts) + " |")
    return "\n".join(lines)


def budget_study(scores: dict, splits: tuple, n_resamples: int) -> dict:
    """The budget study of one env's seed scores: {"cells": [{split, family, budget, method, seeds, **cell}],
    "gaps": [{split, budget, x, y, seeds, **cell of x − y}] for BUDGET_GAPS, "probability_of_improvement": [{split,
    budget, x, y, p, ci, n_x, n_y}] for BUDGET_POI}; x and y are families, compared at the same budget (their
    `_b<steps>` methods); seeds paired as in gap_entries. Empty lists when no `_b<steps>` method exists. With
    select_budget.py's results (`<family>_sel`, the budget chosen on held-out D_E episodes) also "selected_cells"
    and "selected_gaps" (the same entries with budget "selected"), kept apart so the budget axis stays numeric."""
    at, method = defaultdict(dict), {}  # (family, split) -> {steps: {seed: score}}; (family, steps) -> method id
    for (m, s), v in scores.items():
        fam, steps = split_budget(m)
        if steps is not None and s in dict(splits):
            at[(fam, s)][steps], method[(fam, steps)] = v, m
    chosen = {}  # (family, split) -> {seed: score} at the selected budget
    for (m, s), v in scores.items():
        fam, selected = split_selected(m)
        if selected and s in dict(splits) and any(f == fam for f, _ in at):
            chosen[(fam, s)] = v
    out = {"cells": [], "gaps": [], "probability_of_improvement": []}
    if chosen:
        out.update(selected_cells=[], selected_gaps=[])
        for split, _ in splits:
            for fam in sorted({f for f, s in chosen if s == split}, key=order_key):
                v = chosen[(fam, split)]
                out["selected_cells"].append({"split": split, "family": fam, "budget": "selected",
                                              "method": f"{fam}_sel", "seeds": sorted(v),
                                              **stats.cell(list(v.values()), n_resamples)})
            for x, y in BUDGET_GAPS:
                if (x, split) in chosen and (y, split) in chosen:
                    gap = stats.paired_gap(chosen[(x, split)], chosen[(y, split)], n_resamples)
                    if gap:
                        out["selected_gaps"].append({"split": split, "budget": "selected", "x": x, "y": y, **gap})
    for split, _ in splits:
        for fam in sorted({f for f, s in at if s == split}, key=order_key):
            for steps, v in sorted(at[(fam, split)].items()):
                out["cells"].append({"split": split, "family": fam, "budget": steps, "method": method[(fam, steps)],
                                     "seeds": sorted(v), **stats.cell(list(v.values()), n_resamples)})
        for x, y in BUDGET_GAPS:
            for steps in sorted(set(at.get((x, split), {})) & set(at.get((y, split), {}))):
                gap = stats.paired_gap(at[(x, split)][steps], at[(y, split)][steps], n_resamples)
                if gap:
                    out["gaps"].append({"split": split, "budget": steps, "x": x, "y": y, **gap})
        for x, y in BUDGET_POI:
            for steps in sorted(set(at.get((x, split), {})) & set(at.get((y, split), {}))):
                xs, ys = list(at[(x, split)][steps].values()), list(at[(y, split)][steps].values())
                p, ci = stats.probability_of_improvement([(xs, ys)], n_resamples)
                out["probability_of_improvement"].append({"split": split, "budget": steps, "x": x, "y": y, "p": p,
                                                          "ci": list(ci) if ci else None, "n_x": len(xs),
                                                          "n_y": len(ys)})
    return out


def budget_table(study: dict, splits: tuple, digits: int = 2) -> str:
    """Markdown of the budget study, or "" without one: rows = budgets (policy gradient steps), columns = family ×
    split (`mean ± s [lo, hi] (seeds)`); then the gaps and P(X > Y) at each budget, columns = pair × split."""
    if not study["cells"]:
        return ""
    titles = dict(splits)
    cells = {(c["family"], c["split"], c["budget"]): c for c in study["cells"] + study.get("selected_cells", [])}
    fams = sorted({c["family"] for c in study["cells"]}, key=order_key)
    columns = [(f, s) for f in fams for s, _ in splits if any(k[:2] == (f, s) for k in cells)]
    budgets = sorted({c["budget"] for c in study["cells"]}) + (["selected"] if study.get("selected_cells") else [])
    row = lambda b: f"{b:,}" if b != "selected" else "chosen on held-out D_E"  # noqa: E731
    lines = ["| budget (steps) | " + " | ".join(f"{display(f)}, {titles[s]}" for f, s in columns) + " |",
             "|---" * (len(columns) + 1) + "|"]
    for b in budgets:
        texts = [f"{stats.cell_text(c, digits)} ({c['n']})" if (c := cells.get((f, s, b))) else "—"
                 for f, s in columns]
        lines.append(f"| {row(b)} | " + " | ".join(texts) + " |")
    pairs = {}  # (kind, x, y, split) -> {budget: text}
    for e in study["gaps"] + study.get("selected_gaps", []):
        pairs.setdefault(("gap", e["x"], e["y"], e["split"]), {})[e["budget"]] = \
            f"{stats.cell_text(e, digits)} ({e['n']})"
    for e in study["probability_of_improvement"]:
        pairs.setdefault(("poi", e["x"], e["y"], e["split"]), {})[e["budget"]] = \
            f"{e['p']:.2f}{stats.ci_text(e['ci'])} ({e['n_x']}, {e['n_y']})"
    if pairs:
        order = [("gap", x, y) for x, y in BUDGET_GAPS] + [("poi", x, y) for x, y in BUDGET_POI]
        cols = [(k, x, y, s) for k, x, y in order for s, _ in splits if (k, x, y, s) in pairs]
        head = [(f"{display(x)} − {display(y)}" if k == "gap" else f"P({display(x)} > {display(y)})")
                + f", {titles[s]}" for k, x, y, s in cols]
        lines += ["", "| budget (steps) | " + " | ".join(head) + " |", "|---" * (len(cols) + 1) + "|"]
        for b in [b for b in budgets if any(b in v for v in pairs.values())]:
            lines.append(f"| {row(b)} | " + " | ".join(pairs[c].get(b, "—") for c in cols) + " |")
    return "\n".join(lines)


def poi_entries(scores: dict, splits: tuple, extra: list, n_resamples: int) -> list:
    """P(X > Y) per split for method_pairs: [{split, x, y, p, ci, n_x, n_y}]."""
    methods = {m for m, _ in scores}
    out = []
    for x, y in method_pairs(methods, extra):
        for split, _ in splits:
            if (x, split) in scores and (y, split) in scores:
                xs, ys = list(scores[(x, split)].values()), list(scores[(y, split)].values())
                p, ci = stats.probability_of_improvement([(xs, ys)], n_resamples)
                out.append({"split": split, "x": x, "y": y, "p": p, "ci": list(ci) if ci else None,
                            "n_x": len(xs), "n_y": len(ys)})
    return out


def gap_entries(scores: dict, splits: tuple, extra: list, n_resamples: int) -> list:
    """X − Y per split over the seeds both have: [{split, x, y, seeds, **cell of the differences}]."""
    out = []
    for x, y in list(DEFAULT_GAPS) + [g for g in extra if g not in DEFAULT_GAPS]:
        for split, _ in splits:
            gap = stats.paired_gap(scores.get((x, split), {}), scores.get((y, split), {}), n_resamples)
            if gap:
                out.append({"split": split, "x": x, "y": y, **gap})
    return out


def pair_table(entries: list, splits: tuple, text, sep: str, count) -> str:
    """One row `x<sep>y` per pair of `entries`, one column per split: text(entry), then count(entries of the row)."""
    rows = defaultdict(dict)
    for e in entries:
        rows[(e["x"], e["y"])][e["split"]] = e
    lines = [f"| X{sep}Y | " + " | ".join(t for _, t in splits) + " | seeds |", "|---" * (len(splits) + 2) + "|"]
    for (x, y), per in rows.items():
        lines.append(f"| {x}{sep}{y} | " + " | ".join(text(per[s]) if s in per else "—" for s, _ in splits)
                     + f" | {count(list(per.values()))} |")
    return "\n".join(lines)


def _one_or_all(rows: list, field: str) -> str:
    vals = sorted({str(r[field]) for r in rows if r.get(field) is not None})
    return vals[0] if len(vals) == 1 else (", ".join(vals) if vals else "not recorded")


def header(rows: list, env: str, n_resamples: int = stats.N_RESAMPLES) -> str:
    return (f"Returns on {env}: each cell is mean ± s [lo, hi] over training seeds of each seed's mean episode return: "
            f"s the sample std over seeds (ddof=1), [lo, hi] the {stats.CI_LEVEL:.0%} percentile-bootstrap interval "
            f"of the mean ({n_resamples:,} resamples of the seeds, generator seed {stats.BOOT_SEED}; one seed: the "
            f"mean alone); {UNDER_COVERS}. Bold: the best learned method of each column "
            f"({_one_or_all(rows, 'episodes')} episodes per split, evaluation seed "
            f"{_one_or_all(rows, 'eval_seed')}).\n\n")


def env_report(rows: list, env: str, pairs: list, gaps: list, n_resamples: int):
    """(markdown, summary parts) of one env's results."""
    splits = present_splits(rows)
    scores = per_seed(rows)
    cells = {k: stats.cell(list(v.values()), n_resamples) for k, v in scores.items()}
    normed = normalise(scores)
    ncells = {k: stats.cell(list(v.values()), n_resamples) for k, v in normed.items()}
    md = header(rows, env, n_resamples) + table(cells, splits)
    if ncells:
        md += ("\n\nNormalised score 100·(R − R_random)/(R_expert − R_random), R_expert and R_random the reference "
               "runs of the same split (100: the expert reference, 0: the random one), per seed, then the same cell "
               "format:\n\n" + table(ncells, tuple(s for s in splits if any(k[1] == s[0] for k in ncells)), 1))
    poi = poi_entries(scores, splits, pairs, n_resamples)
    if poi:
        md += ("\n\nProbability of improvement P(X > Y) per split (rliable): the fraction of (X seed, Y seed) pairs "
               "where X's return is higher, ties 1/2, [the bootstrap interval, X's and Y's seeds resampled "
               "independently]; seeds: X's, Y's:\n\n"
               + pair_table(poi, splits, lambda e: f"{e['p']:.2f}" + stats.ci_text(e["ci"]), " vs ",
                            lambda es: f"{max(e['n_x'] for e in es)}, {max(e['n_y'] for e in es)}"))
    gap = gap_entries(scores, splits, gaps, n_resamples)
    if gap:
        md += ("\n\nX − Y over shared training seeds: the differences of the two methods' seed scores on the seeds "
               "both have, in the same cell format:\n\n"
               + pair_table(gap, splits, stats.cell_text, " − ", lambda es: max(e["n"] for e in es)))
    amounts = ratio_table(cells, sizes_of(rows), splits)
    if amounts:
        md += ("\n\nReturn against the amount of added expert-side rows (Table 8's layout): one row per "
               "|augmented D_E| / |D_U| as each result records it, one column per family and split; each cell over "
               "all of that run's seeds, in the same cell format, its seed count after it; the family's plain "
               "method is the row of its own ratio:\n\n" + amounts)
    study = budget_study(scores, splits, n_resamples)
    budgets = budget_table(study, splits)
    if budgets:
        md += ("\n\nReturn against the training budget (runner --budgets: each run trains once to the largest budget "
               "and its policy is also saved and evaluated at every smaller one, so one seed's budgets share a run): "
               "one row per budget in policy gradient steps, one column per family and split; each cell over the "
               "seeds of that budget, in the same cell format, its seed count after it. Then, at each budget, the "
               "paired gaps X − Y over the seeds both have (same cell format, the shared seeds' count after it) and "
               "P(X > Y) as above (X's and Y's seed counts after it):\n\n" + budgets)
    success = per_seed(rows, "success")
    scells = {k: stats.cell(list(v.values()), n_resamples) for k, v in success.items()}
    if scells:
        md += ("\n\nFractional success (CausalWorld), same statistics (mean ± s [95% bootstrap interval]):\n\n"
               + table(scells, splits))
    entries = []
    for metric, cs in (("return", cells), ("success", scells)):
        for (m, s), c in sorted(cs.items(), key=lambda kv: (kv[0][1], order_key(kv[0][0]))):
            n = ncells.get((m, s)) if metric == "return" else None
            entries.append({"env": env, "split": s, "method": m, "name": display(m), "metric": metric,
                            "seeds": sorted((scores if metric == "return" else success)[(m, s)]), **c,
                            "normalised": {k: n[k] for k in ("mean", "std", "ci")} if n else None})
    part = {"cells": entries, "probability_of_improvement": [{"env": env, **e} for e in poi],
            "gaps": [{"env": env, **e} for e in gap]}
    if study["cells"]:  # only with budget results, so other folders' summary.json keeps its keys
        part.update({f"budget_{k}": [{"env": env, **e} for e in v] for k, v in study.items()})
    return md, part


def report_markdown(groups: dict, pairs: list = (), gaps: list = (), n_resamples: int = stats.N_RESAMPLES):
    """(markdown as written to table.md and into --doc files, summary.json's dict) of {env: rows}; several envs get
    one block each, headed by the env id."""
    blocks, summary = [], {"level": stats.CI_LEVEL, "resamples": n_resamples, "bootstrap_seed": stats.BOOT_SEED,
                           "cells": [], "probability_of_improvement": [], "gaps": []}
    for env, rows in groups.items():
        md, part = env_report(rows, env, list(pairs), list(gaps), n_resamples)
        if len(groups) > 1:
            slug = env_slug(env)
            figs = [f"fig4_{slug}.png"] + ([f"fig5_{slug}.png"] if figures.fig5_curves(figure_input(rows)) else []) \
                + ([f"budget_{slug}.png"] if "budget_cells" in part else [])
            md = f"## {env}\n\n{md}\n\nFigures of {env}: {', '.join(figs[:-1]) + ' and ' if len(figs) > 1 else ''}" \
                 f"{figs[-1]}."
        blocks.append(md)
        for k in part:
            summary.setdefault(k, [])
            summary[k] += part[k]
    return "\n\n".join(blocks), summary


# ------------------------------------------------------------------------------------------------- across tasks
def aggregate(folders, pairs: list = (), n_resamples: int = stats.N_RESAMPLES, files: list = None):
    """(aggregate.md text, aggregate.json dict) over the (task, split) strata of several folders (a task is an env)."""
    tasks = {}  # task -> (folder, rows)
    for folder in folders:
        for env, rows in by_env(load_results(folder, files)).items():
            task = folder if env == NO_ENV else env
            if task in tasks:
                raise ReportError(f"{folder}: env {task} is also in {tasks[task][0]}; give each env in one folder only")
            tasks[task] = (folder, rows)
    raw, normed, left_out = {}, {}, []  # (task, split) -> {method: [seed scores]}
    for task, (folder, rows) in tasks.items():
        scores = per_seed(rows)
        norm = normalise(scores)
        for split, _ in present_splits(rows):
            raw[(task, split)] = {m: list(v.values()) for (m, s), v in scores.items()
                                  if s == split and not m.startswith("reference_")}
            got = {m: list(v.values()) for (m, s), v in norm.items() if s == split}
            if got:
                normed[(task, split)] = got
            else:
                left_out.append([task, split])
    if not normed:
        raise ReportError(f"{', '.join(folders)}: no env and split has both reference runs (reference_expert, "
                          f"reference_random, with different returns); nothing to normalise")
    methods = sorted({m for st in normed.values() for m in st}, key=order_key)
    out = {"folders": list(folders), "level": stats.CI_LEVEL, "resamples": n_resamples,
           "bootstrap_seed": stats.BOOT_SEED, "strata": [list(k) for k in normed], "left_out": left_out, "methods": {},
           "probability_of_improvement": []}
    lines = ["| method | name | IQM | mean | runs | strata |", "|---|---|---|---|---|---|"]
    for m in methods:
        strata = [st[m] for st in normed.values() if m in st]
        q, q_ci = stats.bootstrap(strata, stats.iqm, n_resamples)
        mu, mu_ci = stats.bootstrap(strata, stats.mean, n_resamples)
        out["methods"][m] = {"name": display(m), "iqm": q, "iqm_ci": list(q_ci) if q_ci else None, "mean": mu,
                             "mean_ci": list(mu_ci) if mu_ci else None, "runs": sum(map(len, strata)),
                             "strata": len(strata)}
        lines.append(f"| {m} | {display(m)} | {q:.1f}{stats.ci_text(q_ci, 1)} | {mu:.1f}{stats.ci_text(mu_ci, 1)} "
                     f"| {sum(map(len, strata))} | {len(strata)} |")
    plines = ["| X vs Y | P(X > Y) | strata |", "|---|---|---|"]
    for x, y in method_pairs({m for st in raw.values() for m in st}, list(pairs)):
        both = [(st[x], st[y]) for st in raw.values() if x in st and y in st]
        if not both:
            continue
        p, ci = stats.probability_of_improvement(both, n_resamples)
        out["probability_of_improvement"].append({"x": x, "y": y, "p": p, "ci": list(ci) if ci else None,
                                                  "strata": len(both)})
        plines.append(f"| {x} vs {y} | {p:.2f}{stats.ci_text(ci)} | {len(both)} |")
    names = ", ".join(f"{t}/{s}" for t, s in normed)
    md = (f"Across tasks ({len(normed)} env/split strata: {names}; from {', '.join(folders)}). Per method, over all "
          f"its (env, split, seed) runs of the normalised score 100·(R − R_random)/(R_expert − R_random) (references "
          f"of the same env and split): the IQM (interquartile mean: the mean of the middle 50% of the runs, "
          f"{stats.IQM_CUT:.0%} cut from each end) and the mean, each [{stats.CI_LEVEL:.0%} stratified-bootstrap "
          f"interval: {n_resamples:,} resamples, seeds drawn with replacement inside each env and split, generator "
          f"seed {stats.BOOT_SEED}]; {UNDER_COVERS}. Methods measured on different strata are not comparable.\n\n"
          + "\n".join(lines))
    if len(plines) > 2:
        md += ("\n\nProbability of improvement P(X > Y) (rliable): per env and split, the fraction of (X seed, Y seed) "
               "pairs where X's return is higher, ties 1/2, averaged over the strata both methods have (references "
               "not needed), [stratified-bootstrap interval, X's and Y's seeds resampled independently]:\n\n"
               + "\n".join(plines))
    if left_out:
        md += "\n\nLeft out of the IQM (no usable reference runs): " + ", ".join(f"{t}/{s}" for t, s in left_out) + "."
    return md, out


# ------------------------------------------------------------------------------------------------- paper tables
def check_pattern(flag: str, pattern: str, needs: set, may: set) -> None:
    """One-line ValueError naming the flag unless `pattern` has every field of `needs` and no field outside `may`."""
    try:
        names = {f for _, f, _, _ in string.Formatter().parse(pattern) if f is not None}
    except ValueError:
        names = {""}
    if needs - names or names - may:
        fields = ", ".join("{" + n + "}" for n in sorted(may))
        raise ValueError(f"{flag} {pattern!r}: needs {', '.join('{' + n + '}' for n in sorted(needs))} and may only "
                         f"use the fields {fields}")


def paper_folders(number: int, pattern: str, c_pattern: str) -> dict:
    """{task: {column: folder}} of paper table `number`: `pattern` with the task's {benchmark} (dmc or cw) and {task};
    Table 7's column C = c is `c_pattern` with {folder} (the task's folder) and {c}, except the default feature set
    C = paper_results.DEFAULT_C, which is the task's folder itself (the folder of Tables 2 and 6)."""
    table = paper_results.TABLES[number]
    out = {}
    for task in table["rows"]:
        folder = pattern.format(benchmark=paper_results.benchmark(task), task=task)
        if number == 7:
            out[task] = {c: folder if c == paper_results.DEFAULT_C else c_pattern.format(folder=folder, c=c)
                         for c in table["columns"]}
        else:
            out[task] = {m: folder for m in table["columns"]}
    return out


def task_results(folder: str, env: str, files: list = None):
    """(rows of `env` in `folder`, the folder's PAPER_NOTE text or None). A missing folder, or one without result
    JSON, gives no rows (not run); a folder whose results are all of another env is an error (a wrong pattern)."""
    note = None
    if os.path.isfile(os.path.join(folder, PAPER_NOTE)):
        try:
            with open(os.path.join(folder, PAPER_NOTE), encoding="utf-8") as f:
                note = " ".join(f.read().split()) or None
        except (OSError, UnicodeDecodeError) as e:
            raise ReportError(f"{os.path.join(folder, PAPER_NOTE)}: cannot be read ({e})") from None
    if not os.path.isdir(folder):
        return [], note
    rows = load_results(folder, files, empty_ok=True)
    mine = [r for r in rows if r.get("env") in (env, None)]
    if rows and not mine:
        others = ", ".join(sorted({r["env"] for r in rows}))
        raise ReportError(f"{folder}: holds results of {others}, not {env}; check --results-pattern")
    return mine, note


def paper_rows(number: int, pattern: str, c_pattern: str, n_resamples: int = stats.N_RESAMPLES,
               files: list = None) -> list:
    """One dict per task row of paper table `number`: task, benchmark, split, notes [(folder, text)], tau (Kendall's
    τ-b of our means against the paper's over the columns we ran, or None), cells {column: {folder, method, seeds,
    steps (the runs' train_args.total_steps), episodes (evaluation episodes per run), ours (stats.cell of the seed
    returns, or None: not run), success (the same of fractional success, or None),
    paper (mean, s), rank (ours, among the columns we ran), paper_rank (among all the paper's columns)}}."""
    table, paper = paper_results.TABLES[number], paper_results.cells(number)
    loaded, out = {}, []
    for task, folders in paper_folders(number, pattern, c_pattern).items():
        bench = paper_results.benchmark(task)
        split, cells, notes = table["splits"][bench], {}, []
        for col, folder in folders.items():
            if folder not in loaded:
                rows, note = task_results(folder, f"{bench}:{task}", files)
                loaded[folder] = (rows, per_seed(rows), per_seed(rows, "success"), note)
            rows, returns, success, note = loaded[folder]
            if note and (folder, note) not in notes:
                notes.append((folder, note))
            method = "oilca" if number == 7 else col
            ret, suc = returns.get((method, split)), success.get((method, split))
            mine = [r for r in rows if (r["method"], r["split"]) == (method, split)]
            cells[col] = {"folder": folder, "method": method, "seeds": sorted(ret or {}), "scores": dict(ret or {}),
                          "steps": sorted({r.get("train_args", {}).get("total_steps") for r in mine} - {None}),
                          "episodes": sorted({len(r["returns"]) for r in mine}),
                          "fingerprints": sorted({r["dataset_fingerprint"] for r in mine
                                                  if isinstance(r.get("dataset_fingerprint"), str)}),
                          "ours": stats.cell(list(ret.values()), n_resamples) if ret else None,
                          "success": stats.cell(list(suc.values()), n_resamples) if suc else None,
                          "paper": paper[task][col]}
            if number == 7:  # the same folder's BC-exp (no c, no counterfactual rows) and the paired OILCA − BC-exp
                bc = returns.get(("bc_exp", split))
                cells[col]["bc_exp"] = stats.cell(list(bc.values()), n_resamples) if bc else None
                cells[col]["minus_bc_exp"] = stats.paired_gap(ret, bc, n_resamples) if ret and bc else None
        run = [c for c in cells if cells[c]["ours"]]
        # means are ordered at 9 decimals: two columns whose episodes return the same, to the bit, can differ in the
        # last float bits of their seed means (summation order), and that is no order (towers: do-nothing columns)
        level = {c: round(cells[c]["ours"]["mean"], 9) for c in run}
        ours = stats.ranks(level)
        theirs = stats.ranks({c: v["paper"][0] for c, v in cells.items()})
        for c, v in cells.items():
            v["rank"], v["paper_rank"] = ours.get(c), theirs[c]
        tau = stats.kendall_tau([level[c] for c in run], [cells[c]["paper"][0] for c in run])
        refs = {}  # the task folder's reference runs on this split (the first folder of the row holding them)
        for folder in dict.fromkeys(folders.values()):
            for kind in ("expert", "random"):
                v = loaded[folder][1].get((f"reference_{kind}", split))
                if v and kind not in refs:
                    refs[kind] = float(np.mean(list(v.values())))
        out.append({"task": task, "benchmark": bench, "split": split, "notes": notes, "tau": tau, "cells": cells,
                    "refs": refs})
    return out


def oilca_vs_dwbc(row: dict) -> tuple:
    """(ours, paper): `above`, `tie` or `below` for OILCA against DWBC on one task row; ours from the 95% bootstrap
    interval of the paired gap OILCA − DWBC over the seeds both have (the same data and training seed: above when the
    interval lies above 0, below when below, tie when it holds 0; `one seed` when they share fewer than two seeds,
    `not run` when either is missing), the paper's from mean ± s (it prints no seeds to pair)."""
    o, d = row["cells"]["oilca"], row["cells"]["dwbc"]
    if o["ours"] is None or d["ours"] is None:
        ours = "not run"
    else:
        gap = stats.paired_gap(o["scores"], d["scores"], N_ORDER_RESAMPLES)
        ours = "one seed" if gap is None or gap["ci"] is None else stats.interval_order(gap["ci"], (0.0, 0.0))
    (om, os_), (dm, ds) = o["paper"], d["paper"]
    return ours, stats.interval_order((om - os_, om + os_), (dm - ds, dm + ds))


def paper_counts(rows: list) -> dict:
    """{"ours": {verdict: tasks}, "paper": {verdict: tasks}} of oilca_vs_dwbc over the rows (every verdict present)."""
    out = {"ours": dict.fromkeys(PAPER_VERDICTS, 0), "paper": dict.fromkeys(PAPER_VERDICTS[:3], 0)}
    for row in rows:
        ours, theirs = oilca_vs_dwbc(row)
        out["ours"][ours] += 1
        out["paper"][theirs] += 1
    return out


def paper_cell_text(c: dict, n_run: int) -> str:
    """`ours <cell> (n seeds, rank r of n_run)<br>paper <mean ± s> (rank r)`; `not run` for ours without results."""
    m, s = c["paper"]
    ours = "not run"
    if c["ours"]:
        n = c["ours"]["n"]
        ours = f"ours {stats.cell_text(c['ours'])} ({n} seed{'s' if n > 1 else ''}, rank {c['rank']} of {n_run})"
    return f"{ours}<br>paper {m:.2f} ± {s:.2f} (rank {c['paper_rank']})"


def paper_header(number: int, rows: list, pattern: str, c_pattern: str, n_resamples: int) -> str:
    """What a paper table shows, where our numbers come from, and how the two scales are compared."""
    table, benches = paper_results.TABLES[number], {r["benchmark"] for r in rows}
    where = {"dmc": "DeepMind Control", "cw": "CausalWorld"}
    splits = "; ".join(f"{where[b]} rows: split `{s}`, {dict(ALL_SPLITS)[s]}" for b, s in table["splits"].items())
    source = f"the folder `{pattern}` of each task ({{benchmark}} is dmc or cw)"
    if number == 7:
        source = (f"the task folder `{pattern}` for C = {paper_results.DEFAULT_C} (the default feature set, as in "
                  f"Table 2) and `{c_pattern}` for every other C ({{folder}}: the task folder)")
    md = (f"{table['title']}: the paper's Table {number} (`{table['label']}`) with ours beside each cell. "
          f"{splits}; ours from {source}. Our cell is mean ± s [lo, hi] over training seeds of each seed's mean "
          f"episode return (s the sample std over seeds, [lo, hi] the {stats.CI_LEVEL:.0%} percentile-bootstrap interval of "
          f"the mean, {n_resamples:,} resamples, generator seed {stats.BOOT_SEED}; one seed: the mean alone), then the "
          f"seed count and our rank within the row among the columns we ran (1 = best); {UNDER_COVERS}. The paper's "
          f"cell is its mean ± s over five seeds as printed and its rank among all its columns of the row. τ is "
          f"Kendall's τ-b between our means and the paper's over the columns we ran (1: the same order, −1: the "
          f"reverse; needs two columns). Not run: no result of that method and split in the folder, or no folder.")
    ran = [c for r in rows for c in r["cells"].values() if c["ours"]]
    if ran:
        steps = ", ".join(f"{n:,}" for n in sorted({n for c in ran for n in c["steps"]})) or "unrecorded"
        episodes = ", ".join(str(n) for n in sorted({n for c in ran for n in c["episodes"]}))
        md += f" Our runs so far: {steps} policy gradient steps, {episodes} evaluation episodes per run."
    if "dmc" in benches:
        md += ("\n\nDeepMind Control rows: both are dm_control returns of 1,000-step episodes (reward in [0, 1] per "
               "step), so the raw numbers sit side by side, not normalised. Our env applies c-dependent Gaussian "
               "action perturbations (three classes, the same in the data and in evaluation; [dmc.md](dmc.md)), as "
               "the paper's data had three Gaussian noise distributions (c ∈ {0, 1, 2}).")
    if "cw" in benches:
        dwbc = ", and OILCA against DWBC inside each source" if "dwbc" in table["columns"] else ""
        md += ("\n\nCausalWorld rows: raw returns are not compared across, because the two are on different scales. "
               "Ours sum CausalWorld's default reward of each task over the episode (our datasets' episodes: pushing "
               "−5 … 15, reaching −116 … 452); the paper does not say which reward it sums, and its cells run up to "
               f"3,210. So the comparison is the order within each row: our rank against the paper's and τ{dwbc}. "
               "Our fractional success (CausalWorld's 0–1 score at the end of each episode, the results' `success`) "
               "follows in a second table; the paper reports none.")
    return md


def paper_summary(number: int, rows: list) -> str:
    """The OILCA-against-DWBC counts and how far the orders within the rows agree."""
    cols = paper_results.TABLES[number]["columns"]
    if "dwbc" in cols:
        k = paper_counts(rows)
        md = (f"OILCA against DWBC, tasks of {len(rows)}: above, tied or below. Ours: the {stats.CI_LEVEL:.0%} "
              f"bootstrap interval of the paired gap OILCA − DWBC over the training seeds both have (same data and "
              f"seed) lies above 0, holds 0, or lies below 0 (one seed: no interval); the paper's: OILCA's mean ± s "
              f"wholly above DWBC's, overlapping, or wholly below, since it prints neither seeds nor intervals:\n\n| source | above | tied | below | one seed | not run |\n|---|---|---|---|---|---|\n"
              "| ours | " + " | ".join(str(k["ours"][v]) for v in PAPER_VERDICTS) + " |\n"
              "| paper | " + " | ".join(str(k["paper"][v]) for v in PAPER_VERDICTS[:3]) + " | — | — |")
    else:
        md = "Table 7 has one method, OILCA, so it has no OILCA-against-DWBC count (Table 2 has it for C = 3)."
    ordered = [r for r in rows if sum(1 for c in r["cells"].values() if c["ours"]) >= 2]
    taus = [r["tau"] for r in ordered if r["tau"] is not None]
    if ordered:
        md += (f"\n\nOrder within the rows: {len(ordered)} of {len(rows)} rows have two columns run or more; among "
               f"them τ = 1 (the paper's order) in {sum(t == 1 for t in taus)}, 0 < τ < 1 in "
               f"{sum(0 < t < 1 for t in taus)}, τ ≤ 0 in {sum(t <= 0 for t in taus)}"
               + (f" (mean τ {np.mean(taus):.2f})." if taus else "."))
    else:
        md += "\n\nOrder within the rows: no row has two columns run yet, so there is no τ."
    if "oilca" in cols:
        ran = [r for r in ordered if r["cells"]["oilca"]["ours"]]
        if ran:
            md += (f" OILCA is first among the columns we ran in {sum(r['cells']['oilca']['rank'] == 1 for r in ran)}"
                   f" of the {len(ran)} rows where it ran beside another column.")
        md += (f" OILCA is the paper's first in {sum(r['cells']['oilca']['paper_rank'] == 1 for r in rows)} of "
               f"{len(rows)} rows.")
    return md


def references_table(number: int, rows: list) -> str:
    """Each row's reference runs (the expert, i.e. the data's best behaviour policy, and the uniform random policy,
    evaluated like every column) and the columns whose mean is not above random's: a row whose expert is not above
    random holds no expert behaviour and compares nothing."""
    cols = paper_results.TABLES[number]["columns"]
    lines = ["| task | expert reference | random reference | expert − random | columns not above random |",
             "|---|---|---|---|---|"]
    for row in rows:
        e, r = row["refs"].get("expert"), row["refs"].get("random")
        if e is None or r is None:
            lines.append(f"| {row['task']} | {'—' if e is None else f'{e:.2f}'} | {'—' if r is None else f'{r:.2f}'}"
                         f" | — | — |")
            continue
        low = [f"C = {c}" if number == 7 else display(c) for c in cols
               if row["cells"][c]["ours"] and row["cells"][c]["ours"]["mean"] <= r]
        gap = f"{e - r:.2f}" + (" (no expert behaviour: the row compares nothing)" if e <= r else "")
        lines.append(f"| {row['task']} | {e:.2f} | {r:.2f} | {gap} | {', '.join(low) or 'none'} |")
    return ("Reference runs of each row's folder (mean episode return over the seeds of the reference run, same split "
            "and evaluation episodes as the columns; Table 7: the C = 3 folder's):\n\n" + "\n".join(lines))


def same_data(row: dict, cols) -> list:
    """One sentence per group of a row's columns whose runs all trained on one and the same dataset (the
    dataset_fingerprint of their result JSON): such columns differ by training and evaluation noise only, not by
    their data (Table 7: feature sets whose extra variables never reach the data)."""
    groups = defaultdict(list)
    for c in cols:
        fps = row["cells"][c].get("fingerprints") or []
        if row["cells"][c]["ours"] and len(fps) == 1:
            groups[fps[0]].append(c)
    out = []
    for fp, same in groups.items():
        if len(same) > 1:
            names = " and ".join(f"C = {c}" if isinstance(c, int) else display(c) for c in same)
            out.append(f"{row['task']}: {names} trained on the same dataset (fingerprint `{fp}`), byte for byte, so "
                       f"the difference between them is training and evaluation noise, not the data")
    return out


def paper_markdown(number: int, rows: list, pattern: str, c_pattern: str,
                   n_resamples: int = stats.N_RESAMPLES) -> str:
    """The markdown of paper table `number` beside ours (rows from paper_rows): the header, the table (one row per
    task, one column per method or C, then τ), the rows' notes, the summary, our CausalWorld success, the paper's
    inconsistencies."""
    cols = paper_results.TABLES[number]["columns"]
    titles = " | ".join(f"C = {c}" if number == 7 else display(c) for c in cols)
    lines, notes = [f"| task | {titles} | τ |", "|---" * (len(cols) + 2) + "|"], []
    for row in rows:
        marks = ""
        for folder, text in row["notes"]:
            notes.append(f"[{len(notes) + 1}] `{folder}`: {text.rstrip('.')}")  # sentences end once, at the join
            marks += f" [{len(notes)}]"
        for text in (same_data(row, cols) if number == 7 else ()):  # other tables: one dataset per row by design
            notes.append(f"[{len(notes) + 1}] {text}")
            marks += f" [{len(notes)}]"
        n_run = sum(1 for c in row["cells"].values() if c["ours"])
        tau = "—" if row["tau"] is None else f"{row['tau']:.2f}"
        lines.append(f"| {row['task']}{marks} | " + " | ".join(paper_cell_text(row["cells"][c], n_run) for c in cols)
                     + f" | {tau} |")
    md = paper_header(number, rows, pattern, c_pattern, n_resamples) + "\n\n" + "\n".join(lines)
    if notes:
        md += "\n\nNotes: " + "; ".join(notes) + "."
    md += "\n\n" + references_table(number, rows)
    md += "\n\n" + paper_summary(number, rows)
    cw = [r for r in rows if r["benchmark"] == "cw"]
    if cw:
        lines = [f"| task | {titles} |", "|---" * (len(cols) + 1) + "|"]
        for row in cw:
            lines.append(f"| {row['task']} | " + " | ".join(
                f"{stats.cell_text(c['success'])} ({c['success']['n']})" if c["success"] else "not run"
                for c in (row["cells"][col] for col in cols)) + " |")
        md += ("\n\nOur fractional success on the CausalWorld rows (same split), mean ± s [95% bootstrap interval] "
               "(seeds):\n\n" + "\n".join(lines))
    if number == 7:
        lines = [f"| task | {titles} |", "|---" * (len(cols) + 1) + "|"]
        for row in [r for r in rows if sum(1 for c in r["cells"].values() if c.get("bc_exp")) >= 2]:
            for key, what in (("bc_exp", "BC-exp"), ("minus_bc_exp", "OILCA − BC-exp")):
                lines.append(f"| {row['task']}: {what} | " + " | ".join(
                    f"{stats.cell_text(c[key])} ({c[key]['n']})" if c.get(key) else "not run"
                    for c in (row["cells"][col] for col in cols)) + " |")
        md += ("\n\nBC-exp of each C's folder (trained on the same data without c or counterfactual rows) and the "
               "paired gap OILCA − BC-exp over the seeds both have (same split), mean ± s [95% bootstrap interval] "
               "(seeds), on the rows run at two feature sets or more: a change along C that BC-exp shares is a change of the data, not of OILCA's use of c.\n\n"
               + "\n".join(lines))
    slips = [v for (t, _, _), v in paper_results.MISMATCHES.items() if t == number]
    slips += list(paper_results.ODDITIES.get(number, ()))
    if slips:
        md += "\n\nThe paper's own inconsistencies in this table, kept as printed: " + "; ".join(slips) + "."
    return md


def main_paper_table(args: Args) -> str:
    if args.paper_table not in paper_results.TABLES:
        raise ValueError(f"--paper-table {args.paper_table}: the paper's tables are "
                         f"{', '.join(map(str, paper_results.TABLES))}")
    check_pattern("--results-pattern", args.results_pattern, {"task"}, {"task", "benchmark"})
    check_pattern("--c-pattern", args.c_pattern, {"c"}, {"c", "folder"})
    files = []
    rows = paper_rows(args.paper_table, args.results_pattern, args.c_pattern, args.resamples, files)
    md = paper_markdown(args.paper_table, rows, args.results_pattern, args.c_pattern, args.resamples)
    docs = prepare_docs(args.doc, f"paper table {args.paper_table}", md)
    contract.check_paths({"--results-pattern": files}, files={"--doc": list(args.doc)})
    with contract.together():  # every doc or none
        for path, text in docs.items():
            contract.save_text(path, text)
    print(md)
    if docs:
        print("table into " + ", ".join(docs))
    return md


# ------------------------------------------------------------------------------------------------- docs
def replace_blocks(path: str, text: str, is_open, is_close, md: str, open_text: str, close_text: str,
                   error=ValueError) -> str:
    """`text` with the lines between every opening line (`is_open(line)`) and the next closing line (`is_close`)
    replaced by `md`. `error(one line naming path)` when an opening has no closing, or when there is no block.
    (scripts/sampler_table.py fills its own markers with it.)"""
    lines, out, i, found = text.splitlines(keepends=True), [], 0, 0
    while i < len(lines):
        out.append(lines[i])
        i += 1
        if not is_open(lines[i - 1]):
            continue
        end = next((j for j in range(i, len(lines)) if is_close(lines[j])), None)
        if end is None:
            raise error(f"{path}: '{open_text}' has no '{close_text}' after it")
        if not out[-1].endswith("\n"):
            out[-1] += "\n"
        out.append("\n" + md.rstrip("\n") + "\n\n")
        i, found = end, found + 1
    if not found:
        raise error(f"{path}: no '{open_text}' ... '{close_text}' markers")
    return "".join(out)


def fill_doc(doc_path: str, text: str, results: str, md: str) -> str:
    """`text` with every block between `<!-- report: <results> -->` and `<!-- /report -->` replaced by `md`."""
    def opens(line: str) -> bool:
        m = DOC_OPEN.match(line)
        return bool(m) and (os.path.normpath(m.group(1)) == os.path.normpath(results)
                            or os.path.realpath(m.group(1)) == os.path.realpath(results))

    return replace_blocks(doc_path, text, opens, lambda line: bool(DOC_CLOSE.match(line)), md,
                          f"<!-- report: {results} -->", "<!-- /report -->", ReportError)


def prepare_docs(paths, results: str, md: str) -> dict:
    """{path: new text} for every --doc path; raises ReportError before anything is written."""
    out = {}
    for path in paths:
        try:
            with open(path, encoding="utf-8") as f:
                text = f.read()
        except (OSError, UnicodeDecodeError) as e:
            raise ReportError(f"{path}: cannot be read ({e.strerror if isinstance(e, OSError) else e})") from None
        out[path] = fill_doc(path, text, results, md)
    return out


# ------------------------------------------------------------------------------------------------- figures
def sizes_of(rows: list) -> dict:
    """{(method, split): |augmented D_E| / |D_U|} of the results that record it."""
    return {(r["method"], r["split"]): float(r["augmented_de_over_du"]) for r in rows
            if r.get("augmented_de_over_du") is not None}


def figure_input(rows: list) -> figures.EnvResults:
    """What figures.py draws from one env's rows: seed scores, splits, each result's augmented_de_over_du, names."""
    return figures.EnvResults(scores=per_seed(rows), splits=present_splits(rows), sizes=sizes_of(rows), name=display,
                              family=lambda m: split_ratio(m)[0])


def budget_of(summary: dict, env: str) -> dict:
    """One env's budget study (budget_study's dict) back from summary.json's budget_* entries."""
    return {k: [e for e in summary.get(f"budget_{k}", []) if e["env"] == env]
            for k in ("cells", "gaps", "probability_of_improvement")}


# ------------------------------------------------------------------------------------------------- main
def main_aggregate(args: Args, pairs: list) -> str:
    files = []
    md, out = aggregate(args.aggregate, pairs, args.resamples, files)
    docs = prepare_docs(args.doc, args.out, md)
    outputs = [os.path.join(args.out, name) for name in ("aggregate.md", "aggregate.json")]
    contract.check_paths({"--aggregate": files}, files={"--out": outputs, "--doc": list(args.doc)})
    contract.claim(outputs[0])
    with contract.together():  # aggregate.md, aggregate.json and the docs: all or none
        contract.save_text(outputs[0], md + "\n")
        contract.save_json(outputs[1], out)
        for path, text in docs.items():
            contract.save_text(path, text)
    print(md)
    print(f"wrote {outputs[0]}, {outputs[1]}" + "".join(f"; table into {p}" for p in docs))
    return md


# ------------------------------------------------------------------------------------------------- --check-docs
GENERATED = ("docs", "results", "README.md")  # what scripts/regenerate_tables.sh writes
STRICT_DOCS = ("README.md", "docs/*.md")  # pages whose prose may cite a number only through a generated block
BLOCK_OPEN = re.compile(r"^\s*<!--\s*([a-z-]+):.*-->\s*$|^\s*<!--\s*sampler-table\s*-->\s*$")
BLOCK_CLOSE = re.compile(r"^\s*<!--\s*/[a-z-]+\s*-->\s*$")
INLINE = re.compile(r"<!--\s*n:.*?<!--\s*/n\s*-->")  # an inline generated number (scripts/findings.py)
DECIMAL = re.compile(r"(?<![\w.])[−-]?\d+\.\d+(?![\w.])")


def hand_typed(text: str) -> list:
    """[(line number, number)] of the decimal numbers in `text` outside generated blocks (`<!-- name: … -->` …
    `<!-- /name -->`), inline generated numbers (`<!--n: … -->` … `<!--/n-->`), fenced code, inline code and link
    targets: the numbers a person typed by hand."""
    out, generated, fenced, open_code = [], False, False, False
    for n, line in enumerate(text.splitlines(), 1):
        if not line.strip():
            open_code = False  # a code span ends with its paragraph
        if open_code:
            line = "`" + line  # a code span opened on an earlier line of the paragraph
        if line.count("`") % 2 and not line.lstrip().startswith("```"):
            line, open_code = line + "`", True
        else:
            open_code = False
        if line.strip().startswith("```"):
            fenced = not fenced
            continue
        line = INLINE.sub("", line)  # an inline generated number is no block marker, and no hand-typed number
        if BLOCK_CLOSE.match(line):
            generated = False
            continue
        if BLOCK_OPEN.match(line):
            generated = True
            continue
        if generated or fenced:
            continue
        prose = re.sub(r"`[^`]*`", "", re.sub(r"\]\([^)]*\)", "]", INLINE.sub("", line)))
        out += [(n, m.group(0)) for m in DECIMAL.finditer(prose)]
    return out


def files_under(root: str, names) -> dict:
    """{relative path: bytes} of every file under root/<name> for each name (a file or a folder)."""
    out = {}
    for entry in names:
        top = os.path.join(root, entry)
        paths = [top] if os.path.isfile(top) else [os.path.join(d, f) for d, _, fs in os.walk(top) for f in fs]
        for path in paths:
            with open(path, "rb") as f:
                out[os.path.relpath(path, root)] = f.read()
    return out


def git_ignored(root: str, paths) -> set:
    """The paths (relative to root) that git ignores there (e.g. the figures under results/, which stay out of git and
    so are new in every fresh clone's regeneration); none outside a git checkout."""
    if not paths or not os.path.isdir(os.path.join(root, ".git")):
        return set()
    run = subprocess.run(["git", "check-ignore", "--stdin"], cwd=root, input="\n".join(sorted(paths)),
                         capture_output=True, text=True)
    return set(run.stdout.split("\n")) & set(paths)


def check_docs(root: str = ".") -> list:
    """The problems --check-docs finds (an empty list: none): files that regenerate differently, appear or vanish,
    and hand-typed decimals in STRICT_DOCS."""
    root = os.path.abspath(root)
    problems = []
    for doc in sorted({os.path.relpath(p, root) for pattern in STRICT_DOCS for p in glob.glob(os.path.join(root, pattern))}):
        with open(os.path.join(root, doc), encoding="utf-8") as f:
            problems += [f"{doc}:{n}: hand-typed number {x} (cite it through a generated block)"
                         for n, x in hand_typed(f.read())]
    scratch = tempfile.mkdtemp(prefix="oilca-check-docs-")
    try:
        for entry in os.listdir(root):
            if entry == ".git":
                continue
            src, dst = os.path.join(root, entry), os.path.join(scratch, entry)
            if entry in GENERATED:
                (shutil.copytree if os.path.isdir(src) else shutil.copy2)(src, dst)
            else:
                os.symlink(src, dst)
        env = {**os.environ, "NO_STATUS": "1", "PY": sys.executable}
        run = subprocess.run(["bash", "scripts/regenerate_tables.sh"], cwd=scratch, env=env,
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
        if run.returncode:
            tail = run.stderr.strip().splitlines()[-1:] or ["(no message)"]
            return problems + [f"scripts/regenerate_tables.sh failed (exit {run.returncode}): {tail[0]}"]
        before, after = files_under(root, GENERATED), files_under(scratch, GENERATED)
        problems += [f"{p}: differs when regenerated" for p in sorted(before.keys() & after.keys())
                     if before[p] != after[p]]
        new = sorted(set(after) - set(before) - git_ignored(root, set(after) - set(before)))
        problems += [f"{p}: written by the regeneration but not committed" for p in new]
        problems += [f"{p}: gone after the regeneration" for p in sorted(before.keys() - after.keys())]
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    return problems


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> str:
    checks.fields(args, resamples=checks.COUNT)
    if args.check_docs:
        problems = check_docs()
        for p in problems:
            print(p)
        if problems:
            raise SystemExit(f"report.py --check-docs: {len(problems)} problem(s), listed above")
        print("report.py --check-docs: every generated table, figure and doc block is up to date; README.md and "
              "docs/*.md cite no hand-typed number")
        return ""
    pairs, gaps = parse_pairs("--pairs", args.pairs), parse_pairs("--gaps", args.gaps)
    if args.paper_table is not None:
        return main_paper_table(args)
    if args.aggregate:
        return main_aggregate(args, pairs)
    files = []
    groups = by_env(load_results(args.results, files))
    md, summary = report_markdown(groups, pairs, gaps, args.resamples)
    docs = prepare_docs(args.doc, args.results, md)  # every check before the first write
    figs = {env: [os.path.join(args.results, f"{k}.png" if len(groups) == 1 else f"{k}_{env_slug(env)}.png")
                  for k in ("fig4", "fig5", "budget")] for env in groups}
    studies = {env: budget_of(summary, env) for env in groups}
    for env, study in studies.items():
        if not study["cells"]:
            figs[env].pop()  # no budget results: no budget figure
    outputs = [os.path.join(args.results, name) for name in ("table.md", "summary.json")]
    contract.check_paths({"--results": files}, files={"--results": outputs + [p for f in figs.values() for p in f],
                                                      "--doc": list(args.doc)})
    contract.claim(outputs[0])  # a second report into the same folder is refused while this one runs
    written = []
    with contract.together():  # table.md, summary.json, the figures and the docs: all of them or none (full disk)
        contract.save_text(outputs[0], md + "\n")
        contract.save_json(outputs[1], summary)
        for env, rows in groups.items():
            data = figure_input(rows)
            figures.fig4(data, figs[env][0], args.resamples)
            written.append(os.path.basename(figs[env][0]))
            if figures.fig5(data, figs[env][1], args.resamples):
                written.append(os.path.basename(figs[env][1]))
            if studies[env]["cells"]:
                figures.budget(studies[env], data.splits, display, figs[env][2])
                written.append(os.path.basename(figs[env][2]))
        for path, text in docs.items():
            contract.save_text(path, text)
    print(md)
    print(f"wrote {args.results}/table.md, summary.json, {', '.join(written)}"
          + "".join(f"; table into {p}" for p in docs))
    return md


if __name__ == "__main__":
    cli.run(main, Args, refused=(ValueError, KeyError))
