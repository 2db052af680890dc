"""Discriminator-weighted behavior cloning (DWBC, Xu et al. 2022; OILCA Eq. 5–6). On a raw dataset this is the
DWBC baseline; on an augmented dataset (augment.py) it is OILCA.

Discriminator d(s, a, n(log π)) ∈ [0.1, 0.9] (official DWBC): two input branches, Linear(s‖a → 128) and
Linear(n(log π) → 128) with n(x) = (clip(x, -20, 10) + 20) / 30 per action dimension and log π detached, then
Linear 256 → 256 → 1, sigmoid, clipped to [0.1, 0.9]. It is trained with the positive-unlabelled loss (Eq. 5)
    L_d = E_E[-log d] + E_U[-log(1 - d)] / η - E_E[-log(1 - d)]       (`--no-pu`: plain E_E[-log d] + E_U[-log(1-d)])
every `d_update_every` policy steps. The policy minimises (Eq. 6, with ℓ = -Σ_j log π_j(a_j | s) and d detached)
    L_π = α E_E[ℓ] - E_E[ℓ (η / (d(1-d)) + 1)] + E_U[ℓ (1 / (1 - d̃) - 1)],   d̃ = d if d ≥ 0.5 else 0,
i.e. expert rows are weighted α - 1 - η/(d(1-d)) and unlabelled rows d̃/(1-d̃). Requires α ≥ 1 + η/0.09 so that
the expert weight stays positive for every d in [0.1, 0.9] (a warning is printed otherwise). With --adaptive-eta
(the authors' OILCA code) η starts at 0.3 and, after each discriminator step, becomes the share of the expert batch
with d > 0.5, clipped to [0.2, 0.8].

Input:  a dataset `.npz` (docs/contract.md). The expert side of every batch is D_E: the collected expert rows plus,
        in an augmented dataset, the counterfactual rows (uniformly over their union, or a fixed share with
        `--aug-frac`); the unlabelled side is D_U, the collected non-expert rows. Batches of `batch_size` from each
        side. Observations are standardised with the mean/std of all training rows (+1e-3), actions mapped from the
        dataset's bounds to [-1, 1]. The method label is `oilca` on an augmented dataset, else `dwbc` (or --method).
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md, with augmented_de_over_du = |D_E| / |D_U|),
        progress.csv (policy_loss, d_loss, d_expert, d_unlabelled, eta, eval_return; a row per evaluation, written
        as the run goes), args.json, and with --tensorboard event files in tb/. policy.pt and args.json are moved
        into --out-dir together when the run completes; a run whose losses turn NaN or inf stops and writes nothing.
Budgets: `--checkpoints 5000 20000` also saves the policy at those steps (`policy_step<N>.pt`: the N-step run's
        policy, bit for bit on a CPU).

Several seeds at once (and one dataset per seed, OILCA's per-seed augmentations), sampling on the GPU and CUDA
graphs: fast/train_dwbc.py (same networks, losses and data, imported).
"""

import copy
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

from oilca import contract
from training.trainer import (Actor, Normalizer, TrainerArgs, artifact, check_args, check_checkpoints, check_outputs,
                           checkpoint_name, checks, finish, in_training_eval, is_eval_step, load, run_cli, run_facts,
                           setup, start, rows_tensor, training_rows)

LOG_PI_MIN, LOG_PI_MAX, D_MIN, D_MAX = -20.0, 10.0, 0.1, 0.9
RULES = dict(alpha=checks.Real(1), eta=checks.OPEN_UNIT, d_update_every=checks.COUNT, aug_frac=checks.UNIT)  # its flags


@dataclass
class Args(TrainerArgs):
    out_dir: str = "runs/dwbc"
    """folder for policy.pt, progress.csv and args.json"""
    total_steps: int = 5_000
    """policy gradient steps"""
    batch_size: int = 256
    """rows drawn from D_E and from D_U at every step"""
    alpha: float = 7.5
    """weight α > 1 on the expert BC term (Eq. 6)"""
    eta: float = 0.5
    """class prior η of the positive-unlabelled discriminator loss (Eq. 5)"""
    adaptive_eta: bool = False
    """the authors' OILCA code path: η = share of the expert batch with d > 0.5, clipped to [0.2, 0.8], from 0.3"""
    pu: bool = True
    """positive-unlabelled discriminator loss; off: plain expert-vs-unlabelled cross-entropy"""
    d_update_every: int = 1
    """update the discriminator every this many policy steps. Official DWBC: every 100 of 500k steps, i.e. 5k
    updates; our 5k-step CPU budget keeps that count by updating every step (every 10 scored worse on tuning data)"""
    aug_frac: Optional[float] = None
    """share of augmented rows in the expert batch (not given: uniform over collected + augmented expert rows)"""
    actor_lr: float = 1e-4
    """Adam learning rate of the policy"""
    actor_weight_decay: float = 5e-3
    """Adam weight decay of the policy"""
    disc_lr: float = 1e-4
    """Adam learning rate of the discriminator"""
    hidden: int = 256
    """hidden width of the actor"""
    n_hidden: int = 2
    """hidden layers of the actor"""
    act_eps: float = 1e-6
    """actions are clipped to ±(1 - act_eps) before atanh in the actor's likelihood (policy.Actor)"""
    checkpoints: Tuple[int, ...] = ()
    """also save the policy at these steps (each below --total-steps) as policy_step<N>.pt in --out-dir: one run
    gives the policies of several budgets"""


class Discriminator(nn.Module):
    """d(s, a, n(log π)) of the official DWBC code, clipped to [0.1, 0.9]."""

    def __init__(self, obs_dim: int, act_dim: int):
        super().__init__()
        self.sa = nn.Linear(obs_dim + act_dim, 128)
        self.logpi = nn.Linear(act_dim, 128)
        self.head = nn.Sequential(nn.Linear(256, 256), nn.ReLU(), nn.Linear(256, 1))

    def forward(self, obs, act, log_pi_norm):
        h = torch.cat([torch.relu(self.sa(torch.cat([obs, act], -1))), torch.relu(self.logpi(log_pi_norm))], -1)
        return torch.sigmoid(self.head(h)).squeeze(-1).clamp(D_MIN, D_MAX)


def normalize_log_pi(log_pi):
    """n(log π) = (clip(log π, -20, 10) + 20) / 30 ∈ [0, 1], per action dimension, detached."""
    return ((log_pi.detach().clamp(LOG_PI_MIN, LOG_PI_MAX) - LOG_PI_MIN) / (LOG_PI_MAX - LOG_PI_MIN))


def discriminator_loss(d_e, d_u, eta, pu: bool = True):
    """Eq. 5 on d of an expert batch [B] and an unlabelled batch [B]: E_E[-log d] + E_U[-log(1-d)]/η - E_E[-log(1-d)]
    (PU), or the plain cross-entropy E_E[-log d] + E_U[-log(1-d)]."""
    if not pu:
        return (-torch.log(d_e)).mean() + (-torch.log(1 - d_u)).mean()
    return (-torch.log(d_e)).mean() + (-torch.log(1 - d_u)).mean() / eta - (-torch.log(1 - d_e)).mean()


def policy_loss(log_pi_e, log_pi_u, d_e, d_u, alpha: float, eta):
    """Eq. 6 with ℓ = -Σ_j log π_j on per-dimension log π [B, act_dim] and d [B] of both batches:
    α E_E[ℓ] - E_E[ℓ(η/(d(1-d)) + 1)] + E_U[ℓ(1/(1-d̃) - 1)], d detached."""
    d_e, d_u = d_e.detach(), d_u.detach()
    d_u = torch.where(d_u < 0.5, torch.zeros_like(d_u), d_u)  # d̃
    nll_e, nll_u = -log_pi_e.sum(-1), -log_pi_u.sum(-1)
    return alpha * nll_e.mean() - (nll_e * (eta / (d_e * (1 - d_e)) + 1)).mean() + (nll_u * (1 / (1 - d_u) - 1)).mean()


def expert_share(d_e):
    """The share of the expert batch the discriminator calls expert (d > 0.5): --adaptive-eta's η before clipping."""
    return (d_e > 0.5).float().mean()


def dwbc_rows(data: dict, args: Args) -> dict:
    """Row indices of a dataset: D_E's collected and augmented rows, D_E = their union, D_U, and the training rows
    (D_E then D_U) whose observation mean/std the normaliser uses."""
    contract.require_expert(data, args.dataset)
    collected, augmented, unlabelled = (np.flatnonzero(mask) for mask in training_rows(data))
    if len(unlabelled) == 0:
        raise ValueError(f"{args.dataset}: D_U is empty (every collected row is expert)")
    if args.aug_frac is not None and not (0 <= args.aug_frac <= 1 and len(augmented)):
        raise ValueError("--aug-frac needs a value in [0, 1] and an augmented dataset")
    expert = np.concatenate([collected, augmented])
    return {"collected": collected, "augmented": augmented, "expert": expert, "unlabelled": unlabelled,
            "train": np.concatenate([expert, unlabelled])}


def draw_batch(rows: dict, rng: np.random.Generator, batch_size: int, aug_frac: Optional[float]) -> np.ndarray:
    """Row indices [expert batch; unlabelled batch] [2B]: B rows of D_E (uniform over it, or Binomial(B, aug_frac)
    augmented rows and the rest collected ones), then B rows of D_U, all with replacement."""
    if aug_frac is None:
        expert = rng.choice(rows["expert"], batch_size)
    else:
        n_aug = rng.binomial(batch_size, aug_frac)
        expert = np.concatenate([rng.choice(rows["augmented"], n_aug),
                                 rng.choice(rows["collected"], batch_size - n_aug)])
    return np.concatenate([expert, rng.choice(rows["unlabelled"], batch_size)])


def de_over_du(rows: dict) -> float:
    """|D_E| / |D_U| (collected + augmented expert rows over unlabelled rows), recorded in the policy artifact."""
    return len(rows["expert"]) / len(rows["unlabelled"])


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    check_args(args, **RULES)
    checkpoints = check_checkpoints(args.checkpoints, args.total_steps)
    data, meta, spec = load(args.dataset)
    rows = dwbc_rows(data, args)
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"], rows["train"])
    check_outputs(args, spec)
    method = args.method or ("oilca" if len(rows["augmented"]) else "dwbc")
    if args.alpha < 1 + args.eta / (D_MIN * (1 - D_MIN)):
        print(f"warning: alpha={args.alpha} < 1 + eta/0.09 = {1 + args.eta / 0.09:.2f}: expert weights can be negative")
    device = setup(args)
    obs = rows_tensor(data["observations"], norm.obs, device)
    act = rows_tensor(data["actions"], norm.act, device)
    print(f"{method}: D_E {len(rows['collected'])} collected + {len(rows['augmented'])} augmented rows, "
          f"D_U {len(rows['unlabelled'])} rows ({args.dataset})")

    torch.manual_seed(args.seed)
    actor = Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps).to(device)
    disc = Discriminator(meta["obs_dim"], meta["act_dim"]).to(device)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr, weight_decay=args.actor_weight_decay)
    disc_opt = torch.optim.Adam(disc.parameters(), lr=args.disc_lr)
    rng = np.random.default_rng(args.seed)
    eta = 0.3 if args.adaptive_eta else args.eta  # the class prior η of Eq. 5–6
    B = args.batch_size

    def policy_artifact(**extra) -> dict:
        return artifact(copy.deepcopy(actor).cpu(), norm,
                        **run_facts(args, data, method, augmented_de_over_du=de_over_du(rows), **extra))

    run = start(args, method, args.total_steps)
    trace = {"policy_loss": [], "d_loss": []}
    for step in range(1, args.total_steps + 1):
        idx = torch.as_tensor(draw_batch(rows, rng, B, args.aug_frac), device=device)
        # one forward pass over [expert batch; unlabelled batch] (both networks treat rows independently)
        o, a = obs[idx], act[idx]
        log_pi = actor.log_prob(o, a)  # log π_j(a_j | s), [2B, act_dim]
        d = disc(o, a, normalize_log_pi(log_pi))  # d(s, a, n(log π)), [2B]
        log_pi_e, log_pi_u, d_e, d_u = log_pi[:B], log_pi[B:], d[:B], d[B:]

        if step % args.d_update_every == 0:  # the discriminator steps on its own schedule
            d_loss = discriminator_loss(d_e, d_u, eta, args.pu)  # Eq. 5
            disc_opt.zero_grad()
            d_loss.backward()
            disc_opt.step()
            if args.adaptive_eta:  # the authors' OILCA code: η from this batch's expert side
                eta = float(np.clip(expert_share(d_e).item(), 0.2, 0.8))
            if step <= args.loss_trace:
                trace["d_loss"].append(d_loss.item())
        p_loss = policy_loss(log_pi_e, log_pi_u, d_e, d_u, args.alpha, eta)  # Eq. 6, with d detached
        actor_opt.zero_grad()
        p_loss.backward()
        actor_opt.step()

        if step <= args.loss_trace:
            trace["policy_loss"].append(p_loss.item())
        if step in checkpoints:  # this budget's policy, beside the final one (the run goes on unchanged)
            contract.save_policy(run.staged(checkpoint_name(step)), policy_artifact(checkpoint_step=step))
        if is_eval_step(args, step, args.total_steps):
            ret = in_training_eval(actor, norm, spec, args.eval_episodes, args.eval_seed)
            run.log(step, {"policy_loss": p_loss.item(), "d_loss": discriminator_loss(d_e, d_u, eta, args.pu).item(),
                           "d_expert": d_e.mean().item(), "d_unlabelled": d_u.mean().item(), "eta": float(eta),
                           "eval_return": ret})
        else:
            run.tick(step, lambda: {"policy_loss": p_loss.item()})
    finish(run, args, spec, policy_artifact())
    return {"method": method, "log": run.log_rows, "loss_trace": trace}


if __name__ == "__main__":
    run_cli(main, Args)
