"""ISW-BC baseline (Li et al., NeurIPS 2023, "Imitation Learning from Imperfection: Theoretical Justifications and
Algorithms"), following the authors' MuJoCo code (`mujoco/iswbc.py`, `run_iswbc_full_replay.py`): importance-sampling
weighted BC. A discriminator tells expert (s, a) from the union of all data, and the policy clones the union with
each row weighted by its estimated density ratio d^E / d^U. On an augmented dataset (augment.py) this is ISW-BC+CA:
the counterfactual rows join D_E (and, as every row, the union).

Data: D_E = the expert rows (with the counterfactual rows on an augmented dataset); U = D_E ∪ D_U = every row.
Per step, with a batch x_E = (s, a) of D_E and a batch x_U of U (B rows each):
  * discriminator c(x), a logit, 2×256 ReLU (he-normal), expert = 1 and union = 0, plus a gradient penalty on
    f(x) = log(1 / (σ(c(x)) + 1e-3) - 1 + 1e-3) ≈ -c(x) at interpolates
    x ∈ {λ x_E + (1-λ) x_U, λ shuffle(x_U) + (1-λ) x_U}:
        L_c = E_E[-log σ(c)] + E_U[-log(1 - σ(c))] + 1.0 · E_mix[(‖∇_x f‖ - 1)²]
  * weights on the union rows, from the same forward pass and detached: "v1" (the default, DemoDICE's form)
        w = exp(-f) = 1 / (1 / (σ(c) + 1e-3) - 1 + 1e-3),
    or "v2" (the paper's form) w = σ(c) / (1 - σ(c)), computed as exp(c), its exact equal, so that it stays finite;
    rows with w < τ (τ = 0: none) are left out;
  * policy: L_π = -E_U[w · 1(w ≥ τ) · Σ_j log π(a_j | s)]  (no separate expert term).
Both networks step every iteration from the same batches, Adam 3e-4, no weight decay. The policy is the
tanh-Gaussian actor of training/policy.py. Observations are standardised (+1e-3) with the union's statistics by default
(every row, the rows the policy clones); `--norm-rows unlabelled` takes D_U's, as the official code does.

Input: a dataset `.npz` (docs/contract.md): observations, actions, expert, augmented. Single transitions: no episode
structure is used.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (losses, the discriminator's
σ(c) on both sides, weight spread, eval return; a row per evaluation, written as it goes), args.json, and with
--tensorboard the event files in tb/. Progress: a line at most every ~10 s (step, steps/s, ETA, last losses),
besides every evaluation's. policy.pt and args.json are moved into --out-dir together when the run completes; a run
whose loss turns NaN or inf stops and writes nothing.

Several seeds at once, sampling on the GPU and CUDA graphs: fast/train_iswbc.py (same networks and losses, imported).
"""

import copy
from dataclasses import dataclass
from typing import Literal

import numpy as np
import torch
import torch.nn as nn

from oilca import contract
from training.trainer import (Actor, Normalizer, TrainerArgs, artifact, check_args, check_outputs, checks, finish,
                           in_training_eval, is_eval_step, load, rows_tensor, run_cli, run_facts, setup, start,
                           training_rows)

EPS2 = 1e-3  # inside f = log(1/(σ + 1e-3) - 1 + 1e-3), as in the official code
GRAD_EPS = float(np.finfo(np.float32).eps)  # added to the gradient before its norm, as in the official code
RULES = dict(tau=checks.NON_NEGATIVE, grad_penalty=checks.DECAY)  # this method's value rules (its rates: float32's)


@dataclass
class Args(TrainerArgs):
    out_dir: str = "runs/iswbc"
    """folder for policy.pt, progress.csv and args.json"""
    total_steps: int = 5_000
    """gradient steps (each updates the discriminator and the policy; official 1,000,000)"""
    batch_size: int = 256
    """rows drawn from D_E and from the union at every step"""
    version: Literal["v1", "v2"] = "v1"
    """the weight: v1 exp(-f) = 1/(1/(σ(c) + 1e-3) - 1 + 1e-3) (official default, DemoDICE's), v2 σ(c)/(1 - σ(c))"""
    tau: float = 0.0
    """τ: union rows with weight below τ are left out of the policy loss (0: every row)"""
    grad_penalty: float = 1.0
    """weight of the discriminator's gradient penalty (‖∇f‖ - 1)²"""
    disc_lr: float = 3e-4
    """Adam learning rate of the discriminator"""
    actor_lr: float = 3e-4
    """Adam learning rate of the policy"""
    norm_rows: Literal["union", "unlabelled"] = "union"
    """rows whose mean/std standardise the observations: every row (the union the policy clones), or D_U (official)"""
    hidden: int = 256
    """hidden width of every network"""
    n_hidden: int = 2
    """hidden layers of every network"""
    act_eps: float = 1e-6
    """actions are clipped to ±(1 - act_eps) before atanh in the actor's likelihood (policy.Actor)"""


def discriminator(d_in: int, hidden: int, n_hidden: int) -> nn.Sequential:
    """The official Critic: ReLU MLP with he-normal hidden weights and zero biases, a default-initialised last layer."""
    layers = []
    for _ in range(n_hidden):
        layers += [nn.Linear(d_in, hidden), nn.ReLU()]
        nn.init.kaiming_normal_(layers[-2].weight, nonlinearity="relu")
        nn.init.zeros_(layers[-2].bias)
        d_in = hidden
    return nn.Sequential(*layers, nn.Linear(d_in, 1))


def cost_of_logit(c):
    """f = log(1 / (σ(c) + 1e-3) - 1 + 1e-3) ≈ -c ≈ log d^U / d^E."""
    return torch.log(1 / (torch.sigmoid(c) + EPS2) - 1 + EPS2)


def input_gradient(disc: nn.Module, x):
    """∇_x f(x) [B, d] at each row of x, f = cost_of_logit(disc(x)), differentiable in the discriminator's weights
    (the one place the penalty needs the network; rows do not mix, so a batch of rows gives each row's gradient)."""
    x = x.detach().requires_grad_(True)
    y = cost_of_logit(disc(x))
    grad, = torch.autograd.grad(y.sum(), x, create_graph=True)
    return grad


def disc_loss(c_e, c_u):
    """Binary cross-entropy of the logits, expert = 1, union = 0 (no label smoothing), without the gradient penalty."""
    return nn.functional.softplus(-c_e).mean() + nn.functional.softplus(c_u).mean()


def penalty_of_gradient(grad):
    """E[(‖∇_x f + eps‖ - 1)²] of the input gradients ∇_x f [B, d] at the interpolates."""
    return (((grad + GRAD_EPS).norm(dim=-1) - 1) ** 2).mean()


def gradient_penalty(disc: nn.Module, x):
    """E[(‖∇_x f(x) + eps‖ - 1)²] with f = cost_of_logit(disc(x)), differentiable in the discriminator's weights."""
    return penalty_of_gradient(input_gradient(disc, x))


def importance_weights(c, version: str = "v1"):
    """Detached weights of the union rows from their logits: v1 exp(-f) = 1/(1/(σ + 1e-3) - 1 + 1e-3), v2
    σ/(1 - σ) = exp(c)."""
    c = c.detach()
    return torch.exp(-cost_of_logit(c)) if version == "v1" else torch.exp(c)


W_MAX_V1 = 1.0 / (1.0 / (1.0 + 1e-3) - 1.0 + 1e-3)  # the largest v1 weight (σ(c) → 1): a τ above it keeps no row


def check_tau(args) -> None:
    """A τ that no weight can reach is refused before training (one line): v1 weights are at most W_MAX_V1."""
    if args.version == "v1" and args.tau > W_MAX_V1:
        raise ValueError(f"--tau {args.tau}: above every weight --version v1 can give (at most {W_MAX_V1:.6g}); the "
                         f"policy would never be trained")


def check_trained(tau: float, kept: float) -> None:
    """After training: refuse (nothing is written) when τ left every union row out of the policy loss at every step."""
    if tau > 0 and kept == 0:
        raise ValueError(f"--tau {tau}: every union row's weight was below it at every step, so the policy was never "
                         f"trained; lower --tau")


def weighted_nll(log_pi, w, tau: float = 0.0):
    """-E_U[w · 1(w ≥ τ) · Σ_j log π(a_j | s)], log_pi [B] summed over action dims, w detached."""
    w = w.detach()
    return -((w >= tau).float() * w * log_pi).mean()


def diagnostics(c_e, c_u, w) -> dict:
    """What progress.csv logs of a step besides its losses: the discriminator's mean σ(c) on each side, and the
    weights' mean, max and effective sample size as a fraction of the batch."""
    w_norm = w / w.mean()
    return {"d_expert": torch.sigmoid(c_e).mean(), "d_union": torch.sigmoid(c_u).mean(), "weight_mean": w.mean(),
            "weight_max": w.max(), "ess_frac": w_norm.sum() ** 2 / (w_norm ** 2).sum() / w.shape[-1]}


def norm_rows(data: dict, args: Args):
    """The rows whose mean/std standardise the observations: every row (the union), or D_U (--norm-rows
    unlabelled)."""
    if args.norm_rows == "union":
        return slice(None)
    unl_rows = np.flatnonzero(training_rows(data)[2])
    if len(unl_rows) == 0:
        raise ValueError(f"{args.dataset}: D_U is empty (every collected row is expert): "
                         "--norm-rows unlabelled needs it")
    return unl_rows


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    check_args(args, **RULES)
    check_tau(args)
    data, meta, spec = load(args.dataset)
    contract.require_expert(data, args.dataset)
    check_outputs(args, spec)
    _, aug, _ = training_rows(data)
    method = args.method or ("iswbc_ca" if aug.any() else "iswbc")
    exp_rows = np.flatnonzero(data["expert"])  # D_E: the collected expert rows and the counterfactual rows
    device = setup(args)
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"], norm_rows(data, args))
    obs = rows_tensor(data["observations"], norm.obs, device)  # every row: the union U
    act = rows_tensor(data["actions"], norm.act, device)
    N, B = len(obs), args.batch_size
    print(f"{method}: D_E {len(exp_rows)} rows ({aug.sum()} augmented), union {N} rows ({args.dataset})")

    torch.manual_seed(args.seed)
    disc = discriminator(meta["obs_dim"] + meta["act_dim"], args.hidden, args.n_hidden).to(device)
    actor = Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps).to(device)
    disc_opt = torch.optim.Adam(disc.parameters(), lr=args.disc_lr)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr)
    rng = np.random.default_rng(args.seed)

    run = start(args, method, args.total_steps)
    trace = {"disc_loss": [], "policy_loss": []}
    kept = torch.zeros((), device=device)  # union rows that passed τ, over the run (read once, at the end)
    for step in range(1, args.total_steps + 1):
        ie = torch.as_tensor(rng.choice(exp_rows, B), device=device)  # B rows of D_E
        iu = torch.as_tensor(rng.integers(0, N, B), device=device)  # B rows of the union
        lam, perm = torch.rand(B, 1).to(device), torch.randperm(B).to(device)  # mixing weights λ, a shuffle
        x_e = torch.cat([obs[ie], act[ie]], -1)
        x_u = torch.cat([obs[iu], act[iu]], -1)
        # discriminator: cross-entropy + gradient penalty on f at expert-union and union-union interpolates (L_c)
        c_e, c_u = disc(x_e).squeeze(-1), disc(x_u).squeeze(-1)
        x_mix = torch.cat([lam * x_e + (1 - lam) * x_u, lam * x_u[perm] + (1 - lam) * x_u])
        c_loss = disc_loss(c_e, c_u) + args.grad_penalty * gradient_penalty(disc, x_mix)
        # policy: importance-weighted BC on the union (L_π), weights w from this forward pass (detached)
        w = importance_weights(c_u, args.version)
        p_loss = weighted_nll(actor.log_prob(obs[iu], act[iu]).sum(-1), w, args.tau)
        if args.tau > 0:  # with τ = 0 every row counts: nothing to watch
            kept += (w >= args.tau).sum()
        disc_opt.zero_grad()
        actor_opt.zero_grad()
        (c_loss + p_loss).backward()  # the two networks' parameters are disjoint: each gets its own loss's gradient
        disc_opt.step()
        actor_opt.step()

        if step <= args.loss_trace:
            trace["disc_loss"].append(c_loss.item())
            trace["policy_loss"].append(p_loss.item())
        if is_eval_step(args, step, args.total_steps):
            ret = in_training_eval(actor, norm, spec, args.eval_episodes, args.eval_seed)
            stats = {name: v.item() for name, v in diagnostics(c_e, c_u, w).items()}
            run.log(step, {"disc_loss": c_loss.item(), "policy_loss": p_loss.item(), **stats, "eval_return": ret})
        else:
            run.tick(step, lambda: {"disc_loss": c_loss.item(), "policy_loss": p_loss.item()})
    check_trained(args.tau, kept.item())
    finish(run, args, spec, artifact(copy.deepcopy(actor).cpu(), norm, **run_facts(args, data, method)))
    return {"method": method, "seed": args.seed, "log": run.log_rows, "loss_trace": trace}


if __name__ == "__main__":
    run_cli(main, Args)
