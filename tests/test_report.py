"""report.py on hand-made result JSON: the t interval, the table cells, bold, --doc, bad input, Fig. 4 / Fig. 5."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy import stats

import report
from conftest import ROOT

PNG = b"\x89PNG\r\n\x1a\n"


def result(method, seed, split, mean, env="toy", spread=1.0, **extra):
    """A result row whose episode returns average exactly `mean`."""
    return {"method": method, "seed": seed, "split": split, "env": env, "episodes": 2, "eval_seed": 10000,
            "returns": [mean - spread, mean + spread], **extra}


def write(folder, rows):
    os.makedirs(folder, exist_ok=True)
    for r in rows:
        with open(os.path.join(folder, f"{r['method']}_s{r['seed']}_{r['split']}.json"), "w") as f:
            json.dump(r, f)
    return str(folder)


def toy_rows(random_mean=-40.0):
    rows = []
    for split, shift in (("train", 0.0), ("heldout", -1.0)):
        for s, m in enumerate([1.0, 2.0, 3.0, 4.0, 5.0]):
            rows.append(result("bc_exp", s, split, -10.0 + m + shift))  # seed means -9 .. -5
        for s, m in enumerate([-7.0, -6.0, -4.0]):
            rows.append(result("oilca", s, split, m + shift, augmented_de_over_du=0.5))
        for s, m in enumerate([-15.0, -12.0, -13.0]):
            rows.append(result("dwbc", s, split, m + shift, augmented_de_over_du=0.05))
        for s, m in enumerate([-6.5, -5.5]):
            rows.append(result("oilca_r1.0", s, split, m + shift, augmented_de_over_du=1.0))
        rows.append(result("reference_expert", 0, split, -3.0 + shift))  # better than every method: never bold
        rows.append(result("reference_random", 0, split, random_mean + shift))
    return rows


# ------------------------------------------------------------------------------------------------- statistics
def test_t_interval_is_the_student_t_interval_of_the_mean():
    lo, hi = report.t_interval([1, 2, 3, 4, 5])
    half = stats.t.ppf(0.975, 4) * math.sqrt(2.5) / math.sqrt(5)  # sample std of 1..5 is sqrt(2.5)
    assert lo == pytest.approx(3 - half, abs=1e-12) and hi == pytest.approx(3 + half, abs=1e-12)
    assert half == pytest.approx(1.963243, abs=1e-6)  # t_{0.975,4} = 2.776445, not the normal 1.96 · s/√n
    lo, hi = report.t_interval([2.0, 4.0])  # n = 2: t_{0.975,1} = 12.706, s = sqrt(2)
    assert (lo, hi) == pytest.approx((3 - 12.706205 * 1.0, 3 + 12.706205 * 1.0), abs=1e-5)
    assert report.t_interval([7.0]) is None


def test_cell_text_keeps_mean_pm_population_std_then_the_interval():
    assert report.cell_text([1, 2, 3, 4, 5]) == "3.00 ± 1.41 [1.04, 4.96]"  # ± ddof=0 std; brackets t interval
    assert report.cell_text([-8.0]) == "-8.00 ± 0.00"  # one seed: no interval


def test_table_cells_bold_and_header(tmp_path):
    rows = toy_rows()
    md = report.table(rows)
    lines = md.splitlines()
    assert lines[0] == "| method | in-distribution (training c) | out-of-distribution (held-out c) | seeds |"
    bc = [l for l in lines if l.startswith("| bc_exp |")][0]
    # seed means -9..-5 (train) and -10..-6 (heldout); t interval half-width 1.963243
    assert bc == "| bc_exp | -7.00 ± 1.41 [-8.96, -5.04] | -8.00 ± 1.41 [-9.96, -6.04] | 5 |"
    oilca = [l for l in lines if l.startswith("| oilca |")][0]
    assert oilca.startswith("| oilca | **-5.67 ± 1.25 [") and oilca.count("**") == 4  # best learned method, both columns
    assert "| reference_expert | -3.00 ± 0.00 | -4.00 ± 0.00 | 1 |" in lines  # best overall but not ranked, no interval
    assert sum(l.count("**") for l in lines) == 4
    head = report.header(rows)
    assert head.startswith("Returns on toy: mean ± std over seeds") and "95% confidence interval" in head
    assert "Student t" in head and "2 episodes per split" in head and "evaluation seed 10000" in head


# ------------------------------------------------------------------------------------------------- CLI, docs
def test_main_writes_table_figures_and_doc(tmp_path, capsys):
    folder = write(tmp_path / "results", toy_rows())
    with open(os.path.join(folder, "timing.json"), "w") as f:
        json.dump({"total": 3}, f)  # not a result: skipped
    doc = tmp_path / "toy.md"
    doc.write_text(f"# Toy\n\nbefore\n<!-- report: {folder} -->\nstale table\n<!-- /report -->\nafter\n")
    md = report.main(report.Args(results=folder, doc=(str(doc),)))
    out = capsys.readouterr().out
    assert "| oilca |" in out and "**" in out
    assert open(os.path.join(folder, "table.md")).read() == md + "\n"
    for name in ("fig4.png", "fig5.png"):
        with open(os.path.join(folder, name), "rb") as f:
            assert f.read(8) == PNG
    text = doc.read_text()
    assert text == f"# Toy\n\nbefore\n<!-- report: {folder} -->\n\n{md}\n\n<!-- /report -->\nafter\n"
    assert "stale table" not in text
    report.main(report.Args(results=folder, doc=(str(doc),)))  # a second run leaves the doc as it is
    assert doc.read_text() == text


def test_doc_without_markers_is_an_error_that_writes_nothing(tmp_path):
    folder = write(tmp_path / "results", toy_rows())
    good, bad = tmp_path / "good.md", tmp_path / "bad.md"
    good.write_text(f"<!-- report: {folder} -->\nold\n<!-- /report -->\n")
    bad.write_text("<!-- report: results/elsewhere -->\nold\n<!-- /report -->\n")
    with pytest.raises(report.ReportError, match="bad.md: no '<!-- report: "):
        report.main(report.Args(results=folder, doc=(str(good), str(bad))))
    assert good.read_text() == f"<!-- report: {folder} -->\nold\n<!-- /report -->\n"  # the good doc is untouched too
    assert not any(os.path.exists(os.path.join(folder, n)) for n in ("table.md", "fig4.png", "fig5.png"))
    unclosed = tmp_path / "unclosed.md"
    unclosed.write_text(f"<!-- report: {folder} -->\nold\n")
    with pytest.raises(report.ReportError, match="no '<!-- /report -->'"):
        report.main(report.Args(results=folder, doc=(str(unclosed),)))


def test_bad_input_is_one_line_on_stderr_and_writes_nothing(tmp_path):
    folder = write(tmp_path / "results", toy_rows())
    with open(os.path.join(folder, "broken.json"), "w") as f:
        f.write('{"method": "dwbc", "seed": ')
    doc = tmp_path / "doc.md"
    doc.write_text(f"<!-- report: {folder} -->\n<!-- /report -->\n")
    proc = subprocess.run([sys.executable, "report.py", "--results", folder, "--doc", str(doc)], cwd=ROOT,
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and len(proc.stderr.strip().splitlines()) == 1
    assert "broken.json" in proc.stderr and "not valid JSON" in proc.stderr
    names = [f"{r['method']}_s{r['seed']}_{r['split']}.json" for r in toy_rows()] + ["broken.json"]
    assert sorted(os.listdir(folder)) == sorted(names)  # no table.md, no figures
    assert doc.read_text() == f"<!-- report: {folder} -->\n<!-- /report -->\n"


@pytest.mark.parametrize("case, words", [
    ("empty", "no result JSON"),
    ("missing", "no such folder"),
    ("no_returns", "'returns' must be a non-empty list"),
    ("nan", "holds the non-finite number NaN"),
    ("no_seed", "result JSON without seed"),
    ("duplicate", "both hold method bc_exp, seed 0, split train"),
    ("two_envs", "several envs"),
])
def test_bad_results_folders(tmp_path, case, words):
    folder = tmp_path / "results"
    if case != "missing":
        folder.mkdir()
    rows = {"empty": [], "missing": [], "no_returns": [result("bc_exp", 0, "train", 1.0) | {"returns": []}],
            "nan": [result("bc_exp", 0, "train", 1.0) | {"returns": [1.0, float("nan")]}],
            "no_seed": [{k: v for k, v in result("bc_exp", 0, "train", 1.0).items() if k != "seed"}],
            "duplicate": [result("bc_exp", 0, "train", 1.0)],
            "two_envs": [result("bc_exp", 0, "train", 1.0), result("bc_all", 0, "train", 1.0, env="dmc:walker-stand")]}[case]
    for i, r in enumerate(rows):
        with open(folder / f"r{i}.json", "w") as f:
            json.dump(r, f)
    if case == "duplicate":
        with open(folder / "copy.json", "w") as f:
            json.dump(rows[0], f)
    with pytest.raises(report.ReportError, match=words) as err:
        report.main(report.Args(results=str(folder)))
    assert "\n" not in str(err.value) and str(folder) in str(err.value)
    assert not (folder / "table.md").exists()


# ------------------------------------------------------------------------------------------------- figures
def test_fig4_scales_to_the_methods_not_to_a_far_random_reference(tmp_path):
    rows = toy_rows(random_mean=-40.0)
    info = report.fig4(rows, str(tmp_path / "fig4.png"))
    lo, hi = info["ylim"]
    dots = [np.mean(r["returns"]) for r in rows if not r["method"].startswith("reference_")]
    assert lo <= min(dots) and max(dots) <= hi  # every seed dot (and so every bar) on the axis
    for split, _ in report.present_splits(rows):
        lo_ci = min(report.t_interval(list(report.per_seed(rows)[(m, split)].values()))[0] for m in ("bc_exp", "oilca", "dwbc"))
        assert lo <= lo_ci  # and every CI
    assert lo > -40.0 and lo > -41.0  # random (-40 train, -41 heldout) left off the axis ...
    assert info["off_scale"] == {"train": ["random"], "heldout": ["random"]}  # ... and named as such; expert kept
    assert hi >= -3.0  # the expert line (-3) is on the axis
    assert open(tmp_path / "fig4.png", "rb").read(8) == PNG
    # a random reference close to the methods stays on the axis
    info = report.fig4(toy_rows(random_mean=-18.0), str(tmp_path / "near.png"))
    assert info["ylim"][0] <= -19.0 and info["off_scale"] == {"train": [], "heldout": []}


def test_fig4_limits_rule():
    (lo, hi), off = report.fig4_limits([-10.0, -5.0], {"zero": 0.0, "random": -40.0, "expert": -4.0})
    assert off == ["random"] and lo < -10.0 and hi > 0.0 and lo > -11.0
    (lo, hi), off = report.fig4_limits([200.0, 450.0], {"zero": 0.0, "random": 30.0, "expert": 810.0})
    assert off == ["expert"] and lo < 0.0 and 450.0 < hi < 810.0  # methods fill >= half of the axis


def test_fig5_needs_two_sizes_on_shared_seeds(tmp_path):
    rows = toy_rows()
    assert report.fig5(rows, str(tmp_path / "fig5.png"))
    assert open(tmp_path / "fig5.png", "rb").read(8) == PNG
    only_bc = [r for r in rows if r["method"] in ("bc_exp", "reference_random")]
    assert not report.fig5(only_bc, str(tmp_path / "none.png")) and not (tmp_path / "none.png").exists()


def test_cli_help():
    proc = subprocess.run([sys.executable, "report.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and "--results" in proc.stdout and "--doc" in proc.stdout


# ------------------------------------------------------------------------------------------------- return_hist.py
def test_return_hist_legend_is_in_numeric_order():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    import return_hist

    behaviors = [{"name": "snapshot", "train_step": 100000}, {"name": "snapshot", "train_step": 20000},
                 {"name": "snapshot", "train_step": 9000}, {"name": "uniform_random"}]
    assert return_hist.legend_order(np.array([3, 0, 1, 2, 1]), behaviors) == [2, 1, 0, 3]
    noisy = [{"name": "goal_seeking", "noise_std": 1.0}, {"name": "goal_seeking", "noise_std": 0.1},
             {"name": "goal_seeking", "noise_std": 0.25}]
    assert return_hist.legend_order(np.array([0, 1, 2, -1]), noisy) == [1, 2, 0, -1]
