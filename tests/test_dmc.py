"""DeepMind Control backend: SAC behaviour training, collection under c-dependent action perturbations,
evaluation, on cartpole-swingup with tiny settings (a few hundred SAC steps, 1000-step episodes)."""

import hashlib
import os

import numpy as np
import pytest

from oilca import contract
import envs
from envs import dmc as dmc_env
import evaluate
import train_behavior
from conftest import one_line_error, run

pytestmark = pytest.mark.dmc
TASK = "cartpole-swingup"


@pytest.fixture(scope="module")
def sac_run(tmp_path_factory):
    """A 300-step SAC run (200 random steps, then updates), checkpointed at 200 and resumed to 300."""
    out = str(tmp_path_factory.mktemp("sac"))
    common = dict(env=f"dmc:{TASK}", out_dir=out, learning_starts=200, snapshot_steps=(200, 300), eval_every=300,
                  eval_episodes=1, checkpoint_every=200, batch_size=32, hidden=32)
    train_behavior.main(train_behavior.Args(total_steps=200, **common))
    res = train_behavior.main(train_behavior.Args(total_steps=300, resume=True, **common))
    return out, res


@pytest.fixture(scope="module")
def dmc_dataset(sac_run, tmp_path_factory):
    out = str(tmp_path_factory.mktemp("dmcdata") / "d.npz")
    snaps = [os.path.join(sac_run[0], "snapshots", f"step_{n}.pt") for n in (200, 300)]
    proc = run("collect_data.py", "--env", f"dmc:{TASK}", "--out", out, "--seed", "3", "--dmc.snapshots", *snaps,
               "--dmc.random-policy", "--dmc.episodes", "3", "--dmc.lockstep", "2")
    return out, snaps, proc.stdout


def test_sac_snapshots_resume_and_log(sac_run):
    out, res = sac_run
    for n in (200, 300):
        art = contract.load_policy(os.path.join(out, "snapshots", f"step_{n}.pt"))
        assert art["train_step"] == n and art["env"]["env_id"] == f"dmc:{TASK}"
        assert (art["config"]["obs_dim"], art["config"]["act_dim"]) == (5, 1)
    assert os.path.exists(os.path.join(out, "returns.png")) and os.path.exists(os.path.join(out, "checkpoint.pt"))
    assert np.isfinite(res["final_eval_return"]) and 0 <= res["final_eval_return"] <= 1000
    assert [r["step"] for r in res["rows"] if r["eval_return"] != ""] == [200, 300]  # the resumed log continues


def test_twin_q_members_are_independent():
    import torch
    q = train_behavior.TwinQ(3, 2, 8)
    obs, act = torch.randn(5, 3), torch.randn(5, 2)
    out = q(obs, act)
    assert out.shape == (2, 5)
    with torch.no_grad():
        q.w[0][1].zero_(), q.b[0][1].zero_()  # member 1's first layer -> only member 1 changes
    out2 = q(obs, act)
    assert torch.allclose(out[0], out2[0]) and not torch.allclose(out[1], out2[1])


def test_noise_table_is_fixed_by_its_seed():
    a, b = dmc_env.noise_table(6, 3, 0, 0.2, 0.05, 0.4), dmc_env.noise_table(6, 3, 0, 0.2, 0.05, 0.4)
    assert a == b and a != dmc_env.noise_table(6, 3, 1, 0.2, 0.05, 0.4)
    mu, sd = np.array(a["mean"]), np.array(a["std"])
    assert mu.shape == sd.shape == (3, 6) and np.abs(mu).max() <= 0.2 and sd.min() >= 0.05 and sd.max() <= 0.4


def test_collection_contract_and_metadata(dmc_dataset):
    path, snaps, _ = dmc_dataset
    data = envs.load_dataset(path)
    meta = data["metadata"]
    assert meta["env_id"] == f"dmc:{TASK}" and meta["episode_len"] == 1000 and meta["n_classes"] == 3
    assert len(data["rewards"]) == 3000 and data["expert"].any() and not data["terminals"].any()
    assert data["timeouts"].sum() == 3  # the 1000-step limit is a timeout, never a terminal
    assert sorted(np.unique(data["aux"])) == [0, 1, 2]
    assert [b["path"] for b in meta["behavior_policies"] if b["name"] == "snapshot"] == snaps
    assert data["exogenous"].shape == (3000, 1) and [k for k, _ in meta["obs_keys"]] == ["position", "velocity"]
    assert np.abs(data["actions"]).max() <= 1


def test_collected_transitions_replay_exactly(dmc_dataset):
    """The stored (s, a, ε) reproduce s' when replayed in a fresh env: executed action = clip(a + ε, -1, 1)."""
    data = envs.load_dataset(dmc_dataset[0])
    for ep in (0, 2):
        rows = np.flatnonzero(data["episode_ids"] == ep)[:50]
        env = dmc_env.load_env(TASK, 0)
        env.task.random.seed(3 * 1_000_003 + ep)
        s = dmc_env.flatten(env.reset().observation)
        np.testing.assert_allclose(s, data["observations"][rows[0]], atol=1e-5)
        for i in rows:
            ts = env.step(np.clip(data["actions"][i] + data["exogenous"][i], -1, 1))
            np.testing.assert_allclose(dmc_env.flatten(ts.observation), data["next_observations"][i], atol=1e-4)


def test_collection_is_repeatable(dmc_dataset, tmp_path):
    """Same arguments: the same file byte for byte, here collected by two processes (--dmc.workers 2, each running
    whole lockstep batches; not a data argument). (--dmc.lockstep is part of the arguments: the batch size of
    the policy's matmul changes float rounding, which a 1000-step chaotic rollout amplifies.)"""
    path, snaps, _ = dmc_dataset
    args = ["collect_data.py", "--env", f"dmc:{TASK}", "--seed", "3", "--dmc.snapshots", *snaps,
            "--dmc.random-policy", "--dmc.episodes", "3"]
    run(*args, "--out", str(tmp_path / "same.npz"), "--dmc.lockstep", "2", "--dmc.workers", "2")
    digest = [hashlib.sha256(open(p, "rb").read()).hexdigest() for p in (path, str(tmp_path / "same.npz"))]
    assert digest[0] == digest[1]


def test_collection_prints_progress(dmc_dataset):
    """Collection says how far it is (progress.Progress: a line at most every ~10 s and always at the last chunk):
    3 episodes in chunks of 2 end on '[collect dmc:cartpole-swingup] step 3/3 (100%) … ETA 0s  env_steps_per_s …'."""
    lines = [ln for ln in dmc_dataset[2].splitlines() if ln.startswith(f"[collect dmc:{TASK}] ")]
    assert lines and lines[-1].startswith(f"[collect dmc:{TASK}] step 3/3 (100%)  ") and "episodes/s  ETA 0s" in lines[-1]
    assert float(lines[-1].split("env_steps_per_s ")[1]) > 0


def test_collection_benchmark_smoke():
    """scripts/benchmark_collect.py with one and two workers on two random-policy episodes: both rates printed side by
    side and the two files compared byte for byte."""
    proc = run("scripts/benchmark_collect.py", "--env", f"dmc:{TASK}", "--episodes", "2", "--lockstep", "1",
               "--raw-steps", "200", "--workers", "1", "2")
    assert "collection, 1 worker(s): " in proc.stdout and "collection, 2 worker(s): " in proc.stdout, proc.stdout
    assert "files byte for byte the same: yes" in proc.stdout
    bad = run("scripts/benchmark_collect.py", "--env", f"dmc:{TASK}", "--workers", "0", ok=False)
    assert one_line_error(bad, "--workers")


def test_missing_snapshot_and_bad_task_are_one_line_errors(tmp_path):
    p = run("collect_data.py", "--env", f"dmc:{TASK}", "--out", str(tmp_path / "x.npz"),
            "--dmc.snapshots", str(tmp_path / "nope.pt"), ok=False)
    assert one_line_error(p, "nope.pt does not exist")
    assert not os.path.exists(tmp_path / "x.npz")
    p = run("collect_data.py", "--env", "dmc:cartpole-fly", "--out", str(tmp_path / "x.npz"), "--dmc.random-policy", ok=False)
    assert one_line_error(p, "unknown DeepMind Control task")


def test_evaluate_and_train_on_dmc(dmc_dataset, tmp_path):
    """BC on the DMC data, final evaluation in-distribution (train split), then evaluate.py on it and references."""
    path, snaps, _ = dmc_dataset
    out = str(tmp_path / "bc")
    run("train_bc.py", "--dataset", path, "--data", "all", "--total-steps", "20", "--eval-every", "0",
        "--out-dir", out, "--final-eval-episodes", "2", "--final-eval", str(tmp_path / "bc_{split}.json"))
    res = evaluate.main(evaluate.Args(policy=f"{out}/policy.pt", episodes=3, seed=5, out=str(tmp_path / "r_{split}.json")))
    assert [r["split"] for r in res] == ["train"] and res[0]["episode_classes"] == [0, 1, 2]
    assert len(res[0]["returns"]) == 3 and res[0]["mean_return"] == pytest.approx(np.mean(res[0]["returns"]))
    assert all(0 <= r <= 1000 for r in res[0]["returns"])  # dm_control rewards lie in [0, 1] per step
    again = evaluate.main(evaluate.Args(policy=f"{out}/policy.pt", episodes=3, seed=5, out=str(tmp_path / "s_{split}.json")))
    assert again[0]["returns"] == res[0]["returns"]  # seeded evaluation
    ref = evaluate.main(evaluate.Args(reference="expert", env_dataset=path, episodes=1, out=str(tmp_path / "e_{split}.json")))
    assert ref[0]["method"] == "reference_expert"
    with pytest.raises(ValueError, match="does not match"):
        evaluate.main(evaluate.Args(policy=f"{out}/policy.pt", env="dmc:walker-stand", episodes=1))


NO_GL = """import sys
import collect_data
from envs import dmc as dmc_env
from dm_control import _render
collect_data.main(collect_data.Args(env="dmc:cartpole-swingup", out=sys.argv[1], seed=1,
                                    dmc=dmc_env.DMCConfig(random_policy=True, episodes=1, lockstep=1)))
maps = open("/proc/self/maps").read()
print("renderer", _render.BACKEND, "EGL", "libEGL" in maps, "OSMesa", "OSMesa" in maps)
"""


@pytest.mark.parametrize("mujoco_gl", [None, "disable"])
def test_import_and_collect_without_gl(tmp_path, mujoco_gl):
    """Headless by default: with MUJOCO_GL unset (or disable) dmc_env imports and collects, dm_control's renderer is
    off and no EGL or OSMesa library is loaded."""
    out = str(tmp_path / "d.npz")
    proc = run("-c", NO_GL, out, unset=("MUJOCO_GL",), env={"MUJOCO_GL": mujoco_gl} if mujoco_gl else None)
    assert "renderer off EGL False OSMesa False" in proc.stdout, proc.stdout
    assert len(envs.load_dataset(out)["rewards"]) == 1000


def test_expert_episodes_are_the_snapshot_acting_under_the_given_classes(dmc_dataset):
    """envs.expert_episodes (augment.py --mode expert_data): whole episodes of the most trained snapshot, each under
    its class's perturbation, replayable from their own task seeds."""
    import envs

    spec = envs.env_spec(envs.load_dataset(dmc_dataset[0])["metadata"])
    rows = envs.expert_episodes(spec, [2, 0], seed=1)
    T = dmc_env.EPISODE_LEN
    assert rows["observations"].shape == (2 * T, spec["obs_dim"]) and rows["aux"].tolist() == [2] * T + [0] * T
    expert = contract.build_policy(contract.load_policy(dmc_dataset[1][-1]))  # step_300: the last snapshot
    np.testing.assert_allclose(rows["actions"][:20], np.clip(expert(rows["observations"][:20]), -1, 1), atol=1e-5)
    np.testing.assert_array_equal(rows["observations"][1:T], rows["next_observations"][:T - 1])
    env = dmc_env.load_env(TASK, 0)
    env.task.random.seed((20_001 * 1_000_003 + 1) % 2**32)  # episode 1 of stream 20_000 + seed
    np.testing.assert_allclose(dmc_env.flatten(env.reset().observation), rows["observations"][T], atol=1e-5)
    for i in range(T, T + 20):
        ts = env.step(np.clip(rows["actions"][i] + rows["exogenous"][i], -1, 1))
        np.testing.assert_allclose(dmc_env.flatten(ts.observation), rows["next_observations"][i], atol=1e-4)
    with pytest.raises(ValueError, match="classes in"):
        envs.expert_episodes(spec, [5], seed=1)


def test_a_minari_export_recovers_the_perturbed_task(dmc_dataset, tmp_path, monkeypatch):
    """minari_export.py records oilca/DMC-v0 with the dataset's class table; Minari's own API rebuilds it."""
    minari = pytest.importorskip("minari")
    monkeypatch.setenv("MINARI_DATASETS_PATH", str(tmp_path))
    run("scripts/minari_export.py", "--dataset", dmc_dataset[0], "--dataset-id", "oilca/dmc-tiny-v0")
    ds = minari.load_dataset("oilca/dmc-tiny-v0")
    meta = envs.load_dataset(dmc_dataset[0])["metadata"]
    env = ds.recover_environment()
    assert env.spec.id == "oilca/DMC-v0" and env.spec.kwargs["class_table"] == meta["class_table"]
    obs, info = env.reset(seed=0)
    assert obs.shape == (meta["obs_dim"],) and info["c"] in env.spec.kwargs["classes"]
    for _ in range(3):
        obs, r, te, tr, info = env.step(env.action_space.sample())
        assert np.isfinite(obs).all() and np.isfinite(r)
    env.close()
