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
`--final-eval` with `{seed}` replaced by k. One seed (the default) runs the same loop on the plain networks, exactly
as before seeds could share a process. `{seed}` in `--dataset` gives each replica its own dataset (OILCA's
per-seed augmentations); replica k then follows the run with `--seed k` on that dataset.

Budgets and GPUs: `--checkpoints 5000 20000` also saves the policy at those steps (`policy_step<N>.pt`: the N-step
run's policy, bit for bit on a CPU); `--cuda --cuda-graph` replays each step as a CUDA graph (policy.GraphedStep).
"""

import copy
import os
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn as nn

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from oilca.policy import (Actor, GraphedStep, IndexChunks, Normalizer, artifact, check_checkpoints, checkpoint_name,
                    cpu_threads, final_eval, final_eval_paths, in_training_eval, load_replica, log_replicas,
                    minibatch_generator, recorded_args, replica_args, replica_values, stack_replicas)
from oilca.progress import Progress

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
    """use CUDA when available (data and minibatch sampling then stay on the GPU: each replica's device generator
    draws the indices of 1,000 steps at a time)"""
    cuda_graph: bool = False
    """with --cuda on a GPU: replay each training step as a CUDA graph (a step of these small networks is
    otherwise bound by kernel launches); the same steps as without it, up to float rounding; ignored on a CPU"""
    checkpoints: Tuple[int, ...] = ()
    """also save the policy at these steps (each below --total-steps) as policy_step<N>.pt in --out-dir: one run
    gives the policies of several budgets"""
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
    checkpoints = check_checkpoints(args.checkpoints, args.total_steps)
    runs = replica_args(args)  # one Args per seed, as `--seed k` alone would have them
    paths = list(dict.fromkeys(a.dataset for a in runs))  # one dataset, or one per seed (`{seed}` in --dataset)
    sets = {path: load_rows(path, args) for path in paths}
    first = sets[paths[0]]
    meta, spec = first["meta"], first["spec"]
    for path in paths[1:]:
        if (sets[path]["meta"]["obs_dim"], sets[path]["meta"]["act_dim"], sets[path]["spec"]["env_id"]) != \
                (meta["obs_dim"], meta["act_dim"], spec["env_id"]):
            raise ValueError(f"--dataset {path}: another env or shape than {paths[0]} (one --dataset per seed must "
                             f"be the same benchmark)")
    contract.check_paths({"--dataset": paths}, folders={"--out-dir": [a.out_dir for a in runs]},
                         files={"--final-eval": [p for a in runs for p in final_eval_paths(a.final_eval, spec)]})
    methods = {("oilca" if d["augmented_rows"].size else "dwbc") for d in sets.values()}
    method = args.method or ("oilca" if "oilca" in methods else "dwbc")
    if args.alpha < 1 + args.eta / (D_MIN * (1 - D_MIN)):
        print(f"warning: alpha={args.alpha} < 1 + eta/0.09 = {1 + args.eta / 0.09:.2f}: expert weights can be negative")
    torch.set_num_threads(cpu_threads(args.threads))
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    graphed = args.cuda_graph and device.type == "cuda"
    if args.cuda_graph and args.adaptive_eta:
        raise ValueError("--cuda-graph: not with --adaptive-eta (its η changes inside the step)")
    for d in sets.values():
        d["obs"] = torch.as_tensor(d["norm"].obs(d["observations"]), device=device)
        d["act"] = torch.as_tensor(d["norm"].act(d["actions"]), device=device)
        d["pools"] = {name: torch.as_tensor(d[name + "_rows"], device=device)
                      for name in ("expert", "collected", "augmented", "unlabelled")}
    B = args.batch_size

    def draw(d: dict, rng: np.random.Generator, gen: Optional[torch.Generator], n: Optional[int] = None) -> torch.Tensor:
        """Row indices [expert batch; unlabelled batch] [2B] of dataset d: numpy's rng on the CPU, the device
        generator on a GPU; with n (--cuda-graph) the indices of n steps at once, [n, 2B]."""
        if gen is None:
            if args.aug_frac is None:
                expert = rng.choice(d["expert_rows"], B)
            else:
                n_aug = rng.binomial(B, args.aug_frac)
                expert = np.concatenate([rng.choice(d["augmented_rows"], n_aug), rng.choice(d["collected_rows"], B - n_aug)])
            return torch.as_tensor(np.concatenate([expert, rng.choice(d["unlabelled_rows"], B)]), device=device)
        shape = (B,) if n is None else (n, B)

        def pick(pool):
            return d["pools"][pool][torch.randint(len(d["pools"][pool]), shape, generator=gen, device=device)]

        if args.aug_frac is None:
            expert = pick("expert")
        else:  # each row augmented with probability aug_frac: Binomial(B, aug_frac) of them, as on the CPU
            is_aug = torch.rand(shape, generator=gen, device=device) < args.aug_frac
            expert = torch.where(is_aug, pick("augmented"), pick("collected"))
        return torch.cat([expert, pick("unlabelled")], -1)

    def new_networks(seed: int):
        torch.manual_seed(seed)
        return (Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps),
                Discriminator(meta["obs_dim"], meta["act_dim"]))

    def is_eval_step(step: int) -> bool:
        return bool(args.eval_every and step % args.eval_every == 0) or step == args.total_steps

    def save(actor: Actor, a: Args, path: str, **extra) -> None:
        d = sets[a.dataset]
        contract.save_policy(path, artifact(
            actor, d["norm"], method=method, seed=a.seed, env=spec, dataset_fingerprint=contract.fingerprint(d["data"]),
            dataset=a.dataset, train_args=recorded_args(a),
            augmented_de_over_du=(len(d["collected_rows"]) + len(d["augmented_rows"])) / len(d["unlabelled_rows"]),
            **extra))

    def finish(actor: Actor, a: Args, run: contract.RunFolder) -> None:
        save(actor, a, os.path.join(run.staging, "policy.pt"))
        contract.save_json(os.path.join(run.staging, "args.json"), recorded_args(a))
        run.commit()  # policy.pt and args.json appear in --out-dir together, beside the run's progress.csv
        if a.final_eval:
            final_eval(os.path.join(a.out_dir, "policy.pt"), spec, a.final_eval_episodes, a.final_eval)

    def adam(params, lr, **kw):
        return torch.optim.Adam(params, lr=lr, **kw, **({"capturable": True} if graphed else {}))

    for path, d in sets.items():
        print(f"{method}: D_E {len(d['collected_rows'])} collected + {len(d['augmented_rows'])} augmented rows, "
              f"D_U {len(d['unlabelled_rows'])} rows ({path})")
    if len(runs) > 1:
        print(f"{method}: seeds {[a.seed for a in runs]} side by side" + (", one dataset per seed" if len(paths) > 1 else "")
              + (", each step a CUDA graph" if graphed else ""))

    # R replicas (R = 1: the plain networks) with their own initialisation, minibatches, Adam moments and η
    R = len(runs)
    nets = [new_networks(a.seed) for a in runs]  # replica k built as `--seed k` builds its actor and discriminator
    if R == 1:
        actor, disc = (net.to(device) for net in nets[0])
    else:
        actor, disc = stack_replicas([n[0] for n in nets]).to(device), stack_replicas([n[1] for n in nets]).to(device)
    actor_opt = adam(actor.parameters(), args.actor_lr, weight_decay=args.actor_weight_decay)
    disc_opt = adam(disc.parameters(), args.disc_lr)
    rngs = [np.random.default_rng(a.seed) for a in runs]
    gens = [minibatch_generator(a.seed, device) for a in runs]
    data_of = [sets[a.dataset] for a in runs]
    if R == 1:
        eta = 0.3 if args.adaptive_eta else args.eta
    else:
        eta = torch.full((R,), 0.3, device=device) if args.adaptive_eta else args.eta  # [R] or a float
    if len(paths) == 1:  # every replica reads the same rows
        obs, act = first["obs"], first["act"]
        rows = lambda idx: (obs[idx], act[idx])  # noqa: E731
    else:  # replica k's rows from its own dataset: [R, N_max, dim], gathered per replica
        n_max = max(len(d["obs"]) for d in data_of)
        pad = lambda x: torch.cat([x, x.new_zeros((n_max - len(x),) + x.shape[1:])])  # noqa: E731
        obs, act = torch.stack([pad(d["obs"]) for d in data_of]), torch.stack([pad(d["act"]) for d in data_of])
        ridx = torch.arange(R, device=device)[:, None]
        rows = lambda idx: (obs[ridx, idx], act[ridx, idx])  # noqa: E731

    def draw_all() -> torch.Tensor:
        idx = [draw(d, r, g) for d, r, g in zip(data_of, rngs, gens)]
        return idx[0] if R == 1 else torch.stack(idx)  # [2B] or [R, 2B]

    chunks = IndexChunks(lambda n: torch.stack([draw(d, r, g, n) for d, r, g in zip(data_of, rngs, gens)], 1)
                         if R > 1 else draw(data_of[0], rngs[0], gens[0], n)) if device.type == "cuda" else None
    state = {"eta": eta}

    def step_fn(idx: torch.Tensor, update_disc: bool):
        """One DWBC step on the minibatch rows idx: one forward pass over [expert batch; unlabelled batch] (the
        networks treat rows independently), the discriminator's step when due, then the policy's."""
        o, a_ = rows(idx)
        log_pi = actor.log_prob(o, a_)
        d = disc(o, a_, normalize_log_pi(log_pi))
        log_pi_e, log_pi_u, d_e, d_u = log_pi[..., :B, :], log_pi[..., B:, :], d[..., :B], d[..., B:]
        d_loss = None
        if update_disc:  # the discriminator steps on its own schedule
            d_loss = discriminator_loss(d_e, d_u, state["eta"], args.pu)
            disc_opt.zero_grad()
            d_loss.sum().backward()  # replica k's slice of the gradient is ∂d_loss_k alone
            disc_opt.step()
            if args.adaptive_eta:  # a float on the CPU with one seed (as before), else a tensor (no host round trip)
                share = (d_e > 0.5).float().mean(-1)
                state["eta"] = (share.clamp(0.2, 0.8) if R > 1 or device.type == "cuda"
                                else float(np.clip(share.item(), 0.2, 0.8)))
        eta_now = state["eta"][:, None] if (R > 1 and args.adaptive_eta) else state["eta"]
        p_loss = policy_loss(log_pi_e, log_pi_u, d_e, d_u, args.alpha, eta_now)
        actor_opt.zero_grad()
        p_loss.sum().backward()
        actor_opt.step()
        return p_loss, d_loss, d_e, d_u

    step_once = GraphedStep(step_fn, graphed)
    folders = [contract.RunFolder(a.out_dir) for a in runs]  # fresh --out-dirs for the logs; results staged beside
    progs = [Progress(method, args.total_steps, a.out_dir, tensorboard=args.tensorboard) for a in runs]
    line = progs[0] if R == 1 else Progress(f"{method} x{R}", args.total_steps)  # one line: means over replicas
    logs, trace = [[] for _ in runs], {"policy_loss": [], "d_loss": []}
    for step in range(1, args.total_steps + 1):
        idx = chunks.next() if chunks is not None else draw_all()
        p_loss, d_loss, d_e, d_u = step_once(idx, step % args.d_update_every == 0)
        if step <= args.loss_trace:
            trace["policy_loss"].append(p_loss.detach().clone())
            if d_loss is not None:
                trace["d_loss"].append(d_loss.detach().clone())
        if step in checkpoints:  # this budget's policy, beside the final one (the run goes on unchanged)
            for k, a in enumerate(runs):
                net = actor if R == 1 else load_replica(nets[k][0], actor, k)
                save(copy.deepcopy(net).cpu(), a, os.path.join(folders[k].staging, checkpoint_name(step)),
                     checkpoint_step=step)
        if is_eval_step(step):
            eta_now = state["eta"]
            rets = [in_training_eval(actor if R == 1 else load_replica(n[0], actor, k), data_of[k]["norm"], spec,
                                     args.eval_episodes, args.eval_seed) for k, n in enumerate(nets)]
            d_now = discriminator_loss(d_e, d_u, eta_now, args.pu)
            cols = {"policy_loss": replica_values(p_loss), "d_loss": replica_values(d_now),
                    "d_expert": replica_values(d_e.mean(-1)), "d_unlabelled": replica_values(d_u.mean(-1)),
                    "eta": (replica_values(eta_now) if torch.is_tensor(eta_now) else [float(eta_now)] * R),
                    "eval_return": rets}
            log_replicas(logs, progs, runs, step, cols, method)
            if R > 1:
                line.update(step, {name: float(np.mean(col)) for name, col in cols.items()}, force=True)
            else:
                line.update(step, {k: v for k, v in logs[0][-1].items() if k != "step"}, force=True)
        else:
            line.update(step, lambda: {"policy_loss": p_loss.mean().item()})
    traces = {name: (torch.stack(v).reshape(len(v), -1).T.tolist() if v else [[] for _ in runs]) for name, v in trace.items()}
    for k, a in enumerate(runs):
        progs[k].close()
        finish(actor.cpu() if R == 1 else load_replica(nets[k][0], actor, k), a, folders[k])
    if R == 1:
        return {"method": method, "log": logs[0], "loss_trace": {name: t[0] for name, t in traces.items()}}
    return {"method": method, "runs": [{"seed": a.seed, "log": logs[k], "loss_trace": {name: t[k] for name, t in traces.items()}}
                                       for k, a in enumerate(runs)]}


def load_rows(path: str, args: Args) -> dict:
    """A dataset and its row sets: collected expert rows (D_E), augmented rows, D_U; the normaliser of its training rows."""
    data = envs.load_dataset(path)
    contract.require_expert(data, path)
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    exp_rows, aug_rows = np.flatnonzero(data["expert"] & ~aug), np.flatnonzero(aug)
    unl_rows = np.flatnonzero(~data["expert"] & ~aug)
    if len(unl_rows) == 0:
        raise ValueError(f"{path}: D_U is empty (every collected row is expert)")
    if args.aug_frac is not None and not (0 <= args.aug_frac <= 1 and len(aug_rows)):
        raise ValueError("--aug-frac needs a value in [0, 1] and an augmented dataset")
    meta = data["metadata"]
    train_rows = np.concatenate([exp_rows, aug_rows, unl_rows])
    return {"data": data, "meta": meta, "spec": envs.env_spec(meta),
            "norm": Normalizer(data["observations"][train_rows], meta["action_low"], meta["action_high"]),
            "observations": data["observations"], "actions": data["actions"],
            "collected_rows": exp_rows, "augmented_rows": aug_rows, "unlabelled_rows": unl_rows,
            "expert_rows": np.concatenate([exp_rows, aug_rows])}


if __name__ == "__main__":
    cli.run(main, Args)
