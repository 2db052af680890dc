"""report.py --check-docs: the hand-typed-number lint and the regenerate-and-compare check (on a stub repository
whose regeneration script is a few lines, so the test does not regenerate the real tables), and scripts/findings.py
on the committed results."""

import os
import subprocess
import sys

import pytest

import report
from conftest import ROOT, load_script


def test_hand_typed_finds_decimals_outside_generated_blocks_code_and_links():
    text = "\n".join([
        "OILCA scores 6.70 here.",                         # 1: flagged
        "<!-- findings: table -->",
        "| a | −5.44 [−5.54, −5.34] |",                     # generated: not flagged
        "<!-- /findings -->",
        "run `--ratio 0.5` and see [x](docs/a-1.2.md)",    # code span and link target: not flagged
        "```",
        "steps/s 1,240.5",                                 # fenced: not flagged
        "```",
        "<!-- report: results/toy -->",
        "0.25",
        "<!-- /report -->",
        "a gap of −0.50 and 3 seeds, Table 5, v1",         # 12: −0.50 flagged; integers are not decimals
    ])
    assert report.hand_typed(text) == [(1, "6.70"), (12, "−0.50")]
    # a line that starts with an inline generated number opens no block: the next line is still read
    assert report.hand_typed("<!--n: results/toy oilca train-->1.0 [0.5, 1.5]<!--/n--> and\nthen 2.5") == [(2, "2.5")]
    # a code span that runs over a line break, within a paragraph; a blank line ends it
    assert report.hand_typed("see `runner.py --x\n--ratio 0.5` and 1.5\n\n`unclosed 2.5\n\n3.5") == \
        [(2, "1.5"), (6, "3.5")]


def stub_repo(tmp_path, regenerate: str):
    """A repository with README.md, docs/findings.md, docs/other.md, results/x/table.md and a regeneration script."""
    root = tmp_path / "repo"
    (root / "docs").mkdir(parents=True)
    (root / "results" / "x").mkdir(parents=True)
    (root / "scripts").mkdir()
    (root / "README.md").write_text("# r\n\nno numbers\n")
    (root / "docs" / "findings.md").write_text("# f\n")
    (root / "docs" / "other.md").write_text("old text, `--ratio 0.5`\n")
    (root / "results" / "x" / "table.md").write_text("| 1.00 |\n")
    (root / "scripts" / "regenerate_tables.sh").write_text(regenerate)
    return root


def test_check_docs_is_clean_when_nothing_changes_and_writes_nothing(tmp_path):
    root = stub_repo(tmp_path, "set -e\ncat results/x/table.md > results/x/table.md.new\n"
                               "mv results/x/table.md.new results/x/table.md\n")
    assert report.check_docs(str(root)) == []
    assert (root / "results" / "x" / "table.md").read_text() == "| 1.00 |\n"
    assert sorted(os.listdir(root / "results" / "x")) == ["table.md"]


def test_check_docs_lists_changed_new_and_hand_typed(tmp_path):
    root = stub_repo(tmp_path, "set -e\necho '| 2.00 |' > results/x/table.md\necho new > docs/extra.md\n")
    (root / "README.md").write_text("OILCA 6.70\n")
    problems = report.check_docs(str(root))
    assert problems == ["README.md:1: hand-typed number 6.70 (cite it through a generated block)",
                        "results/x/table.md: differs when regenerated",
                        "docs/extra.md: written by the regeneration but not committed"]
    assert (root / "results" / "x" / "table.md").read_text() == "| 1.00 |\n"  # the repository is untouched
    assert not (root / "docs" / "extra.md").exists()


def test_check_docs_reports_a_failed_regeneration(tmp_path):
    root = stub_repo(tmp_path, "echo 'report.py: results/x: no such folder' >&2\nexit 3\n")
    assert report.check_docs(str(root)) == [
        "scripts/regenerate_tables.sh failed (exit 3): report.py: results/x: no such folder"]


def test_check_docs_cli_exits_non_zero_with_one_line_per_problem(tmp_path):
    root = stub_repo(tmp_path, "echo '| 2.00 |' > results/x/table.md\n")
    for entry in ("report.py", "oilca", "analysis", "envs", "training"):
        os.symlink(os.path.join(ROOT, entry), root / entry)
    run = subprocess.run([sys.executable, "report.py", "--check-docs"], cwd=root, capture_output=True, text=True)
    assert run.returncode != 0
    assert "results/x/table.md: differs when regenerated" in run.stdout
    assert "1 problem(s)" in run.stderr


def test_findings_blocks_from_the_committed_results():
    findings = load_script("findings")
    made = findings.main(findings.Args(print=True, root=ROOT))
    assert set(made) == set(findings.BLOCKS)
    table = made["table"].splitlines()
    assert table[0].startswith("| benchmark | the paper's order OILCA > DWBC > BC-exp |")
    assert any(line.startswith("| DeepMind Control, Table 1 | ") for line in table)
    # the order verdict: both paired gaps above 0, means in order only, no, a missing column
    cell = lambda *scores: {"mean": sum(scores) / len(scores), "seeds": dict(enumerate(scores))}  # noqa: E731
    assert findings.order_verdict({"oilca": cell(3, 4, 5), "dwbc": cell(2, 3, 4), "bc_exp": cell(1, 2, 3)}) == "yes"
    # overlapping cells, but every seed's gap is +1: the paired gaps say above
    assert findings.order_verdict({"oilca": cell(3, 13, 23), "dwbc": cell(2, 12, 22),
                                   "bc_exp": cell(1, 11, 21)}) == "yes"
    assert findings.order_verdict({"oilca": cell(3, 4, 8), "dwbc": cell(2, 5, 4), "bc_exp": cell(1, 2, 3)}) == \
        "means only"
    assert findings.order_verdict({"oilca": cell(1, 2, 3), "dwbc": cell(2, 3, 4), "bc_exp": cell(1, 2, 3)}) == "no"
    assert findings.order_verdict({"oilca": cell(1, 2, 3)}) == "—"


def test_a_partly_run_row_is_left_out_of_the_paper_table_counts(monkeypatch):
    """A row with only some columns run (a row still running) would rank those few as if they were the row."""
    findings = load_script("findings")
    seven = findings.SEVEN

    def row(task, scores):  # scores: {method: [per-seed scores]}; the other columns not run
        cells = {m: {"ours": {"mean": sum(v) / len(v), "n": len(v)}, "steps": [5000], "scores": dict(enumerate(v))}
                 if (v := scores.get(m)) else {"ours": None, "steps": [], "scores": {}} for m in seven}
        return {"task": task, "cells": cells}

    full = row("full", {m: [i, i + 1, i + 2] for i, m in enumerate(seven)})  # OILCA highest on every seed
    part = row("part", {"bc_exp": [5, 6, 7], "bc_all": [1, 2, 3]})
    monkeypatch.setattr(findings, "paper_table", lambda number: [full, part, row("empty", {})])
    out = findings.paper_table_row("T", 2)
    assert out["best"] == "rows led: OILCA 1"  # not BC-exp, which leads only the partly run row
    assert out["oilca_rank"] == "median 1 of 7; first in 1 of 1"
    assert out["evidence"] == "1 tasks (part partly run, left out); 1 × 3 × 5,000"
    # and out of the OILCA-against-DWBC counts, even where its OILCA and DWBC have run (with their paper cells)
    both = row("both", {"bc_exp": [5, 6, 7], "dwbc": [1, 2, 3], "oilca": [4, 5, 6]})
    for r in (full, both):
        for c in r["cells"].values():
            c["paper"] = (1.0, 0.1)
    monkeypatch.setattr(findings, "paper_table", lambda number: [full, both])
    lines = findings.tables_block().split("\n")
    assert all("above on 1, tied on 0, below on 0 of the 1 tasks run with intervals (2 in the table; both partly run, "
               "left out)" in line for line in lines), lines
    # every column run, but one with fewer seeds than the rest (its last seeds still to come): partly run too
    short = row("short", {m: [i, i + 1, i + 2] for i, m in enumerate(seven)} | {"lobsdice": [9]})
    monkeypatch.setattr(findings, "paper_table", lambda number: [full, short])
    assert findings.paper_table_row("T", 2)["evidence"] == "1 tasks (short partly run, left out); 1 × 3 × 5,000"


@pytest.mark.parametrize("doc", ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in
                                                      __import__("glob").glob(os.path.join(ROOT, "docs", "*.md"))))
def test_the_pages_cite_no_hand_typed_number(doc):
    with open(os.path.join(ROOT, doc), encoding="utf-8") as f:
        assert report.hand_typed(f.read()) == []


def test_inline_numbers_are_generated_and_not_hand_typed(tmp_path):
    findings = load_script("findings")
    findings.ROOT = ROOT
    line = ("OILCA <!--n: results/toy oilca train-->stale<!--/n--> against DWBC <!--n: results/toy dwbc train mean "
            "digits=1-->x<!--/n-->, gap <!--n: results/toy oilca-dwbc train-->y<!--/n-->")
    out = findings.fill_snippets(line, "page.md")
    cell = report.stats.cell(list(report.per_seed(report.load_results(os.path.join(ROOT, "results/toy")))
                                  [("oilca", "train")].values()))
    assert "<!--n: results/toy oilca train-->" + f"{cell['mean']:.2f} [".replace("-", "−") in out
    assert "stale" not in out and report.hand_typed(out) == []
    assert findings.fill_snippets(out, "page.md") == out  # filling twice changes nothing
    with pytest.raises(ValueError, match="page.md: inline number 'results/toy nosuch train'"):
        findings.fill_snippets("<!--n: results/toy nosuch train-->0<!--/n-->", "page.md")


def test_an_inline_number_can_read_some_seeds_only():
    """seeds=0-2 (or 0,1,2): the seeds a summary reads while a row's later seeds land; the same cell as those seeds'."""
    findings = load_script("findings")
    findings.ROOT = ROOT
    per = report.per_seed(report.load_results(os.path.join(ROOT, "results/toy")))
    assert len(per[("oilca", "train")]) == 5  # the main job's five seeds
    three = report.stats.paired_gap(*({s: per[(m, "train")][s] for s in (0, 1, 2)} for m in ("oilca", "dwbc")))
    want = f"{three['mean']:.2f} [{three['ci'][0]:.2f}, {three['ci'][1]:.2f}]".replace("-", "−")
    for opt in ("seeds=0-2", "seeds=0,1,2"):
        assert findings.snippet(f"results/toy oilca-dwbc train {opt}", "p.md") == want
    assert findings.snippet("results/toy oilca-dwbc train", "p.md") != want  # all five seeds differ
    with pytest.raises(ValueError, match="seeds=a is not A-B"):
        findings.snippet("results/toy oilca train seeds=a", "p.md")


def test_check_docs_passes_over_what_git_ignores(tmp_path):
    root = stub_repo(tmp_path, "echo png > results/x/fig.png\necho new > docs/extra.md\n")
    (root / ".gitignore").write_text("results/**/*.png\n")
    subprocess.run(["git", "init", "-q"], cwd=root, check=True)
    assert report.check_docs(str(root)) == ["docs/extra.md: written by the regeneration but not committed"]


def test_include_blocks_copy_a_committed_table(tmp_path):
    findings = load_script("findings")
    findings.ROOT = str(tmp_path)
    (tmp_path / "t.md").write_text("| a | 0.25 |\n")
    page = "x\n<!-- include: t.md -->\nstale 9.9\n<!-- /include -->\ny\n"
    out = findings.fill_snippets(page, "page.md")
    assert out == "x\n<!-- include: t.md -->\n\n| a | 0.25 |\n\n<!-- /include -->\ny\n"
    assert report.hand_typed(out) == [] and findings.fill_snippets(out, "page.md") == out
    with pytest.raises(ValueError, match="page.md: include nope.md: cannot be read"):
        findings.fill_snippets("<!-- include: nope.md -->\n<!-- /include -->\n", "page.md")


def test_budget_row_evidence_counts_each_draws_seeds(tmp_path):
    """Draws with different seed counts read as a range (3 and 5 seeds: '3–5'), not as their integer mean."""
    import json
    findings = load_script("findings")
    cell = lambda f, m, ns: {"split": "train", "budget": 100, "family": f, "mean": m, "n": sum(ns),  # noqa: E731
                             "n_groups": len(ns), "per_draw": [{"n": n, "mean": m} for n in ns]}
    s = {"draws": ["a", "b"], "budgets": [10, 100],
         "cells": [cell("oilca", 3.0, [3, 5]), cell("dwbc", 2.0, [3, 5]), cell("bc_exp", 1.0, [3, 5])],
         "orderings": [{"split": "train", "budget": 100, "over_draws": "OILCA > DWBC > BC-exp",
                        "paper_order_oilca": {"over_draws": False}}]}
    path = tmp_path / "s.json"
    path.write_text(json.dumps(s))
    row = findings.budget_summary_row("toy", str(path))
    assert row["evidence"] == "2 × 3–5 × 100" and row["oilca_rank"] == "1 of 3 columns" and row["order"] == "no"


def test_labels_row_evidence_counts_each_draws_seeds(tmp_path):
    """A label row over a draw of 5 seeds and one of 3 (a later draw under way) reads '2 × 3–5', not their mean '4'."""
    import json
    from conftest import run
    findings = load_script("findings")
    folders = [str(tmp_path / "d0"), str(tmp_path / "d1")]
    for f, n in zip(folders, (5, 3)):
        for m, v in (("oilca", 0.0), ("oilca_oracle", 4.0), ("oilca_ilid", 1.0), ("bc_exp", -1.0), ("dwbc", 2.0)):
            for i in range(n):
                x = v + 0.1 * i
                os.makedirs(f, exist_ok=True)
                with open(os.path.join(f, f"{m}_s{i}_train.json"), "w") as fh:
                    json.dump({"method": m, "seed": i, "split": "train", "env": "toy", "returns": [x, x],
                               "mean_return": x, "train_args": {"total_steps": 5000}}, fh)
    out = str(tmp_path / "s.json")
    run("scripts/label_summary.py", "--results", *folders, "--out", out, "--resamples", "200")
    row = findings.labels_row("x", out)
    assert row["evidence"] == "2 × 3–5 × 5,000" and row["best"] == "DWBC"


def test_labels_row_of_a_causalworld_study_reads_each_space(tmp_path):
    """A CausalWorld label study reports spaces A and B (no 'train' split): the findings table gets a row per space,
    each with that space's best baseline and ranks."""
    import json
    from conftest import run
    findings = load_script("findings")
    folder = str(tmp_path / "cw_x_labels")
    os.makedirs(folder)
    # DWBC is the best baseline in space A, BC-exp in space B; OILCA with ILID's labels is above both in A only
    for m, a, b in (("oilca", 0.0, 0.0), ("oilca_oracle", 4.0, 4.0), ("oilca_ilid", 3.0, 0.5), ("bc_exp", -1.0, 2.0),
                    ("dwbc", 1.0, 1.0)):
        for i in range(3):
            for split, v in (("A", a), ("B", b)):
                x = v + 0.01 * i
                with open(os.path.join(folder, f"{m}_s{i}_{split}.json"), "w") as fh:
                    json.dump({"method": m, "seed": i, "split": split, "env": "cw:pushing", "returns": [x, x],
                               "mean_return": x, "train_args": {"total_steps": 5000}}, fh)
    out = str(tmp_path / "s.json")
    run("scripts/label_summary.py", "--results", folder, "--out", out, "--resamples", "200")
    assert findings.summary_splits(out) == ["A", "B"]
    a, b = (findings.labels_row("x", out, split) for split in ("A", "B"))
    assert a["order"].startswith("above DWBC") and a["order"].endswith("OILCA, ILID labels") and a["best"] == "OILCA, ILID labels"
    assert b["order"].startswith("no label source above BC-exp") and b["best"] == "BC-exp"
    assert a["evidence"] == b["evidence"] == "1 × 3 × 5,000"
