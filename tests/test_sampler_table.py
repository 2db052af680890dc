"""scripts/sampler_table.py on hand-made result folders (report.main in-process writes their summary.json): the
sampler table (cells, seed counts, bold, "—" for missing methods), selection vs rollouts (agree, disagree, not
counted; the k-of-n line), the OILCA − sampler gaps (from summary.json, or computed when it lacks one), --doc markers,
and the one-line refusals (missing or stale summary.json, missing markers) that write nothing."""
import json
import os
import shutil
import sys

import pytest

import report
from conftest import ROOT, one_line_error, run

sys.path.insert(0, os.path.join(ROOT, "scripts"))
import sampler_table  # noqa: E402

RESAMPLES = 200
SPLITS = {"train": 0.0, "heldout": -0.5}


def write_folder(folder, means: dict, choice=None, scores=None):
    """Result JSON for {method: [seed means]} on both splits (heldout shifted by -0.5), the references as one run,
    summary.json by report.main, and a sampler_selection.json when `choice` is given."""
    os.makedirs(folder)
    for split, shift in SPLITS.items():
        for method, seeds in {**means, "reference_expert": [0.0], "reference_random": [-20.0]}.items():
            for seed, m in enumerate(seeds):
                r = {"method": method, "seed": seed, "split": split, "env": "toy", "episodes": 2,
                     "eval_seed": 10000, "returns": [m + shift - 1.0, m + shift + 1.0]}
                name = f"{method}_{split}.json" if method.startswith("reference_") else f"{method}_s{seed}_{split}.json"
                with open(os.path.join(folder, name), "w") as f:
                    json.dump(r, f)
    report.main(report.Args(results=str(folder), resamples=RESAMPLES))
    if choice:
        scores = scores or {"bc_exp": 0.2, "bc_all": 0.3, "dwbc": 0.4}
        with open(os.path.join(folder, "sampler_selection.json"), "w") as f:
            json.dump({"candidates": list(scores), "choice": choice, "folds": 3, "rule": "hand-made",
                       "scores": {c: {"mean": v, "per_fold": [v] * 3} for c, v in scores.items()}}, f)
    return str(folder)


@pytest.fixture(scope="module")
def folders(tmp_path_factory):
    """a: the rule picks bc_all and OILCA with BC-all labels is best (agrees; oilca_dwbc on 2 seeds);
    b: the rule picks bc_exp, OILCA with BC-all labels is best (disagrees; no oilca_dwbc);
    c: one OILCA run only and no selection file (not counted)."""
    root = tmp_path_factory.mktemp("sampler")
    a = write_folder(root / "a", {"bc_exp": [-8, -7, -6], "bc_all": [-5, -4, -3], "dwbc": [-9, -9, -9],
                                  "oilca": [-7, -6, -6], "oilca_bc_all": [-2, -2, -1], "oilca_dwbc": [-10, -8]},
                     choice="bc_all", scores={"bc_exp": 0.25, "bc_all": 0.125, "dwbc": 0.5})
    b = write_folder(root / "b", {"bc_exp": [-8, -7, -6], "bc_all": [-5, -4, -3], "dwbc": [-9, -9, -9],
                                  "oilca": [-7, -6, -6], "oilca_bc_all": [-2, -2, -1]}, choice="bc_exp")
    c = write_folder(root / "c", {"bc_exp": [-8, -7, -6], "dwbc": [-9, -9, -9], "oilca": [-7, -6, -6]})
    return a, b, c


def table(md: str, title: str) -> list:
    """The rows of the table under `### title`, as lists of cell texts."""
    part = md.split(f"### {title}\n", 1)[1].split("\n### ", 1)[0]
    return [[c.strip() for c in line.strip("|").split("|")] for line in part.splitlines()
            if line.startswith("| ") and not line.startswith("| folder")]


def test_tables(folders, tmp_path):
    a, b, c = folders
    out = str(tmp_path / "study.md")
    md = sampler_table.main(sampler_table.Args(results=(a, b, c), out=out))
    assert open(out).read() == md + "\n"
    rows = table(md, "The sampler table")
    assert [r[:2] for r in rows] == [[f"`{f}`", s] for f in (a, b, c) for s in ("train", "heldout")]
    summary = json.load(open(os.path.join(a, "summary.json")))
    cell = next(x for x in summary["cells"] if x["method"] == "oilca_bc_all" and x["split"] == "train")
    # folder a, train: oilca_bc_all is bold (best learned), the expert reference (0.0) is higher but not bold
    assert rows[0][6] == f"**{cell['mean']:.2f} [{cell['ci'][0]:.2f}, {cell['ci'][1]:.2f}]**"
    assert rows[0][6] == "**-1.67 [-2.00, -1.00]**"
    assert rows[0][7] == "-9.00 [-10.00, -8.00] (2 seeds)"  # oilca_dwbc: 2 of the folder's 3 seeds
    assert rows[0][10] == "0.00 (1 seed)" and rows[1][10] == "-0.50 (1 seed)"
    assert rows[0][2] == "-7.00 [-8.00, -6.00]" and "**" not in "".join(rows[0][2:6] + rows[0][7:])
    assert rows[2][7] == rows[2][8] == rows[2][9] == "—"  # b: no oilca_dwbc, oracle or selected runs
    assert rows[4][3] == rows[4][6] == "—" and rows[4][5] == "**-6.33 [-7.00, -6.00]**"  # c: oilca is the best there

    sel = table(md, "Selection vs rollouts")
    assert sel[0][2:] == ["bc_all (0.1250)", "bc_exp 0.2500, dwbc 0.5000",
                          "bc_exp -6.33, bc_all -1.67, dwbc -9.00 (2 seeds)", "bc_all", "yes"]
    assert sel[2][2:] == ["bc_exp (0.2000)", "bc_all 0.3000, dwbc 0.4000", "bc_exp -6.33, bc_all -1.67, dwbc —",
                          "bc_all", "no"]
    assert sel[4][2:] == ["— (no sampler_selection.json)", "—", "bc_exp -6.33, bc_all —, dwbc —", "—",
                          "— (no selection)"]
    assert [r[6] for r in sel] == ["yes", "yes", "no", "no", "— (no selection)", "— (no selection)"]
    assert "The rule picked the rollout-best sampler in 2 of 4 (folder, split) cases." in md

    gaps = table(md, "OILCA − its sampler")
    g = next(x for x in summary["gaps"] if (x["x"], x["y"], x["split"]) == ("oilca_dwbc", "dwbc", "heldout"))
    assert gaps[1][4] == f"{g['mean']:.2f} [{g['ci'][0]:.2f}, {g['ci'][1]:.2f}] (2 seeds)"
    assert gaps[1][4] == "0.00 [-1.00, 1.00] (2 seeds)"
    assert gaps[0][2:] == ["0.67 [0.00, 1.00]", "2.33 [2.00, 3.00]", "0.00 [-1.00, 1.00] (2 seeds)"]
    assert gaps[2][4] == gaps[4][3] == gaps[4][4] == "—" and "†" not in md


def test_selection_agrees_in_one_folder_with_a_not_counted_case(tmp_path):
    """The chosen candidate has no OILCA run of its own: not counted; the others still are."""
    d = write_folder(tmp_path / "d", {"bc_exp": [-8, -7], "bc_all": [-5, -4], "dwbc": [-1, -2],
                                      "oilca": [-3, -3], "oilca_bc_all": [-6, -6]}, choice="dwbc")
    e = write_folder(tmp_path / "e", {"bc_exp": [-8, -7], "bc_all": [-5, -4], "oilca": [-3, -3],
                                      "oilca_bc_all": [-6, -6]}, choice="bc_exp")
    md = sampler_table.main(sampler_table.Args(results=(d, e), out=str(tmp_path / "s.md")))
    sel = table(md, "Selection vs rollouts")
    assert [r[5:] for r in sel] == [["bc_exp", "— (no OILCA run with dwbc labels)"]] * 2 + [["bc_exp", "yes"]] * 2
    assert "in 2 of 2 (folder, split) cases" in md
    assert table(md, "The sampler table")[0][4] == "**-1.50 [-2.00, -1.00]**"  # DWBC is the best learned method


def test_gap_missing_from_summary_is_computed(folders, tmp_path):
    a = str(tmp_path / "a")
    shutil.copytree(folders[0], a)  # copy2: the mtimes stay
    path = os.path.join(a, "summary.json")
    summary = json.load(open(path))
    want = next(g for g in summary["gaps"] if (g["x"], g["y"], g["split"]) == ("oilca_bc_all", "bc_all", "train"))
    summary["gaps"] = [g for g in summary["gaps"] if g["x"] != "oilca_bc_all"]
    with open(path, "w") as f:
        json.dump(summary, f)
    md = sampler_table.main(sampler_table.Args(results=(a,), out=str(tmp_path / "s.md")))
    gaps = table(md, "OILCA − its sampler")
    assert gaps[0][3] == f"{want['mean']:.2f} [{want['ci'][0]:.2f}, {want['ci'][1]:.2f}] †"
    assert gaps[0][2].endswith("]") and "† not in summary.json" in md


def test_doc_markers(folders, tmp_path):
    doc = tmp_path / "doc.md"
    doc.write_text("# Sampler\n\nbefore\n<!-- sampler-table -->\nold table\n<!-- /sampler-table -->\nafter\n")
    md = sampler_table.main(sampler_table.Args(results=folders[:1], out=str(tmp_path / "s.md"), doc=(str(doc),)))
    assert doc.read_text() == (f"# Sampler\n\nbefore\n<!-- sampler-table -->\n\n{md}\n\n<!-- /sampler-table -->\n"
                               f"after\n")
    sampler_table.main(sampler_table.Args(results=folders[:1], out=str(tmp_path / "s.md"), doc=(str(doc),)))
    assert doc.read_text().count("### The sampler table") == 1  # a second run replaces, it does not add


@pytest.mark.parametrize("text, words", [("no markers here\n", "no '<!-- sampler-table -->'"),
                                         ("<!-- sampler-table -->\nopen only\n", "has no '<!-- /sampler-table -->'")])
def test_doc_without_markers_is_refused(folders, tmp_path, text, words):
    doc, out = tmp_path / "doc.md", tmp_path / "s.md"
    doc.write_text(text)
    with pytest.raises(ValueError, match=words) as e:
        sampler_table.main(sampler_table.Args(results=folders[:1], out=str(out), doc=(str(doc),)))
    assert "\n" not in str(e.value) and not out.exists() and doc.read_text() == text


def test_missing_or_stale_summary_is_one_line(folders, tmp_path):
    a, doc, out = str(tmp_path / "a"), tmp_path / "doc.md", str(tmp_path / "s.md")
    shutil.copytree(folders[0], a)  # copy2: the mtimes stay
    doc.write_text("<!-- sampler-table -->\n<!-- /sampler-table -->\n")
    argv = ("scripts/sampler_table.py", "--results", folders[1], a, "--out", out, "--doc", str(doc))
    summary = os.path.join(a, "summary.json")
    t = os.path.getmtime(summary)
    os.utime(os.path.join(a, "oilca_s1_train.json"), (t + 10, t + 10))  # a result newer than summary.json
    proc = run(*argv, ok=False)
    assert one_line_error(proc, f"{summary} is older than oilca_s1_train.json; run `python report.py --results {a}`")

    os.utime(summary, (t + 20, t + 20))  # newer again, but a run it does not hold
    with open(os.path.join(a, "oilca_s1_train.json")) as f:
        r = json.load(f)
    with open(os.path.join(a, "oilca_s7_train.json"), "w") as f:
        json.dump({**r, "seed": 7}, f)
    os.utime(os.path.join(a, "oilca_s7_train.json"), (t, t))
    with pytest.raises(ValueError, match=r"does not match the result JSON \(oilca seed 7 train: a result file wi"):
        sampler_table.main(sampler_table.Args(results=(folders[1], a), out=out, doc=(str(doc),)))

    os.remove(summary)
    proc = run(*argv, ok=False)
    assert one_line_error(proc, f"{a}: no summary.json; run `python report.py --results {a}` first")
    assert not os.path.exists(out) and doc.read_text() == "<!-- sampler-table -->\n<!-- /sampler-table -->\n"


def test_cli_writes_and_prints(folders, tmp_path):
    out = str(tmp_path / "s.md")
    proc = run("scripts/sampler_table.py", "--results", *folders, "--out", out)
    assert proc.stdout.startswith("Generated by `python scripts/sampler_table.py --results")
    assert proc.stdout.rstrip("\n").endswith(f"wrote {out}") and open(out).read() in proc.stdout
