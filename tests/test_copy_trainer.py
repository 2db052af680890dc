"""A copied trainer is a new method: copy train_dwbc.py, change one line of its loss, and the runner trains,
evaluates and reports it beside the built-in methods (`--methods NAME=SCRIPT`), with no other file edited."""
import json
import os
import re
import shutil

import pytest

import runner
from conftest import ROOT

TINY = dict(seeds=(0, 1), steps=40, episodes=4, ivae_steps=40, fig5_ratios=(), fig5_seeds=(), references=False,
            collect_flags="--toy.n-classes 2 --toy.episodes-per-class 6 --toy.env.episode-len 20",
            ivae_flags="--restarts 1 --no-compare --hidden 16", train_flags="--hidden 16 --eval-episodes 0")


def copy_with_one_line_changed(folder) -> str:
    """train_dwbc.py copied to folder/train_mydwbc.py with the expert weight α of its policy loss (Eq. 6) doubled: one
    line of the loss changed, nothing else."""
    src = open(os.path.join(ROOT, "train_dwbc.py")).read()
    body = src[src.index("def policy_loss("):]
    body = body[:body.index("\ndef ", 1)]
    lines = [line for line in body.splitlines() if "alpha *" in line]
    assert len(lines) == 1, "policy_loss has one line with the α term"
    copy = src.replace(lines[0], lines[0].replace("alpha *", "2 * alpha *"), 1)
    assert sum(a != b for a, b in zip(src.splitlines(), copy.splitlines())) == 1
    path = os.path.join(folder, "train_mydwbc.py")
    with open(path, "w") as f:
        f.write(copy)
    return path


@pytest.mark.slow
def test_a_copied_trainer_runs_in_the_pipeline_under_its_own_name(tmp_path):
    script = copy_with_one_line_changed(tmp_path)
    before = {p: open(os.path.join(ROOT, p), "rb").read() for p in ("runner.py", "report.py", "oilca/contract.py")}
    out = runner.main(runner.Args(**TINY, root=str(tmp_path / "root"), methods=("dwbc", f"mydwbc={script}")))
    assert out["ok"], out
    res = tmp_path / "root" / "results" / "toy"
    for seed in (0, 1):
        for split in ("train", "heldout"):
            mine = json.load(open(res / f"mydwbc_s{seed}_{split}.json"))
            theirs = json.load(open(res / f"dwbc_s{seed}_{split}.json"))
            assert mine["method"] == "mydwbc" and theirs["method"] == "dwbc"
            assert mine["returns"] != theirs["returns"]  # the changed loss trained another policy
    table = (res / "table.md").read_text()
    rows = {m: re.search(rf"^\| {m} \|.*$", table, re.M) for m in ("dwbc", "mydwbc")}
    assert rows["dwbc"] and rows["mydwbc"], table
    print(rows["dwbc"][0], rows["mydwbc"][0], sep="\n")
    # nothing of the repo was edited, and the copy wrote its own files to its run folders
    assert all(open(os.path.join(ROOT, p), "rb").read() == b for p, b in before.items())
    assert (tmp_path / "root" / "runs" / "toy" / "mydwbc_s0" / "policy.pt").exists()


def test_a_custom_method_needs_its_own_name_and_a_python_file(tmp_path):
    script = copy_with_one_line_changed(tmp_path)
    for spec, words in ((f"dwbc={script}", "built-in"), (f"my dwbc={script}", "letters"),
                        (f"mine={tmp_path / 'missing.py'}", "not a Python file"), (f"mine={script}:raw", ":augmented")):
        with pytest.raises(SystemExit, match=words):
            runner.resolve(runner.Args(methods=("dwbc", spec)))
    args, preset = runner.resolve(runner.Args(methods=("bc_exp", f"mine={script}:augmented")))
    jobs = {j.name: j for j in runner.build(args, preset)}
    assert jobs["mine_s0"].argv[0] == script and "--method" in jobs["mine_s0"].argv
    assert any("_aug_r" in i for i in jobs["mine_s0"].inputs)  # trains on OILCA's augmented dataset of its seed
    assert "augment_r0.5_s0" in jobs  # which the grid now makes
    shutil.rmtree(tmp_path)


def test_run_folders_accept_any_file_a_trainer_writes(tmp_path):
    """A run folder is marked as one, so a later run replaces it whatever files the trainer wrote; a folder of
    someone's files is still refused in one line."""
    from oilca import contract
    out = str(tmp_path / "run")
    run = contract.RunFolder(out)
    with open(os.path.join(run.staging, "my_extra_output.npy"), "wb") as f:  # a file no built-in trainer writes
        f.write(b"x")
    run.commit()
    assert sorted(os.listdir(out)) == [contract.RUN_MARK, "my_extra_output.npy"]
    contract.RunFolder(out).commit()  # the next run to the same --out-dir replaces it
    assert sorted(os.listdir(out)) == [contract.RUN_MARK]
    mine = tmp_path / "mine"
    mine.mkdir()
    (mine / "notes.txt").write_text("keep")
    with pytest.raises(ValueError, match="not a run output"):
        contract.RunFolder(str(mine))
    assert (mine / "notes.txt").read_text() == "keep"
