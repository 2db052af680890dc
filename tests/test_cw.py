"""CausalWorld backend (cw_env.py) on tiny settings: compatibility layer, interventions, collection, evaluation."""
import json
import os

import numpy as np
import pytest

from oilca import contract
import envs
from envs import cw as cw_env
from conftest import one_line_error, run

pytestmark = [pytest.mark.cw,
              pytest.mark.skipif(not cw_env.available(), reason="causal-world is not installed (bash scripts/setup.sh installs it)")]

TINY = dict(episodes=15, episode_len=12, lockstep=4)  # 3 classes × 5 behaviour policies


@pytest.fixture(scope="module")
def tiny_cw(tmp_path_factory):
    """A tiny pushing dataset written by collect_data.main (15 episodes of 12 steps)."""
    import collect_data

    path = str(tmp_path_factory.mktemp("cw") / "pushing.npz")
    collect_data.main(collect_data.Args(env="cw:pushing", out=path, seed=1, cw=cw_env.CWConfig(**TINY)))
    return path


def test_shipped_experts_load_with_numpy_weights():
    env = cw_env.make_env("pushing", 0)
    obs = cw_env.start_episode(env, {}, goal_seed=3)
    env.close()
    for task in cw_env.SHIPPED_EXPERTS:
        policy = cw_env.load_shipped_expert(task)
        a = policy(np.zeros((4, policy.obs_dim)))
        assert a.shape == (4, 9) and np.all(np.abs(a) <= 1)
    assert cw_env.load_shipped_expert("pushing").obs_dim == len(obs) == 56
    with pytest.raises(ValueError, match="ships no expert"):
        cw_env.load_shipped_expert("towers")


def test_intervention_ground_truth_matches_the_simulator():
    """What we set is what pybullet simulates and what CausalWorld reports (issue #106 patched), after the reset."""
    import pybullet
    from causal_world.configs.world_constants import WorldConstants

    env = cw_env.make_env("pushing", 0)
    blocks = cw_env.movable_blocks(env)
    assert blocks == ["tool_block"]
    values = {"stage_color": [0.1, 0.2, 0.3], "stage_friction": 0.33, "floor_friction": 0.58, "block_mass": 0.02,
              "block_color": [0.6, 0.7, 0.9]}
    cw_env.start_episode(env, cw_env.to_intervention(values, blocks), goal_seed=0)
    for _ in range(3):
        env.step(np.zeros(9))
    truth = env.get_current_state_variables()
    assert truth["stage_friction"] == pytest.approx(0.33) and truth["floor_friction"] == pytest.approx(0.58)
    assert np.allclose(truth["stage_color"], [0.1, 0.2, 0.3], atol=1e-6)
    assert truth["tool_block"]["mass"] == pytest.approx(0.02) and np.allclose(truth["tool_block"]["color"], [0.6, 0.7, 0.9])
    client = env.get_stage()._pybullet_client_full_id
    assert pybullet.getDynamicsInfo(WorldConstants.STAGE_ID, -1, physicsClientId=client)[1] == pytest.approx(0.33)
    assert pybullet.getDynamicsInfo(WorldConstants.FLOOR_ID, -1, physicsClientId=client)[1] == pytest.approx(0.58)
    # the #106 patch reads the goal-less client when one exists (pixel mode); here only the full client exists
    assert env.get_stage().get_current_variable_values_for_arena.__func__ is cw_env._fixed_arena_values
    spaces = cw_env.feature_spaces(env, "pushing", cw_env.FEATURES)
    assert spaces["stage_friction"] == {"A": [0.3, 0.6], "B": [0.6, 0.8]}
    assert spaces["stage_color"]["A"] == [[0, 0, 0], [0.5, 0.5, 0.5]] and spaces["block_mass"]["B"] == [0.045, 0.1]
    env.close()


def test_goal_modes():
    """Goals are resampled per episode (seeded), except where the shipped expert only knows the default goal."""
    env = cw_env.make_env("pushing", 0)
    first = [cw_env.start_episode(env, {}, seed) for seed in (1, 2, 1)]
    assert not np.array_equal(first[0], first[1]) and np.array_equal(first[0], first[2])
    default = [cw_env.start_episode(env, {}, seed, goals="default") for seed in (1, 2)]
    assert np.array_equal(*default)
    env.close()
    assert cw_env.goal_mode("pick_and_place") == "default" and cw_env.goal_mode("picking") == "resample"
    assert cw_env.goal_mode("towers") == "default"  # its goal sampler changes the number of blocks


def test_class_table_and_bad_values():
    spaces = {"stage_friction": {"A": [0.3, 0.6], "B": [0.6, 0.8]}, "stage_color": {"A": [[0, 0, 0], [0.5, 0.5, 0.5]], "B": [[0.5] * 3, [1] * 3]}}
    table = cw_env.class_table(spaces, 3, None)
    assert [r["stage_friction"] for r in table] == [0.35, 0.45, 0.55] and table[0]["stage_color"] == [0.083333] * 3
    ok = json.dumps([{"stage_friction": 0.31, "stage_color": [0, 0.1, 0.5]}, {"stage_friction": 0.6, "stage_color": [0.2] * 3}])
    assert cw_env.class_table(spaces, 2, ok)[1]["stage_friction"] == 0.6
    for bad, words in (([{"stage_friction": 0.7, "stage_color": [0.1] * 3}] * 2, "outside CausalWorld's space A"),
                       ([{"stage_friction": 0.4, "stage_color": [0.6, 0.1, 0.1]}] * 2, "outside CausalWorld's space A"),
                       ([{"stage_friction": 0.4, "stage_colour": [0.1] * 3}] * 2, "unknown feature"),
                       ([{"stage_friction": 0.4, "stage_color": [0.1] * 2}] * 2, "needs 3 number"),
                       ([{"stage_friction": 0.4, "stage_color": [0.1] * 3}], "list of 2 objects")):
        with pytest.raises(ValueError, match=words):
            cw_env.class_table(spaces, 2, json.dumps(bad))
    with pytest.raises(ValueError, match="unknown CausalWorld feature"):
        cw_env.check_features(["stage_friction", "gravity"])
    draws = [cw_env.draw_values(spaces, "B", np.random.default_rng(i)) for i in range(20)]
    assert all(0.6 <= d["stage_friction"] <= 0.8 and min(d["stage_color"]) >= 0.5 for d in draws)


def test_collect_tiny_dataset(tiny_cw):
    d = envs.load_dataset(tiny_cw)  # the contract's checks: s'_t = s_{t+1}, one timeout per episode, returns
    meta = d["metadata"]
    assert meta["env_id"] == "cw:pushing" and meta["obs_dim"] == 56 and meta["act_dim"] == 9
    assert len(d["rewards"]) == 15 * 12 and d["timeouts"].sum() == 15 and not d["terminals"].any()
    assert sorted(np.unique(d["aux"]).tolist()) == [0, 1, 2] and d["expert"].any()
    assert meta["class_table"][2]["floor_friction"] == 0.55 and meta["spaces"]["floor_friction"]["B"] == [0.6, 0.8]
    assert meta["env_config"]["task"] == "pushing" and meta["env_config"]["episode_len"] == 12
    assert [b["label"] for b in meta["behavior_policies"]][:2] == ["expert", "expert+N(0,0.5²)"]
    assert np.all(np.abs(d["actions"]) <= 1)
    assert "expert" not in meta["collect_args"]["cw"] and "expert" not in meta["env_config"]  # records as before
    # goals are resampled per episode: the goal part of the first observation differs between episodes
    first = d["observations"][d["episode_ids"] == 0][0], d["observations"][d["episode_ids"] == 3][0]
    assert not np.array_equal(*first)


def test_collect_is_repeatable_and_rejects_bad_arguments(tiny_cw, tmp_path, capsys):
    import collect_data

    again = str(tmp_path / "again.npz")
    capsys.readouterr()
    collect_data.main(collect_data.Args(env="cw:pushing", out=again, seed=1, cw=cw_env.CWConfig(**TINY)))
    assert open(again, "rb").read() == open(tiny_cw, "rb").read()
    # progress through progress.Progress: 15 episodes in chunks of 4 end on a line at 100% with the env step rate
    lines = [ln for ln in capsys.readouterr().out.splitlines() if ln.startswith("[collect cw:pushing] ")]
    assert lines and lines[-1].startswith("[collect cw:pushing] step 15/15 (100%)  ") and "episodes/s  ETA 0s" in lines[-1]
    assert float(lines[-1].split("env_steps_per_s ")[1]) > 0
    bad_value = json.dumps([{"stage_color": [0.1] * 3, "stage_friction": 0.7, "floor_friction": 0.4}] * 3)
    out = str(tmp_path / "bad.npz")
    for flags, words in ((["--cw.interventions", bad_value], "outside CausalWorld's space A"),
                         (["--cw.features", "stage_friction", "block_weight"], "unknown CausalWorld feature")):
        proc = run("collect_data.py", "--env", "cw:pushing", "--out", out, "--cw.episodes", "3", *flags, ok=False)
        assert one_line_error(proc, words), proc.stderr
        assert not os.path.exists(out) and not os.path.exists(out + ".parts")
    proc = run("collect_data.py", "--env", "cw:pushing", "--out", out, "--cw.workers", "0", ok=False)
    assert one_line_error(proc, "--cw.workers") and not os.path.exists(out + ".parts")
    proc = run("collect_data.py", "--env", "cw:reach", "--out", out, ok=False)
    assert "unknown CausalWorld task" in proc.stderr and not os.path.exists(out)


def test_collection_resumes_and_runs_in_workers_with_the_same_bytes(tiny_cw, tmp_path, monkeypatch, capsys):
    """An interrupted collection keeps its finished batches in <out>.parts and the next run with the same arguments
    runs only the rest; batches from other arguments are discarded; --cw.workers 2 spreads the batches over two
    processes. Each gives the file of the uninterrupted single-process run, byte for byte, and removes the folder."""
    import collect_data

    want = open(tiny_cw, "rb").read()
    out = str(tmp_path / "resumed.npz")
    args = lambda seed=1, **kw: collect_data.Args(env="cw:pushing", out=out, seed=seed,  # noqa: E731
                                                  cw=cw_env.CWConfig(**{**TINY, **kw}))
    real, calls = cw_env.Lockstep.run, []

    def stop_after_two(self, *a, **kw):
        if len(calls) == 2:
            raise KeyboardInterrupt  # as a SIGTERM from the runner or a session's end would
        calls.append(1)
        return real(self, *a, **kw)

    monkeypatch.setattr(cw_env.Lockstep, "run", stop_after_two)
    with pytest.raises(KeyboardInterrupt):
        collect_data.main(args(seed=2))  # other arguments: these two batches must not be reused below
    calls.clear()
    capsys.readouterr()
    with pytest.raises(KeyboardInterrupt):
        collect_data.main(args())
    assert "2 batch files of other arguments or code: discarded" in capsys.readouterr().out
    assert not os.path.exists(out)
    assert sorted(os.listdir(out + ".parts")) == ["batch_00000.npz", "batch_00001.npz", "key.json"]
    monkeypatch.setattr(cw_env.Lockstep, "run", real)
    capsys.readouterr()
    collect_data.main(args())
    text = capsys.readouterr().out
    assert "8 of 15 episodes from an earlier run" in text and "[collect cw:pushing] step 15/15 (100%)" in text, text
    assert open(out, "rb").read() == want and not os.path.exists(out + ".parts")

    os.remove(out)
    collect_data.main(args(workers=2))
    assert open(out, "rb").read() == want and not os.path.exists(out + ".parts")


def test_table7_features_and_rollout_spaces(tiny_cw):
    out = cw_env.collect(cw_env.CWConfig(episodes=2, episode_len=5, lockstep=2, n_classes=2, noise_levels=(0.0,),
                                         features=cw_env.FEATURES), "picking", 0)
    spec = out["spec"]
    assert set(spec["class_table"][0]) == set(cw_env.FEATURES) and spec["class_table"][1]["block_mass"] == 0.0375
    spec = envs.load_dataset(tiny_cw)["metadata"]
    policy = cw_env.reference_policy(spec, "expert", 0)
    for split, (lo, hi) in (("A", (0.3, 0.6)), ("B", (0.6, 0.8))):
        res = cw_env.rollout(spec, policy, split, [], 2, seed=5)
        assert res["returns"].shape == (2,) and np.all((0 <= res["success"]) & (res["success"] <= 1))
        assert all(lo <= v["stage_friction"] <= hi and lo <= v["floor_friction"] <= hi for v in res["interventions"])
    with pytest.raises(ValueError, match="space A or B|use A or B"):
        cw_env.rollout(spec, policy, "C", [], 1, 0)


def test_cwenv_for_train_behavior():
    env = cw_env.CWEnv("pushing", seed=0, episode_len=4)
    s = env.reset()
    assert s.shape == (env.obs_dim,) and env.act_dim == 9 and env.max_episode_steps == 4
    for t in range(4):
        s, r, term, trunc = env.step(np.zeros(9))
        assert not term and trunc == (t == 3) and np.isfinite(r)


def test_evaluate_cli_on_spaces_a_and_b(tiny_cw, tmp_path):
    """The chain a user runs: BC on the tiny dataset, then evaluate.py on space A and B (return and success)."""
    bc = str(tmp_path / "bc")
    run("train_bc.py", "--dataset", tiny_cw, "--data", "all", "--out-dir", bc, "--total-steps", "20", "--hidden", "16",
        "--eval-every", "0", "--eval-episodes", "1")
    out = str(tmp_path / "eval_{split}.json")
    proc = run("evaluate.py", "--policy", os.path.join(bc, "policy.pt"), "--space", "A", "B", "--episodes", "2",
               "--out", out)
    assert "fractional success" in proc.stdout
    for split in "AB":
        res = json.load(open(out.replace("{split}", split)))
        assert res["split"] == split and len(res["returns"]) == 2 and len(res["success"]) == 2
        assert res["mean_success"] == pytest.approx(np.mean(res["success"]))
    proc = run("evaluate.py", "--reference", "random", "--env-dataset", tiny_cw, "--space", "B", "--episodes", "1",
               "--out", str(tmp_path / "rand.json"))
    assert json.load(open(tmp_path / "rand.json"))["split"] == "B"


def test_expert_episodes_follow_the_class_interventions(tiny_cw):
    """envs.expert_episodes (augment.py --mode expert_data): the dataset's expert, no action noise, one episode per
    class of c given."""
    import envs

    spec = envs.env_spec(envs.load_dataset(tiny_cw)["metadata"])
    rows = envs.expert_episodes(spec, [1, 2], seed=0)
    assert rows["observations"].shape == (2 * 12, 56) and rows["aux"].tolist() == [1] * 12 + [2] * 12
    expert = envs.reference_policy(spec, "expert", 0)
    np.testing.assert_allclose(rows["actions"], np.clip(expert(rows["observations"]), -1, 1), atol=1e-5)
    np.testing.assert_array_equal(rows["observations"][1:12], rows["next_observations"][:11])
    assert rows["episode_returns"][0] == pytest.approx(rows["rewards"][:12].sum(), rel=1e-5)


def test_feature_effects_script_tells_which_features_reach_the_data(tmp_path):
    """scripts/cw_feature_effects.py on pushing: the block rests on the floor, so stage_friction leaves the expert's
    run the same to the bit, while floor_friction changes it; a bad feature is a one-line error."""
    p = run("scripts/cw_feature_effects.py", "--task", "pushing", "--steps", "150", "--features", "stage_friction",
            "floor_friction")
    rows = {ln.split()[0]: ln.split() for ln in p.stdout.splitlines() if ln.split() and ln.split()[0].endswith("friction")}
    assert float(rows["stage_friction"][-1]) == 0.0 and float(rows["floor_friction"][-1]) > 0.0
    p = run("scripts/cw_feature_effects.py", "--features", "stage_weight", ok=False)
    assert one_line_error(p, "--features: unknown CausalWorld feature(s) ['stage_weight']")
    p = run("scripts/cw_feature_effects.py", "--task", "towers", ok=False)
    assert one_line_error(p, "--task: cw:towers ships no expert")


def test_uncompressed_collection_keeps_observations_on_disk_with_the_same_arrays(tiny_cw, tmp_path):
    """--uncompressed: the observations live in <out>.parts while the collection runs and are written episode by
    episode; the file holds the arrays of the default collection, memory-mapped when loaded, and the same arguments
    give the same bytes again."""
    import collect_data

    out = str(tmp_path / "stored.npz")
    args = collect_data.Args(env="cw:pushing", out=out, seed=1, cw=cw_env.CWConfig(**TINY), uncompressed=True)
    collect_data.main(args)
    assert not os.path.exists(out + ".parts")
    want, got = envs.load_dataset(tiny_cw), envs.load_dataset(out)
    assert want["metadata"] == got["metadata"]
    for k in want:
        if k != "metadata":
            assert np.array_equal(want[k], got[k]) and want[k].dtype == got[k].dtype, k
            assert contract.is_mapped(got[k]) and not contract.is_mapped(want[k]), k
    first = open(out, "rb").read()
    os.remove(out)
    collect_data.main(args)
    assert open(out, "rb").read() == first
