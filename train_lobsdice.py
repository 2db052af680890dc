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
cost and ν without a last-layer bias; the policy is the tanh-Gaussian actor of policy.py. Observations are
standardised with D_U's mean/std (+1e-3) (the official "imperfect" data); initial states are each episode's first row.
On an augmented dataset the counterfactual rows join the expert (s, s') side and the union (method `lobsdice_ca`).

Input: a dataset `.npz` (docs/contract.md): observations, next_observations, actions (union only), expert, episode_ids.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (losses, cost on both sides,
weight spread, eval return; a row per evaluation, written as it goes), args.json, and with --tensorboard the event
files in tb/. Progress: a line at most every ~10 s (step, steps/s, ETA, last losses), besides every evaluation's.

Seeds side by side: `--seeds 0 1 2 3 4` trains one independent replica per seed in this process, the cost, ν and
the actor each stacked into one batched network (policy.build_replicas), every loss one value per replica. Replica
k is initialised as `--seed k` alone is, draws its rows from default_rng(k) and its mixing noise from its own
stream of torch's generator (policy.TorchStreams), and has its own slice of the Adam moments, so it follows the
single run up to float rounding; it writes that run's files to `--out-dir` and `--final-eval` with `{seed}`
replaced by k. One seed (the default) runs the same loop on plain networks.
"""

import os
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

EPS2 = 1e-3  # inside the cost's log, as in the official code


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset"""
    out_dir: str = "runs/lobsdice"
    """folder for policy.pt, progress.csv and args.json"""
    method: Optional[str] = None
    """label stored in the policy (default: lobsdice_ca on an augmented dataset, else lobsdice)"""
    seed: int = 0
    """seed of the initialisation and minibatches"""
    seeds: Optional[Tuple[int, ...]] = None
    """train one replica per seed side by side in this process (e.g. `--seeds 0 1 2 3 4`); --out-dir and
    --final-eval then need `{seed}`, which becomes each replica's seed"""
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


def cost_of_logit(c):
    """r = log(1 / (σ(c) + 1e-3) - 1 + 1e-3) ≈ -c: low where the transition looks like the expert's."""
    return torch.log(1 / (torch.sigmoid(c) + EPS2) - 1 + EPS2)


def cost_loss(c_e, c_u):
    """GAN minimax discriminator loss, expert = 1, union = 0 (without the gradient penalty)."""
    return nn.functional.softplus(-c_e).mean(-1) + nn.functional.softplus(c_u).mean(-1)


def gradient_penalty(net, x, target_norm: Optional[float], transform=None):
    """E[(‖∇_x f(x)‖ - target)²], or E[‖∇_x f(x)‖²] when target_norm is None (f = transform(net(x)))."""
    x = x.detach().requires_grad_(True)
    y = net(x)
    y = transform(y) if transform is not None else y
    grad, = torch.autograd.grad(y.sum(), x, create_graph=True)
    norm = (grad + 1e-7).norm(dim=-1)  # + float32 eps as the official code
    return ((norm - target_norm) ** 2).mean(-1) if target_norm is not None else (norm ** 2).mean(-1)


def advantage(r_u, nu_s, nu_next, gamma: float):
    """A(s, s') = -sg(r) + γ ν(s') - ν(s)."""
    return -r_u.detach() + gamma * nu_next - nu_s


def nu_loss(nu_init, adv, gamma: float, alpha: float):
    """Closed-form LobsDICE objective (1 - γ) E[ν(s_0)] + (1 + α) logsumexp(A / (1 + α)) (no gradient penalty)."""
    return (1 - gamma) * nu_init.mean(-1) + (1 + alpha) * torch.logsumexp(adv / (1 + alpha), -1)


def policy_weights(adv, alpha: float):
    """w = exp((A - max A) / (1 + α)), normalised to mean 1, detached."""
    w = torch.exp((adv - adv.max(-1, keepdim=True).values) / (1 + alpha)).detach()
    return w / w.mean(-1, keepdim=True)


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    checks.trainer(args, alpha=checks.NON_NEGATIVE, gamma=checks.Real(0, 1, high_open=True), cost_gp=checks.NON_NEGATIVE,
                   nu_gp=checks.NON_NEGATIVE)
    runs = replica_args(args)  # one Args per seed, as `--seed k` alone would have them
    data = envs.load_dataset(args.dataset)
    contract.require_expert(data, args.dataset)
    meta = data["metadata"]
    spec = envs.env_spec(meta)
    contract.check_paths({"--dataset": args.dataset}, folders={"--out-dir": [a.out_dir for a in runs]},
                         files={"--final-eval": [p for a in runs for p in final_eval_paths(a.final_eval, spec)]})
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    method = args.method or ("lobsdice_ca" if aug.any() else "lobsdice")
    exp_rows = np.flatnonzero(data["expert"])  # collected D_E and the counterfactual rows: only (s, s') is used
    unl_rows = np.flatnonzero(~data["expert"] & ~aug)
    if len(unl_rows) == 0:
        raise ValueError(f"{args.dataset}: D_U is empty (every collected row is expert)")
    ep = data["episode_ids"]
    init_rows = np.flatnonzero(~aug & (np.r_[True, ep[1:] != ep[:-1]]))  # first row of every episode
    torch.set_num_threads(cpu_threads(args.threads))
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    norm = Normalizer(data["observations"][unl_rows], meta["action_low"], meta["action_high"])
    obs = torch.as_tensor(norm.obs(data["observations"]), device=device)
    next_obs = torch.as_tensor(norm.obs(data["next_observations"]), device=device)
    act = torch.as_tensor(norm.act(data["actions"]), device=device)
    pools = {"expert": torch.as_tensor(exp_rows, device=device), "init": torch.as_tensor(init_rows, device=device)}
    obs_dim, act_dim, N, B, R = meta["obs_dim"], meta["act_dim"], len(obs), args.batch_size, len(runs)
    print(f"{method}: expert (s, s') {len(exp_rows)} rows ({aug.sum()} augmented), union {N} rows, "
          f"{len(init_rows)} initial states ({args.dataset})" + (f", seeds {[a.seed for a in runs]} side by side" if R > 1 else ""))

    # One seed trains plain networks on [B, …] batches; several seeds (--seeds) train R replicas side by side, every
    # network stacked (policy.build_replicas) on [R, B, …] batches and every loss one value per replica [R]. Replica k
    # draws its rows from numpy's default_rng(k) and its mixing noise from torch's generator as seeded by k
    # (policy.TorchStreams), or both from its device generator on a GPU, so it follows the run with --seed k alone.
    rngs = [np.random.default_rng(a.seed) for a in runs]
    gens = [minibatch_generator(a.seed, device) for a in runs]
    streams = TorchStreams([a.seed for a in runs])

    def draw(k: int):
        """Replica k's rows (expert, union, initial) [3B] and noise: mixing weights λ, λ2 [B, 1] and a permutation [B]."""
        gen = gens[k]
        if gen is None:  # the CPU: numpy's rng for rows, torch's global stream of the replica for the noise
            rows = [rngs[k].choice(exp_rows, B), rngs[k].integers(0, N, B), rngs[k].choice(init_rows, B)]
            with streams.use(k):
                lam, perm, lam2 = torch.rand(B, 1), torch.randperm(B), torch.rand(B, 1)
            return torch.as_tensor(np.concatenate(rows), device=device), lam.to(device), perm.to(device), lam2.to(device)

        def pick(pool):
            return pools[pool][torch.randint(len(pools[pool]), (B,), generator=gen, device=device)]

        rows = torch.cat([pick("expert"), torch.randint(0, N, (B,), generator=gen, device=device), pick("init")])
        return (rows, torch.rand(B, 1, generator=gen, device=device), torch.randperm(B, generator=gen, device=device),
                torch.rand(B, 1, generator=gen, device=device))

    cost, _ = build_replicas(lambda: critic(2 * obs_dim, args.hidden, args.n_hidden), streams, device)
    nu, _ = build_replicas(lambda: critic(obs_dim, args.hidden, args.n_hidden), streams, device)
    actor, actors = build_replicas(lambda: Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps), streams, device)
    cost_opt = torch.optim.Adam(cost.parameters(), lr=args.cost_lr)
    nu_opt = torch.optim.Adam(nu.parameters(), lr=args.nu_lr)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr)

    logs = [[] for _ in runs]
    folders = [contract.RunFolder(a.out_dir) for a in runs]  # fresh --out-dirs for the logs; results staged beside
    progs = [Progress(method, args.total_steps, out_dir=a.out_dir, tensorboard=args.tensorboard) for a in runs]
    line = progs[0] if R == 1 else Progress(f"{method} x{R}", args.total_steps)  # several seeds: means over replicas
    for step in range(1, args.total_steps + 1):
        drawn = [draw(k) for k in range(R)]
        rows, lam, perm, lam2 = drawn[0] if R == 1 else (torch.stack(x) for x in zip(*drawn))
        ie, iu, i0 = rows.split(B, -1)
        x_e = torch.cat([obs[ie], next_obs[ie]], -1)
        x_u = torch.cat([obs[iu], next_obs[iu]], -1)
        # cost: GAN loss + gradient penalty on r at interpolates
        c_e, c_u = cost(x_e).squeeze(-1), cost(x_u).squeeze(-1)
        x_u_perm = torch.take_along_dim(x_u, perm.unsqueeze(-1), dim=-2)  # x_u[perm], per replica
        x_mix = torch.cat([lam * x_e + (1 - lam) * x_u, lam * x_u_perm + (1 - lam) * x_u], -2)
        c_loss = cost_loss(c_e, c_u) + args.cost_gp * gradient_penalty(cost, x_mix, 1.0, cost_of_logit)
        # ν: closed-form objective on the union batch
        r_u = cost_of_logit(c_u)
        nu_all = nu(torch.cat([obs[i0], obs[iu], next_obs[iu]], -2)).squeeze(-1)
        adv = advantage(r_u, nu_all[..., B:2 * B], nu_all[..., 2 * B:], args.gamma)
        s_mix = torch.cat([obs[iu], lam2 * obs[ie] + (1 - lam2) * obs[iu], lam2 * next_obs[ie] + (1 - lam2) * next_obs[iu]], -2)
        n_loss = nu_loss(nu_all[..., :B], adv, args.gamma, args.alpha) + args.nu_gp * gradient_penalty(nu, s_mix, None)
        # policy: weighted BC on the union
        w = policy_weights(adv, args.alpha)
        p_loss = -(w * actor.log_prob(obs[iu], act[iu]).sum(-1)).mean(-1)
        for opt in (cost_opt, nu_opt, actor_opt):
            opt.zero_grad()
        (c_loss + n_loss + p_loss).sum().backward()  # the losses touch disjoint parameters (r is detached in A),
        for opt in (cost_opt, nu_opt, actor_opt):    # and replica k's slice of each gradient is its own loss's
            opt.step()
        if (args.eval_every and step % args.eval_every == 0) or step == args.total_steps:
            rets = []
            for k in range(R):
                with streams.use(k):  # an evaluation builds layers from torch's generator, as the single run's does
                    policy_k = actor if R == 1 else load_replica(actors[k], actor, k)
                    rets.append(in_training_eval(policy_k, norm, spec, args.eval_episodes, args.eval_seed))
            cols = {"cost_loss": values(c_loss), "nu_loss": values(n_loss), "policy_loss": values(p_loss),
                    "cost_expert": values(cost_of_logit(c_e).mean(-1)), "cost_union": values(r_u.mean(-1)),
                    "adv_mean": values(adv.mean(-1)), "weight_max": values(w.max(-1).values),
                    "ess_frac": values(w.sum(-1) ** 2 / (w ** 2).sum(-1) / B), "eval_return": rets}
            log_replicas(logs, progs, runs, step, cols, method)  # stops at a non-finite value
            line.update(step, {name: float(np.mean(col)) for name, col in cols.items()}, force=True)
        else:
            line.update(step, lambda: {"cost_loss": c_loss.mean().item(), "nu_loss": n_loss.mean().item(),
                                       "policy_loss": p_loss.mean().item()})
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
    return {"method": method, "log": logs[0]} if R == 1 else {"method": method, "runs": [
        {"seed": a.seed, "log": logs[k]} for k, a in enumerate(runs)]}


if __name__ == "__main__":
    cli.run(main, Args)
