"""ILID and ISW-BC (train_ilid.py, train_iswbc.py): losses and ILID's selection with rollback on tiny hand-checked
inputs, in-process runs of each main() (raw and augmented data, seeds side by side), and subprocess smoke runs with
their one-line errors."""
import json
import math

import numpy as np
import pytest
import torch

from oilca import contract

import envs
import train_ilid as I
import train_iswbc as W
from conftest import one_line_error, run


# ILID ---------------------------------------------------------------------------------------------------------------
def test_ilid_pu_loss_by_hand():
    d_e, d_s = torch.tensor([0.8]), torch.tensor([0.4])
    # E_E[-log D] + (1/η) E_S[-log(1 - D)] + E_E[log(1 - D)], η = 0.5: ORIL's Eq. 5 divided by η
    expected = -math.log(0.8) + 2 * -math.log(0.6) + math.log(0.2)
    assert I.pu_loss(d_e, d_s, eta=0.5).item() == pytest.approx(expected, rel=1e-6)
    assert expected == pytest.approx(-0.36464, abs=1e-4)
    assert I.pu_loss(d_e, d_s, 0.5, pu=False).item() == pytest.approx(-math.log(0.8) - math.log(0.6), rel=1e-6)
    # D is clipped to [0.1, 0.9], so the loss is bounded below
    disc = I.Discriminator(2, hidden=8)
    with torch.no_grad():
        for p in disc.parameters():
            p.mul_(100)
        d = disc(torch.randn(256, 2))
    assert d.shape == (256,) and d.min() >= 0.1 and d.max() <= 0.9


# three episodes of 6, 4 and 5 rows; good[t]: D(s′ of row t) ≥ b
EPISODES = np.array([0] * 6 + [1] * 4 + [2] * 5)
ENDS = np.isin(np.arange(15), [5, 9, 14])
GOOD = np.isin(np.arange(15), [3, 6, 10, 14])
EXPECTED = np.array([0.9 ** 3, 0.9 ** 2, 0.9, 1, 0, 0,  # episode 0: rows 4, 5 must not reach episode 1's row 6
                     1, 0, 0, 0,  # episode 1: row 9 must not reach episode 2's row 10
                     1, 0.9 ** 3, 0.9 ** 2, 0.9, 1], np.float32)  # episode 2: row 11 reaches row 14 at j = 3


def test_ilid_rollback_weights_by_hand():
    w = I.rollback_weights(GOOD, EPISODES, ENDS, rollback=5, decay=0.9)
    np.testing.assert_array_equal(w, EXPECTED)
    # the episodes marked by their ids alone, or by the end flags alone (one id for every row), give the same
    np.testing.assert_array_equal(I.rollback_weights(GOOD, EPISODES, np.zeros(15, bool), 5, 0.9), EXPECTED)
    np.testing.assert_array_equal(I.rollback_weights(GOOD, np.zeros(15, int), ENDS, 5, 0.9), EXPECTED)
    # rollback 1: only rows whose own s′ is expert-like; rollback 3: weights down to 0.81, row 0 (4 steps) dropped
    np.testing.assert_array_equal(I.rollback_weights(GOOD, EPISODES, ENDS, 1, 0.9), GOOD.astype(np.float32))
    np.testing.assert_array_equal(I.rollback_weights(GOOD, EPISODES, ENDS, 3, 0.9),
                                  np.where(EXPECTED < np.float32(0.81), 0, EXPECTED).astype(np.float32))
    # five steps back exactly: row 0 of a 6-row episode whose last s′ (the final state) is expert-like
    w = I.rollback_weights(np.isin(np.arange(6), [5]), np.zeros(6, int), np.isin(np.arange(6), [5]), 5, 0.5, 2.0)
    np.testing.assert_array_equal(w, np.array([0, 2 * 0.5 ** 4, 2 * 0.5 ** 3, 2 * 0.5 ** 2, 1, 2], np.float32))
    # a rollback past the longest episode (6 rows) or the whole dataset selects as K = 6 does (and returns at once)
    for k in (7, 17, 10**12):
        np.testing.assert_array_equal(I.rollback_weights(GOOD, EPISODES, ENDS, k, 0.9),
                                      I.rollback_weights(GOOD, EPISODES, ENDS, 6, 0.9))
    # a row of several replicas is selected per replica
    w = I.rollback_weights(np.stack([GOOD, np.zeros(15, bool)]), EPISODES, ENDS, 5, 0.9)
    np.testing.assert_array_equal(w, np.stack([EXPECTED, np.zeros(15, np.float32)]))


def test_ilid_lagrangian_and_policy_loss():
    ref = torch.tensor(-1.0)
    for log_pi_e, grows in ((torch.tensor([-2.0, -2.0]), True), (torch.tensor([-0.5, -0.5]), False)):
        log_alpha = torch.zeros((), requires_grad=True)
        log_pi_e = log_pi_e.clone().requires_grad_(True)
        loss = I.alpha_loss(log_alpha, log_pi_e, ref, epsilon=0.01)
        assert loss.item() == pytest.approx(log_pi_e.mean().item() + 0.01 + 1, rel=1e-6)  # α = 1
        loss.backward()
        assert log_pi_e.grad is None  # the gap is detached: only α learns from L_α
        torch.optim.SGD([log_alpha], lr=0.1).step()
        # E_E[log π_E - log π] = 1 > ε: the constraint is violated and α grows; -0.5 < ε: α shrinks
        assert (log_alpha.exp().item() > 1) == grows
    log_pi_b = torch.tensor([-1.0, -2.0], requires_grad=True)
    alpha = torch.tensor(2.0, requires_grad=True)
    loss = I.policy_loss(log_pi_b, torch.tensor([1.0, 0.5]), torch.tensor([-3.0]), alpha)
    assert loss.item() == pytest.approx((1 * 1 + 0.5 * 2) / 2 + 2 * 3)
    loss.backward()
    assert alpha.grad is None and log_pi_b.grad.tolist() == [-0.5, -0.25]


# ISW-BC -------------------------------------------------------------------------------------------------------------
def test_iswbc_weights_v1_v2():
    c = torch.tensor([-2.0, 0.0, 2.0], requires_grad=True)
    s = torch.sigmoid(c.detach())
    v1 = W.importance_weights(c, "v1")
    torch.testing.assert_close(v1, 1 / (1 / (s + 1e-3) - 1 + 1e-3))
    assert v1[1].item() == pytest.approx(1 / (1 / 0.501 - 1 + 1e-3), rel=1e-6)  # ≈ 1.003 at σ = 1/2
    v2 = W.importance_weights(c, "v2")
    torch.testing.assert_close(v2, s / (1 - s))
    assert v2.tolist() == pytest.approx([math.exp(-2), 1.0, math.exp(2)], rel=1e-6)
    assert not v1.requires_grad and not v2.requires_grad
    assert torch.isfinite(W.importance_weights(torch.tensor([30.0]), "v2")).all()  # σ rounds to 1; exp(c) does not
    log_pi = torch.tensor([-1.0, -2.0])
    assert W.weighted_nll(log_pi, torch.tensor([2.0, 0.5])).item() == pytest.approx((2 * 1 + 0.5 * 2) / 2)
    assert W.weighted_nll(log_pi, torch.tensor([2.0, 0.5]), tau=1.0).item() == pytest.approx(2 * 1 / 2)


def test_iswbc_discriminator_loss_and_gradient_penalty():
    assert W.disc_loss(torch.zeros(3), torch.zeros(3)).item() == pytest.approx(2 * math.log(2))
    assert W.disc_loss(torch.tensor([20.0]), torch.tensor([-20.0])).item() < 1e-8
    lin = torch.nn.Linear(2, 1, bias=False)
    x = torch.tensor([[0.3, -0.1], [1.0, 2.0], [-0.5, 0.4]])
    # f = log(1/(σ(c) + 1e-3) - 1 + 1e-3) of c = w·x; ∇_x f = f′(c) w with f′(c) = -σ(1-σ) / ((σ + 1e-3)² g)
    def f_prime(c):
        s = 1 / (1 + np.exp(-c))
        g = 1 / (s + 1e-3) - 1 + 1e-3
        return -s * (1 - s) / ((s + 1e-3) ** 2 * g)

    w = np.array([1.2, 1.6])  # ‖w‖ = 2
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(w[None], dtype=torch.float32))
    grads = f_prime(x.numpy().astype(np.float64) @ w)[:, None] * w + W.GRAD_EPS
    expected = np.mean((np.linalg.norm(grads, axis=1) - 1) ** 2)
    assert W.gradient_penalty(lin, x).item() == pytest.approx(expected, rel=1e-4)
    # a unit-norm gradient of f costs nothing: at c = 0, scale w to 1/|f′(0)|
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[0.6, 0.8]]) / abs(f_prime(0.0)))
    assert W.gradient_penalty(lin, torch.zeros(4, 2)).item() < 1e-10
    with torch.no_grad():
        lin.weight.copy_(torch.tensor(w[None], dtype=torch.float32))
    W.gradient_penalty(lin, x).backward()  # differentiable in the network's weights
    assert lin.weight.grad is not None and lin.weight.grad.abs().sum() > 0


# in-process runs ----------------------------------------------------------------------------------------------------
RUNS = {
    "ilid": lambda **kw: I.main(I.Args(**{"d_steps": 30, "bc_steps": 30, "total_steps": 20, "eval_every": 10, **kw})),
    "iswbc": lambda **kw: W.main(W.Args(**{"total_steps": 20, "eval_every": 10, **kw})),
}
TINY = dict(hidden=16, eval_episodes=2, final_eval_episodes=4, threads=1)


@pytest.fixture(scope="module")
def augmented(tiny_augmented_args):
    return tiny_augmented_args.out


def test_ilid_weights_rows_of_d_e_one_and_selects_only_d_s(augmented, tmp_path):
    d = envs.load_dataset(augmented)
    res = RUNS["ilid"](dataset=augmented, out_dir=str(tmp_path / "a"), bar=0.5, **TINY)
    w, sup = res["row_weights"], ~d["expert"] & ~d["augmented"]
    assert np.all(w[d["expert"]] == 1) and d["augmented"].any() and np.all(w[d["augmented"]] == 1)
    allowed = np.float32(0.9) ** np.arange(5, dtype=np.float32)
    assert np.all(np.isin(w[sup], np.r_[0, allowed.astype(np.float32)])) and res["selected"] == int((w[sup] > 0).sum())
    # a bar above D's clip at 0.9 selects nothing: the policy then learns from D_E alone
    res = RUNS["ilid"](dataset=augmented, out_dir=str(tmp_path / "b"), bar=0.95, **TINY)
    assert res["selected"] == 0 and np.all(res["row_weights"][sup] == 0) and res["log"][-1]["selected"] == 0
    # fixed α: no reference BC, α stays
    res = RUNS["ilid"](dataset=augmented, out_dir=str(tmp_path / "c"), auto_alpha=False, alpha=0.5, **TINY)
    assert [row["alpha"] for row in res["log"]] == [0.5, 0.5] and res["log"][-1]["bc_loss"] == 0
    # the run flushed denormals to zero and then restored torch's default: a denormal survives arithmetic again
    assert torch.tensor([1e-40]).mul(1.0).item() != 0


# replicas of the fast path against the reference: tests/test_fast_ilid.py and tests/test_fast_iswbc.py


# subprocess smoke runs and errors -----------------------------------------------------------------------------------
def test_scripts_run_and_fail_in_one_line(tiny_dataset, tmp_path):
    small = ["--hidden", "16", "--eval-episodes", "2", "--threads", "1"]
    for script, extra, tag in (("train_ilid.py", ["--total-steps", "10"], "[ilid]"),
                               ("train_iswbc.py", ["--total-steps", "10", "--version", "v2"], "[iswbc]")):
        proc = run(script, "--dataset", tiny_dataset, "--out-dir", str(tmp_path / script), *small, *extra, ok=False)
        assert proc.returncode == 0 and tag in proc.stdout, proc.stdout + proc.stderr
        assert (tmp_path / script / "policy.pt").exists()
    missing = str(tmp_path / "nowhere" / "data.npz")
    for script in ("train_ilid.py", "train_iswbc.py"):
        proc = run(script, "--dataset", missing, "--out-dir", str(tmp_path / "x"), ok=False)
        assert one_line_error(proc, missing), proc.stderr
    assert not (tmp_path / "x").exists()


def test_bad_inputs_are_refused_before_anything_is_written(tiny_dataset, tmp_path):
    all_expert = str(tmp_path / "all_expert.npz")
    arrays = dict(np.load(tiny_dataset))
    contract.save_npz(all_expert, {**arrays, "expert": np.ones_like(arrays["expert"])})
    no_expert = str(tmp_path / "no_expert.npz")
    contract.save_npz(no_expert, {**arrays, "expert": np.zeros_like(arrays["expert"])})
    out = str(tmp_path / "x")
    for main, args, words in ((I.main, I.Args(dataset=all_expert, out_dir=out), "D_S is empty"),
                              (I.main, I.Args(dataset=tiny_dataset, out_dir=out, total_steps=2), "--d-steps"),
                              (I.main, I.Args(dataset=tiny_dataset, out_dir=out, decay=0.0), "--decay"),
                              (I.main, I.Args(dataset=tiny_dataset, out_dir=out, eta=1.0), "--eta"),
                              (W.main, W.Args(dataset=tiny_dataset, out_dir=out, tau=-1.0), "--tau"),
                              (I.main, I.Args(dataset=no_expert, out_dir=out), "D_E is empty"),
                              (W.main, W.Args(dataset=no_expert, out_dir=out), "D_E is empty")):
        with pytest.raises(ValueError, match=words):  # contract.ContractError is a ValueError
            main(args)
    assert not (tmp_path / "x").exists()


def test_iswbc_tau_that_keeps_no_row_is_refused(tiny_dataset, tmp_path):
    """A τ no v1 weight can reach is refused before training; one no weight reached during the run is refused at
    the end (reference and fast path): in neither case is a policy written."""
    from fast import train_iswbc as fast_w
    tiny = dict(total_steps=5, hidden=16, batch_size=16, eval_every=0, eval_episodes=0, threads=1)
    with pytest.raises(ValueError, match="above every weight --version v1 can give"):
        W.main(W.Args(dataset=tiny_dataset, out_dir=str(tmp_path / "v1"), tau=2 * W.W_MAX_V1, **tiny))
    for stage, out in ((W, "v2"), (fast_w, "fast_v2_s{seed}")):
        kw = dict(seeds=(0, 1)) if stage is fast_w else {}
        with pytest.raises(ValueError, match="never trained"):
            stage.main(stage.Args(dataset=tiny_dataset, out_dir=str(tmp_path / out), version="v2", tau=1e30, **kw,
                                  **tiny))
    assert not any(p.name.startswith(("v1", "v2", "fast")) for p in tmp_path.iterdir())
    W.main(W.Args(dataset=tiny_dataset, out_dir=str(tmp_path / "ok"), tau=1e-6, **tiny))  # a reachable τ trains
    assert (tmp_path / "ok" / "policy.pt").exists()
