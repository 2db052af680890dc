"""Scripted pick-and-place expert for CausalWorld's block tasks, acting in normalised joint positions.

The tasks stacking2, towers, stacked_blocks, creative_stacked_blocks and general ask the TriFinger to move blocks into
goal silhouettes; only stacking2 ships a trained expert, and that one never stacks (docs/causalworld.md). This module
is a hand-written behaviour source for all of them. Per block it runs one grasp cycle of timed phases, in seconds of
simulation time so it acts the same at any skip_frame:

    approach  tips open around the block, at carry height        release  tips open again
    descend   down to the block's centre height                   retreat  back up to carry height
    close     tips close to the grip radius (the block is held)
    lift      up to carry height (one block plus a margin above the goal)
    carry     across to the goal's x, y
    lower     down onto the goal height

creative_stacked_blocks shows the silhouettes of the bottom and top levels only. Its middle levels are inferred
(`hidden_goals`): a block `tool_level_<l>_num_<i>` whose level has no silhouette gets a goal on the straight line
between the nearest shown silhouettes `goal_level_<lo>_num_<i>` below and `goal_level_<hi>_num_<i>` above, at its
level's share of the way, with its own size; the script fills it like a shown one (the task's success counts the
shown silhouettes only).

Each cycle fills the lowest goal silhouette that no block fills yet (a block within 0.3 of its smallest side of the
goal fills it) with the nearest free block of the same size, so a goal emptied by a knock is filled again later.
A block that drops out of the grip during lift or carry restarts its cycle. The grip is held off-centre, so the
script aims the block, not the grip centre, at the goal (the offset is measured at the end of the lift).

Each phase gives a target for the grip centre and a grip radius; the three fingertips sit on a circle around it
(finger 0 on one side, fingers 1 and 2 on the other, aligned with the block's yaw). The bridge to the action space of
every other task is inverse kinematics: `tips_to_action` solves the joint positions that put the three tips on their
targets (pybullet's damped least squares on the robot's own body, one finger at a time, as CausalWorld's
end-effector mode does, but with the floor offset added once) and normalises them to [-1, 1]. So the recorded
actions are joint-position targets like those of the shipped experts, and noise can be added to them in the same
units.

The expert reads the simulator (block, goal and fingertip positions) rather than the observation vector, and keeps a
phase per env, so it runs only inside cw_env.run_episodes (`needs_env`); it cannot label arbitrary observations.
"""

from typing import Dict, List, Optional

import re

import numpy as np

# (name, seconds): one grasp cycle; the tasks allow 10 s per block
PHASES = (("approach", 1.2), ("descend", 0.8), ("close", 0.6), ("lift", 1.5), ("carry", 1.4), ("lower", 1.2),
          ("release", 0.5), ("retreat", 0.6))
TIP_RADIUS = 0.0095  # fingertip sphere
SQUEEZE = 0.013  # how far inside the block's face the grip radius is set (the PD controller presses)
OPEN_GAP = 0.03  # extra grip radius while open
CLEARANCE = 0.025  # carry height: the carried block's bottom this far above the top of the goal below it
PLACED_TOL = 0.3  # a block within this fraction of its smallest side of its goal counts as placed
SIDE = 0.35  # fingers 1 and 2 sit this fraction of the block width off its axis (at least a tip diameter apart)


def _yaw(quat: np.ndarray) -> float:
    x, y, z, w = quat
    return float(np.arctan2(2 * (w * z + x * y), 1 - 2 * (y * y + z * z)))


def _smooth(u: float) -> float:
    u = min(max(u, 0.0), 1.0)
    return 0.5 * (1 - np.cos(np.pi * u))


def tip_targets(center: np.ndarray, reach: float, side: float, yaw: float) -> np.ndarray:
    """[9] fingertip targets of a pinch along the block's y axis (rotated by `yaw` about z): finger 0 at
    +reach on that axis, fingers 1 and 2 at -reach, side by side at ±side along the block's x axis."""
    local = np.array([[0.0, reach], [side, -reach], [-side, -reach]])
    c, s = np.cos(yaw), np.sin(yaw)
    xy = local @ np.array([[c, s], [-s, c]])
    tips = np.column_stack([center[0] + xy[:, 0], center[1] + xy[:, 1], np.full(3, center[2])])
    return tips.reshape(9)


def tips_to_action(env, tips: np.ndarray, rest: Optional[np.ndarray] = None) -> np.ndarray:
    """Normalised joint-position action [9] that puts the fingertips at `tips` [9] (x, y, z per finger, z above the
    floor as in CausalWorld's observations). Inverse kinematics of the robot body in env's pybullet client,
    starting from `rest` (default: the current joint positions, as CausalWorld's end-effector mode does)."""
    import pybullet
    from causal_world.configs.world_constants import WorldConstants

    robot = env._robot
    client = robot._pybullet_client_w_o_goal_id
    if client is None:
        client = robot._pybullet_client_full_id
    rest = robot.get_latest_full_state()["positions"] if rest is None else rest
    goal = np.asarray(tips, float).reshape(3, 3) + np.array([0.0, 0.0, WorldConstants.FLOOR_HEIGHT])
    ids = list(robot._finger_tip_ids)
    q = np.zeros(9)
    for f in range(3):  # each finger solved with its own tip listed first, as CausalWorld does
        order = [f] + [g for g in range(3) if g != f]
        sol = pybullet.calculateInverseKinematics2(WorldConstants.ROBOT_ID, [ids[g] for g in order],
                                                   [goal[g].tolist() for g in order], solver=pybullet.IK_DLS,
                                                   currentPositions=list(rest), physicsClientId=client)
        q[3 * f:3 * f + 3] = sol[3 * f:3 * f + 3]
    if not np.all(np.isfinite(q)):
        q = np.asarray(rest, float)
    acts = robot._robot_actions
    lo, hi = acts.joint_positions_lower_bounds, acts.joint_positions_upper_bounds
    return np.clip(2.0 * (q - lo) / (hi - lo) - 1.0, -1.0, 1.0)


LEVEL = re.compile(r"^(?:tool|goal)_level_(\d+)_num_(\d+)$")  # creative_stacked_blocks's block and goal names


def hidden_goals(stage, blocks: List[str], shown: List[str]) -> Dict[str, tuple]:
    """{name: (position, size)} of the goals creative_stacked_blocks does not show: for each block
    tool_level_<l>_num_<i> with no goal_level_<l>_num_<i>, the point at (l - lo) / (hi - lo) of the way from the
    nearest shown goal_level_<lo>_num_<i> below to goal_level_<hi>_num_<i> above, with the block's own size. Other
    tasks' names do not match: none."""
    levels = {}
    for g in shown:
        m = LEVEL.match(g)
        if m:
            levels.setdefault(int(m[2]), {})[int(m[1])] = stage.get_object_state(g, "cartesian_position")
    out = {}
    for b in blocks:
        m = LEVEL.match(b)
        if not m or int(m[2]) not in levels or int(m[1]) in levels[int(m[2])]:
            continue
        lvl, col = int(m[1]), levels[int(m[2])]
        lo, hi = [k for k in col if k < lvl], [k for k in col if k > lvl]
        if lo and hi:
            lo, hi = max(lo), min(hi)
            w = (lvl - lo) / (hi - lo)
            out[f"hidden_level_{lvl}_num_{m[2]}"] = (col[lo] + w * (col[hi] - col[lo]), stage.get_object_state(b, "size"))
    return out


def goal_state(stage, hidden: Dict[str, tuple], goal: str) -> tuple:
    """(position, size) of a shown or inferred goal."""
    if goal in hidden:
        return hidden[goal]
    return stage.get_object_state(goal, "cartesian_position"), stage.get_object_state(goal, "size")


class _Episode:
    """Controller state of one env during one episode: the goals bottom-up (shown and inferred), the movable blocks,
    the current cycle."""

    def __init__(self, env):
        stage = env.get_stage()
        self.blocks = sorted(n for n, o in stage.get_rigid_objects().items() if o.is_not_fixed())
        shown = list(stage.get_visual_objects())
        self.hidden = hidden_goals(stage, self.blocks, shown)
        self.goals = sorted(shown + list(self.hidden),
                            key=lambda g: (round(float(goal_state(stage, self.hidden, g)[0][2]), 3), g))
        self.block, self.phase, self.t0 = None, 0, 0.0
        self.start, self.yaw, self.offset = None, 0.0, np.zeros(3)


def next_pick(stage, blocks: List[str], goals: List[str], hidden: Optional[Dict[str, tuple]] = None):
    """(block, goal) of the next grasp cycle, or None: the lowest goal that no block fills yet, and the nearest
    block of the same size that fills no goal. A block fills a goal when it lies within PLACED_TOL of its smallest
    side from it. `hidden`: the inferred goals among `goals` (hidden_goals)."""
    hidden = hidden or {}
    pos = {b: stage.get_object_state(b, "cartesian_position") for b in blocks}
    size = {b: stage.get_object_state(b, "size") for b in blocks}
    used = set()
    open_goals = []
    for g in goals:
        gp, gs = goal_state(stage, hidden, g)
        fill = [b for b in blocks if b not in used and np.abs(size[b] - gs).max() < 0.002
                and np.linalg.norm(pos[b] - gp) < PLACED_TOL * gs.min()]
        if fill:
            used.add(fill[0])
        else:
            open_goals.append((g, gp, gs))
    for g, gp, gs in open_goals:
        free = [b for b in blocks if b not in used and np.abs(size[b] - gs).max() < 0.002]
        if free:
            return min(free, key=lambda b: np.linalg.norm(pos[b][:2] - gp[:2])), g
    return None


class ScriptedExpert:
    """The scripted expert as a batched behaviour policy for cw_env.run_episodes: act(envs, obs, t) -> actions."""

    needs_env = True

    def __init__(self):
        self.state: Dict[int, _Episode] = {}

    def __call__(self, obs):
        raise ValueError("the scripted CausalWorld expert acts on the simulator, not on observations: it runs only "
                         "inside cw_env.run_episodes (e.g. evaluate.py --reference expert), not as a labeller")

    def act(self, envs: List, obs: np.ndarray, t: int) -> np.ndarray:
        out = np.zeros((len(envs), 9))
        for j, env in enumerate(envs):
            if t == 0 or id(env) not in self.state:
                self.state[id(env)] = _Episode(env)
            out[j] = self._act_one(env, self.state[id(env)], t * env.dt)
        return out

    def _act_one(self, env, ep: _Episode, now: float) -> np.ndarray:
        stage = env.get_stage()
        tips_now = env._robot.get_latest_full_state()["end_effector_positions"].reshape(3, 3)
        if ep.block is None:  # start a cycle: the lowest open goal and the nearest free block that fits it
            ep.block = next_pick(stage, ep.blocks, ep.goals, ep.hidden)
            ep.phase, ep.t0, ep.start = 0, now, tips_now.mean(0)
        if ep.block is None:  # everything placed: hold still above the structure
            center = tips_now.mean(0)
            return tips_to_action(env, tip_targets(np.array([center[0], center[1], 0.2]), 0.08, 0.03, 0.0))
        tool, goal = ep.block
        pos = stage.get_object_state(tool, "cartesian_position")
        size = stage.get_object_state(tool, "size")
        gpos = goal_state(stage, ep.hidden, goal)[0]
        yaw = _yaw(stage.get_object_state(tool, "orientation"))
        yaw = (yaw + np.pi / 4) % (np.pi / 2) - np.pi / 4  # a cube's yaw modulo 90°, nearest to zero
        r_grip = size[1] / 2 + TIP_RADIUS - SQUEEZE
        r_open = r_grip + OPEN_GAP
        side = max(SIDE * size[0], TIP_RADIUS + 0.004)
        z_carry = gpos[2] + size[2] + CLEARANCE  # the carried block clears a block-high step below its goal
        z_grip = max(pos[2], TIP_RADIUS + 0.003) if ep.phase < 2 else None

        name, dur = PHASES[ep.phase]
        u = _smooth((now - ep.t0) / dur)
        if name == "approach":
            end, radius = np.array([pos[0], pos[1], z_carry]), r_open
        elif name == "descend":
            end, radius = np.array([pos[0], pos[1], z_grip]), r_open
        elif name == "close":
            end, radius = ep.start, r_open + u * (r_grip - r_open)
        elif name == "lift":
            end, radius = np.array([ep.start[0], ep.start[1], z_carry]), r_grip
        elif name == "carry":  # aim the block, not the grip centre, at the goal (the grip holds it off-centre)
            end, radius = np.array([gpos[0] + ep.offset[0], gpos[1] + ep.offset[1], z_carry]), r_grip
        elif name == "lower":
            end, radius = np.array([gpos[0] + ep.offset[0], gpos[1] + ep.offset[1], gpos[2] + 0.004]), r_grip
        elif name == "release":
            end, radius = ep.start, r_grip + u * (r_open - r_grip)
        else:  # retreat
            end, radius = np.array([ep.start[0], ep.start[1], z_carry]), r_open
        center = ep.start + u * (end - ep.start)
        if name in ("release", "retreat"):
            yaw = ep.yaw
        if now - ep.t0 >= dur:  # next phase starts from where this one ended
            if name in ("lift", "carry") and np.linalg.norm(pos - center) > size.max():
                ep.phase, ep.start = 0, tips_now.mean(0)  # the block fell out of the grip: grasp it again
            elif ep.phase + 1 == len(PHASES):
                ep.block = None
            else:
                ep.phase, ep.start = ep.phase + 1, end
            if name == "lift":
                ep.offset = center - pos
            if name == "lower":
                ep.yaw = yaw
            ep.t0 = now
        return tips_to_action(env, tip_targets(center, radius, side, yaw))
