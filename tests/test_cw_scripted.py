"""Scripted CausalWorld expert (cw_scripted.py): the inverse-kinematics bridge, the block choice, the --cw.expert
option and a two-episode collection with it."""
import numpy as np
import pytest

from oilca import contract

import envs
from envs import cw as cw_env
from conftest import one_line_error, run

pytestmark = [pytest.mark.cw,
              pytest.mark.skipif(not cw_env.available(), reason="causal-world is not installed (bash scripts/setup.sh installs it)")]


def test_tip_targets_pinch_geometry():
    from envs import cw_scripted

    tips = cw_scripted.tip_targets(np.array([0.1, -0.05, 0.04]), 0.03, 0.01, np.pi / 2).reshape(3, 3)
    # yaw 90°: the block's y axis points along -x, its x axis along +y
    np.testing.assert_allclose(tips[0], [0.07, -0.05, 0.04], atol=1e-12)
    np.testing.assert_allclose(tips[1], [0.13, -0.04, 0.04], atol=1e-12)
    np.testing.assert_allclose(tips[2], [0.13, -0.06, 0.04], atol=1e-12)


def test_ik_bridge_puts_the_tips_on_their_targets():
    """A normalised joint-position action from tips_to_action, held for 0.5 s, brings every fingertip within 5 mm of
    its target (CausalWorld's end-effector observation frame: z above the floor)."""
    from envs import cw_scripted

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
    from envs import cw_scripted

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
    d = envs.load_dataset(path)
    meta = d["metadata"]
    assert meta["env_config"]["expert"] == "scripted" and meta["collect_args"]["cw"]["expert"] == "scripted"
    assert [b["label"] for b in meta["behavior_policies"]] == ["expert", "uniform random"]
    assert "cw_scripted.py" in meta["behavior_policies"][0]["source"]
    assert d["actions"].shape == (50, 9) and np.all(np.abs(d["actions"]) <= 1)
    assert meta["env_config"]["goals"] == "resample"


class _Stage:
    """A stand-in for CausalWorld's stage: object name -> position and size."""

    def __init__(self, objects):
        self.objects = objects

    def get_object_state(self, name, key):
        return np.asarray(self.objects[name][{"cartesian_position": 0, "size": 1}[key]], float)


def test_hidden_goals_lie_between_the_shown_levels():
    from envs import cw_scripted

    size = [0.1, 0.065, 0.065]
    stage = _Stage({"goal_level_0_num_0": ([0.0, 0.0, 0.03], size), "goal_level_3_num_0": ([0.3, 0.0, 0.3], size),
                    "tool_level_1_num_0": ([0.5, 0.5, 0.03], [0.12, 0.065, 0.065]),
                    "tool_level_2_num_0": ([0.5, 0.5, 0.03], size), "tool_level_0_num_0": ([0.5, 0.5, 0.03], size),
                    "tool_level_1_num_1": ([0.5, 0.5, 0.03], size), "tool_block_0": ([0.5, 0.5, 0.03], size)})
    blocks = ["tool_level_0_num_0", "tool_level_1_num_0", "tool_level_2_num_0", "tool_level_1_num_1", "tool_block_0"]
    hidden = cw_scripted.hidden_goals(stage, blocks, ["goal_level_0_num_0", "goal_level_3_num_0"])
    assert sorted(hidden) == ["hidden_level_1_num_0", "hidden_level_2_num_0"]  # column 1 has no shown goal: none
    np.testing.assert_allclose(hidden["hidden_level_1_num_0"][0], [0.1, 0.0, 0.12])
    np.testing.assert_allclose(hidden["hidden_level_2_num_0"][0], [0.2, 0.0, 0.21])
    np.testing.assert_allclose(hidden["hidden_level_1_num_0"][1], [0.12, 0.065, 0.065])  # the block's own size
    pos, sz = cw_scripted.goal_state(stage, hidden, "goal_level_3_num_0")
    np.testing.assert_allclose(pos, [0.3, 0.0, 0.3])
    assert cw_scripted.hidden_goals(stage, ["tool_block_0"], ["goal_level_0_num_0"]) == {}  # other tasks: none


def test_creative_stacked_blocks_gets_a_feasible_structure_and_its_middle_level(tmp_path):
    """The default stage of creative_stacked_blocks is refused at reset; make_env builds the fixed structure of
    cw_env.STRUCTURES (3 levels of one 6.5 cm, 20 g block), which accepts every class's intervention; the episode
    length is CausalWorld's own rule on it (10 s per block); the script's goals run bottom-up through the inferred
    middle level; a tiny scripted collection records the structure."""
    import collect_data
    from envs import cw_scripted

    st = cw_env.STRUCTURES["creative_stacked_blocks"]
    env = cw_env.make_env("creative_stacked_blocks", 3)
    stage = env.get_stage()
    blocks = cw_env.movable_blocks(env)
    assert len(blocks) == st["stack_levels"] and stage.check_feasiblity_of_stage()
    assert cw_env.default_episode_len(env) == int(st["stack_levels"] * 10 / env.dt)
    for b in blocks:
        assert stage.get_object_state(b, "size")[2] == pytest.approx(st["blocks_min_size"])
        assert stage.get_object_state(b, "mass") == pytest.approx(st["blocks_mass"])
    for c in cw_env.class_table(cw_env.feature_spaces(env, "creative_stacked_blocks", cw_env.ARENA_FEATURES), 3, None):
        cw_env.start_episode(env, cw_env.to_intervention(c, blocks), 0, goals="default")  # raises if refused
    ep = cw_scripted._Episode(env)
    assert ep.goals == ["goal_level_0_num_0", "hidden_level_1_num_0", "goal_level_2_num_0"]
    low, high = (stage.get_object_state(g, "cartesian_position") for g in ("goal_level_0_num_0", "goal_level_2_num_0"))
    np.testing.assert_allclose(ep.hidden["hidden_level_1_num_0"][0], (low + high) / 2)
    assert cw_scripted.next_pick(stage, ep.blocks, ep.goals, ep.hidden)[1] in ep.goals
    env.close()
    path = str(tmp_path / "creative.npz")
    cfg = cw_env.CWConfig(episodes=2, n_classes=1, episode_len=10, noise_levels=(0.0,), expert="scripted", lockstep=2)
    collect_data.main(collect_data.Args(env="cw:creative_stacked_blocks", out=path, seed=0, cw=cfg))
    meta = envs.load_dataset(path)["metadata"]
    assert meta["env_config"]["structure"] == st and meta["env_config"]["goals"] == "default"


def test_general_gets_its_fixed_feasible_structure_and_collects(tmp_path):
    """general's default stage is refused by CausalWorld's own feasibility check (a dropped goal block rolls off the
    arena); make_env builds the fixed structure of cw_env.STRUCTURES instead: five 6.5 cm, 20 g blocks, a feasible
    stage that accepts the interventions of c, and the same goal for every env seed. A tiny scripted collection
    records the structure."""
    import collect_data

    st = cw_env.STRUCTURES["general"]
    goals = []
    for seed in (0, 5):
        env = cw_env.make_env("general", seed)
        stage = env.get_stage()
        blocks = cw_env.movable_blocks(env)
        assert len(blocks) == st["nums_objects"] and stage.check_feasiblity_of_stage()
        for b in blocks:
            np.testing.assert_allclose(stage.get_object_state(b, "size"), [st["tool_block_size"]] * 3, atol=1e-9)
            assert stage.get_object_state(b, "mass") == pytest.approx(st["blocks_mass"])
        spaces = cw_env.feature_spaces(env, "general", cw_env.ARENA_FEATURES)
        for c in cw_env.class_table(spaces, 3, None):
            cw_env.start_episode(env, cw_env.to_intervention(c, blocks), 0, goals="default")  # raises if refused
        goals.append(np.concatenate([stage.get_object_state(g, "cartesian_position")
                                     for g in sorted(stage.get_visual_objects())]))
        env.close()
    np.testing.assert_array_equal(goals[0], goals[1])  # the structure does not depend on the env's seed
    path = str(tmp_path / "general.npz")
    cfg = cw_env.CWConfig(episodes=2, n_classes=1, episode_len=10, noise_levels=(0.0,), expert="scripted", lockstep=2)
    collect_data.main(collect_data.Args(env="cw:general", out=path, seed=0, cw=cfg))
    meta = envs.load_dataset(path)["metadata"]
    assert meta["env_config"]["structure"] == st and meta["env_config"]["goals"] == "default"
    other = {**meta, "env_config": {**meta["env_config"], "structure": {**st, "seed": 1}}}
    with pytest.raises(ValueError, match="collected with the structure"):  # evaluated on another stage: refused
        cw_env.check_spec(other)
