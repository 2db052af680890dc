"""The scripted manipulator experts (insert_ball: envs/dmc_scripted.py, insert_peg: envs/dmc_scripted_peg.py): the
arm geometry against MuJoCo's, the inverse kinematics, the refusals, a tuning episode each, and a collection, replay
and evaluation with the insert_ball expert as the behaviour source."""

import os

import numpy as np
import pytest

import envs
from envs import dmc as dmc_env
from envs import dmc_scripted as ds
from conftest import one_line_error, run

pytestmark = pytest.mark.dmc
TASK = "manipulator-insert_ball"
PEG = "manipulator-insert_peg"


def test_forward_kinematics_matches_mujoco():
    """fk() of the controller puts the grasp site where MuJoCo does, over random arm poses (x-z plane)."""
    env = dmc_env.load_env(TASK, 0)
    ph = env.physics
    rng = np.random.default_rng(0)
    for _ in range(20):
        q = np.concatenate([rng.uniform(-np.pi, np.pi, 1), rng.uniform(-2.5, 2.5, 3)])
        with ph.reset_context():
            ph.named.data.qpos[list(ds.ARM[:4])] = q
        site = ph.named.data.site_xpos["grasp"][[0, 2]]
        np.testing.assert_allclose(ds.fk(q)[3], site, atol=1e-6)


def test_inverse_kinematics_reaches_its_target():
    """Every candidate ik() returns puts the grasp site at the target with the hand at the asked angle, within the
    joint limits; an unreachable point gives None."""
    P = ds.SETTINGS
    cup = np.array([5.0, 5.0])  # far away: no clearance cost
    for target, phi in (([0.2, 0.1], np.pi), ([-0.3, 0.25], np.pi), ([0.1, 0.6], np.pi + 0.3)):
        Q = ds.ik(np.array(target), phi, np.zeros(4), cup, P)
        assert Q is not None and len(Q) > 0
        np.testing.assert_allclose(ds.fk(Q)[:, 3], np.broadcast_to(target, (len(Q), 2)), atol=1e-9)
        np.testing.assert_allclose(ds.wrap(Q.sum(1) - phi), 0, atol=1e-9)
        assert np.all(np.abs(Q[:, 1:]) <= ds.JOINT_LIMIT)
    assert ds.ik(np.array([0.0, -1.0]), np.pi, np.zeros(4), cup, P) is None  # 1.4 m from the root: out of reach


def test_held_offset_inverts_carried_peg():
    from envs import dmc_scripted_peg as dp

    rng = np.random.default_rng(0)
    for _ in range(20):
        q4, rel = rng.uniform(-3, 3, 4), np.array([*rng.uniform(-0.05, 0.05, 2), rng.uniform(-3, 3)])
        peg = dp.carried_peg(q4, rel)
        np.testing.assert_allclose(dp.held_offset(q4, peg), rel, atol=1e-12)
        np.testing.assert_allclose(dp.carried_peg(q4, dp.held_offset(q4, peg)), peg, atol=1e-12)


def test_the_expert_refuses_what_it_cannot_do():
    with pytest.raises(ValueError, match="dmc:manipulator-insert_peg, not dmc:cartpole-swingup"):
        dmc_env.scripted_expert("dmc:cartpole-swingup")
    expert = dmc_env.scripted_expert(f"dmc:{TASK}")
    with pytest.raises(ValueError, match="not as a labeller"):
        expert(np.zeros((1, 44)))
    with pytest.raises(ValueError, match="observation layout"):
        ds.load(TASK, [("arm_pos", 16)])


def tuning_episode(task: str, seed: int, kind: str):
    """One clean 1000-step episode of `task` from task seed `seed` with its scripted expert (kind 'expert') or uniform
    random actions: (return, steps per mode of the script)."""
    env = dmc_env.load_env(task, seed)
    ts, expert, ret, modes = env.reset(), dmc_env.scripted_expert(f"dmc:{task}"), 0.0, {}
    rng = np.random.default_rng(0)
    for t in range(1000):
        o = dmc_env.flatten(ts.observation)
        a = expert.act([env], o[None], t)[0] if kind == "expert" else rng.uniform(-1, 1, 5)
        ts = env.step(a)
        ret += ts.reward or 0.0
        if kind == "expert":
            modes[expert.state[id(env)].mode] = modes.get(expert.state[id(env)].mode, 0) + 1
    return ret, modes


def test_the_expert_solves_a_tuning_episode():
    """Task seed 2004 (one of the hand-tuning seeds, clean actions): it grasps the ball and puts it in the cup;
    uniform random actions on the same start earn nothing (a broken controller fails this)."""
    assert tuning_episode(TASK, 2004, "expert")[0] > 300
    assert tuning_episode(TASK, 2004, "random")[0] < 50


def test_the_peg_expert_inserts_a_peg_it_starts_with_and_hovers_where_one_lies():
    """Three of the hand-tuning seeds, clean actions. 2005: the peg starts in the hand and the slot is within reach; the
    script carries it over the slot's mouth and lowers it in (more than 1/3 per step on average, which holding the
    peg alone cannot earn). 2021: the peg starts in the hand but the slot's angle is out of the arm's reach; the script
    keeps holding it. 2003: the peg falls and lies on its guard; the script finds a hand pose over its grip end that
    MuJoCo finds clear of the floor and holds it (about two thirds of the grasping term's 1/3 on each step). Uniform
    random actions earn nothing on any of them (a broken script fails this)."""
    ret, modes = tuning_episode(PEG, 2005, "expert")
    assert ret > 500 and modes.get("carry", 0) == 1000, (ret, modes)
    ret, modes = tuning_episode(PEG, 2021, "expert")
    assert 250 < ret < 1000 / 3 + 1 and modes.get("carry", 0) == 1000, (ret, modes)
    ret, modes = tuning_episode(PEG, 2003, "expert")
    assert ret > 150 and modes.get("hover", 0) > 800, (ret, modes)
    assert max(tuning_episode(PEG, seed, "random")[0] for seed in (2003, 2005, 2021)) < 10


def test_the_peg_expert_never_touches_the_simulation():
    """Its collision tests run on a private copy of the episode's model (with wider contact margins) and data: the
    env's model, margins included, and its state are what they were."""
    from envs import dmc_scripted_peg as dsp

    env = dmc_env.load_env("manipulator-insert_peg", 2003)
    ts = env.reset()
    model = env.physics.model.ptr
    margins, qpos, qvel = model.geom_margin.copy(), env.physics.data.qpos.copy(), env.physics.data.qvel.copy()
    body_pos = model.body_pos.copy()
    expert = dmc_env.scripted_expert("dmc:manipulator-insert_peg")
    assert isinstance(expert, dsp.PegExpert)
    expert.act([env], dmc_env.flatten(ts.observation)[None], 0)
    ep = expert.state[id(env)]
    peg = np.array([0.0, 0.1, 1.0])
    for q4 in (np.zeros(4), np.array([1.0, 1.2, 1.0, 0.5])):
        expert.collides(ep, q4, peg, 0.005)
    assert np.array_equal(model.geom_margin, margins) and np.array_equal(model.body_pos, body_pos)
    assert np.array_equal(env.physics.data.qpos, qpos) and np.array_equal(env.physics.data.qvel, qvel)
    assert np.all(ep.model.geom_margin == expert.P["margin"])


@pytest.fixture(scope="module")
def scripted_dataset(tmp_path_factory):
    out = str(tmp_path_factory.mktemp("scripted") / "d.npz")
    run("collect_data.py", "--env", f"dmc:{TASK}", "--out", out, "--seed", "1", "--dmc.scripted-noise", "0", "0.5",
        "--dmc.random-policy", "--dmc.episodes", "3", "--dmc.lockstep", "3")
    return out


def test_scripted_collection_records_its_behaviours_and_replays(scripted_dataset, tmp_path):
    """The metadata names the graded scripted behaviours; the stored (s, a, ε) replay to s'; the same collection in
    lockstep 1 gives the same arrays (the expert keeps one memory per env, started afresh each episode)."""
    data = envs.load_dataset(scripted_dataset)
    meta = data["metadata"]
    assert [b["label"] for b in meta["behavior_policies"]] == ["scripted", "scripted+N(0,0.5²)", "uniform random"]
    rows = np.flatnonzero(data["episode_ids"] == 0)[:100]
    env = dmc_env.load_env(TASK, 0)
    env.task.random.seed(1 * 1_000_003 + 0)
    np.testing.assert_allclose(dmc_env.flatten(env.reset().observation), data["observations"][rows[0]], atol=1e-5)
    for i in rows:
        ts = env.step(np.clip(data["actions"][i] + data["exogenous"][i], -1, 1))
        np.testing.assert_allclose(dmc_env.flatten(ts.observation), data["next_observations"][i], atol=1e-4)
    other = str(tmp_path / "lockstep1.npz")
    run("collect_data.py", "--env", f"dmc:{TASK}", "--out", other, "--seed", "1", "--dmc.scripted-noise", "0", "0.5",
        "--dmc.random-policy", "--dmc.episodes", "3", "--dmc.lockstep", "1")
    again = envs.load_dataset(other)
    for key in ("observations", "actions", "exogenous", "rewards"):
        np.testing.assert_array_equal(again[key], data[key])


def test_collection_in_workers_gives_the_same_bytes(tmp_path, monkeypatch):
    """--dmc.workers 2 shares the lockstep batches between two processes: the file is the single-process one, byte
    for byte (the worker count is not recorded); a count below 1 is a one-line error that writes nothing. 60-step
    episodes: the episode length travels to the workers with each batch."""
    import collect_data

    monkeypatch.setattr(dmc_env, "EPISODE_LEN", 60)
    paths = []
    for workers in (1, 2):
        out = str(tmp_path / f"w{workers}.npz")
        collect_data.main(collect_data.Args(env=f"dmc:{TASK}", out=out, seed=3, dmc=dmc_env.DMCConfig(
            scripted_noise=(0.0, 0.5), random_policy=True, episodes=7, lockstep=2, workers=workers)))
        paths.append(out)
    one, two = (open(p, "rb").read() for p in paths)
    assert one == two
    data = envs.load_dataset(paths[0])
    assert data["observations"].shape[0] == 7 * 60 and len(set(data["policy_ids"].tolist())) == 3
    assert "workers" not in data["metadata"]["collect_args"]["dmc"]
    bad = tmp_path / "bad.npz"
    p = run("collect_data.py", "--env", f"dmc:{TASK}", "--out", str(bad), "--dmc.workers", "0", ok=False)
    assert one_line_error(p, "--dmc.workers") and not bad.exists()


def test_the_reference_expert_of_a_scripted_dataset_is_the_script(scripted_dataset, tmp_path):
    """The expert reference of a scripted dataset (evaluate.py --reference expert, augment.py's expert rows) is the
    scripted expert, though no snapshot is recorded."""
    spec = envs.env_spec(envs.load_dataset(scripted_dataset)["metadata"])
    assert isinstance(dmc_env.reference_policy(spec, "expert", 0), ds.ManipulatorExpert)
    out = str(tmp_path / "ref_{split}.json")
    run("evaluate.py", "--reference", "expert", "--env-dataset", scripted_dataset, "--split", "train", "--episodes", "1",
        "--out", out)
    assert os.path.exists(out.format(split="train"))


def test_bad_noise_level_is_a_one_line_error(tmp_path):
    p = run("collect_data.py", "--env", f"dmc:{TASK}", "--out", str(tmp_path / "x.npz"), "--dmc.scripted-noise", "-1",
            ok=False)
    assert one_line_error(p, "--dmc.scripted-noise") and not os.path.exists(tmp_path / "x.npz")


def test_an_oracle_labeller_is_refused_in_one_line(scripted_dataset, tmp_path):
    """augment.py --labels oracle on a scripted dataset: the expert cannot label states out of their episodes."""
    ivae = tmp_path / "ivae"
    run("train_ivae.py", "--dataset", scripted_dataset, "--out-dir", str(ivae), "--total-steps", "5", "--restarts", "1",
        "--no-compare", "--hidden", "8")
    out = tmp_path / "aug.npz"
    p = run("augment.py", "--dataset", scripted_dataset, "--ivae", str(ivae / "ivae.pt"), "--labels", "oracle",
            "--ratio", "2.0", "--out", str(out), ok=False)
    assert one_line_error(p, "not as a labeller") and not out.exists()


def test_scripted_expert_check_script(tmp_path):
    """scripts/scripted_expert.py on two clean episodes: a JSON record of every return and its markdown table; bad
    input is one line and writes nothing."""
    import json

    out = tmp_path / "check.json"
    run("scripts/scripted_expert.py", "--seeds", "5", "--episodes", "2", "--settings", "clean", "--out", str(out))
    rec = json.loads(out.read_text())
    assert [(r["seed"], r["setting"], len(r["returns"]["scripted"]), len(r["returns"]["random"])) for r in rec["rows"]] \
        == [(5, "clean", 2, 2)]
    table = (tmp_path / "check.md").read_text().splitlines()
    assert table[0].startswith("recorded output, ") and table[-1].startswith("| 5 | clean | ")
    p = run("scripts/scripted_expert.py", "--episodes", "1", "--out", str(tmp_path / "bad.json"), ok=False)
    assert one_line_error(p, "--episodes") and not (tmp_path / "bad.json").exists()
    p = run("scripts/scripted_expert.py", "--task", "cartpole-swingup", "--out", str(tmp_path / "bad.json"), ok=False)
    assert one_line_error(p, "--task") and not (tmp_path / "bad.json").exists()
