"""report.py --paper-table on hand-made result folders: the paper's numbers (paper_results.py) against each other, our
cells beside them, "not run", OILCA against DWBC, ranks and Kendall's τ, Table 7's folders, notes, --doc, refusals."""
import json
import os

import numpy as np
import pytest
from scipy.stats import kendalltau

from envs import cw as cw_env
from analysis import paper_results
import report
from analysis import stats

PATTERN = "{root}/{{benchmark}}_{{task}}_t5"


def write_runs(folder, env, method, split, seed_means, success=None):
    """evaluate.py's per-run JSON (`<method>_s<seed>_<split>.json`): two episodes per seed whose returns average to
    each of seed_means (and, for CausalWorld, fractional success averaging to each of `success`)."""
    os.makedirs(folder, exist_ok=True)
    for seed, mean in enumerate(seed_means):
        r = {"method": method, "seed": seed, "split": split, "env": env, "episodes": 2, "eval_seed": 10000,
             "returns": [mean - 1.0, mean + 1.0], "mean_return": mean, "train_args": {"total_steps": 5000}}
        if success is not None:
            r.update(success=[success[seed]] * 2, mean_success=success[seed])
        with open(os.path.join(folder, f"{method}_s{seed}_{split}.json"), "w") as f:
            json.dump(r, f)
    return str(folder)


def pattern(tmp_path):
    return PATTERN.format(root=tmp_path)


def by_task(rows):
    return {r["task"]: r for r in rows}


def line_of(md, task):
    return next(l for l in md.splitlines() if l.startswith(f"| {task}"))


# ------------------------------------------------------------------------------------------------- the paper's numbers
def test_every_table_has_its_rows_and_columns_in_the_papers_order():
    assert list(paper_results.TABLE_1) == list(paper_results.DMC_TASKS)
    for t in (paper_results.TABLE_2, paper_results.TABLE_6, paper_results.TABLE_7):
        assert list(t) == list(paper_results.CW_TASKS)
    assert list(paper_results.TABLE_4) == list(paper_results.DMC_TASKS[:4]) + list(paper_results.CW_TASKS[:4])
    for number, t in paper_results.TABLES.items():
        for task, row in t["rows"].items():
            assert len(row) == len(t["columns"]), (number, task)
            assert all(m > 0 and s > 0 for m, s in row), (number, task)
    # spot checks, one per table, read off the paper's LaTeX
    assert paper_results.cells(1)["cartpole-swingup"]["oilca"] == (608.38, 35.54)
    assert paper_results.cells(1)["walker-walk"]["bc_exp"] == (29.44, 2.18)
    assert paper_results.cells(2)["stacked_blocks"]["dwbc"] == (1596.96, 81.84)
    assert paper_results.cells(6)["stacking2"]["lobsdice"] == (378.3, 7.65)
    assert paper_results.cells(6)["general"]["oril"] == (1072.05, 47.26)
    assert paper_results.cells(4)["cheetah-run"]["bcnd_ca"] == (158.62, 8.85)
    assert paper_results.cells(7)["reaching"][5] == (1037.12, 19.15)
    assert [paper_results.benchmark(t) for t in ("fish-swim", "towers")] == ["dmc", "cw"]


def test_table_4_repeats_tables_1_and_2_except_the_listed_mismatches():
    t1, t2, t4 = paper_results.cells(1), paper_results.cells(2), paper_results.cells(4)
    differ = set()
    for task, row in t4.items():
        source = t1 if paper_results.benchmark(task) == "dmc" else t2
        for m in ("oril", "bcnd", "dwbc", "oilca"):
            if row[m] != source[task][m]:
                differ.add((4, task, m))
    assert differ == set(paper_results.MISMATCHES)  # every difference listed, and every listed one real
    assert t4["fish-swim"]["oilca"] == (290.29, 10.07) and t1["fish-swim"]["oilca"] == (290.28, 10.07)


def test_table_7_at_c_3_is_table_2s_oilca():
    t2, t7 = paper_results.cells(2), paper_results.cells(7)
    assert {task: row[paper_results.DEFAULT_C] for task, row in t7.items()} == {t: r["oilca"] for t, r in t2.items()}
    assert paper_results.FEATURE_SETS[paper_results.DEFAULT_C] == cw_env.ARENA_FEATURES  # our default features
    assert set(paper_results.FEATURE_SETS[5]) == set(cw_env.FEATURES)
    assert [len(f) for f in paper_results.FEATURE_SETS.values()] == [1, 2, 3, 4, 5]


# ------------------------------------------------------------------------------------------------- statistics
def test_ranks_tau_and_interval_order():
    assert stats.ranks({"a": 3.0, "b": 5.0, "c": 5.0, "d": 1.0}) == {"a": 3, "b": 1, "c": 1, "d": 4}
    assert stats.kendall_tau([1, 2, 3], [10, 20, 30]) == 1.0 and stats.kendall_tau([1, 2, 3], [3, 2, 1]) == -1.0
    assert stats.kendall_tau([1], [1]) is None and stats.kendall_tau([1, 1], [1, 2]) is None
    rng = np.random.default_rng(0)
    for _ in range(50):  # τ-b with ties, as scipy computes it
        x, y = rng.integers(0, 3, 6), rng.integers(0, 3, 6)
        want = kendalltau(x, y).statistic
        got = stats.kendall_tau(x, y)
        assert (got is None and np.isnan(want)) or got == pytest.approx(want)
    assert stats.interval_order((5, 6), (1, 4)) == "above" and stats.interval_order((1, 4), (5, 6)) == "below"
    assert stats.interval_order((4, 6), (1, 4)) == "tie" and stats.interval_order((1, 9), (2, 3)) == "tie"


# ------------------------------------------------------------------------------------------------- our cells
def test_table_1_cell_numbers_ranks_and_not_run(tmp_path):
    folder = tmp_path / "dmc_cartpole-swingup_t5"
    write_runs(folder, "dmc:cartpole-swingup", "oilca", "train", [300.0, 320.0, 340.0, 310.0, 330.0])
    write_runs(folder, "dmc:cartpole-swingup", "dwbc", "train", [400.0, 420.0, 410.0])
    write_runs(folder, "dmc:cartpole-swingup", "bc_exp", "train", [100.0])
    write_runs(folder, "dmc:cartpole-swingup", "bc_all", "heldout", [500.0, 510.0])  # not Table 1's split
    rows = by_task(report.paper_rows(1, pattern(tmp_path), "{folder}-c{c}", n_resamples=2000))
    cells = rows["cartpole-swingup"]["cells"]
    o = cells["oilca"]
    want = stats.cell([300.0, 320.0, 340.0, 310.0, 330.0], 2000)
    assert o["ours"] == want and (o["ours"]["n"], o["ours"]["mean"]) == (5, 320.0)
    assert o["seeds"] == [0, 1, 2, 3, 4] and o["steps"] == [5000] and o["episodes"] == [2]
    assert o["paper"] == (608.38, 35.54) and o["success"] is None
    assert cells["bc_all"]["ours"] is None and cells["oril"]["ours"] is None  # wrong split; no results
    # ours: DWBC 410 > OILCA 320 > BC-exp 100; the paper: OILCA 1st, DWBC 2nd, BC-exp 7th
    assert [cells[m]["rank"] for m in ("dwbc", "oilca", "bc_exp", "bc_all")] == [1, 2, 3, None]
    assert [cells[m]["paper_rank"] for m in ("oilca", "dwbc", "bc_exp")] == [1, 2, 7]
    # τ over the pairs: (dwbc, oilca) discordant, (dwbc, bc_exp) and (oilca, bc_exp) concordant
    assert rows["cartpole-swingup"]["tau"] == pytest.approx(1 / 3)
    assert rows["walker-walk"]["tau"] is None
    assert all(c["ours"] is None for c in rows["walker-walk"]["cells"].values())  # no folder: not run
    md = report.paper_markdown(1, list(rows.values()), pattern(tmp_path), "{folder}-c{c}", n_resamples=2000)
    line = line_of(md, "cartpole-swingup")
    lo, hi = want["ci"]
    assert (f"ours 320.00 ± 15.81 [{lo:.2f}, {hi:.2f}] (5 seeds, rank 2 of 3)<br>paper 608.38 ± 35.54 (rank 1)"
            in line)
    assert "ours 100.00 (1 seed, rank 3 of 3)<br>paper 195.44 ± 7.39 (rank 7)" in line
    assert "| not run<br>paper 269.03 ± 7.06 (rank 4) |" in line and line.endswith("| 0.33 |")
    assert line_of(md, "walker-walk").count("not run<br>paper") == 7 and line_of(md, "walker-walk").endswith("| — |")
    assert "raw numbers sit side by side" in md and "CausalWorld rows" not in md and "fractional success" not in md
    assert "Our runs so far: 5,000 policy gradient steps, 2 evaluation episodes per run." in md


# ------------------------------------------------------------------------------------------------- OILCA vs DWBC
def test_oilca_against_dwbc_counts_every_verdict(tmp_path):
    env = "dmc:{}".format
    cases = {"cartpole-swingup": ([100.0, 101.0, 102.0], [10.0, 11.0, 12.0]),  # above
             "cheetah-run": ([10.0, 20.0, 30.0], [15.0, 15.0, 25.0]),  # tied: the paired gap's interval holds 0
             "walker-walk": ([10.0, 20.0, 30.0], [15.0, 25.0, 35.0]),  # overlapping cells, paired gap −5: below
             "finger-turn_hard": ([10.0, 11.0, 12.0], [100.0, 101.0, 102.0]),  # below
             "fish-swim": ([10.0, 11.0, 12.0], [100.0, 101.0, 102.0]),  # below, a second time
             "humanoid-run": ([50.0], [10.0, 11.0])}  # one seed: no interval
    for task, (o, d) in cases.items():
        write_runs(tmp_path / f"dmc_{task}_t5", env(task), "oilca", "train", o)
        write_runs(tmp_path / f"dmc_{task}_t5", env(task), "dwbc", "train", d)
    write_runs(tmp_path / "dmc_walker-stand_t5", env("walker-stand"), "oilca", "train", [1.0, 2.0])  # no DWBC
    rows = report.paper_rows(1, pattern(tmp_path), "{folder}-c{c}", n_resamples=2000)
    verdicts = {r["task"]: report.oilca_vs_dwbc(r)[0] for r in rows}
    assert verdicts == {"cartpole-swingup": "above", "cheetah-run": "tie", "finger-turn_hard": "below",
                        "fish-swim": "below", "humanoid-run": "one seed", "manipulator-insert_ball": "not run",
                        "manipulator-insert_peg": "not run", "walker-stand": "not run", "walker-walk": "below"}
    counts = report.paper_counts(rows)
    assert counts["ours"] == {"above": 1, "tie": 1, "below": 3, "one seed": 1, "not run": 3}
    assert counts["paper"] == {"above": 9, "tie": 0, "below": 0}  # Table 1: OILCA − s > DWBC + s on every task
    md = report.paper_markdown(1, rows, pattern(tmp_path), "{folder}-c{c}", n_resamples=2000)
    assert "| ours | 1 | 1 | 3 | 1 | 3 |" in md and "| paper | 9 | 0 | 0 | — | — |" in md


def test_paper_counts_use_mean_plus_minus_s():
    # Table 6, general: OILCA 964.32 ± 17.08 against DWBC 786.44 ± 18.52 is above; Table 2 has OILCA above on all 9
    rows = report.paper_rows(6, "/nonexistent/{benchmark}_{task}", "{folder}-c{c}", n_resamples=100)
    assert report.paper_counts(rows)["paper"] == {"above": 9, "tie": 0, "below": 0}
    fake = {"cells": {"oilca": {"ours": None, "paper": (100.0, 10.0)}, "dwbc": {"ours": None, "paper": (85.0, 5.0)}}}
    assert report.oilca_vs_dwbc(fake) == ("not run", "tie")  # 90 … 110 against 80 … 90: they touch
    fake["cells"]["dwbc"]["paper"] = (84.0, 5.0)
    assert report.oilca_vs_dwbc(fake) == ("not run", "above")
    fake["cells"]["dwbc"]["paper"] = (130.0, 19.0)
    assert report.oilca_vs_dwbc(fake) == ("not run", "below")


# ------------------------------------------------------------------------------------------------- CausalWorld
def test_causalworld_tables_take_their_split_rank_and_show_success(tmp_path):
    folder = tmp_path / "cw_pushing_t5"
    for split, shift in (("A", 0.0), ("B", -3.0)):
        write_runs(folder, "cw:pushing", "oilca", split, [5.0 + shift, 6.0 + shift], success=[0.5, 0.7])
        write_runs(folder, "cw:pushing", "dwbc", split, [9.0 + shift, 10.0 + shift], success=[0.8, 0.9])
        write_runs(folder, "cw:pushing", "bc_exp", split, [1.0 + shift, 2.0 + shift], success=[0.1, 0.2])
    b = by_task(report.paper_rows(2, pattern(tmp_path), "{folder}-c{c}", n_resamples=500))["pushing"]
    a = by_task(report.paper_rows(6, pattern(tmp_path), "{folder}-c{c}", n_resamples=500))["pushing"]
    assert b["split"] == "B" and b["cells"]["oilca"]["ours"]["mean"] == 2.5  # space B: 3 lower
    assert a["split"] == "A" and a["cells"]["oilca"]["ours"]["mean"] == 5.5
    assert b["cells"]["oilca"]["success"]["mean"] == pytest.approx(0.6)
    # ours: DWBC, OILCA, BC-exp; the paper (Table 2, pushing): OILCA 405.08, DWBC 298.09, BC-exp 256.64
    assert {m: b["cells"][m]["rank"] for m in ("dwbc", "oilca", "bc_exp")} == {"dwbc": 1, "oilca": 2, "bc_exp": 3}
    assert {m: b["cells"][m]["paper_rank"] for m in ("oilca", "dwbc", "bc_exp")} == {"oilca": 1, "dwbc": 2, "bc_exp": 4}
    assert b["tau"] == pytest.approx(1 / 3)
    md = report.paper_markdown(2, [b], pattern(tmp_path), "{folder}-c{c}", n_resamples=500)
    assert "raw returns are not compared across" in md and "raw numbers sit side by side" not in md
    success = md.split("Our fractional success on the CausalWorld rows")[1]
    assert "| pushing | 0.15 ± 0.07 [0.10, 0.20] (2) | not run |" in success  # n = 2: the interval is [min, max]
    assert "BC-exp has the same s, 26.92" in md  # Table 2's oddity is listed under it


def test_means_equal_but_for_float_rounding_share_a_rank(tmp_path):
    """towers: columns that never move a block return the same to the bit in every episode, yet their seed means can
    differ in the last bits (summation order); they share a rank and count as a tie for τ."""
    folder = tmp_path / "cw_pushing_t5"
    write_runs(folder, "cw:pushing", "bc_exp", "B", [9.995548300910741, 9.995548300910741])
    write_runs(folder, "cw:pushing", "bc_all", "B", [9.99554830097283, 9.995548300910741])
    write_runs(folder, "cw:pushing", "dwbc", "B", [9.0, 9.5])
    b = by_task(report.paper_rows(2, pattern(tmp_path), "{folder}-c{c}", n_resamples=200))["pushing"]
    assert b["cells"]["bc_exp"]["ours"]["mean"] != b["cells"]["bc_all"]["ours"]["mean"]
    assert b["cells"]["bc_exp"]["rank"] == b["cells"]["bc_all"]["rank"] == 1 and b["cells"]["dwbc"]["rank"] == 3
    paper = [b["cells"][m]["paper"][0] for m in ("bc_exp", "bc_all", "dwbc")]
    assert b["tau"] == pytest.approx(kendalltau([1.0, 1.0, 0.0], paper).statistic)


def test_table_4_mixes_dmc_train_and_causalworld_b(tmp_path):
    write_runs(tmp_path / "dmc_fish-swim_t5", "dmc:fish-swim", "oril_ca", "train", [150.0, 160.0])
    write_runs(tmp_path / "cw_picking_t5", "cw:picking", "oril_ca", "B", [3.0, 4.0], success=[0.3, 0.4])
    write_runs(tmp_path / "cw_picking_t5", "cw:picking", "oril_ca", "A", [30.0, 40.0], success=[0.3, 0.4])
    rows = by_task(report.paper_rows(4, pattern(tmp_path), "{folder}-c{c}", n_resamples=300))
    assert list(rows) == list(paper_results.TABLE_4)
    assert rows["fish-swim"]["cells"]["oril_ca"]["ours"]["mean"] == 155.0
    assert rows["picking"]["cells"]["oril_ca"]["ours"]["mean"] == 3.5  # space B, not A
    md = report.paper_markdown(4, list(rows.values()), pattern(tmp_path), "{folder}-c{c}", n_resamples=300)
    assert "| task | ORIL | ORIL+CA | BCND | BCND+CA | DWBC | OILCA | τ |" in md
    assert "raw numbers sit side by side" in md and "raw returns are not compared across" in md
    assert "290.29 ± 10.07, Table 1 as 290.28" in md  # the paper's mismatch, under its table
    success = md.split("Our fractional success on the CausalWorld rows")[1]
    assert "| picking | not run | 0.35 ± 0.07 [0.30, 0.40] (2) |" in success and "| fish-swim |" not in success


def test_table_7_reads_one_folder_per_feature_set(tmp_path):
    base = tmp_path / "cw_reaching_t5"
    write_runs(base, "cw:reaching", "oilca", "B", [30.0, 31.0], success=[0.3, 0.3])  # C = 3: the task folder
    write_runs(tmp_path / "cw_reaching_t5-c1", "cw:reaching", "oilca", "B", [10.0, 11.0], success=[0.1, 0.1])
    write_runs(tmp_path / "cw_reaching_t5-c5", "cw:reaching", "oilca", "B", [50.0, 51.0], success=[0.5, 0.5])
    write_runs(tmp_path / "cw_reaching_t5-c4", "cw:reaching", "dwbc", "B", [1.0, 2.0])  # not OILCA: not run
    folders = report.paper_folders(7, pattern(tmp_path), "{folder}-c{c}")
    assert folders["reaching"][3] == str(base) and folders["reaching"][1] == f"{base}-c1"
    row = by_task(report.paper_rows(7, pattern(tmp_path), "{folder}-c{c}", n_resamples=300))["reaching"]
    assert [row["cells"][c]["ours"]["mean"] if row["cells"][c]["ours"] else None for c in (1, 2, 3, 4, 5)] == \
        [10.5, None, 30.5, None, 50.5]
    assert row["tau"] == 1.0 and [row["cells"][c]["rank"] for c in (1, 3, 5)] == [3, 2, 1]
    md = report.paper_markdown(7, [row], pattern(tmp_path), "{folder}-c{c}", n_resamples=300)
    assert "| task | C = 1 | C = 2 | C = 3 | C = 4 | C = 5 | τ |" in md and "no OILCA-against-DWBC count" in md
    assert "| ours |" not in md


# ------------------------------------------------------------------------------------------------- notes, CLI, docs
def test_a_folder_note_is_a_footnote_on_its_row(tmp_path):
    folder = tmp_path / "dmc_humanoid-run_t5"
    write_runs(folder, "dmc:humanoid-run", "oilca", "train", [5.0, 6.0])
    (folder / "note.md").write_text("SAC reached only 120.\n")  # a note's own full stop is not doubled
    os.makedirs(tmp_path / "dmc_walker-walk_t5")
    (tmp_path / "dmc_walker-walk_t5" / "note.md").write_text("data only, no policy yet\n")  # a note, no results
    md = report.paper_markdown(1, report.paper_rows(1, pattern(tmp_path), "{folder}-c{c}", n_resamples=200),
                               pattern(tmp_path), "{folder}-c{c}", n_resamples=200)
    assert line_of(md, "humanoid-run").startswith("| humanoid-run [1] | ")
    assert line_of(md, "walker-walk").startswith("| walker-walk [2] | not run")
    assert (f"Notes: [1] `{folder}`: SAC reached only 120; [2] `{tmp_path / 'dmc_walker-walk_t5'}`: data only, no "
            f"policy yet.") in md


def test_main_fills_the_doc_markers_and_reads_committed_results(tmp_path, capsys):
    write_runs(tmp_path / "cw_towers_t5", "cw:towers", "oilca", "B", [1.0, 2.0], success=[0.1, 0.2])
    doc = tmp_path / "tables.md"
    doc.write_text("# Tables\n<!-- report: paper table 2 -->\nold\n<!-- /report -->\n"
                   "<!-- report: paper table 6 -->\nkept\n<!-- /report -->\n")
    md = report.main(report.Args(paper_table=2, results_pattern=pattern(tmp_path), doc=(str(doc),), resamples=200))
    assert "| towers | not run<br>paper 667.81 ± 9.27 (rank 4) |" in md and "table into" in capsys.readouterr().out
    assert doc.read_text() == ("# Tables\n<!-- report: paper table 2 -->\n\n" + md + "\n\n<!-- /report -->\n"
                               "<!-- report: paper table 6 -->\nkept\n<!-- /report -->\n")
    assert sorted(os.listdir(tmp_path / "cw_towers_t5")) == ["oilca_s0_B.json", "oilca_s1_B.json"]  # nothing written


@pytest.mark.parametrize("flags, words", [
    (dict(paper_table=3), "--paper-table 3: the paper's tables are 1, 2, 4, 6, 7"),
    (dict(paper_table=1, results_pattern="results/dmc_t5"), "--results-pattern 'results/dmc_t5': needs {task}"),
    (dict(paper_table=1, results_pattern="results/{env}_{task}"), "may only use the fields {benchmark}, {task}"),
    (dict(paper_table=7, c_pattern="{folder}_c"), "--c-pattern '{folder}_c': needs {c}"),
])
def test_bad_paper_flags_are_refused(tmp_path, flags, words):
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- report: paper table 1 -->\n<!-- /report -->\n")
    with pytest.raises(ValueError, match=words.replace("{", r"\{").replace("}", r"\}")):
        report.main(report.Args(doc=(str(doc),), **flags))
    assert doc.read_text() == "<!-- report: paper table 1 -->\n<!-- /report -->\n"


def test_a_folder_of_another_env_and_a_doc_without_markers_are_errors(tmp_path):
    write_runs(tmp_path / "dmc_cheetah-run_t5", "dmc:walker-stand", "oilca", "train", [1.0, 2.0])
    with pytest.raises(report.ReportError, match="holds results of dmc:walker-stand, not dmc:cheetah-run"):
        report.main(report.Args(paper_table=1, results_pattern=pattern(tmp_path)))
    doc = tmp_path / "doc.md"
    doc.write_text("<!-- report: paper table 2 -->\n<!-- /report -->\n")
    with pytest.raises(report.ReportError, match="no '<!-- report: paper table 1 -->'"):
        report.main(report.Args(paper_table=1, results_pattern=str(tmp_path / "none_{task}"), doc=(str(doc),)))


def test_table_7_footnotes_feature_sets_that_gave_the_same_dataset_and_shows_bc_exp(tmp_path):
    base = tmp_path / "cw_pushing_t5"
    for folder, fp, oilca, bc in ((f"{base}-c1", "aaaa", [1.0, 2.0], [1.5, 2.5]), (f"{base}-c2", "bbbb", [3.0, 4.0], [3.0, 3.0]),
                                  (str(base), "bbbb", [5.0, 6.0], [4.0, 4.0])):
        for method, means in (("oilca", oilca), ("bc_exp", bc)):
            write_runs(folder, "cw:pushing", method, "B", means, success=[0.1, 0.1])
            for seed in range(2):
                path = os.path.join(folder, f"{method}_s{seed}_B.json")
                with open(path) as f:
                    r = json.load(f)
                with open(path, "w") as f:
                    json.dump({**r, "dataset_fingerprint": fp}, f)
    rows = report.paper_rows(7, pattern(tmp_path), "{folder}-c{c}", n_resamples=200)
    md = report.paper_markdown(7, rows, pattern(tmp_path), "{folder}-c{c}", n_resamples=200)
    assert line_of(md, "pushing [1]").startswith("| pushing [1] | ")
    assert "pushing: C = 2 and C = 3 trained on the same dataset (fingerprint `bbbb`)" in md
    assert "C = 1 and" not in md  # a feature set with its own dataset gets no footnote
    gaps = next(l for l in md.splitlines() if l.startswith("| pushing: OILCA − BC-exp"))
    assert gaps.split(" | ")[1].startswith("-0.50 ± 0.00") and gaps.split(" | ")[3].startswith("1.50 ± 0.71")
    # Tables 1, 2 and 6 train every column on one dataset by design: no such footnote there
    md2 = report.paper_markdown(2, report.paper_rows(2, pattern(tmp_path), "{folder}-c{c}", n_resamples=200),
                                pattern(tmp_path), "{folder}-c{c}", n_resamples=200)
    assert "same dataset" not in md2


def test_the_reference_table_flags_a_row_without_expert_behaviour(tmp_path):
    good, bad = tmp_path / "dmc_walker-walk_t5", tmp_path / "dmc_humanoid-run_t5"
    write_runs(good, "dmc:walker-walk", "oilca", "train", [50.0, 60.0])
    write_runs(good, "dmc:walker-walk", "bc_all", "train", [5.0, 6.0])
    write_runs(good, "dmc:walker-walk", "reference_expert", "train", [900.0])
    write_runs(good, "dmc:walker-walk", "reference_random", "train", [30.0])
    write_runs(bad, "dmc:humanoid-run", "oilca", "train", [1.0, 1.0])
    write_runs(bad, "dmc:humanoid-run", "reference_expert", "train", [0.9])
    write_runs(bad, "dmc:humanoid-run", "reference_random", "train", [1.0])
    md = report.paper_markdown(1, report.paper_rows(1, pattern(tmp_path), "{folder}-c{c}", n_resamples=200),
                               pattern(tmp_path), "{folder}-c{c}", n_resamples=200)
    refs = md[md.index("Reference runs"):]
    assert "| walker-walk | 900.00 | 30.00 | 870.00 | BC-all |" in refs
    assert "| humanoid-run | 0.90 | 1.00 | -0.10 (no expert behaviour: the row compares nothing) | OILCA |" in refs
    assert "| cartpole-swingup | — | — | — | — |" in refs
