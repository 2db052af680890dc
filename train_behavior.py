"""Train behaviour policies with SAC (Haarnoja et al. 2018) and save snapshots of graded quality (OILCA §5.2–5.3).

The paper's mixed-quality datasets need behaviour policies from poor to good; snapshots of one SAC run taken early,
midway and late give them. This is a CleanRL-style SAC on flat state observations:
  * twin Q-networks Q_1, Q_2 (256-256 ReLU, one batched forward) with Polyak targets (τ);
  * target y = r + γ (1 - terminal) (min_i Q̄_i(s', a') - α log π(a'|s')), a' ~ π(·|s');
  * tanh-Gaussian actor, loss E[α log π(a|s) - min_i Q_i(s, a)], updated `policy_frequency` times every
    `policy_frequency` critic steps (CleanRL's delayed schedule);
  * automatic entropy tuning towards target entropy -A.
A time limit (dm_control's 1000 steps) is a truncation: it never zeroes the bootstrap.
`update_every` > 1 performs one gradient step every that many env steps (a CPU budget knob; state it when used).

Envs: `dmc:<domain>-<task>` (dmc_env.DMCEnv, the clean env: no action perturbation while training) and
`cw:<task>` (cw_env.CWEnv, for CausalWorld tasks without a shipped expert; slow on a CPU).

Output (--out-dir): snapshots/step_<n>.pt (policy artifacts, docs/contract.md: the actor's mean head, identity
normalisation, with `train_step` and `eval_return`), progress.csv (step, episode return, evaluation return, losses,
steps/s; a row per episode end and evaluation, written as it goes, the rows before a --resume included),
returns.png (returns against env steps), args.json, checkpoint.pt + replay.npz for `--resume`, and with
--tensorboard the event files in tb/. Progress: a line at every evaluation and otherwise at most every ~10 s (env
step, env steps/s of this process, ETA, last losses).
"""

import os
import time
from dataclasses import asdict, dataclass
from typing import Optional, Tuple

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

from oilca import checks
from oilca import cli
from oilca import contract
import envs
from oilca.progress import Progress

LOG_STD_MIN, LOG_STD_MAX = -5.0, 2.0


@dataclass
class Args:
    env: str = "dmc:cartpole-swingup"
    """env id: dmc:<domain>-<task> or cw:<task>"""
    out_dir: str = "runs/sac_cartpole-swingup"
    """folder for snapshots/, progress.csv, returns.png, args.json, checkpoint.pt"""
    seed: int = 0
    """seed of the env, the networks and the replay sampling"""
    total_steps: int = 200_000
    """environment steps"""
    snapshot_steps: Tuple[int, ...] = (10_000, 30_000, 60_000, 100_000, 200_000)
    """env steps at which the current policy is saved as a behaviour snapshot"""
    learning_starts: int = 5_000
    """uniform-random actions before the first update"""
    update_every: int = 1
    """one gradient step every this many env steps (1 = CleanRL's update-to-data ratio of 1)"""
    buffer_size: int = 1_000_000
    """replay capacity"""
    batch_size: int = 256
    """minibatch size"""
    gamma: float = 0.99
    """discount γ"""
    tau: float = 0.005
    """Polyak rate τ of the target critics"""
    policy_lr: float = 3e-4
    """actor and temperature learning rate"""
    q_lr: float = 1e-3
    """critic learning rate"""
    policy_frequency: int = 2
    """delayed actor updates: every this many critic steps, this many actor steps"""
    hidden: int = 256
    """width of the two hidden layers of every network"""
    eval_every: int = 10_000
    """env steps between evaluations of the deterministic policy"""
    eval_episodes: int = 5
    """episodes per evaluation (task seeds 10_000_000 + seed·1000 + i, apart from training)"""
    checkpoint_every: int = 50_000
    """env steps between resumable checkpoints (0: only at the end)"""
    resume: bool = False
    """continue from out_dir/checkpoint.pt (the running episode restarts)"""
    tensorboard: bool = False
    """also write TensorBoard event files of the logged rows and progress lines to <out_dir>/tb"""
    threads: Optional[int] = None
    """torch CPU threads (not given: every core this process may use; runner.py passes cores // --jobs)"""
    cuda: bool = True
    """use CUDA when it is available"""


def make_env(env_id: str, seed: int):
    backend, name = envs.parse_env_id(env_id)
    if backend == "dmc":
        from envs.dmc import DMCEnv
        return DMCEnv(name, seed)
    if backend == "cw":
        from envs.cw import CWEnv
        return CWEnv(name, seed)
    raise ValueError(f"train_behavior.py trains on dmc:<domain>-<task> or cw:<task>, not '{env_id}'")


class TwinQ(nn.Module):
    """Two Q-networks evaluated in one batched pass: weights [2, in, out]; returns [2, B]."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int):
        super().__init__()
        sizes = [obs_dim + act_dim, hidden, hidden, 1]
        self.w = nn.ParameterList()
        self.b = nn.ParameterList()
        for i, o in zip(sizes[:-1], sizes[1:]):
            bound = 1 / np.sqrt(i)  # nn.Linear's default init, per member
            self.w.append(nn.Parameter(torch.empty(2, i, o).uniform_(-bound, bound)))
            self.b.append(nn.Parameter(torch.empty(2, 1, o).uniform_(-bound, bound)))

    def forward(self, obs, act):
        x = torch.cat([obs, act], -1).expand(2, -1, -1)
        for k, (w, b) in enumerate(zip(self.w, self.b)):
            x = torch.baddbmm(b, x, w)
            if k < len(self.w) - 1:
                x = F.relu(x)
        return x.squeeze(-1)


class Actor(nn.Module):
    def __init__(self, obs_dim: int, act_dim: int, hidden: int):
        super().__init__()
        self.trunk = nn.Sequential(nn.Linear(obs_dim, hidden), nn.ReLU(), nn.Linear(hidden, hidden), nn.ReLU())
        self.mu = nn.Linear(hidden, act_dim)
        self.log_std = nn.Linear(hidden, act_dim)

    def sample(self, obs):
        """Reparameterised a = tanh(μ + σ ξ) in [-1, 1] and its log-density (summed over dims)."""
        h = self.trunk(obs)
        mu = self.mu(h)
        log_std = LOG_STD_MIN + 0.5 * (LOG_STD_MAX - LOG_STD_MIN) * (torch.tanh(self.log_std(h)) + 1)
        pre = mu + log_std.exp() * torch.randn_like(mu)
        a = torch.tanh(pre)
        log_prob = (-0.5 * ((pre - mu) / log_std.exp()) ** 2 - log_std - 0.5 * np.log(2 * np.pi)).sum(-1)
        log_prob = log_prob - (2 * (np.log(2) - pre - F.softplus(-2 * pre))).sum(-1)  # log|d tanh / d pre|
        return a, log_prob

    def mean_net(self) -> nn.Sequential:
        return nn.Sequential(*self.trunk, self.mu)


def critic_loss(q: TwinQ, q_target: TwinQ, actor: Actor, alpha, obs, act, rew, nxt, term, gamma: float):
    with torch.no_grad():
        a2, logp2 = actor.sample(nxt)
        y = rew + gamma * (1 - term) * (q_target(nxt, a2).min(0).values - alpha * logp2)
    return F.mse_loss(q(obs, act), y.expand(2, -1), reduction="none").mean(1).sum()


def actor_loss(q: TwinQ, actor: Actor, alpha, obs):
    a, logp = actor.sample(obs)
    return (alpha * logp - q(obs, a).min(0).values).mean(), logp


def evaluate(env_id: str, actor: Actor, low, high, episodes: int, seed: int, device) -> float:
    returns = []
    for i in range(episodes):
        env = make_env(env_id, 10_000_000 + seed * 1000 + i)
        s, done, ret = env.reset(), False, 0.0
        while not done:
            with torch.no_grad():
                a = torch.tanh(actor.mean_net()(torch.as_tensor(s, device=device)[None]))[0].cpu().numpy()
            s, r, term, trunc = env.step(low + (a + 1) / 2 * (high - low))
            ret, done = ret + r, term or trunc
        returns.append(ret)
    return float(np.mean(returns))


def plot_returns(path: str, rows: list, title: str) -> None:
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, ax = plt.subplots(figsize=(5, 3.2))
    tr = [(r["step"], r["episode_return"]) for r in rows if r.get("episode_return") != ""]
    ev = [(r["step"], r["eval_return"]) for r in rows if r.get("eval_return") != ""]
    if tr:
        ax.plot(*zip(*tr), ".", ms=3, alpha=0.5, label="training episode")
    if ev:
        ax.plot(*zip(*ev), "o-", label="evaluation (deterministic)")
    ax.set_xlabel("env steps"), ax.set_ylabel("return"), ax.set_title(title), ax.legend()
    contract.save_figure(path, fig)
    plt.close(fig)


@contract.all_or_nothing  # a refusal or an interrupt releases --out-dir; SIGTERM cleans up as SIGINT does
def main(args: Args) -> dict:
    checks.trainer(args, learning_starts=checks.COUNT0, update_every=checks.COUNT, buffer_size=checks.COUNT,
                   gamma=checks.Real(0, 1, high_open=True), tau=checks.Real(0, 1, low_open=True),
                   policy_frequency=checks.COUNT, eval_every=checks.COUNT, eval_episodes=checks.COUNT,
                   checkpoint_every=checks.COUNT0, snapshot_steps=checks.COUNT)  # later steps: for a --resume
    try:
        envs.parse_env_id(args.env)
    except ValueError as e:
        raise ValueError(f"--env: {e}") from None
    contract.claim(args.out_dir)  # one run per folder at a time (the folder is resumable, so it is not rebuilt)
    os.makedirs(os.path.join(args.out_dir, "snapshots"), exist_ok=True)
    torch.set_num_threads(args.threads or cli.cpu_cores())
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")
    env = make_env(args.env, args.seed)
    obs_dim, A = env.obs_dim, env.act_dim
    low, high = np.asarray(env.action_low, np.float32), np.asarray(env.action_high, np.float32)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)

    actor = Actor(obs_dim, A, args.hidden).to(device)
    q, q_target = TwinQ(obs_dim, A, args.hidden).to(device), TwinQ(obs_dim, A, args.hidden).to(device)
    q_target.load_state_dict(q.state_dict())
    log_alpha = torch.zeros(1, requires_grad=True, device=device)
    q_opt = torch.optim.Adam(q.parameters(), lr=args.q_lr)
    pi_opt = torch.optim.Adam(actor.parameters(), lr=args.policy_lr)
    a_opt = torch.optim.Adam([log_alpha], lr=args.policy_lr)
    target_entropy = -float(A)

    cap = min(args.buffer_size, args.total_steps)
    buf = {"obs": np.zeros((cap, obs_dim), np.float32), "act": np.zeros((cap, A), np.float32),
           "rew": np.zeros(cap, np.float32), "nxt": np.zeros((cap, obs_dim), np.float32), "term": np.zeros(cap, np.float32)}
    start, size, rows = 0, 0, []
    ckpt_path, replay_path = os.path.join(args.out_dir, "checkpoint.pt"), os.path.join(args.out_dir, "replay.npz")
    if args.resume and os.path.exists(ckpt_path):
        ck = contract.load_checkpoint(ckpt_path, "sac_checkpoint", required=("step", "actor"))
        for m, k in ((actor, "actor"), (q, "q"), (q_target, "q_target"), (q_opt, "q_opt"), (pi_opt, "pi_opt"), (a_opt, "a_opt")):
            m.load_state_dict(ck[k])
        log_alpha.data[:] = ck["log_alpha"]
        start, size, rows = ck["step"], ck["size"], ck["rows"]
        torch.set_rng_state(ck["torch_rng"])
        rng.bit_generator.state = ck["np_rng"]
        with np.load(replay_path) as z:
            for k in buf:
                buf[k][:size] = z[k][:size]
        print(f"resumed {args.out_dir} at step {start}")
    contract.save_json(os.path.join(args.out_dir, "args.json"), asdict(args))

    def save_checkpoint(step):
        contract.save_npz(replay_path, {k: v[:size] for k, v in buf.items()})
        contract.save_torch(ckpt_path, {"kind": "sac_checkpoint", "step": step, "size": size, "rows": rows,
                                        "actor": actor.state_dict(), "q": q.state_dict(), "q_target": q_target.state_dict(),
                                        "q_opt": q_opt.state_dict(), "pi_opt": pi_opt.state_dict(), "a_opt": a_opt.state_dict(),
                                        "log_alpha": log_alpha.detach().cpu(), "torch_rng": torch.get_rng_state(),
                                        "np_rng": rng.bit_generator.state})

    s, ep_ret, ep_len, n_updates = env.reset(), 0.0, 0, 0
    t0, last = time.time(), {}  # last: the latest losses as tensors, read (.item()) only where they are logged
    last_row = (start, t0)  # (step, time) of the previous progress row: each row's sps covers its own stretch
    prog = Progress("sac", args.total_steps, out_dir=args.out_dir, tensorboard=args.tensorboard, unit="env steps",
                    start=start)
    for old in rows:  # a resumed run: progress.csv starts again with the checkpoint's rows
        prog.log(old)
    losses = lambda: {k: v.item() for k, v in last.items()}
    for step in range(start + 1, args.total_steps + 1):
        if step <= args.learning_starts:
            a = rng.uniform(-1, 1, A).astype(np.float32)
        else:
            with torch.no_grad():
                a = actor.sample(torch.as_tensor(s, device=device)[None])[0][0].cpu().numpy()
        s2, r, term, trunc = env.step(low + (a + 1) / 2 * (high - low))
        i = (step - 1) % cap
        buf["obs"][i], buf["act"][i], buf["rew"][i], buf["nxt"][i], buf["term"][i] = s, a, r, s2, float(term)
        size = min(size + 1, cap)
        s, ep_ret, ep_len = s2, ep_ret + r, ep_len + 1
        row = None
        if term or trunc:
            row = {"step": step, "episode_return": ep_ret, "eval_return": ""}
            s, ep_ret, ep_len = env.reset(), 0.0, 0

        if step > args.learning_starts and step % args.update_every == 0:
            idx = rng.integers(0, size, args.batch_size)
            obs, act, rew, nxt, term_b = (torch.as_tensor(buf[k][idx], device=device) for k in ("obs", "act", "rew", "nxt", "term"))
            alpha = log_alpha.exp().detach()
            lq = critic_loss(q, q_target, actor, alpha, obs, act, rew, nxt, term_b, args.gamma)
            q_opt.zero_grad(), lq.backward(), q_opt.step()
            n_updates += 1
            if n_updates % args.policy_frequency == 0:
                for _ in range(args.policy_frequency):
                    lpi, logp = actor_loss(q, actor, log_alpha.exp().detach(), obs)
                    pi_opt.zero_grad(), lpi.backward(), pi_opt.step()
                    la = -(log_alpha.exp() * (logp.detach() + target_entropy)).mean()  # entropy tuning
                    a_opt.zero_grad(), la.backward(), a_opt.step()
                last = {"q_loss": lq.detach(), "pi_loss": lpi.detach(), "alpha": log_alpha.exp().detach()}
            with torch.no_grad():  # Polyak averaging of the target critics
                torch._foreach_lerp_(list(q_target.parameters()), list(q.parameters()), args.tau)

        evaluating = step % args.eval_every == 0 or step in args.snapshot_steps or step == args.total_steps
        if evaluating:
            ev = evaluate(args.env, actor, low, high, args.eval_episodes, args.seed, device)
            row = row or {"step": step, "episode_return": ""}
            row["eval_return"] = ev
            prog.update(step, {"eval_return": ev, **losses()}, force=True)
            if step in args.snapshot_steps or step == args.total_steps:
                art = contract.policy_artifact(
                    actor.mean_net().cpu(), np.zeros(obs_dim), np.ones(obs_dim), low, high, method="sac_behavior",
                    seed=args.seed, env={"env_id": args.env, "obs_dim": obs_dim, "act_dim": A},
                    dataset_fingerprint=None, train_step=step, eval_return=ev, train_args=asdict(args))
                actor.to(device)
                contract.save_policy(os.path.join(args.out_dir, "snapshots", f"step_{step}.pt"), art)
        if row is not None:
            logged = {k: last[k].item() if k in last else "" for k in ("q_loss", "pi_loss", "alpha")}
            now = time.time()  # sps: env steps/s over this row's stretch (evaluations included)
            rows.append({"step": step, "episode_return": row["episode_return"], "eval_return": row["eval_return"],
                         **logged, "sps": round((step - last_row[0]) / (now - last_row[1]), 1)})
            last_row = (step, now)
            prog.log(rows[-1])  # progress.csv, flushed now
        if not evaluating:  # an evaluation has printed its line
            prog.update(step, losses)
        if args.checkpoint_every and step % args.checkpoint_every == 0 and step < args.total_steps:
            save_checkpoint(step)

    prog.close()
    save_checkpoint(args.total_steps)
    plot_returns(os.path.join(args.out_dir, "returns.png"), rows, f"SAC on {args.env} (seed {args.seed})")
    evals = [r["eval_return"] for r in rows if r.get("eval_return") != ""]
    print(f"done: {args.total_steps} env steps in {time.time() - t0:.0f}s, final eval return {evals[-1]:.1f}, "
          f"best {max(evals):.1f}")
    return {"final_eval_return": evals[-1], "best_eval_return": max(evals), "rows": rows}


if __name__ == "__main__":
    cli.run(main, Args)
