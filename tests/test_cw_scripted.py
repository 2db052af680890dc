"""Scripted CausalWorld expert (cw_scripted.py): the inverse-kinematics bridge, the block choice, the --cw.expert
option and a two-episode collection with it."""
import numpy as np
import pytest

import contract
import cw_env
from conftest import one_line_error, run

pytestmark = [pytest.mark.cw,
              pytest.mark.skipif(not cw_env.available(), reason="causal-world is not installed (bash scripts/setup.sh installs it)")]


def test_tip_targets_pinch_geometry():
    import cw_scripted

    tips = cw_scripted.tip_targets(np.array([0.1, -0.05, 0.04]), 0.03, 0.01, np.pi / 2).reshape(3, 3)
    # yaw 90°: the block's y axis points along -x, its x axis along +y
    np.testing.assert_allclose(tips[0], [0.07, -0.05, 0.04], atol=1e-12)
    np.testing.assert_allclose(tips[1], [0.13, -0.04, 0.04], atol=1e-12)
    np.testing.assert_allclose(tips[2], [0.13, -0.06, 0.04], atol=1e-12)


def test_ik_bridge_puts_the_tips_on_their_targets():
    """A normalised joint-position action from tips_to_action, held for 0.5 s, brings every fingertip within 5 mm of
    its target (CausalWorld's end-effector observation frame: z above the floor)."""
    import cw_scripted

    env = cw_env.make_env("stacking2", 0)
    cw_env.start_episode(env, {}, 0, goals="default")
    for center, yaw in (([0.05, -0.03, 0.12], 0.3), ([-0.04, 0.06, 0.07], -0.5)):
        target = cw_scripted.tip_targets(np.array(center), 0.05, 0.02, yaw)
        for _ in range(40):
            a = cw_scripted.tips_to_action(env, target)
            assert a.shape == (9,) and np.all(np.abs(a) <= 1)
            env.step(a)
        tips = env._robot.get_latest_full_state()["end_effector_positions"]
        assert np.abs(tips - target).reshape(3, 3).max() < 0.005, (tips - target).reshape(3, 3)
    env.close()


def test_next_pick_fills_the_lowest_open_goal():
    """towers starts with one block already in the bottom goal: the script moves on to the next level, with another
    block."""
    import cw_scripted

    env = cw_env.make_env("towers", 0)
    cw_env.start_episode(env, {}, 0, goals=cw_env.goal_mode("towers"))
    ep = cw_scripted._Episode(env)
    block, goal = cw_scripted.next_pick(env.get_stage(), ep.blocks, ep.goals)
    assert goal == "goal_level_1_col_0_row_0" and block != "tool_level_3_col_0_row_0"
    env.close()
    with pytest.raises(ValueError, match="acts on the simulator"):
        cw_scripted.ScriptedExpert()(np.zeros((1, 84)))


def test_expert_option_is_checked():
    cw_env.check_expert("towers", "scripted")
    for args, words in ((("towers", "scriptd"), "--cw.expert must be one of shipped, scripted"),
                        (("pushing", "scripted"), "--cw.expert scripted is for the block tasks"),
                        (("towers", "scripted", "snap.pt"), "two experts")):
        with pytest.raises(ValueError, match=words):
            cw_env.check_expert(*args)
    proc = run("collect_data.py", "--env", "cw:stacking2", "--out", "/nonexistent/x.npz", "--cw.expert", "scriptd", ok=False)
    assert one_line_error(proc, "--cw.expert must be one of"), proc.stderr


def test_collect_two_scripted_episodes(tmp_path):
    import collect_data

    path = str(tmp_path / "stacking2.npz")
    cfg = cw_env.CWConfig(episodes=2, n_classes=1, episode_len=25, noise_levels=(0.0,), expert="scripted", lockstep=2)
    collect_data.main(collect_data.Args(env="cw:stacking2", out=path, seed=0, cw=cfg))
    d = contract.load_dataset(path)
    meta = d["metadata"]
    assert meta["env_config"]["expert"] == "scripted" and meta["collect_args"]["cw"]["expert"] == "scripted"
    assert [b["label"] for b in meta["behavior_policies"]] == ["expert", "uniform random"]
    assert "cw_scripted.py" in meta["behavior_policies"][0]["source"]
    assert d["actions"].shape == (50, 9) and np.all(np.abs(d["actions"]) <= 1)
    assert meta["env_config"]["goals"] == "resample"
