"""A scripted expert for DeepMind Control manipulator-insert_ball (`collect_data.py --dmc.scripted-noise ...`).

SAC does not learn the manipulator tasks in the 200k env steps this project affords (docs/dmc.md), so their rows had
no expert behaviour. This hand-written controller is that task's behaviour source instead, the way envs/cw_scripted.py
is for the CausalWorld block tasks. What it reads: the observation (joint angles and velocities, the ball's and the
cup's poses), the env's own MuJoCo model (mass matrix and gravity of the arm, computed on a private copy of the
model's data, never on the simulation it acts in) and one memory per episode: the integral of the joint error, so a
constant action offset (the perturbation classes' mean) is taken out over time. It never reads the perturbation.

Geometry: the arm moves in the x-z plane; its root joint is at BASE and the links from the shoulder to the grasp site
have lengths L1, L2, L3, LG (tests/test_dmc_scripted.py checks fk() against MuJoCo's own forward kinematics). Per step
it picks a mode from the observation alone:

- `wall`: the ball rolls fast along the floor; the closed hand stands in its way until it slows.
- `grasp`: hover above the ball, descend onto it, close the hand.
- `carry`: the ball is held; lift it clear of the cup, move above the cup's mouth at a point from which a vertical
  drop lands inside, open the hand.
- `clear`: the ball is falling into the cup or bouncing in it; stay above it.
- `rest`: the ball lies in the cup (as a tenth of the task's episodes start); keep the arm still.

Motion: analytic inverse kinematics over a grid of shoulder bends (both elbow branches), keeping the candidate with
the most clearance from the cup, the least folding and the least motion; a candidate whose straight joint-space path
passes the cup is skipped, and where every one does, the hand goes over the cup's top first. Joint torques come
from computed-torque PD (the model's mass matrix and gravity), a direct joint stiffness (it holds against contacts)
and the integral term. Its return against uniform random actions, on the evaluation stream, is in docs/dmc.md.
"""

from typing import Dict, List, Optional

import numpy as np

TASKS = ("manipulator-insert_ball",)
ARM = ("arm_root", "arm_shoulder", "arm_elbow", "arm_wrist", "finger", "fingertip", "thumb", "thumbtip")
GEAR = np.array([12.0, 8.0, 4.0, 2.0])  # the arm motors' gear (manipulator.xml): action 1 = this torque
BASE = np.array([0.0, 0.4])  # the root joint (x, z)
L1, L2, L3, LG = 0.18, 0.15, 0.12, 0.065  # root-shoulder, shoulder-elbow, elbow-wrist, wrist-grasp site
JOINT_LIMIT = np.radians([160.0, 160.0, 140.0]) - 0.1  # shoulder, elbow, wrist (the root turns freely)
SHOULDER_GRID = np.linspace(-2.6, 2.6, 53)
OBS_KEYS = (("arm_pos", 16), ("arm_vel", 8), ("touch", 5), ("hand_pos", 4), ("object_pos", 4), ("object_vel", 3),
            ("target_pos", 4))
DT = 0.01  # the control step (s)

# The controller's settings (lengths in m, angles in rad, gains per unit of action or torque). They were set by hand on
# task seeds 2000-2029 (the first thirty of a stream no dataset or evaluation uses), never on the evaluation stream.
SETTINGS = dict(
    clear=0.031, above=0.05, held=0.03, across=0.03, band=0.02, release=0.01, near_cup=0.1, v_block=0.6,
    wall_x=0.0, wall_z=0.036, lead=0.03, grip_z=0.018, align=0.025, close=0.04, topk=10, via=0.2, r_path=0.075,
    in_cup=0.03, retry=60, backoff=40, max_err=0.6, max_err_carry=0.4, kp=600.0, kd=50.0, kj=1.5, kjd=0.05, ki=5.0, i_window=0.3, i_limit=0.4,
    self_clear=0.06, w_cup=50.0, r_safe=0.11, w_move=0.05, w_fold=0.02,
)


def direction(th):
    """Unit vector (x, z) of a link at cumulative angle th (0 points up, positive turns towards -x)."""
    out = np.empty(np.shape(th) + (2,))
    out[..., 0] = -np.sin(th)
    out[..., 1] = np.cos(th)
    return out


def wrap(a):
    return (a + np.pi) % (2 * np.pi) - np.pi


def joint_diff(qa, qb):
    """qa - qb over the four arm joints: the root the shortest way round, the limited joints as they are."""
    dq = qa - qb
    return np.concatenate([wrap(dq[..., :1]), dq[..., 1:]], -1)


def fk(q):
    """Joint angles [..., 4] (root, shoulder, elbow, wrist) -> points [..., 4, 2]: shoulder, elbow, wrist, grasp."""
    th = np.cumsum(q, -1)
    p1 = BASE + L1 * direction(th[..., 0])
    p2 = p1 + L2 * direction(th[..., 1])
    p3 = p2 + L3 * direction(th[..., 2])
    p4 = p3 + LG * direction(th[..., 3])
    return np.stack([p1, p2, p3, p4], -2)


def link_points(Q):
    """Points along the arm of each candidate [N, 4] -> [N, 7, 2] (link midpoints and joints) for clearance checks."""
    pts = fk(Q)
    return np.concatenate([(BASE + pts[..., :1, :]) / 2, (pts[..., :-1, :] + pts[..., 1:, :]) / 2, pts[..., :3, :]], -2)


def clearance(Q, cup):
    return np.linalg.norm(link_points(Q) - cup, axis=-1).min(-1)


_PATH_S = np.linspace(0, 1, 9)[1:, None]  # the points of a straight joint-space path where clearance is checked


def path_clearance(q_now, q_to, cup):
    """The least clearance from the cup along the straight joint-space path from q_now to each q_to [..., 4]."""
    dq = joint_diff(q_to, q_now)[..., None, :]  # [..., 1, 4]
    return clearance(q_now + _PATH_S * dq, cup).min(-1)


# the shoulder-bend grid of ik(): root-to-elbow is one rigid segment of length _SEG at angle _ALPHA per bend
_SEG = np.linalg.norm(np.stack([-L2 * np.sin(SHOULDER_GRID), L1 + L2 * np.cos(SHOULDER_GRID)], -1), axis=-1)
_ALPHA = np.arctan2(L2 * np.sin(SHOULDER_GRID), L1 + L2 * np.cos(SHOULDER_GRID))


def ik(target, phi, q_now, cup, P, rank: bool = True) -> Optional[np.ndarray]:
    """Joint angles [N, 4] that put the grasp site at `target` with the hand at cumulative angle `phi`, best first
    (cost: closeness to the cup, motion from q_now, folding, the arm near the floor), or None where none reaches.
    rank=False: the candidates unsorted (enough to ask whether any reaches)."""
    wrist = target - LG * direction(phi)
    u = wrist - BASE
    D = np.linalg.norm(u)
    q1, a, alpha = SHOULDER_GRID, _SEG, _ALPHA  # the shoulder bend; root-to-elbow length and angle
    cos_b = (a ** 2 + D ** 2 - L3 ** 2) / (2 * a * max(D, 1e-6))
    ok = np.abs(cos_b) <= 1
    beta = np.arccos(np.clip(cos_b, -1, 1))
    th_u = np.arctan2(-u[0], u[1])
    cands = []
    for sign in (1, -1):  # both elbow branches
        th_v = th_u + sign * beta
        elbow = BASE + a[:, None] * direction(th_v)
        th3 = np.arctan2(-(wrist - elbow)[:, 0], (wrist - elbow)[:, 1])
        th1 = th_v - alpha
        q0 = q_now[0] + wrap(th1 - q_now[0])
        cands.append(np.stack([q0, q1, wrap(th3 - th1 - q1), wrap(phi - th3)], -1)[ok])
    Q = np.concatenate(cands)
    Q = Q[np.all(np.abs(Q[:, 1:]) <= JOINT_LIMIT, 1)] if len(Q) else Q
    if not len(Q):
        return None
    pts = fk(Q)
    upper = pts[:, 0] - BASE  # the hand must stay clear of the upper arm (the arm folded onto itself)

    def off_upper(p):
        s = np.clip(np.sum((p - BASE) * upper, -1) / np.sum(upper * upper, -1), 0, 1)
        return np.linalg.norm(p - (BASE + s[:, None] * upper), axis=-1)

    keep = (off_upper(pts[:, 2]) > P["self_clear"]) & (off_upper(pts[:, 3]) > P["self_clear"])
    Q = Q[keep]
    if not len(Q):
        return None
    if not rank:
        return Q
    mids = link_points(Q)
    near = np.linalg.norm(mids - cup, axis=-1)
    cost = P["w_cup"] * np.sum(np.maximum(0, P["r_safe"] - near) ** 2, 1) \
        + P["w_move"] * np.sum(joint_diff(Q, q_now) ** 2, 1) + P["w_fold"] * np.sum(Q[:, 1:] ** 2, 1) \
        + 100.0 * np.sum(np.maximum(0, 0.03 - mids[..., 1]) ** 2, 1)
    return Q[np.argsort(cost)]


class ArmDynamics:
    """Mass matrix and gravity/Coriolis/damping torques of the four arm joints, from the env's own MuJoCo model on a
    private MjData (the simulation the expert acts in is never touched)."""

    def __init__(self, physics):
        import mujoco

        self.mj = mujoco
        self.m = physics.model.ptr
        self.d = mujoco.MjData(self.m)
        jid = [self.m.joint(j).id for j in ARM]
        self.qadr = np.array([self.m.jnt_qposadr[j] for j in jid])
        self.vadr = np.array([self.m.jnt_dofadr[j] for j in jid])
        names = [self.m.joint(j).name for j in range(self.m.njnt)]
        prop = "ball" if "ball_x" in names else "peg"  # the task's loose object (insert_ball or insert_peg)
        self.ball = [self.m.jnt_qposadr[self.m.joint(f"{prop}_{a}").id] for a in ("x", "z")]

    def __call__(self, q, qd):
        mj, m, d = self.mj, self.m, self.d
        d.qpos[:] = 0
        d.qvel[:] = 0
        d.qpos[self.qadr], d.qvel[self.vadr] = q, qd
        d.qpos[self.ball] = 5.0  # the object out of the way (its pose does not enter the arm's terms)
        mj.mj_kinematics(m, d)
        mj.mj_comPos(m, d)
        bias = np.zeros(m.nv)
        mj.mj_rne(m, d, 0, bias)
        mj.mj_crb(m, d)
        M = np.zeros((m.nv, m.nv))
        mj.mj_fullM(m, d, M)
        v = self.vadr[:4]
        return M[np.ix_(v, v)], bias[v] + m.dof_damping[v] * qd[:4]


class _Episode:
    def __init__(self):
        self.integral = np.zeros(4)
        self.mode = ""
        self.stuck = self.backoff = 0  # steps closed on the ball without holding it; steps left of a retreat


class ManipulatorExpert:
    """The scripted expert as a batched behaviour policy for dmc.run_episodes: act(envs, obs, t) -> actions [n, 5].
    An episode's memory starts afresh at t == 0."""

    needs_env = True

    def __init__(self, settings: Optional[dict] = None):
        self.P = {**SETTINGS, **(settings or {})}
        self.noise_std = 0.0  # Gaussian action noise std of a graded behaviour (dmc.run_episodes adds it)
        self.state: Dict[int, _Episode] = {}
        self.dyn: Optional[ArmDynamics] = None

    def __call__(self, obs):
        raise ValueError("the scripted manipulator expert keeps a memory per episode and reads the env's model: it runs "
                         "only inside dmc.run_episodes (collection, evaluate.py --reference expert), not as a labeller")

    def act(self, envs: List, obs: np.ndarray, t: int) -> np.ndarray:
        out = np.zeros((len(envs), 5))
        for j, env in enumerate(envs):
            if self.dyn is None:
                self.dyn = ArmDynamics(env.physics)
            if t == 0 or id(env) not in self.state:
                self.state[id(env)] = self.new_episode(env)
            out[j] = self.act_one(np.asarray(obs[j], np.float64), self.state[id(env)])
        return out

    def new_episode(self, env) -> _Episode:
        """The memory of an episode that starts on `env`."""
        return _Episode()

    def act_one(self, o: np.ndarray, ep: _Episode) -> np.ndarray:
        P = self.P
        ang = o[:16].reshape(8, 2)  # (sin, cos) per joint
        q, qd = np.arctan2(ang[:, 0], ang[:, 1]), o[16:24]
        ball, ball_v, cup_pos = o[33:35].copy(), o[37:40], o[40:42]
        tilt = 2 * np.arctan2(o[43], o[42])
        grasp_site = fk(q[:4])[3]
        dist = np.linalg.norm(grasp_site - ball)
        closed = q[4] > 0.25
        R = np.array([[np.cos(tilt), np.sin(tilt)], [-np.sin(tilt), np.cos(tilt)]])
        cup = cup_pos + R @ np.array([0.0, 0.01])
        lo, hi = sorted([cup_pos + R @ np.array([-0.03, 0.06]), cup_pos + R @ np.array([0.03, 0.06])],
                        key=lambda p: p[1])  # the rim's two top corners
        side = np.sign(lo[0] - hi[0]) or 1.0
        x_in = hi[0] + side * P["clear"]
        x_drop = (x_in + lo[0]) / 2 if side * (lo[0] - x_in) > 0 else lo[0]
        drop = np.array([x_drop, hi[1] + P["above"]])  # a vertical drop from here lands inside the tilted cup
        grip, phi, v_ff = -1.0, np.pi, np.zeros(2)

        def reach(p, hand=np.pi):
            return ik(grasp_site + (p - ball), hand, q[:4], cup, P, rank=False) is not None

        if dist < P["held"] and closed:
            ep.mode, grip = "carry", 1.0
            for up in (0.0, 0.04, 0.08, 0.12):  # higher where the arm cannot fold enough to let go low
                if reach(drop + np.array([0.0, up])):
                    drop = drop + np.array([0.0, up])
                    break
            safe_z, aim = max(drop[1], hi[1] + 0.05), drop
            if abs(ball[0] - drop[0]) > P["across"] and ball[1] < safe_z - P["band"]:  # up first, clear of the cup
                for f in (0.0, 0.25, 0.5, 0.75):
                    cand = np.array([ball[0] + f * (drop[0] - ball[0]), safe_z])
                    if reach(cand):
                        aim = cand
                        break
            target = grasp_site + (aim - ball)
            opening = qd[4] < -0.05
            if np.linalg.norm(drop - ball) < (P["release"] if not opening else 0.04):
                grip = -1.0
        elif np.linalg.norm(ball - cup_pos) < P["in_cup"] and np.linalg.norm(ball_v[:2]) < P["v_block"]:
            ep.mode, target = "rest", None  # the ball lies in the cup (as 10% of episodes start): keep still
        elif abs(ball[0] - cup_pos[0]) < P["near_cup"] and ball[1] > cup_pos[1] - 0.03 and (
                dist > 0.04 or np.linalg.norm(ball - drop) < 0.05):
            ep.mode, target = "clear", np.array([drop[0], drop[1] + 0.1])
        elif np.linalg.norm(ball_v[:2]) > P["v_block"] and ball[1] < 0.1:
            ep.mode, grip = "wall", 1.0
            wx = P["wall_x"] if abs(cup_pos[0]) > 0.15 or cup_pos[1] > 0.3 else -0.15 * (np.sign(cup_pos[0]) or 1.0)
            target = np.array([wx, P["wall_z"]]) if abs(grasp_site[0] - wx) < 0.03 else np.array([wx, 0.12])
        else:
            ep.mode, v_ff = "grasp", np.array([ball_v[0], 0.0])
            ball = ball + np.array([ball_v[0], 0.0]) * P["lead"]
            low = max(ball[1], 0.022) + P["grip_z"]
            aligned = abs(grasp_site[0] - ball[0]) < P["align"]
            target = np.array([ball[0], low]) if aligned else np.array([ball[0], max(low + 0.08, 0.12)])
            if (aligned and grasp_site[1] - ball[1] < P["close"]) or (not aligned and grasp_site[1] < ball[1] + 0.04):
                grip = 1.0
            # closed on the ball without holding it (pinched off-centre, or against the floor or a wall) for a while:
            # open, rise above it and try again
            ep.stuck = ep.stuck + 1 if grip > 0 and q[4] > 0.15 else 0
            if P["retry"] and ep.stuck > P["retry"]:
                ep.stuck, ep.backoff = 0, P["backoff"]
            if ep.backoff > 0:
                ep.backoff -= 1
                grip, target = -1.0, np.array([ball[0], max(low + 0.08, 0.12)])

        Qs = None
        shrinks = () if target is None else (1.0, 0.95, 1.1, 0.9, 1.2, 0.85, 1.35, 0.8, 1.5, 0.7)
        for shrink in shrinks:  # out of reach: the nearest point that is not
            p = BASE + (target - BASE) * shrink
            for lean in (0.0, 0.3, 0.6, 0.9):  # lean the hand outward where pointing down cannot reach
                Qs = ik(p, phi + lean * (np.sign(p[0]) or 1.0), q[:4], cup, P)
                if Qs is not None:
                    break
            if Qs is not None:
                break
        q_to = q[:4]
        r_path = min(P["r_path"], float(clearance(q[:4], cup)) - 0.01)

        def pick(Qs):
            top = Qs[:P["topk"]]
            clear = path_clearance(q[:4], top, cup)
            ok = np.flatnonzero(clear > r_path)
            return (top[ok[0]], True) if len(ok) else (top[np.argmax(clear)], False)

        if Qs is not None:
            q_to, free = pick(Qs)
            if not free and ep.mode != "carry":  # every way there passes the cup: over its top first
                Qv = ik(np.array([cup[0], hi[1] + P["via"]]), phi, q[:4], cup, P)
                if Qv is not None:
                    q_to, _ = pick(Qv)
                ep.mode += "+via"
        qd_want = np.zeros(4)
        if np.any(v_ff):  # follow a rolling ball: its velocity through the Jacobian's damped pseudo-inverse
            eps = 1e-4
            J = np.ascontiguousarray(((fk(q[:4] + eps * np.eye(4))[:, 3] - grasp_site) / eps).T)  # as np.stack(…, 1)
            qd_want = J.T @ np.linalg.solve(J @ J.T + 1e-3 * np.eye(2), v_ff)
        return self.command(q, qd, q_to, ep, ep.mode.startswith("carry"), grip, qd_want)

    def command(self, q, qd, q_to, ep, carry: bool, grip: float, qd_want=None) -> np.ndarray:
        """The action [4 arm torques, grip] that drives the arm's joints toward q_to (and their speeds toward qd_want,
        zero by default): computed torque M (kp e + kd de) + bias, plus a joint-space PID (its integral kept in
        `ep`). The error e is clipped to max_err, or max_err_carry while `carry`."""
        P = self.P
        qd_want = np.zeros(4) if qd_want is None else qd_want
        e = joint_diff(q_to, q[:4])
        ep.integral = np.clip(ep.integral + P["ki"] * DT * np.where(np.abs(e) < P["i_window"], e, 0.0),
                              -P["i_limit"], P["i_limit"])
        lim = P["max_err_carry"] if carry else P["max_err"]
        e = np.clip(e, -lim, lim)
        M, bias = self.dyn(q, qd)
        tau = M @ (P["kp"] * e + P["kd"] * (qd_want - qd[:4])) + bias \
            + GEAR * (ep.integral + P["kj"] * e + P["kjd"] * (qd_want - qd[:4]))
        return np.clip(np.concatenate([tau / GEAR, [grip]]), -1, 1)


def load(name: str, obs_keys) -> ManipulatorExpert:
    """The scripted expert of task `name` (this file's for insert_ball, dmc_scripted_peg.py's for insert_peg); refuses
    other tasks and another observation layout."""
    from envs import dmc_scripted_peg

    scripted = TASKS + dmc_scripted_peg.TASKS
    if name not in scripted:
        raise ValueError(f"the scripted expert is for {', '.join('dmc:' + t for t in scripted)}, not dmc:{name}")
    if [tuple(k) for k in obs_keys] != list(OBS_KEYS):
        raise ValueError(f"dmc:{name}: observation layout {list(obs_keys)} is not the one the scripted expert reads")
    return ManipulatorExpert() if name in TASKS else dmc_scripted_peg.PegExpert()
