"""ILID's fast path (fast/train_ilid.py) against its reference (train_ilid.py): replica k of a run with several seeds
follows the reference run with --seed k (every loss of the three training stages, 100 steps each, and the rows each
replica selects), writes that run's files, and the reference's CLI refuses a bad value in one line."""
import json
import os

import numpy as np
import pytest
import torch

import fast.train_ilid as fast
import train_ilid
from conftest import one_line_error, run
from oilca import contract

# d_lr 3e-3 and bar 0.6: D (clipped to [0.1, 0.9]) passes the bar on part of D_S after 100 steps, so the selection
# keeps some rows and drops others
TINY = dict(hidden=16, batch_size=32, total_steps=100, d_steps=100, bc_steps=100, loss_trace=100, d_lr=3e-3, bar=0.6,
            eval_every=0, eval_episodes=0, threads=1)
LOSSES = ("d_loss", "bc_loss", "policy_loss", "alpha_loss")


@pytest.fixture(scope="module")
def fast_run(tiny_dataset, tmp_path_factory):
    """A fast run with seeds (0, 1), its final evaluation included, and its folder."""
    folder = tmp_path_factory.mktemp("fast_ilid")
    out = fast.main(fast.Args(dataset=tiny_dataset, seeds=(0, 1), out_dir=str(folder / "s{seed}"),
                              final_eval=str(folder / "eval_s{seed}_{split}.json"), final_eval_episodes=2, **TINY))
    return out, folder


def test_replicas_follow_reference_runs(fast_run, tiny_dataset, tmp_path):
    out, _ = fast_run
    assert [r["seed"] for r in out["runs"]] == [0, 1]
    worst = 0.0
    for k, replica in zip((0, 1), out["runs"]):
        ref = train_ilid.main(train_ilid.Args(dataset=tiny_dataset, seed=k, out_dir=str(tmp_path / f"ref{k}"), **TINY))
        for name in LOSSES:
            assert len(replica["loss_trace"][name]) == len(ref["loss_trace"][name]) == 100, name
            np.testing.assert_allclose(replica["loss_trace"][name], ref["loss_trace"][name], rtol=1e-5, atol=1e-5,
                                       err_msg=f"seed {k}: {name}")
            worst = max(worst, np.abs(np.subtract(replica["loss_trace"][name], ref["loss_trace"][name])).max())
        # the selection with rollback: the same rows, with the same weights
        np.testing.assert_array_equal(replica["row_weights"], ref["row_weights"])
        assert 0 < replica["selected"] == ref["selected"] < len(ref["row_weights"]) - 50  # of the 550 D_S rows
        for name in ref["log"][0]:  # the logged row (D on D_E and D_S, rows selected, ℓ_E, α, the gap, ...)
            np.testing.assert_allclose(replica["log"][-1][name], ref["log"][-1][name], rtol=1e-5, atol=1e-5,
                                       err_msg=name)
    print(f"max |fast - reference| over every loss of 100 steps: {worst:.2e}")
    a, b = (np.asarray(r["loss_trace"]["policy_loss"]) for r in out["runs"])
    assert np.abs(a - b).max() > 1e-3  # the replicas differ


def test_fast_run_writes_each_seeds_files(fast_run):
    out, folder = fast_run
    for k in (0, 1):
        run_dir = folder / f"s{k}"
        assert {"policy.pt", "args.json", "progress.csv"} <= set(os.listdir(run_dir))
        art = contract.load_policy(str(run_dir / "policy.pt"))
        assert art["seed"] == k and art["method"] == "ilid" and art["train_args"]["seed"] == k
        assert "seeds" not in art["train_args"]  # a reference run's args
        assert json.load(open(run_dir / "args.json"))["out_dir"] == str(run_dir)
        assert len(open(run_dir / "progress.csv").read().splitlines()) == 2  # header, the last step
        for split in ("train", "heldout"):
            res = json.load(open(folder / f"eval_s{k}_{split}.json"))
            assert res["seed"] == k and res["method"] == "ilid" and len(res["returns"]) == 2


@pytest.mark.parametrize("auto_alpha", [True, False])
def test_device_sampling_path_keeps_replicas_apart(auto_alpha, tiny_dataset, tmp_path, monkeypatch):
    """The GPU's sampling (each replica's torch generator, chunks of steps), run here on the CPU, with α learnt or
    fixed (no π_E stage): replica 1 of seeds (0, 1) is the run with seed 1 alone."""
    monkeypatch.setattr(fast, "samples_on_device", lambda device: True)
    monkeypatch.setattr(fast, "minibatch_generator", lambda seed, device: torch.Generator(device).manual_seed(seed))
    kw = dict(TINY, total_steps=30, d_steps=30, bc_steps=30, loss_trace=30, auto_alpha=auto_alpha, alpha=0.5)
    both = fast.main(fast.Args(dataset=tiny_dataset, seeds=(0, 1), out_dir=str(tmp_path / "b{seed}"), **kw))
    alone = fast.main(fast.Args(dataset=tiny_dataset, seeds=(1,), out_dir=str(tmp_path / "a"), **kw))
    for name in LOSSES:
        np.testing.assert_allclose(both["runs"][1]["loss_trace"][name], alone["runs"][0]["loss_trace"][name],
                                   rtol=1e-5, atol=1e-5, err_msg=name)
    assert (both["runs"][1]["loss_trace"]["bc_loss"] == []) != auto_alpha
    assert (both["runs"][1]["log"][-1]["alpha"] == 0.5) != auto_alpha  # fixed α stays


def test_reference_cli_refuses_a_bad_value(tiny_dataset, tmp_path):
    proc = run("train_ilid.py", "--dataset", tiny_dataset, "--out-dir", str(tmp_path / "o"), "--bar", "1.5", ok=False)
    assert one_line_error(proc, "--bar")
    assert not os.path.exists(tmp_path / "o")
