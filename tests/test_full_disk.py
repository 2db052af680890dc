"""A full disk, for real: each stage writes its outputs onto a small tmpfs (mounted in a private user and mount
namespace, `unshare -Urm`) that already holds the outputs of a previous run and is then filled to leave only a few
kilobytes. The stage must exit non-zero with one line on stderr, leave no temporary file or lock behind, and keep
every previous output byte for byte (a stage with several outputs writes all of them or none).

Skipped with the reason where the machine refuses unprivileged user namespaces.
"""
import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT, run

# Runs inside the namespace: mount the tmpfs, copy the previous outputs in, fill it, run the stage, list what is left.
DRIVER = r"""
import hashlib, json, os, shutil, subprocess, sys
cfg = json.load(open(sys.argv[1]))
disk = cfg["disk"]
subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={cfg['size_kb']}k", "tmpfs", disk], check=True)
for name, src in cfg["previous"].items():
    dst = os.path.join(disk, name)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    shutil.copytree(src, dst) if os.path.isdir(src) else shutil.copyfile(src, dst)
fd = os.open(os.path.join(disk, "filler.bin"), os.O_WRONLY | os.O_CREAT)
size = 0
try:
    while True:
        size += os.write(fd, b"\0" * 4096)
except OSError:
    pass
os.ftruncate(fd, max(0, size - cfg["free_kb"] * 1024))
os.close(fd)
def listing():
    out = {}
    for folder, _, files in os.walk(disk):
        for f in files:
            p = os.path.join(folder, f)
            if f != "filler.bin":
                out[os.path.relpath(p, disk)] = hashlib.sha256(open(p, "rb").read()).hexdigest()
    return out
before = listing()
proc = subprocess.run([sys.executable, *cfg["argv"]], cwd=cfg["cwd"], capture_output=True, text=True,
                      env={**os.environ, **cfg["env"]})
json.dump({"rc": proc.returncode, "stderr": proc.stderr, "before": before, "after": listing()},
          open(cfg["report"], "w"))
"""


def namespaces_work() -> bool:
    try:
        return subprocess.run(["unshare", "-Urm", "true"], capture_output=True, timeout=30).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


pytestmark = pytest.mark.skipif(not namespaces_work(),
                                reason="unprivileged user and mount namespaces (unshare -Urm) are refused here")


def on_full_disk(tmp_path, argv, previous, free_kb, size_kb=4096, env=None):
    """Run `python argv` (from the repo root) with `{disk}` in it replaced by the tmpfs; `previous` maps names on the
    disk to files or folders copied there first. Returns the report: rc, stderr, and {name: sha256} before/after."""
    disk = tmp_path / "disk"
    disk.mkdir()
    cfg = {"disk": str(disk), "size_kb": size_kb, "free_kb": free_kb, "previous": previous, "cwd": ROOT,
           "argv": [a.replace("{disk}", str(disk)) for a in argv], "report": str(tmp_path / "report.json"),
           "env": {k: v.replace("{disk}", str(disk)) for k, v in (env or {}).items()}}
    (tmp_path / "cfg.json").write_text(json.dumps(cfg))
    (tmp_path / "driver.py").write_text(DRIVER)
    subprocess.run(["unshare", "-Urm", sys.executable, str(tmp_path / "driver.py"), str(tmp_path / "cfg.json")],
                   check=True, timeout=600)
    return json.loads((tmp_path / "report.json").read_text())


def assert_refused_and_intact(rep, words="No space left on device"):
    lines = rep["stderr"].strip().splitlines()
    assert rep["rc"] != 0 and len(lines) == 1 and words in lines[0], rep["stderr"][-3000:]
    assert "/disk/" in lines[0], f"the line names no file on the full disk: {lines[0]}"
    left = {name for name in rep["after"] if name.endswith((".tmp", ".lock", ".old", ".staged"))
            or os.path.basename(name).startswith(".") and not os.path.basename(name).startswith(".oilca-run")}
    assert not left, f"left behind: {sorted(left)}"
    assert rep["after"] == rep["before"], "the previous outputs changed"


def sizes_kb(*paths) -> int:
    return sum(os.path.getsize(p) for p in paths) // 1024


# ------------------------------------------------------------------------------------------------------ the cases
def test_report_writes_table_summary_and_figures_together(tmp_path):
    from test_report import toy_rows, write

    rows = toy_rows()
    prev = write(tmp_path / "prev", [r for r in rows if not (r["method"] == "dwbc" and r["seed"] == 2)])
    run("report.py", "--results", prev, "--resamples", "200")
    write(tmp_path / "prev", rows)  # one more result per split: the next table differs from the previous one
    small = sizes_kb(os.path.join(prev, "table.md"), os.path.join(prev, "summary.json")) + 8
    rep = on_full_disk(tmp_path, ["report.py", "--results", "{disk}/r", "--resamples", "200"], {"r": prev},
                       free_kb=small)  # room for the table and summary, not for the figures
    assert_refused_and_intact(rep)


def test_cv_split_writes_both_folds_or_neither(tmp_path):
    prev = tmp_path / "prev"
    prev.mkdir()
    tiny_dataset = str(tmp_path / "d.npz")  # half the episodes positive, every positive in D_E: several D_E episodes
    run("collect_data.py", "--seed", "3", "--positive-frac", "0.5", "--expert-prob", "1.0", "--toy.n-classes", "2",
        "--toy.episodes-per-class", "6", "--toy.env.episode-len", "10", "--out", tiny_dataset)
    run("cv_split.py", "--dataset", tiny_dataset, "--folds", "2", "--out", str(prev / "t.npz"),
        "--heldout-out", str(prev / "h.npz"))
    rep = on_full_disk(tmp_path, ["cv_split.py", "--dataset", tiny_dataset, "--folds", "2", "--seed", "5", "--force",
                                  "--out", "{disk}/t.npz", "--heldout-out", "{disk}/h.npz"],
                       {"t.npz": str(prev / "t.npz"), "h.npz": str(prev / "h.npz")},
                       free_kb=sizes_kb(prev / "t.npz") + 4)
    assert_refused_and_intact(rep)


def test_collect_data(tmp_path):
    prev = tmp_path / "prev.npz"
    run("collect_data.py", "--toy.n-classes", "2", "--toy.episodes-per-class", "4", "--out", str(prev))
    rep = on_full_disk(tmp_path, ["collect_data.py", "--toy.n-classes", "2", "--toy.episodes-per-class", "4",
                                  "--seed", "9", "--force", "--out", "{disk}/d.npz"], {"d.npz": str(prev)}, free_kb=4)
    assert_refused_and_intact(rep)


def test_a_trainer_keeps_its_previous_run(tiny_dataset, tmp_path):
    prev = tmp_path / "prev"
    run("train_bc.py", "--dataset", tiny_dataset, "--total-steps", "20", "--out-dir", str(prev),
        "--final-eval-episodes", "2")
    rep = on_full_disk(tmp_path, ["train_bc.py", "--dataset", tiny_dataset, "--total-steps", "20", "--seed", "4",
                                  "--out-dir", "{disk}/bc", "--final-eval-episodes", "2"], {"bc": str(prev)},
                       free_kb=8)
    assert_refused_and_intact(rep)


def test_evaluate_leaves_no_lock(tiny_dataset, tmp_path):
    prev = tmp_path / "prev.json"
    run("evaluate.py", "--reference", "random", "--env-dataset", tiny_dataset, "--episodes", "2", "--split", "train",
        "--out", str(prev))
    rep = on_full_disk(tmp_path, ["evaluate.py", "--reference", "random", "--env-dataset", tiny_dataset, "--episodes",
                                  "2", "--seed", "7", "--split", "train", "--out", "{disk}/e.json"], {"e.json": str(prev)}, free_kb=0)
    assert_refused_and_intact(rep)


def test_augment_writes_its_dataset_and_sampler_together(tiny_augmented_args, tmp_path):
    a = tiny_augmented_args
    prev = {"aug.npz": a.out, "sampler/policy.pt": a.sampler_out}
    rep = on_full_disk(tmp_path, ["augment.py", "--dataset", a.dataset, "--ivae", a.ivae, "--out", "{disk}/aug.npz",
                                  "--sampler-out", "{disk}/sampler/policy.pt", "--ratio", "0.4", "--sampler-steps", "50",
                                  "--hidden", "32", "--seed", "2"], prev,
                       free_kb=sizes_kb(a.sampler_out) + 16)  # room for the locks and sampler, not the dataset
    assert_refused_and_intact(rep)


def test_minari_export_leaves_no_temporary_dataset(tiny_dataset, tmp_path):
    pytest.importorskip("minari")
    rep = on_full_disk(tmp_path, ["scripts/minari_export.py", "--dataset", tiny_dataset, "--dataset-id",
                                  "oilca/full-v0"], {}, free_kb=16, env={"MINARI_DATASETS_PATH": "{disk}/minari"})
    assert_refused_and_intact(rep)


def test_select_sampler_writes_its_selection_and_policies_together(tmp_path):
    import numpy as np

    import select_sampler
    from test_select import B_GOOD, W_GOOD, write_policies

    # test_select's dataset and folds, built here (a tiny toy dataset with 6 D_E episodes, its 3 folds)
    import collect_data
    import cv_split
    from envs.toy import ToyConfig, ToyEnvConfig

    path = str(tmp_path / "tiny.npz")
    collect_data.main(collect_data.Args(out=path, seed=3, positive_frac=0.5, expert_prob=1.0,
                                        toy=ToyConfig(n_classes=2, episodes_per_class=6, env=ToyEnvConfig(episode_len=10))))
    folds = []
    for k in range(3):
        train, held = str(tmp_path / f"f{k}.npz"), str(tmp_path / f"f{k}_heldout.npz")
        cv_split.main(cv_split.Args(dataset=path, folds=3, fold=k, seed=0, out=train, heldout_out=held))
        folds.append((train, held))
    specs = {"bc_exp": (W_GOOD, B_GOOD), "bc_all": (np.zeros((2, 2), np.float32), np.zeros(2, np.float32))}
    args = write_policies(str(tmp_path / "p"), path, folds, specs)
    select_sampler.main(args)  # the previous outputs: selection.json and sel_s0, sel_s1
    prev = os.path.dirname(args.out)
    flags = ["--dataset", path, "--folds", "3", "--candidates", "bc_all", "bc_exp", "--heldout", args.heldout,
             "--fold-dataset", args.fold_dataset, "--fold-policy", args.fold_policy, "--full-policy", args.full_policy,
             "--seeds", "0", "1", "--out", "{disk}/out/selection.json", "--out-policy", "{disk}/out/sel_s{seed}/policy.pt"]
    rep = on_full_disk(tmp_path, ["select_sampler.py", *flags], {"out": prev}, free_kb=8)
    assert_refused_and_intact(rep)
