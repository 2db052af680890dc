"""Every script run as a user runs it: in a subprocess, on tiny configs, chained through tmp_path."""
import hashlib
import json
import os
import subprocess
import sys

import numpy as np
import pytest

from oilca import contract

import envs
from conftest import ROOT, one_line_error, run


def sha(path):
    return hashlib.sha256(open(path, "rb").read()).hexdigest()


def test_toy_env_script(tmp_path):
    png = str(tmp_path / "traj.png")
    proc = run("envs/toy.py", "--episodes", "2", "--n-classes", "3", "--plot-path", png)
    assert "class 2:" in proc.stdout and os.path.getsize(png) > 5_000


def test_collect_then_train_ivae(tmp_path):
    data = str(tmp_path / "toy.npz")
    proc = run("collect_data.py", "--env", "toy", "--out", data, "--toy.n-classes", "3", "--toy.episodes-per-class", "10",
               "--toy.env.episode-len", "20", "--seed", "1")
    assert "D_E" in proc.stdout and "uniform random" in proc.stdout
    d = envs.load_dataset(data)
    assert len(d["rewards"]) == 3 * 10 * 20 and d["metadata"]["heldout_classes"] == [3]
    assert set(np.unique(d["aux"])) == {0, 1, 2} and d["expert"].any()
    out = str(tmp_path / "ivae")
    proc = run("train_ivae.py", "--dataset", data, "--out-dir", out, "--total-steps", "60", "--restarts", "2",
               "--log-every", "30", "--hidden", "16")
    assert "steps/s" in proc.stdout
    metrics = json.load(open(os.path.join(out, "metrics.json")))
    assert metrics["n_transitions"] == 3 * 10 * 20 and {"conditional", "standard"} <= set(metrics)
    with np.load(os.path.join(out, "latents.npz")) as z:  # the printed MCC is the one of the saved posterior
        assert z["u_mean"].shape == (600, 2)
        assert metrics["conditional"]["mcc"] == metrics["conditional"]["history"][metrics["conditional"]["restart"]]["mcc"]
    for name in ("ivae.pt", "latents.npz", "fig3.png", "args.json"):
        assert os.path.exists(os.path.join(out, name))
    # a second run with the same arguments keeps the outputs; --force re-fits
    assert "kept" in run("train_ivae.py", "--dataset", data, "--out-dir", out, "--total-steps", "60", "--restarts", "2",
                         "--log-every", "30", "--hidden", "16").stdout


def test_collection_is_bit_for_bit_repeatable(tmp_path):
    a, b, c = (str(tmp_path / f"{n}.npz") for n in "abc")
    common = ["--toy.n-classes", "2", "--toy.episodes-per-class", "5", "--toy.env.episode-len", "10"]
    run("collect_data.py", "--out", a, "--seed", "4", *common)
    run("collect_data.py", "--out", b, "--seed", "4", *common)
    run("collect_data.py", "--out", c, "--seed", "5", *common)
    assert sha(a) == sha(b) and sha(a) != sha(c)
    # re-running onto an existing output: same arguments keep it, other arguments refuse without --force
    assert "kept" in run("collect_data.py", "--out", a, "--seed", "4", *common).stdout
    proc = run("collect_data.py", "--out", a, "--seed", "9", *common, ok=False)
    assert proc.returncode != 0 and "--force" in proc.stderr
    run("collect_data.py", "--out", a, "--seed", "5", *common, "--force")
    assert sha(a) == sha(c)


def test_collect_rejects_unknown_or_unavailable_envs(tmp_path):
    for env, words in (("mujoco:hopper", "unknown env id"), ("dmc:cartpole-swingup", "no behaviour policy")):
        proc = run("collect_data.py", "--env", env, "--out", str(tmp_path / "x.npz"), ok=False)
        assert one_line_error(proc, words), proc.stderr
    assert not os.path.exists(tmp_path / "x.npz")


def test_policy_stages_chain(tmp_path):
    """The stages by hand, as a user runs them from a shell: collect → iVAE → BC-exp (the sampler) → augment → DWBC on
    the augmented data (OILCA) → evaluate → report. BC-all, DWBC on D_all and the baselines run through the same
    scripts in the runner tests and the main-job test; a stage's one-line refusals are tests/test_faults.py's."""
    data = str(tmp_path / "toy.npz")
    run("collect_data.py", "--out", data, "--toy.n-classes", "2", "--toy.episodes-per-class", "10", "--toy.env.episode-len", "20")
    run("train_ivae.py", "--dataset", data, "--out-dir", str(tmp_path / "ivae"), "--total-steps", "40", "--restarts", "1",
        "--no-compare", "--hidden", "16")
    small = ["--total-steps", "40", "--hidden", "16", "--eval-every", "20", "--eval-episodes", "4"]
    run("train_bc.py", "--dataset", data, "--out-dir", str(tmp_path / "bc_exp"), *small)
    proc = run("augment.py", "--dataset", data, "--ivae", str(tmp_path / "ivae" / "ivae.pt"), "--out", str(tmp_path / "aug.npz"),
               "--sampler", str(tmp_path / "bc_exp" / "policy.pt"), "--ratio", "0.3")
    assert "augmented" in proc.stdout
    proc = run("train_dwbc.py", "--dataset", str(tmp_path / "aug.npz"), "--out-dir", str(tmp_path / "oilca"), *small)
    assert "[oilca]" in proc.stdout
    progress = open(tmp_path / "oilca" / "progress.csv").read().splitlines()
    assert progress[0].startswith("step,") and len(progress) == 3  # header + evaluations at steps 20 and 40
    results = tmp_path / "results"
    for method in ("bc_exp", "oilca"):
        run("evaluate.py", "--policy", str(tmp_path / method / "policy.pt"), "--split", "train", "heldout", "--episodes", "4",
            "--out", str(results / (method + "_{split}.json")))
    assert len(list(results.glob("*.json"))) == 4
    proc = run("report.py", "--results", str(results))
    assert "| oilca |" in proc.stdout and "**" in proc.stdout
    for name in ("table.md", "fig4.png"):
        assert (results / name).exists()


@pytest.mark.slow
def test_main_job_runs_on_a_tiny_config(tmp_path):
    """The README's main command (scripts/toy_pipeline.sh → runner.py) end to end on a tiny grid, baselines included."""
    flags = ["--root", str(tmp_path), "--seeds", "0", "--fig5-seeds", "0", "--fig5-ratios", "0.25", "--steps", "60",
             "--episodes", "6", "--ivae-steps", "60", "--methods", "bc_exp", "bc_all", "dwbc", "oilca", "baselines",
             "--collect-flags=--toy.n-classes 2 --toy.episodes-per-class 6 --toy.env.episode-len 20"]  # a small dataset
    proc = subprocess.run(["bash", "scripts/toy_pipeline.sh", *flags], cwd=ROOT, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    table = open(tmp_path / "results" / "toy" / "table.md").read()
    for method in ("bc_exp", "bc_all", "dwbc", "oilca", "oilca_r0.25", "oril", "bcnd", "lobsdice", "oril_ca", "bcnd_ca",
                   "reference_expert", "reference_random"):
        assert f"| {method} |" in table
    timing = json.load(open(tmp_path / "results" / "toy" / "timing.json"))
    assert {"collect", "ivae", "bc", "augment", "dwbc_oilca", "baselines", "fig5_ratios", "report", "total"} <= set(timing)
    assert (tmp_path / "results" / "toy" / "fig5.png").exists() and (tmp_path / "runs" / "toy" / "ivae" / "fig3.png").exists()
    # every job's command line is in the log, and `--help` prints the runner's help instead of starting a run
    log = open(tmp_path / "runs" / "toy" / "jobs.log").read()
    for script in ("collect_data.py", "train_ivae.py", "train_bc.py", "augment.py", "train_dwbc.py", "train_oril.py",
                   "train_bcnd.py", "train_lobsdice.py", "evaluate.py", "report.py"):
        assert script in log
    helped = subprocess.run(["bash", "scripts/toy_pipeline.sh", "--help"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert helped.returncode == 0 and "--dry-run" in helped.stdout


def test_gpu_check_script_runs_on_a_cpu_with_tiny_settings(tiny_dataset, tiny_ivae, tmp_path):
    """scripts/gpu_check.sh end to end on the CPU (DEVICE=cpu, 20 steps, no benchmark): 5 batched DWBC and 5 OILCA
    replicas, their policies packed for evaluation elsewhere. Tiny toy data stand in for the cartpole files."""
    import shutil
    import tarfile

    import augment

    data = tmp_path / "data"
    data.mkdir()
    shutil.copy(tiny_dataset, data / "dmc_cartpole-swingup.npz")
    augment.main(augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(data / "dmc_cartpole-swingup_aug_r0.5.npz"),
                              sampler_out=str(tmp_path / "sampler" / "policy.pt"), sampler_steps=20, hidden=16))
    env = {**os.environ, "DEVICE": "cpu", "STEPS": "20", "BENCH": "0", "PY": sys.executable}
    proc = subprocess.run(["bash", "scripts/gpu_check.sh", str(data), str(tmp_path / "out")], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert "dwbc: 5 replicas × 20 steps" in proc.stdout and "oilca: 5 replicas × 20 steps" in proc.stdout
    names = tarfile.open(tmp_path / "out" / "policies.tar").getnames()
    assert sorted(names) == sorted(f"{m}_s{s}/policy.pt" for m in ("dwbc", "oilca") for s in range(5))
    art = contract.load_policy(str(tmp_path / "out" / "oilca_s3" / "policy.pt"))
    assert art["method"] == "oilca" and art["seed"] == 3
    missing = subprocess.run(["bash", "scripts/gpu_check.sh", str(tmp_path / "nowhere"), str(tmp_path / "o2")], cwd=ROOT,
                             env=env, capture_output=True, text=True, timeout=60)
    assert one_line_error(missing, "not found") and not (tmp_path / "o2").exists()
