"""scripts/learning_curves.py on hand-made progress.csv files: which runs of a method it picks (plain or budget-study
job names), the mean over the seeds that evaluated at each step, rows without an eval_return skipped and said, and a
subprocess smoke run of the command (figure written; no usable curve: one line on stderr)."""
import os
import sys

import pytest

from conftest import ROOT, one_line_error, run
from test_report import PNG

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import learning_curves  # noqa: E402


def progress(runs, job, rows, columns=("step", "loss", "eval_return")):
    os.makedirs(runs / job, exist_ok=True)
    lines = [",".join(columns)] + [",".join(map(str, r)) for r in rows]
    (runs / job / "progress.csv").write_text("\n".join(lines) + "\n")


@pytest.fixture
def runs(tmp_path):
    runs = tmp_path / "runs" / "toy"
    for seed, base in enumerate([0.0, 2.0, 4.0]):  # budget study: dwbc_b20000_s<seed>, eval every 10,000 steps
        progress(runs, f"dwbc_b20000_s{seed}", [(10000, 0.1, base), (20000, 0.1, base + 10.0)])
    progress(runs, "dwbc_s0", [(5000, 0.2, -50.0)])  # a plain run of the same method
    progress(runs, "oilca_b20000_s0", [(10000, 0.1, 1.0), (20000, 0.1, 3.0)])
    progress(runs, "oilca_b20000_s1", [(10000, 0.1, "nan"), (20000, 0.1, 5.0)])  # no evaluation at 10,000
    progress(runs, "oilca_bc_all_b20000_s0", [(10000, 0.1, 99.0)])  # another method, not oilca's
    progress(runs, "bc_exp_s0", [(5000, 0.1, "nan"), (10000, 0.1, "")])  # trained without in-training evaluation
    progress(runs, "bcnd_s0", [(1, 0.5, 2.0)], columns=("round", "loss", "eval_return"))  # rounds, not steps
    return runs


def test_runs_are_picked_by_job_name_and_averaged_per_step(runs):
    assert learning_curves.find_runs(str(runs), "dwbc", None)[0] == 20000  # the budget study by default
    budget, paths = learning_curves.find_runs(str(runs), "dwbc", 0)
    assert budget is None and list(paths) == [0] and paths[0].endswith("dwbc_s0/progress.csv")
    assert list(learning_curves.find_runs(str(runs), "oilca", None)[1]) == [0, 1]  # not oilca_bc_all's run
    curve, skipped = learning_curves.read_curve(str(runs / "oilca_b20000_s1" / "progress.csv"))
    assert curve == {20000: 5.0} and skipped == 1
    assert learning_curves.read_curve(str(runs / "bcnd_s0" / "progress.csv")) == (None, 0)
    points = learning_curves.curve_points({0: {10: 1.0, 20: 3.0}, 1: {20: 5.0}}, 500)
    assert [(s, n, m) for s, n, m, _ in points] == [(10, 1, 1.0), (20, 2, 4.0)]
    assert points[0][3] is None and tuple(points[1][3]) == (3.0, 5.0)  # one seed: no band; n = 2: [min, max]


def test_main_draws_the_curves_and_says_what_it_skipped(runs, tmp_path, capsys):
    out = tmp_path / "curves.png"
    info = learning_curves.main(learning_curves.Args(runs=str(runs), out=str(out), resamples=500,
                                                     methods=("bc_exp", "dwbc", "oilca", "bcnd", "lobsdice")))
    assert open(out, "rb").read(8) == PNG
    d = info["dwbc"]
    assert d["budget"] == 20000 and d["seeds"] == [0, 1, 2]
    assert [(s, n, m) for s, n, m, _ in d["points"]] == [(10000, 3, 2.0), (20000, 3, 12.0)]
    assert [(s, n, m) for s, n, m, _ in info["oilca"]["points"]] == [(10000, 1, 1.0), (20000, 2, 4.0)]
    assert info["bc_exp"]["points"] == [] and info["bc_exp"]["skipped_rows"] == 2
    text = capsys.readouterr().out
    assert "skipped 2 rows without a finite eval_return" in text and "bc_exp_s0/progress.csv" in text
    assert "bcnd_s0/progress.csv: no step and eval_return columns" in text and "lobsdice: no runs" in text
    assert "dwbc: 3 runs (_b20000), seeds 0,1,2, 2 evaluation steps; at step 20000: 12.00 over 3 seeds" in text


def test_cli_smoke_and_refusal(runs, tmp_path):
    out = tmp_path / "docs" / "curves_toy.png"
    proc = run("scripts/learning_curves.py", "--runs", str(runs), "--methods", "dwbc", "oilca", "--budget", "20000",
               "--resamples", "200", "--out", str(out), timeout=120)
    assert "wrote" in proc.stdout and open(out, "rb").read(8) == PNG
    proc = run("scripts/learning_curves.py", "--runs", str(runs), "--methods", "bc_exp", "--out",
               str(tmp_path / "none.png"), ok=False, timeout=120)
    assert one_line_error(proc, "no progress.csv with a finite eval_return") and not (tmp_path / "none.png").exists()
