"""ISW-BC baseline (Li et al., NeurIPS 2023, "Imitation Learning from Imperfection: Theoretical Justifications and
Algorithms"), following the authors' MuJoCo code (`mujoco/iswbc.py`, `run_iswbc_full_replay.py`): importance-sampling
weighted BC. A discriminator tells expert (s, a) from the union of all data, and the policy clones the union with
each row weighted by its estimated density ratio d^E / d^U. On an augmented dataset (augment.py) this is ISW-BC+CA:
the counterfactual rows join D_E (and, as every row, the union).

Data: D_E = the expert rows (with the counterfactual rows on an augmented dataset); U = D_E ∪ D_U = every row.
Per step, with a batch x_E = (s, a) of D_E and a batch x_U of U (B rows each):
  * discriminator c(x), a logit, 2×256 ReLU (he-normal), expert = 1 and union = 0, plus a gradient penalty on
    f(x) = log(1 / (σ(c(x)) + 1e-3) - 1 + 1e-3) ≈ -c(x) at interpolates x ∈ {λ x_E + (1-λ) x_U, λ shuffle(x_U) + (1-λ) x_U}:
        L_c = E_E[-log σ(c)] + E_U[-log(1 - σ(c))] + 1.0 · E_mix[(‖∇_x f‖ - 1)²]
  * weights on the union rows, from the same forward pass and detached: "v1" (the default, DemoDICE's form)
        w = exp(-f) = 1 / (1 / (σ(c) + 1e-3) - 1 + 1e-3),
    or "v2" (the paper's form) w = σ(c) / (1 - σ(c)), computed as exp(c), its exact equal, so that it stays finite;
    rows with w < τ (τ = 0: none) are left out;
  * policy: L_π = -E_U[w · 1(w ≥ τ) · Σ_j log π(a_j | s)]  (no separate expert term).
Both networks step every iteration from the same batches, Adam 3e-4, no weight decay. The policy is policy.py's
tanh-Gaussian actor. Observations are standardised (+1e-3) with the union's statistics by default (every row, the
rows the policy clones); `--norm-rows unlabelled` takes D_U's, as the official code does.

Input: a dataset `.npz` (docs/contract.md): observations, actions, expert, augmented. Single transitions: no episode
structure is used.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (losses, the discriminator's
σ(c) on both sides, weight spread, eval return; a row per evaluation, written as it goes), args.json, and with
--tensorboard the event files in tb/. Progress: a line at most every ~10 s (step, steps/s, ETA, last losses),
besides every evaluation's.

Seeds side by side: `--seeds 0 1 2 3 4` trains one independent replica per seed in this process, the discriminator
and the actor each stacked into one batched network (policy.build_replicas), every loss one value per replica.
Replica k is initialised as `--seed k` alone is, draws its rows from default_rng(k) and its mixing noise from its
own stream of torch's generator (policy.TorchStreams), and has its own slice of the Adam moments, so it follows the
single run up to float rounding; it writes that run's files to `--out-dir` and `--final-eval` with `{seed}`
replaced by k.
"""

import os
from dataclasses import asdict, dataclass
from typing import Literal, Optional, Tuple

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

EPS2 = 1e-3  # inside f = log(1/(σ + 1e-3) - 1 + 1e-3), as in the official code
GRAD_EPS = float(np.finfo(np.float32).eps)  # added to the gradient before its norm, as in the official code


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset: raw (ISW-BC) or augmented by augment.py (ISW-BC+CA)"""
    out_dir: str = "runs/iswbc"
    """folder for policy.pt, progress.csv and args.json"""
    method: Optional[str] = None
    """label stored in the policy (default: iswbc_ca on an augmented dataset, else iswbc)"""
    seed: int = 0
    """seed of the initialisation, minibatches and mixing noise"""
    seeds: Optional[Tuple[int, ...]] = None
    """train one replica per seed side by side in this process (e.g. `--seeds 0 1 2 3 4`); --out-dir and
    --final-eval then need `{seed}`, which becomes each replica's seed"""
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
    eval_every: int = 1_000
    """evaluate the policy every this many steps (0: only at the end), for learning curves"""
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


def disc_loss(c_e, c_u):
    """Binary cross-entropy, expert = 1, union = 0 (no label smoothing), without the gradient penalty."""
    return nn.functional.softplus(-c_e).mean(-1) + nn.functional.softplus(c_u).mean(-1)


def gradient_penalty(net, x):
    """E[(‖∇_x f(x) + eps‖ - 1)²] with f = cost_of_logit(net(x)), differentiable in the net's weights."""
    x = x.detach().requires_grad_(True)
    y = cost_of_logit(net(x))
    grad, = torch.autograd.grad(y.sum(), x, create_graph=True)
    return (((grad + GRAD_EPS).norm(dim=-1) - 1) ** 2).mean(-1)


def importance_weights(c, version: str = "v1"):
    """Detached weights of the union rows from their logits: v1 exp(-f) = 1/(1/(σ + 1e-3) - 1 + 1e-3), v2
    σ/(1 - σ) = exp(c)."""
    c = c.detach()
    return torch.exp(-cost_of_logit(c)) if version == "v1" else torch.exp(c)


def weighted_nll(log_pi, w, tau: float = 0.0):
    """-E_U[w · 1(w ≥ τ) · Σ_j log π(a_j | s)], log_pi summed over action dims, w detached."""
    w = w.detach()
    return -((w >= tau).float() * w * log_pi).mean(-1)


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    checks.trainer(args, tau=checks.NON_NEGATIVE, grad_penalty=checks.DECAY)  # its rates: float32's range
    runs = replica_args(args)  # one Args per seed, as `--seed k` alone would have them
    data = envs.load_dataset(args.dataset)
    contract.require_expert(data, args.dataset)
    meta = data["metadata"]
    spec = envs.env_spec(meta)
    contract.check_paths({"--dataset": args.dataset}, folders={"--out-dir": [a.out_dir for a in runs]},
                         files={"--final-eval": [p for a in runs for p in final_eval_paths(a.final_eval, spec)]})
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    method = args.method or ("iswbc_ca" if aug.any() else "iswbc")
    exp_rows = np.flatnonzero(data["expert"])  # collected D_E and the counterfactual rows
    unl_rows = np.flatnonzero(~data["expert"] & ~aug)
    if args.norm_rows == "unlabelled" and len(unl_rows) == 0:
        raise ValueError(f"{args.dataset}: D_U is empty (every collected row is expert): --norm-rows unlabelled needs it")
    torch.set_num_threads(cpu_threads(args.threads))
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    stats_rows = unl_rows if args.norm_rows == "unlabelled" else slice(None)
    norm = Normalizer(data["observations"][stats_rows], meta["action_low"], meta["action_high"])
    obs = torch.as_tensor(norm.obs(data["observations"]), device=device)
    act = torch.as_tensor(norm.act(data["actions"]), device=device)
    pool = torch.as_tensor(exp_rows, device=device)
    obs_dim, act_dim, N, B, R = meta["obs_dim"], meta["act_dim"], len(obs), args.batch_size, len(runs)
    print(f"{method}: D_E {len(exp_rows)} rows ({aug.sum()} augmented), union {N} rows ({args.dataset})"
          + (f", seeds {[a.seed for a in runs]} side by side" if R > 1 else ""))

    # One seed trains plain networks on [B, …] batches; several seeds (--seeds) train R replicas side by side, every
    # network stacked (policy.build_replicas) on [R, B, …] batches and every loss one value per replica [R]. Replica k
    # draws its rows from numpy's default_rng(k) and its mixing noise from torch's generator as seeded by k
    # (policy.TorchStreams), or both from its device generator on a GPU, so it follows the run with --seed k alone.
    rngs = [np.random.default_rng(a.seed) for a in runs]
    gens = [minibatch_generator(a.seed, device) for a in runs]
    streams = TorchStreams([a.seed for a in runs])

    def draw(k: int):
        """Replica k's rows (expert, union) [2B] and noise: mixing weights λ [B, 1] and a permutation [B]."""
        gen = gens[k]
        if gen is None:  # the CPU: numpy's rng for rows, torch's global stream of the replica for the noise
            rows = np.concatenate([rngs[k].choice(exp_rows, B), rngs[k].integers(0, N, B)])
            with streams.use(k):
                lam, perm = torch.rand(B, 1), torch.randperm(B)
            return torch.as_tensor(rows, device=device), lam.to(device), perm.to(device)
        rows = torch.cat([pool[torch.randint(len(pool), (B,), generator=gen, device=device)],
                          torch.randint(0, N, (B,), generator=gen, device=device)])
        return rows, torch.rand(B, 1, generator=gen, device=device), torch.randperm(B, generator=gen, device=device)

    disc, _ = build_replicas(lambda: discriminator(obs_dim + act_dim, args.hidden, args.n_hidden), streams, device)
    actor, actors = build_replicas(lambda: Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps), streams, device)
    disc_opt = torch.optim.Adam(disc.parameters(), lr=args.disc_lr)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr)

    logs = [[] for _ in runs]
    folders = [contract.RunFolder(a.out_dir) for a in runs]  # fresh --out-dirs for the logs; results staged beside
    progs = [Progress(method, args.total_steps, out_dir=a.out_dir, tensorboard=args.tensorboard) for a in runs]
    line = progs[0] if R == 1 else Progress(f"{method} x{R}", args.total_steps)  # several seeds: means over replicas
    for step in range(1, args.total_steps + 1):
        drawn = [draw(k) for k in range(R)]
        rows, lam, perm = drawn[0] if R == 1 else (torch.stack(x) for x in zip(*drawn))
        ie, iu = rows.split(B, -1)
        x_e = torch.cat([obs[ie], act[ie]], -1)
        x_u = torch.cat([obs[iu], act[iu]], -1)
        # discriminator: cross-entropy + gradient penalty on f at expert-union and union-union interpolates
        c_e, c_u = disc(x_e).squeeze(-1), disc(x_u).squeeze(-1)
        x_u_perm = torch.take_along_dim(x_u, perm.unsqueeze(-1), dim=-2)  # x_u[perm], per replica
        x_mix = torch.cat([lam * x_e + (1 - lam) * x_u, lam * x_u_perm + (1 - lam) * x_u], -2)
        c_loss = disc_loss(c_e, c_u) + args.grad_penalty * gradient_penalty(disc, x_mix)
        # policy: importance-weighted BC on the union, weights from this forward pass (detached)
        w = importance_weights(c_u, args.version)
        p_loss = weighted_nll(actor.log_prob(obs[iu], act[iu]).sum(-1), w, args.tau)
        disc_opt.zero_grad()
        actor_opt.zero_grad()
        (c_loss + p_loss).sum().backward()  # disjoint parameters; replica k's slice of each gradient is its own loss's
        disc_opt.step()
        actor_opt.step()
        if (args.eval_every and step % args.eval_every == 0) or step == args.total_steps:
            rets = []
            for k in range(R):
                with streams.use(k):  # an evaluation builds layers from torch's generator, as the single run's does
                    policy_k = actor if R == 1 else load_replica(actors[k], actor, k)
                    rets.append(in_training_eval(policy_k, norm, spec, args.eval_episodes, args.eval_seed))
            w_norm = w / w.mean(-1, keepdim=True)
            cols = {"disc_loss": values(c_loss), "policy_loss": values(p_loss),
                    "d_expert": values(torch.sigmoid(c_e).mean(-1)), "d_union": values(torch.sigmoid(c_u).mean(-1)),
                    "weight_mean": values(w.mean(-1)), "weight_max": values(w.max(-1).values),
                    "ess_frac": values(w_norm.sum(-1) ** 2 / (w_norm ** 2).sum(-1) / B), "eval_return": rets}
            log_replicas(logs, progs, runs, step, cols, method)  # stops at a non-finite value
            line.update(step, {name: float(np.mean(col)) for name, col in cols.items()}, force=True)
        else:
            line.update(step, lambda: {"disc_loss": c_loss.mean().item(), "policy_loss": p_loss.mean().item()})
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
    results = [{"seed": a.seed, "log": logs[k]} for k, a in enumerate(runs)]
    return {"method": method, **results[0]} if R == 1 else {"method": method, "runs": results}


if __name__ == "__main__":
    cli.run(main, Args)
