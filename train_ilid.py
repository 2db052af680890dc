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
Networks: policy.py's tanh-Gaussian actor for π_E and π; Adam with (coupled, L2) weight decay 5e-3 as the official
code, but lr 3e-4 where it has 1e-5 (see docs/baselines.md). Observations are standardised with every row's
mean/std (+1e-3), the official D_E ∪ D_S statistics. The run flushes denormal floats to zero (`flush_denormals`):
the weight decay makes many of them, and they slow CPU arithmetic several times.

Budget: `--total-steps` is the policy's steps (stage 4); the discriminator and π_E take `--d-steps` and `--bc-steps`,
each 0.4 × total_steps by default (2,000 for 5,000), as ORIL's reward model.

Input: a dataset `.npz` (docs/contract.md): observations, actions, next_observations, terminals, timeouts,
episode_ids, expert, augmented.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (losses, D on D_E and D_S, rows
selected, α, eval return; a row per evaluation, written as it goes), args.json, and with --tensorboard the event
files in tb/. Progress: a line at most every ~10 s (step, steps/s, ETA, last losses), besides every evaluation's.

Seeds side by side: `--seeds 0 1 2 3 4` trains one independent replica per seed in this process: D, π_E and π are
each the R replicas' networks stacked into one batched network (policy.build_replicas), and α one value per
replica. Each replica selects its own rows with its own D, draws its minibatches from its own default_rng(k) and
has its own slice of the Adam moments, so it follows the run with `--seed k` alone up to float rounding; it writes
that run's files to `--out-dir` and `--final-eval` with `{seed}` replaced by k.
"""

import functools
import math
import os
import time
from dataclasses import asdict, dataclass
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from oilca.policy import (Actor, Normalizer, TorchStreams, artifact, build_replicas, cpu_threads, final_eval,
                    final_eval_paths, in_training_eval, load_replica, log_replicas, minibatch_generator, replica_args,
                    replica_values as values)
from oilca.progress import Progress

D_MIN, D_MAX = 0.1, 0.9  # the official clip of D ("for a fair comparison to DWBC")


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset: raw (ILID) or augmented by augment.py (ILID+CA)"""
    out_dir: str = "runs/ilid"
    """folder for policy.pt, progress.csv and args.json"""
    method: Optional[str] = None
    """label stored in the policy (default: ilid_ca on an augmented dataset, else ilid)"""
    seed: int = 0
    """seed of the initialisations and minibatches"""
    seeds: Optional[Tuple[int, ...]] = None
    """train one replica per seed side by side in this process (e.g. `--seeds 0 1 2 3 4`); --out-dir and
    --final-eval then need `{seed}`, which becomes each replica's seed"""
    total_steps: int = 5_000
    """gradient steps of the policy π (stage 4; official 2,000,000)"""
    d_steps: Optional[int] = None
    """gradient steps of the discriminator D (stage 1), batches of `batch_size` from D_E and from D_S
    (default: 0.4 × total_steps, rounded down: 2,000 for 5,000; official 100,000)"""
    bc_steps: Optional[int] = None
    """gradient steps of the reference policy π_E on D_E (stage 3) (default: 0.4 × total_steps; official 200,000)"""
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
    eval_every: int = 1_000
    """evaluate the policy every this many policy steps (0: only at the end), for learning curves"""
    eval_episodes: int = 20
    """episodes per evaluation during training (training classes of c)"""
    eval_seed: int = 50_000
    """seed of the evaluations during training (apart from the final evaluation seeds)"""
    final_eval: Optional[str] = None
    """after training, evaluate the saved policy (as evaluate.py does) and write its JSON here; `{split}` becomes train/heldout"""
    final_eval_episodes: int = 100
    """episodes per split of that final evaluation"""
    act_eps: float = 1e-6
    """actions are clipped to ±(1 - act_eps) before atanh in the actor's likelihood (policy.Actor)"""
    tensorboard: bool = False
    """also write TensorBoard event files of the logged rows and progress lines to <out_dir>/tb"""
    threads: Optional[int] = None
    """torch CPU threads (default: every core this process may use; runner.py passes cores // --jobs)"""
    cuda: bool = False
    """use CUDA when available"""


# ---- data selection -------------------------------------------------------------------------------------------------
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
    """E_E[-log D] + (1/η) E_S[-log(1 - D)] + E_E[log(1 - D)] (official PU form); without PU E_E[-log D] + E_S[-log(1 - D)]."""
    if not pu:
        return (-torch.log(d_e)).mean(-1) + (-torch.log(1 - d_s)).mean(-1)
    return (-torch.log(d_e)).mean(-1) + (-torch.log(1 - d_s)).mean(-1) / eta + torch.log(1 - d_e).mean(-1)


def alpha_loss(log_alpha, log_pi_e, ref_log_lik, epsilon: float):
    """L_α = α · sg(E_E[log π] + ε - ℓ_E), α = exp(log α): its gradient step raises α while the constraint
    E_E[log π_E - log π] ≤ ε is violated. log_pi_e [..., B]: Σ_j log π(a_j | s) on the expert batch; ref_log_lik ℓ_E."""
    return log_alpha.exp() * (log_pi_e.mean(-1) + epsilon - ref_log_lik).detach()


def policy_loss(log_pi_b, w_b, log_pi_e, alpha):
    """E_B[-w Σ_j log π] + α E_E[-Σ_j log π] (weights and α detached); log π inputs summed over action dims."""
    return (-w_b.detach() * log_pi_b).mean(-1) + alpha.detach() * (-log_pi_e).mean(-1)


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
    checks.trainer(args, d_steps=checks.COUNT, bc_steps=checks.COUNT, eta=checks.OPEN_UNIT, bar=checks.UNIT,
                   rollback=checks.COUNT, decay=checks.Real(0, 1, low_open=True), weight_init=checks.RATE,
                   epsilon=checks.DECAY, alpha=checks.RATE)  # the rates and decays: float32's range
    for name, given in (("--d-steps", args.d_steps), ("--bc-steps", args.bc_steps if args.auto_alpha else 1)):
        if given is None and args.total_steps * 2 // 5 < 1:
            raise ValueError(f"--total-steps {args.total_steps} leaves {name} 0.4 × {args.total_steps} = 0 steps: "
                             f"give {name} or --total-steps >= 3")
    runs = replica_args(args)  # one Args per seed, as `--seed k` alone would have them
    data = envs.load_dataset(args.dataset)
    contract.require_expert(data, args.dataset)
    meta = data["metadata"]
    spec = envs.env_spec(meta)
    contract.check_paths({"--dataset": args.dataset}, folders={"--out-dir": [a.out_dir for a in runs]},
                         files={"--final-eval": [p for a in runs for p in final_eval_paths(a.final_eval, spec)]})
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    method = args.method or ("ilid_ca" if aug.any() else "ilid")
    exp_rows = np.flatnonzero(data["expert"])  # collected D_E and the counterfactual rows
    sup_rows = np.flatnonzero(~data["expert"] & ~aug)
    if len(sup_rows) == 0:
        raise ValueError(f"{args.dataset}: D_S is empty (every collected row is expert); ILID needs supplementary data")
    torch.set_num_threads(cpu_threads(args.threads))
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"])  # D_E ∪ D_S, as the official code
    obs = torch.as_tensor(norm.obs(data["observations"]), device=device)
    next_obs = torch.as_tensor(norm.obs(data["next_observations"]), device=device)
    act = torch.as_tensor(norm.act(data["actions"]), device=device)
    obs_dim, act_dim, N, B, R = meta["obs_dim"], meta["act_dim"], len(obs), args.batch_size, len(runs)
    print(f"{method}: D_E {len(exp_rows)} rows ({aug.sum()} augmented), D_S {len(sup_rows)} rows ({args.dataset})"
          + (f", seeds {[a.seed for a in runs]} side by side" if R > 1 else ""))

    # One seed trains plain networks on [B, …] batches; several seeds (--seeds) train R replicas side by side, every
    # network stacked (policy.build_replicas) on [R, B, …] batches and every loss one value per replica [R]. Replica k
    # draws from numpy's default_rng(k) (its device generator on a GPU) and builds its networks from torch's generator
    # as seeded by k, so it follows the run with --seed k alone.
    rngs = [np.random.default_rng(a.seed) for a in runs]
    gens = [minibatch_generator(a.seed, device) for a in runs]
    streams = TorchStreams([a.seed for a in runs])

    def per_replica(draw):
        """draw(k) for every replica: [B] for one seed, stacked [R, B] for several."""
        return draw(0) if R == 1 else torch.stack([draw(k) for k in range(R)])

    def pick(k: int, rows):
        """B rows of `rows` (a numpy array, or its tensor on a GPU) for replica k."""
        if gens[k] is None:
            return torch.as_tensor(rngs[k].choice(rows, B), device=device)
        return rows[torch.randint(len(rows), (B,), generator=gens[k], device=device)]

    def on_device(rows):
        """A pool of rows as pick() reads it: numpy on the CPU, a tensor where the device generator draws."""
        return rows if gens[0] is None else torch.as_tensor(rows, device=device)

    def all_replicas(x):
        return x if R == 1 else x.expand(R, -1, -1)

    def chunked(fn, rows):
        """fn over rows in chunks (no grad): [len(rows)], or [R, len(rows)]."""
        with torch.no_grad():
            return torch.cat([fn(i) for i in torch.as_tensor(rows, device=device).split(8192)], -1)

    exp_dev, sup_dev = on_device(exp_rows), on_device(sup_rows)
    folders = [contract.RunFolder(a.out_dir) for a in runs]  # fresh --out-dirs for the logs; results staged beside
    t0 = time.time()

    # stage 1: the state discriminator, PU loss
    disc, _ = build_replicas(lambda: Discriminator(obs_dim, args.hidden, args.n_hidden), streams, device)
    d_opt = torch.optim.Adam(disc.parameters(), lr=args.d_lr, weight_decay=args.d_weight_decay)
    d_steps = args.d_steps if args.d_steps is not None else args.total_steps * 2 // 5
    prog = Progress(f"{method} discriminator" + (f" x{R}" if R > 1 else ""), d_steps)  # lines only
    for step in range(1, d_steps + 1):
        ie, i_s = per_replica(lambda k: torch.cat([pick(k, exp_dev), pick(k, sup_dev)])).split(B, -1)
        d_loss = pu_loss(disc(obs[ie]), disc(obs[i_s]), args.eta, args.pu)
        d_opt.zero_grad()
        d_loss.sum().backward()  # several seeds: replica k's slice of the gradient is ∂loss_k alone
        d_opt.step()
        prog.update(step, lambda: {"loss": d_loss.mean().item()})

    # stage 2: selection with rollback, from D(s′) of every row ([N], or [R, N] for several seeds)
    d_next = chunked(lambda i: disc(all_replicas(next_obs[i])), np.arange(N))
    d_state = chunked(lambda i: disc(all_replicas(obs[i])), np.arange(N))
    ends = data["terminals"] | data["timeouts"]
    w_all = rollback_weights((d_next >= args.bar).cpu().numpy(), data["episode_ids"], ends, args.rollback,
                             args.decay, args.weight_init).reshape(R, N)
    row_w = np.zeros((R, N), np.float32)
    row_w[:, sup_rows] = w_all[:, sup_rows]  # D_S rows: their selection weight (0: dropped)
    row_w[:, exp_rows] = 1.0  # D_E rows (and counterfactual rows): weight 1, no selection
    pools = [np.flatnonzero(row_w[k] > 0) for k in range(R)]  # the policy's first batch: selected D_S ∪ D_E
    pools_dev = [on_device(p) for p in pools]
    row_w_dev = torch.as_tensor(row_w if R > 1 else row_w[0], device=device)
    selected = [int((row_w[k, sup_rows] > 0).sum()) for k in range(R)]
    d_state = d_state.reshape(R, N).cpu().numpy()
    d_e, d_s = d_state[:, exp_rows].mean(-1), d_state[:, sup_rows].mean(-1)  # mean D on D_E and on D_S, per replica
    for k, a in enumerate(runs):
        checks.finite_losses({"d_loss": values(d_loss)[k], "d_expert": float(d_e[k]), "d_supplementary": float(d_s[k])},
                             d_steps, f"{method} discriminator" + (f" (seed {a.seed})" if R > 1 else ""))
    print(f"[{method}] discriminator: {d_steps} steps, loss {d_loss.mean().item():.3f}, mean D on D_E {d_e.mean():.2f}, "
          f"on D_S {d_s.mean():.2f}; selected {np.mean(selected):.0f} of {len(sup_rows)} D_S rows (mean weight "
          f"{np.mean([row_w[k, sup_rows][row_w[k, sup_rows] > 0].mean() if selected[k] else 0 for k in range(R)]):.2f})"
          f"  ({time.time() - t0:.0f} s)", flush=True)

    # stage 3: the reference policy π_E, BC on D_E; the policy starts as its copy
    make_actor = lambda: Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps)  # noqa: E731
    actor, actors = build_replicas(make_actor, streams, device)
    bc_steps = 0
    ref_log_lik = torch.zeros(R if R > 1 else (), device=device)
    bc_l = torch.zeros(R if R > 1 else (), device=device)
    if args.auto_alpha:
        ref, _ = build_replicas(make_actor, streams, device)
        ref_opt = torch.optim.Adam(ref.parameters(), lr=args.actor_lr, weight_decay=args.weight_decay)
        bc_steps = args.bc_steps if args.bc_steps is not None else args.total_steps * 2 // 5
        prog = Progress(f"{method} reference BC" + (f" x{R}" if R > 1 else ""), bc_steps)  # lines only
        for step in range(1, bc_steps + 1):
            ie = per_replica(lambda k: pick(k, exp_dev))
            bc_l = -ref.log_prob(obs[ie], act[ie]).sum(-1).mean(-1)
            ref_opt.zero_grad()
            bc_l.sum().backward()
            ref_opt.step()
            prog.update(step, lambda: {"loss": bc_l.mean().item()})
        # ℓ_E = E_{D_E}[Σ_j log π_E(a_j | s)], once
        ref_log_lik = chunked(lambda i: ref.log_prob(all_replicas(obs[i]), all_replicas(act[i])).sum(-1), exp_rows).mean(-1)
        if args.bc_init:
            actor.load_state_dict(ref.state_dict())
        for k, a in enumerate(runs):
            checks.finite_losses({"bc_loss": values(bc_l)[k], "ref_log_lik": values(ref_log_lik)[k]}, bc_steps,
                                 f"{method} reference BC" + (f" (seed {a.seed})" if R > 1 else ""))
        print(f"[{method}] reference BC: {bc_steps} steps, loss {bc_l.mean().item():.3f}, mean log π_E on D_E "
              f"{ref_log_lik.mean().item():.3f}  ({time.time() - t0:.0f} s)", flush=True)

    # stage 4: the policy, weighted BC on selected D_S ∪ D_E plus α × BC on D_E
    log_alpha = nn.Parameter(torch.full((R,) if R > 1 else (), math.log(args.alpha), device=device))
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr, weight_decay=args.weight_decay)
    alpha_opt = torch.optim.Adam([log_alpha], lr=args.alpha_lr)
    progs = [Progress(method, args.total_steps, out_dir=a.out_dir, tensorboard=args.tensorboard) for a in runs]
    line = progs[0] if R == 1 else Progress(f"{method} x{R}", args.total_steps)  # several seeds: means over replicas
    logs = [[] for _ in runs]
    for step in range(1, args.total_steps + 1):
        ib, ie = per_replica(lambda k: torch.cat([pick(k, pools_dev[k]), pick(k, exp_dev)])).split(B, -1)
        w_b = row_w_dev[ib] if R == 1 else row_w_dev.gather(1, ib)
        log_pi = actor.log_prob(obs[torch.cat([ib, ie], -1)], act[torch.cat([ib, ie], -1)]).sum(-1)
        log_pi_b, log_pi_e = log_pi.split(B, -1)
        alpha = log_alpha.exp()
        p_loss = policy_loss(log_pi_b, w_b, log_pi_e, alpha)  # with α before this step's update, as the official code
        a_loss = alpha_loss(log_alpha, log_pi_e, ref_log_lik, args.epsilon) if args.auto_alpha else None
        actor_opt.zero_grad()
        alpha_opt.zero_grad()
        (p_loss.sum() + (a_loss.sum() if a_loss is not None else 0)).backward()  # disjoint parameters
        actor_opt.step()
        if a_loss is not None:
            alpha_opt.step()
        if (args.eval_every and step % args.eval_every == 0) or step == args.total_steps:
            rets = []
            for k in range(R):
                with streams.use(k):  # an evaluation builds layers from torch's generator, as the single run's does
                    policy_k = actor if R == 1 else load_replica(actors[k], actor, k)
                    rets.append(in_training_eval(policy_k, norm, spec, args.eval_episodes, args.eval_seed))
            cols = {"d_loss": values(d_loss), "d_expert": d_e.tolist(), "d_supplementary": d_s.tolist(),
                    "selected": [float(s) for s in selected], "bc_loss": values(bc_l), "ref_log_lik": values(ref_log_lik),
                    "policy_loss": values(p_loss), "alpha": values(alpha),
                    "log_lik_gap": values(ref_log_lik - log_pi_e.mean(-1)), "eval_return": rets}
            log_replicas(logs, progs, runs, step, cols, method)  # stops at a non-finite value
            line.update(step, {name: float(np.mean(col)) for name, col in cols.items()}, force=True)
        else:
            line.update(step, lambda: {"policy_loss": p_loss.mean().item(), "alpha": alpha.mean().item()})
    for prog in {id(p): p for p in progs + [line]}.values():
        prog.close()

    for k, a in enumerate(runs):
        contract.save_policy(os.path.join(folders[k].staging, "policy.pt"), artifact(
            (actor if R == 1 else load_replica(actors[k], actor, k)).cpu(), norm, method=method, seed=a.seed, env=spec,
            dataset_fingerprint=contract.fingerprint(data), dataset=a.dataset, train_args=asdict(a)))
        contract.save_json(os.path.join(folders[k].staging, "args.json"), asdict(a))
        folders[k].commit()  # policy.pt and args.json appear in --out-dir together, beside the run's progress.csv
        if a.final_eval:
            final_eval(os.path.join(a.out_dir, "policy.pt"), spec, a.final_eval_episodes, a.final_eval)
    # every row's weight in the policy's first batch (D_E 1, D_S its selection weight), for diagnostics
    results = [{"seed": a.seed, "log": logs[k], "row_weights": row_w[k], "selected": selected[k]}
               for k, a in enumerate(runs)]
    return {"method": method, **results[0]} if R == 1 else {"method": method, "runs": results}


if __name__ == "__main__":
    cli.run(main, Args)
