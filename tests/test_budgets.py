"""Budgets from one run (`--checkpoints`), one dataset per seed in the fast path (`--dataset ..._s{seed}.npz`) and
`--cuda-graph` off a GPU: the policy saved at step N of a long run is the policy of an N-step run, replica k reading its own
dataset follows the run with `--seed k` on that dataset, and a result of a checkpoint says its step."""
import dataclasses
import json

import numpy as np
import pytest
import torch

from oilca import contract

import envs
import evaluate
import train_bc
import train_dwbc
from conftest import one_line_error, run
from fast import replicas
from fast import train_bc as fast_bc
from fast import train_dwbc as fast_dwbc

TINY = dict(hidden=16, batch_size=32, eval_every=0, eval_episodes=2, threads=1)


def same_weights(a: str, b: str) -> bool:
    sa, sb = contract.load_policy(a)["state_dict"], contract.load_policy(b)["state_dict"]
    return sa.keys() == sb.keys() and all(torch.equal(sa[k], sb[k]) for k in sa)


@pytest.mark.parametrize("stage", [train_bc, train_dwbc, fast_bc, fast_dwbc],
                         ids=["bc", "dwbc", "fast_bc_two_seeds", "fast_dwbc_two_seeds"])
def test_checkpoint_is_the_shorter_run(stage, tiny_augmented_args, tmp_path):
    dataset = tiny_augmented_args.out if stage in (train_dwbc, fast_dwbc) else tiny_augmented_args.dataset
    seeds = (0, 2) if stage in (fast_bc, fast_dwbc) else None
    name = "long_s{seed}" if seeds else "long"
    kw = dict(seeds=seeds) if seeds else {}
    stage.main(stage.Args(dataset=dataset, total_steps=60, checkpoints=(20, 40), out_dir=str(tmp_path / name), **kw,
                          **TINY))
    # the shorter run as the long one ran (the reference alone, or the same seeds side by side: exact, bit for bit)
    stage.main(stage.Args(dataset=dataset, total_steps=20, out_dir=str(tmp_path / ("short_s{seed}" if seeds else "short_s0")),
                          **kw, **TINY))
    for k in seeds or (0,):
        long_dir = tmp_path / name.replace("{seed}", str(k))
        assert same_weights(str(long_dir / "policy_step20.pt"), str(tmp_path / f"short_s{k}" / "policy.pt"))
        assert not same_weights(str(long_dir / "policy_step40.pt"), str(long_dir / "policy_step20.pt"))
        art = contract.load_policy(str(long_dir / "policy_step40.pt"))
        assert art["checkpoint_step"] == 40 and art["train_args"]["total_steps"] == 60 and art["seed"] == k
        assert art["train_args"]["checkpoints"] == [20, 40]
        final = contract.load_policy(str(long_dir / "policy.pt"))
        assert "checkpoint_step" not in final and final["policy_step"] == 60 and art["policy_step"] == 40


def test_runs_without_the_new_options_keep_their_records(tiny_dataset, tmp_path):
    train_bc.main(train_bc.Args(dataset=tiny_dataset, total_steps=5, out_dir=str(tmp_path / "bc"), **TINY))
    recorded = contract.load_policy(str(tmp_path / "bc" / "policy.pt"))["train_args"]
    assert "checkpoints" not in recorded and "cuda_graph" not in recorded


def test_flush_denormal_is_recorded_only_when_used(tiny_dataset, tmp_path):
    """--flush-denormal (the budget study's long CPU runs) is recorded in the run's facts when on, absent when off,
    and changes the policy by float rounding at most on a short run."""
    try:
        train_bc.main(train_bc.Args(dataset=tiny_dataset, total_steps=20, out_dir=str(tmp_path / "on"),
                                    flush_denormal=True, **TINY))
    finally:
        torch.set_flush_denormal(False)  # the flag holds for the rest of a process: give the next test a clean one
    train_bc.main(train_bc.Args(dataset=tiny_dataset, total_steps=20, out_dir=str(tmp_path / "off"), **TINY))
    on, off = (contract.load_policy(str(tmp_path / d / "policy.pt")) for d in ("on", "off"))
    assert on["train_args"]["flush_denormal"] is True and "flush_denormal" not in off["train_args"]
    for k in off["state_dict"]:
        assert torch.allclose(on["state_dict"][k], off["state_dict"][k], atol=1e-6)


def test_a_checkpoint_result_names_its_step(tiny_dataset, tmp_path):
    train_bc.main(train_bc.Args(dataset=tiny_dataset, total_steps=30, checkpoints=(10,), out_dir=str(tmp_path / "bc"), **TINY))
    out = str(tmp_path / "r_{split}.json")
    evaluate.main(evaluate.Args(policy=str(tmp_path / "bc" / "policy_step10.pt"), episodes=2, split=("train",), out=out))
    with open(out.replace("{split}", "train")) as f:
        res = json.load(f)
    assert res["policy_step"] == 10 and res["train_args"]["total_steps"] == 30


@pytest.mark.parametrize("flags", [["--checkpoints", "60"], ["--checkpoints", "0"], ["--checkpoints", "5", "5"]],
                         ids=["at_total", "zero", "twice"])
def test_bad_checkpoints_are_refused(tiny_dataset, tmp_path, flags):
    out = tmp_path / "bc"
    proc = run("train_bc.py", "--dataset", tiny_dataset, "--total-steps", "60", "--out-dir", str(out), *flags, ok=False)
    assert one_line_error(proc, "--checkpoints"), proc.stderr
    assert not out.exists()


def test_one_dataset_per_seed(tiny_augmented_args, tmp_path):
    """Replica k of `--seeds` with `{seed}` in --dataset trains on its own dataset as `--seed k` alone does."""
    import augment
    for k in (0, 1):  # two augmentations of the same data (their own sampler seeds), one per training seed
        augment.main(dataclasses.replace(tiny_augmented_args, seed=k + 5, out=str(tmp_path / f"aug_s{k}.npz"),
                                         sampler_out=str(tmp_path / f"sampler_s{k}" / "policy.pt")))
    common = dict(total_steps=40, loss_trace=40, **TINY)
    out = fast_dwbc.main(fast_dwbc.Args(dataset=str(tmp_path / "aug_s{seed}.npz"), seeds=(0, 1),
                                        out_dir=str(tmp_path / "b_s{seed}"), **common))
    for k, r in enumerate(out["runs"]):
        alone = train_dwbc.main(train_dwbc.Args(dataset=str(tmp_path / f"aug_s{k}.npz"), seed=k,
                                                out_dir=str(tmp_path / f"alone_s{k}"), **common))
        np.testing.assert_allclose(r["loss_trace"]["policy_loss"], alone["loss_trace"]["policy_loss"], rtol=1e-5, atol=1e-5)
        art = contract.load_policy(str(tmp_path / f"b_s{k}" / "policy.pt"))
        assert art["dataset"] == str(tmp_path / f"aug_s{k}.npz")
        assert art["dataset_fingerprint"] == contract.load_policy(str(tmp_path / f"alone_s{k}" / "policy.pt"))["dataset_fingerprint"]
    assert out["runs"][0]["loss_trace"]["policy_loss"] != out["runs"][1]["loss_trace"]["policy_loss"]


def test_cuda_graph_is_ignored_on_a_cpu(tiny_dataset, tmp_path):
    plain = fast_bc.main(fast_bc.Args(dataset=tiny_dataset, total_steps=20, loss_trace=20, out_dir=str(tmp_path / "a"),
                                      **TINY))
    graph = fast_bc.main(fast_bc.Args(dataset=tiny_dataset, total_steps=20, loss_trace=20, cuda_graph=True,
                                      out_dir=str(tmp_path / "b"), **TINY))
    assert plain["runs"][0]["loss_trace"] == graph["runs"][0]["loss_trace"]


def test_index_chunks_hand_out_each_step_once():
    drawn = []

    def draw(n):
        drawn.append(n)
        return torch.arange(len(drawn) * 100, len(drawn) * 100 + n)

    chunks = replicas.IndexChunks(draw, chunk=3)
    assert [int(chunks.next()) for _ in range(7)] == [100, 101, 102, 200, 201, 202, 300] and drawn == [3, 3, 3]


def test_expert_episodes_sets_the_size_of_d_e(tmp_path):
    """collect_data.py --expert-episodes N (the paper's Table 5 |D_E|): exactly N of the positive episodes, at random."""
    import collect_data
    from envs.toy import ToyConfig
    toy = ToyConfig(n_classes=2, episodes_per_class=10)
    out = collect_data.main(collect_data.Args(out=str(tmp_path / "d.npz"), toy=toy, seed=3, expert_episodes=3))
    data = envs.load_dataset(str(tmp_path / "d.npz"))
    episodes = np.unique(data["episode_ids"][data["expert"]])
    assert len(episodes) == out["n_expert_episodes"] == 3
    top = np.argsort(-out["returns"], kind="stable")[:4]  # 20% of 20 episodes are positives
    assert set(episodes) <= set(top) and data["metadata"]["split"]["expert_episodes"] == 3
    proc = run("collect_data.py", "--out", str(tmp_path / "e.npz"), "--toy.n-classes", "2", "--toy.episodes-per-class",
               "10", "--expert-episodes", "5", ok=False)
    assert one_line_error(proc, "--expert-episodes"), proc.stderr
    assert not (tmp_path / "e.npz").exists()


def test_evaluate_budgets_scores_every_saved_policy(tiny_dataset, tmp_path):
    """scripts/evaluate_budgets.sh (the GPU budget study's CPU half) names results as the runner's --budgets does."""
    import subprocess
    import sys
    from conftest import ROOT
    runs, res = tmp_path / "runs", tmp_path / "results"
    train_bc.main(train_bc.Args(dataset=tiny_dataset, seed=2, total_steps=30, checkpoints=(10,), out_dir=str(runs / "bc_exp_b30_s2"),
                                **TINY))
    proc = subprocess.run(["bash", "scripts/evaluate_budgets.sh", str(runs), str(res), "2", "train heldout"], cwd=ROOT,
                          capture_output=True, text=True, env={**__import__("os").environ, "PY": sys.executable})
    assert proc.returncode == 0, proc.stderr
    for b, step in ((30, 30), (10, 10)):  # every policy records its step count (the final one: --total-steps)
        for split in ("train", "heldout"):
            with open(res / f"bc_exp_b{b}_s2_{split}.json") as f:
                r = json.load(f)
            assert r.get("policy_step") == step and r["seed"] == 2 and r["episodes"] == 2
    again = subprocess.run(["bash", "scripts/evaluate_budgets.sh", str(runs), str(res), "2", "train heldout"], cwd=ROOT,
                           capture_output=True, text=True, env={**__import__("os").environ, "PY": sys.executable})
    assert again.returncode == 0 and again.stdout == ""  # finished results are kept
