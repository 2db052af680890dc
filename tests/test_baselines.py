"""ORIL, BCND and LobsDICE (train_oril.py, train_bcnd.py, train_lobsdice.py): losses on tiny hand-checked inputs,
in-process runs of each main() on a tiny dataset, and subprocess smoke runs with their one-line errors."""
import json
import math

import numpy as np
import pytest
import torch

import augment
from oilca import contract
import train_bcnd as BCND
import train_ilid as ILID
import train_iswbc as ISW
import train_lobsdice as L
import train_oril as O
from conftest import one_line_error, run

# ORIL ---------------------------------------------------------------------------------------------------------------
def test_pu_reward_loss_by_hand():
    r_e, r_u = torch.tensor([0.8]), torch.tensor([0.4])
    pu = 0.5 * -math.log(0.8) + -math.log(0.6) - 0.5 * -math.log(0.2)  # ORIL Eq. 5, η = 0.5
    assert O.pu_reward_loss(r_e, r_u, eta=0.5).item() == pytest.approx(pu, rel=1e-6)
    assert pu == pytest.approx(-0.18232, abs=1e-4)
    assert O.pu_reward_loss(r_e, r_u, 0.5, pu=False).item() == pytest.approx(-math.log(0.8) - math.log(0.6), rel=1e-6)
    # bounded: with R clipped to [0.1, 0.9] the loss cannot fall below its value at R_E = 0.9, R_U = 0.1
    floor = 0.5 * -math.log(0.9) + -math.log(0.9) - 0.5 * -math.log(0.1)
    model = O.RewardModel(2, 2, hidden=8)
    with torch.no_grad():
        for p in model.parameters():
            p.mul_(100)
        r = model(torch.randn(256, 2), torch.randn(256, 2))
    assert r.min() >= 0.1 and r.max() <= 0.9
    assert O.pu_reward_loss(r, r, 0.5).item() >= floor - 1e-6


def test_iql_losses_by_hand():
    q, v = torch.tensor([1.0, 0.0]), torch.tensor([0.0, 1.0], requires_grad=True)
    assert O.expectile_loss(q, v, tau=0.7).item() == pytest.approx((0.7 * 1 + 0.3 * 1) / 2)  # weights τ, 1-τ
    q1, q2 = torch.tensor([1.0, 2.0]), torch.tensor([0.0, 2.0])
    reward, done, next_v = torch.tensor([0.5, 1.0]), torch.tensor([0.0, 1.0]), torch.tensor([2.0, 5.0])
    # targets 0.5 + 0.9·2 = 2.3 and 1.0 (terminal): ((1-2.3)² + (2-1)²)/2 + ((0-2.3)² + (2-1)²)/2
    expected = ((1.3 ** 2 + 1) + (2.3 ** 2 + 1)) / 2
    assert O.q_loss(q1, q2, reward, done, next_v, gamma=0.9).item() == pytest.approx(expected, rel=1e-6)
    log_pi = torch.tensor([[-1.0, -1.0], [-2.0, 0.0]])
    adv = torch.tensor([0.0, 10.0])  # exp(3·10) is clipped at 100
    assert O.awr_loss(log_pi, adv, beta=3.0).item() == pytest.approx((1 * 2 + 100 * 2) / 2)


# BCND ---------------------------------------------------------------------------------------------------------------
def test_bcnd_weights_in_log_space():
    log_probs = torch.log(torch.tensor([[0.2, 1e-3], [0.6, 3e-3]]))  # K = 2 members, 2 rows
    torch.testing.assert_close(BCND.ensemble_log_density(log_probs), torch.log(torch.tensor([0.4, 2e-3])))
    # densities far below float range: exp(-1000) underflows, the log-space mean does not
    far = torch.tensor([[-1000.0, -2000.0], [-1002.0, -2000.0]])
    torch.testing.assert_close(BCND.ensemble_log_density(far), torch.tensor([-1000 + math.log((1 + math.exp(-2)) / 2), -2000.0]))
    # per-batch normalisation to mean 1, invariant to a shift of log R
    for shift in (0.0, -1000.0):
        w = BCND.batch_weights(torch.tensor([0.0, math.log(3.0)]) + shift)
        torch.testing.assert_close(w, torch.tensor([0.5, 1.5]))
    w = BCND.batch_weights(torch.zeros(2, 4))  # round 1 (R ≡ 1): plain BC, per member
    torch.testing.assert_close(w, torch.ones(2, 4))
    log_pi = torch.tensor([[-1.0, -3.0], [0.0, -2.0]], requires_grad=True)
    loss = BCND.weighted_nll(log_pi, torch.tensor([[0.5, 1.5], [1.0, 1.0]]))  # one loss per member
    assert loss.tolist() == pytest.approx([(0.5 * 1 + 1.5 * 3) / 2, (0 + 2) / 2])


def test_gaussian_ensemble_density_and_export():
    torch.manual_seed(0)
    ens = BCND.GaussianEnsemble(3, 2, 2, hidden=8)
    with torch.no_grad():
        ens.log_std.copy_(torch.randn(3, 1, 2) * 0.3)
    obs, act = torch.randn(3, 5, 2), torch.tensor([1.0, -1.0, 0.3]).repeat(3, 5, 1)[..., :2]
    mu, log_std = ens(obs)
    ref = torch.distributions.Normal(torch.tanh(mu), log_std.exp()).log_prob(act).sum(-1)  # on a itself
    torch.testing.assert_close(ens.log_prob(obs, act), ref)
    assert torch.isfinite(ens.log_prob(obs, act)).all() and ens.log_prob(obs, act).min() > -50  # a = ±1 stays likely
    # the exported plain MLP is the mean of the members' μ (the artifact applies the tanh)
    x = torch.randn(7, 2)
    torch.testing.assert_close(ens.mean_net()(x), ens(x.expand(3, -1, -1))[0].mean(0), atol=1e-5, rtol=1e-5)


# LobsDICE -----------------------------------------------------------------------------------------------------------
def test_lobsdice_nu_objective_by_hand():
    nu_init, gamma, alpha = torch.tensor([1.0, 3.0]), 0.9, 0.1
    adv = torch.tensor([0.0, 1.1 * math.log(3.0)])
    # (1-γ)·mean ν(s0) + (1+α)·logsumexp(A/(1+α)) = 0.1·2 + 1.1·log(1 + 3)
    assert L.nu_loss(nu_init, adv, gamma, alpha).item() == pytest.approx(0.2 + 1.1 * math.log(4.0), rel=1e-6)
    r = torch.tensor([1.0, 2.0], requires_grad=True)
    a = L.advantage(r, torch.tensor([0.5, 1.0]), torch.tensor([1.0, 2.0]), gamma)
    torch.testing.assert_close(a, torch.tensor([-1 + 0.9 - 0.5, -2 + 1.8 - 1.0]))
    assert not a.requires_grad  # the cost is detached inside A
    w = L.policy_weights(torch.tensor([0.0, -1.1 * math.log(2.0)]), alpha)  # ∝ (1, 1/2), mean 1
    torch.testing.assert_close(w, torch.tensor([4 / 3, 2 / 3]))


def test_lobsdice_cost_and_gradient_penalties():
    assert L.cost_loss(torch.zeros(3), torch.zeros(3)).item() == pytest.approx(2 * math.log(2))
    c = torch.tensor([-2.0, 0.0, 2.0])
    expected = torch.log(1 / (torch.sigmoid(c) + 1e-3) - 1 + 1e-3)
    torch.testing.assert_close(L.cost_of_logit(c), expected)
    assert abs(L.cost_of_logit(c)[2] + 2) < 0.02  # r ≈ -c
    lin = torch.nn.Linear(2, 1, bias=False)
    with torch.no_grad():
        lin.weight.copy_(torch.tensor([[1.2, 1.6]]))  # ‖∇‖ = 2
    x = torch.randn(4, 2)
    assert L.gradient_penalty(lin, x, 1.0).item() == pytest.approx(1.0, rel=1e-4)
    assert L.gradient_penalty(lin, x, None).item() == pytest.approx(4.0, rel=1e-4)
    L.gradient_penalty(lin, x, 1.0).backward()  # differentiable in the network's weights
    torch.testing.assert_close(lin.weight.grad, 2 * (2 - 1) * lin.weight.detach() / 2)


# in-process runs ----------------------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def tiny_augmented(tiny_dataset, tiny_ivae, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("aug") / "aug.npz")
    augment.main(augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=out, ratio=0.3, sampler_steps=30, hidden=16,
                              sampler_out=out.replace("aug.npz", "sampler.pt")))
    return out


RUNS = {
    "oril": lambda **kw: O.main(O.Args(reward_steps=20, total_steps=20, eval_every=10, **kw)),
    "bcnd": lambda **kw: BCND.main(BCND.Args(n_policies=2, n_rounds=2, epochs=1, batch_size=64, **kw)),
    "lobsdice": lambda **kw: L.main(L.Args(total_steps=20, eval_every=10, **kw)),
    "ilid": lambda **kw: ILID.main(ILID.Args(d_steps=30, bc_steps=30, total_steps=20, eval_every=10, **kw)),
    "iswbc": lambda **kw: ISW.main(ISW.Args(total_steps=20, eval_every=10, **kw)),
}
TINY = dict(hidden=16, eval_episodes=2, final_eval_episodes=4)


@pytest.mark.parametrize("name", sorted(RUNS))
def test_main_labels_saves_and_evaluates(name, tiny_dataset, tiny_augmented, tmp_path):
    for data, label in ((tiny_dataset, name), (tiny_augmented, name + "_ca")):
        out = tmp_path / label
        res = RUNS[name](dataset=data, out_dir=str(out), final_eval=str(out / "eval_{split}.json"), **TINY)
        assert res["method"] == label and len(res["log"]) == 2  # steps 10 and 20, or rounds 1 and 2
        art = contract.load_policy(str(out / "policy.pt"))
        assert art["method"] == label and art["config"]["obs_dim"] == 2 and art["config"]["act_dim"] == 2
        a = contract.build_policy(art)(np.random.default_rng(0).normal(size=(5, 2)).astype(np.float32))
        assert a.shape == (5, 2) and np.all(np.abs(a) <= 1)
        assert json.load(open(out / "args.json"))["dataset"] == data
        assert len(open(out / "progress.csv").read().splitlines()) == 3
        for split in ("train", "heldout"):
            result = json.load(open(out / f"eval_{split}.json"))
            assert result["method"] == label and result["split"] == split and len(result["returns"]) == 4


def test_bcnd_logs_every_round(tiny_dataset, tmp_path):
    res = RUNS["bcnd"](dataset=tiny_dataset, out_dir=str(tmp_path / "b"), hidden=16, eval_episodes=2)
    assert res["log"][0]["round"] == 1 and 0 < res["log"][-1]["ess_frac"] <= 1


# subprocess smoke runs and errors -----------------------------------------------------------------------------------
def test_scripts_fail_in_one_line(tiny_dataset, tmp_path):
    """The three scripts' runs from a shell are the main-job test's (tests/test_smoke.py, `--methods ... baselines`);
    here their refusals: one line on stderr, nothing written."""
    all_expert = str(tmp_path / "all_expert.npz")
    arrays = dict(np.load(tiny_dataset))
    contract.save_npz(all_expert, {**arrays, "expert": np.ones_like(arrays["expert"])})
    for argv, words in ((("train_oril.py", "--dataset", all_expert), "D_U is empty"),
                        (("train_bcnd.py", "--dataset", tiny_dataset, "--n-policies", "0"), "--n-policies")):
        proc = run(*argv, "--out-dir", str(tmp_path / "x"), ok=False)
        assert one_line_error(proc, words), proc.stderr
    assert not (tmp_path / "x").exists()


def test_methods_that_read_d_e_refuse_an_empty_one(tiny_dataset, tmp_path):
    arrays = dict(np.load(tiny_dataset))
    no_expert = str(tmp_path / "no_expert.npz")
    contract.save_npz(no_expert, {**arrays, "expert": np.zeros_like(arrays["expert"])})
    for main, args in ((O.main, O.Args), (L.main, L.Args)):
        with pytest.raises(contract.ContractError, match="D_E is empty"):
            main(args(dataset=no_expert, out_dir=str(tmp_path / "x")))
    with pytest.raises(ValueError, match="too few"):
        BCND.main(BCND.Args(dataset=tiny_dataset, out_dir=str(tmp_path / "x"), n_policies=10 ** 6))
    assert not (tmp_path / "x").exists()
