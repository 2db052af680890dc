"""figures.py on report.py's hand-made toy rows (report.figure_input turns them into an EnvResults): Fig. 4's y-axis
keeps every bar, interval and seed dot and leaves a far reference line off (named in the legend), the fig4_limits rule
on its own, and Fig. 5's curves (a family with two ratios or more, led by DWBC, over the seeds every point has)."""
import numpy as np

from analysis import figures
import report
from analysis import stats
from test_report import PNG, result, toy_rows  # the same hand-made rows as the table tests


def test_fig4_scales_to_the_methods_not_to_a_far_random_reference(tmp_path):
    rows = toy_rows(random_mean=-40.0)
    info = figures.fig4(report.figure_input(rows), str(tmp_path / "fig4.png"))
    lo, hi = info["ylim"]
    dots = [np.mean(r["returns"]) for r in rows if not r["method"].startswith("reference_")]
    assert lo <= min(dots) and max(dots) <= hi  # every seed dot (and so every bar) on the axis
    for split, _ in report.present_splits(rows):
        lo_ci = min(stats.bootstrap([list(report.per_seed(rows)[(m, split)].values())])[1][0]
                    for m in ("bc_exp", "oilca", "dwbc"))
        assert lo <= lo_ci  # and every CI
    assert lo > -40.0 and lo > -41.0  # random (-40 train, -41 heldout) left off the axis ...
    assert info["off_scale"] == {"train": ["random"], "heldout": ["random"]}  # ... and named as such; expert kept
    assert hi >= -3.0  # the expert line (-3) is on the axis
    assert open(tmp_path / "fig4.png", "rb").read(8) == PNG
    # a random reference close to the methods stays on the axis
    info = figures.fig4(report.figure_input(toy_rows(random_mean=-18.0)), str(tmp_path / "near.png"))
    assert info["ylim"][0] <= -19.0 and info["off_scale"] == {"train": [], "heldout": []}


def test_fig4_limits_rule():
    (lo, hi), off = figures.fig4_limits([-10.0, -5.0], {"zero": 0.0, "random": -40.0, "expert": -4.0})
    assert off == ["random"] and lo < -10.0 and hi > 0.0 and lo > -11.0
    (lo, hi), off = figures.fig4_limits([200.0, 450.0], {"zero": 0.0, "random": 30.0, "expert": 810.0})
    assert off == ["expert"] and lo < 0.0 and 450.0 < hi < 810.0  # methods fill >= half of the axis


def test_fig5_needs_two_sizes_on_shared_seeds(tmp_path):
    rows = toy_rows()
    curves = figures.fig5_curves(report.figure_input(rows))
    # oilca (0.5) and oilca_r1.0 (1.0), led by DWBC (0.05), over the seeds all three have
    assert curves["train"] == [("oilca", [(0.05, "dwbc"), (0.5, "oilca"), (1.0, "oilca_r1.0")], [0, 1])]
    assert figures.fig5(report.figure_input(rows), str(tmp_path / "fig5.png"))
    assert open(tmp_path / "fig5.png", "rb").read(8) == PNG
    only_bc = [r for r in rows if r["method"] in ("bc_exp", "reference_random")]
    assert not figures.fig5(report.figure_input(only_bc), str(tmp_path / "none.png"))
    assert not (tmp_path / "none.png").exists()
    one_ratio = [r for r in rows if r["method"] != "oilca_r1.0"]  # DWBC + one OILCA ratio: OILCA's curve from DWBC
    assert figures.fig5_curves(report.figure_input(one_ratio))["train"] == [
        ("oilca", [(0.05, "dwbc"), (0.5, "oilca")], [0, 1, 2])]
    no_dwbc = [r for r in one_ratio if r["method"] != "dwbc"]  # one OILCA ratio alone: no curve
    assert figures.fig5_curves(report.figure_input(no_dwbc)) == {}


def test_fig5_draws_a_curve_per_family_with_two_ratios(tmp_path):
    rows = toy_rows()
    for method, x, m in (("dwbc_expert_data", 0.5, -8.0), ("dwbc_expert_data_r2.0", 2.0, -7.0),
                         ("oilca_oracle", 0.5, -5.0)):  # oilca_oracle has one ratio: no curve
        rows += [result(method, s, "train", m + s, augmented_de_over_du=x) for s in range(3)]
    curves = figures.fig5_curves(report.figure_input(rows))
    assert [fam for fam, _, _ in curves["train"]] == ["oilca", "dwbc_expert_data"]
    assert curves["train"][1] == ("dwbc_expert_data", [(0.05, "dwbc"), (0.5, "dwbc_expert_data"),
                                                       (2.0, "dwbc_expert_data_r2.0")], [0, 1, 2])
    assert [fam for fam, _, _ in curves["heldout"]] == ["oilca"]
    assert figures.fig5(report.figure_input(rows), str(tmp_path / "fig5.png"), n_resamples=500)
