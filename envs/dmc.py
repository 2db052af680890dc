"""DeepMind Control backend (OILCA §5.2, Table 1, Appendix "DeepMind Control Suite").

The environment variation c ∈ {0, …, C-1} is one of C Gaussian action-perturbation distributions: every action
a ∈ [-1, 1]^A that the acting policy commands is executed as clip(a + ε, -1, 1) with ε ~ N(μ_c, diag σ_c²). The
per-class means μ_c ~ U[-noise_mean, noise_mean]^A and stds σ_c ~ U[noise_std_low, noise_std_high]^A are drawn once
from `noise_seed` and recorded in the dataset metadata (`class_table`), so evaluation applies exactly the same
perturbations. The dataset stores the *commanded* action a (what the policy chose) and ε as the exogenous variable
(`exogenous`, u_dim = A): s' = f(s, a, u) with u = ε is the structural model the iVAE is asked to invert.

Observations are dm_control's observation dict flattened in the env's own key order (recorded in the metadata as
`obs_keys` with sizes). Episodes are 1000 steps; the end is a time limit (timeout), never a terminal. Episode i
starts from task seed (seed·1_000_003 + i) mod 2³², so an episode is reproducible on its own.

Behaviour policies of graded quality are policy artifacts (docs/contract.md) written by train_behavior.py at chosen
steps (`--dmc.snapshots`), or, for manipulator-insert_ball and manipulator-insert_peg, where SAC does not learn
here, the scripted expert of dmc_scripted.py (dmc_scripted_peg.py) with Gaussian action noise of graded stds
(`--dmc.scripted-noise`), plus optionally uniform-random actions. Episodes are assigned round-robin to classes and,
within a class, to behaviour policies. Many episodes are stepped in lockstep so that the policy runs batched.

Backend of envs.py (`collect`, `rollout`, `reference_policy`, the interface shared with toy_env.py and cw_env.py);
train_behavior.py uses `DMCEnv`.
"""

import os
from dataclasses import dataclass
from typing import Callable, Dict, List, Optional, Sequence, Tuple

# Nothing here renders, so by default no GL library is loaded at all (dm_control and mujoco skip their renderer with
# "disable"; no EGL or OSMesa needed). To render (videos), set MUJOCO_GL=egl, osmesa or glfw before this import.
os.environ.setdefault("MUJOCO_GL", "disable")

import numpy as np

from oilca import contract
from oilca.progress import Progress

TABLE1_TASKS = ("cartpole-swingup", "cheetah-run", "finger-turn_hard", "fish-swim", "humanoid-run",
                "manipulator-insert_ball", "manipulator-insert_peg", "walker-stand", "walker-walk")
EPISODE_LEN = 1000


@dataclass
class DMCConfig:
    snapshots: Tuple[str, ...] = ()
    """behaviour policies: policy artifacts of train_behavior.py (e.g. runs/sac_<task>/snapshots/step_*.pt)"""
    scripted_noise: Tuple[float, ...] = ()
    """behaviour policies: the scripted expert of dmc_scripted.py (manipulator-insert_ball and -insert_peg) with
    Gaussian action noise of each of these stds (0: the expert itself); the expert reference is then the scripted
    expert"""
    random_policy: bool = False
    """also use uniform-random commanded actions as a behaviour policy"""
    episodes: int = 200
    """episodes collected in total (spread evenly over the classes of c)"""
    n_classes: int = 3
    """number of action-perturbation distributions C (the paper uses 3)"""
    noise_seed: int = 0
    """seed that draws μ_c and σ_c (keep it fixed so that every dataset and evaluation shares the perturbations)"""
    noise_mean: float = 0.2
    """μ_c ~ U[-noise_mean, noise_mean]^A"""
    noise_std_low: float = 0.05
    """σ_c ~ U[noise_std_low, noise_std_high]^A"""
    noise_std_high: float = 0.4
    """upper end of the per-dimension perturbation std"""
    lockstep: int = 25
    """episodes stepped together (the policy runs on one batch of observations per step)"""
    workers: int = 1
    """processes that collect, each stepping whole lockstep batches (the same bytes for any number; not recorded)"""


def split_name(name: str) -> Tuple[str, str]:
    domain, sep, task = name.partition("-")
    if not sep or not domain or not task:
        raise ValueError(f"bad DeepMind Control id 'dmc:{name}': use dmc:<domain>-<task>, e.g. dmc:cartpole-swingup")
    return domain, task


def load_env(name: str, task_seed: int = 0):
    from dm_control import suite

    domain, task = split_name(name)
    if (domain, task) not in suite.ALL_TASKS:
        raise ValueError(f"unknown DeepMind Control task 'dmc:{name}' (Table 1 tasks: {', '.join(TABLE1_TASKS)})")
    return suite.load(domain, task, task_kwargs={"random": task_seed})


def check_spec(spec: dict) -> None:
    """A DeepMind Control env description must name a task (dmc:<domain>-<task>, one of dm_control's suite when it
    is installed) and hold the perturbation table of its classes ([C][act_dim] means and non-negative stds)."""
    domain, task = split_name(spec["env_id"].partition(":")[2])
    try:
        from dm_control import suite
    except ImportError:  # a machine without dm_control (e.g. training on a GPU, evaluating elsewhere)
        suite = None
    if suite is not None and (domain, task) not in suite.ALL_TASKS:
        raise ValueError(f"unknown DeepMind Control task '{spec['env_id']}'")
    table, act_dim = spec.get("class_table"), spec.get("act_dim")
    if not isinstance(table, dict):
        raise ValueError(f"{spec['env_id']}: the env description has no 'class_table' (a behaviour snapshot records "
                         f"only env_id and dims: evaluate it with --env-dataset)")
    for key in ("mean", "std"):
        rows = table.get(key)
        if not (isinstance(rows, list) and rows and all(isinstance(r, list) and len(r) == act_dim and all(
                isinstance(x, (int, float)) and not isinstance(x, bool) and np.isfinite(x) and (key == "mean" or x >= 0)
                for x in r) for r in rows)):
            raise ValueError(f"{spec['env_id']}: class_table '{key}' must be [C][act_dim={act_dim}] finite numbers"
                             + (" >= 0" if key == "std" else ""))
    if isinstance(spec.get("n_classes"), int) and spec["n_classes"] > len(table["mean"]):
        raise ValueError(f"{spec['env_id']}: n_classes {spec['n_classes']} exceeds the {len(table['mean'])} rows of class_table")


def obs_layout(env) -> List[Tuple[str, int]]:
    return [(k, int(np.prod(v.shape))) for k, v in env.observation_spec().items()]


def flatten(obs: Dict[str, np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(v, np.float64).ravel() for v in obs.values()])


def noise_table(act_dim: int, n_classes: int, seed: int, mean: float, std_low: float, std_high: float) -> dict:
    """The C perturbation distributions: {'mean': [C][A], 'std': [C][A]}."""
    rng = np.random.default_rng(seed)
    mu = rng.uniform(-mean, mean, size=(n_classes, act_dim))
    sd = rng.uniform(std_low, std_high, size=(n_classes, act_dim))
    return {"mean": mu.round(6).tolist(), "std": sd.round(6).tolist()}


class DMCEnv:
    """One dm_control task with a flat observation vector and a gym-like API (used by train_behavior.py).
    `perturb_class` applies that class's action perturbation (None: the clean env)."""

    def __init__(self, name: str, seed: int, table: Optional[dict] = None, perturb_class: Optional[int] = None):
        self.env = load_env(name, seed)
        spec = self.env.action_spec()
        self.obs_dim = sum(n for _, n in obs_layout(self.env))
        self.act_dim = int(spec.shape[0])
        self.action_low, self.action_high = spec.minimum.astype(np.float32), spec.maximum.astype(np.float32)
        self.max_episode_steps = EPISODE_LEN
        self.rng = np.random.default_rng(seed + 1)
        self.table, self.c = table, perturb_class

    def reset(self) -> np.ndarray:
        return flatten(self.env.reset().observation).astype(np.float32)

    def step(self, a: np.ndarray):
        a = np.asarray(a, np.float64)
        if self.c is not None:
            a = a + self.rng.normal(self.table["mean"][self.c], self.table["std"][self.c])
        ts = self.env.step(np.clip(a, self.action_low, self.action_high))
        terminated = ts.discount is not None and ts.discount == 0.0 and ts.last()
        return flatten(ts.observation).astype(np.float32), float(ts.reward or 0.0), terminated, ts.last() and not terminated


def load_behaviors(cfg: DMCConfig, obs_dim: int, act_dim: int, env_id: str) -> Tuple[list, list]:
    """(table of behaviour descriptions, list of policy callables). A missing snapshot is a one-line error."""
    table, policies = [], []
    layout = obs_layout(load_env(env_id.partition(":")[2], 0)) if cfg.scripted_noise else None
    for std in cfg.scripted_noise:
        if not np.isfinite(std) or std < 0:
            raise ValueError(f"--dmc.scripted-noise must be finite and >= 0, got {std}")
        expert = scripted_expert(env_id, float(std), layout)
        source = type(expert).__module__.rpartition(".")[2] + ".py"  # the file of the expert dmc_scripted.load chose
        table.append({"name": "scripted", "noise_std": float(std), "source": f"scripted controller ({source})",
                      "label": "scripted" if std == 0 else f"scripted+N(0,{std:g}²)"})
        policies.append(expert)
    for path in cfg.snapshots:
        art = contract.load_snapshot(path, obs_dim, act_dim, env_id)
        table.append({"name": "snapshot", "path": path, "train_step": art.get("train_step"),
                      "label": f"snapshot step {art.get('train_step')}"})
        policies.append(contract.build_policy(art))
    if cfg.random_policy:
        table.append({"name": "uniform_random", "label": "uniform random"})
        policies.append(None)
    if not table:
        raise ValueError(f"no behaviour policy for {env_id}: pass --dmc.snapshots (train_behavior.py), "
                         f"--dmc.scripted-noise or --dmc.random-policy")
    return table, policies


def scripted_expert(env_id: str, noise_std: float = 0.0, layout: Optional[list] = None):
    """dmc_scripted.py's expert of this task (a one-line error for a task it does not script), acting with Gaussian
    action noise of std `noise_std` drawn from each episode's own stream. `layout`: the task's observation layout
    (obs_layout), when the caller has it already; else one env is loaded to read it."""
    from envs import dmc_scripted

    name = env_id.partition(":")[2]
    expert = dmc_scripted.load(name, layout if layout is not None else obs_layout(load_env(name, 0)))
    expert.noise_std = noise_std
    return expert


def run_episodes(name: str, policies: Sequence[Optional[Callable]], table: dict, ep_classes: np.ndarray,
                 ep_policies: np.ndarray, task_seeds: np.ndarray, seed: int, lockstep: int, record: bool) -> dict:
    """Step the episodes in chunks of `lockstep` envs; the policies act on batched observations. Episode i draws
    its perturbations (and random actions) from its own stream default_rng([seed, i]). (`lockstep` still changes
    the float rounding of the batched policy, so it is part of a dataset's arguments.) Returns per-episode returns and, with `record`, the transitions [E, T, ·]."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # batches of a few dozen rows: extra threads only add waiting
    try:
        return _run_episodes(name, policies, table, ep_classes, ep_policies, task_seeds, seed, lockstep, record)
    finally:
        torch.set_num_threads(threads)


def _run_episodes(name, policies, table, ep_classes, ep_policies, task_seeds, seed, lockstep, record) -> dict:
    E = len(ep_classes)
    envs = [load_env(name, 0) for _ in range(min(lockstep, E))]
    out = _empty_out(E, EPISODE_LEN, envs[0], record)
    prog = Progress(f"collect dmc:{name}", total=E, unit="episodes") if record else None  # evaluation stays quiet
    for start in range(0, E, lockstep):
        idx = np.arange(start, min(start + lockstep, E))
        _store(out, idx, _run_chunk(envs, policies, table, idx, ep_classes, ep_policies, task_seeds, seed,
                                    EPISODE_LEN, record))
        if record:
            done = idx[-1] + 1
            prog.update(done, lambda: {"env_steps_per_s": prog.rate(done) * EPISODE_LEN})
    return out


def _dims(env) -> Tuple[int, int]:
    """(observation size, action size) of a loaded env."""
    return sum(n for _, n in obs_layout(env)), int(env.action_spec().shape[0])


def _empty_out(E: int, T: int, env, record: bool) -> dict:
    """Zeroed arrays for E episodes of T steps: returns and, with `record`, obs [E, T+1], act, rew and eps."""
    obs_dim, A = _dims(env)
    out = {"returns": np.zeros(E)}
    if record:
        out.update(obs=np.zeros((E, T + 1, obs_dim), np.float32), act=np.zeros((E, T, A), np.float32),
                   rew=np.zeros((E, T), np.float32), eps=np.zeros((E, T, A), np.float32))
    return out


def _store(out: dict, idx: np.ndarray, chunk: dict) -> None:
    for k, v in chunk.items():
        out[k][idx] = v


def _run_chunk(envs, policies, table, idx, ep_classes, ep_policies, task_seeds, seed, T, record) -> dict:
    """Episodes `idx` (one lockstep batch, global episode indices) on envs[:len(idx)]: their returns and, with
    `record`, their transitions. What an episode does depends only on its index, not on the batch's other
    episodes or on which process runs it (the batch is the same in every process: the policies see the same rows)."""
    mu, sd = np.asarray(table["mean"]), np.asarray(table["std"])
    spec = envs[0].action_spec()
    low, high = spec.minimum, spec.maximum
    n = len(idx)
    out = _empty_out(n, T, envs[0], record)
    obs_dim, A = _dims(envs[0])
    rngs = [np.random.default_rng([seed, int(i)]) for i in idx]
    s = np.zeros((n, obs_dim))
    for j, i in enumerate(idx):
        envs[j].task.random.seed(int(task_seeds[i]))
        s[j] = flatten(envs[j].reset().observation)
    for t in range(T):
        a = np.zeros((n, A))
        for p, policy in enumerate(policies):
            rows = np.flatnonzero(ep_policies[idx] == p)
            if len(rows) and policy is None:
                a[rows] = np.array([rngs[j].uniform(low, high) for j in rows])
            elif len(rows) and getattr(policy, "needs_env", False):  # the scripted expert reads the env's model
                a[rows] = policy.act([envs[j] for j in rows], s[rows], t)
                if policy.noise_std > 0:
                    a[rows] += policy.noise_std * np.array([rngs[j].normal(size=A) for j in rows])
            elif len(rows):
                a[rows] = policy(s[rows])
        a = np.clip(a, low, high)
        c = ep_classes[idx]
        eps = mu[c] + sd[c] * np.array([r.normal(size=A) for r in rngs])
        if record:
            out["obs"][:, t], out["act"][:, t], out["eps"][:, t] = s, a, eps
        for j in range(n):
            ts = envs[j].step(np.clip(a[j] + eps[j], low, high))
            s[j] = flatten(ts.observation)
            out["returns"][j] += ts.reward or 0.0
            if record:
                out["rew"][j, t] = ts.reward or 0.0
    if record:
        out["obs"][:, T] = s
    return out


# ------------------------------------------------------------------------- collection in several processes
_WORKER: dict = {}


def _worker_start(cfg: "DMCConfig", name: str, table: dict, ep_classes, ep_policies, task_seeds, seed: int) -> None:
    """A collection worker: its own envs and behaviour policies, rebuilt from the arguments as the parent builds
    them, kept for every batch it runs."""
    import torch

    torch.set_num_threads(1)  # one thread per worker: the workers are the parallelism
    envs = [load_env(name, 0) for _ in range(min(cfg.lockstep, len(ep_classes)))]
    obs_dim, A = _dims(envs[0])
    _WORKER.update(envs=envs, policies=load_behaviors(cfg, obs_dim, A, f"dmc:{name}")[1], table=table,
                   ep_classes=ep_classes, ep_policies=ep_policies, task_seeds=task_seeds, seed=seed)


def _worker_chunk(job: tuple) -> Tuple[np.ndarray, dict]:
    idx, T = job
    w = _WORKER
    return idx, _run_chunk(w["envs"], w["policies"], w["table"], idx, w["ep_classes"], w["ep_policies"],
                           w["task_seeds"], w["seed"], T, record=True)


def _collect_parallel(cfg: "DMCConfig", name: str, table: dict, ep_classes, ep_policies, task_seeds, seed) -> dict:
    """run_episodes(record=True) with the lockstep batches shared among cfg.workers processes (fresh interpreters):
    the same arrays, byte for byte, as one process makes."""
    import multiprocessing

    E = len(ep_classes)
    out = _empty_out(E, EPISODE_LEN, load_env(name, 0), record=True)
    jobs = [(np.arange(b, min(b + cfg.lockstep, E)), EPISODE_LEN) for b in range(0, E, cfg.lockstep)]
    prog = Progress(f"collect dmc:{name}", total=E, unit="episodes")
    count = 0
    ctx = multiprocessing.get_context("spawn")  # no torch or MuJoCo state is forked
    with ctx.Pool(min(cfg.workers, len(jobs)), _worker_start,
                  (cfg, name, table, ep_classes, ep_policies, task_seeds, seed)) as pool:
        for idx, chunk in pool.imap_unordered(_worker_chunk, jobs):
            _store(out, idx, chunk)
            count += len(idx)
            prog.update(count, lambda: {"env_steps_per_s": prog.rate(count) * EPISODE_LEN})
    return out


def collect(cfg: DMCConfig, name: str, seed: int) -> dict:
    """Collect cfg.episodes 1000-step episodes; the return value follows collect_data.py's backend interface."""
    env_id = f"dmc:{name}"
    env = load_env(name, 0)
    layout, spec = obs_layout(env), env.action_spec()
    obs_dim, A = sum(n for _, n in layout), int(spec.shape[0])
    if cfg.episodes < 1 or cfg.n_classes < 1 or cfg.lockstep < 1 or cfg.workers < 1:
        raise ValueError("need --dmc.episodes, --dmc.n-classes, --dmc.lockstep and --dmc.workers >= 1")
    behaviors, policies = load_behaviors(cfg, obs_dim, A, env_id)
    table = noise_table(A, cfg.n_classes, cfg.noise_seed, cfg.noise_mean, cfg.noise_std_low, cfg.noise_std_high)
    rng = np.random.default_rng(seed)  # only for the D_E draw in collect_data.py
    E, T = cfg.episodes, EPISODE_LEN
    ep_classes = np.arange(E) % cfg.n_classes
    ep_policies = (np.arange(E) // cfg.n_classes) % len(policies)
    task_seeds = (seed * 1_000_003 + np.arange(E)) % 2**32
    if cfg.workers > 1 and E > cfg.lockstep:
        out = _collect_parallel(cfg, name, table, ep_classes, ep_policies, task_seeds, seed)
    else:
        out = run_episodes(name, policies, table, ep_classes, ep_policies, task_seeds, seed, cfg.lockstep, record=True)
    obs, nxt = out["obs"][:, :-1], out["obs"][:, 1:]
    returns = out["rew"].astype(np.float64).sum(1)
    timeouts = np.zeros((E, T), bool)
    timeouts[:, -1] = True
    arrays = {
        "observations": obs.reshape(E * T, obs_dim), "actions": out["act"].reshape(E * T, A),
        "next_observations": nxt.reshape(E * T, obs_dim), "rewards": out["rew"].reshape(E * T),
        "terminals": np.zeros(E * T, bool), "timeouts": timeouts.reshape(E * T),
        "episode_ids": np.repeat(np.arange(E), T).astype(np.int64), "aux": np.repeat(ep_classes, T).astype(np.int64),
        "episode_returns": np.repeat(returns, T).astype(np.float32), "policy_ids": np.repeat(ep_policies, T).astype(np.int64),
        "exogenous": out["eps"].reshape(E * T, A),
    }
    env_spec = {"env_id": env_id, "obs_dim": obs_dim, "act_dim": A, "u_dim": A,
                "action_low": spec.minimum.astype(np.float32).tolist(), "action_high": spec.maximum.astype(np.float32).tolist(),
                "episode_len": T, "n_classes": cfg.n_classes, "heldout_classes": [], "obs_keys": layout,
                "aux_meaning": "index of the Gaussian action perturbation: executed action = clip(a + eps, -1, 1), "
                               "eps ~ N(mean[c], diag std[c]^2); 'exogenous' holds eps",
                "class_table": table, "noise_seed": cfg.noise_seed, "behavior_policies": behaviors,
                "task_seed_rule": "episode i of data seed s starts from task seed (s*1000003 + i) mod 2**32"}
    return {"arrays": arrays, "returns": returns, "classes": ep_classes, "policy_ids": ep_policies,
            "behaviors": behaviors, "spec": env_spec, "rng": rng}


def rollout(spec: dict, policy: Callable, split: str, classes: Sequence[int], episodes: int, seed: int) -> dict:
    """Evaluation: `episodes` 1000-step episodes of `policy` under the perturbations of `classes` (round-robin; the
    split only names them).
    Task seeds (seed·1_000_003 + i) mod 2³², perturbations from default_rng([seed, i])."""
    name = spec["env_id"].partition(":")[2]
    bad = [c for c in classes if not 0 <= c < len(spec["class_table"]["mean"])]
    if bad:
        raise ValueError(f"classes {bad} are outside the {len(spec['class_table']['mean'])} perturbation classes of {spec['env_id']}")
    ep_classes = np.array([classes[i % len(classes)] for i in range(episodes)])
    out = run_episodes(name, [policy], spec["class_table"], ep_classes, np.zeros(episodes, int),
                       (seed * 1_000_003 + np.arange(episodes)) % 2**32, seed, 25, record=False)
    return {"returns": out["returns"], "episode_classes": ep_classes}


def expert_episodes(spec: dict, classes: Sequence[int], seed: int) -> dict:
    """Whole 1000-step episodes of the expert reference (the most trained behaviour snapshot), episode i under the
    perturbation class classes[i]; rows [E·T] as in collect(), plus aux and episode_returns. Task seeds and
    perturbations come from seed 20_000 + `seed`, apart from data seeds (small) and evaluation (10_000)."""
    name = spec["env_id"].partition(":")[2]
    classes = np.asarray(classes, dtype=np.int64)
    n = len(spec["class_table"]["mean"])
    if len(classes) == 0 or classes.min() < 0 or classes.max() >= n:
        raise ValueError(f"expert episodes need classes in [0, {n}), got {classes.tolist()}")
    stream, E, T = 20_000 + seed, len(classes), EPISODE_LEN
    out = run_episodes(name, [reference_policy(spec, "expert", seed)], spec["class_table"], classes,
                       np.zeros(E, int), (stream * 1_000_003 + np.arange(E)) % 2**32, stream, 25, record=True)
    returns = out["rew"].astype(np.float64).sum(1)
    flat = lambda x: x.reshape(E * T, *x.shape[2:])  # noqa: E731
    return {"observations": flat(out["obs"][:, :-1]), "actions": flat(out["act"]),
            "next_observations": flat(out["obs"][:, 1:]), "rewards": flat(out["rew"]), "exogenous": flat(out["eps"]),
            "aux": np.repeat(classes, T), "episode_returns": np.repeat(returns, T).astype(np.float32)}


def reference_policy(spec: dict, kind: str, seed: int) -> Callable:
    """'expert': the scripted expert where the dataset's behaviours are scripted, else the last (most trained)
    behaviour snapshot recorded in the dataset; 'random': uniform actions."""
    low, high = np.asarray(spec["action_low"]), np.asarray(spec["action_high"])
    if kind == "random":
        rng = np.random.default_rng(seed + 1)
        return lambda obs: rng.uniform(low, high, size=(len(obs), len(low)))
    if any(b["name"] == "scripted" for b in spec.get("behavior_policies", [])):
        return scripted_expert(spec["env_id"])
    snaps = [b for b in spec.get("behavior_policies", []) if b["name"] == "snapshot"]
    if not snaps:
        raise ValueError(f"{spec['env_id']}: the dataset records no behaviour snapshot to use as the expert reference")
    best = max(snaps, key=lambda b: b.get("train_step") or 0)
    if not os.path.exists(best["path"]):
        raise ValueError(f"expert reference snapshot {best['path']} (recorded in the dataset) does not exist here")
    return contract.build_policy(contract.load_policy(best["path"]))
