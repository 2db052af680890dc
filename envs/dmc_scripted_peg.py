"""A scripted expert for DeepMind Control manipulator-insert_peg (`collect_data.py --dmc.scripted-noise ...`).

The companion of dmc_scripted.py's insert_ball expert, with the same arm model (fk, ik, ArmDynamics) and the same
torque law; what differs is the task. The peg is a small sword (pommel, guard, blade, 12.6 cm); the reward of a step is
max(bringing, grasping / 3): bringing is high when the peg's middle and tip lie on the slot's ghost peg, grasping
when the hand's grasp and pinch sites lie on the peg's grip end along its axis. Three kinds of episode start:

- a tenth with the peg in the hand (`carry`): close the hand, lift the peg clear of the slot, turn it to the slot's
  angle above its mouth and lower it in along the slot's axis (back to the mouth if it drifts off the axis). The
  command aims the *peg* (read from the observation), not the hand, so a peg that has slipped or turned in the grip
  is still brought to the slot. Where the slot's pose is out of the arm's reach it keeps holding the peg.
- a tenth with the peg in the slot (`rest`): keep the arm still.
- the rest with the peg dropped onto the floor or against a wall (`hover`). A peg lying on the floor cannot be taken
  in this hand: the fingers close in the arm's plane around the peg's axis, and a peg lying down rests on its guard
  with its grip end a few centimetres up at most, so the palm or a finger would have to pass under the floor (MuJoCo's
  collision test found no clear pose along the peg on the tuning seeds). The script earns the grasping term it can:
  once the peg has settled it searches the hand poses (angle, and the grasp site near the peg's grip end) that MuJoCo
  finds clear of the floor, the walls and the peg, and holds the best one, the open hand over the grip end. Where
  none earns anything (the peg out of reach at the arena's edge, or standing on its pommel) the arm keeps still.

Moves follow straight joint-space paths that MuJoCo finds clear of the floor, the walls and the slot (the peg too,
while it is carried), or, where none is, go through a few poses high above the arena (`plan`); where no path is
found at all the move goes straight anyway, and the descent into the slot is not tested against the slot.

What it reads: the observation, the env's own MuJoCo model (for the arm's dynamics and the collision search, on a
private copy of the episode's model and data; the simulation it acts in is never touched) and one memory per episode
(the torque law's integral term, the hover pose found for the peg's resting pose, the current plan). It never reads
the perturbation. The settings below were set
by hand on task seeds 2000-2059 (the first sixty of a stream no dataset or evaluation uses), never on an evaluation
stream.
"""

from typing import Dict, List, Optional

import numpy as np

from envs.dmc_scripted import BASE, ManipulatorExpert, direction, fk, ik, joint_diff, wrap

TASKS = ("manipulator-insert_peg",)
ARM4 = ("arm_root", "arm_shoulder", "arm_elbow", "arm_wrist")
PINCH = 0.025  # the pinch site lies this far beyond the grasp site along the hand; peg_pinch as far along the peg
ARENA = ("floor", "wall1", "wall2")
PEG = ("blade", "guard", "pommel")
SLOT = ("slot_0", "slot_1", "slot_2")
ARM_BODIES = ("upper_arm", "middle_arm", "lower_arm", "hand", "thumb", "thumbtip", "finger", "fingertip")

SETTINGS = dict(
    held=0.03, held_angle=0.6, grip_steps=25, in_slot=0.01, above=0.10, lower=0.03, turn=0.15, safe=0.12,  # carry, rest
    settled=0.3, low=0.06, spin=3.0, search_phi=36, open_q=-0.17, hover_gap=0.0, hover_lift=0.06, hover_near=0.012,
    moved=0.005,  # wait, hover
    slack=0.005, margin=0.02, replan=50, via_reached=0.15, skip=0.3, topk=10, spread=5,  # paths clear of the arena
    max_err=0.6, max_err_carry=0.4, kp=600.0, kd=50.0, kj=1.5, kjd=0.05, ki=5.0, i_window=0.3, i_limit=0.4,  # torques
    self_clear=0.06, w_cup=50.0, r_safe=0.11, w_move=0.05, w_fold=0.02,  # ik's ranking (dmc_scripted.ik)
)


def tolerance(d):
    """dm_control's rewards.tolerance(d, bounds=(0, 0.01), margin=0.02) with its default Gaussian sigmoid."""
    x = np.maximum(np.asarray(d) - 0.01, 0.0) / 0.02
    return 0.1 ** (x ** 2)


def peg_axis(theta):
    """(x, z) of the peg's blade direction (its body's -z) at hinge angle theta; the hand points this way to hold it."""
    return np.array([-np.sin(theta), -np.cos(theta)])


_PATH = np.linspace(0, 1, 9)[1:, None]  # the points of a straight joint-space path that are tested
OFFSETS = [(dx, dz) for dx in np.linspace(-0.02, 0.02, 9) for dz in np.linspace(0.0, 0.03, 7)]  # grasp site - grip
VIAS = [np.array(v) for v in ((0.0, 0.75), (-0.3, 0.65), (0.3, 0.65), (-0.45, 0.5), (0.45, 0.5))]


def carried_peg(q4, rel) -> np.ndarray:
    """The pose (x, z, angle) of a peg held with offset rel = (offset from the grasp site in the hand's frame, angle
    offset) when the arm is at q4."""
    phi = float(np.sum(q4))
    c, s = np.cos(phi), np.sin(phi)
    off = np.array([c * rel[0] - s * rel[1], s * rel[0] + c * rel[1]])
    return np.array([*(fk(q4)[3] + off), rel[2] - phi])


def held_offset(q4, peg) -> np.ndarray:
    """The inverse of carried_peg: the offset rel of a peg at pose `peg` (x, z, angle) in the hand of the arm at q4,
    so that carried_peg(q4, rel) gives `peg` back (up to rounding)."""
    phi = float(np.sum(q4))
    c, s = np.cos(phi), np.sin(phi)
    off = peg[:2] - fk(q4)[3]
    return np.array([c * off[0] + s * off[1], -s * off[0] + c * off[1], peg[2] + phi])


def hand_angle(theta):
    """The hand's cumulative angle whose pointing direction is the blade's direction of a peg at angle theta."""
    return wrap(np.pi - theta)


class _PegEpisode:
    def __init__(self, physics, margin: float):
        import copy

        import mujoco

        self.integral = np.zeros(4)
        self.mode = ""
        self.hover = None  # (peg pose it was found for, grasp-site target, hand angle, expected reward per step)
        self.plan: List[np.ndarray] = []  # joint-space waypoints to the goal, the goal last
        self.goal = None  # (grasp-site target, hand angle) the plan was made for
        self.age = 0  # steps since the plan was made
        self.gripped = 0  # steps since the hand began to close on the peg
        self.inserting = False  # the carried peg is on its way down the slot's axis
        self.hold = None  # the joints to hold while the script keeps the arm still
        # a private copy of this episode's model (the slot's pose is set per episode): the collision tests never touch
        # the simulation, and on the copy every geom reports contacts from `margin` away
        self.model = copy.copy(physics.model.ptr)
        self.model.geom_margin[:] = margin
        self.data = mujoco.MjData(self.model)
        m = self.model
        body = lambda g: m.body(m.geom_bodyid[g]).name  # noqa: E731
        self.arm = {g for g in range(m.ngeom) if body(g) in ARM_BODIES}
        self.obstacle = {g for g in range(m.ngeom) if m.geom(g).name in ARENA + SLOT}
        self.peg = {g for g in range(m.ngeom) if m.geom(g).name in PEG}
        self.adr = {j: m.joint(j).qposadr[0] for j in ARM4 + ("finger", "thumb", "peg_x", "peg_z", "peg_y")}


class PegExpert(ManipulatorExpert):
    """The insert_peg script as a batched behaviour policy for dmc.run_episodes: act(envs, obs, t) -> actions [n, 5]."""

    def __init__(self, settings: Optional[dict] = None):
        super().__init__()
        self.P = {**SETTINGS, **(settings or {})}
        self.state: Dict[int, _PegEpisode] = {}

    def new_episode(self, env) -> _PegEpisode:
        return _PegEpisode(env.physics, self.P["margin"])

    # ------------------------------------------------------------------------------------------------ hover search
    def collides(self, ep: _PegEpisode, q4: np.ndarray, peg: np.ndarray, slack: float, carried=None,
                 touch_peg: bool = True) -> bool:
        """Whether the arm at q4 (hand open; closed on a carried peg) comes within `slack` of the floor, the walls or
        the slot (and, touch_peg=False, of the peg lying at `peg`): MuJoCo's
        collision test on the private copy. `carried` (the peg's offset in the hand, see carried_peg): the peg moves
        with the hand and counts as part of the arm; else it lies at `peg` and the arm may touch it."""
        import mujoco

        m, d, adr = ep.model, ep.data, ep.adr
        for name, v in zip(ARM4, q4):
            d.qpos[adr[name]] = v
        for name in ("finger", "thumb"):
            d.qpos[adr[name]] = self.P["open_q"] if carried is None else 0.5
        pose = peg if carried is None else carried_peg(q4, carried)
        for name, v in zip(("peg_x", "peg_z", "peg_y"), pose):
            d.qpos[adr[name]] = v
        mujoco.mj_kinematics(m, d)
        mujoco.mj_collision(m, d)
        moving = ep.arm | ep.peg if carried is not None else ep.arm
        fixed = ep.obstacle | ep.peg if carried is None and not touch_peg else ep.obstacle
        for c in d.contact[:d.ncon]:
            g1, g2 = c.geom1, c.geom2
            if c.dist < slack and ((g1 in moving and g2 in fixed) or (g2 in moving and g1 in fixed)):
                return True
        return False

    def path_free(self, ep: _PegEpisode, q_from, q_to, peg, carried=None, skip: float = 0.0) -> bool:
        """Whether the straight joint-space path is clear, tested at the points beyond the fraction `skip` of it
        (from an arm already touching something, the first part of the way out is not tested)."""
        dq = joint_diff(q_to, q_from)
        return not any(self.collides(ep, q_from + f * dq, peg, self.P["slack"], carried) for f in _PATH if f > skip)

    def plan(self, ep: _PegEpisode, q, target, phi, slot_mid, peg, carried=None) -> List[np.ndarray]:
        """Joint-space waypoints to the hand pose (target, phi): straight there where the path is clear of the floor,
        the walls and the slot, else through one of a few points high above the arena; the nearest reachable pose
        where the target is out of reach."""
        P = self.P
        Qs = None
        for shrink in (1.0, 0.95, 0.9, 0.85, 0.8):
            Qs = ik(BASE + (target - BASE) * shrink, phi, q[:4], slot_mid, P)  # out of reach: the nearest point
            if Qs is not None:
                break
        if Qs is None:
            return []
        top = np.concatenate([Qs[:P["topk"]], Qs[P["topk"]::P["spread"]]])  # the best, and a spread of the others
        skip = P["skip"] if self.collides(ep, q[:4], peg, P["slack"], carried) else 0.0  # already touching: get out
        for qq in top:
            if self.path_free(ep, q[:4], qq, peg, carried, skip):
                return [qq]
        # a small roadmap: the start, a few arm poses high above the arena, the goal's poses; the first path found
        # breadth-first (fewest waypoints), each leg a straight joint-space path clear of the arena and the slot
        nodes = [q[:4]]
        for via in VIAS:
            Qv = ik(via, phi, q[:4], slot_mid, P)
            nodes += [] if Qv is None else list(Qv[:2])
        goal0 = len(nodes)
        nodes += list(top)
        prev = {0: None}
        frontier = [0]
        while frontier:
            nxt = []
            for i in frontier:
                for j in range(1, len(nodes)):
                    if j in prev or not self.path_free(ep, nodes[i], nodes[j], peg, carried, skip if i == 0 else 0.0):
                        continue
                    prev[j] = i
                    if j >= goal0:
                        way = [j]
                        while prev[way[-1]] is not None and prev[way[-1]] != 0:
                            way.append(prev[way[-1]])
                        return [nodes[k] for k in reversed(way)]
                    nxt.append(j)
            frontier = nxt
        return [top[0]]

    def search(self, ep: _PegEpisode, q: np.ndarray, peg: np.ndarray, slot: np.ndarray):
        """The hand pose (grasp-site target, hand angle) with the largest grasping term among those the arm reaches
        without touching the floor or the walls, or None where none earns anything."""
        P = self.P
        grip = peg[:2]
        pinch = grip + PINCH * peg_axis(peg[2])
        best, found = 1e-3, None
        cands = []
        for phi in np.linspace(-np.pi, np.pi, P["search_phi"], endpoint=False):
            for off in OFFSETS:
                site = grip + np.array(off)
                r = (tolerance(np.linalg.norm(site - grip)) + tolerance(np.linalg.norm(site + PINCH * direction(phi)
                                                                                       - pinch))) / 6
                cands.append((r, site, phi))
        for r, site, phi in sorted(cands, key=lambda c: -c[0]):
            if r <= best:
                break
            Q = ik(site, phi, q[:4], slot, P)
            if Q is None:
                continue
            if any(not self.collides(ep, qq, peg, P["hover_gap"], touch_peg=False) for qq in Q[:P["topk"]]):
                best, found = r, (site, phi)
        return None if found is None else (peg.copy(), found[0], found[1], best)

    # ------------------------------------------------------------------------------------------------------- step
    def act_one(self, o: np.ndarray, ep: _PegEpisode) -> np.ndarray:
        P = self.P
        ang = o[:16].reshape(8, 2)
        q, qd = np.arctan2(ang[:, 0], ang[:, 1]), o[16:24]
        peg = np.array([o[33], o[34], 2 * np.arctan2(o[36], o[35])])  # x, z, hinge angle
        peg_v = o[37:40]
        slot_xz, slot_a = o[40:42], 2 * np.arctan2(o[43], o[42])
        up = -peg_axis(slot_a)  # out of the slot's mouth
        slot_mid = slot_xz - 0.083 * up  # the middle of the slot's walls (the obstacle ik keeps the arm clear of)
        phi_hand = float(np.sum(q[:4]))
        grasp_site = fk(q[:4])[3]
        grip_err = np.linalg.norm(grasp_site - peg[:2])
        aligned = abs(wrap(phi_hand - hand_angle(peg[2]))) < P["held_angle"]
        grip, target, phi, descend = -1.0, None, np.pi, False

        in_slot = np.linalg.norm(peg[:2] - slot_xz) < P["in_slot"] and abs(wrap(peg[2] - slot_a)) < 0.1
        if in_slot and not (grip_err < P["held"] and q[4] > 0.2):
            ep.mode = "rest"  # in the slot (as a tenth of the episodes start), not held: keep still
        elif (ep.mode == "" and grip_err < P["held"] and aligned) or (
                ep.mode == "carry" and grip_err < P["held"] + 0.01):
            # the peg starts in the hand (a hand over a peg on the floor never takes it: no pose there holds it)
            ep.mode, grip = "carry", 1.0
            mouth = slot_xz + P["above"] * up  # the peg's grip end straight above the slot, at its angle
            d_ang = wrap(peg[2] - slot_a)  # turn the hand by this to put the peg at the slot's angle
            off = np.linalg.norm(peg[:2] - mouth)
            rel = peg[:2] - slot_xz
            sideways = abs(rel[0] * up[1] - rel[1] * up[0])  # the grip end's distance from the slot's axis
            if ep.inserting and (sideways > P["lower"] or abs(d_ang) > P["turn"] or rel @ up > P["above"] + P["lower"]):
                ep.inserting = False  # off the axis or turned away: back to the mouth
            elif off < P["lower"] and abs(d_ang) < P["turn"]:
                ep.inserting = True  # lined up over the mouth: down the slot's axis until the peg is in
            descend = ep.inserting
            if descend:
                goal = slot_xz
            elif peg[1] < slot_xz[1] + P["safe"] and off > 0.05:
                goal = np.array([peg[0] + 0.5 * (mouth[0] - peg[0]), max(mouth[1], slot_xz[1] + P["safe"])])
            else:
                goal = mouth
            target = grasp_site + (goal - peg[:2])
            phi = phi_hand + d_ang
            ep.gripped += 1
            if ep.gripped < P["grip_steps"]:  # the fingers close first; the arm holds still meanwhile
                target = None
        elif peg[1] > P["low"] or np.linalg.norm(peg_v[:2]) > P["settled"] or abs(peg_v[2]) > P["spin"]:
            ep.mode = "wait"  # the peg is still falling or rolling: stay above it
            target, phi = np.array([peg[0], max(peg[1] + 0.15, 0.2)]), np.pi
        else:
            h = ep.hover
            if h is None or np.linalg.norm(h[0][:2] - peg[:2]) > P["moved"] or abs(wrap(h[0][2] - peg[2])) > 0.05:
                h = ep.hover = self.search(ep, q, peg, slot_mid) or (peg.copy(), None, None, 0.0)
            if h[1] is None:
                ep.mode = "park"  # nothing to earn from here: keep still
            else:
                ep.mode, phi = "hover", h[2]
                # come in from behind the hand's pointing direction, then onto the pose
                near = np.linalg.norm(grasp_site - h[1]) < P["hover_lift"] + P["hover_near"]
                target = h[1] if near else h[1] - P["hover_lift"] * direction(h[2])

        if target is None:  # keep still: hold the joints where they were when the stillness began
            if ep.hold is None:
                ep.hold = q[:4].copy()
            ep.goal = None
        else:
            ep.hold = None
        q_to = q[:4] if ep.hold is None else ep.hold
        if target is not None:
            carried = None
            if ep.mode == "carry":
                carried = held_offset(q[:4], peg)
            ep.age += 1
            stale = ep.goal is None or np.linalg.norm(ep.goal[0] - target) > 0.01 or abs(wrap(ep.goal[1] - phi)) > 0.1
            if stale or not ep.plan or ep.age > P["replan"]:
                if descend:  # the last few cm into the slot: straight there, the peg not tested against the slot
                    ep.plan = self.plan(ep, q, target, phi, slot_mid, peg)[-1:]
                else:
                    ep.plan = self.plan(ep, q, target, phi, slot_mid, peg, carried)
                ep.goal, ep.age = (target.copy(), phi), 0
            while len(ep.plan) > 1 and np.max(np.abs(joint_diff(ep.plan[0], q[:4]))) < P["via_reached"]:
                ep.plan.pop(0)
            if ep.plan:
                q_to = ep.plan[0]
        return self.command(q, qd, q_to, ep, ep.mode == "carry", grip)
