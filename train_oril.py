"""ORIL baseline (Zolna et al. 2020, "Offline Learning from Demonstrations and Unlabeled Experience"): a reward
model learnt from positive (D_E) and unlabelled (D_U) transitions, then offline RL on the relabelled D_all. On an
augmented dataset (augment.py) this is ORIL+CA (OILCA Table 4): the counterfactual rows join D_E.

Stage 1, reward model R_ψ(s, a) = σ(NN_ψ(s‖a)), 2×256 ReLU, clipped to [0.1, 0.9] as DWBC clips its discriminator
(the PU loss is unbounded below otherwise). Positive–unlabelled loss, ORIL Eq. 5 with η = 0.5 (corax `oril_pu_loss`):
    L_R = η E_E[-log R] + E_U[-log(1 - R)] - η E_E[-log(1 - R)]        (`--no-pu`: E_E[-log R] + E_U[-log(1 - R)], Eq. 1)
Stage 2, every training row gets the reward r = R_ψ(s, a) of the frozen model and IQL (Kostrikov et al. 2022, as in
CORL's iql.py and the orax ORIL+IQL config) learns the policy:
    L_V = E[|τ - 1(q - V(s) < 0)| (q - V(s))²],  q = min_i Q̄_i(s, a)              (expectile τ)
    L_Q = Σ_i E[(r + γ (1 - terminal) V(s') - Q_i(s, a))²]                       (timeouts bootstrap)
    L_π = E[min(exp(β (q - V(s))), 100) · ℓ(s, a)],  ℓ = -Σ_j log π_j(a_j | s)   (advantage-weighted regression)
with twin target critics Q̄ following Q by Polyak averaging. The policy is the tanh-Gaussian actor of policy.py.

Input: a dataset `.npz` (docs/contract.md): observations, actions, next_observations, terminals, expert, augmented.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (losses, R on D_E and D_U, eval
return; a row per evaluation, written as it goes), args.json, and with --tensorboard the event files in tb/.
Progress: a line at most every ~10 s (step, steps/s, ETA, last losses), besides the line of every evaluation.

Seeds side by side: `--seeds 0 1 2 3 4` trains one independent replica per seed in this process: each of the five
networks (reward model, actor, twin Q, its target, V) is the R replicas' networks stacked into one batched network
(policy.build_replicas) and every loss has one value per replica. Replica k is initialised as `--seed k` alone is,
draws its minibatches from its own default_rng(k) with the same calls and has its own slice of the Adam moments, so
it follows the single run up to float rounding; it writes that run's files to `--out-dir` and `--final-eval` with
`{seed}` replaced by k. One seed (the default) runs the same loop on plain networks.
"""

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

R_MIN, R_MAX, EXP_ADV_MAX = 0.1, 0.9, 100.0


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset: raw (ORIL) or augmented by augment.py (ORIL+CA)"""
    out_dir: str = "runs/oril"
    """folder for policy.pt, progress.csv and args.json"""
    method: Optional[str] = None
    """label stored in the policy (default: oril_ca on an augmented dataset, else oril)"""
    seed: int = 0
    """seed of the initialisation and minibatches"""
    seeds: Optional[Tuple[int, ...]] = None
    """train one replica per seed side by side in this process (e.g. `--seeds 0 1 2 3 4`); --out-dir and
    --final-eval then need `{seed}`, which becomes each replica's seed"""
    reward_steps: Optional[int] = None
    """gradient steps of the reward model R_ψ (stage 1), batches of `batch_size` from D_E and from D_U
    (default: 0.4 × total_steps, rounded down: 2,000 for the default 5,000)"""
    eta: float = 0.5
    """class prior η of the positive–unlabelled reward loss (ORIL Eq. 5)"""
    pu: bool = True
    """positive–unlabelled reward loss (Eq. 5); off: plain expert-vs-unlabelled cross-entropy (Eq. 1)"""
    reward_lr: float = 3e-4
    """Adam learning rate of the reward model"""
    total_steps: int = 5_000
    """IQL gradient steps (stage 2)"""
    batch_size: int = 256
    """minibatch size (IQL: rows of D_all, augmented rows included)"""
    gamma: float = 0.99
    """discount γ"""
    expectile: float = 0.7
    """IQL expectile τ of the value loss"""
    beta: float = 3.0
    """IQL inverse temperature β of the advantage weights"""
    polyak: float = 0.005
    """rate of the target critics' Polyak averaging"""
    critic_lr: float = 3e-4
    """Adam learning rate of Q and V"""
    actor_lr: float = 3e-4
    """Adam learning rate of the policy (cosine decay to 0 over total_steps, as CORL's IQL)"""
    hidden: int = 256
    """hidden width of every network"""
    n_hidden: int = 2
    """hidden layers of every network"""
    eval_every: int = 1_000
    """evaluate the policy every this many IQL steps (0: only at the end), for learning curves"""
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


def mlp(d_in: int, hidden: int, n_hidden: int, d_out: int = 1) -> nn.Sequential:
    layers = []
    for _ in range(n_hidden):
        layers += [nn.Linear(d_in, hidden), nn.ReLU()]
        d_in = hidden
    return nn.Sequential(*layers, nn.Linear(d_in, d_out))


class RewardModel(nn.Module):
    """R_ψ(s, a) = clip(σ(NN_ψ(s‖a)), 0.1, 0.9)."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 256, n_hidden: int = 2):
        super().__init__()
        self.net = mlp(obs_dim + act_dim, hidden, n_hidden)

    def forward(self, obs, act):
        return torch.sigmoid(self.net(torch.cat([obs, act], -1))).squeeze(-1).clamp(R_MIN, R_MAX)


class TwinQ(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 256, n_hidden: int = 2):
        super().__init__()
        self.q1, self.q2 = (mlp(obs_dim + act_dim, hidden, n_hidden) for _ in range(2))

    def forward(self, obs, act):
        x = torch.cat([obs, act], -1)
        return self.q1(x).squeeze(-1), self.q2(x).squeeze(-1)


def pu_reward_loss(r_e, r_u, eta: float, pu: bool = True):
    """ORIL Eq. 5: η E_E[-log R] + E_U[-log(1-R)] - η E_E[-log(1-R)]; Eq. 1 (plain cross-entropy) without PU."""
    if not pu:
        return (-torch.log(r_e)).mean(-1) + (-torch.log(1 - r_u)).mean(-1)
    return eta * (-torch.log(r_e)).mean(-1) + (-torch.log(1 - r_u)).mean(-1) - eta * (-torch.log(1 - r_e)).mean(-1)


def expectile_loss(q, v, tau: float):
    """IQL value loss E[|τ - 1(q - v < 0)| (q - v)²] (q detached)."""
    diff = q.detach() - v
    return (torch.abs(tau - (diff < 0).float()) * diff ** 2).mean(-1)


def q_loss(q1, q2, reward, done, next_v, gamma: float):
    """Σ_i E[(r + γ (1 - done) V(s') - Q_i)²] with V(s') detached."""
    target = reward + gamma * (1 - done) * next_v.detach()
    return ((q1 - target) ** 2).mean(-1) + ((q2 - target) ** 2).mean(-1)


def awr_loss(log_pi, adv, beta: float):
    """E[min(exp(β A), 100) · (-Σ_j log π_j)] with A detached."""
    weights = torch.exp(beta * adv.detach()).clamp(max=EXP_ADV_MAX)
    return (weights * -log_pi.sum(-1)).mean(-1)


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    checks.trainer(args, reward_steps=checks.COUNT, eta=checks.OPEN_UNIT, gamma=checks.Real(0, 1, high_open=True),
                   expectile=checks.OPEN_UNIT, beta=checks.NON_NEGATIVE, polyak=checks.Real(0, 1, low_open=True))
    if args.reward_steps is None and args.total_steps * 2 // 5 < 1:
        raise ValueError(f"--total-steps {args.total_steps} leaves the reward model 0.4 × {args.total_steps} = 0 steps: "
                         f"give --reward-steps or --total-steps >= 3")
    runs = replica_args(args)  # one Args per seed, as `--seed k` alone would have them
    data = envs.load_dataset(args.dataset)
    contract.require_expert(data, args.dataset)
    meta = data["metadata"]
    spec = envs.env_spec(meta)
    contract.check_paths({"--dataset": args.dataset}, folders={"--out-dir": [a.out_dir for a in runs]},
                         files={"--final-eval": [p for a in runs for p in final_eval_paths(a.final_eval, spec)]})
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    method = args.method or ("oril_ca" if aug.any() else "oril")
    unl_rows = np.flatnonzero(~data["expert"] & ~aug)
    exp_rows = np.flatnonzero(data["expert"])  # collected D_E and the counterfactual rows
    if len(unl_rows) == 0:
        raise ValueError(f"{args.dataset}: D_U is empty (every collected row is expert); ORIL needs unlabelled data")
    torch.set_num_threads(cpu_threads(args.threads))
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"])  # every training row
    obs = torch.as_tensor(norm.obs(data["observations"]), device=device)
    next_obs = torch.as_tensor(norm.obs(data["next_observations"]), device=device)
    act = torch.as_tensor(norm.act(data["actions"]), device=device)
    done = torch.as_tensor(data["terminals"], dtype=torch.float32, device=device)
    pools = {"expert": torch.as_tensor(exp_rows, device=device), "unlabelled": torch.as_tensor(unl_rows, device=device)}
    obs_dim, act_dim, N, B = meta["obs_dim"], meta["act_dim"], len(obs), args.batch_size
    print(f"{method}: D_E {len(exp_rows)} rows ({aug.sum()} augmented), D_U {len(unl_rows)} rows ({args.dataset})"
          + (f", seeds {[a.seed for a in runs]} side by side" if len(runs) > 1 else ""))

    # One seed trains plain networks on [B, …] batches; several seeds (--seeds) train R replicas side by side, every
    # network stacked (policy.build_replicas) on [R, B, …] batches and every loss one value per replica [R]. Replica k
    # draws from its own streams (numpy's default_rng(k), torch's global generator as seeded by k, or its device
    # generator on a GPU), so it follows the run with --seed k alone.
    R = len(runs)
    rngs = [np.random.default_rng(a.seed) for a in runs]
    gens = [minibatch_generator(a.seed, device) for a in runs]
    streams = TorchStreams([a.seed for a in runs])

    def per_replica(draw):
        """draw(k) for every replica: [B] for one seed, stacked [R, B] for several."""
        return draw(0) if R == 1 else torch.stack([draw(k) for k in range(R)])

    def pick(k: int, pool: str):
        """B rows of a pool for replica k: numpy's rng.choice on the CPU, the device generator on a GPU."""
        if gens[k] is None:
            return torch.as_tensor(rngs[k].choice(exp_rows if pool == "expert" else unl_rows, B), device=device)
        return pools[pool][torch.randint(len(pools[pool]), (B,), generator=gens[k], device=device)]

    def any_row(k: int):
        if gens[k] is None:
            return torch.as_tensor(rngs[k].integers(0, N, B), device=device)
        return torch.randint(0, N, (B,), generator=gens[k], device=device)

    def replica(net, plain, k: int):
        return net if R == 1 else load_replica(plain[k], net, k)

    folders = [contract.RunFolder(a.out_dir) for a in runs]  # fresh --out-dirs for the logs; results staged beside
    t0 = time.time()
    # stage 1: the reward model, PU loss (ORIL Eq. 5)
    reward_model, _ = build_replicas(lambda: RewardModel(obs_dim, act_dim, args.hidden, args.n_hidden), streams, device)
    r_opt = torch.optim.Adam(reward_model.parameters(), lr=args.reward_lr)
    reward_steps = args.reward_steps if args.reward_steps is not None else args.total_steps * 2 // 5
    prog = Progress(f"{method} reward model" + (f" x{R}" if R > 1 else ""), reward_steps)  # lines only
    for step in range(1, reward_steps + 1):
        ie, iu = per_replica(lambda k: torch.cat([pick(k, "expert"), pick(k, "unlabelled")])).split(B, -1)
        r_loss = pu_reward_loss(reward_model(obs[ie], act[ie]), reward_model(obs[iu], act[iu]), args.eta, args.pu)
        r_opt.zero_grad()
        r_loss.sum().backward()  # several seeds: replica k's slice of the gradient is ∂loss_k alone
        r_opt.step()
        prog.update(step, lambda: {"loss": r_loss.mean().item()})  # the loss is read only when a line is due
    with torch.no_grad():  # relabel D_all once with the frozen R_ψ: [N], or [R, N] for several seeds
        reward = reward_model(obs, act) if R == 1 else reward_model(obs.expand(R, -1, -1), act.expand(R, -1, -1))
    r_e, r_u = reward[..., exp_rows].mean(-1), reward[..., unl_rows].mean(-1)
    for k, a in enumerate(runs):
        checks.finite_losses({"reward_loss": values(r_loss)[k], "r_expert": values(r_e)[k], "r_unlabelled": values(r_u)[k]},
                             reward_steps, f"{method} reward model" + (f" (seed {a.seed})" if R > 1 else ""))
    print(f"[{method}] reward model: {reward_steps} steps, loss {r_loss.mean().item():.3f}, mean R on D_E "
          f"{r_e.mean().item():.2f}, on D_U {r_u.mean().item():.2f}  ({time.time() - t0:.0f} s)", flush=True)

    # stage 2: IQL on the relabelled data
    actor, actors = build_replicas(lambda: Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps), streams, device)
    qf, _ = build_replicas(lambda: TwinQ(obs_dim, act_dim, args.hidden, args.n_hidden), streams, device)
    q_target, _ = build_replicas(lambda: TwinQ(obs_dim, act_dim, args.hidden, args.n_hidden), streams, device)
    q_target.load_state_dict(qf.state_dict())
    vf, _ = build_replicas(lambda: mlp(obs_dim, args.hidden, args.n_hidden), streams, device)
    q_opt = torch.optim.Adam(qf.parameters(), lr=args.critic_lr)
    v_opt = torch.optim.Adam(vf.parameters(), lr=args.critic_lr)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr)
    actor_sched = torch.optim.lr_scheduler.CosineAnnealingLR(actor_opt, args.total_steps)
    progs = [Progress(method, args.total_steps, out_dir=a.out_dir, tensorboard=args.tensorboard) for a in runs]
    line = progs[0] if R == 1 else Progress(f"{method} x{R}", args.total_steps)  # several seeds: means over replicas
    logs = [[] for _ in runs]
    for step in range(1, args.total_steps + 1):
        idx = per_replica(any_row)
        s, a, s2 = obs[idx], act[idx], next_obs[idx]
        with torch.no_grad():
            q = torch.min(*q_target(s, a))
            next_v = vf(s2).squeeze(-1)
        v = vf(s).squeeze(-1)
        v_loss = expectile_loss(q, v, args.expectile)  # value: expectile of the target Q
        v_opt.zero_grad()
        v_loss.sum().backward()
        v_opt.step()
        r = reward[idx] if R == 1 else reward.gather(1, idx)
        c_loss = q_loss(*qf(s, a), r, done[idx], next_v, args.gamma)  # Q: r + γ V(s')
        q_opt.zero_grad()
        c_loss.sum().backward()
        q_opt.step()
        adv = q - v.detach()
        a_loss = awr_loss(actor.log_prob(s, a), adv, args.beta)  # policy: advantage-weighted regression
        actor_opt.zero_grad()
        a_loss.sum().backward()
        actor_opt.step()
        actor_sched.step()
        with torch.no_grad():
            for p, p_t in zip(qf.parameters(), q_target.parameters()):
                p_t.lerp_(p, args.polyak)
        if (args.eval_every and step % args.eval_every == 0) or step == args.total_steps:
            rets = []
            for k in range(R):
                with streams.use(k):  # an evaluation builds layers from torch's generator, as the single run's does
                    rets.append(in_training_eval(replica(actor, actors, k), norm, spec, args.eval_episodes, args.eval_seed))
            cols = {"reward_loss": values(r_loss), "r_expert": values(r_e), "r_unlabelled": values(r_u),
                    "v_loss": values(v_loss), "q_loss": values(c_loss), "actor_loss": values(a_loss),
                    "q_mean": values(q.mean(-1)), "adv_mean": values(adv.mean(-1)), "eval_return": rets}
            log_replicas(logs, progs, runs, step, cols, method)  # stops at a non-finite value
            line.update(step, {name: float(np.mean(col)) for name, col in cols.items()}, force=True)
        else:
            line.update(step, lambda: {"v_loss": v_loss.mean().item(), "q_loss": c_loss.mean().item(),
                                       "actor_loss": a_loss.mean().item()})
    for prog in {id(p): p for p in progs + [line]}.values():
        prog.close()

    for k, a in enumerate(runs):
        contract.save_policy(os.path.join(folders[k].staging, "policy.pt"), artifact(
            replica(actor, actors, k).cpu(), norm, method=method, seed=a.seed, env=spec,
            dataset_fingerprint=contract.fingerprint(data), dataset=a.dataset, train_args=asdict(a)))
        contract.save_json(os.path.join(folders[k].staging, "args.json"), asdict(a))
        folders[k].commit()  # policy.pt and args.json appear in --out-dir together, beside the run's progress.csv
        if a.final_eval:
            final_eval(os.path.join(a.out_dir, "policy.pt"), spec, a.final_eval_episodes, a.final_eval)
    results = [{"seed": a.seed, "log": logs[k], "r_expert": values(r_e)[k], "r_unlabelled": values(r_u)[k]}
               for k, a in enumerate(runs)]
    return {"method": method, **results[0]} if R == 1 else {"method": method, "runs": results}


if __name__ == "__main__":
    cli.run(main, Args)
