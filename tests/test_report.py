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


def test_newer_baselines_rows_order_and_p_ca_helps(tmp_path):
    rows = toy_rows()
    for split, shift in (("train", 0.0), ("heldout", -1.0)):
        for m, means in (("ilid", [-9.0, -8.0]), ("ilid_ca", [-7.0, -6.0]), ("iswbc", [-6.0, -5.0]),
                         ("iswbc_ca", [-8.0, -7.0])):
            rows += [result(m, s, split, v + shift) for s, v in enumerate(means)]
    md, summary = report.report_markdown(report.by_env(rows), n_resamples=200)
    lines = md.splitlines()
    order = [l.split(" | ")[0][2:] for l in lines if l.startswith("| ") and " | " in l][1:8]
    assert order == ["bc_exp", "dwbc", "ilid", "ilid_ca", "iswbc", "iswbc_ca", "oilca"]
    for m, name in (("ilid", "ILID"), ("ilid_ca", "ILID+CA"), ("iswbc", "ISW-BC"), ("iswbc_ca", "ISW-BC+CA")):
        assert any(l.startswith(f"| {m} | {name} | ") for l in lines)
    # P(X+CA > X): ILID+CA beats ILID on every pair of seeds, ISW-BC+CA loses to ISW-BC on every pair
    assert "| ilid_ca vs ilid | 1.00 [1.00, 1.00] | 1.00 [1.00, 1.00] | 2, 2 |" in lines
    assert "| iswbc_ca vs iswbc | 0.00 [0.00, 0.00] | 0.00 [0.00, 0.00] | 2, 2 |" in lines
    folder = write(tmp_path / "results", rows)
    report.main(report.Args(results=folder, resamples=200))
    assert (tmp_path / "results" / "fig4.png").read_bytes().startswith(PNG)


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
    ("mean_contradicts", "'mean_return' 5.0 is not the mean of its 'returns'"),
    ("huge", "mean of 'returns' is not a finite number"),
])
def test_bad_results_folders(tmp_path, case, words):
    folder = tmp_path / "results"
    if case != "missing":
        folder.mkdir()
    rows = {"empty": [], "missing": [], "no_returns": [result("bc_exp", 0, "train", 1.0) | {"returns": []}],
            "nan": [result("bc_exp", 0, "train", 1.0) | {"returns": [1.0, float("nan")]}],
            "no_seed": [{k: v for k, v in result("bc_exp", 0, "train", 1.0).items() if k != "seed"}],
            "duplicate": [result("bc_exp", 0, "train", 1.0)],
            "env_number": [result("bc_exp", 0, "train", 1.0, env=3)],
            "mean_contradicts": [result("bc_exp", 0, "train", 1.0, mean_return=5.0)],
            "huge": [result("bc_exp", 0, "train", 1.0) | {"returns": [1e308, 1e308]}]}[case]
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


# ------------------------------------------------------------------------------------------------- budget study
# runner --budgets: one run to the largest budget (train_args: total_steps 20000, checkpoints [5000]), its policy at
# 5,000 steps saved on the way (policy_step 5000); the JSON's method without the budget. Seed scores:
# 5,000 steps (train): bc_exp 0, 3, 6; dwbc 8, 19, 27; oilca 10, 20, 30 (seeds 0-2)
# 20,000 steps (train): bc_exp 4, 5, 6 and dwbc 30, 40, 50 (seeds 0-2); oilca 45, 47, 100 on seeds 1-3
# heldout: every score 1 lower
BUDGET_SCORES = {(5000, "bc_exp"): {0: 0.0, 1: 3.0, 2: 6.0}, (5000, "dwbc"): {0: 8.0, 1: 19.0, 2: 27.0},
                 (5000, "oilca"): {0: 10.0, 1: 20.0, 2: 30.0}, (20000, "bc_exp"): {0: 4.0, 1: 5.0, 2: 6.0},
                 (20000, "dwbc"): {0: 30.0, 1: 40.0, 2: 50.0}, (20000, "oilca"): {1: 45.0, 2: 47.0, 3: 100.0}}


def budget_rows(env="toy"):
    """(file name, row) of the budget study above."""
    out = []
    for (steps, method), per in BUDGET_SCORES.items():
        for seed, score in per.items():
            for split, shift in (("train", 0.0), ("heldout", -1.0)):
                prefix = "" if env == "toy" else report.env_slug(env) + "_"
                facts = dict(train_args={"total_steps": 20000, "checkpoints": [5000]}, policy_step=steps)
                out.append((f"{prefix}{method}_b{steps}_s{seed}_{split}.json",
                            result(method, seed, split, score + shift, env=env, **facts)))
    return out


def write_budget(folder, named):
    os.makedirs(folder, exist_ok=True)
    for name, r in named:
        with open(os.path.join(folder, name), "w") as f:
            json.dump(r, f)
    return str(folder)


def test_budget_and_method_come_from_the_run_facts():
    """The budget of a result is read from its JSON (a budget run's train_args.checkpoints, the policy's
    policy_step), never from its file name."""
    run = {"total_steps": 20000, "checkpoints": [5000]}
    r = result("dwbc", 3, "train", 1.0, train_args=run, policy_step=5000)
    for path in ("results/toy/dwbc_b5000_s3_train.json", "x/anything.json", "x/dwbc_b20000_s4_heldout.json"):
        assert report.budget_method(path, r) == "dwbc_b5000"
    final = result("dwbc", 3, "train", 1.0, train_args=run, policy_step=20000)
    assert report.budget_method("x/y.json", final) == "dwbc_b20000"
    legacy = result("dwbc", 3, "train", 1.0, train_args=run)  # a final policy's result before policy_step was recorded
    assert report.budget_method("x/y.json", legacy) == "dwbc_b20000"
    plain = result("dwbc", 3, "train", 1.0, train_args={"total_steps": 20000}, policy_step=20000)
    assert report.budget_method("x/dwbc_b20000_s3_train.json", plain) == "dwbc"  # no budget run: the name is no fact
    assert report.budget_method("x/y.json", result("dwbc_b5000", 3, "train", 1.0, train_args=run)) == "dwbc_b5000"
    with pytest.raises(report.ReportError, match="step count"):
        report.budget_method("x/y.json", result("dwbc", 3, "train", 1.0, train_args={"checkpoints": [5]}))
    assert report.split_budget("oilca_r1.0_b5000") == ("oilca_r1.0", 5000) and report.split_budget("oilca_bc_all") \
        == ("oilca_bc_all", None)
    assert report.display("dwbc_b20000") == "DWBC (20,000 steps)"
    assert report.display("oilca_r1.0_b5000") == "OILCA (ratio 1.0) (5,000 steps)"
    names = ["oilca_b20000", "dwbc_b5000", "oilca", "dwbc", "oilca_b5000", "oilca_r1.0", "zzz_b20000", "zzz_b5000",
             "zzz", "dwbc_b20000"]
    assert sorted(names, key=report.order_key) == ["dwbc", "dwbc_b5000", "dwbc_b20000", "oilca", "oilca_b5000",
                                                   "oilca_b20000", "oilca_r1.0", "zzz", "zzz_b5000", "zzz_b20000"]


def test_budget_table_cells_and_gaps_paired_by_seed(tmp_path):
    folder = write_budget(tmp_path / "results", budget_rows())
    rows = report.load_results(folder)  # two budgets of one method are two methods, not duplicates
    assert {r["method"] for r in rows} == {f"{m}_b{b}" for b, m in BUDGET_SCORES}
    md, summary = report.report_markdown(report.by_env(rows), n_resamples=2000)
    lines = md.splitlines()
    head = "| budget (steps) | BC-exp, in-distribution (training c) | BC-exp, out-of-distribution (held-out c) | "
    i = next(k for k, l in enumerate(lines) if l.startswith(head))
    assert lines[i] == head + ("DWBC, in-distribution (training c) | DWBC, out-of-distribution (held-out c) | "
                               "OILCA, in-distribution (training c) | OILCA, out-of-distribution (held-out c) |")
    cells = [c.strip() for c in lines[i + 2].split("|")[1:-1]]
    assert cells[0] == "5,000" and cells[1].startswith("3.00 ± 3.00 [") and cells[1].endswith("(3)")
    assert cells[2].startswith("2.00 ± 3.00 [") and cells[3].startswith("18.00 ± 9.54 [")  # heldout: 1 lower
    assert cells[5].startswith("20.00 ± 10.00 [")
    cells = [c.strip() for c in lines[i + 3].split("|")[1:-1]]
    assert cells[0] == "20,000" and cells[3].startswith("40.00 ± 10.00 [") and cells[5].startswith("64.00 ± ")
    # gaps at each budget, over the seeds both have: 5,000: OILCA − DWBC = 2, 1, 3 (mean 2, s 1; unpaired seeds
    # would not give s = 1); 20,000: OILCA has seeds 1-3, DWBC 0-2 → seeds 1, 2: 45 − 40, 47 − 50 = 5, −3
    j = next(k for k, l in enumerate(lines) if l.startswith("| budget (steps) | OILCA − DWBC, in-distribution"))
    assert lines[j] == ("| budget (steps) | OILCA − DWBC, in-distribution (training c) | OILCA − DWBC, "
                        "out-of-distribution (held-out c) | OILCA − BC-exp, in-distribution (training c) | "
                        "OILCA − BC-exp, out-of-distribution (held-out c) | P(OILCA > DWBC), in-distribution "
                        "(training c) | P(OILCA > DWBC), out-of-distribution (held-out c) |")
    five = [c.strip() for c in lines[j + 2].split("|")[1:-1]]
    assert five[0] == "5,000" and five[1].startswith("2.00 ± 1.00 [") and five[1].endswith("(3)")
    assert five[3].startswith("17.00 ± 7.00 [")  # 10, 17, 24
    assert five[5].startswith("0.67 [") and five[5].endswith("(3, 3)")  # 6 of the 9 (OILCA, DWBC) seed pairs
    twenty = [c.strip() for c in lines[j + 3].split("|")[1:-1]]
    assert twenty[1] == "1.00 ± 5.66 [-3.00, 5.00] (2)" and twenty[2] == twenty[1]  # n = 2: [min, max]
    assert twenty[3] == "40.50 ± 0.71 [40.00, 41.00] (2)"  # 45 − 5, 47 − 6
    gaps = {(e["split"], e["budget"], e["y"]): e for e in summary["budget_gaps"]}
    assert gaps[("train", 20000, "dwbc")]["seeds"] == [1, 2] and gaps[("train", 20000, "dwbc")]["mean"] == 1.0
    assert gaps[("train", 20000, "dwbc")]["std"] == pytest.approx(math.sqrt(32))
    assert gaps[("heldout", 5000, "bc_exp")]["mean"] == pytest.approx(17.0)
    assert gaps[("train", 5000, "dwbc")]["env"] == "toy"
    c = [c for c in summary["budget_cells"] if (c["family"], c["split"], c["budget"]) == ("oilca", "train", 20000)][0]
    assert (c["method"], c["seeds"], c["n"], c["mean"]) == ("oilca_b20000", [1, 2, 3], 3, 64.0)
    poi = summary["budget_probability_of_improvement"]
    assert [(e["split"], e["budget"], e["p"]) for e in poi] == [("train", 5000, pytest.approx(6 / 9)),
                                                               ("train", 20000, pytest.approx(7 / 9)),
                                                               ("heldout", 5000, pytest.approx(6 / 9)),
                                                               ("heldout", 20000, pytest.approx(7 / 9))]
    # the budget variants are rows of the returns table but not automatic P(X > Y) pairs against OILCA
    assert any(l.startswith("| dwbc_b20000 | DWBC (20,000 steps) | 40.00 ± 10.00 [") for l in lines)
    assert " vs oilca |" not in md and "oilca_b5000 vs" not in md


def test_selected_budget_and_matched_sampler_rows(tmp_path):
    """select_budget.py's `<family>_sel` copies get a row of their own after the budgets, with the gaps at the chosen
    budgets; oilca_matched_b<steps> results (one run per budget, the budget in the label) are a family of the study."""
    named = budget_rows()
    for steps, per in ((5000, {0: 9.0, 1: 18.0, 2: 33.0}), (20000, {0: 31.0, 1: 41.0, 2: 60.0})):
        for seed, score in per.items():
            named.append((f"m{steps}_{seed}.json", result(f"oilca_matched_b{steps}", seed, "train", score,
                                                          train_args={"total_steps": steps}, policy_step=steps)))
    for fam, steps in (("dwbc", 20000), ("oilca", 5000)):
        for seed, score in BUDGET_SCORES[(steps, fam)].items():
            named.append((f"{fam}_sel_{seed}.json", result(f"{fam}_sel", seed, "train", score, policy_step=steps,
                                                           train_args={"total_steps": 20000, "checkpoints": [5000]},
                                                           budget_selection={"budget": steps})))
    rows = report.load_results(write_budget(tmp_path / "results", named))
    assert {"dwbc_sel", "oilca_sel", "oilca_matched_b5000", "oilca_matched_b20000"} <= {r["method"] for r in rows}
    md, summary = report.report_markdown(report.by_env(rows), n_resamples=2000)
    lines = md.splitlines()
    i = next(k for k, l in enumerate(lines) if l.startswith("| budget (steps) | BC-exp, in-distribution"))
    assert "OILCA, sampler matched to the budget, in-distribution (training c)" in lines[i]
    chosen = [c.strip() for c in lines[i + 4].split("|")[1:-1]]
    assert chosen[0] == "chosen on held-out D_E" and chosen[1] == "—"  # BC-exp has no selection here
    assert chosen[3].startswith("40.00 ± 10.00 [") and chosen[5].startswith("20.00 ± 10.00 [")
    gaps = {(e["x"], e["y"]): e for e in summary["budget_selected_gaps"]}
    assert gaps[("oilca", "dwbc")]["mean"] == pytest.approx(-20.0)  # 10−30, 20−40, 30−50
    matched = {(e["budget"], e["y"]): e for e in summary["budget_gaps"] if e["x"] == "oilca_matched"}
    assert matched[(5000, "dwbc")]["mean"] == pytest.approx(2.0)  # 9−8, 18−19, 33−27
    assert report.display("oilca_sel") == "OILCA (budget chosen on held-out D_E)"
    assert sorted(["oilca_sel", "oilca_b5000", "oilca"], key=report.order_key) == ["oilca", "oilca_b5000", "oilca_sel"]
    # a budget in the label is a fact to check: it must be the policy's step count
    bad = result("oilca_matched_b5000", 0, "train", 1.0, policy_step=20000)
    with pytest.raises(report.ReportError, match="names 5000 steps, but its policy_step is 20000"):
        report.budget_method("x/bad.json", bad)


def test_no_budget_results_no_budget_table_keys_or_figure(tmp_path):
    md, summary = report.report_markdown(report.by_env(toy_rows()), n_resamples=200)
    assert "budget (steps)" not in md and not [k for k in summary if k.startswith("budget")]
    folder = write(tmp_path / "results", toy_rows())
    report.main(report.Args(results=folder, resamples=200))
    assert not [n for n in os.listdir(folder) if n.startswith("budget")]


def test_main_writes_the_budget_figure_per_env(tmp_path, capsys):
    folder = write(tmp_path / "results", toy_rows() + walker_rows())  # plain results beside the budget ones
    write_budget(folder, budget_rows())
    md = report.main(report.Args(results=folder, resamples=300))
    assert "Figures of toy: fig4_toy.png, fig5_toy.png and budget_toy.png." in md
    assert "Figures of dmc:walker-stand: fig4_dmc_walker_stand.png." in md
    with open(os.path.join(folder, "budget_toy.png"), "rb") as f:
        assert f.read(8) == PNG
    assert not os.path.exists(os.path.join(folder, "budget_dmc_walker_stand.png"))
    summary = json.load(open(os.path.join(folder, "summary.json")))
    assert {e["env"] for e in summary["budget_cells"]} == {"toy"} and len(summary["budget_cells"]) == 12
    assert "budget_toy.png" in capsys.readouterr().out
    # one env: budget.png; the figure's rows and curves
    one = write_budget(tmp_path / "one", budget_rows())
    report.main(report.Args(results=one, resamples=300))
    assert open(os.path.join(one, "budget.png"), "rb").read(8) == PNG
    study = report.budget_of(json.load(open(os.path.join(one, "summary.json"))), "toy")
    drawn = report.figures.budget(study, report.ALL_SPLITS[:2], report.display, str(tmp_path / "b.png"))
    assert drawn == {s: {"families": ["bc_exp", "dwbc", "oilca"], "gaps": [("oilca", "dwbc"), ("oilca", "bc_exp")]}
                     for s in ("train", "heldout")}


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
