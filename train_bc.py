"""Behavior cloning baselines of OILCA §5: BC-exp (D_E only) and BC-all (D_all = D_E ∪ D_U), one flag apart.

Policy: tanh-Gaussian actor as in the official DWBC code (2×256 ReLU, heads μ ∈ [-9, 9] and log σ ∈ [-5, 2],
π = tanh(N(μ, σ))), trained by maximum likelihood, L = -E[Σ_j log π_j(a_j | s)], with Adam (lr 1e-4,
weight decay 5e-3, the DWBC actor's settings) so BC and DWBC differ only in their weights. Observations are
normalised with the mean/std of the training rows (+1e-3), actions are mapped from the dataset's bounds to [-1, 1].

Input:  a dataset `.npz` (CONTRACT.md). With `--data expert` the rows with expert=True (the collected D_E; with
        `--include-augmented` also the counterfactual rows of an augmented dataset); with `--data all` every
        collected row.
Output (in --out-dir): policy.pt (policy artifact, CONTRACT.md), progress.csv (step, loss, eval return),
        args.json. The deterministic action is the tanh of the mean.
"""

import os
import sys
import time
from dataclasses import asdict, dataclass
from typing import Literal, Optional

import numpy as np
import torch
import torch.nn as nn
import tyro

import contract
import evaluate
from evaluate import default_splits, env_spec, evaluate_policy, split_classes


@dataclass
class Args:
    dataset: str = "data/toy.npz"
    """input dataset"""
    out_dir: str = "runs/bc_exp"
    """folder for policy.pt, progress.csv and args.json"""
    data: Literal["expert", "all"] = "expert"
    """BC-exp clones D_E only; BC-all clones D_all"""
    include_augmented: bool = False
    """with --data expert: also clone the counterfactual (augmented) rows of an augmented dataset"""
    seed: int = 0
    """seed of the initialisation and minibatches"""
    total_steps: int = 5_000
    """gradient steps"""
    batch_size: int = 256
    """minibatch size"""
    lr: float = 1e-4
    """Adam learning rate"""
    weight_decay: float = 5e-3
    """Adam weight decay of the actor"""
    hidden: int = 256
    """hidden width of the actor"""
    n_hidden: int = 2
    """hidden layers of the actor"""
    eval_every: int = 1_000
    """evaluate the policy every this many steps (0: only at the end), for learning curves"""
    eval_episodes: int = 20
    """episodes per evaluation during training (on the training classes of c)"""
    eval_seed: int = 50_000
    """seed of the evaluations during training (apart from the final evaluation seeds of evaluate.py)"""
    method: Optional[str] = None
    """label stored in the policy (default: bc_exp or bc_all)"""
    final_eval: Optional[str] = None
    """after training, evaluate the saved policy (evaluate.py) and write its JSON here; `{split}` becomes train/heldout"""
    final_eval_episodes: int = 100
    """episodes per split of that final evaluation"""
    act_eps: float = 1e-6
    """actions are clipped to ±(1 - act_eps) before atanh in the tanh-Gaussian likelihood (CausalWorld: its experts'
    actions sit at exactly ±1, where 1e-6 makes the targets ±7.25; use 1e-2)"""
    threads: int = 1
    """torch CPU threads"""
    cuda: bool = False
    """use CUDA when available"""


LOG_STD_MIN, LOG_STD_MAX, MU_MAX, ACT_EPS = -5.0, 2.0, 9.0, 1e-6


class Actor(nn.Module):
    """Tanh-Gaussian policy on normalised observations; actions live in [-1, 1]."""

    def __init__(self, obs_dim: int, act_dim: int, hidden: int = 256, n_hidden: int = 2, act_eps: float = ACT_EPS):
        super().__init__()
        self.act_eps = act_eps  # likelihoods clip actions to ±(1 - act_eps)
        layers, d = [], obs_dim
        for _ in range(n_hidden):
            layers += [nn.Linear(d, hidden), nn.ReLU()]
            d = hidden
        self.trunk = nn.Sequential(*layers)
        self.mu = nn.Linear(d, act_dim)
        self.log_std = nn.Linear(d, act_dim)

    def forward(self, obs):
        h = self.trunk(obs)
        return self.mu(h).clamp(-MU_MAX, MU_MAX), self.log_std(h).clamp(LOG_STD_MIN, LOG_STD_MAX)

    def log_prob(self, obs, act):
        """Per-dimension log π_j(a_j | s) [B, act_dim] of actions in [-1, 1] (clipped away from ±1)."""
        mu, log_std = self(obs)
        a = act.clamp(-1 + self.act_eps, 1 - self.act_eps)
        pre = torch.atanh(a)
        log_normal = -0.5 * (((pre - mu) / log_std.exp()) ** 2 + 2 * log_std + np.log(2 * np.pi))
        return log_normal - torch.log(1 - a ** 2 + self.act_eps)

    def mean_net(self) -> nn.Sequential:
        """The deterministic head (trunk + μ) for the policy artifact; the artifact applies the tanh."""
        return nn.Sequential(*self.trunk, self.mu)


def bc_loss(actor: Actor, obs, act):
    """Negative log-likelihood, summed over action dims and averaged over the batch."""
    return -actor.log_prob(obs, act).sum(-1).mean()


class Normalizer:
    """Observation standardisation (+1e-3 as in DWBC) and the map of actions between their bounds and [-1, 1]."""

    def __init__(self, obs: np.ndarray, low, high):
        self.mean, self.std = obs.mean(0), obs.std(0) + 1e-3
        self.low, self.high = np.asarray(low, np.float32), np.asarray(high, np.float32)

    def obs(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.std).astype(np.float32)

    def act(self, a: np.ndarray) -> np.ndarray:
        return (2 * (a - self.low) / (self.high - self.low) - 1).astype(np.float32)


def artifact(actor: Actor, norm: Normalizer, **info) -> dict:
    """The policy artifact (CONTRACT.md) of the actor's deterministic head."""
    return contract.policy_artifact(actor.mean_net(), norm.mean, norm.std, norm.low, norm.high, **info)


def in_training_eval(actor: Actor, norm: Normalizer, spec: dict, episodes: int, seed: int) -> float:
    """Mean return of the current deterministic policy on the env's first split (the training classes, or
    CausalWorld's space A), through evaluate.py's code path."""
    policy = contract.build_policy(artifact(actor, norm))
    split = default_splits(spec)[0]
    returns, _ = evaluate_policy(policy, spec, split_classes(spec, split), episodes, seed, split)
    return float(returns.mean())


def main(args: Args) -> dict:
    data = contract.load_dataset(args.dataset)
    meta = data["metadata"]
    aug = data["augmented"] if "augmented" in data else np.zeros(len(data["rewards"]), bool)
    if args.data == "expert":
        contract.require_expert(data, args.dataset)
        rows = data["expert"] & (~aug | args.include_augmented)
    else:
        rows = ~aug
    obs, act = data["observations"][rows], data["actions"][rows]
    method = args.method or f"bc_{args.data if args.data == 'all' else 'exp'}"
    torch.set_num_threads(args.threads)
    torch.manual_seed(args.seed)
    rng = np.random.default_rng(args.seed)
    device = torch.device("cuda" if torch.cuda.is_available() and args.cuda else "cpu")

    norm = Normalizer(obs, meta["action_low"], meta["action_high"])
    obs_t, act_t = torch.as_tensor(norm.obs(obs), device=device), torch.as_tensor(norm.act(act), device=device)
    actor = Actor(meta["obs_dim"], meta["act_dim"], args.hidden, args.n_hidden, args.act_eps).to(device)
    opt = torch.optim.Adam(actor.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    spec = env_spec(meta)
    print(f"{method}: cloning {rows.sum()} rows of {args.dataset} ({contract.describe(data)})")

    os.makedirs(args.out_dir, exist_ok=True)
    log, t0 = [], time.time()
    for step in range(1, args.total_steps + 1):
        idx = torch.as_tensor(rng.integers(0, len(obs_t), args.batch_size), device=device)
        loss = bc_loss(actor, obs_t[idx], act_t[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        if (args.eval_every and step % args.eval_every == 0) or step == args.total_steps:
            ret = in_training_eval(actor, norm, spec, args.eval_episodes, args.eval_seed)
            log.append({"step": step, "loss": loss.item(), "eval_return": ret})
            print(f"[{method}] step {step}/{args.total_steps}  loss {loss.item():.3f}  eval return {ret:.2f}  "
                  f"{step / (time.time() - t0):.0f} steps/s", flush=True)

    contract.save_policy(os.path.join(args.out_dir, "policy.pt"), artifact(
        actor, norm, method=method, seed=args.seed, env=spec, dataset_fingerprint=contract.fingerprint(data),
        dataset=args.dataset, train_args=asdict(args)))
    contract.save_json(os.path.join(args.out_dir, "args.json"), asdict(args))
    contract.save_csv(os.path.join(args.out_dir, "progress.csv"), log)
    if args.final_eval:
        evaluate.evaluate_saved(os.path.join(args.out_dir, "policy.pt"), spec, args.final_eval_episodes, args.final_eval)
    return {"method": method, "log": log}


if __name__ == "__main__":
    try:
        main(tyro.cli(Args))
    except (contract.ContractError, ValueError) as e:
        sys.exit(f"error: {e}")
