"""Seeds side by side (`--seeds`) in every policy trainer: replica k follows the run with `--seed k` alone, writes
that run's files, and the progress files grow as the run goes."""
import glob
import json
import os

import numpy as np
import pytest
import torch

from oilca import contract
from oilca import policy
import train_bc
import train_bcnd
import train_dwbc
import train_lobsdice
import train_oril
from conftest import one_line_error, run

TINY = dict(hidden=16, batch_size=32, eval_every=0, eval_episodes=2, threads=1)
STEPS = 100


@pytest.fixture(scope="module")
def augmented(tiny_augmented_args):
    """tiny_dataset augmented (OILCA's input)."""
    return tiny_augmented_args.out

def test_stacked_networks_compute_each_replica():
    torch.manual_seed(0)
    actors = [policy.Actor(3, 2, hidden=8) for _ in range(3)]
    discs = [train_dwbc.Discriminator(3, 2) for _ in range(3)]
    actor, disc = policy.stack_replicas(actors), policy.stack_replicas(discs)
    obs, act = torch.randn(3, 5, 3), torch.rand(3, 5, 2) * 1.8 - 0.9
    log_pi, d = actor.log_prob(obs, act), disc(obs, act, torch.rand(3, 5, 2))
    losses = policy.bc_loss(actor, obs, act)
    assert log_pi.shape == (3, 5, 2) and d.shape == (3, 5) and losses.shape == (3,)
    for k in range(3):
        torch.testing.assert_close(log_pi[k], actors[k].log_prob(obs[k], act[k]))
        torch.testing.assert_close(losses[k], policy.bc_loss(actors[k], obs[k], act[k]))
    # the round trip back to a plain module is exact
    fresh = policy.load_replica(policy.Actor(3, 2, hidden=8), actor, 1)
    for p, q in zip(fresh.parameters(), actors[1].parameters()):
        assert torch.equal(p, q)


def batched_and_single(stage, tmp_path, seeds, **kw):
    """Losses of the first STEPS steps: replica k of `--seeds ...` and a run with `--seed k` alone, per seed."""
    common = dict(total_steps=STEPS, loss_trace=STEPS, **TINY, **kw)
    out = stage.main(stage.Args(seeds=seeds, out_dir=str(tmp_path / "b_s{seed}"), **common))
    batched = [r["loss_trace"] for r in out["runs"]]
    single = [stage.main(stage.Args(seed=k, out_dir=str(tmp_path / f"s{k}"), **common))["loss_trace"] for k in seeds]
    return batched, single


def test_bc_replicas_follow_single_runs(tiny_dataset, tmp_path):
    batched, single = batched_and_single(train_bc, tmp_path, (0, 1, 2), dataset=tiny_dataset)
    for b, s in zip(batched, single):
        assert len(b) == len(s) == STEPS
        np.testing.assert_allclose(b, s, rtol=1e-5, atol=1e-5)
    assert all(np.abs(np.subtract(batched[0], other)).max() > 1e-3 for other in batched[1:])  # replicas differ


@pytest.mark.parametrize("flags", [{}, dict(aug_frac=0.5, adaptive_eta=True, d_update_every=2)], ids=["default", "aug_frac"])
def test_dwbc_replicas_follow_single_runs(augmented, tmp_path, flags):
    batched, single = batched_and_single(train_dwbc, tmp_path, (0, 3), dataset=augmented, **flags)
    expected = {"policy_loss": STEPS, "d_loss": STEPS // flags.get("d_update_every", 1)}
    for b, s in zip(batched, single):
        for name, n in expected.items():
            assert len(b[name]) == len(s[name]) == n
            np.testing.assert_allclose(b[name], s[name], rtol=1e-5, atol=1e-5)
    assert np.abs(np.subtract(batched[0]["policy_loss"], batched[1]["policy_loss"])).max() > 1e-3


def test_batched_run_writes_each_seeds_files(augmented, tmp_path):
    out = train_dwbc.main(train_dwbc.Args(dataset=augmented, seeds=(0, 1), total_steps=20, out_dir=str(tmp_path / "oilca_s{seed}"),
                                          final_eval=str(tmp_path / "results" / "oilca_s{seed}_{split}.json"),
                                          final_eval_episodes=2, **dict(TINY, eval_every=10)))
    single = train_dwbc.main(train_dwbc.Args(dataset=augmented, seed=1, total_steps=20, out_dir=str(tmp_path / "alone"),
                                             **dict(TINY, eval_every=10)))
    assert [r["seed"] for r in out["runs"]] == [0, 1]
    saved = {}
    for k in (0, 1):
        folder = tmp_path / f"oilca_s{k}"
        saved[k] = json.load(open(folder / "args.json"))
        assert saved[k]["seed"] == k and saved[k]["seeds"] is None and saved[k]["out_dir"] == str(folder)
        art = contract.load_policy(str(folder / "policy.pt"))
        assert art["seed"] == k and art["method"] == "oilca" and art["train_args"] == saved[k]
        rows = open(folder / "progress.csv").read().splitlines()
        assert rows[0] == ",".join(single["log"][0]) and len(rows) == 3  # the single run's columns, evaluations at 10 and 20
        for split in ("train", "heldout"):
            res = json.load(open(tmp_path / "results" / f"oilca_s{k}_{split}.json"))
            assert res["seed"] == k and res["policy"] == str(folder / "policy.pt") and len(res["returns"]) == 2
    # replica 1's args are those of the run with --seed 1 alone, paths aside
    alone = json.load(open(tmp_path / "alone" / "args.json"))
    drop = ("out_dir", "final_eval", "final_eval_episodes")
    assert {k: v for k, v in saved[1].items() if k not in drop} == {k: v for k, v in alone.items() if k not in drop}
    a, b = (contract.load_policy(str(tmp_path / f"oilca_s{k}" / "policy.pt"))["state_dict"] for k in (0, 1))
    assert not torch.equal(a["0.weight"], b["0.weight"])


def test_several_seeds_need_seed_in_the_paths(tiny_dataset, tmp_path):
    with pytest.raises(ValueError, match=r"--final-eval must contain \{seed\}"):
        train_bc.main(train_bc.Args(dataset=tiny_dataset, seeds=(0, 1), out_dir=str(tmp_path / "s{seed}"),
                                    final_eval=str(tmp_path / "r_{split}.json")))
    proc = run("train_dwbc.py", "--dataset", tiny_dataset, "--seeds", "0", "1", "--out-dir", str(tmp_path / "d"), ok=False)
    assert one_line_error(proc, "--out-dir must contain {seed}"), proc.stderr
    assert not (tmp_path / "d").exists()


@pytest.mark.parametrize("seeds", [None, (0, 1)], ids=["single", "batched"])
def test_progress_csv_grows_row_by_row_and_tensorboard(tiny_dataset, tmp_path, monkeypatch, seeds):
    """At the second evaluation, progress.csv already holds the first one's row; --tensorboard writes event files."""
    seen = []

    def fake_eval(actor, norm, spec, episodes, seed):
        seen.append(sum(len(open(p).read().splitlines()) for p in glob.glob(str(tmp_path / "*" / "progress.csv"))))
        return 0.0

    monkeypatch.setattr(train_bc, "in_training_eval", fake_eval)
    res = train_bc.main(train_bc.Args(dataset=tiny_dataset, seeds=seeds, out_dir=str(tmp_path / "bc_s{seed}"), total_steps=30,
                                      tensorboard=True, **dict(TINY, eval_every=10)))
    R = len(seeds or [0])
    # evaluations at 10, 20, 30, each of the R replicas: before the first nothing, then a header and a row per evaluation
    assert seen[::R] == [0, 2 * R, 3 * R]
    for k in seeds or [0]:
        folder = tmp_path / f"bc_s{k}"
        rows = open(folder / "progress.csv").read().splitlines()
        assert rows[0] == "step,loss,eval_return" and [r.split(",")[0] for r in rows[1:]] == ["10", "20", "30"]
        assert glob.glob(str(folder / "tb" / "events.out.tfevents.*"))
    logs = [res["log"]] if seeds is None else [r["log"] for r in res["runs"]]
    assert all(len(log) == 3 for log in logs)


def test_threads_default_to_every_core():
    assert policy.cpu_threads(None) == len(os.sched_getaffinity(0)) and policy.cpu_threads(3) == 3


@pytest.mark.parametrize("stage", [train_bc, train_dwbc], ids=["bc", "dwbc"])
def test_device_sampling_path(stage, augmented, tmp_path, monkeypatch):
    """The GPU's sampling (indices from a torch generator per replica, η kept a tensor), run here on the CPU: the
    indices stay in range, and replica k still follows the single run with seed k."""
    monkeypatch.setattr(stage, "minibatch_generator", lambda seed, device: torch.Generator(device).manual_seed(seed))
    kw = dict(aug_frac=0.5, adaptive_eta=True) if stage is train_dwbc else {}
    batched, single = batched_and_single(stage, tmp_path, (0, 1), dataset=augmented, **kw)
    for b, s in zip(batched, single):
        for name in (b if isinstance(b, dict) else [None]):
            np.testing.assert_allclose(b[name] if name else b, s[name] if name else s, rtol=1e-5, atol=1e-5)


# ORIL, LobsDICE: a log row per step (no rollout) compares every logged loss of the first 100 steps; LobsDICE with
# rollouts every 5 steps checks that an evaluation's draws from torch's generator (the layers contract.build_policy
# makes) shift the replica's own stream as they shift the single run's; BCND logs a row per round, evaluated each.
# LobsDICE's ν objective (a logsumexp over the batch, trained through a gradient penalty) amplifies float32 rounding:
# the batched matmuls round differently from the plain ones, and after ~30 steps single and batched runs drift apart
# by up to 1e-3 in ν's loss. In float64 they agree to 1e-14 over all 100 steps, which is what shows the batched loop
# exact; so LobsDICE is compared in float64 (to 1e-9), and in float32 (to 1e-5) over its first 20 steps.
# (Evaluation rollouts run in float32, so the run with rollouts is the float32 one.)
BASELINES = {  # stage, dataset, arguments, float64, tolerance
    "oril": (train_oril, "augmented", dict(total_steps=STEPS, reward_steps=40, eval_every=1, eval_episodes=0), False, 1e-5),
    "bcnd": (train_bcnd, "augmented", dict(n_policies=3, n_rounds=3, epochs=2, eval_every=1, eval_episodes=2), False, 1e-5),
    "lobsdice_f32": (train_lobsdice, "tiny", dict(total_steps=20, eval_every=1, eval_episodes=0), False, 1e-5),
    "lobsdice_f64": (train_lobsdice, "tiny", dict(total_steps=STEPS, eval_every=1, eval_episodes=0), True, 1e-9),
    "lobsdice_eval": (train_lobsdice, "tiny", dict(total_steps=20, eval_every=5, eval_episodes=2), False, 1e-5),
}


@pytest.fixture
def float64(monkeypatch):
    """Train in float64: default dtype and the normalised data."""
    torch.set_default_dtype(torch.float64)
    for name in ("obs", "act"):
        plain = getattr(policy.Normalizer, name)
        monkeypatch.setattr(policy.Normalizer, name, lambda self, x, plain=plain: plain(self, x).astype(np.float64))
    yield
    torch.set_default_dtype(torch.float32)


@pytest.mark.parametrize("name", list(BASELINES))
def test_baseline_replicas_follow_single_runs(name, tiny_dataset, augmented, tmp_path, request):
    stage, data, kw, f64, tol = BASELINES[name]
    if f64:
        request.getfixturevalue("float64")
    common = dict(TINY, dataset=augmented if data == "augmented" else tiny_dataset, **kw)
    seeds = (0, 2)
    out = stage.main(stage.Args(seeds=seeds, out_dir=str(tmp_path / "b_s{seed}"), **common))
    singles = [stage.main(stage.Args(seed=k, out_dir=str(tmp_path / f"s{k}"), **common)) for k in seeds]
    assert [r["seed"] for r in out["runs"]] == list(seeds)
    for b, s in zip(out["runs"], singles):
        assert len(b["log"]) == len(s["log"]) > 0 and b["log"][0].keys() == s["log"][0].keys()
        for name_ in s["log"][0]:
            np.testing.assert_allclose([row[name_] for row in b["log"]], [row[name_] for row in s["log"]],
                                       rtol=tol, atol=tol, err_msg=name_)
        if "log_r" in s:  # BCND: log R of every row after the last round
            np.testing.assert_allclose(b["log_r"], s["log_r"], rtol=1e-5, atol=1e-4)
    losses = [[row[next(k for k in row if "loss" in k)] for row in r["log"]] for r in out["runs"]]
    assert np.abs(np.subtract(*losses)).max() > 1e-3  # the replicas differ
    for k in seeds:  # each replica saved the policy of its own seed, with that run's args
        art = contract.load_policy(str(tmp_path / f"b_s{k}" / "policy.pt"))
        assert art["seed"] == k and art["train_args"]["seed"] == k and art["train_args"]["seeds"] is None
        assert len(open(tmp_path / f"b_s{k}" / "progress.csv").read().splitlines()) == 1 + len(out["runs"][0]["log"])


@pytest.mark.parametrize("stage", [train_oril, train_lobsdice], ids=["oril", "lobsdice"])
def test_baseline_device_sampling_path(stage, augmented, tmp_path, monkeypatch, request):
    """The GPU's sampling (rows and noise from a torch generator per replica), run here on the CPU (LobsDICE in
    float64, as above)."""
    monkeypatch.setattr(stage, "minibatch_generator", lambda seed, device: torch.Generator(device).manual_seed(seed))
    tol = 1e-5
    if stage is train_lobsdice:
        request.getfixturevalue("float64")
        tol = 1e-9
    common = dict(TINY, dataset=augmented, total_steps=STEPS, eval_every=1, eval_episodes=0)
    out = stage.main(stage.Args(seeds=(0, 1), out_dir=str(tmp_path / "b_s{seed}"), **common))
    for b, k in zip(out["runs"], (0, 1)):
        s = stage.main(stage.Args(seed=k, out_dir=str(tmp_path / f"s{k}"), **common))
        for name_ in s["log"][0]:
            np.testing.assert_allclose([row[name_] for row in b["log"]], [row[name_] for row in s["log"]],
                                       rtol=tol, atol=tol, err_msg=name_)
