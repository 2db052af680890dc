"""LobsDICE baseline (Kim et al., NeurIPS 2022), following the authors' official code (geon-hyeong/imitation-dice,
lobsdice.py with `closed_form_mu=True`): offline imitation from expert *observations*. The expert side is only
(s, s') of D_E; its actions are never read. The policy is weighted BC on the union D_all = D_E ∪ D_U.

Per step, with a batch of expert (s_E, s'_E), a batch (s, a, s') of D_all and a batch of initial states s_0:
  * cost / discriminator c_ψ(s, s') (a logit), GAN minimax loss with expert = 1 and union = 0, plus a gradient
    penalty on r(x) = log(1 / (σ(c_ψ(x)) + 1e-3) - 1 + 1e-3) ≈ log d^U / d^E at interpolates
    x ∈ {λ x_E + (1-λ) x_U, λ shuffle(x_U) + (1-λ) x_U}:
        L_c = E_E[-log σ(c)] + E_U[-log(1 - σ(c))] + 0.1 E_mix[(‖∇_x r‖ - 1)²]
  * ν(s) with the closed-form (μ-free) objective, A(s, s') = -sg(r(s, s')) + γ ν(s') - ν(s) on the union batch:
        L_ν = (1 - γ) E_{s_0}[ν(s_0)] + (1 + α) logsumexp_batch(A / (1 + α)) + 1e-4 E[‖∇_s ν‖²]
    (the penalty at the union states and at interpolates of (s_E, s_U) and (s'_E, s'_U); the batch logsumexp
    omits -log B, a constant, as the official code does);
  * policy: w = exp((A - max A) / (1 + α)), w ← w / mean(w), L_π = -E_U[sg(w) · log π(a | s)].
All three networks step every iteration from the same batch. Networks 2×256 ReLU, he-normal initialisation,
cost and ν without a last-layer bias; the policy is the tanh-Gaussian actor of training/policy.py. Observations are
standardised with D_U's mean/std (+1e-3) (the official "imperfect" data); initial states are each episode's first row.
On an augmented dataset the counterfactual rows join the expert (s, s') side and the union (method `lobsdice_ca`,
else `lobsdice`, unless --method says otherwise).

Input: a dataset `.npz` (docs/contract.md): observations, next_observations, actions (union only), expert, episode_ids.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (losses, cost on both sides,
weight spread, eval return; a row per evaluation, written as it goes), args.json, and with --tensorboard the event
files in tb/. Progress: a line at most every ~10 s (step, steps/s, ETA, last losses), besides every evaluation's.
A run whose loss turns NaN or inf stops and writes nothing.

Random draws, in order: the cost, ν and the actor are built after torch.manual_seed(seed); each step draws its rows
from numpy's default_rng(seed), then its mixing noise (λ, the shuffle, λ2) from torch's global generator; an
in-training evaluation builds layers from torch's generator too, which shifts every later noise draw.

Several seeds at once, sampling on the GPU and CUDA graphs: fast/train_lobsdice.py (same networks and losses, imported).
"""

from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
import torch.nn as nn

from oilca import contract
from training.trainer import (transition_tensors, Actor, Normalizer, TrainerArgs, artifact, check_args, check_outputs, checks, finish,
                           in_training_eval, is_eval_step, load, run_cli, run_facts, setup, start, training_rows)

EPS2 = 1e-3  # inside the cost's log, as in the official code
RULES = dict(alpha=checks.NON_NEGATIVE, gamma=checks.Real(0, 1, high_open=True), cost_gp=checks.NON_NEGATIVE,
             nu_gp=checks.NON_NEGATIVE)  # the value rules of this method's flags (besides every trainer's)


@dataclass
class Args(TrainerArgs):
    out_dir: str = "runs/lobsdice"
    """folder for policy.pt, progress.csv and args.json"""
    total_steps: int = 5_000
    """gradient steps (each updates the cost, ν and the policy)"""
    batch_size: int = 256
    """rows drawn from the expert (s, s'), from the union and from the initial states at every step"""
    alpha: float = 0.1
    """α, the regularisation towards the union's distribution (the f-divergence weight is 1 + α)"""
    gamma: float = 0.99
    """discount γ"""
    cost_gp: float = 0.1
    """weight of the cost's gradient penalty (‖∇r‖ - 1)²"""
    nu_gp: float = 1e-4
    """weight of ν's gradient penalty ‖∇ν‖²"""
    cost_lr: float = 3e-4
    """Adam learning rate of the cost"""
    nu_lr: float = 3e-4
    """Adam learning rate of ν"""
    actor_lr: float = 3e-4
    """Adam learning rate of the policy"""
    hidden: int = 256
    """hidden width of every network"""
    n_hidden: int = 2
    """hidden layers of every network"""
    act_eps: float = 1e-6
    """actions are clipped to ±(1 - act_eps) before atanh in the actor's likelihood (training/policy.py Actor)"""


# -- networks ----------------------------------------------------------------------------------------------------------
def critic(d_in: int, hidden: int, n_hidden: int) -> nn.Sequential:
    """utils.Critic of the official code: ReLU MLP, he-normal weights, zero biases, no bias on the last layer."""
    layers = []
    for _ in range(n_hidden):
        layers += [nn.Linear(d_in, hidden), nn.ReLU()]
        d_in = hidden
    layers.append(nn.Linear(d_in, 1, bias=False))
    for m in layers:
        if isinstance(m, nn.Linear):
            nn.init.kaiming_normal_(m.weight, nonlinearity="relu")
            if m.bias is not None:
                nn.init.zeros_(m.bias)
    return nn.Sequential(*layers)


# -- losses (plain tensors of one batch) -------------------------------------------------------------------------------
def cost_of_logit(c):
    """r = log(1 / (σ(c) + 1e-3) - 1 + 1e-3) ≈ -c: low where the transition looks like the expert's."""
    return torch.log(1 / (torch.sigmoid(c) + EPS2) - 1 + EPS2)


def cost_loss(c_e, c_u):
    """GAN minimax discriminator loss, expert = 1, union = 0 (without the gradient penalty)."""
    return nn.functional.softplus(-c_e).mean() + nn.functional.softplus(c_u).mean()


def input_gradient(f, x):
    """∇_x Σ f(x) at x (cut from x's own graph), kept differentiable (create_graph) so a penalty on it trains f."""
    x = x.detach().requires_grad_(True)
    grad, = torch.autograd.grad(f(x).sum(), x, create_graph=True)
    return grad


def norm_penalty(grad, target_norm: Optional[float]):
    """E[(‖g‖ - target)²] of per-row gradients g [N, dim], or E[‖g‖²] when target_norm is None."""
    norm = (grad + 1e-7).norm(dim=-1)  # + float32 eps as the official code
    return ((norm - target_norm) ** 2).mean() if target_norm is not None else (norm ** 2).mean()


def gradient_penalty(net, x, target_norm: Optional[float], transform=None):
    """E[(‖∇_x f(x)‖ - target)²], or E[‖∇_x f(x)‖²] when target_norm is None (f = transform(net(x)))."""
    f = net if transform is None else (lambda z: transform(net(z)))
    return norm_penalty(input_gradient(f, x), target_norm)


def advantage(r_u, nu_s, nu_next, gamma: float):
    """A(s, s') = -sg(r) + γ ν(s') - ν(s)."""
    return -r_u.detach() + gamma * nu_next - nu_s


def nu_loss(nu_init, adv, gamma: float, alpha: float):
    """Closed-form LobsDICE objective (1 - γ) E[ν(s_0)] + (1 + α) logsumexp(A / (1 + α)) (no gradient penalty)."""
    return (1 - gamma) * nu_init.mean() + (1 + alpha) * torch.logsumexp(adv / (1 + alpha), -1)


def policy_weights(adv, alpha: float):
    """w = exp((A - max A) / (1 + α)), normalised to mean 1, detached."""
    w = torch.exp((adv - adv.max()) / (1 + alpha)).detach()
    return w / w.mean()


def policy_loss(w, log_pi):
    """Weighted BC on the union: -E[w · Σ_j log π_j(a_j | s)] of per-dimension log-likelihoods [B, act_dim]."""
    return -(w * log_pi.sum(-1)).mean()


def diagnostics(c_e, r_u, adv, w) -> dict:
    """A step's logged statistics: the mean cost r on the expert and the union batch, the mean advantage, the
    largest weight, and the effective sample size of the weights as a fraction of the batch, (Σw)² / Σw² / B."""
    return {"cost_expert": cost_of_logit(c_e).mean(), "cost_union": r_u.mean(), "adv_mean": adv.mean(),
            "weight_max": w.max(), "ess_frac": w.sum() ** 2 / (w ** 2).sum() / len(w)}


# -- data --------------------------------------------------------------------------------------------------------------
def lobsdice_rows(data: dict):
    """Row numbers of (the expert (s, s') side: collected D_E and the counterfactual rows; the union D_U; the
    initial states, each collected episode's first row), and the augmented mask."""
    _, aug, unlabelled = training_rows(data)
    exp_rows, unl_rows = np.flatnonzero(data["expert"]), np.flatnonzero(unlabelled)
    ep = data["episode_ids"]
    init_rows = np.flatnonzero(~aug & (np.r_[True, ep[1:] != ep[:-1]]))
    return exp_rows, unl_rows, init_rows, aug


def draw_rows(rng: np.random.Generator, exp_rows, init_rows, n: int, batch: int) -> np.ndarray:
    """A step's rows [3 · batch]: expert, union (any of the n rows) and initial, in this order of draws."""
    return np.concatenate([rng.choice(exp_rows, batch), rng.integers(0, n, batch), rng.choice(init_rows, batch)])


def mixing_noise(batch: int):
    """A step's noise from torch's global generator: mixing weights λ [B, 1], a shuffle [B], λ2 [B, 1]."""
    return torch.rand(batch, 1), torch.randperm(batch), torch.rand(batch, 1)


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    check_args(args, **RULES)
    data, meta, spec = load(args.dataset)
    contract.require_expert(data, args.dataset)
    check_outputs(args, spec)
    exp_rows, unl_rows, init_rows, aug = lobsdice_rows(data)
    if len(unl_rows) == 0:
        raise ValueError(f"{args.dataset}: D_U is empty (every collected row is expert)")
    method = args.method or ("lobsdice_ca" if aug.any() else "lobsdice")
    device = setup(args)
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"], unl_rows)
    obs, next_obs, act = transition_tensors(data, norm, device)
    obs_dim, act_dim, N, B = meta["obs_dim"], meta["act_dim"], len(obs), args.batch_size
    print(f"{method}: expert (s, s') {len(exp_rows)} rows ({aug.sum()} augmented), union {N} rows, "
          f"{len(init_rows)} initial states ({args.dataset})")

    torch.manual_seed(args.seed)
    cost = critic(2 * obs_dim, args.hidden, args.n_hidden).to(device)  # c_ψ(s, s')
    nu = critic(obs_dim, args.hidden, args.n_hidden).to(device)  # ν(s)
    actor = Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps).to(device)
    cost_opt = torch.optim.Adam(cost.parameters(), lr=args.cost_lr)
    nu_opt = torch.optim.Adam(nu.parameters(), lr=args.nu_lr)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr)
    rng = np.random.default_rng(args.seed)

    run = start(args, method, args.total_steps)
    trace = {"cost_loss": [], "nu_loss": [], "policy_loss": []}
    for step in range(1, args.total_steps + 1):
        ie, iu, i0 = torch.as_tensor(draw_rows(rng, exp_rows, init_rows, N, B), device=device).split(B)
        lam, perm, lam2 = (x.to(device) for x in mixing_noise(B))
        x_e = torch.cat([obs[ie], next_obs[ie]], -1)  # expert (s, s')
        x_u = torch.cat([obs[iu], next_obs[iu]], -1)  # union (s, s')
        # cost: GAN loss + gradient penalty on r at interpolates (expert/union, shuffled union/union)   (L_c)
        c_e, c_u = cost(x_e).squeeze(-1), cost(x_u).squeeze(-1)
        x_mix = torch.cat([lam * x_e + (1 - lam) * x_u, lam * x_u[perm] + (1 - lam) * x_u])
        c_loss = cost_loss(c_e, c_u) + args.cost_gp * gradient_penalty(cost, x_mix, 1.0, cost_of_logit)
        # ν: closed-form objective on the union batch, A = -sg(r) + γ ν(s') - ν(s)   (L_ν)
        r_u = cost_of_logit(c_u)
        nu_all = nu(torch.cat([obs[i0], obs[iu], next_obs[iu]])).squeeze(-1)  # ν(s_0), ν(s), ν(s')
        adv = advantage(r_u, nu_all[B:2 * B], nu_all[2 * B:], args.gamma)
        s_mix = torch.cat([obs[iu], lam2 * obs[ie] + (1 - lam2) * obs[iu],
                           lam2 * next_obs[ie] + (1 - lam2) * next_obs[iu]])
        n_loss = nu_loss(nu_all[:B], adv, args.gamma, args.alpha) + args.nu_gp * gradient_penalty(nu, s_mix, None)
        # policy: weighted BC on the union, w ∝ exp(A / (1 + α))   (L_π)
        w = policy_weights(adv, args.alpha)
        p_loss = policy_loss(w, actor.log_prob(obs[iu], act[iu]))
        for opt in (cost_opt, nu_opt, actor_opt):
            opt.zero_grad()
        (c_loss + n_loss + p_loss).backward()  # the losses touch disjoint parameters (r is detached in A, w too)
        for opt in (cost_opt, nu_opt, actor_opt):
            opt.step()

        losses = {"cost_loss": c_loss, "nu_loss": n_loss, "policy_loss": p_loss}
        if step <= args.loss_trace:
            for name, x in losses.items():
                trace[name].append(x.item())
        if is_eval_step(args, step, args.total_steps):
            ret = in_training_eval(actor, norm, spec, args.eval_episodes, args.eval_seed)
            stats = {**losses, **diagnostics(c_e, r_u, adv, w)}
            run.log(step, {**{name: x.item() for name, x in stats.items()}, "eval_return": ret})
        else:
            run.tick(step, lambda: {name: x.item() for name, x in losses.items()})
    finish(run, args, spec, artifact(actor.cpu(), norm, **run_facts(args, data, method)))
    return {"method": method, "log": run.log_rows, "loss_trace": trace}


if __name__ == "__main__":
    run_cli(main, Args)
