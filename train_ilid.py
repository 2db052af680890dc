"""ILID baseline (Yue et al., ICML 2024, "How to Leverage Diverse Demonstrations in Offline Imitation Learning"),
following the authors' code (one file, `main.py`): a state discriminator picks the supplementary transitions that
lead to expert-like states, with a decaying weight for those that reach one a few steps later, and the policy
clones them beside D_E under a constraint that keeps it close to BC on D_E. On an augmented dataset (augment.py)
this is ILID+CA: the counterfactual rows join D_E.

Data: D_E = the expert rows (with the counterfactual rows on an augmented dataset); D_S = the other collected rows
(the "supplementary" data, D_U elsewhere in this repo).
Stage 1, state discriminator D(s) = clip(σ(NN(s)), 0.1, 0.9), 2×256 ReLU, positive–unlabelled loss with η = 0.5
(the official form, ORIL's Eq. 5 divided by η):
    L_D = E_E[-log D(s)] + (1/η) E_S[-log(1 - D(s))] + E_E[log(1 - D(s))]     (`--no-pu`: E_E[-log D] + E_S[-log(1 - D)])
Stage 2, data selection with rollback: a state is expert-like when D(s) ≥ b (b = 0.89). Row t of D_S gets
    w_t = w₀ ρ^j  for the first j ∈ {0, …, K-1} with D(s_{t+j+1}) ≥ b, s_{t+j+1} = s′ of row t + j in t's episode,
    w_t = 0       (dropped) when there is none,
with w₀ = 1, ρ = 0.9, K = 5 (`rollback_weights`). The state j + 1 steps later is read from the dataset's own s′
column, and row t + j must lie in row t's episode (same episode id, no terminal or timeout on rows t … t + j - 1),
so the rollback never crosses an episode end. Rows of D_E need no selection (weight 1); so do counterfactual rows,
which have no episode.
Stage 3, reference policy π_E: BC on D_E alone, L = E_E[-Σ_j log π_E(a_j | s)]; its mean log-likelihood on D_E,
ℓ_E = E_{D_E}[Σ_j log π_E(a_j | s)], is computed once, and the policy π starts as a copy of π_E.
Stage 4, policy, batches of B rows from the selected D_S ∪ D_E (weight 1 on D_E rows) and B rows of D_E:
    L_π = E_B[-w Σ_j log π(a_j | s)] + α E_E[-Σ_j log π(a_j | s)]
with a Lagrange multiplier α = exp(log α) for the constraint E_E[log π_E - log π] ≤ ε (ε = 0.01), updated by Adam on
    L_α = α · sg(E_E[Σ_j log π(a_j | s)] + ε - ℓ_E)
(α grows while π's expert likelihood is more than ε below π_E's, and shrinks otherwise); the policy step uses the
α from before that update (detached). `--no-auto-alpha` keeps α fixed and, as the official code, trains no π_E.
Networks: training/policy.py's tanh-Gaussian actor for π_E and π; Adam with (coupled, L2) weight decay 5e-3 as the
official code, but lr 3e-4 where it has 1e-5 (see docs/baselines.md). Observations are standardised with every row's
mean/std (+1e-3), the official D_E ∪ D_S statistics. The run flushes denormal floats to zero (`flush_denormals`):
the weight decay makes many of them, and they slow CPU arithmetic several times.

Budget: `--total-steps` is the policy's steps (stage 4); the discriminator and π_E take `--d-steps` and `--bc-steps`,
each 0.4 × total_steps by default (2,000 for 5,000), as ORIL's reward model.

Input: a dataset `.npz` (docs/contract.md): observations, actions, next_observations, terminals, timeouts,
episode_ids, expert, augmented.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (losses, D on D_E and D_S, rows
selected, α, eval return; a row per evaluation, written as it goes), args.json, and with --tensorboard the event
files in tb/. The method label is ilid_ca on an augmented dataset, else ilid. policy.pt and args.json are moved into
--out-dir together when the run completes; a run whose losses turn NaN or inf stops and writes nothing.

Several seeds at once, sampling on the GPU and CUDA graphs: fast/train_ilid.py (same networks and losses, imported).
"""

import functools
import math
import time
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

from oilca import contract
from training.trainer import (transition_tensors, Actor, Normalizer, Progress, TrainerArgs, artifact, bc_loss, check_args, check_outputs,
                           checks, finish, in_training_eval, is_eval_step, load, run_cli, run_facts, setup, start,
                           training_rows)

D_MIN, D_MAX = 0.1, 0.9  # the official clip of D ("for a fair comparison to DWBC")
CHUNK = 8192  # rows per forward pass when D or π_E scores the whole dataset (stage 2, ℓ_E)


@dataclass
class Args(TrainerArgs):
    out_dir: str = "runs/ilid"
    """folder for policy.pt, progress.csv and args.json"""
    total_steps: int = 5_000
    """gradient steps of the policy π (stage 4; official 2,000,000)"""
    d_steps: Optional[int] = None
    """gradient steps of the discriminator D (stage 1), batches of `batch_size` from D_E and from D_S
    (not given: 0.4 × total_steps, rounded down: 2,000 for 5,000; official 100,000)"""
    bc_steps: Optional[int] = None
    """gradient steps of the reference policy π_E on D_E (stage 3) (not given: 0.4 × total_steps; official 200,000)"""
    batch_size: int = 256
    """rows per batch: D_E and D_S for D; D_E for π_E; selected D_S ∪ D_E and D_E for π"""
    eta: float = 0.5
    """class prior η of the positive–unlabelled discriminator loss"""
    pu: bool = True
    """positive–unlabelled discriminator loss; off (`--no-pu`): plain expert-vs-supplementary cross-entropy"""
    bar: float = 0.89
    """b: a state is expert-like when D(s) ≥ b (D is clipped to [0.1, 0.9])"""
    rollback: int = 5
    """K: a row is kept if one of the K states after it (s_{t+1} … s_{t+K}) in its episode is expert-like"""
    decay: float = 0.9
    """ρ: the weight of a row whose first expert-like state is j + 1 steps later is w₀ ρ^j"""
    weight_init: float = 1.0
    """w₀: the weight of a row whose next state is expert-like"""
    epsilon: float = 0.01
    """ε: the bound on E_E[log π_E - log π] enforced by the multiplier α"""
    alpha: float = 1.0
    """initial α (exp of the learnt log α), or the fixed α with --no-auto-alpha"""
    auto_alpha: bool = True
    """learn α as a Lagrange multiplier against π_E; off: fixed α, no π_E (no BC stage, π starts fresh)"""
    bc_init: bool = True
    """initialise π from π_E"""
    actor_lr: float = 3e-4
    """Adam learning rate of π and π_E (official 1e-5, for 2M steps)"""
    alpha_lr: float = 3e-4
    """Adam learning rate of log α (official: the policy's, 1e-5)"""
    d_lr: float = 3e-4
    """Adam learning rate of D (official 1e-5)"""
    weight_decay: float = 5e-3
    """Adam (coupled, L2) weight decay of π and π_E (official 5e-3)"""
    d_weight_decay: float = 5e-3
    """Adam (coupled, L2) weight decay of D (official 5e-3)"""
    hidden: int = 256
    """hidden width of every network"""
    n_hidden: int = 2
    """hidden layers of every network"""
    act_eps: float = 1e-6
    """actions are clipped to ±(1 - act_eps) before atanh in the actor's likelihood (policy.Actor)"""


# ILID's own value rules (check_args adds the shared ones); rates and decays within float32's range
RULES = dict(d_steps=checks.COUNT, bc_steps=checks.COUNT, eta=checks.OPEN_UNIT, bar=checks.UNIT,
             rollback=checks.COUNT, decay=checks.Real(0, 1, low_open=True), weight_init=checks.RATE,
             epsilon=checks.DECAY, alpha=checks.RATE)


# ---- networks and losses --------------------------------------------------------------------------------------------
class Discriminator(nn.Module):
    """D(s) = clip(σ(NN(s)), 0.1, 0.9), NN a ReLU MLP."""

    def __init__(self, obs_dim: int, hidden: int = 256, n_hidden: int = 2):
        super().__init__()
        layers, d = [], obs_dim
        for _ in range(n_hidden):
            layers += [nn.Linear(d, hidden), nn.ReLU()]
            d = hidden
        self.net = nn.Sequential(*layers, nn.Linear(d, 1))

    def forward(self, obs):
        return torch.sigmoid(self.net(obs)).squeeze(-1).clamp(D_MIN, D_MAX)


def pu_loss(d_e, d_s, eta: float, pu: bool = True):
    """L_D = E_E[-log D] + (1/η) E_S[-log(1 - D)] + E_E[log(1 - D)] (official PU form); without PU
    E_E[-log D] + E_S[-log(1 - D)]. d_e [B], d_s [B]: D on a batch of D_E and of D_S."""
    if not pu:
        return (-torch.log(d_e)).mean() + (-torch.log(1 - d_s)).mean()
    return (-torch.log(d_e)).mean() + (-torch.log(1 - d_s)).mean() / eta + torch.log(1 - d_e).mean()


def alpha_loss(log_alpha, log_pi_e, ref_log_lik, epsilon: float):
    """L_α = α · sg(E_E[log π] + ε - ℓ_E), α = exp(log α): its gradient step raises α while the constraint
    E_E[log π_E - log π] ≤ ε is violated. log_pi_e [B]: Σ_j log π(a_j | s) on the expert batch; ref_log_lik ℓ_E."""
    return log_alpha.exp() * (log_pi_e.mean() + epsilon - ref_log_lik).detach()


def policy_loss(log_pi_b, w_b, log_pi_e, alpha):
    """E_B[-w Σ_j log π] + α E_E[-Σ_j log π] (weights and α detached); log π inputs [B] summed over action dims."""
    return (-w_b.detach() * log_pi_b).mean() + alpha.detach() * (-log_pi_e).mean()


# ---- data -----------------------------------------------------------------------------------------------------------
def stage_steps(args: Args) -> Tuple[int, int]:
    """(--d-steps, --bc-steps), each by default 0.4 × --total-steps (rounded down; refused when that is 0);
    no BC steps with --no-auto-alpha."""
    for name, given in (("--d-steps", args.d_steps), ("--bc-steps", args.bc_steps if args.auto_alpha else 1)):
        if given is None and args.total_steps * 2 // 5 < 1:
            raise ValueError(f"--total-steps {args.total_steps} leaves {name} 0.4 × {args.total_steps} = 0 steps: "
                             f"give {name} or --total-steps >= 3")
    d_steps = args.d_steps if args.d_steps is not None else args.total_steps * 2 // 5
    bc_steps = args.bc_steps if args.bc_steps is not None else args.total_steps * 2 // 5
    return d_steps, bc_steps if args.auto_alpha else 0


def ilid_rows(data: dict, dataset: str):
    """Row numbers of D_E (collected expert rows and counterfactual ones) and of D_S, and the augmented mask."""
    _, augmented, supplementary = training_rows(data)
    exp_rows, sup_rows = np.flatnonzero(data["expert"]), np.flatnonzero(supplementary)
    if len(sup_rows) == 0:
        raise ValueError(f"{dataset}: D_S is empty (every collected row is expert); ILID needs supplementary data")
    return exp_rows, sup_rows, augmented


def rollback_weights(good_next: np.ndarray, episode_ids: np.ndarray, ends: np.ndarray, rollback: int, decay: float,
                     weight_init: float = 1.0) -> np.ndarray:
    """ILID's selection with rollback. `good_next` [..., N]: D(s′) ≥ b for each row's own s′; `episode_ids` [N] and
    `ends` [N] (terminals | timeouts) mark the episodes, rows in time order. Row t gets w₀ ρ^j for the first j < K
    such that row t + j is in t's episode and good_next[t + j] (its s′ is s_{t+j+1}), else 0. [..., N] float32."""
    good = np.asarray(good_next, bool)
    ep, ends = np.asarray(episode_ids), np.asarray(ends, bool)
    n = len(ep)
    # segments: a new one starts where the episode id changes or the previous row ended its episode
    start = np.r_[True, (ep[1:] != ep[:-1]) | ends[:-1]] if n else np.zeros(0, bool)
    seg = np.cumsum(start)
    w = np.zeros(good.shape, np.float32)
    longest = int(np.bincount(seg).max()) if n else 0  # no row t + j in t's episode for j >= the longest segment
    for j in range(min(rollback, longest)):
        hit = np.zeros(good.shape, bool)
        hit[..., :n - j] = good[..., j:] & (seg[j:] == seg[:n - j])  # row t + j is in t's episode, s_{t+j+1} good
        value = np.float32(weight_init * decay ** j)
        w = np.where(hit & (w < value), value, w)  # the first (largest) weight wins, as in the official loop
    return w


def row_weights(w_all: np.ndarray, exp_rows: np.ndarray, sup_rows: np.ndarray) -> np.ndarray:
    """Every row's weight in the policy's first batch [..., N]: D_S rows their selection weight (0: dropped), D_E
    rows (and counterfactual rows) 1, no selection."""
    row_w = np.zeros(w_all.shape, np.float32)
    row_w[..., sup_rows] = w_all[..., sup_rows]
    row_w[..., exp_rows] = 1.0
    return row_w


@torch.no_grad()
def chunked(fn, rows: np.ndarray, device) -> torch.Tensor:
    """fn(row numbers) over `rows` in chunks of CHUNK, concatenated on the last dim (no grad)."""
    return torch.cat([fn(i) for i in torch.as_tensor(rows, device=device).split(CHUNK)], -1)


def flush_denormals(fn):
    """Run fn with denormal floats flushed to zero on the CPU, then restore torch's default (off). The official
    weight decay drives many weights and Adam moments below 1e-38, where CPU arithmetic is many times slower: a
    5,000-step toy run fell from ~280 to ~35 policy steps/s with 5,713 of the policy's 67,074 weights denormal."""
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        torch.set_flush_denormal(True)
        try:
            return fn(*args, **kwargs)
        finally:
            torch.set_flush_denormal(False)
    return wrapper


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
@flush_denormals
def main(args: Args) -> dict:
    check_args(args, **RULES)
    d_steps, bc_steps = stage_steps(args)
    data, meta, spec = load(args.dataset)
    contract.require_expert(data, args.dataset)
    check_outputs(args, spec)
    exp_rows, sup_rows, aug = ilid_rows(data, args.dataset)
    method = args.method or ("ilid_ca" if aug.any() else "ilid")
    device = setup(args)
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"])  # D_E ∪ D_S, as the official code
    obs, next_obs, act = transition_tensors(data, norm, device)
    obs_dim, act_dim, N, B = meta["obs_dim"], meta["act_dim"], len(obs), args.batch_size
    print(f"{method}: D_E {len(exp_rows)} rows ({aug.sum()} augmented), D_S {len(sup_rows)} rows ({args.dataset})")

    torch.manual_seed(args.seed)  # every network below, and the layers each in-training evaluation builds
    rng = np.random.default_rng(args.seed)  # every minibatch, stage 1, 3 then 4
    trace = {"d_loss": [], "bc_loss": [], "policy_loss": [], "alpha_loss": []}
    t0 = time.time()

    # stage 1: the state discriminator, PU loss
    disc = Discriminator(obs_dim, args.hidden, args.n_hidden).to(device)
    d_opt = torch.optim.Adam(disc.parameters(), lr=args.d_lr, weight_decay=args.d_weight_decay)
    prog = Progress(f"{method} discriminator", d_steps)  # lines only
    for step in range(1, d_steps + 1):
        ie = torch.as_tensor(rng.choice(exp_rows, B), device=device)  # B rows of D_E
        i_s = torch.as_tensor(rng.choice(sup_rows, B), device=device)  # B rows of D_S
        d_loss = pu_loss(disc(obs[ie]), disc(obs[i_s]), args.eta, args.pu)  # L_D
        d_opt.zero_grad()
        d_loss.backward()
        d_opt.step()
        if step <= args.loss_trace:
            trace["d_loss"].append(d_loss.item())
        prog.update(step, lambda: {"loss": d_loss.item()})  # the loss is read only when a line is due

    # stage 2: selection with rollback, from D(s′) of every row
    d_next = chunked(lambda i: disc(next_obs[i]), np.arange(N), device)
    d_state = chunked(lambda i: disc(obs[i]), np.arange(N), device).cpu().numpy()
    ends = data["terminals"] | data["timeouts"]
    w_all = rollback_weights((d_next >= args.bar).cpu().numpy(), data["episode_ids"], ends, args.rollback,
                             args.decay, args.weight_init)  # w_t = w₀ ρ^j, or 0
    row_w = row_weights(w_all, exp_rows, sup_rows)
    pool = np.flatnonzero(row_w > 0)  # the policy's first batch: selected D_S ∪ D_E
    row_w_dev = torch.as_tensor(row_w, device=device)
    selected = int((row_w[sup_rows] > 0).sum())
    d_e, d_s = d_state[exp_rows].mean(), d_state[sup_rows].mean()  # mean D on D_E and on D_S
    checks.finite_losses({"d_loss": d_loss.item(), "d_expert": float(d_e), "d_supplementary": float(d_s)}, d_steps,
                         f"{method} discriminator")
    mean_w = row_w[sup_rows][row_w[sup_rows] > 0].mean() if selected else 0
    print(f"[{method}] discriminator: {d_steps} steps, loss {d_loss.item():.3f}, mean D on D_E {d_e:.2f}, on D_S "
          f"{d_s:.2f}; selected {selected} of {len(sup_rows)} D_S rows (mean weight {mean_w:.2f})  "
          f"({time.time() - t0:.0f} s)", flush=True)

    # stage 3: the reference policy π_E, BC on D_E; the policy starts as its copy
    actor = Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps).to(device)
    zero = torch.zeros((), device=device)
    ref_log_lik = bc_l = zero  # no π_E with --no-auto-alpha
    if args.auto_alpha:
        ref_actor = Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps).to(device)
        ref_opt = torch.optim.Adam(ref_actor.parameters(), lr=args.actor_lr, weight_decay=args.weight_decay)
        prog = Progress(f"{method} reference BC", bc_steps)  # lines only
        for step in range(1, bc_steps + 1):
            ie = torch.as_tensor(rng.choice(exp_rows, B), device=device)
            bc_l = bc_loss(ref_actor, obs[ie], act[ie])  # E_E[-Σ_j log π_E(a_j | s)]
            ref_opt.zero_grad()
            bc_l.backward()
            ref_opt.step()
            if step <= args.loss_trace:
                trace["bc_loss"].append(bc_l.item())
            prog.update(step, lambda: {"loss": bc_l.item()})
        # ℓ_E = E_{D_E}[Σ_j log π_E(a_j | s)], once
        ref_log_lik = chunked(lambda i: ref_actor.log_prob(obs[i], act[i]).sum(-1), exp_rows, device).mean()
        if args.bc_init:
            actor.load_state_dict(ref_actor.state_dict())
        checks.finite_losses({"bc_loss": bc_l.item(), "ref_log_lik": ref_log_lik.item()}, bc_steps,
                             f"{method} reference BC")
        print(f"[{method}] reference BC: {bc_steps} steps, loss {bc_l.item():.3f}, mean log π_E on D_E "
              f"{ref_log_lik.item():.3f}  ({time.time() - t0:.0f} s)", flush=True)

    # stage 4: the policy, weighted BC on selected D_S ∪ D_E plus α × BC on D_E
    log_alpha = nn.Parameter(torch.full((), math.log(args.alpha), device=device))
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr, weight_decay=args.weight_decay)
    alpha_opt = torch.optim.Adam([log_alpha], lr=args.alpha_lr)
    run = start(args, method, args.total_steps)
    for step in range(1, args.total_steps + 1):
        ib = torch.as_tensor(rng.choice(pool, B), device=device)  # B rows of the selected D_S ∪ D_E
        ie = torch.as_tensor(rng.choice(exp_rows, B), device=device)  # B rows of D_E
        both = torch.cat([ib, ie])
        log_pi_b, log_pi_e = actor.log_prob(obs[both], act[both]).sum(-1).split(B)  # Σ_j log π(a_j | s)
        alpha = log_alpha.exp()
        p_loss = policy_loss(log_pi_b, row_w_dev[ib], log_pi_e, alpha)  # L_π, with α before this step's update
        a_loss = alpha_loss(log_alpha, log_pi_e, ref_log_lik, args.epsilon) if args.auto_alpha else zero  # L_α
        actor_opt.zero_grad()
        alpha_opt.zero_grad()
        (p_loss + a_loss).backward()  # disjoint parameters: π learns from L_π, log α from L_α
        actor_opt.step()
        if args.auto_alpha:
            alpha_opt.step()

        if step <= args.loss_trace:
            trace["policy_loss"].append(p_loss.item())
            trace["alpha_loss"].append(a_loss.item())
        if is_eval_step(args, step, args.total_steps):
            ret = in_training_eval(actor, norm, spec, args.eval_episodes, args.eval_seed)
            run.log(step, {"d_loss": d_loss.item(), "d_expert": float(d_e), "d_supplementary": float(d_s),
                           "selected": float(selected), "bc_loss": bc_l.item(), "ref_log_lik": ref_log_lik.item(),
                           "policy_loss": p_loss.item(), "alpha": alpha.item(),
                           "log_lik_gap": (ref_log_lik - log_pi_e.mean()).item(), "eval_return": ret})
        else:
            run.tick(step, lambda: {"policy_loss": p_loss.item(), "alpha": alpha.item()})
    finish(run, args, spec, artifact(actor.cpu(), norm, **run_facts(args, data, method)))
    # row_weights: every row's weight in the policy's first batch (D_E 1, D_S its selection weight), for diagnostics
    return {"method": method, "seed": args.seed, "log": run.log_rows, "row_weights": row_w, "selected": selected,
            "loss_trace": trace}


if __name__ == "__main__":
    run_cli(main, Args)
