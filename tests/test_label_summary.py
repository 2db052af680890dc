"""scripts/label_summary.py: the label-source tables over data draws, from hand-written result folders."""
import json

import pytest

from conftest import one_line_error, run
from test_budget_summary import write


def draw(folder, shift, noise=(0.0, 0.3, -0.3)):
    """OILCA at 0, the oracle at +4, the ensemble at +1 (a quarter of the oracle's gain), BC-all (best baseline) at
    +2 with the same seed noise: every paired difference is exact."""
    for m, v in (("oilca", 0.0), ("oilca_oracle", 4.0), ("oilca_ens", 1.0), ("oilca_ens_q0.5", 3.0),
                 ("bc_exp", -1.0), ("dwbc", -2.0), ("bc_all", 2.0)):
        write(folder, m, [v + shift + e for e in noise])
    if shift == 0:  # a baseline on one draw only never counts as the best
        write(folder, "oril", [50.0] * 3)


def test_share_of_the_oracles_gain_and_verdict(tmp_path):
    folders = [str(tmp_path / f"d{i}") for i in range(3)]
    for i, f in enumerate(folders):
        draw(f, shift=i)
    out, doc = str(tmp_path / "s.json"), tmp_path / "doc.md"
    doc.write_text("a\n<!-- label-summary: s -->\nold\n<!-- /label-summary -->\nb\n")
    run("scripts/label_summary.py", "--results", *folders, "--out", out, "--doc", str(doc), "--resamples", "300")
    with open(out) as f:
        s = json.load(f)
    assert s["best_baseline"]["train"] == "bc_all" and s["sources"] == ["oilca_ens", "oilca_ens_q0.5"]
    ens = next(r for r in s["rows"] if r["method"] == "oilca_ens")
    assert ens["oracle_share"]["share"] == pytest.approx(0.25) and ens["oracle_share"]["ci"] == pytest.approx([0.25, 0.25])
    assert ens["minus_oilca"]["mean"] == pytest.approx(1.0) and ens["minus_best"]["mean"] == pytest.approx(-1.0)
    assert ens["poi_oilca"]["vs"] == "oilca" and ens["poi_best"]["vs"] == "bc_all"
    q = next(r for r in s["rows"] if r["method"] == "oilca_ens_q0.5")
    assert q["oracle_share"]["share"] == pytest.approx(0.75) and q["minus_best"]["ci"] == pytest.approx([1.0, 1.0])
    ora = next(r for r in s["rows"] if r["method"] == "oilca_oracle" and r["split"] == "train")  # the ceiling
    assert ora["minus_best"]["mean"] == pytest.approx(2.0) and ora["poi_best"]["vs"] == "bc_all"
    assert "minus_oilca" not in ora and "the ceiling, OILCA with oracle labels − BC-all: 2.00" in s["markdown"]
    text = doc.read_text()
    assert "old" not in text and "| OILCA, ensemble labels, keep 0.5 |" in text and "| 0.75 [0.75, 0.75] |" in text
    run("scripts/label_summary.py", "--again", out)  # the same summary again from what it records
    with open(out) as f:
        assert json.load(f)["markdown"] == s["markdown"]


def test_a_draw_is_read_on_the_seeds_every_method_has(tmp_path):
    """A later seed landed for some methods only (a study under way): the draw is read on the seeds all its methods
    share, the block says which seed it left out, and the other draw keeps all its seeds."""
    import os
    full, part = str(tmp_path / "d0"), str(tmp_path / "d1")
    draw(full, shift=0)
    draw(part, shift=1)
    for m, v in (("oilca", 100.0), ("oilca_oracle", 100.0)):  # seed 3 of two methods only, far off: read, it would show
        with open(os.path.join(part, f"{m}_s3_train.json"), "w") as f:
            json.dump({"method": m, "seed": 3, "split": "train", "env": "toy", "returns": [v, v], "mean_return": v}, f)
    out = str(tmp_path / "s.json")
    run("scripts/label_summary.py", "--results", full, part, "--out", out, "--resamples", "300")
    with open(out) as f:
        s = json.load(f)
    assert s["seeds"] == {"d0": [0, 1, 2], "d1": [0, 1, 2]} and "d0" not in s["left_out"]
    assert s["left_out"]["d1"]["seeds"] == [3] and s["left_out"]["d1"]["cells_with"] == [2]
    assert "d1: training seeds 0, 1, 2 only; seed(s) 3 left out, which only 2 of its" in s["markdown"]
    ens = next(r for r in s["rows"] if r["method"] == "oilca_ens")
    assert ens["oracle_share"]["share"] == pytest.approx(0.25)  # seed 3's 100s never entered a mean
    oil = next(r for r in s["rows"] if r["method"] == "oilca" and r["split"] == "train")
    assert oil["return"]["mean"] == pytest.approx(0.5)  # draws at 0 and 1, each over seeds 0-2


def test_a_ceiling_below_the_best_baseline_is_said(tmp_path):
    f = str(tmp_path / "d0")
    for m, v in (("oilca", 0.0), ("oilca_oracle", 1.0), ("oilca_ens", 0.5), ("oril", 2.0)):
        write(f, m, [v + e for e in (0.0, 0.2, -0.2)])
    out = str(tmp_path / "s.json")
    run("scripts/label_summary.py", "--results", f, "--out", out, "--resamples", "300")
    with open(out) as fh:
        s = json.load(fh)
    ora = next(r for r in s["rows"] if r["method"] == "oilca_oracle")
    assert ora["minus_best"]["mean"] == pytest.approx(-1.0) and ora["poi_best"]["p"] == pytest.approx(0.0)
    assert "below 0: even exact labels on these rows stay below the best baseline" in s["markdown"]


def test_no_oracle_gain_gives_no_share(tmp_path):
    f = str(tmp_path / "d0")
    for m, vals in (("oilca", [0.0, 1.0, -1.0]), ("oilca_oracle", [1.0, -1.0, 0.0]), ("oilca_ens", [2.0, 2.0, 2.0])):
        write(f, m, vals)
    out = str(tmp_path / "s.json")
    run("scripts/label_summary.py", "--results", f, "--out", out, "--resamples", "300")
    with open(out) as fh:
        ens = next(r for r in json.load(fh)["rows"] if r["method"] == "oilca_ens")
    assert ens["oracle_share"]["defined"] is False and ens["oracle_share"]["share"] is None


def test_bad_inputs(tmp_path):
    assert one_line_error(run("scripts/label_summary.py", "--results", str(tmp_path / "nope"), "--out",
                              str(tmp_path / "x.json"), ok=False), "no such folder")
    write(str(tmp_path / "d"), "dwbc", [1.0, 2.0, 3.0])
    assert one_line_error(run("scripts/label_summary.py", "--results", str(tmp_path / "d"), "--out",
                              str(tmp_path / "x.json"), ok=False), "no OILCA results")
    assert not (tmp_path / "x.json").exists()


def test_a_draw_whose_rule_chose_bc_exp_counts_oilca_as_the_selected_sampler(tmp_path):
    folders = [str(tmp_path / f"d{i}") for i in range(2)]
    for i, f in enumerate(folders):
        draw(f, shift=i)
    write(folders[0], "oilca_selected", [5.0, 5.3, 4.7])  # draw 0 ran it (the rule chose BC-all there)
    for f, choice in zip(folders, ("bc_all", "bc_exp")):
        with open(f"{f}/sampler_selection.json", "w") as fh:
            json.dump({"choice": choice}, fh)
    out = str(tmp_path / "s.json")
    run("scripts/label_summary.py", "--results", *folders, "--out", out, "--resamples", "200")
    with open(out) as f:
        rows = json.load(f)["rows"]
    sel = next(r for r in rows if r["method"] == "oilca_selected" and r["split"] == "train")
    assert sel["return"]["n_groups"] == 2 and sel["return"]["n"] == 6  # draw 1 counts, with OILCA's runs
    assert [d["mean"] for d in sel["per_draw"]] == pytest.approx([5.0, 1.0])
    # a draw whose rule chose another sampler and lacks the run stays out
    with open(f"{folders[1]}/sampler_selection.json", "w") as fh:
        json.dump({"choice": "dwbc"}, fh)
    run("scripts/label_summary.py", "--results", *folders, "--out", out, "--resamples", "200")
    with open(out) as f:
        rows = json.load(f)["rows"]
    assert next(r for r in rows if r["method"] == "oilca_selected" and r["split"] == "train")["return"]["n_groups"] == 1


def test_the_study_script_runs_a_benchmark_row_over_its_draws(tmp_path):
    """BENCH=dmc:cartpole-swingup DRAWS="0 1" scripts/label_study.sh --dry-run: the runner's jobs of both draws of that
    row (draw 1 in its own _d1 folder, with its own data), 2 held-out folds (its D_E has 2 episodes)."""
    import os
    import subprocess
    from conftest import ROOT
    env = dict(os.environ, BENCH="dmc:cartpole-swingup", DRAWS="0 1")
    proc = subprocess.run(["bash", "scripts/label_study.sh", "--dry-run", "--root", str(tmp_path)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    for slug in ("dmc_cartpole-swingup_labels", "dmc_cartpole-swingup_labels_d1"):
        assert f"results/{slug}/oilca_oracle_s4_{{split}}.json" in proc.stdout
        assert f"data/{slug}.npz" in proc.stdout
    assert "--folds 2 " in proc.stdout and "--folds 3 " not in proc.stdout
    assert not (tmp_path / "results").exists()
