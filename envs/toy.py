"""Toy causal MDP of OILCA §5.1 ("Toy Environment" appendix): 2-D navigation with an exogenous variable.

State s ∈ (-B, B)² (B = `box`), action a ∈ [-1, 1]², a fixed target inside the box, reward r = -‖s' - target‖.
Every step draws an exogenous variable u ~ N(μ(c), diag σ²(c)) whose distribution is set by the class c of
the episode (the auxiliary label of the paper):
    μ₁(c) = 0,   μ₂(c) = α·(γ(c) - (C-1)/2)   with γ a random permutation of {0, …, C-1},
    σ²(c) ~ U[σ²_low, σ²_high] per class and per dimension (drawn once from the env seed).
The transition is a fixed random network that is injective in u for every fixed (s, a):
    x  = [s, a]
    h₁ = lrelu(W₁ u + V₁ x + b₁)            W₁, W₂, W₃ square and well conditioned, leaky-ReLU slope > 0
    h₂ = lrelu(W₂ h₁ + V₂ x + b₂)
    m  = W₃ h₂                              "wind" produced by u, modulated by where you are and what you do
                                            (W₃ rescaled so each dim of m has unit std for u ~ N(0, I))
    s' = B·tanh((s + step·R(θ(s))·a + scale·m) / B)   the tanh keeps s' inside the box, strictly monotone
so u can be recovered exactly from (s, a, s') (`ToyCausalNav.invert_u`), which tests check.
R(θ(s)) rotates the control by θ(s) = twist·(sin(πs₁/B) + sin(πs₂/B))/2 (up to ±2.5 rad by default): the action
that moves you toward the target depends on where you are, so the expert's action field is nonlinear and a
policy that ignores the twist fails (return ≈ -18 against the expert's ≈ -6). Without it, "push toward the
target" is a clipped linear function that behavior cloning learns from a handful of episodes, and no
imitation method could be told apart from another. The wind (scale 0.03) stays weaker than the control, so
the expert reaches the target in every class.

Every parameter comes from `ToyEnvConfig.seed` and `n_classes`, so the pair stored in a dataset's metadata
(`env_config`, `env_n_classes`) rebuilds the same environment. `n_classes` counts every class the env knows;
a dataset uses the first ones and keeps the rest as unseen classes for out-of-distribution evaluation.

Backend (the interface of envs.py, shared with dmc_env.py and cw_env.py): `collect` (the toy data recipe,
`ToyConfig`, used by collect_data.py --toy.*), `rollout` (vectorised over episodes) and `reference_policy`.

Run `python toy_env.py` to print the class table and a rollout summary, `--plot-path` to draw trajectories.
"""

import json
import os
import sys
from dataclasses import asdict, dataclass, field, fields
from typing import Callable, Optional, Sequence, Tuple

if __name__ == "__main__" and not __package__:  # `python envs/toy.py`: import from the repo root, as `-m envs.toy` does
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

DIM = 2  # state, action and exogenous variable are all 2-D in the paper's toy


@dataclass
class ToyEnvConfig:
    seed: int = 0
    """seed of the env's fixed random parameters (mixing network, class table, target)"""
    alpha: float = 1.0
    """spacing α of the class means μ₂(c) = α·(γ(c) - (C-1)/2)"""
    sigma2_low: float = 0.1
    """lower bound of the per-class variances σ²(c)"""
    sigma2_high: float = 1.0
    """upper bound of the per-class variances σ²(c)"""
    box: float = 1.0
    """half-width B of the bounding box; states live in (-B, B)²"""
    step_size: float = 0.1
    """displacement produced by a unit action"""
    twist: float = 2.5
    """largest rotation (radians) of the control direction over the box"""
    noise_scale: float = 0.03
    """scale of the exogenous displacement m(u, s, a)"""
    leaky_slope: float = 0.5
    """negative slope of the leaky-ReLU mixing (smaller = more nonlinear, must be > 0)"""
    episode_len: int = 50
    """steps per episode (the end of an episode is a time-out, never a terminal)"""


def _well_conditioned(rng: np.random.Generator, n: int, low: float = 0.8, high: float = 1.2) -> np.ndarray:
    """Random n×n matrix with singular values in [low, high] (so it is invertible and well conditioned)."""
    q1, _ = np.linalg.qr(rng.normal(size=(n, n)))
    q2, _ = np.linalg.qr(rng.normal(size=(n, n)))
    return q1 @ np.diag(rng.uniform(low, high, size=n)) @ q2.T


class ToyCausalNav:
    """The toy causal MDP. Vectorised core (`sample_u`, `transition`, `reward`) plus a gym-like single-episode API."""

    obs_dim = DIM
    act_dim = DIM
    u_dim = DIM
    action_low = -1.0
    action_high = 1.0

    def __init__(self, n_classes: int = 4, config: Optional[ToyEnvConfig] = None):
        cfg = config if config is not None else ToyEnvConfig()
        if n_classes < 1 or cfg.leaky_slope <= 0 or cfg.box <= 0 or not 0 < cfg.sigma2_low <= cfg.sigma2_high:
            raise ValueError(f"invalid toy env: n_classes={n_classes}, config={asdict(cfg)}")
        self.config = cfg
        self.n_classes = C = n_classes
        # two streams: the dynamics do not depend on how many classes there are
        rng_cls, rng = np.random.default_rng([cfg.seed, 1]), np.random.default_rng([cfg.seed, 0])
        gamma = rng_cls.permutation(C)
        self.gamma = gamma
        self.u_mean = np.zeros((C, DIM))
        self.u_mean[:, 1] = cfg.alpha * (gamma - (C - 1) / 2)
        self.u_var = rng_cls.uniform(cfg.sigma2_low, cfg.sigma2_high, size=(C, DIM))
        self.W1 = _well_conditioned(rng, DIM)
        self.W2 = _well_conditioned(rng, DIM)
        self.W3 = _well_conditioned(rng, DIM)
        self.V1 = rng.normal(size=(DIM, 2 * DIM)) / np.sqrt(2 * DIM)
        self.V2 = rng.normal(size=(DIM, 2 * DIM)) / np.sqrt(2 * DIM)
        self.b1 = rng.normal(size=DIM) * 0.5
        self.b2 = rng.normal(size=DIM) * 0.5
        self.target = rng.uniform(-0.5 * cfg.box, 0.5 * cfg.box, size=DIM)
        # rescale W₃ so each output dim of m has unit std over a reference sample (still a bijection of u)
        # (reference u ~ N(0, I) rather than the class mixture, so the scale does not depend on the classes)
        n_ref = 20_000
        ref_m = self.mixing(self.sample_start(n_ref, rng), rng.uniform(-1, 1, size=(n_ref, DIM)), rng.normal(size=(n_ref, DIM)))
        self.W3 = self.W3 / ref_m.std(axis=0)[:, None]
        self._state = None
        self._c = None
        self._t = 0
        self._rng = np.random.default_rng()

    # ---------------------------------------------------------------- vectorised core
    def sample_u(self, c: np.ndarray, rng: np.random.Generator) -> np.ndarray:
        """u ~ N(μ(c), diag σ²(c)) for an int array of classes c [B] -> [B, 2]."""
        c = np.asarray(c)
        return self.u_mean[c] + np.sqrt(self.u_var[c]) * rng.normal(size=(c.shape[0], DIM))

    def _lrelu(self, x: np.ndarray) -> np.ndarray:
        return np.where(x >= 0, x, self.config.leaky_slope * x)

    def _lrelu_inv(self, y: np.ndarray) -> np.ndarray:
        return np.where(y >= 0, y, y / self.config.leaky_slope)

    def mixing(self, s: np.ndarray, a: np.ndarray, u: np.ndarray) -> np.ndarray:
        """Exogenous displacement m(u; s, a) [B, 2]; a bijection of u for fixed (s, a)."""
        x = np.concatenate([s, a], axis=-1)
        h1 = self._lrelu(u @ self.W1.T + x @ self.V1.T + self.b1)
        h2 = self._lrelu(h1 @ self.W2.T + x @ self.V2.T + self.b2)
        return h2 @ self.W3.T

    def rotation(self, s: np.ndarray) -> np.ndarray:
        """R(θ(s)) [..., 2, 2], the rotation applied to the control at state s [..., 2]."""
        B = self.config.box
        theta = self.config.twist * (np.sin(np.pi * s[..., 0] / B) + np.sin(np.pi * s[..., 1] / B)) / 2
        c, sn = np.cos(theta), np.sin(theta)
        return np.stack([np.stack([c, -sn], -1), np.stack([sn, c], -1)], -2)

    def control(self, s: np.ndarray, a: np.ndarray) -> np.ndarray:
        """Displacement produced by the (clipped) action: step·R(θ(s))·a [B, 2]."""
        return self.config.step_size * np.einsum("...ij,...j->...i", self.rotation(s), a)

    def transition(self, s: np.ndarray, a: np.ndarray, u: np.ndarray) -> np.ndarray:
        """s' = f(s, a, u) for batches [B, 2]; actions are clipped to the action bounds first."""
        cfg = self.config
        a = np.clip(a, self.action_low, self.action_high)
        z = s + self.control(s, a) + cfg.noise_scale * self.mixing(s, a, u)
        return cfg.box * np.tanh(z / cfg.box)

    def invert_u(self, s: np.ndarray, a: np.ndarray, s_next: np.ndarray) -> np.ndarray:
        """The exact inverse u = f⁻¹(s, a, s') (proof that f is injective in u)."""
        cfg = self.config
        a = np.clip(a, self.action_low, self.action_high)
        x = np.concatenate([s, a], axis=-1)
        z = cfg.box * np.arctanh(np.clip(s_next / cfg.box, -1 + 1e-15, 1 - 1e-15))
        m = (z - s - self.control(s, a)) / cfg.noise_scale
        h2 = np.linalg.solve(self.W3, m.T).T
        h1 = np.linalg.solve(self.W2, (self._lrelu_inv(h2) - x @ self.V2.T - self.b2).T).T
        return np.linalg.solve(self.W1, (self._lrelu_inv(h1) - x @ self.V1.T - self.b1).T).T

    def reward(self, s_next: np.ndarray) -> np.ndarray:
        """r = -‖s' - target‖ [B]."""
        return -np.linalg.norm(s_next - self.target, axis=-1)

    def sample_start(self, n: int, rng: np.random.Generator) -> np.ndarray:
        """Start states uniform in the inner 90% of the box [n, 2]."""
        return rng.uniform(-0.9 * self.config.box, 0.9 * self.config.box, size=(n, DIM))

    def expert_action(self, s: np.ndarray) -> np.ndarray:
        """Goal-seeking controller: the action that would land on the target without exogenous drift, clipped."""
        a = np.einsum("...ji,...j->...i", self.rotation(s), (self.target - s) / self.config.step_size)  # R(θ)ᵀ (target - s)
        return np.clip(a, self.action_low, self.action_high)

    def spec(self) -> dict:
        """Everything a dataset's metadata needs to rebuild and describe this env."""
        return {
            "env_id": "toy",
            "env_config": asdict(self.config),
            "env_n_classes": self.n_classes,
            "obs_dim": self.obs_dim,
            "act_dim": self.act_dim,
            "u_dim": self.u_dim,
            "action_low": [self.action_low] * self.act_dim,
            "action_high": [self.action_high] * self.act_dim,
            "episode_len": self.config.episode_len,
        }

    # ---------------------------------------------------------------- gym-like single episode
    def reset(self, c: int, seed: Optional[int] = None) -> np.ndarray:
        if not 0 <= c < self.n_classes:
            raise ValueError(f"class c={c} outside [0, {self.n_classes})")
        if seed is not None:
            self._rng = np.random.default_rng(seed)
        self._c = int(c)
        self._t = 0
        self._state = self.sample_start(1, self._rng)[0]
        return self._state.copy()

    def step(self, action: np.ndarray):
        """Returns (s', r, terminated, truncated, info) with the true exogenous u in info["u"]."""
        if self._state is None:
            raise RuntimeError("call reset() before step()")
        u = self.sample_u(np.array([self._c]), self._rng)
        s_next = self.transition(self._state[None], np.asarray(action, dtype=float)[None], u)[0]
        r = float(self.reward(s_next[None])[0])
        self._t += 1
        self._state = s_next
        truncated = self._t >= self.config.episode_len
        return s_next.copy(), r, False, truncated, {"u": u[0], "c": self._c}


def check_config(cfg: ToyEnvConfig, prefix: str = "--toy.env.") -> None:
    """One-line ValueError naming the first field of an env config that cannot build an env."""
    from oilca import checks

    checks.fields(cfg, prefix, seed=checks.SEED, alpha=checks.Real(), sigma2_low=checks.POSITIVE,
                  sigma2_high=checks.Real(cfg.sigma2_low if isinstance(cfg.sigma2_low, (int, float)) else 0),
                  box=checks.POSITIVE, step_size=checks.POSITIVE, twist=checks.Real(), noise_scale=checks.NON_NEGATIVE,
                  leaky_slope=checks.POSITIVE, episode_len=checks.COUNT)


def check_spec(spec: dict) -> None:
    """The toy env a dataset (or a policy) records must rebuild: env_config holds ToyEnvConfig's fields with valid
    values, and env_n_classes covers the classes of the data and the held-out ones."""
    cfg, n_env = spec.get("env_config"), spec.get("env_n_classes")
    names = {f.name for f in fields(ToyEnvConfig)}
    if not isinstance(cfg, dict) or set(cfg) - names:
        raise ValueError(f"toy env_config must be an object with the fields of ToyEnvConfig ({', '.join(sorted(names))})")
    check_config(ToyEnvConfig(**cfg), "env_config.")
    if isinstance(n_env, bool) or not isinstance(n_env, int) or n_env < 1:
        raise ValueError(f"toy env_n_classes must be an integer >= 1, found {n_env!r}")
    n_data, held = spec.get("n_classes"), spec.get("heldout_classes", [])
    if isinstance(n_data, int) and n_data > n_env:
        raise ValueError(f"n_classes {n_data} exceeds the env's env_n_classes {n_env}")
    if not isinstance(held, list) or not all(isinstance(c, int) and not isinstance(c, bool) and 0 <= c < n_env for c in held):
        raise ValueError(f"heldout_classes must be a list of classes in [0, {n_env}), found {held!r}")


# ------------------------------------------------------------------------------------------ backend (envs.py interface)
@dataclass
class ToyConfig:
    """The toy data recipe (collect_data.py --toy.*): classes, episodes and behaviour policies of graded quality."""
    n_classes: int = 3
    """number of classes C of the auxiliary variable c present in the data"""
    heldout_classes: int = 1
    """extra classes the env knows that never appear in the data (unseen c for out-of-distribution tests)"""
    episodes_per_class: int = 100
    """episodes collected for every class c"""
    noise_levels: Tuple[float, ...] = (0.1, 0.3, 0.6, 1.0)
    """std of the Gaussian action noise of each goal-seeking behaviour policy (graded quality)"""
    random_policy: bool = True
    """also use a uniform-random behaviour policy"""
    env: ToyEnvConfig = field(default_factory=ToyEnvConfig)
    """parameters of the env (its seed fixes the dynamics, shared by every dataset seed)"""


def check_recipe(cfg: ToyConfig) -> None:
    """One-line ValueError naming the first bad `--toy.*` flag (collect_data.py checks them before collecting)."""
    from oilca import checks

    checks.fields(cfg, "--toy.", n_classes=checks.COUNT, heldout_classes=checks.COUNT0,
                  episodes_per_class=checks.COUNT, noise_levels=checks.NON_NEGATIVE)
    if not cfg.noise_levels and not cfg.random_policy:
        raise ValueError("--toy.noise-levels is empty and --toy.no-random-policy is set: no behaviour policy")
    if cfg.n_classes * cfg.episodes_per_class * cfg.env.episode_len > 10**8:
        raise ValueError("--toy.n-classes × --toy.episodes-per-class × --toy.env.episode-len exceeds 1e8 transitions")
    check_config(cfg.env)


def behavior_table(cfg: ToyConfig) -> list:
    table = [{"name": "goal_seeking", "noise_std": float(s), "label": f"goal+N(0,{s}²)"} for s in cfg.noise_levels]
    if cfg.random_policy:
        table.append({"name": "uniform_random", "label": "uniform random"})
    if not table:
        raise ValueError("no behavior policy: give --toy.noise-levels or --toy.random-policy")
    return table


def collect(cfg: ToyConfig, name: str, seed: int) -> dict:
    """Collect every episode in parallel: classes c = 0 … n_classes-1, `episodes_per_class` episodes each, behaviour
    policies assigned round-robin within every class (the goal-seeking controller plus Gaussian action noise of std
    `noise_levels[i]`, and uniform random actions). Returns the arrays (without the D_E split) and the env spec."""
    if name:
        raise ValueError(f"the toy env has no task name (got 'toy:{name}')")
    check_recipe(cfg)
    rng = np.random.default_rng(seed)
    env = ToyCausalNav(cfg.n_classes + cfg.heldout_classes, cfg.env)
    behaviors = behavior_table(cfg)
    E, T = cfg.n_classes * cfg.episodes_per_class, cfg.env.episode_len
    classes = np.repeat(np.arange(cfg.n_classes), cfg.episodes_per_class)
    policy_ids = np.tile(np.arange(cfg.episodes_per_class) % len(behaviors), cfg.n_classes)
    noise_std = np.array([b.get("noise_std", 0.0) for b in behaviors])[policy_ids][:, None]
    is_random = np.array([b["name"] == "uniform_random" for b in behaviors])[policy_ids][:, None]

    obs = np.zeros((E, T, 2)); act = np.zeros((E, T, 2)); nxt = np.zeros((E, T, 2))
    rew = np.zeros((E, T)); exo = np.zeros((E, T, 2))
    s = env.sample_start(E, rng)
    for t in range(T):
        a_goal = env.expert_action(s) + noise_std * rng.normal(size=(E, 2))
        a_rand = rng.uniform(env.action_low, env.action_high, size=(E, 2))
        a = np.clip(np.where(is_random, a_rand, a_goal), env.action_low, env.action_high)
        u = env.sample_u(classes, rng)
        s_next = env.transition(s, a, u)
        obs[:, t], act[:, t], nxt[:, t], exo[:, t] = s, a, s_next, u
        rew[:, t] = env.reward(s_next)
        s = s_next

    # store float32 and make s'_t == s_{t+1} exact after the cast (the contract checks it)
    obs, act, nxt = obs.astype(np.float32), act.astype(np.float32), nxt.astype(np.float32)
    obs[:, 1:] = nxt[:, :-1]
    rew = rew.astype(np.float32)
    returns = rew.astype(np.float64).sum(axis=1)
    timeouts = np.zeros((E, T), bool)
    timeouts[:, -1] = True  # the end of a toy episode is a time limit, never a terminal
    arrays = {
        "observations": obs.reshape(E * T, 2),
        "actions": act.reshape(E * T, 2),
        "next_observations": nxt.reshape(E * T, 2),
        "rewards": rew.reshape(E * T),
        "terminals": np.zeros(E * T, bool),
        "timeouts": timeouts.reshape(E * T),
        "episode_ids": np.repeat(np.arange(E), T).astype(np.int64),
        "aux": np.repeat(classes, T).astype(np.int64),
        "episode_returns": np.repeat(returns, T).astype(np.float32),
        "exogenous": exo.reshape(E * T, 2).astype(np.float32),
        "policy_ids": np.repeat(policy_ids, T).astype(np.int64),
    }
    spec = env.spec()
    spec.update(n_classes=cfg.n_classes,
                aux_meaning="index of the exogenous-noise class: u ~ N(mu(c), diag sigma2(c)) every step",
                heldout_classes=list(range(cfg.n_classes, cfg.n_classes + cfg.heldout_classes)),
                class_table={"u_mean": env.u_mean.tolist(), "u_var": env.u_var.tolist()},
                target=env.target.tolist(), behavior_policies=behaviors)
    return {"arrays": arrays, "returns": returns, "classes": classes, "policy_ids": policy_ids, "spec": spec, "rng": rng,
            "behaviors": behaviors}


def make_env(spec: dict) -> "ToyCausalNav":
    """The toy env a dataset's metadata (or a policy's env record) describes."""
    return ToyCausalNav(spec["env_n_classes"], ToyEnvConfig(**spec["env_config"]))


def rollout(spec: dict, policy: Callable, split: str, classes: Sequence[int], episodes: int, seed: int) -> dict:
    """Run `episodes` episodes in parallel, classes assigned round-robin (the split only names them here)."""
    env = make_env(spec)
    bad = [c for c in classes if not 0 <= c < env.n_classes]
    if bad:
        raise ValueError(f"classes {bad} are outside the env's {env.n_classes} classes")
    rng = np.random.default_rng(seed)
    ep_classes = np.array([classes[i % len(classes)] for i in range(episodes)])
    s = env.sample_start(episodes, rng)
    returns = np.zeros(episodes)
    for _ in range(env.config.episode_len):
        a = np.clip(policy(s), env.action_low, env.action_high)
        s = env.transition(s, a, env.sample_u(ep_classes, rng))
        returns += env.reward(s)
    return {"returns": returns, "episode_classes": ep_classes}


def expert_episodes(spec: dict, classes: Sequence[int], seed: int) -> dict:
    """Whole episodes of the env's expert (the goal-seeking controller, no action noise), episode i under class
    classes[i]; rows [E·T] of observations, actions, next_observations, rewards, exogenous (the true u), aux and
    episode_returns. Draws from default_rng([seed, 2]), a stream no dataset or evaluation uses."""
    env = make_env(spec)
    classes = np.asarray(classes, dtype=np.int64)
    if len(classes) == 0 or classes.min() < 0 or classes.max() >= env.n_classes:
        raise ValueError(f"expert episodes need classes in [0, {env.n_classes}), got {classes.tolist()}")
    rng = np.random.default_rng([seed, 2])
    E, T = len(classes), env.config.episode_len
    obs, act, nxt = (np.zeros((E, T, DIM)) for _ in range(3))
    rew, exo = np.zeros((E, T)), np.zeros((E, T, DIM))
    s = env.sample_start(E, rng)
    for t in range(T):
        a = env.expert_action(s)
        u = env.sample_u(classes, rng)
        s_next = env.transition(s, a, u)
        obs[:, t], act[:, t], nxt[:, t], exo[:, t], rew[:, t] = s, a, s_next, u, env.reward(s_next)
        s = s_next
    returns = rew.sum(1)
    flat = lambda x: x.reshape(E * T, *x.shape[2:]).astype(np.float32)  # noqa: E731
    return {"observations": flat(obs), "actions": flat(act), "next_observations": flat(nxt), "rewards": flat(rew),
            "exogenous": flat(exo), "aux": np.repeat(classes, T), "episode_returns": np.repeat(returns, T).astype(np.float32)}


def reference_policy(spec: dict, kind: str, seed: int) -> Callable:
    """'expert': the goal-seeking controller; 'random': uniform actions."""
    env = make_env(spec)
    if kind == "expert":
        return env.expert_action
    rng = np.random.default_rng(seed + 1)
    return lambda obs: rng.uniform(env.action_low, env.action_high, size=(len(obs), env.act_dim))


# ------------------------------------------------------------------------------------------ CLI: class table and rollouts
@dataclass
class Args:
    env: ToyEnvConfig
    """the environment's parameters"""
    n_classes: int = 4
    """number of exogenous classes C the env knows"""
    episodes: int = 5
    """goal-seeking episodes per class to summarise"""
    seed: int = 0
    """seed of the episodes' start states and exogenous draws"""
    plot_path: Optional[str] = None
    """if set, draw the trajectories coloured by class to this PNG"""


def main(args: Args) -> dict:
    from oilca import checks
    from oilca import contract

    checks.fields(args, n_classes=checks.COUNT, episodes=checks.COUNT, seed=checks.SEED)
    check_config(args.env, "--env.")
    contract.check_paths({}, files={"--plot-path": args.plot_path})
    env = ToyCausalNav(args.n_classes, args.env)
    print(json.dumps({"target": env.target.round(3).tolist(), "gamma": env.gamma.tolist(),
                      "u_mean": env.u_mean.round(3).tolist(), "u_var": env.u_var.round(3).tolist()}))
    trajectories, summary = {}, {}
    for c in range(env.n_classes):
        returns = []
        for ep in range(args.episodes):
            s = env.reset(c, seed=args.seed * 100_003 + c * 1_000 + ep)
            path, ret, done = [s], 0.0, False
            while not done:
                s, r, terminated, truncated, _ = env.step(env.expert_action(s))
                path.append(s)
                ret += r
                done = terminated or truncated
            returns.append(ret)
            trajectories.setdefault(c, []).append(np.array(path))
        summary[c] = float(np.mean(returns))
        print(f"class {c}: μ(c)={env.u_mean[c].round(2)}, σ²(c)={env.u_var[c].round(2)}, "
              f"goal-seeking return {np.mean(returns):.2f} ± {np.std(returns):.2f}")
    if args.plot_path:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt

        fig, ax = plt.subplots(figsize=(5, 5))
        for c, paths in trajectories.items():
            for i, p in enumerate(paths):
                ax.plot(p[:, 0], p[:, 1], color=f"C{c}", alpha=0.7, label=f"c={c}" if i == 0 else None)
        ax.scatter(*env.target, marker="*", s=200, color="k", label="target")
        B = env.config.box
        ax.set_xlim(-B, B), ax.set_ylim(-B, B), ax.set_aspect("equal"), ax.legend(fontsize=7)
        contract.save_figure(args.plot_path, fig)
        plt.close(fig)
    return {"goal_seeking_return": summary}


if __name__ == "__main__":
    from oilca import cli

    cli.run(main, Args)
