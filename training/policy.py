"""The policy every trainer learns, how it is saved, and how it is scored.

* `Actor`: the tanh-Gaussian policy of the official DWBC code (2×256 ReLU, heads μ ∈ [-9, 9] and log σ ∈ [-5, 2],
  π = tanh(N(μ, σ))) on normalised observations, actions in [-1, 1]; `bc_loss` is its negative log-likelihood.
  BC-exp, BC-all, DWBC/OILCA, ORIL, LobsDICE and the augmentation sampler π̂_E all use it, so they differ only in
  the weights of their losses.
* `Normalizer`: observation standardisation with the training rows' mean/std (+1e-3, as DWBC) and the map of
  actions between their bounds and [-1, 1].
* `artifact`: the self-contained policy artifact (docs/contract.md) of the actor's deterministic head: with it,
  evaluate.py rolls a policy out without the script that trained it.
* `in_training_eval`: the learning-curve return during training; `evaluate_and_save`: the one result JSON per
  (policy, split) that evaluate.py and every trainer's `--final-eval` (training/trainer.py) write, and report.py reads.

Seeds side by side, device-side sampling and CUDA graphs live in fast/replicas.py, never here.

A trainer that needs another policy class (BCND's Gaussian ensemble) defines it in its own file and still saves it
through `contract.policy_artifact`, so evaluation never depends on the trainer.
"""

from typing import Callable, Optional, Sequence

import numpy as np
import torch
import torch.nn as nn

from oilca import contract
from oilca.rows import mean_std, row_index  # noqa: F401  (row_index: for the trainers)
import envs

LOG_STD_MIN, LOG_STD_MAX, MU_MAX, ACT_EPS = -5.0, 2.0, 9.0, 1e-6
EVAL_SEED = 10_000  # final evaluation seed: apart from the data seeds and the in-training evaluation seed 50_000


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


def nll(log_pi):
    """-E[Σ_j log π_j(a_j | s)] of per-dimension log-likelihoods [B, act_dim]: summed over action dims, averaged
    over the batch (a scalar)."""
    return -log_pi.sum(-1).mean()


def bc_loss(actor: Actor, obs, act):
    """The behaviour-cloning loss: the negative log-likelihood of the actions (nll)."""
    return nll(actor.log_prob(obs, act))


class Normalizer:
    """Observation standardisation (+1e-3 as in DWBC) and the map of actions between their bounds and [-1, 1]."""

    def __init__(self, obs: np.ndarray, low, high, rows: Optional[np.ndarray] = None):
        """Statistics of obs[rows] (every row if None); obs may be memory-mapped (mean_std)."""
        mean, std = mean_std(obs, rows)
        self.mean, self.std = mean, std + 1e-3
        self.low, self.high = np.asarray(low, np.float32), np.asarray(high, np.float32)
        if not (np.isfinite(self.mean).all() and np.isfinite(self.std).all()):  # the data contract bounds values
            raise ValueError("observation mean/std are not finite: the observations are too large for float32")
        if not (self.high > self.low).all():
            raise ValueError(f"action bounds: high {self.high.tolist()} must exceed low {self.low.tolist()}")

    def obs(self, x: np.ndarray) -> np.ndarray:
        return ((x - self.mean) / self.std).astype(np.float32)

    def act(self, a: np.ndarray) -> np.ndarray:
        return (2 * (a - self.low) / (self.high - self.low) - 1).astype(np.float32)


def artifact(actor: nn.Module, norm: Normalizer, **info) -> dict:
    """The policy artifact (docs/contract.md) of the actor's deterministic head (`actor.mean_net()`)."""
    return contract.policy_artifact(actor.mean_net(), norm.mean, norm.std, norm.low, norm.high, **info)


def in_training_eval(actor: nn.Module, norm: Normalizer, spec: dict, episodes: int, seed: int) -> float:
    """Mean return of the current deterministic policy on the env's first split (the training classes, or
    CausalWorld's space A), through the same artifact and rollout as the final evaluation; NaN with episodes = 0
    (no rollout: e.g. training on a GPU machine without the env installed, evaluating afterwards)."""
    if episodes <= 0:
        return float("nan")
    policy = contract.build_policy(artifact(actor, norm))
    split = envs.default_splits(spec)[0]
    return float(envs.rollout(spec, policy, split, envs.split_classes(spec, split), episodes, seed)["returns"].mean())


def check_dims(path: str, art: dict, spec: dict) -> None:
    """A policy artifact must fit the env it is rolled out on."""
    cfg = art["config"]
    if (cfg["obs_dim"], cfg["act_dim"]) != (spec["obs_dim"], spec["act_dim"]):
        raise contract.ContractError(
            f"{path}: policy expects obs_dim={cfg['obs_dim']}, act_dim={cfg['act_dim']} but env '{spec['env_id']}' "
            f"has obs_dim={spec['obs_dim']}, act_dim={spec['act_dim']}")


def evaluate_and_save(policy: Callable, info: dict, spec: dict, split: str, classes: Optional[Sequence[int]],
                      episodes: int, seed: int, out: str, args: dict) -> dict:
    """Roll `policy` out on one split and write its result JSON to `out` (`{split}` in it becomes the split).

    `info` describes the policy: method, seed (its training seed), dataset_fingerprint, and optionally policy (its
    path), train_args and augmented_de_over_du, as recorded in its artifact. `classes` overrides the split's classes.
    The JSON holds the per-episode returns (and CausalWorld's fractional success), so report.py can re-aggregate."""
    chosen = envs.split_classes(spec, split, classes)
    res = envs.rollout(spec, policy, split, chosen, episodes, seed)
    returns, ep_classes = np.asarray(res["returns"]), res["episode_classes"]
    if not np.isfinite(returns).all() or (res.get("success") is not None and not np.isfinite(res["success"]).all()):
        raise ValueError(f"{info.get('policy') or info['method']}: the rollouts on {split} returned NaN or inf; "
                         f"no result written")
    split = split if not classes else "classes_" + "_".join(map(str, chosen))
    where = f"classes {chosen}" if chosen else "the plain env" if spec["env_id"].startswith("gym:") else ""
    result = {"method": info["method"], "seed": info["seed"], "env": spec["env_id"], "split": split,
              "classes": chosen, "returns": returns.tolist(),
              "episode_classes": None if ep_classes is None else np.asarray(ep_classes).tolist(),
              "mean_return": float(returns.mean()), "std_return": float(returns.std()), "episodes": episodes,
              "eval_seed": seed, "policy": info.get("policy"), "dataset_fingerprint": info["dataset_fingerprint"],
              "args": args, "train_args": info.get("train_args", {}),
              "augmented_de_over_du": info.get("augmented_de_over_du")}
    if info.get("policy_step") is not None:
        result["policy_step"] = info["policy_step"]
    if info.get("augmentation") is not None:  # the augmented dataset's facts: ratio, mode, labels, sampler
        result["augmentation"] = info["augmentation"]
    if res.get("success") is not None:
        result.update(success=np.asarray(res["success"]).tolist(), mean_success=float(np.mean(res["success"])))
    path = out.replace("{split}", split)
    contract.save_json(path, result)
    extra = f", fractional success {result['mean_success']:.3f}" if "mean_success" in result else ""
    print(f"{result['method']} (seed {result['seed']}) on {spec['env_id']} {split}{' ' + where if where else ''}: "
          f"return {returns.mean():.2f} ± {returns.std():.2f}{extra} over {episodes} episodes -> {path}")
    return result


def artifact_info(art: dict, path: Optional[str]) -> dict:
    """What a result JSON records about the policy artifact it scores."""
    info = {"method": art["method"], "seed": art["seed"], "dataset_fingerprint": art["dataset_fingerprint"],
            "policy": path, "train_args": art.get("train_args", {}),
            "augmented_de_over_du": art.get("augmented_de_over_du")}
    if art.get("checkpoint_step") is not None:  # a --checkpoints policy: trained this many steps of total_steps
        info["policy_step"] = int(art["checkpoint_step"])
    elif art.get("policy_step") is not None:  # the final policy of a run (artifacts since run facts were recorded)
        info["policy_step"] = int(art["policy_step"])
    if art.get("augmentation") is not None:
        info["augmentation"] = art["augmentation"]
    return info
