"""CausalWorld backend (OILCA §5.3, Tables 2, 5, 6, 7): datasets under do-interventions, evaluation in space A / B.

CausalWorld (Ahmed et al. 2021) is a TriFinger robot in pybullet. Every task exposes variables that can be set by a
do-intervention, each with two disjoint ranges: *space A* (training distribution) and *space B* (out of
distribution). This module uses five of them as the features that c intervenes on:

    feature          CausalWorld variable                   space A            space B
    stage_color      stage_color (RGB)                      [0, 0.5]³          [0.5, 1]³
    stage_friction   stage_friction                         [0.3, 0.6]         [0.6, 0.8]
    floor_friction   floor_friction                         [0.3, 0.6]         [0.6, 0.8]
    block_mass       mass of every movable block (tool_*)   [0.015, 0.045]     [0.045, 0.1]
    block_color      color of every movable block (RGB)     [0.5, 1]³          [0, 0.5]³

(the ranges are read from the env itself and recorded in the metadata as `spaces`).

Data (`collect`, used by `collect_data.py --env cw:<task>`):
  * c ∈ {0, …, C-1} is one fixed do-intervention on `features` inside space A: class c sets every feature
    dimension to the point (c + 0.5)/C of its space A range (or the values given by `--cw.interventions`). Other
    variables keep their defaults. The class table is recorded in the metadata (`class_table`).
  * Every episode samples a new goal from space A (the task's own goal sampler, seeded per episode), so episodes
    differ; the blocks start from the task's default pose. pick_and_place keeps its default goal, because its
    shipped expert was trained on that goal only (success 1.0 there, about 0.1 on resampled goals); so do towers,
    stacked_blocks, creative_stacked_blocks and general, whose goal samplers change the number and size of the blocks
    (hence the observation size). Episodes last the task's default time limit
    (pushing/picking 10 s = 833 steps at skip_frame 3, reaching 416, pick_and_place 1666); the end is a timeout.
  * Behaviour policies of graded quality, round-robin over the episodes of every class: the expert plus Gaussian
    action noise of std `noise_levels[i]` (in normalised joint-position units, clipped to [-1, 1]), optional
    extra `snapshots` (policy artifacts of train_behavior.py), and uniform-random actions.
  * The expert is the PPO policy shipped inside the causal-world package (reaching, pushing, picking,
    pick_and_place, stacking2), run with numpy/torch from its stable-baselines zip (no TensorFlow): a tanh MLP on
    normalised observations whose mean action is clipped to [-1, 1], as PPO2.predict(deterministic=True) does.
    The shipped stacking2 expert never stacks (it carries the lower block about; docs/causalworld.md), and
    towers, stacked_blocks, creative_stacked_blocks and general ship no expert: for these block tasks
    `--cw.expert scripted` uses cw_scripted.py's pick-and-place script instead, bridged to normalised joint positions
    by inverse kinematics (recorded as env_config.expert), or pass a train_behavior.py snapshot as
    `--cw.expert-snapshot`. general runs on one fixed structure (STRUCTURES, recorded as env_config.structure):
    its default stage is refused by CausalWorld's own feasibility check.
Observations are CausalWorld's normalised structured observations, actions its normalised joint positions.

Evaluation (`rollout`, used by `evaluate.py --env cw:<task> --space A|B`): every episode draws each intervened
feature uniformly from space A (in distribution, Table 6) or space B (out of distribution, Table 2); goals are
sampled from space A in both (pick_and_place: its default goal), so the shift is in the intervened variables alone. It reports the return and
CausalWorld's fractional success (`info["fractional_success"]`, the volumetric overlap with the goal) at the end of
the episode.

Compatibility layer (CausalWorld 1.2 on Python 3.11): installed with `pip install --no-deps` beside pybullet 3.2.7
and gym 0.26.2 (scripts/setup.sh); `np.bool` / `np.float` are shimmed before import; the stage's
`get_current_variable_values_for_arena` is patched for CausalWorld issue #106 (it read the arena from client id
`True`); gym's import banner is silenced. The env is created after our seeding and never touches our generators:
every episode reseeds the global numpy RNG it uses for goals from its own seed.

Run `python cw_env.py --tasks pushing picking pick_and_place --episodes 10` to measure the shipped experts, and
`python cw_env.py --tasks stacking2 towers --expert scripted --episodes 10` the scripted one.
"""

import contextlib
import importlib.util
import io
import json
import os
import sys
import time
import zipfile
from dataclasses import asdict, dataclass, field
from typing import Callable, Dict, List, Optional, Sequence, Tuple

if __name__ == "__main__" and not __package__:  # `python envs/cw.py`: import from the repo root, as `-m envs.cw` does
    sys.path[0] = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

import numpy as np  # noqa: E402

from oilca import contract  # noqa: E402
from oilca.progress import Progress  # noqa: E402

SHIPPED_EXPERTS = {"reaching": "reaching_ppo_curr1.zip", "pushing": "pushing_ppo_curr1.zip",
                   "picking": "picking_ppo_curr1.zip", "pick_and_place": "pick_and_place_ppo_curr0.zip",
                   "stacking2": "stacking2_ppo_curr1.zip"}
TASKS = tuple(SHIPPED_EXPERTS) + ("towers", "stacked_blocks", "creative_stacked_blocks", "general")
ARENA_FEATURES = ("stage_color", "stage_friction", "floor_friction")
BLOCK_FEATURES = {"block_mass": "mass", "block_color": "color"}
FEATURES = ARENA_FEATURES + tuple(BLOCK_FEATURES)
# The shipped pick_and_place expert (pick_and_place_ppo_curr0) was trained on the default goal only: with goals
# resampled from space A its fractional success drops from 1.0 to about 0.1, so this task keeps its default goal.
# towers, stacked_blocks, creative_stacked_blocks and general resample the goal *structure* (number and size of the
# blocks), which changes the observation size between episodes: they keep their default goal too.
DEFAULT_GOAL_TASKS = ("pick_and_place", "towers", "stacked_blocks", "creative_stacked_blocks", "general")
# general's default stage cannot be used: one of the five 5 cm blocks its goal generator drops from the air rolls off
# the arena, so CausalWorld's feasibility check refuses every later intervention on that stage (even none). Its envs
# are therefore built with one fixed structure, set through the task generator's own variables (space A of each):
# 5 blocks of 6.5 cm and 20 g (the size and mass of stacking2's blocks, which the scripted grip holds; the default
# 80 g is outside general's space A [0.02, 0.06]), dropped at the positions numpy seed `seed` draws. make_env checks
# that the stage is feasible; the structure is recorded in the dataset's env_config.
# creative_stacked_blocks's default stage (8 levels of three 3.5 cm blocks, 24 in all, stacked at construction) is
# refused at every reset the same way ("CausalWorld refused the intervention ... 20 times"). It is built with the
# smallest structure of its space A: 3 levels of one block each (max_level_width 0.12 holds one 6.5 cm block), 6.5 cm
# high and 20 g as general's, their lengths drawn by the generator at numpy seed `seed`. Its goal shows the bottom and
# top levels only; the middle level is left to the agent (the task's "creative" part; cw_scripted.py infers it).
STRUCTURES = {"general": {"nums_objects": 5, "tool_block_size": 0.065, "blocks_mass": 0.02, "seed": 0},
              "creative_stacked_blocks": {"stack_levels": 3, "blocks_min_size": 0.065, "blocks_mass": 0.02,
                                          "max_level_width": 0.12, "seed": 0}}
SCRIPTED_TASKS = ("stacking2", "towers", "stacked_blocks", "creative_stacked_blocks", "general")
EXPERTS = ("shipped", "scripted")
ACT_DIM = 9  # three fingers × three joints


@dataclass
class CWConfig:
    episodes: int = 600
    """episodes collected in total, spread evenly over the classes of c (Table 5: 600)"""
    n_classes: int = 3
    """number of classes C of c, i.e. of fixed do-interventions inside space A"""
    features: Tuple[str, ...] = ARENA_FEATURES
    """variables that c intervenes on (Table 7's C = 1…5 adds block_mass and block_color); one of
    stage_color, stage_friction, floor_friction, block_mass, block_color"""
    interventions: Optional[str] = None
    """JSON list of C objects {feature: value} fixing the intervention of each c (not given: class c sets each
    feature to the (c + 0.5)/C point of its space A range); values outside space A are refused"""
    noise_levels: Tuple[float, ...] = (0.0, 0.5, 0.8, 1.0)
    """std of the Gaussian noise added to the expert's normalised action, one behaviour policy each"""
    random_policy: bool = True
    """also use uniform-random actions as a behaviour policy"""
    expert: str = "shipped"
    """the expert behind the graded behaviours: `shipped` (the PPO expert inside causal-world) or `scripted`
    (cw_scripted.py's pick-and-place script through inverse kinematics; the block tasks stacking2, towers,
    stacked_blocks, creative_stacked_blocks, general)"""
    expert_snapshot: Optional[str] = None
    """policy artifact (train_behavior.py) used as the expert instead of the shipped PPO expert"""
    snapshots: Tuple[str, ...] = ()
    """further behaviour policies: policy artifacts of train_behavior.py, run without noise"""
    skip_frame: int = 3
    """simulation steps (250 Hz) per env step; the shipped experts were trained at 3 (83.3 Hz)"""
    episode_len: Optional[int] = None
    """env steps per episode (not given: the task's own time limit)"""
    lockstep: int = 8
    """episodes stepped together, one pybullet client each (the policy runs on one batch per step)"""
    workers: int = 1
    """processes that collect batches of `lockstep` episodes at once (one core each); the data does not depend on
    it, so it is left out of the dataset's recorded arguments"""


# ------------------------------------------------------------------------------------------ CausalWorld import
_CW = {}


def _fixed_arena_values(self):
    """Stage.get_current_variable_values_for_arena with CausalWorld issue #106 fixed: the original passes the
    bool `client_id is not None` (= client 1) as the pybullet client when the goal-less client exists."""
    import pybullet
    from causal_world.configs.world_constants import WorldConstants

    client = self._pybullet_client_w_o_goal_id
    if client is None:
        client = self._pybullet_client_full_id
    return {"floor_color": pybullet.getVisualShapeData(WorldConstants.FLOOR_ID, physicsClientId=client)[0][7][:3],
            "floor_friction": pybullet.getDynamicsInfo(WorldConstants.FLOOR_ID, -1, physicsClientId=client)[1],
            "stage_color": pybullet.getVisualShapeData(WorldConstants.STAGE_ID, physicsClientId=client)[0][7][:3],
            "stage_friction": pybullet.getDynamicsInfo(WorldConstants.STAGE_ID, -1, physicsClientId=client)[1],
            "gravity": self._current_gravity}


@contextlib.contextmanager
def _silenced():
    """Silence Python- and C-level stdout/stderr (gym's banner, pybullet's "build time" line) for an import."""
    sys.stdout.flush(), sys.stderr.flush()
    saved, null = (os.dup(1), os.dup(2)), os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(null, 1), os.dup2(null, 2)
        with contextlib.redirect_stderr(io.StringIO()), contextlib.redirect_stdout(io.StringIO()):
            yield
    finally:
        os.dup2(saved[0], 1), os.dup2(saved[1], 2)
        for fd in (*saved, null):
            os.close(fd)


def import_causal_world():
    """(CausalWorld, generate_task) with the compatibility shims applied; a clear ImportError if it is missing."""
    if not _CW:
        for name, typ in (("bool", bool), ("float", float), ("int", int)):
            if name not in np.__dict__:  # aliases removed in numpy 1.24, still used by causal-world 1.2
                setattr(np, name, typ)
        try:
            with _silenced():
                import pybullet  # noqa: F401  (prints its build time from C)
                from causal_world.envs import CausalWorld
                from causal_world.envs.scene.stage import Stage
                from causal_world.task_generators import generate_task
        except ImportError as e:
            raise ImportError(f"causal-world is not importable ({e}); install it with bash scripts/setup.sh") from e
        import logging
        logging.getLogger().setLevel(max(logging.getLogger().level, logging.ERROR))  # per-intervention warnings
        Stage.get_current_variable_values_for_arena = _fixed_arena_values
        _CW.update(CausalWorld=CausalWorld, generate_task=generate_task)
    return _CW["CausalWorld"], _CW["generate_task"]


def available() -> bool:
    try:
        import_causal_world()
        return True
    except ImportError:
        return False


def make_env(task: str, seed: int, skip_frame: int = 3):
    """A headless CausalWorld env of `task` whose bounds checks accept space A ∪ B (we check A / B ourselves); a task
    in STRUCTURES gets its fixed structure (the same for every env and seed)."""
    if task not in TASKS:
        raise ValueError(f"unknown CausalWorld task 'cw:{task}': use one of {', '.join(TASKS)}")
    CausalWorld, generate_task = import_causal_world()
    env = CausalWorld(task=generate_task(task, variables_space="space_a_b"), skip_frame=skip_frame,
                      enable_visualization=False, seed=seed, normalize_observations=True, normalize_actions=True,
                      action_mode="joint_positions", observation_mode="structured")
    if task in STRUCTURES:
        values = {k: v for k, v in STRUCTURES[task].items() if k != "seed"}
        np.random.seed(STRUCTURES[task]["seed"])  # the generator drops the blocks at global-numpy positions
        env.get_task().set_intervention_space("space_a")
        ok, _ = env.set_starting_state(values, check_bounds=True)
        env.get_task().set_intervention_space("space_a_b")
        if not ok or not env.get_stage().check_feasiblity_of_stage():
            env.close()
            raise RuntimeError(f"cw:{task}: CausalWorld refused the structure {STRUCTURES[task]} (infeasible stage)")
    return env


def default_episode_len(env) -> int:
    """CausalWorld's own episode length: 10 s per rigid block, in env steps. The env computes it once, from the stage
    it was built with; a task in STRUCTURES is then given its fixed structure, so the rule is applied to that one
    (general: the same five blocks; creative_stacked_blocks: 3 blocks, not the default stage's 24)."""
    task = env.get_task()
    if task.get_task_name() in STRUCTURES:
        return int(task.get_default_max_episode_length() / env.dt)  # the env's own expression, on this stage
    return int(env._max_episode_length)


# ------------------------------------------------------------------------------------------ variables and spaces
def check_features(features: Sequence[str]) -> List[str]:
    features = list(features)
    bad = [f for f in features if f not in FEATURES]
    if bad:
        raise ValueError(f"unknown CausalWorld feature(s) {bad}: use {', '.join(FEATURES)}")
    if not features or len(set(features)) != len(features):
        raise ValueError(f"--cw.features must list distinct features from {', '.join(FEATURES)}")
    return features


def movable_blocks(env) -> List[str]:
    return sorted(k for k, v in env.get_stage().get_rigid_objects().items() if v.is_not_fixed())


def _bounds(space: dict, feature: str, blocks: List[str], task: str) -> list:
    if feature in ARENA_FEATURES:
        lo, hi = space[feature]
    else:
        key = BLOCK_FEATURES[feature]
        found = [space[b][key] for b in blocks if b in space and key in space[b]]
        if not blocks or len(found) != len(blocks):
            raise ValueError(f"feature '{feature}' cannot be intervened on in cw:{task} (no movable block with a {key} range)")
        lo, hi = found[0]
    return [np.round(np.asarray(lo, float), 6).tolist(), np.round(np.asarray(hi, float), 6).tolist()]


def feature_spaces(env, task: str, features: Sequence[str]) -> Dict[str, Dict[str, list]]:
    """{feature: {"A": [low, high], "B": [low, high]}} read from the env (low/high are floats or RGB lists)."""
    blocks = movable_blocks(env)
    A, B = env.get_intervention_space_a(), env.get_intervention_space_b()
    return {f: {"A": _bounds(A, f, blocks, task), "B": _bounds(B, f, blocks, task)} for f in features}


def class_table(spaces: dict, n_classes: int, interventions: Optional[str]) -> List[Dict[str, object]]:
    """The do-intervention of every class c: default evenly spaced inside space A, or parsed from JSON and checked."""
    if interventions is None:
        table = []
        for c in range(n_classes):
            q = (c + 0.5) / n_classes
            row = {}
            for f, sp in spaces.items():
                lo, hi = np.asarray(sp["A"][0], float), np.asarray(sp["A"][1], float)
                row[f] = np.round(lo + q * (hi - lo), 6).tolist()
            table.append(row)
        return table
    try:
        table = json.loads(interventions)
    except json.JSONDecodeError as e:
        raise ValueError(f"--cw.interventions is not valid JSON ({e})")
    if not isinstance(table, list) or len(table) != n_classes or not all(isinstance(r, dict) for r in table):
        raise ValueError(f"--cw.interventions must be a JSON list of {n_classes} objects (one per class c)")
    for c, row in enumerate(table):
        unknown = sorted(set(row) - set(FEATURES))
        if unknown:
            raise ValueError(f"--cw.interventions class {c}: unknown feature(s) {unknown}: use {', '.join(FEATURES)}")
        if set(row) != set(spaces):
            raise ValueError(f"--cw.interventions class {c} sets {sorted(row)} but --cw.features is {sorted(spaces)}")
        for f, v in row.items():
            lo, hi = (np.asarray(b, float) for b in spaces[f]["A"])
            val = np.asarray(v, float)
            if val.shape != lo.shape or not np.all(np.isfinite(val)):
                raise ValueError(f"--cw.interventions class {c}: {f} needs {lo.size} number(s), got {v}")
            if np.any(val < lo) or np.any(val > hi):
                raise ValueError(f"--cw.interventions class {c}: {f}={v} lies outside CausalWorld's space A "
                                 f"[{spaces[f]['A'][0]}, {spaces[f]['A'][1]}]")
    return [{f: np.round(np.asarray(row[f], float), 6).tolist() for f in spaces} for row in table]


def draw_values(spaces: dict, split: str, rng: np.random.Generator) -> Dict[str, object]:
    """One draw of every feature, uniform inside space `split` ('A' or 'B')."""
    out = {}
    for f, sp in spaces.items():
        lo, hi = np.asarray(sp[split][0], float), np.asarray(sp[split][1], float)
        out[f] = np.round(rng.uniform(lo, hi), 6).tolist()
    return out


def to_intervention(values: Dict[str, object], blocks: List[str]) -> dict:
    """Feature values -> CausalWorld's intervention dict (block features go to every movable block)."""
    out: dict = {}
    for f, v in values.items():
        if f in ARENA_FEATURES:
            out[f] = np.asarray(v, float) if f == "stage_color" else float(v)
        else:
            key = BLOCK_FEATURES[f]
            for b in blocks:
                out.setdefault(b, {})[key] = np.asarray(v, float) if key == "color" else float(v)
    return out


def goal_mode(task: str) -> str:
    """'resample' (a new goal from space A every episode) or 'default' (the task's default goal)."""
    return "default" if task in DEFAULT_GOAL_TASKS else "resample"


def start_episode(env, intervention: dict, goal_seed: int, goals: str = "resample") -> np.ndarray:
    """Reset `env` to its default start with the intervention applied and, with goals='resample', a new goal
    from space A (seeded by goal_seed)."""
    task = env.get_task()
    for attempt in range(20):
        goal = {}
        if goals == "resample":
            np.random.seed((int(goal_seed) + 7919 * attempt) % 2**32)  # CausalWorld samples goals from global numpy
            task.set_intervention_space("space_a")
            goal = env.sample_new_goal()
            task.set_intervention_space("space_a_b")
        ok, obs = env.set_starting_state({**goal, **intervention}, check_bounds=True)
        if ok:
            return np.asarray(obs, np.float64)
    raise RuntimeError(f"CausalWorld refused the intervention {intervention} 20 times (infeasible stage?)")


# ------------------------------------------------------------------------------------------ policies
@contextlib.contextmanager
def torch_threads(n: int = 1):
    """Run small batched MLPs on one torch thread (threaded BLAS stalls next to a busy core)."""
    import torch

    old = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(old)


def shipped_expert_path(task: str) -> str:
    spec = importlib.util.find_spec("causal_world")
    if spec is None or spec.origin is None:
        raise ImportError("causal-world is not installed; install it with bash scripts/setup.sh")
    return os.path.join(os.path.dirname(spec.origin), "assets", "baseline_actors", SHIPPED_EXPERTS[task])


def load_shipped_expert(task: str) -> Callable[[np.ndarray], np.ndarray]:
    """The PPO expert shipped with causal-world: stable-baselines 2 `parameters` (an .npz inside the zip) holds the
    tanh MLP `model/shared_fc{i}/{w,b}:0` and the mean head `model/pi/{w,b}:0`; action = clip(mean, -1, 1)."""
    import torch

    if task not in SHIPPED_EXPERTS:
        raise ValueError(f"cw:{task} ships no expert (only {', '.join(SHIPPED_EXPERTS)} do): train one with "
                         f"train_behavior.py --env cw:{task} and pass its snapshot as --cw.expert-snapshot")
    with zipfile.ZipFile(shipped_expert_path(task)) as z:
        with np.load(io.BytesIO(z.read("parameters"))) as p:
            params = {k: torch.as_tensor(p[k], dtype=torch.float32) for k in p.files}
    hidden = sorted(k[len("model/"):-len("/w:0")] for k in params if k.startswith("model/shared_fc") and k.endswith("/w:0"))
    layers = [(params[f"model/{h}/w:0"], params[f"model/{h}/b:0"]) for h in hidden]
    w_pi, b_pi = params["model/pi/w:0"], params["model/pi/b:0"]

    @torch.no_grad()
    def act(obs: np.ndarray) -> np.ndarray:
        h = torch.as_tensor(np.asarray(obs, np.float32))
        for w, b in layers:
            h = torch.tanh(h @ w + b)
        return np.clip((h @ w_pi + b_pi).numpy(), -1.0, 1.0)

    act.obs_dim = int(layers[0][0].shape[0])
    return act


def load_snapshot(path: str, obs_dim: int, env_id: str) -> Tuple[Callable, dict]:
    art = contract.load_snapshot(path, obs_dim, ACT_DIM, env_id)
    return contract.build_policy(art), {"path": path, "train_step": art.get("train_step")}


def check_expert(task: str, expert: str, expert_snapshot: Optional[str] = None) -> None:
    if expert not in EXPERTS:
        raise ValueError(f"--cw.expert must be one of {', '.join(EXPERTS)}, got '{expert}'")
    if expert == "scripted" and task not in SCRIPTED_TASKS:
        raise ValueError(f"--cw.expert scripted is for the block tasks {', '.join(SCRIPTED_TASKS)}, not cw:{task}")
    if expert == "scripted" and expert_snapshot:
        raise ValueError("--cw.expert scripted and --cw.expert-snapshot name two experts: give one")


def load_expert(task: str, obs_dim: int, expert_snapshot: Optional[str],
                expert: str = "shipped") -> Tuple[Callable, dict]:
    """(policy, description): the shipped PPO expert, the scripted one, or a train_behavior.py snapshot."""
    env_id = f"cw:{task}"
    check_expert(task, expert, expert_snapshot)
    if expert == "scripted":
        from envs import cw_scripted

        return cw_scripted.ScriptedExpert(), {"source": "scripted pick-and-place through inverse kinematics "
                                                        "(cw_scripted.py)"}
    if expert_snapshot:
        policy, info = load_snapshot(expert_snapshot, obs_dim, env_id)
        return policy, {"source": "snapshot", **info}
    policy = load_shipped_expert(task)
    if policy.obs_dim != obs_dim:
        raise ValueError(f"the shipped {task} expert expects obs_dim {policy.obs_dim}, the env gives {obs_dim}")
    return policy, {"source": "shipped PPO expert causal_world/assets/baseline_actors/" + SHIPPED_EXPERTS[task]}


def behaviour_table(cfg: CWConfig, task: str, obs_dim: int) -> Tuple[list, list]:
    """(descriptions with a 'label', specs (kind, policy, noise_std)) of the behaviour policies."""
    table, specs = [], []
    if cfg.noise_levels:
        expert, info = load_expert(task, obs_dim, cfg.expert_snapshot, cfg.expert)
        for s in cfg.noise_levels:
            if s < 0:
                raise ValueError(f"--cw.noise-levels must be >= 0, got {s}")
            table.append({"name": "expert", "noise_std": float(s), **info,
                          "label": "expert" if s == 0 else f"expert+N(0,{s:g}²)"})
            specs.append(("policy", expert, float(s)))
    for path in cfg.snapshots:
        policy, info = load_snapshot(path, obs_dim, f"cw:{task}")
        table.append({"name": "snapshot", **info, "label": f"snapshot step {info['train_step']}"})
        specs.append(("policy", policy, 0.0))
    if cfg.random_policy:
        table.append({"name": "uniform_random", "label": "uniform random"})
        specs.append(("random", None, 0.0))
    if not table:
        raise ValueError("no behaviour policy: give --cw.noise-levels, --cw.snapshots or --cw.random-policy")
    return table, specs


# ------------------------------------------------------------------------------------------ episodes
class Lockstep:
    """`lockstep` CausalWorld envs (env j seeded env_seed + j) and the behaviour policies `specs`; `run` steps one batch
    of at most `lockstep` episodes together, the policies acting on the batch. A batch depends on its episodes'
    interventions, seeds and policies alone, not on what the envs ran before (each episode starts from
    set_starting_state), so batches can run in any order, in other processes, or after a restart, with the same bytes
    (tests/test_cw.py checks it)."""

    def __init__(self, task: str, skip_frame: int, lockstep: int, specs: list, env_seed: int = 0):
        self.task, self.specs = task, specs
        self.envs = [make_env(task, env_seed + j, skip_frame) for j in range(lockstep)]
        self.blocks = movable_blocks(self.envs[0])
        self.obs_dim = int(self.envs[0].observation_space.shape[0])

    def run(self, T: int, interventions: List[dict], ep_seeds: np.ndarray, ep_specs: np.ndarray,
            record: bool) -> dict:
        """returns [n], success [n] (fractional success at the end) and, with `record`, obs [n, T+1], act [n, T],
        rew [n, T] of n = len(interventions) <= lockstep episodes; episode i draws its goal and its action noise from
        ep_seeds[i] alone."""
        n, envs, specs = len(interventions), self.envs, self.specs
        out = _empty(n, T, self.obs_dim, record)
        rngs = [np.random.default_rng(int(seed)) for seed in ep_seeds]
        s = np.stack([start_episode(envs[j], to_intervention(interventions[j], self.blocks), int(ep_seeds[j]),
                                    goal_mode(self.task)) for j in range(n)])
        info = [None] * n
        for t in range(T):
            a = np.zeros((n, ACT_DIM))
            for p, (kind, policy, noise) in enumerate(specs):
                rows = np.flatnonzero(ep_specs == p)
                if len(rows) and kind == "policy" and getattr(policy, "needs_env", False):  # scripted expert
                    a[rows] = policy.act([envs[j] for j in rows], s[rows], t)
                elif len(rows) and kind == "policy":
                    a[rows] = policy(s[rows])
            for j in range(n):
                kind, _, noise = specs[ep_specs[j]]
                if kind == "random":
                    a[j] = rngs[j].uniform(-1.0, 1.0, ACT_DIM)
                elif noise > 0:
                    a[j] = a[j] + noise * rngs[j].normal(size=ACT_DIM)
            a = np.clip(a, -1.0, 1.0).astype(np.float32)  # the stored action is exactly the executed one
            if record:
                out["obs"][:, t], out["act"][:, t] = s, a
            for j in range(n):
                o, r, _, info[j] = envs[j].step(a[j].astype(np.float64))
                s[j] = o
                r = np.float32(r)
                out["returns"][j] += float(r)
                if record:
                    out["rew"][j, t] = r
        for j in range(n):
            out["success"][j] = float(info[j]["fractional_success"])
        if record:
            out["obs"][:, T] = s
        return out

    def close(self) -> None:
        for env in self.envs:
            env.close()


def _empty(E: int, T: int, obs_dim: int, record: bool) -> dict:
    out = {"returns": np.zeros(E), "success": np.zeros(E)}
    if record:
        out.update(obs=np.zeros((E, T + 1, obs_dim), np.float32), act=np.zeros((E, T, ACT_DIM), np.float32),
                   rew=np.zeros((E, T), np.float32))
    return out


def run_episodes(task: str, skip_frame: int, T: int, interventions: List[dict], ep_seeds: np.ndarray,
                 specs: list, ep_specs: np.ndarray, lockstep: int, record: bool, env_seed: int = 0,
                 progress: str = "") -> dict:
    """Run len(interventions) episodes of T steps in batches of `lockstep` (Lockstep.run; the batched policy can
    differ in the last float bit between batch sizes, so `lockstep` is part of the arguments). Returns returns [E],
    success [E] and, with `record`, obs [E, T+1], act [E, T], rew [E, T]. With `progress` (a name) it prints
    progress.Progress lines (at most every ~10 s and at the end):
    '[<progress>] step 300/600 (50%)  0.42 episodes/s  ETA 12.5min  env_steps_per_s 691'."""
    E = len(interventions)
    runner = Lockstep(task, skip_frame, min(lockstep, E), specs, env_seed)
    out = _empty(E, T, runner.obs_dim, record)
    t0 = time.time()
    prog = Progress(progress, total=E, unit="episodes") if progress else None
    with torch_threads(1):
        for start in range(0, E, lockstep):
            idx = np.arange(start, min(start + lockstep, E))
            batch = runner.run(T, [interventions[i] for i in idx], ep_seeds[idx], ep_specs[idx], record)
            for key, value in batch.items():
                out[key][idx] = value
            if prog is not None:
                done = int(idx[-1]) + 1
                prog.update(done, lambda: {"env_steps_per_s": prog.rate(done) * T})
    runner.close()
    out["steps_per_s"] = E * T / max(time.time() - t0, 1e-9)
    return out


# ------------------------------------------------------------------------------------------ collection in batches
_WORKER = {}


def _worker_start(cfg: CWConfig, task: str, obs_dim: int, lockstep: int, env_seed: int) -> None:
    """A collection worker process: its own envs and behaviour policies (rebuilt from the arguments, as the parent
    builds them), kept for every batch it runs."""
    import torch

    torch.set_num_threads(1)  # one thread per worker: the workers are the parallelism
    _WORKER["lockstep"] = Lockstep(task, cfg.skip_frame, lockstep, behaviour_table(cfg, task, obs_dim)[1], env_seed)


def _worker_batch(job: tuple) -> Tuple[int, dict]:
    b, T, interventions, ep_seeds, ep_specs = job
    return b, _WORKER["lockstep"].run(T, interventions, ep_seeds, ep_specs, record=True)


def _parts_key(cfg: CWConfig, task: str, seed: int, T: int) -> str:
    """What a batch file depends on: the data arguments (all but --cw.workers), the episode length, the source of
    every repo module loaded and the package versions. A folder of batches with another key is discarded."""
    import hashlib

    repo = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    sources = {}
    for name, module in sorted(sys.modules.items()):
        path = getattr(module, "__file__", None) or ""
        if os.path.isabs(path) and path.endswith(".py") and path.startswith(os.path.join(repo, "")) and \
                ".venv" not in os.path.relpath(path, repo).split(os.sep) and os.path.isfile(path):
            with open(path, "rb") as f:
                sources[os.path.relpath(path, repo)] = hashlib.sha256(f.read()).hexdigest()
    args = {k: v for k, v in asdict(cfg).items() if k != "workers"}
    blob = json.dumps({"cw": args, "task": task, "seed": seed, "T": T, "code": sources,
                       "versions": contract.package_versions()}, sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()


def _open_parts(parts: str, key: str, n_batches: int) -> set:
    """The batches already in the folder `parts` under this key (a folder with another key is emptied first)."""
    os.makedirs(parts, exist_ok=True)
    key_file = os.path.join(parts, "key.json")
    try:
        with open(key_file) as f:
            same = json.load(f).get("key") == key
    except (OSError, ValueError):
        same = False
    names = [f for f in os.listdir(parts) if f.startswith("batch_") and f.endswith(".npz")]
    if not same:
        if names:
            print(f"{parts}: {len(names)} batch files of other arguments or code: discarded", flush=True)
        for f in names:
            os.remove(os.path.join(parts, f))
        contract.save_json(key_file, {"key": key, "batches": n_batches})
        return set()
    return {int(f[6:-4]) for f in names if f[6:-4].isdigit() and int(f[6:-4]) < n_batches}


def collect_batches(cfg: CWConfig, task: str, T: int, obs_dim: int, interventions: List[dict], ep_seeds: np.ndarray,
                    specs: list, ep_specs: np.ndarray, env_seed: int, parts: Optional[str] = None, key: str = "",
                    progress: str = "", spill: bool = False) -> dict:
    """run_episodes(record=True) for a collection, in batches of cfg.lockstep episodes: with `parts` (a folder) every
    finished batch is saved there, and a restart with the same key loads those and runs only the rest; with
    cfg.workers > 1 the batches run in that many processes, each rebuilding `specs` from cfg (behaviour_table).
    The bytes are the same either way. With `spill` the observations are held in a file in `parts` (memory-mapped)
    instead of memory: a dataset larger than memory."""
    E, L = len(interventions), cfg.lockstep
    batches = [np.arange(b, min(b + L, E)) for b in range(0, E, L)]
    done = _open_parts(parts, key, len(batches)) if parts else set()
    out = _empty(E, T, obs_dim, True)
    if spill:
        out["obs"] = np.lib.format.open_memmap(os.path.join(parts, "observations.npy"), "w+", np.float32,
                                               (E, T + 1, obs_dim))

    def store(b: int, batch: dict, save: bool) -> None:
        for k in ("returns", "success", "obs", "act", "rew"):
            out[k][batches[b]] = batch[k]
        if save and parts:
            contract.save_npz(os.path.join(parts, f"batch_{b:05d}.npz"), {k: batch[k] for k in out})

    loaded = 0
    for b in sorted(done):
        try:
            with np.load(os.path.join(parts, f"batch_{b:05d}.npz")) as z:
                store(b, {k: z[k] for k in out}, save=False)
            loaded += len(batches[b])
        except (OSError, ValueError, KeyError, zipfile.BadZipFile) as e:  # a damaged file: its batch runs again
            print(f"{parts}: batch {b} unreadable ({e}): run again", flush=True)
            done.discard(b)
    if loaded:
        print(f"{parts}: {loaded} of {E} episodes from an earlier run of the same collection", flush=True)
    todo = [b for b in range(len(batches)) if b not in done]
    jobs = [(b, T, [interventions[i] for i in batches[b]], ep_seeds[batches[b]], ep_specs[batches[b]]) for b in todo]
    prog = Progress(progress, total=E, unit="episodes", start=loaded) if progress else None
    count, t0 = loaded, time.time()

    def advance(b: int) -> None:
        nonlocal count
        count += len(batches[b])
        if prog is not None:
            prog.update(count, lambda: {"env_steps_per_s": prog.rate(count) * T})

    workers = min(cfg.workers, len(jobs))
    if workers > 1:
        import multiprocessing

        ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no pybullet client or torch state is forked
        with ctx.Pool(workers, _worker_start, (cfg, task, obs_dim, L, env_seed)) as pool:
            for b, batch in pool.imap_unordered(_worker_batch, jobs):
                store(b, batch, save=True)
                advance(b)
    elif jobs:
        with torch_threads(1):
            runner = Lockstep(task, cfg.skip_frame, min(L, E), specs, env_seed)
            try:
                for b, T_, batch_ints, batch_seeds, batch_specs in jobs:
                    store(b, runner.run(T_, batch_ints, batch_seeds, batch_specs, record=True), save=True)
                    advance(b)
            finally:
                runner.close()
    out["steps_per_s"] = (E - loaded) * T / max(time.time() - t0, 1e-9)
    return out


def collect(cfg: CWConfig, task: str, seed: int, parts: Optional[str] = None, spill: bool = False) -> dict:
    """Collect cfg.episodes episodes of cw:<task>; the return value follows collect_data.py's backend interface.
    Every argument is checked (features, intervention values against space A, snapshots) before any episode runs.
    With `parts` (a folder; collect_data.py passes <out>.parts) finished batches are kept there until the dataset is
    written, so an interrupted collection resumes (collect_batches); cfg.workers processes share the batches. With
    `spill` (and `parts`) the observations stay in a file there and the returned observations and next observations
    are contract.Rows, read episode by episode as the dataset is written: peak memory no longer grows with them."""
    if spill and not parts:
        raise ValueError("spill: the observations need the parts folder")
    env_id = f"cw:{task}"
    features = check_features(cfg.features)
    if cfg.episodes < 1 or cfg.n_classes < 1 or cfg.lockstep < 1 or cfg.skip_frame < 1 or cfg.workers < 1:
        raise ValueError("need --cw.episodes, --cw.n-classes, --cw.lockstep, --cw.skip-frame and --cw.workers >= 1")
    if cfg.episode_len is not None and cfg.episode_len < 1:
        raise ValueError("--cw.episode-len must be >= 1")
    check_expert(task, cfg.expert, cfg.expert_snapshot)
    rng = np.random.default_rng(seed)
    probe = make_env(task, seed, cfg.skip_frame)  # created after seeding; it reseeds only numpy's global RNG
    spaces = feature_spaces(probe, task, features)
    obs_dim, T = int(probe.observation_space.shape[0]), cfg.episode_len or default_episode_len(probe)
    probe.close()
    table = class_table(spaces, cfg.n_classes, cfg.interventions)
    behaviors, specs = behaviour_table(cfg, task, obs_dim)

    E = cfg.episodes
    classes = np.arange(E) % cfg.n_classes
    policy_ids = (np.arange(E) // cfg.n_classes) % len(specs)
    ep_seeds = rng.integers(0, 2**31 - 1, size=E)
    print(f"collecting {E} episodes × {T} steps of {env_id} (classes {cfg.n_classes} on {features}, "
          f"{len(specs)} behaviour policies)", flush=True)
    out = collect_batches(cfg, task, T, obs_dim, [table[c] for c in classes], ep_seeds, specs, policy_ids, seed,
                          parts, _parts_key(cfg, task, seed, T) if parts else "", progress=f"collect {env_id}",
                          spill=spill)
    obs, nxt = out["obs"][:, :-1], out["obs"][:, 1:]  # one array, so s'_t == s_{t+1} holds exactly
    returns = out["rew"].astype(np.float64).sum(axis=1)
    timeouts = np.zeros((E, T), bool)
    timeouts[:, -1] = True  # CausalWorld episodes end at a time limit, never in a terminal state
    if spill:  # episode by episode from the file, never whole in memory
        obs = contract.Rows((E * T, obs_dim), np.float32, lambda: (out["obs"][e, :-1] for e in range(E)))
        nxt = contract.Rows((E * T, obs_dim), np.float32, lambda: (out["obs"][e, 1:] for e in range(E)))
    else:
        obs, nxt = obs.reshape(E * T, obs_dim), nxt.reshape(E * T, obs_dim)
    arrays = {
        "observations": obs, "actions": out["act"].reshape(E * T, ACT_DIM),
        "next_observations": nxt, "rewards": out["rew"].reshape(E * T),
        "terminals": np.zeros(E * T, bool), "timeouts": timeouts.reshape(E * T),
        "episode_ids": np.repeat(np.arange(E), T).astype(np.int64), "aux": np.repeat(classes, T).astype(np.int64),
        "episode_returns": np.repeat(returns, T).astype(np.float32),
        "policy_ids": np.repeat(policy_ids, T).astype(np.int64),
    }
    for p, b in enumerate(behaviors):
        b["mean_return"] = round(float(returns[policy_ids == p].mean()), 4) if (policy_ids == p).any() else None
        b["mean_success"] = round(float(out["success"][policy_ids == p].mean()), 4) if (policy_ids == p).any() else None
    env_config = {"task": task, "skip_frame": cfg.skip_frame, "episode_len": T, "features": features,
                  "goal_space": "A", "goals": goal_mode(task), "expert_snapshot": cfg.expert_snapshot}
    if cfg.expert != "shipped":  # recorded only when set, so datasets of the shipped experts keep their metadata
        env_config["expert"] = cfg.expert
    if task in STRUCTURES:
        env_config["structure"] = dict(STRUCTURES[task])
    spec = {"env_id": env_id, "obs_dim": obs_dim, "act_dim": ACT_DIM, "action_low": [-1.0] * ACT_DIM,
            "action_high": [1.0] * ACT_DIM, "episode_len": T, "n_classes": cfg.n_classes, "heldout_classes": [],
            "aux_meaning": f"index of the fixed do-intervention on {features} inside CausalWorld's space A "
                           f"(values in class_table); goals: {goal_mode(task)} (env_config.goals)",
            "class_table": table, "spaces": spaces, "env_config": env_config, "behavior_policies": behaviors,
            "episode_success": np.round(out["success"], 4).tolist(),
            "episode_seed_rule": "episode i draws goal and action noise from collect seed's integers(0, 2**31-1)[i]"}
    print(f"collected {E * T} steps at {out['steps_per_s']:.0f} env steps/s; fractional success mean "
          f"{out['success'].mean():.3f}", flush=True)
    return {"arrays": arrays, "returns": returns, "classes": classes, "policy_ids": policy_ids,
            "behaviors": behaviors, "spec": spec, "rng": rng, "success": out["success"]}


def check_spec(spec: dict) -> None:
    """A CausalWorld env description must name a known task and hold its env_config (skip_frame, episode_len) and
    the variable spaces A and B of the intervened features."""
    task = spec["env_id"].partition(":")[2]
    if task not in TASKS:
        raise ValueError(f"unknown CausalWorld task '{spec['env_id']}' (tasks: {', '.join(TASKS)})")
    cfg = spec.get("env_config")
    if not isinstance(cfg, dict) or cfg.get("task") != task:
        raise ValueError(f"{spec['env_id']}: the env description has no CausalWorld env_config for task {task} "
                         f"(a behaviour snapshot records only env_id and dims: evaluate it with --env-dataset)")
    for key in ("skip_frame", "episode_len"):
        if isinstance(cfg.get(key), bool) or not isinstance(cfg.get(key), int) or cfg[key] < 1:
            raise ValueError(f"{spec['env_id']}: env_config '{key}' must be an integer >= 1, found {cfg.get(key)!r}")
    if not isinstance(spec.get("spaces"), dict):
        raise ValueError(f"{spec['env_id']}: the env description has no variable 'spaces'")
    if task in STRUCTURES and cfg.get("structure") != STRUCTURES[task]:
        raise ValueError(f"{spec['env_id']}: the data was collected with the structure {cfg.get('structure')}, but "
                         f"make_env builds {STRUCTURES[task]} (cw_env.STRUCTURES)")


def _config(spec: dict) -> dict:
    cfg = spec.get("env_config") or {}
    if "task" not in cfg:
        raise ValueError(f"{spec.get('env_id')}: the env description has no CausalWorld env_config")
    return cfg


def rollout(spec: dict, policy: Callable, split: str, classes: Sequence[int], episodes: int, seed: int,
            lockstep: int = 10) -> dict:
    """Evaluate `policy` (obs [N, obs_dim] -> action [N, 9], deterministic) on `episodes` episodes; each draws the
    intervened features uniformly from space `split` ('A' in distribution, 'B' out of distribution) and a goal from
    space A (`classes` is unused: a space has no class of c). Feature draws from np.random.default_rng(seed);
    episode i has goal seed seed·1_000_003 + i."""
    if split not in ("A", "B"):
        raise ValueError(f"unknown CausalWorld space '{split}': use A or B")
    cfg = _config(spec)
    spaces = spec["spaces"]
    rng = np.random.default_rng(seed)
    values = [draw_values(spaces, split, rng) for _ in range(episodes)]
    out = run_episodes(cfg["task"], cfg["skip_frame"], cfg["episode_len"], values,
                       seed * 1_000_003 + np.arange(episodes), [("policy", policy, 0.0)], np.zeros(episodes, int),
                       lockstep, record=False, env_seed=seed)
    return {"returns": out["returns"], "episode_classes": None, "success": out["success"], "space": split,
            "interventions": values}


def expert_episodes(spec: dict, classes: Sequence[int], seed: int) -> dict:
    """Whole episodes of the expert the dataset was collected with, no action noise, episode i under the
    intervention of class classes[i] (class_table); rows [E·T] as in collect(), plus aux and episode_returns.
    Goals and seeds from default_rng([seed, 2])."""
    cfg = _config(spec)
    table = spec["class_table"]
    classes = np.asarray(classes, dtype=np.int64)
    if len(classes) == 0 or classes.min() < 0 or classes.max() >= len(table):
        raise ValueError(f"expert episodes need classes in [0, {len(table)}), got {classes.tolist()}")
    rng = np.random.default_rng([seed, 2])
    E, T = len(classes), cfg["episode_len"]
    out = run_episodes(cfg["task"], cfg["skip_frame"], T, [table[c] for c in classes], rng.integers(0, 2**31 - 1, E),
                       [("policy", reference_policy(spec, "expert", seed), 0.0)], np.zeros(E, int), 10, record=True,
                       env_seed=seed)
    returns = out["rew"].astype(np.float64).sum(1)
    flat = lambda x: x.reshape(E * T, *x.shape[2:])  # noqa: E731
    return {"observations": flat(out["obs"][:, :-1]), "actions": flat(out["act"]),
            "next_observations": flat(out["obs"][:, 1:]), "rewards": flat(out["rew"]), "aux": np.repeat(classes, T),
            "episode_returns": np.repeat(returns, T).astype(np.float32)}


def reference_policy(spec: dict, kind: str, seed: int) -> Callable:
    """'expert': the expert the dataset was collected with (shipped PPO or its snapshot); 'random': uniform."""
    if kind == "random":
        rng = np.random.default_rng(seed + 1)
        return lambda obs: rng.uniform(-1.0, 1.0, size=(len(obs), ACT_DIM))
    if kind != "expert":
        raise ValueError(f"unknown reference policy '{kind}': use expert or random")
    cfg = _config(spec)
    return load_expert(cfg["task"], spec["obs_dim"], cfg.get("expert_snapshot"), cfg.get("expert", "shipped"))[0]


class CWEnv:
    """One CausalWorld task with a gym-like API for train_behavior.py (SAC on tasks without a shipped expert).
    Every reset samples a goal from space A and draws `features` uniformly from space `space` (no class of c)."""

    def __init__(self, task: str, seed: int, features: Sequence[str] = ARENA_FEATURES, space: str = "A",
                 skip_frame: int = 3, episode_len: Optional[int] = None):
        self.env, self.task = make_env(task, seed, skip_frame), task
        self.spaces = feature_spaces(self.env, task, check_features(features)) if features else {}
        self.blocks, self.space = movable_blocks(self.env), space
        self.rng = np.random.default_rng(seed)
        self.obs_dim, self.act_dim = int(self.env.observation_space.shape[0]), ACT_DIM
        self.action_low, self.action_high = -np.ones(ACT_DIM, np.float32), np.ones(ACT_DIM, np.float32)
        self.max_episode_steps = episode_len or default_episode_len(self.env)
        self.t, self.success = 0, 0.0

    def reset(self) -> np.ndarray:
        values = draw_values(self.spaces, self.space, self.rng)
        obs = start_episode(self.env, to_intervention(values, self.blocks), int(self.rng.integers(0, 2**31 - 1)),
                            goal_mode(self.task))
        self.t = 0
        return obs.astype(np.float32)

    def step(self, a: np.ndarray):
        obs, r, _, info = self.env.step(np.clip(np.asarray(a, np.float64), -1.0, 1.0))
        self.t += 1
        self.success = float(info["fractional_success"])
        return obs.astype(np.float32), float(r), False, self.t >= self.max_episode_steps


# ------------------------------------------------------------------------------------------ CLI: expert check
@dataclass
class Args:
    tasks: Tuple[str, ...] = ("pushing", "picking", "pick_and_place")
    """CausalWorld tasks whose expert is measured"""
    expert: str = "shipped"
    """`shipped` (PPO) or `scripted` (cw_scripted.py, block tasks only)"""
    episodes: int = 10
    """episodes per task and space"""
    space: Tuple[str, ...] = ("A",)
    """variable spaces the stage colour and frictions are drawn from (A and/or B), or `default` (no intervention)"""
    random: bool = False
    """also measure uniform-random actions"""
    seed: int = 10_000
    """evaluation seed"""
    out: Optional[str] = None
    """optional JSON file for the numbers"""


def main(args: Args) -> list:
    rows = []
    for task in args.tasks:
        env = make_env(task, args.seed)
        spec = {"env_id": f"cw:{task}", "obs_dim": int(env.observation_space.shape[0]),
                "spaces": feature_spaces(env, task, ARENA_FEATURES),
                "env_config": {"task": task, "skip_frame": 3, "episode_len": default_episode_len(env),
                               "expert": args.expert}}
        env.close()
        for kind in ("expert", "random") if args.random else ("expert",):
            for split in args.space:
                t0 = time.time()
                policy = reference_policy(spec, kind, args.seed)
                if split == "default":  # the task's default variables: what the shipped experts were trained on
                    out = run_episodes(task, 3, spec["env_config"]["episode_len"], [{}] * args.episodes,
                                       args.seed * 1_000_003 + np.arange(args.episodes), [("policy", policy, 0.0)],
                                       np.zeros(args.episodes, int), 10, record=False, env_seed=args.seed)
                    res = {"returns": out["returns"], "success": out["success"]}
                else:
                    res = rollout(spec, policy, split, [], args.episodes, args.seed)
                dt = time.time() - t0
                row = {"task": task, "policy": kind, "expert": args.expert, "space": split, "episodes": args.episodes,
                       "mean_success": float(res["success"].mean()), "min_success": float(res["success"].min()),
                       "mean_return": float(res["returns"].mean()), "std_return": float(res["returns"].std()),
                       "steps_per_s": args.episodes * spec["env_config"]["episode_len"] / dt}
                rows.append(row)
                print(f"{task:<15} {kind:<7} space {split}: fractional success {row['mean_success']:.3f} "
                      f"(min {row['min_success']:.3f}), return {row['mean_return']:.2f} ± {row['std_return']:.2f} "
                      f"over {args.episodes} episodes, {row['steps_per_s']:.0f} env steps/s", flush=True)
    if args.out:
        contract.save_json(args.out, rows)
    return rows


if __name__ == "__main__":
    from oilca import cli

    main(cli.parse(Args))
