"""Rebuild the result table and figures from evaluate.py's JSON files alone (one file per method, seed, split).

Table: per method and split, the mean over seeds of each seed's mean episode return, ± the population std over
seeds, and in brackets the 95% confidence interval of that mean (Student t: mean ± t_{0.975, n-1} · s / √n, s the
sample std over seeds; no interval with one seed), then the number of seeds. The best learned method of each
column is in bold (reference policies are not ranked).
Fig. 4: returns per method, one panel per split (training classes of c and the held-out class, or CausalWorld's
spaces A and B); each method X stands next to X+CA (hatched), bars are means over seeds, error bars 95% CIs,
dots seeds. The y-axis is scaled to the methods: a reference policy that would squeeze them (typically random)
is left off the axis and its value given in the legend.
Fig. 5: OILCA's return against the size of the augmented expert set, |augmented D_E| / |D_U| (DWBC is the point
with no augmented row), over the seeds that have every point, with BC-exp as a reference line.

Usage: python report.py --results results/toy      writes table.md, fig4.png, fig5.png there and prints the table.
       python report.py --results results/toy --doc docs/toy.md
                                                   also puts the table between `<!-- report: results/toy -->` and
                                                   `<!-- /report -->` in docs/toy.md.
Bad input (no result JSON, a file that is not valid JSON or not a valid result, a NaN or infinite number in one,
two files for the same method, seed and split, a doc without the markers, an output that cannot be written) stops
with one line on stderr naming the file, before anything is written.
"""

import glob
import json
import math
import os
import re
import sys
from collections import defaultdict
from dataclasses import dataclass
from typing import Tuple

import numpy as np
import tyro

import contract

MAIN_METHODS = ("bc_exp", "bc_all", "oril", "bcnd", "lobsdice", "dwbc", "oril_ca", "bcnd_ca", "oilca")  # table order
# Fig. 4: each method X beside X+CA (the same learner on OILCA's augmented data; OILCA is DWBC+CA)
FIG4_GROUPS = (("bc_exp",), ("bc_all",), ("oril", "oril_ca"), ("bcnd", "bcnd_ca"), ("lobsdice",), ("dwbc", "oilca"))
DISPLAY = {"bc_exp": "BC-exp", "bc_all": "BC-all", "oril": "ORIL", "oril_ca": "ORIL+CA", "bcnd": "BCND",
           "bcnd_ca": "BCND+CA", "lobsdice": "LobsDICE", "dwbc": "DWBC", "oilca": "OILCA"}
ALL_SPLITS = (("train", "in-distribution (training c)"), ("heldout", "out-of-distribution (held-out c)"),
              ("A", "space A (in-distribution)"), ("B", "space B (out-of-distribution)"))
CI_LEVEL = 0.95
MIN_METHOD_FRACTION = 0.5  # Fig. 4: a reference line (or 0) joins the y-axis only if the methods still fill half of it
DOC_OPEN = re.compile(r"^\s*<!--\s*report:\s*(.*?)\s*-->\s*$")
DOC_CLOSE = re.compile(r"^\s*<!--\s*/report\s*-->\s*$")


class ReportError(ValueError):
    """Bad input; the message is one line that names the folder or file and the problem."""


class NonFinite(Exception):
    """A NaN or Infinity token in a result JSON."""


def _refuse_constant(name: str):
    raise NonFinite(name)


@dataclass
class Args:
    results: str = "results/toy"
    """folder of evaluate.py's JSON files; the table and figures are written there"""
    doc: Tuple[str, ...] = ()
    """markdown docs whose text between `<!-- report: <results> -->` and `<!-- /report -->` is replaced by the table"""


def present_splits(rows: list) -> tuple:
    """The splits that occur in the results, in the order of ALL_SPLITS (e.g. train/heldout or A/B)."""
    have = {r["split"] for r in rows}
    return tuple(s for s in ALL_SPLITS if s[0] in have)


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
    if not _numbers(r["returns"]):
        raise ReportError(f"{path}: 'returns' must be a non-empty list of finite numbers")
    if r.get("success") is not None and not _numbers(r["success"]):
        raise ReportError(f"{path}: 'success' must be a non-empty list of finite numbers (or absent)")
    for key in ("mean_return", "std_return", "mean_success"):
        if key in r and r[key] is not None and not _numbers([r[key]]):
            raise ReportError(f"{path}: '{key}' must be a finite number, got {r[key]!r}")
    x = r.get("augmented_de_over_du")
    if x is not None and (not isinstance(x, (int, float)) or isinstance(x, bool) or not math.isfinite(x)):
        raise ReportError(f"{path}: 'augmented_de_over_du' must be a finite number (or absent)")


def load_results(folder: str) -> list:
    """The result rows of `folder` (JSON objects with method, seed, split, returns; other JSON such as timing.json
    is skipped). Raises ReportError on a missing folder, invalid JSON, a malformed result, duplicates, no result."""
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
            continue  # not a result (e.g. timing.json)
        missing = sorted({"method", "seed", "split", "returns"} - set(r))
        if missing:
            raise ReportError(f"{path}: result JSON without {', '.join(missing)}")
        check_row(path, r)
        key = (r["method"], r["seed"], r["split"])
        if key in seen:
            raise ReportError(f"{folder}: {os.path.basename(seen[key])} and {os.path.basename(path)} both hold "
                              f"method {key[0]}, seed {key[1]}, split {key[2]}")
        seen[key] = path
        rows.append(r)
    if not rows:
        raise ReportError(f"{folder}: no result JSON (objects with method, seed, split, returns)")
    envs = sorted({str(r.get("env")) for r in rows if r.get("env") is not None})
    if len(envs) > 1:
        raise ReportError(f"{folder}: results from several envs ({', '.join(envs)}); one folder per benchmark")
    return rows


# ------------------------------------------------------------------------------------------------- statistics
def per_seed(rows: list, key: str = "returns") -> dict:
    """{(method, split): {seed: mean return}} (key="success": mean fractional success, CausalWorld)"""
    out = defaultdict(dict)
    for r in rows:
        if r.get(key) is not None:
            out[(r["method"], r["split"])][r["seed"]] = float(np.mean(r[key]))
    return out


def t_interval(values, level: float = CI_LEVEL):
    """(low, high) of the Student t confidence interval of the mean of `values` (sample std, ddof=1);
    None for fewer than two values."""
    from scipy import stats

    v = np.asarray(values, dtype=np.float64)
    if len(v) < 2:
        return None
    half = stats.t.ppf(0.5 + level / 2, len(v) - 1) * v.std(ddof=1) / math.sqrt(len(v))
    return float(v.mean() - half), float(v.mean() + half)


def cell_text(values) -> str:
    """'mean ± std' (population std over seeds, 2 decimals), then the 95% t interval in brackets (two seeds or more)."""
    v = np.asarray(values, dtype=np.float64)
    text = f"{v.mean():.2f} ± {v.std():.2f}"
    ci = t_interval(v)
    return text + (f" [{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "")


def table(rows: list, key: str = "returns") -> str:
    SPLITS = present_splits(rows)
    scores = per_seed(rows, key)
    methods = [m for m in MAIN_METHODS if any((m, s) in scores for s, _ in SPLITS)]
    methods += sorted({m for m, s in scores if m not in methods and not m.startswith("reference_")
                       and s in dict(SPLITS)})
    refs = sorted({m for m, s in scores if m.startswith("reference_") and s in dict(SPLITS)})
    best = {}
    for split, _ in SPLITS:
        means = {m: np.mean(list(scores[(m, split)].values())) for m in methods if (m, split) in scores}
        best[split] = max(means, key=means.get) if means else None
    lines = ["| method | " + " | ".join(title for _, title in SPLITS) + " | seeds |", "|---" * (len(SPLITS) + 2) + "|"]
    for m in methods + refs:
        cells, n = [], 0
        for split, _ in SPLITS:
            vals = list(scores.get((m, split), {}).values())
            n = max(n, len(vals))
            cell = cell_text(vals) if vals else "—"
            cells.append(f"**{cell}**" if m == best[split] and vals else cell)
        lines.append(f"| {m} | " + " | ".join(cells) + f" | {n} |")
    return "\n".join(lines)


def _one_or_all(rows: list, field: str) -> str:
    vals = sorted({str(r[field]) for r in rows if r.get(field) is not None})
    return vals[0] if len(vals) == 1 else (", ".join(vals) if vals else "not recorded")


def header(rows: list) -> str:
    env = _one_or_all(rows, "env")
    return (f"Returns on {env}: mean ± std over seeds of each seed's mean episode return (std: population std over "
            f"seeds), [in brackets] the {CI_LEVEL:.0%} confidence interval of that mean (Student t: mean ± "
            f"t_0.975,n-1 · s/√n, s the sample std over the n seeds; none with one seed); bold: the best learned "
            f"method of each column ({_one_or_all(rows, 'episodes')} episodes per split, evaluation seed "
            f"{_one_or_all(rows, 'eval_seed')}).\n\n")


def report_markdown(rows: list) -> str:
    """Header line and table(s), as written to table.md and into --doc files."""
    md = header(rows) + table(rows)
    if any(r.get("success") is not None for r in rows):
        md += ("\n\nFractional success (CausalWorld), same statistics (mean ± std over seeds [95% t interval]):\n\n"
               + table(rows, "success"))
    return md


# ------------------------------------------------------------------------------------------------- docs
def fill_doc(doc_path: str, text: str, results: str, md: str) -> str:
    """`text` with every block between `<!-- report: <results> -->` and `<!-- /report -->` replaced by `md`."""
    def same_folder(a: str) -> bool:
        return (os.path.normpath(a) == os.path.normpath(results)
                or os.path.realpath(a) == os.path.realpath(results))

    lines, out, i, found = text.splitlines(keepends=True), [], 0, 0
    while i < len(lines):
        m = DOC_OPEN.match(lines[i])
        out.append(lines[i])
        i += 1
        if not (m and same_folder(m.group(1))):
            continue
        end = next((j for j in range(i, len(lines)) if DOC_CLOSE.match(lines[j])), None)
        if end is None:
            raise ReportError(f"{doc_path}: '<!-- report: {m.group(1)} -->' has no '<!-- /report -->' after it")
        if not out[-1].endswith("\n"):
            out[-1] += "\n"
        out.append("\n" + md.rstrip("\n") + "\n\n")
        i, found = end, found + 1
    if not found:
        raise ReportError(f"{doc_path}: no '<!-- report: {results} -->' ... '<!-- /report -->' markers")
    return "".join(out)


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


def fig4(rows: list, path: str) -> dict:
    """Write Fig. 4; returns {"ylim": (lo, hi), "off_scale": {split: [reference, ...]}} for checks."""
    from matplotlib.lines import Line2D
    from matplotlib.patches import Patch

    plt = _pyplot()
    SPLITS = present_splits(rows)
    scores = per_seed(rows)
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
    stats = {}  # (method, split) -> (mean, ci or None, seed values)
    spans = []
    for split, _ in SPLITS:
        for _, m, _, _ in slots:
            vals = list(scores.get((m, split), {}).values())
            if vals:
                ci = t_interval(vals)
                stats[(m, split)] = (float(np.mean(vals)), ci, vals)
                spans += vals + [float(np.mean(vals))] + (list(ci) if ci else [])
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
            if (m, split) not in stats:
                continue
            mean, ci, vals = stats[(m, split)]
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
        ax.set_xticks([s[0] for s in slots], [DISPLAY.get(s[1], s[1]) for s in slots], rotation=35, ha="right",
                      fontsize=8)
        ax.set_title(title, fontsize=10)
        ax.set_ylim(*ylim)
        if ylim[0] < base < ylim[1]:
            ax.axhline(base, color="k", lw=0.6)
        if handles:
            ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.24), ncol=2,
                      frameon=False)
    axes[0].set_ylabel(f"return: mean over seeds\n(error bars: {CI_LEVEL:.0%} t interval; dots: seeds)", fontsize=9)
    fig.tight_layout()
    contract.save_figure(path, fig)
    plt.close(fig)
    return {"ylim": ylim, "off_scale": off_scale}


def fig5(rows: list, path: str) -> bool:
    """Write Fig. 5 when DWBC / OILCA results at two sizes or more share seeds; returns whether it was written."""
    from matplotlib.lines import Line2D

    points = defaultdict(lambda: defaultdict(dict))  # split -> x -> seed -> return
    dwbc_x = {}  # split -> x of the DWBC (no augmentation) point
    for r in rows:
        if (r["method"] == "dwbc" or r["method"].startswith("oilca")) and r.get("augmented_de_over_du") is not None:
            x = round(float(r["augmented_de_over_du"]), 3)
            points[r["split"]][x][r["seed"]] = float(np.mean(r["returns"]))
            if r["method"] == "dwbc":
                dwbc_x[r["split"]] = x
    scores = per_seed(rows)
    curves = []
    for i, (split, title) in enumerate(present_splits(rows)):
        xs = sorted(points[split])
        if len(xs) < 2:
            continue
        seeds = sorted(set.intersection(*(set(points[split][x]) for x in xs)))
        if seeds:
            curves.append((i, split, title, xs, seeds))
    if not curves:
        return False
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6, 4.2))
    dwbc_points = []
    span = max(x for c in curves for x in c[3]) - min(x for c in curves for x in c[3])
    for k, (i, split, title, xs, seeds) in enumerate(curves):
        color = f"C{i}"
        dodge = 0.012 * span * (k - (len(curves) - 1) / 2)  # splits side by side at the same x, for legibility
        ys = np.array([[points[split][x][s] for s in seeds] for x in xs])
        means = ys.mean(1)
        cis = [t_interval(y) for y in ys]
        yerr = np.array([[m - c[0], c[1] - m] if c else [0.0, 0.0] for m, c in zip(means, cis)]).T
        is_dwbc = np.array([x == dwbc_x.get(split) for x in xs])
        xs_a = np.asarray(xs) + dodge
        ax.plot(xs_a, means, color=color, lw=1.2, label=f"{title} (seeds {','.join(map(str, seeds))})")
        ax.errorbar(xs_a[~is_dwbc], means[~is_dwbc], yerr=yerr[:, ~is_dwbc], fmt="o", color=color, capsize=3)
        if is_dwbc.any():
            ax.errorbar(xs_a[is_dwbc], means[is_dwbc], yerr=yerr[:, is_dwbc], fmt="s", mfc="white", color=color,
                        capsize=3, ms=7)
            dwbc_points.append((float(xs_a[is_dwbc][0]), float(means[is_dwbc][0])))
        bc = scores.get(("bc_exp", split), {})
        if bc:
            use = [s for s in seeds if s in bc] or sorted(bc)
            ax.axhline(np.mean([bc[s] for s in use]), color=color, ls="-.", lw=1.0,
                       label=f"BC-exp, {split} (seeds {','.join(map(str, use))})")
    if dwbc_points:
        x0, y0 = max(dwbc_points, key=lambda p: p[1])
        ylo, yhi = ax.get_ylim()
        xlo, xhi = ax.get_xlim()
        text_xy = (x0 + 0.08 * (xhi - xlo), y0 + 0.08 * (yhi - ylo))
        for k, (x, y) in enumerate(dwbc_points):
            ax.annotate("DWBC (no augmentation)" if k == 0 else "", xy=(x, y), xytext=text_xy, fontsize=8,
                        arrowprops=dict(arrowstyle="->", color="k", lw=0.8))
    handles, labels = ax.get_legend_handles_labels()
    handles += [Line2D([], [], ls="none", marker="s", mfc="white", mec="k", label="DWBC (no augmentation)"),
                Line2D([], [], ls="none", marker="o", color="k", label="OILCA")]
    ax.set_xlabel("|augmented D_E| / |D_U|")
    ax.set_ylabel(f"return: mean over seeds\n(error bars: {CI_LEVEL:.0%} t interval)", fontsize=9)
    ax.legend(handles=handles, fontsize=7, loc="upper center", bbox_to_anchor=(0.5, -0.18), ncol=2, frameon=False)
    fig.tight_layout()
    contract.save_figure(path, fig)
    plt.close(fig)
    return True


# ------------------------------------------------------------------------------------------------- main
@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> str:
    rows = load_results(args.results)
    md = report_markdown(rows)
    docs = prepare_docs(args.doc, args.results, md)  # every check before the first write
    outputs = [os.path.join(args.results, name) for name in ("table.md", "fig4.png", "fig5.png")]
    contract.check_paths({}, files={"--results": outputs, "--doc": list(args.doc)})
    contract.claim(outputs[0])  # a second report into the same folder is refused while this one runs
    contract.save_text(os.path.join(args.results, "table.md"), md + "\n")
    fig4(rows, os.path.join(args.results, "fig4.png"))
    has5 = fig5(rows, os.path.join(args.results, "fig5.png"))
    for path, text in docs.items():
        contract.save_text(path, text)
    print(md)
    print(f"wrote {args.results}/table.md, fig4.png" + (", fig5.png" if has5 else "")
          + "".join(f"; table into {p}" for p in docs))
    return md


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except (ValueError, KeyError) as e:
        sys.exit(f"error: {e}")
