"""ORIL's fast path (fast/train_oril.py) against its reference (train_oril.py): replica k of a run with several seeds
follows the reference run with --seed k (every loss of both stages, 100 steps each), writes that run's files, and the
reference's CLI refuses a bad value in one line."""
import json
import os

import numpy as np
import pytest
import torch

import fast.train_oril as fast
import train_oril
from conftest import one_line_error, run
from oilca import contract

TINY = dict(hidden=16, batch_size=32, total_steps=100, reward_steps=100, loss_trace=100, eval_every=0,
            eval_episodes=0, threads=1)
LOSSES = ("reward_loss", "v_loss", "q_loss", "actor_loss")


@pytest.fixture(scope="module")
def fast_run(tiny_dataset, tmp_path_factory):
    """A fast run with seeds (0, 1), its final evaluation included, and its folder."""
    folder = tmp_path_factory.mktemp("fast_oril")
    out = fast.main(fast.Args(dataset=tiny_dataset, seeds=(0, 1), out_dir=str(folder / "s{seed}"),
                              final_eval=str(folder / "eval_s{seed}_{split}.json"), final_eval_episodes=2, **TINY))
    return out, folder


def test_replicas_follow_reference_runs(fast_run, tiny_dataset, tmp_path):
    out, _ = fast_run
    assert [r["seed"] for r in out["runs"]] == [0, 1]
    worst = 0.0
    for k, replica in zip((0, 1), out["runs"]):
        ref = train_oril.main(train_oril.Args(dataset=tiny_dataset, seed=k, out_dir=str(tmp_path / f"ref{k}"), **TINY))
        for name in LOSSES:
            assert len(replica["loss_trace"][name]) == len(ref["loss_trace"][name]) == 100, name
            np.testing.assert_allclose(replica["loss_trace"][name], ref["loss_trace"][name], rtol=1e-5, atol=1e-5,
                                       err_msg=f"seed {k}: {name}")
            worst = max(worst, np.abs(np.subtract(replica["loss_trace"][name], ref["loss_trace"][name])).max())
        for name in ref["log"][0]:  # the logged row (reward model's R on D_E, D_U, q_mean, adv_mean, ...)
            np.testing.assert_allclose(replica["log"][-1][name], ref["log"][-1][name], rtol=1e-5, atol=1e-5,
                                       err_msg=name)
    print(f"max |fast - reference| over every loss of 100 steps: {worst:.2e}")
    a, b = (np.asarray(r["loss_trace"]["actor_loss"]) for r in out["runs"])
    assert np.abs(a - b).max() > 1e-3  # the replicas differ


def test_fast_run_writes_each_seeds_files(fast_run):
    out, folder = fast_run
    for k in (0, 1):
        run_dir = folder / f"s{k}"
        assert {"policy.pt", "args.json", "progress.csv"} <= set(os.listdir(run_dir))
        art = contract.load_policy(str(run_dir / "policy.pt"))
        assert art["seed"] == k and art["method"] == "oril" and art["train_args"]["seed"] == k
        assert "seeds" not in art["train_args"]  # a reference run's args
        assert json.load(open(run_dir / "args.json"))["out_dir"] == str(run_dir)
        assert len(open(run_dir / "progress.csv").read().splitlines()) == 2  # header, the last step
        for split in ("train", "heldout"):
            res = json.load(open(folder / f"eval_s{k}_{split}.json"))
            assert res["seed"] == k and res["method"] == "oril" and len(res["returns"]) == 2


def test_device_sampling_path_keeps_replicas_apart(tiny_dataset, tmp_path, monkeypatch):
    """The GPU's sampling (each replica's torch generator, chunks of steps), run here on the CPU: replica 1 of seeds
    (0, 1) is the run with seed 1 alone."""
    monkeypatch.setattr(fast, "samples_on_device", lambda device: True)
    monkeypatch.setattr(fast, "minibatch_generator", lambda seed, device: torch.Generator(device).manual_seed(seed))
    kw = dict(TINY, total_steps=30, reward_steps=30, loss_trace=30)
    both = fast.main(fast.Args(dataset=tiny_dataset, seeds=(0, 1), out_dir=str(tmp_path / "b{seed}"), **kw))
    alone = fast.main(fast.Args(dataset=tiny_dataset, seeds=(1,), out_dir=str(tmp_path / "a"), **kw))
    for name in LOSSES:
        np.testing.assert_allclose(both["runs"][1]["loss_trace"][name], alone["runs"][0]["loss_trace"][name],
                                   rtol=1e-5, atol=1e-5, err_msg=name)


def test_reference_cli_refuses_a_bad_value(tiny_dataset, tmp_path):
    proc = run("train_oril.py", "--dataset", tiny_dataset, "--out-dir", str(tmp_path / "o"), "--eta", "1.5", ok=False)
    assert one_line_error(proc, "--eta")
    assert not os.path.exists(tmp_path / "o")
