"""Discriminator-weighted behavior cloning (DWBC, Xu et al. 2022; OILCA Eq. 5–6). On a raw dataset this is the
DWBC baseline; on an augmented dataset (augment.py) it is OILCA.

Discriminator d(s, a, n(log π)) ∈ [0.1, 0.9] (official DWBC): two input branches, Linear(s‖a → 128) and
Linear(n(log π) → 128) with n(x) = (clip(x, -20, 10) + 20) / 30 per action dimension and log π detached, then
Linear 256 → 256 → 1, sigmoid, clipped to [0.1, 0.9]. It is trained with the positive-unlabelled loss (Eq. 5)
    L_d = E_E[-log d] + E_U[-log(1 - d)] / η - E_E[-log(1 - d)]            (`--no-pu`: plain E_E[-log d] + E_U[-log(1-d)])
every `d_update_every` policy steps. The policy minimises (Eq. 6, with ℓ = -Σ_j log π_j(a_j | s) and d detached)
    L_π = α E_E[ℓ] - E_E[ℓ (η / (d(1-d)) + 1)] + E_U[ℓ (1 / (1 - d̃) - 1)],   d̃ = d if d ≥ 0.5 else 0,
i.e. expert rows are weighted α - 1 - η/(d(1-d)) and unlabelled rows d̃/(1-d̃). Requires α ≥ 1 + η/0.09 so that
the expert weight stays positive for every d in [0.1, 0.9] (a warning is printed otherwise).

Data: the expert side of every batch is D_E: the collected expert rows plus, in an augmented dataset, the
counterfactual rows (uniformly over their union, or a fixed share with `--aug-frac`); the unlabelled side is D_U,
the collected non-expert rows. Batches of `batch_size` from each side. Observations are standardised with the
mean/std of all training rows (+1e-3).

Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (losses, d on both sides, eval
return; a row per evaluation, written as the run goes), args.json, and with --tensorboard event files in tb/. policy.pt
and args.json are staged beside --out-dir and moved in together when the run completes (contract.RunFolder); a run
whose losses turn NaN or inf stops and writes nothing.

Seeds side by side: `--seeds 0 1 2 3 4` trains one independent replica per seed in this process, the R actors and
the R discriminators each stacked into one batched network (policy.stack_replicas). Replica k is initialised as
`--seed k` alone is (torch.manual_seed(k), then its actor and discriminator), draws its minibatches from its own
default_rng(k) with the same calls, and has its own slice of the Adam moments (and its own η with --adaptive-eta),
so it follows the single run up to float rounding; it writes the files of that run to `--out-dir` and
`--final-eval` with `{seed}` replaced by k. One seed (the default) runs the plain loop below, unchanged.
"""

import os
import sys
from dataclasses import asdict, dataclass
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import tyro

import checks
import contract
import envs
from policy import (Actor, Normalizer, artifact, cpu_threads, final_eval, final_eval_paths, in_training_eval,
                    load_replica, minibatch_generator, replica_args, stack_replicas)
from progress import Progress

LOG_PI_MIN, LOG_PI_MAX, D_MIN, D_MAX = -20.0, 10.0, 0.1, 0.9


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset: raw (DWBC) or augmented by augment.py (OILCA)"""
    out_dir: str = "runs/dwbc"
    """folder for policy.pt, progress.csv and args.json"""
    method: Optional[str] = None
    """label stored in the policy (default: oilca on an augmented dataset, else dwbc)"""
    seed: int = 0
    """seed of the initialisation and minibatches"""
    seeds: Optional[Tuple[int, ...]] = None
    """train one replica per seed side by side in this process (e.g. `--seeds 0 1 2 3 4`); --out-dir and
    --final-eval then need `{seed}`, which becomes each replica's seed"""
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
    """share of augmented rows in the expert batch (default: uniform over collected + augmented expert rows)"""
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
    eval_every: int = 1_000
    """evaluate the policy every this many steps (0: only at the end), for learning curves"""
    eval_episodes: int = 20
    """episodes per evaluation during training (training classes of c; 0: no rollout, eval_return NaN)"""
    eval_seed: int = 50_000
    """seed of the evaluations during training (apart from the final evaluation seeds)"""
    final_eval: Optional[str] = None
    """after training, evaluate the saved policy (as evaluate.py does) and write its JSON here; `{split}` becomes train/heldout"""
    final_eval_episodes: int = 100
    """episodes per split of that final evaluation"""
    act_eps: float = 1e-6
    """actions are clipped to ±(1 - act_eps) before atanh in the actor's likelihood (policy.Actor)"""
    threads: Optional[int] = None
    """torch CPU threads (default: every core this process may use)"""
    cuda: bool = False
    """use CUDA when available (data and minibatch sampling then stay on the GPU)"""
    tensorboard: bool = False
    """also write TensorBoard event files to <out_dir>/tb"""
    loss_trace: int = 0
    """return the losses of the first this many steps (tests compare replicas with single runs)"""


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
    """Eq. 5: E_E[-log d] + E_U[-log(1-d)]/η - E_E[-log(1-d)] (PU), or plain cross-entropy. d [B] gives a scalar,
    stacked replicas' d [R, B] one loss per replica [R] (η a float or [R])."""
    if not pu:
        return (-torch.log(d_e)).mean(-1) + (-torch.log(1 - d_u)).mean(-1)
    return (-torch.log(d_e)).mean(-1) + (-torch.log(1 - d_u)).mean(-1) / eta - (-torch.log(1 - d_e)).mean(-1)


def policy_loss(log_pi_e, log_pi_u, d_e, d_u, alpha: float, eta):
    """Eq. 6 with ℓ = -Σ_j log π_j: α E_E[ℓ] - E_E[ℓ(η/(d(1-d)) + 1)] + E_U[ℓ(1/(1-d̃) - 1)], d detached. Inputs
    [B, …] give a scalar, stacked replicas' [R, B, …] one loss per replica [R] (η a float or [R, 1])."""
    d_e, d_u = d_e.detach(), d_u.detach()
    d_u = torch.where(d_u < 0.5, torch.zeros_like(d_u), d_u)
    nll_e, nll_u = -log_pi_e.sum(-1), -log_pi_u.sum(-1)
    return (alpha * nll_e.mean(-1) - (nll_e * (eta / (d_e * (1 - d_e)) + 1)).mean(-1)
            + (nll_u * (1 / (1 - d_u) - 1)).mean(-1))


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    checks.trainer(args, alpha=checks.Real(1), eta=checks.OPEN_UNIT, d_update_every=checks.COUNT, aug_frac=checks.UNIT)
    runs = replica_args(args)  # one Args per seed, as `--seed k` alone would have them
    data = contract.load_dataset(args.dataset)
    contract.require_expert(data, args.dataset)
    meta = data["metadata"]
    spec = envs.env_spec(meta)
    contract.check_paths({"--dataset": args.dataset}, folders={"--out-dir": [a.out_dir for a in runs]},
                         files={"--final-eval": [p for a in runs for p in final_eval_paths(a.final_eval, spec)]})
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    method = args.method or ("oilca" if aug.any() else "dwbc")
    if args.alpha < 1 + args.eta / (D_MIN * (1 - D_MIN)):
        print(f"warning: alpha={args.alpha} < 1 + eta/0.09 = {1 + args.eta / 0.09:.2f}: expert weights can be negative")
    torch.set_num_threads(cpu_threads(args.threads))
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    exp_rows = np.flatnonzero(data["expert"] & ~aug)
    aug_rows = np.flatnonzero(aug)
    unl_rows = np.flatnonzero(~data["expert"] & ~aug)
    if len(unl_rows) == 0:
        raise ValueError(f"{args.dataset}: D_U is empty (every collected row is expert)")
    if args.aug_frac is not None and not (0 <= args.aug_frac <= 1 and len(aug_rows)):
        raise ValueError("--aug-frac needs a value in [0, 1] and an augmented dataset")
    train_rows = np.concatenate([exp_rows, aug_rows, unl_rows])
    norm = Normalizer(data["observations"][train_rows], meta["action_low"], meta["action_high"])
    obs = torch.as_tensor(norm.obs(data["observations"]), device=device)
    act = torch.as_tensor(norm.act(data["actions"]), device=device)
    expert_pool = np.concatenate([exp_rows, aug_rows])
    pools = {name: torch.as_tensor(rows, device=device) for name, rows in
             (("expert", expert_pool), ("collected", exp_rows), ("augmented", aug_rows), ("unlabelled", unl_rows))}
    B = args.batch_size

    def draw(rng: np.random.Generator, gen: Optional[torch.Generator]) -> torch.Tensor:
        """Row indices [expert batch; unlabelled batch] [2B]: numpy's rng on the CPU, the device generator on a GPU."""
        if gen is None:
            if args.aug_frac is None:
                expert = rng.choice(expert_pool, B)
            else:
                n_aug = rng.binomial(B, args.aug_frac)
                expert = np.concatenate([rng.choice(aug_rows, n_aug), rng.choice(exp_rows, B - n_aug)])
            return torch.as_tensor(np.concatenate([expert, rng.choice(unl_rows, B)]), device=device)

        def pick(pool):
            return pools[pool][torch.randint(len(pools[pool]), (B,), generator=gen, device=device)]

        if args.aug_frac is None:
            expert = pick("expert")
        else:  # each row augmented with probability aug_frac: Binomial(B, aug_frac) of them, as on the CPU
            is_aug = torch.rand(B, generator=gen, device=device) < args.aug_frac
            expert = torch.where(is_aug, pick("augmented"), pick("collected"))
        return torch.cat([expert, pick("unlabelled")])

    def new_networks(seed: int):
        torch.manual_seed(seed)
        return (Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps),
                Discriminator(meta["obs_dim"], meta["act_dim"]))

    def is_eval_step(step: int) -> bool:
        return bool(args.eval_every and step % args.eval_every == 0) or step == args.total_steps

    def finish(actor: Actor, a: Args, run: contract.RunFolder) -> None:
        contract.save_policy(os.path.join(run.staging, "policy.pt"), artifact(
            actor, norm, method=method, seed=a.seed, env=spec, dataset_fingerprint=contract.fingerprint(data),
            dataset=a.dataset, train_args=asdict(a),
            augmented_de_over_du=(len(exp_rows) + len(aug_rows)) / len(unl_rows)))
        contract.save_json(os.path.join(run.staging, "args.json"), asdict(a))
        run.commit()  # policy.pt and args.json appear in --out-dir together, beside the run's progress.csv
        if a.final_eval:
            final_eval(os.path.join(a.out_dir, "policy.pt"), spec, a.final_eval_episodes, a.final_eval)

    print(f"{method}: D_E {len(exp_rows)} collected + {len(aug_rows)} augmented rows, D_U {len(unl_rows)} rows ({args.dataset})"
          + (f", seeds {[a.seed for a in runs]} side by side" if len(runs) > 1 else ""))

    if len(runs) == 1:  # one seed: the plain loop
        a = runs[0]
        actor, disc = (net.to(device) for net in new_networks(a.seed))
        rng, gen = np.random.default_rng(a.seed), minibatch_generator(a.seed, device)
        actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr, weight_decay=args.actor_weight_decay)
        disc_opt = torch.optim.Adam(disc.parameters(), lr=args.disc_lr)
        eta = 0.3 if args.adaptive_eta else args.eta
        run = contract.RunFolder(a.out_dir)  # a fresh --out-dir for the logs; the results are staged beside it
        prog = Progress(method, args.total_steps, a.out_dir, tensorboard=args.tensorboard)
        log, trace = [], {"policy_loss": [], "d_loss": []}
        for step in range(1, args.total_steps + 1):
            # one forward pass over [expert batch; unlabelled batch] (the networks treat rows independently)
            idx = draw(rng, gen)
            log_pi = actor.log_prob(obs[idx], act[idx])
            d = disc(obs[idx], act[idx], normalize_log_pi(log_pi))
            log_pi_e, log_pi_u, d_e, d_u = log_pi[:B], log_pi[B:], d[:B], d[B:]
            if step % args.d_update_every == 0:  # the discriminator steps on its own schedule
                d_loss = discriminator_loss(d_e, d_u, eta, args.pu)
                disc_opt.zero_grad()
                d_loss.backward()
                disc_opt.step()
                if step <= args.loss_trace:
                    trace["d_loss"].append(d_loss.detach())
                if args.adaptive_eta:  # a float on the CPU (as before), a tensor on the GPU (no host round trip)
                    share = (d_e > 0.5).float().mean()
                    eta = share.clamp(0.2, 0.8) if gen is not None else float(np.clip(share.item(), 0.2, 0.8))
            p_loss = policy_loss(log_pi_e, log_pi_u, d_e, d_u, args.alpha, eta)
            actor_opt.zero_grad()
            p_loss.backward()
            actor_opt.step()
            if step <= args.loss_trace:
                trace["policy_loss"].append(p_loss.detach())
            if is_eval_step(step):
                ret = in_training_eval(actor, norm, spec, args.eval_episodes, args.eval_seed)
                row = {"step": step, "policy_loss": p_loss.item(), "d_loss": discriminator_loss(d_e, d_u, eta, args.pu).item(),
                       "d_expert": d_e.mean().item(), "d_unlabelled": d_u.mean().item(), "eta": float(eta), "eval_return": ret}
                log.append(row)
                checks.finite_losses(row, step, method)
                prog.log(row)
                prog.update(step, {k: v for k, v in row.items() if k != "step"}, force=True)
            else:
                prog.update(step, lambda: {"policy_loss": p_loss.item()})
        prog.close()
        finish(actor.cpu(), a, run)
        return {"method": method, "log": log, "loss_trace": {k: [float(x) for x in v] for k, v in trace.items()}}

    # several seeds: R replicas side by side, each with its own initialisation, minibatches, Adam moments and η
    nets = [new_networks(a.seed) for a in runs]  # replica k built as `--seed k` builds its actor and discriminator
    actor, disc = stack_replicas([n[0] for n in nets]).to(device), stack_replicas([n[1] for n in nets]).to(device)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr, weight_decay=args.actor_weight_decay)
    disc_opt = torch.optim.Adam(disc.parameters(), lr=args.disc_lr)
    rngs = [np.random.default_rng(a.seed) for a in runs]
    gens = [minibatch_generator(a.seed, device) for a in runs]
    R = len(runs)
    eta = torch.full((R,), 0.3, device=device) if args.adaptive_eta else args.eta  # [R] or a float
    line = Progress(f"{method} x{R}", args.total_steps)  # one line for the process: means over replicas
    folders = [contract.RunFolder(a.out_dir) for a in runs]
    progs = [Progress(method, args.total_steps, a.out_dir, tensorboard=args.tensorboard) for a in runs]
    logs, trace = [[] for _ in runs], {"policy_loss": [], "d_loss": []}
    for step in range(1, args.total_steps + 1):
        idx = torch.stack([draw(r, g) for r, g in zip(rngs, gens)])  # [R, 2B]
        log_pi = actor.log_prob(obs[idx], act[idx])  # [R, 2B, act_dim]
        d = disc(obs[idx], act[idx], normalize_log_pi(log_pi))  # [R, 2B]
        log_pi_e, log_pi_u, d_e, d_u = log_pi[:, :B], log_pi[:, B:], d[:, :B], d[:, B:]
        if step % args.d_update_every == 0:
            d_loss = discriminator_loss(d_e, d_u, eta, args.pu)  # [R]
            disc_opt.zero_grad()
            d_loss.sum().backward()  # replica k's slice of the gradient is ∂d_loss_k alone
            disc_opt.step()
            if step <= args.loss_trace:
                trace["d_loss"].append(d_loss.detach())
            if args.adaptive_eta:
                eta = (d_e > 0.5).float().mean(-1).clamp(0.2, 0.8)
        p_loss = policy_loss(log_pi_e, log_pi_u, d_e, d_u, args.alpha, eta[:, None] if args.adaptive_eta else eta)
        actor_opt.zero_grad()
        p_loss.sum().backward()
        actor_opt.step()
        if step <= args.loss_trace:
            trace["policy_loss"].append(p_loss.detach())
        if is_eval_step(step):
            rets = [in_training_eval(load_replica(n[0], actor, k), norm, spec, args.eval_episodes, args.eval_seed)
                    for k, n in enumerate(nets)]
            cols = {"policy_loss": p_loss.tolist(), "d_loss": discriminator_loss(d_e, d_u, eta, args.pu).tolist(),
                    "d_expert": d_e.mean(-1).tolist(), "d_unlabelled": d_u.mean(-1).tolist(),
                    "eta": eta.tolist() if args.adaptive_eta else [eta] * R, "eval_return": rets}
            for k in range(R):
                logs[k].append({"step": step, **{name: col[k] for name, col in cols.items()}})
                checks.finite_losses(logs[k][-1], step, f"{method} (seed {runs[k].seed})")
                progs[k].log(logs[k][-1])
            line.update(step, {name: float(np.mean(col)) for name, col in cols.items()}, force=True)
        else:
            line.update(step, lambda: {"policy_loss": p_loss.mean().item()})
    traces = {name: (torch.stack(v).T.tolist() if v else [[] for _ in runs]) for name, v in trace.items()}
    for k, a in enumerate(runs):
        progs[k].close()
        finish(load_replica(nets[k][0], actor, k), a, folders[k])
    return {"method": method, "runs": [{"seed": a.seed, "log": logs[k], "loss_trace": {name: t[k] for name, t in traces.items()}}
                                       for k, a in enumerate(runs)]}


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except (contract.ContractError, ValueError) as e:
        sys.exit(f"error: {e}")
