"""report.py on hand-made result JSON: normalised scores from the reference runs, the table cells, paired gaps, bold,
summary.json, one block per env, --aggregate, --doc, bad input. The estimators themselves (bootstrap, IQM, P(X > Y)) are
tested on hand-computed inputs in test_stats.py, the figures (figures.py) in test_figures.py."""
import json
import math
import os
import subprocess
import sys

import numpy as np
import pytest
from scipy.stats import trim_mean

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
        env = "" if r["env"] == "toy" else report.env_slug(r["env"]) + "_"
        with open(os.path.join(folder, f"{env}{r['method']}_s{r['seed']}_{r['split']}.json"), "w") as f:
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


# ------------------------------------------------------------------------------------------------- seed scores
def test_normalised_score_uses_the_references_of_the_split():
    scores = report.per_seed(toy_rows())
    norm = report.normalise(scores)
    # train: random -40, expert -3; bc_exp's seed 0 scores -9 → 100 · 31 / 37
    assert norm[("bc_exp", "train")][0] == pytest.approx(100 * 31 / 37)
    assert norm[("bc_exp", "heldout")][0] == pytest.approx(100 * 31 / 37)  # heldout: everything shifted by -1
    assert not any(m.startswith("reference_") for m, _ in norm)
    no_random = {k: v for k, v in scores.items() if k[0] != "reference_random"}
    assert report.normalise(no_random) == {}


def test_method_names_and_order():
    names = ["dwbc_expert_data_r2.0", "oilca_r10.0", "oilca", "reference_random", "zzz", "oilca_copy",
             "dwbc_expert_data", "oilca_oracle_r1.0", "oilca_r2.0", "bc_exp", "oilca_oracle", "oilca_bc_all"]
    assert sorted(names, key=report.order_key) == [
        "bc_exp", "oilca", "oilca_r2.0", "oilca_r10.0", "oilca_bc_all", "oilca_oracle", "oilca_oracle_r1.0",
        "oilca_copy", "dwbc_expert_data", "dwbc_expert_data_r2.0", "zzz", "reference_random"]
    assert report.display("oilca_oracle_r1.0") == "OILCA, oracle labels (env expert) (ratio 1.0)"
    assert report.display("dwbc_expert_data_r2.0") == "DWBC + true expert rows (ratio 2.0)"
    assert report.display("oilca_copy") == "no counterfactual (partner's own s′)"
    assert report.display("zzz_r1.0") == "zzz_r1.0" and report.split_ratio("zzz_r1.0") == ("zzz_r1.0", None)
    assert report.method_pairs({"oilca", "dwbc", "oilca_dwbc", "oilca_r1.0", "oril"}, [("oril", "dwbc")]) == [
        ("oilca", "dwbc"), ("oilca_r1.0", "oilca"), ("oilca_dwbc", "oilca"), ("oril", "dwbc")]


def test_table_cells_bold_and_header(tmp_path):
    rows = toy_rows()
    md, summary = report.report_markdown(report.by_env(rows), n_resamples=2000)
    lines = md.splitlines()
    assert "| method | name | in-distribution (training c) | out-of-distribution (held-out c) | seeds |" in lines
    bc = [l for l in lines if l.startswith("| bc_exp |")][0]  # seed means -9 .. -5 (train), -10 .. -6 (heldout)
    assert bc.startswith("| bc_exp | BC-exp | -7.00 ± 1.58 [") and "| -8.00 ± 1.58 [" in bc and bc.endswith("| 5 |")
    oilca = [l for l in lines if l.startswith("| oilca |")]
    assert oilca[0].startswith("| oilca | OILCA | **-5.67 ± 1.53 [") and oilca[0].count("**") == 4  # best learned
    assert "| reference_expert | expert (reference) | -3.00 | -4.00 | 1 |" in lines  # not ranked, no interval
    assert "| oilca_r1.0 | OILCA (ratio 1.0) | -6.00 ± 0.71 [-6.50, -5.50] | -7.00 ± 0.71 [-7.50, -6.50] | 2 |" in lines
    # normalised table: 100 · (R + 40) / 37 (train); bold again on OILCA; no reference rows
    assert any(l.startswith("| bc_exp | BC-exp | 89.2 ± 4.3 [") for l in lines)
    assert sum(l.count("**") for l in lines) == 8 and md.count("| reference_expert |") == 1
    # P(X > Y): OILCA beats DWBC on every pair of seeds; OILCA at ratio 1.0 against OILCA: 3 of 6 pairs
    assert "| oilca vs dwbc | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] | 3, 3 |" in lines
    assert any(l.startswith("| oilca_r1.0 vs oilca | 0.50 [") for l in lines)
    # paired gaps over the shared seeds 0-2: OILCA − DWBC = 8, 6, 9; OILCA − BC-exp = 2, 2, 3
    assert any(l.startswith("| oilca − dwbc | 7.67 ± 1.53 [") and l.endswith("| 3 |") for l in lines)
    assert any(l.startswith("| oilca − bc_exp | 2.33 ± 0.58 [") for l in lines)
    assert "oilca_bc_all − bc_all" not in md  # a gap whose methods do not both exist is left out
    head = report.header(rows, "toy")
    assert head.startswith("Returns on toy: each cell is mean ± s [lo, hi]") and "ddof=1" in head
    assert "percentile-bootstrap" in head and "3–5 seeds under-covers" in head
    assert "2 episodes per split" in head and "evaluation seed 10000" in head
    cells = {(c["method"], c["split"]): c for c in summary["cells"]}
    c = cells[("bc_exp", "train")]
    assert (c["env"], c["n"], c["seeds"], c["mean"]) == ("toy", 5, [0, 1, 2, 3, 4], -7.0)
    assert c["std"] == pytest.approx(math.sqrt(2.5)) and c["normalised"]["mean"] == pytest.approx(100 * 33 / 37)
    assert cells[("reference_random", "train")]["ci"] is None and cells[("reference_random", "train")]["normalised"] is None


def test_ratio_table_rows_are_amounts_and_columns_family_by_split():
    rows = toy_rows()
    for s, m in enumerate([-9.0, -8.0]):  # true expert rows at two amounts, train split only
        rows.append(result("dwbc_expert_data", s, "train", m, augmented_de_over_du=0.5))
    rows.append(result("dwbc_expert_data_r2.0", 0, "train", -7.0, augmented_de_over_du=2.0))
    md, _ = report.report_markdown(report.by_env(rows), n_resamples=2000)
    lines = md.splitlines()
    head = [l for l in lines if l.startswith("| amount |")]
    assert head == ["| amount | OILCA, in-distribution (training c) | OILCA, out-of-distribution (held-out c) "
                    "| DWBC + true expert rows, in-distribution (training c) |"]
    i = lines.index(head[0])
    assert lines[i + 2].startswith("| 0.5 | -5.67 ± 1.53 [") and lines[i + 2].endswith("-8.50 ± 0.71 [-9.00, -8.00] (2) |")
    assert lines[i + 3] == "| 1 | -6.00 ± 0.71 [-6.50, -5.50] (2) | -7.00 ± 0.71 [-7.50, -6.50] (2) | — |"
    assert lines[i + 4] == "| 2 | — | — | -7.00 (1) |" and not "".join(lines[i + 5:i + 6]).startswith("|")
    # one amount per family (DWBC's own point does not count): no table
    one = [r for r in toy_rows() if r["method"] != "oilca_r1.0"]
    assert "| amount |" not in report.report_markdown(report.by_env(one), n_resamples=200)[0]


# ------------------------------------------------------------------------------------------------- CLI, docs
def test_main_writes_table_figures_and_doc(tmp_path, capsys):
    folder = write(tmp_path / "results", toy_rows())
    with open(os.path.join(folder, "timing.json"), "w") as f:
        json.dump({"total": 3}, f)  # not a result: skipped
    doc = tmp_path / "toy.md"
    doc.write_text(f"# Toy\n\nbefore\n<!-- report: {folder} -->\nstale table\n<!-- /report -->\nafter\n")
    md = report.main(report.Args(results=folder, doc=(str(doc),)))
    out = capsys.readouterr().out
    assert "| oilca |" in out and "**" in out and "wrote" in out
    assert open(os.path.join(folder, "table.md")).read() == md + "\n"
    summary = json.load(open(os.path.join(folder, "summary.json")))
    assert summary["resamples"] == 10_000 and summary["bootstrap_seed"] == 0 and len(summary["cells"]) == 6 * 2
    assert {e["x"] for e in summary["gaps"]} == {"oilca"} and summary["probability_of_improvement"]
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
    ("env_number", "'env' must be a non-empty string"),
])
def test_bad_results_folders(tmp_path, case, words):
    folder = tmp_path / "results"
    if case != "missing":
        folder.mkdir()
    rows = {"empty": [], "missing": [], "no_returns": [result("bc_exp", 0, "train", 1.0) | {"returns": []}],
            "nan": [result("bc_exp", 0, "train", 1.0) | {"returns": [1.0, float("nan")]}],
            "no_seed": [{k: v for k, v in result("bc_exp", 0, "train", 1.0).items() if k != "seed"}],
            "duplicate": [result("bc_exp", 0, "train", 1.0)],
            "env_number": [result("bc_exp", 0, "train", 1.0, env=3)]}[case]
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


def walker_rows():
    """A second env, with references 0 and 100 (normalised score = return) and train only."""
    rows = [result("reference_random", 0, "train", 0.0, env="dmc:walker-stand"),
            result("reference_expert", 0, "train", 100.0, env="dmc:walker-stand")]
    rows += [result("oilca", s, "train", m, env="dmc:walker-stand") for s, m in enumerate([10.0, 20.0, 30.0])]
    rows += [result("dwbc", s, "train", m, env="dmc:walker-stand") for s, m in enumerate([5.0, 25.0, 40.0])]
    return rows


def test_a_folder_with_two_envs_gets_one_block_and_one_figure_pair_per_env(tmp_path):
    folder = write(tmp_path / "results", toy_rows() + walker_rows())  # the same methods and seeds in both envs
    md = report.main(report.Args(results=folder, resamples=500))
    blocks = md.split("## ")
    assert [b.splitlines()[0] for b in blocks[1:]] == ["dmc:walker-stand", "toy"]
    assert "Returns on dmc:walker-stand:" in blocks[1] and "| oilca | OILCA | 20.00 ± 10.00 [" in blocks[1]
    assert "held-out" not in blocks[1] and "| oilca | OILCA | **-5.67 ± 1.53 [" in blocks[2]  # never mixed
    assert "Figures of toy: fig4_toy.png and fig5_toy.png." in blocks[2]
    names = set(os.listdir(folder))
    assert {"fig4_toy.png", "fig5_toy.png", "fig4_dmc_walker_stand.png"} <= names
    assert not {"fig4.png", "fig5.png", "fig5_dmc_walker_stand.png"} & names  # walker has no ratios: no Fig. 5
    summary = json.load(open(os.path.join(folder, "summary.json")))
    assert {c["env"] for c in summary["cells"]} == {"toy", "dmc:walker-stand"}


def test_aggregate_iqm_and_probability_of_improvement_across_tasks(tmp_path):
    toy, walker = write(tmp_path / "toy", toy_rows()), write(tmp_path / "walker", walker_rows())
    out = tmp_path / "agg"
    doc = tmp_path / "doc.md"
    doc.write_text(f"<!-- report: {out} -->\n<!-- /report -->\n")
    md = report.main(report.Args(aggregate=(toy, walker), out=str(out), doc=(str(doc),), pairs=("dwbc:oilca",),
                                 resamples=2000))
    agg = json.load(open(out / "aggregate.json"))
    assert open(out / "aggregate.md").read() == md + "\n" and md in doc.read_text()
    assert agg["strata"] == [["toy", "train"], ["toy", "heldout"], ["dmc:walker-stand", "train"]]
    # OILCA's 9 normalised runs: toy (both splits) 100 · (R + 40) / 37 for R = -7, -6, -4; walker 10, 20, 30
    runs = [100 * (r + 40) / 37 for r in (-7, -6, -4)] * 2 + [10.0, 20.0, 30.0]
    o = agg["methods"]["oilca"]
    assert o["iqm"] == pytest.approx(trim_mean(runs, 0.25)) and o["mean"] == pytest.approx(np.mean(runs))
    assert (o["runs"], o["strata"]) == (9, 3) and o["iqm_ci"][0] < o["iqm"] < o["iqm_ci"][1]
    assert agg["methods"]["bc_exp"]["strata"] == 2  # toy only
    # P(OILCA > DWBC): 1 on both toy splits, 4 of 9 pairs on walker → (1 + 1 + 4/9) / 3
    poi = {(e["x"], e["y"]): e for e in agg["probability_of_improvement"]}
    assert poi[("oilca", "dwbc")]["p"] == pytest.approx(22 / 27) and poi[("oilca", "dwbc")]["strata"] == 3
    assert poi[("dwbc", "oilca")]["p"] == pytest.approx(5 / 27)  # --pairs: the other way round
    assert ("oilca_r1.0", "oilca") in poi and "| oilca vs dwbc | 0.81 [" in md


def test_aggregate_refusals(tmp_path):
    toy = write(tmp_path / "toy", toy_rows())
    copy = write(tmp_path / "copy", toy_rows())
    with pytest.raises(report.ReportError, match="env toy is also in"):
        report.main(report.Args(aggregate=(toy, copy), out=str(tmp_path / "agg")))
    bare = write(tmp_path / "bare", [r for r in toy_rows() if r["method"] != "reference_expert"])
    with pytest.raises(report.ReportError, match="no env and split has both reference runs"):
        report.main(report.Args(aggregate=(bare,), out=str(tmp_path / "agg")))
    assert not (tmp_path / "agg").exists()


@pytest.mark.parametrize("flags, words", [
    (dict(pairs=("oilca",)), "--pairs 'oilca': give two different methods as x:y"),
    (dict(gaps=("oilca:oilca",)), "--gaps 'oilca:oilca'"),
    (dict(resamples=0), "--resamples must be an integer >= 1"),
])
def test_bad_flags_are_refused_before_anything_is_written(tmp_path, flags, words):
    folder = write(tmp_path / "results", toy_rows())
    with pytest.raises(ValueError, match=words):
        report.main(report.Args(results=folder, **flags))
    assert not (tmp_path / "results" / "table.md").exists()


def test_extra_gaps_and_pairs(tmp_path):
    md, summary = report.report_markdown(report.by_env(toy_rows()), pairs=[("bc_exp", "dwbc")],
                                         gaps=[("oilca_r1.0", "oilca")], n_resamples=500)
    assert "| bc_exp vs dwbc | 1.00 [1.00, 1.00] |" in md
    gap = [e for e in summary["gaps"] if e["x"] == "oilca_r1.0" and e["split"] == "train"][0]
    assert gap["seeds"] == [0, 1] and gap["mean"] == pytest.approx(0.5)  # (-6.5 + 7 + -5.5 + 6) / 2


def test_cli_help():
    proc = subprocess.run([sys.executable, "report.py", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and all(f in proc.stdout for f in ("--results", "--doc", "--aggregate", "--pairs",
                                                                     "--gaps", "--resamples"))


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
