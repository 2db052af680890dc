"""The fast path's machinery (fast/replicas.py) and BC's fast trainer: replica k of a fast run follows the reference
run with seed k (train_bc.py --seed k), writes that run's files, and the progress files grow as the run goes. Every
other method's fast trainer has the same contract in tests/test_fast_<method>.py."""
import glob
import json
import os

import numpy as np
import pytest
import torch

import train_bc
from conftest import one_line_error, run
from fast import replicas
from fast import train_bc as fast_bc
from oilca import contract
from training import policy, trainer

TINY = dict(hidden=16, batch_size=32, eval_every=0, eval_episodes=2, threads=1)
STEPS = 100


def test_stacked_networks_and_per_replica_losses_compute_each_replica():
    torch.manual_seed(0)
    actors = [policy.Actor(3, 2, hidden=8) for _ in range(3)]
    actor = replicas.stack_replicas(actors)
    obs, act = torch.randn(3, 5, 3), torch.rand(3, 5, 2) * 1.8 - 0.9
    log_pi = actor.log_prob(obs, act)
    losses = replicas.per_replica(policy.nll, log_pi)  # the reference's plain loss, one value per replica
    assert log_pi.shape == (3, 5, 2) and losses.shape == (3,)
    for k in range(3):
        torch.testing.assert_close(log_pi[k], actors[k].log_prob(obs[k], act[k]))
        torch.testing.assert_close(losses[k], policy.bc_loss(actors[k], obs[k], act[k]))
    # shared non-tensor arguments pass through; the round trip back to a plain module is exact
    scaled = replicas.per_replica(lambda lp, c: c * policy.nll(lp), log_pi, 2.0)
    torch.testing.assert_close(scaled, 2 * losses)
    fresh = replicas.load_replica(policy.Actor(3, 2, hidden=8), actor, 1)
    for p, q in zip(fresh.parameters(), actors[1].parameters()):
        assert torch.equal(p, q)


def fast_and_reference(tmp_path, seeds, **kw):
    """Losses of the first STEPS steps: replica k of fast/train_bc.py --seeds ... and train_bc.py --seed k."""
    common = dict(total_steps=STEPS, loss_trace=STEPS, **TINY, **kw)
    out = fast_bc.main(fast_bc.Args(seeds=seeds, out_dir=str(tmp_path / "b_s{seed}"), **common))
    fast = [r["loss_trace"] for r in out["runs"]]
    ref = [train_bc.main(train_bc.Args(seed=k, out_dir=str(tmp_path / f"s{k}"), **common))["loss_trace"] for k in seeds]
    return fast, ref


def test_bc_replicas_follow_reference_runs(tiny_dataset, tmp_path):
    fast, ref = fast_and_reference(tmp_path, (0, 1, 2), dataset=tiny_dataset)
    for b, s in zip(fast, ref):
        assert len(b) == len(s) == STEPS
        np.testing.assert_allclose(b, s, rtol=1e-5, atol=1e-5)
    assert all(np.abs(np.subtract(fast[0], other)).max() > 1e-3 for other in fast[1:])  # replicas differ


def test_fast_run_writes_each_seeds_files(tiny_dataset, tmp_path):
    out = fast_bc.main(fast_bc.Args(dataset=tiny_dataset, seeds=(0, 1), total_steps=20, out_dir=str(tmp_path / "bc_s{seed}"),
                                    final_eval=str(tmp_path / "results" / "bc_s{seed}_{split}.json"),
                                    final_eval_episodes=2, checkpoints=(10,), **dict(TINY, eval_every=10)))
    alone = train_bc.main(train_bc.Args(dataset=tiny_dataset, seed=1, total_steps=20, out_dir=str(tmp_path / "alone"),
                                        checkpoints=(10,), **dict(TINY, eval_every=10)))
    assert [r["seed"] for r in out["runs"]] == [0, 1]
    saved = {}
    for k in (0, 1):
        folder = tmp_path / f"bc_s{k}"
        saved[k] = json.load(open(folder / "args.json"))
        assert saved[k]["seed"] == k and "seeds" not in saved[k] and saved[k]["out_dir"] == str(folder)
        art = contract.load_policy(str(folder / "policy.pt"))
        assert art["seed"] == k and art["method"] == "bc_exp" and art["train_args"] == saved[k]
        assert art["policy_step"] == 20 and contract.load_policy(str(folder / "policy_step10.pt"))["policy_step"] == 10
        rows = open(folder / "progress.csv").read().splitlines()
        assert rows[0] == ",".join(alone["log"][0]) and len(rows) == 3  # the reference's columns, evaluations at 10, 20
        for split in ("train", "heldout"):
            res = json.load(open(tmp_path / "results" / f"bc_s{k}_{split}.json"))
            assert res["seed"] == k and res["policy"] == str(folder / "policy.pt") and len(res["returns"]) == 2
            assert res["policy_step"] == 20
    # replica 1's args are those of the reference run with --seed 1, paths aside
    reference = json.load(open(tmp_path / "alone" / "args.json"))
    drop = ("out_dir", "final_eval", "final_eval_episodes")
    assert {k: v for k, v in saved[1].items() if k not in drop} == {k: v for k, v in reference.items() if k not in drop}
    a, b = (contract.load_policy(str(tmp_path / f"bc_s{k}" / "policy.pt"))["state_dict"] for k in (0, 1))
    assert not torch.equal(a["0.weight"], b["0.weight"])


def test_several_seeds_need_seed_in_the_paths(tiny_dataset, tmp_path):
    with pytest.raises(ValueError, match=r"--final-eval must contain \{seed\}"):
        fast_bc.main(fast_bc.Args(dataset=tiny_dataset, seeds=(0, 1), out_dir=str(tmp_path / "s{seed}"),
                                  final_eval=str(tmp_path / "r_{split}.json")))
    proc = run("fast/train_bc.py", "--dataset", tiny_dataset, "--seeds", "0", "1", "--out-dir", str(tmp_path / "d"), ok=False)
    assert one_line_error(proc, "--out-dir must contain {seed}"), proc.stderr
    assert not (tmp_path / "d").exists()
    proc = run("train_bc.py", "--dataset", tiny_dataset, "--seeds", "0", "1", ok=False)  # the reference has one seed
    assert one_line_error(proc, "--seeds"), proc.stderr


@pytest.mark.parametrize("fast", [False, True], ids=["reference", "fast"])
def test_progress_csv_grows_row_by_row_and_tensorboard(tiny_dataset, tmp_path, monkeypatch, fast):
    """At the second evaluation, progress.csv already holds the first one's row; --tensorboard writes event files."""
    seen = []

    def fake_eval(actor, norm, spec, episodes, seed):
        seen.append(sum(len(open(p).read().splitlines()) for p in glob.glob(str(tmp_path / "*" / "progress.csv"))))
        return 0.0

    stage = fast_bc if fast else train_bc
    monkeypatch.setattr(stage, "in_training_eval", fake_eval)
    kw = dict(seeds=(0, 1), out_dir=str(tmp_path / "bc_s{seed}")) if fast else dict(out_dir=str(tmp_path / "bc_s0"))
    res = stage.main(stage.Args(dataset=tiny_dataset, total_steps=30, tensorboard=True, **kw, **dict(TINY, eval_every=10)))
    seeds = (0, 1) if fast else (0,)
    R = len(seeds)
    # evaluations at 10, 20, 30, each of the R replicas: before the first nothing, then a header and a row per evaluation
    assert seen[::R] == [0, 2 * R, 3 * R]
    for k in seeds:
        folder = tmp_path / f"bc_s{k}"
        rows = open(folder / "progress.csv").read().splitlines()
        assert rows[0] == "step,loss,eval_return" and [r.split(",")[0] for r in rows[1:]] == ["10", "20", "30"]
        assert glob.glob(str(folder / "tb" / "events.out.tfevents.*"))
    logs = [r["log"] for r in res["runs"]] if fast else [res["log"]]
    assert all(len(log) == 3 for log in logs)


def test_threads_default_to_every_core():
    assert trainer.cpu_threads(None) == len(os.sched_getaffinity(0)) and trainer.cpu_threads(3) == 3


def test_device_sampling_path(tiny_dataset, tmp_path, monkeypatch):
    """The GPU's sampling (indices from a torch generator per replica, drawn many steps at a time), run here on the
    CPU: every index is in range (an index out of range would raise), the replicas train and differ."""
    monkeypatch.setattr(fast_bc, "samples_on_device", lambda device: True)
    monkeypatch.setattr(fast_bc, "minibatch_generator", lambda seed, device: torch.Generator(device).manual_seed(seed))
    monkeypatch.setattr(fast_bc, "IndexChunks", lambda draw, chunk=1000: replicas.IndexChunks(draw, chunk=7))
    out = fast_bc.main(fast_bc.Args(dataset=tiny_dataset, seeds=(0, 1), out_dir=str(tmp_path / "d_s{seed}"),
                                    total_steps=20, loss_trace=20, **TINY))
    traces = [r["loss_trace"] for r in out["runs"]]
    assert all(len(t) == 20 and np.isfinite(t).all() for t in traces) and traces[0] != traces[1]
    ref = train_bc.main(train_bc.Args(dataset=tiny_dataset, seed=0, out_dir=str(tmp_path / "r"), total_steps=20,
                                      loss_trace=20, **TINY))["loss_trace"]
    assert traces[0] != ref  # the same initialisation, other minibatches than numpy's
    chunks = replicas.IndexChunks(lambda n: torch.arange(n * 2).reshape(n, 2), chunk=3)
    assert [chunks.next().tolist() for _ in range(4)] == [[0, 1], [2, 3], [4, 5], [0, 1]]


def test_benchmark_script_times_reference_and_fast_path_side_by_side():
    """scripts/benchmark_replicas.py on tiny settings: a row per method and path, the fast path's beside the reference."""
    proc = run("scripts/benchmark_replicas.py", "--methods", "bc", "oril", "--steps", "10", "20", "--replicas", "2",
               "--hidden", "16")
    rows = [line.split() for line in proc.stdout.splitlines() if line.startswith(("bc ", "oril "))]
    assert [(r[0], r[1], r[2]) for r in rows] == [("bc", "reference", "1"), ("bc", "fast", "2"),
                                                  ("oril", "reference", "1"), ("oril", "fast", "2")]
    # a positive rate, or "n/a" where timing noise exceeded the 10 extra steps (seen on a loaded 2-core machine)
    assert all(r[3] == "n/a" or float(r[3]) > 0 for r in rows)
    assert all(r[4] == "n/a" or float(r[4]) > 0 for r in rows)
