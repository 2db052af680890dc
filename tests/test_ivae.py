"""The iVAE of train_ivae.py: ELBO terms, MCC, the model's shapes and its checkpoint."""
import json
import os

import numpy as np
import pytest
import torch

from oilca import contract

import envs
import train_ivae as T
from oilca.ivae import IVAE


def test_gaussian_log_prob_matches_torch():
    g = torch.Generator().manual_seed(0)
    x, m, lv = (torch.randn(7, 3, generator=g) for _ in range(3))
    ref = torch.distributions.Normal(m, (0.5 * lv).exp()).log_prob(x).sum(-1)
    torch.testing.assert_close(T.gaussian_log_prob(x, m, lv), ref)


def test_gaussian_kl_closed_form():
    g = torch.Generator().manual_seed(1)
    mq, lq, mp, lp = (torch.randn(5, 2, generator=g) for _ in range(4))
    ref = torch.distributions.kl_divergence(torch.distributions.Normal(mq, (0.5 * lq).exp()),
                                            torch.distributions.Normal(mp, (0.5 * lp).exp())).sum(-1)
    torch.testing.assert_close(T.gaussian_kl(mq, lq, mp, lp), ref)
    torch.testing.assert_close(T.gaussian_kl(mq, lq, mq, lq), torch.zeros(5))
    # hand-checked: KL(N(1, 1) ‖ N(0, 1)) = 1/2 per dim
    torch.testing.assert_close(T.gaussian_kl(torch.ones(1, 2), torch.zeros(1, 2), torch.zeros(1, 2), torch.zeros(1, 2)),
                               torch.tensor([1.0]))


def test_elbo_terms_decompose_and_kl_matches_monte_carlo():
    torch.manual_seed(0)
    model = IVAE(2, 2, 3, 2, members=2)
    s, a, s_next = torch.randn(4, 2), torch.randn(4, 2), torch.randn(4, 2)
    c = torch.tensor([0, 1, 2, 1])
    elbo, log_lik, kl = T.elbo_terms(model, s, a, s_next, c)
    assert elbo.shape == (2, 4)
    torch.testing.assert_close(elbo, log_lik - kl)
    # the analytic KL equals E_q[log q(u) - log p(u|c)] estimated by sampling
    mq, lq = model.encode(s, a, s_next, c)
    mp, lp = model.prior(c)
    u = mq + (0.5 * lq).exp() * torch.randn(20_000, *mq.shape)
    mc = (T.gaussian_log_prob(u, mq, lq) - T.gaussian_log_prob(u, mp, lp)).mean(0)
    torch.testing.assert_close(mc, kl.detach(), atol=0.05, rtol=0.02)


def test_log_lik_is_computed_on_normalised_delta():
    model = IVAE(2, 2, 2, 2, decoder_var=0.5)
    obs = np.random.default_rng(0).normal(size=(100, 2)).astype(np.float32)
    model.set_normalizer(obs, obs * 2, obs * 3)
    for p in model.decoder.parameters():
        torch.nn.init.zeros_(p)
    s = torch.as_tensor(obs[:5])
    # a zero decoder predicts the mean delta: decode returns s + mean(Δ)
    torch.testing.assert_close(model.decode(s, s, torch.zeros(5, 2))[0], s + model.delta_mean)
    target = (torch.as_tensor(obs[:5] * 3) - s - model.delta_mean) / model.delta_std
    expected = T.gaussian_log_prob(target, torch.zeros_like(target), torch.full_like(target, np.log(0.5)))
    mq, lq = model.encode(s, s, torch.as_tensor(obs[:5] * 3), torch.zeros(5, dtype=torch.long))
    _, log_lik, _ = T.elbo_terms(model, s, s, torch.as_tensor(obs[:5] * 3), torch.zeros(5, dtype=torch.long))
    torch.testing.assert_close(log_lik[0], expected)


def test_priors():
    torch.manual_seed(0)
    cond = IVAE(2, 2, 3, 2, prior="conditional")
    with torch.no_grad():
        cond.prior_mean.copy_(torch.randn_like(cond.prior_mean))
        cond.prior_logvar.copy_(torch.randn_like(cond.prior_logvar))
    m, lv = cond.prior(torch.tensor([0, 1, 2]))
    assert not torch.allclose(m[0, 0], m[0, 1]) and not torch.allclose(lv[0, 1], lv[0, 2])
    std = IVAE(2, 2, 3, 2, prior="standard")
    m, lv = std.prior(torch.tensor([0, 1, 2]))
    assert torch.all(m == 0) and torch.all(lv == 0)
    assert not std.prior_mean.requires_grad and not std.prior_logvar.requires_grad
    var_only = IVAE(2, 2, 3, 2, prior="conditional", prior_mean=False)
    assert not var_only.prior_mean.requires_grad and var_only.prior_logvar.requires_grad


def test_encoder_c_switch():
    s = torch.randn(6, 2)
    c0, c1 = torch.zeros(6, dtype=torch.long), torch.ones(6, dtype=torch.long)
    with_c, without_c = IVAE(2, 2, 2, 2, encoder_c=True), IVAE(2, 2, 2, 2, encoder_c=False)
    assert not torch.allclose(with_c.encode(s, s, s, c0)[0], with_c.encode(s, s, s, c1)[0])
    torch.testing.assert_close(without_c.encode(s, s, s, c0)[0], without_c.encode(s, s, s, c1)[0])


def test_member_extraction():
    torch.manual_seed(0)
    model = IVAE(2, 2, 3, 2, members=3)
    s, c = torch.randn(5, 2), torch.tensor([0, 1, 2, 0, 1])
    single = model.member(1)
    assert single.members == 1
    torch.testing.assert_close(single.encode(s, s, s, c)[0][0], model.encode(s, s, s, c)[0][1])
    torch.testing.assert_close(single.decode(s, s, s)[0], model.decode(s, s, s)[1])


def test_mcc_known_cases():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(20_000, 3))
    assert T.mean_corr_coef(x, x)[0] == pytest.approx(1.0)
    perm = x[:, [2, 0, 1]] * np.array([-3.0, 0.5, 2.0]) + 7  # permutation, sign flip, scaling, offset
    mcc, match, signs = T.mean_corr_coef(x, perm)
    assert mcc == pytest.approx(1.0)
    np.testing.assert_array_equal(match, [1, 2, 0])
    np.testing.assert_array_equal(signs, [1, 1, -1])
    assert T.mean_corr_coef(x, rng.normal(size=x.shape))[0] < 0.05
    # a 45° rotation of two independent sources: every |corr| is cos 45°
    y = x[:, :2] @ np.array([[1, 1], [-1, 1]]) / np.sqrt(2)
    assert T.mean_corr_coef(x[:, :2], y)[0] == pytest.approx(np.sqrt(0.5), abs=0.01)
    # a constant estimate correlates with nothing (and does not crash)
    assert T.mean_corr_coef(x[:, :2], np.c_[x[:, 0], np.ones(len(x))])[0] == pytest.approx(0.5, abs=0.01)
    with pytest.raises(ValueError):
        T.mean_corr_coef(x, x[:, :2])


def test_training_improves_elbo_and_checkpoint_round_trip(tiny_dataset, tmp_path):
    out = str(tmp_path / "ivae")
    args = T.Args(dataset=tiny_dataset, out_dir=out, total_steps=300, restarts=2, log_every=300, compare=True)
    metrics = T.main(args)
    for prior in ("conditional", "standard"):
        assert len(metrics[prior]["history"]) == 2
        # the reported MCC is the kept restart's (selected by ELBO), not the best MCC over restarts
        assert metrics[prior]["mcc"] == metrics[prior]["history"][metrics[prior]["restart"]]["mcc"]
        best = max(h["elbo"] for h in metrics[prior]["history"])
        assert metrics[prior]["elbo"] == pytest.approx(best)  # the kept restart is the best by ELBO
    # the ELBO went up from the initial model's
    data = envs.load_dataset(tiny_dataset)
    tensors = [torch.as_tensor(data[k]) for k in ("observations", "actions", "next_observations")] + [torch.as_tensor(data["aux"])]
    ckpt = contract.load_checkpoint(os.path.join(out, "ivae.pt"), "ivae")
    init = IVAE(**ckpt["config"])
    init.set_normalizer(data["observations"], data["actions"], data["next_observations"])
    assert T.evaluate_model(init, tensors)["elbo"][0] < metrics["conditional"]["elbo"] - 1.0
    # the checkpoint rebuilds the model that produced latents.npz
    model = IVAE(**ckpt["config"])
    model.load_state_dict(ckpt["state_dict"])
    assert ckpt["dataset_fingerprint"] == contract.fingerprint(data)
    with np.load(os.path.join(out, "latents.npz")) as z:
        u_mean = z["u_mean"]
        np.testing.assert_array_equal(z["exogenous"], data["exogenous"])
        # the MCC in metrics.json is recomputable from the saved posterior means and the true u
        assert T.mean_corr_coef(z["exogenous"], u_mean)[0] == pytest.approx(metrics["conditional"]["mcc"], abs=1e-9)
        assert T.mean_corr_coef(z["exogenous"], z["u_mean_ablation"])[0] == pytest.approx(metrics["standard"]["mcc"], abs=1e-9)
        assert z["u_mean_ablation"].shape == u_mean.shape
    with torch.no_grad():
        np.testing.assert_allclose(model.encode(*tensors)[0][0].numpy(), u_mean, atol=1e-5)
    assert os.path.getsize(os.path.join(out, "fig3.png")) > 10_000
    assert json.load(open(os.path.join(out, "metrics.json")))["dataset_fingerprint"] == ckpt["dataset_fingerprint"]


def test_encode_dataset_keeps_the_members_asked_for(tiny_dataset):
    """The posterior of chosen restarts over every row, batch by batch: the rows of one whole-data encode."""
    data = envs.load_dataset(tiny_dataset)
    tensors = [torch.as_tensor(data[k]) for k in ("observations", "actions", "next_observations")] + [torch.as_tensor(data["aux"])]
    torch.manual_seed(0)
    model = IVAE(data["metadata"]["obs_dim"], data["metadata"]["act_dim"], data["metadata"]["n_classes"], 2, 32, 2,
                 "conditional", True, 0.01, True, members=3)
    model.set_normalizer(data["observations"], data["actions"], data["next_observations"])
    with torch.no_grad():
        mean, logvar = (x.numpy() for x in model.encode(*tensors))
    m, lv = T.encode_dataset(model, tensors, [2, 0], batch=700)  # batches that do not divide the rows
    assert m.shape == lv.shape == (2, len(data["aux"]), 2) and m.dtype == np.float32
    np.testing.assert_allclose(m, mean[[2, 0]], atol=1e-6)
    np.testing.assert_allclose(lv, logvar[[2, 0]], atol=1e-6)


def test_checkpoint_errors(tmp_path):
    bad = tmp_path / "bad.pt"
    bad.write_bytes(b"garbage")
    with pytest.raises(contract.ContractError, match="not a readable checkpoint"):
        contract.load_checkpoint(str(bad), "ivae")
    contract.save_torch(str(tmp_path / "other.pt"), {"kind": "policy", "config": {}, "state_dict": {}})
    with pytest.raises(contract.ContractError, match="expected a 'ivae' checkpoint, found 'policy'"):
        contract.load_checkpoint(str(tmp_path / "other.pt"), "ivae")


@pytest.mark.parametrize("dim", [1, 2])
def test_fig3_handles_one_and_two_dim_latents(tmp_path, dim):
    """A 1-D u (e.g. cartpole's 1-D action perturbation) is drawn as per-class histograms, not a 2-D scatter."""
    rng = np.random.default_rng(0)
    u = rng.normal(size=(300, dim)).astype(np.float32)
    data = {"aux": np.repeat(np.arange(3), 100), "exogenous": u}
    panels = [("true u", u), ("posterior", u + 0.1 * rng.normal(size=u.shape))]
    T.draw_fig3(str(tmp_path / "f.png"), data, panels, n_plot=200, seed=0)
    assert os.path.getsize(tmp_path / "f.png") > 1000
