"""DWBC / BC losses of train_dwbc.py and train_bc.py on tiny hand-checked inputs."""
import math

import numpy as np
import pytest
import torch

from training import policy
import train_dwbc as D


def test_discriminator_loss_by_hand():
    d_e, d_u = torch.tensor([0.8]), torch.tensor([0.4])
    pu = -math.log(0.8) + (-math.log(0.6)) / 0.5 - (-math.log(0.2))
    assert D.discriminator_loss(d_e, d_u, eta=0.5).item() == pytest.approx(pu, rel=1e-6)
    assert pu == pytest.approx(-0.36464, abs=1e-4)
    plain = -math.log(0.8) - math.log(0.6)
    assert D.discriminator_loss(d_e, d_u, eta=0.5, pu=False).item() == pytest.approx(plain, rel=1e-6)


def test_policy_loss_by_hand_and_d_is_detached():
    log_pi_e = torch.tensor([[-1.0, -2.0]], requires_grad=True)  # ℓ = 3
    log_pi_u = torch.tensor([[0.5, 0.5], [-1.0, 0.0]], requires_grad=True)  # ℓ = -1, 1
    d_e = torch.tensor([0.5], requires_grad=True)
    d_u = torch.tensor([0.8, 0.3], requires_grad=True)
    loss = D.policy_loss(log_pi_e, log_pi_u, d_e, d_u, alpha=7.5, eta=0.5)
    # expert: 7.5·3 - 3·(0.5/(0.5·0.5) + 1) = 13.5; unlabelled: d̃ = (0.8, 0) -> weights (4, 0) -> mean(-1·4, 1·0) = -2
    assert loss.item() == pytest.approx(11.5, rel=1e-6)
    loss.backward()
    assert d_e.grad is None and d_u.grad is None
    # per-row weights: expert α-1-η/(d(1-d)) = 4.5; unlabelled d̃/(1-d̃)
    torch.testing.assert_close(log_pi_e.grad, torch.full((1, 2), -4.5))
    torch.testing.assert_close(log_pi_u.grad, torch.tensor([[-2.0, -2.0], [0.0, 0.0]]))


def test_expert_weight_stays_positive_with_official_constants():
    d = torch.linspace(D.D_MIN, D.D_MAX, 101)
    assert torch.all(7.5 - 1 - 0.5 / (d * (1 - d)) > 0)


def test_normalize_log_pi_and_discriminator_range():
    x = torch.tensor([[-30.0, 10.0], [-5.0, 50.0]], requires_grad=True)
    n = D.normalize_log_pi(x)
    torch.testing.assert_close(n, torch.tensor([[0.0, 1.0], [0.5, 1.0]]))
    assert not n.requires_grad
    disc = D.Discriminator(3, 2)
    with torch.no_grad():
        for p in disc.parameters():
            p.mul_(100)  # push the sigmoid to its ends
        out = disc(torch.randn(64, 3), torch.randn(64, 2), torch.rand(64, 2))
    assert out.shape == (64,) and out.min() >= 0.1 and out.max() <= 0.9


def test_actor_log_prob_matches_torch_tanh_normal():
    torch.manual_seed(0)
    actor = policy.Actor(3, 2, hidden=16)
    obs, act = torch.randn(5, 3), torch.rand(5, 2) * 1.8 - 0.9
    mu, log_std = actor(obs)
    ref = torch.distributions.TransformedDistribution(torch.distributions.Normal(mu, log_std.exp()),
                                                      [torch.distributions.TanhTransform()]).log_prob(act)
    torch.testing.assert_close(actor.log_prob(obs, act), ref, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(policy.bc_loss(actor, obs, act), -ref.sum(-1).mean(), atol=1e-4, rtol=1e-4)


def test_act_eps_is_per_actor():
    """--act-eps clips actions at ±1 to ±(1 - act_eps) in that actor only (no module-wide state)."""
    torch.manual_seed(0)
    wide = policy.Actor(3, 2, hidden=16, act_eps=0.01)
    narrow = policy.Actor(3, 2, hidden=16)
    narrow.load_state_dict(wide.state_dict())
    obs, one = torch.randn(4, 3), torch.ones(4, 2)
    torch.testing.assert_close(wide.log_prob(obs, one), wide.log_prob(obs, torch.full((4, 2), 0.99)), atol=1e-3, rtol=1e-4)
    assert narrow.act_eps == 1e-6 and (narrow.log_prob(obs, one) != wide.log_prob(obs, one)).all()


def test_normalizer_maps_bounds_to_unit_box():
    norm = policy.Normalizer(np.array([[0.0, 2.0], [2.0, 6.0]]), [-2.0, 0.0], [2.0, 1.0])
    np.testing.assert_allclose(norm.act(np.array([[-2.0, 0.0], [2.0, 1.0], [0.0, 0.5]])), [[-1, -1], [1, 1], [0, 0]])
    np.testing.assert_allclose(norm.obs(np.array([[1.0, 4.0]])), [[0, 0]], atol=1e-6)
