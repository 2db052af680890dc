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
with twin target critics Q̄ following Q by Polyak averaging. The policy is the tanh-Gaussian actor of
training/policy.py.

Input:  a dataset `.npz` (docs/contract.md): observations, actions, next_observations, terminals, expert, augmented.
        D_E: the rows with expert=True (collected and counterfactual); D_U: the collected rows without it.
Output (in --out-dir): policy.pt (policy artifact, docs/contract.md), progress.csv (reward_loss, r_expert,
        r_unlabelled, v_loss, q_loss, actor_loss, q_mean, adv_mean, eval_return; a row per evaluation, written as the
        run goes), args.json, and with --tensorboard the event files in tb/. The method label is oril_ca on an
        augmented dataset, else oril. policy.pt and args.json are moved into --out-dir together when the run
        completes; a run whose losses turn NaN or inf stops and writes nothing.

Several seeds at once, sampling on the GPU and CUDA graphs: fast/train_oril.py (same networks and losses, imported).
"""

import time
from dataclasses import dataclass
from typing import Optional

import numpy as np
import torch
import torch.nn as nn

from oilca import contract
from training.trainer import (transition_tensors, Actor, Normalizer, Progress, TrainerArgs, artifact, check_args, check_outputs, checks,
                           finish, in_training_eval, is_eval_step, load, run_cli, run_facts, setup, start,
                           training_rows)

R_MIN, R_MAX, EXP_ADV_MAX = 0.1, 0.9, 100.0


@dataclass
class Args(TrainerArgs):
    out_dir: str = "runs/oril"
    """folder for policy.pt, progress.csv and args.json"""
    reward_steps: Optional[int] = None
    """gradient steps of the reward model R_ψ (stage 1), batches of `batch_size` from D_E and from D_U
    (not given: 0.4 × total_steps, rounded down: 2,000 for the default 5,000)"""
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
    act_eps: float = 1e-6
    """actions are clipped to ±(1 - act_eps) before atanh in the actor's likelihood (policy.Actor)"""


RULES = dict(reward_steps=checks.COUNT, eta=checks.OPEN_UNIT, gamma=checks.Real(0, 1, high_open=True),
             expectile=checks.OPEN_UNIT, beta=checks.NON_NEGATIVE, polyak=checks.Real(0, 1, low_open=True))


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
        return (-torch.log(r_e)).mean() + (-torch.log(1 - r_u)).mean()
    return eta * (-torch.log(r_e)).mean() + (-torch.log(1 - r_u)).mean() - eta * (-torch.log(1 - r_e)).mean()


def expectile_loss(q, v, tau: float):
    """IQL value loss E[|τ - 1(q - v < 0)| (q - v)²] (q detached)."""
    diff = q.detach() - v
    return (torch.abs(tau - (diff < 0).float()) * diff ** 2).mean()


def q_loss(q1, q2, reward, done, next_v, gamma: float):
    """Σ_i E[(r + γ (1 - done) V(s') - Q_i)²] with V(s') detached."""
    target = reward + gamma * (1 - done) * next_v.detach()
    return ((q1 - target) ** 2).mean() + ((q2 - target) ** 2).mean()


def awr_loss(log_pi, adv, beta: float):
    """E[min(exp(β A), 100) · (-Σ_j log π_j)] with A detached."""
    weights = torch.exp(beta * adv.detach()).clamp(max=EXP_ADV_MAX)
    return (weights * -log_pi.sum(-1)).mean()


def reward_step_count(args: Args) -> int:
    """--reward-steps, by default 0.4 × --total-steps (rounded down; refused when that is 0)."""
    if args.reward_steps is not None:
        return args.reward_steps
    if args.total_steps * 2 // 5 < 1:
        raise ValueError(f"--total-steps {args.total_steps} leaves the reward model 0.4 × {args.total_steps} = 0 "
                         f"steps: give --reward-steps or --total-steps >= 3")
    return args.total_steps * 2 // 5


def pu_rows(data: dict, dataset: str):
    """Row numbers of D_E (collected expert rows and counterfactual ones) and of D_U, and the augmented mask."""
    _, augmented, unlabelled = training_rows(data)
    exp_rows, unl_rows = np.flatnonzero(data["expert"]), np.flatnonzero(unlabelled)
    if len(unl_rows) == 0:
        raise ValueError(f"{dataset}: D_U is empty (every collected row is expert); ORIL needs unlabelled data")
    return exp_rows, unl_rows, augmented


@contract.all_or_nothing  # a failed run writes nothing; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    check_args(args, **RULES)
    reward_steps = reward_step_count(args)
    data, meta, spec = load(args.dataset)
    contract.require_expert(data, args.dataset)
    check_outputs(args, spec)
    exp_rows, unl_rows, aug = pu_rows(data, args.dataset)
    method = args.method or ("oril_ca" if aug.any() else "oril")
    device = setup(args)
    norm = Normalizer(data["observations"], meta["action_low"], meta["action_high"])  # every training row
    obs, next_obs, act = transition_tensors(data, norm, device)
    done = torch.as_tensor(data["terminals"].astype(np.float32), device=device)  # a copy (the data may be mapped)
    obs_dim, act_dim, B = meta["obs_dim"], meta["act_dim"], args.batch_size
    print(f"{method}: D_E {len(exp_rows)} rows ({aug.sum()} augmented), D_U {len(unl_rows)} rows ({args.dataset})")

    torch.manual_seed(args.seed)  # every network below, and the layers each in-training evaluation builds
    rng = np.random.default_rng(args.seed)  # every minibatch, stage 1 then stage 2
    trace = {"reward_loss": [], "v_loss": [], "q_loss": [], "actor_loss": []}
    t0 = time.time()

    # stage 1: the reward model, PU loss (ORIL Eq. 5)
    reward_model = RewardModel(obs_dim, act_dim, args.hidden, args.n_hidden).to(device)
    r_opt = torch.optim.Adam(reward_model.parameters(), lr=args.reward_lr)
    prog = Progress(f"{method} reward model", reward_steps)  # lines only
    for step in range(1, reward_steps + 1):
        ie = torch.as_tensor(rng.choice(exp_rows, B), device=device)  # B rows of D_E
        iu = torch.as_tensor(rng.choice(unl_rows, B), device=device)  # B rows of D_U
        r_loss = pu_reward_loss(reward_model(obs[ie], act[ie]), reward_model(obs[iu], act[iu]), args.eta, args.pu)
        r_opt.zero_grad()
        r_loss.backward()
        r_opt.step()
        if step <= args.loss_trace:
            trace["reward_loss"].append(r_loss.item())
        prog.update(step, lambda: {"loss": r_loss.item()})  # the loss is read only when a line is due
    with torch.no_grad():  # relabel D_all once with the frozen R_ψ
        reward = reward_model(obs, act) if torch.is_tensor(obs) else torch.cat(  # memory-mapped rows: in blocks
            [reward_model(obs[i:i + 65536], act[i:i + 65536]) for i in range(0, len(obs), 65536)])
    r_e, r_u = reward[exp_rows].mean(), reward[unl_rows].mean()
    checks.finite_losses({"reward_loss": r_loss.item(), "r_expert": r_e.item(), "r_unlabelled": r_u.item()},
                         reward_steps, f"{method} reward model")
    print(f"[{method}] reward model: {reward_steps} steps, loss {r_loss.item():.3f}, mean R on D_E "
          f"{r_e.item():.2f}, on D_U {r_u.item():.2f}  ({time.time() - t0:.0f} s)", flush=True)

    # stage 2: IQL on the relabelled data
    actor = Actor(obs_dim, act_dim, args.hidden, args.n_hidden, args.act_eps).to(device)
    qf = TwinQ(obs_dim, act_dim, args.hidden, args.n_hidden).to(device)
    q_target = TwinQ(obs_dim, act_dim, args.hidden, args.n_hidden).to(device)
    q_target.load_state_dict(qf.state_dict())
    vf = mlp(obs_dim, args.hidden, args.n_hidden).to(device)
    q_opt = torch.optim.Adam(qf.parameters(), lr=args.critic_lr)
    v_opt = torch.optim.Adam(vf.parameters(), lr=args.critic_lr)
    actor_opt = torch.optim.Adam(actor.parameters(), lr=args.actor_lr)
    actor_sched = torch.optim.lr_scheduler.CosineAnnealingLR(actor_opt, args.total_steps)
    run = start(args, method, args.total_steps)
    for step in range(1, args.total_steps + 1):
        idx = torch.as_tensor(rng.integers(0, len(obs), B), device=device)
        s, a, s2 = obs[idx], act[idx], next_obs[idx]
        with torch.no_grad():
            q = torch.min(*q_target(s, a))  # q = min_i Q̄_i(s, a)
            next_v = vf(s2).squeeze(-1)
        v = vf(s).squeeze(-1)
        v_loss = expectile_loss(q, v, args.expectile)  # L_V: expectile τ of the target Q
        v_opt.zero_grad()
        v_loss.backward()
        v_opt.step()
        c_loss = q_loss(*qf(s, a), reward[idx], done[idx], next_v, args.gamma)  # L_Q: r + γ (1 - terminal) V(s')
        q_opt.zero_grad()
        c_loss.backward()
        q_opt.step()
        adv = q - v.detach()
        a_loss = awr_loss(actor.log_prob(s, a), adv, args.beta)  # L_π: advantage-weighted regression
        actor_opt.zero_grad()
        a_loss.backward()
        actor_opt.step()
        actor_sched.step()
        with torch.no_grad():  # Q̄ ← (1 - polyak) Q̄ + polyak Q
            for p, p_t in zip(qf.parameters(), q_target.parameters()):
                p_t.lerp_(p, args.polyak)

        if step <= args.loss_trace:
            for name, loss in (("v_loss", v_loss), ("q_loss", c_loss), ("actor_loss", a_loss)):
                trace[name].append(loss.item())
        if is_eval_step(args, step, args.total_steps):
            ret = in_training_eval(actor, norm, spec, args.eval_episodes, args.eval_seed)
            run.log(step, {"reward_loss": r_loss.item(), "r_expert": r_e.item(), "r_unlabelled": r_u.item(),
                           "v_loss": v_loss.item(), "q_loss": c_loss.item(), "actor_loss": a_loss.item(),
                           "q_mean": q.mean().item(), "adv_mean": adv.mean().item(), "eval_return": ret})
        else:
            run.tick(step, lambda: {"v_loss": v_loss.item(), "q_loss": c_loss.item(), "actor_loss": a_loss.item()})
    finish(run, args, spec, artifact(actor.cpu(), norm, **run_facts(args, data, method)))
    return {"method": method, "seed": args.seed, "log": run.log_rows, "r_expert": r_e.item(),
            "r_unlabelled": r_u.item(), "loss_trace": trace}


if __name__ == "__main__":
    run_cli(main, Args)
