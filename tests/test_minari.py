"""Minari import/export (minari_export.py, minari_import.py) and the gymnasium backend (gym_env.py).

Every Minari dataset here is built locally in a temporary MINARI_DATASETS_PATH (never ~/.minari, never downloaded):
the tiny toy dataset exported and imported back (lossless), and two small Pendulum-v1 datasets (scripted "expert"
actions and uniform-random ones) imported with the expert + supplementary split, trained on and evaluated in the
gymnasium env recovered from the dataset."""

import json
import os

import numpy as np
import pytest

from oilca import contract
import envs
from conftest import one_line_error, run

minari = pytest.importorskip("minari")  # requirements-minari.txt (the test command installs it)
gym = pytest.importorskip("gymnasium")

EP_LEN = 50
TINY = ["--total-steps", "50", "--hidden", "16", "--threads", "1", "--eval-episodes", "0"]


@pytest.fixture(scope="module")
def root(tmp_path_factory):
    """MINARI_DATASETS_PATH for this module (also for in-process calls), restored afterwards."""
    path = str(tmp_path_factory.mktemp("minari"))
    old = os.environ.get("MINARI_DATASETS_PATH")
    os.environ["MINARI_DATASETS_PATH"] = path
    yield path
    if old is None:
        os.environ.pop("MINARI_DATASETS_PATH")
    else:
        os.environ["MINARI_DATASETS_PATH"] = old


@pytest.fixture(scope="module")
def pendulum(root):
    """pendulum/expert-v0 (4 episodes of a scripted swing-up controller) and pendulum/random-v0 (6 of random torques),
    50 steps each, made by scripts/pendulum_minari.py."""
    run("scripts/pendulum_minari.py", "--root", root, "--expert-episodes", "4", "--random-episodes", "6",
        "--episode-len", str(EP_LEN))
    return minari.load_dataset("pendulum/expert-v0"), minari.load_dataset("pendulum/random-v0")


def arrays_of(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def assert_same_file(a, b):
    x, y = arrays_of(a), arrays_of(b)
    assert sorted(x) == sorted(y)
    for k in x:
        assert x[k].dtype == y[k].dtype and x[k].shape == y[k].shape, k
        assert np.array_equal(x[k], y[k]), k
    assert str(x["metadata"]) == str(y["metadata"])


def test_round_trip_npz_minari_npz_is_lossless(tiny_dataset, root, tmp_path):
    run("scripts/minari_export.py", "--dataset", tiny_dataset, "--dataset-id", "oilca/tiny-v0")
    back = str(tmp_path / "back.npz")
    run("scripts/minari_import.py", "--datasets", "oilca/tiny-v0", "--out", back)
    assert_same_file(tiny_dataset, back)
    # what another library sees: the episodes, c / expert / u in the step infos, our metadata verbatim
    ds = minari.load_dataset("oilca/tiny-v0")
    data = envs.load_dataset(tiny_dataset)
    ep = ds[0]
    T = int((data["episode_ids"] == 0).sum())
    assert ds.total_episodes == len(np.unique(data["episode_ids"])) and ds.total_steps == len(data["rewards"])
    assert ep.observations.shape == (T + 1, 2) and len(ep.rewards) == T and ep.truncations[-1] and not ep.terminations.any()
    assert len(ep.infos["c"]) == T + 1 and ep.infos["c"][1] == data["aux"][0]
    assert np.array_equal(ep.infos["exogenous"][1:], data["exogenous"][:T])
    assert json.loads(ds.storage.metadata["oilca_metadata"]) == data["metadata"]


def test_round_trip_keeps_augmented_rows(tiny_dataset, root, tmp_path):
    """augment.py's rows (single transitions outside any episode) survive as one-step Minari episodes."""
    arrays = arrays_of(tiny_dataset)
    N = len(arrays["rewards"])
    src = np.flatnonzero(arrays["expert"])[:3]
    new = {k: v[src].copy() for k, v in arrays.items() if k != "metadata"}
    new.update(episode_ids=np.full(3, -1), rewards=np.zeros(3, np.float32), terminals=np.zeros(3, bool),
               timeouts=np.zeros(3, bool), expert=np.ones(3, bool), augmented=np.ones(3, bool),
               aug_source=src.astype(np.int64), aug_partner=np.arange(3, dtype=np.int64))
    old = {**{k: v for k, v in arrays.items() if k != "metadata"}, "augmented": np.zeros(N, bool),
           "aug_source": np.full(N, -1), "aug_partner": np.full(N, -1)}
    aug = {k: np.concatenate([old[k], new[k]]).astype(old[k].dtype) for k in old}
    aug["metadata"] = arrays["metadata"]
    path = str(tmp_path / "aug.npz")
    envs.validate_dataset(path, aug)
    contract.save_npz(path, aug)
    run("scripts/minari_export.py", "--dataset", path, "--dataset-id", "oilca/tiny-aug-v0")
    assert minari.load_dataset("oilca/tiny-aug-v0").total_episodes == len(np.unique(arrays["episode_ids"])) + 3
    run("scripts/minari_import.py", "--datasets", "oilca/tiny-aug-v0", "--out", str(tmp_path / "back.npz"))
    assert_same_file(path, str(tmp_path / "back.npz"))


def test_export_refuses_to_overwrite_and_bad_ids(tiny_dataset, root, tmp_path):
    run("scripts/minari_export.py", "--dataset", tiny_dataset, "--dataset-id", "oilca/twice-v0")
    proc = run("scripts/minari_export.py", "--dataset", tiny_dataset, "--dataset-id", "oilca/twice-v0", ok=False)
    assert one_line_error(proc, "exists"), proc.stderr
    run("scripts/minari_export.py", "--dataset", tiny_dataset, "--dataset-id", "oilca/twice-v0", "--force")
    proc = run("scripts/minari_export.py", "--dataset", tiny_dataset, "--dataset-id", "no version", ok=False)
    assert one_line_error(proc, "bad Minari dataset id"), proc.stderr
    assert not [d for d in os.listdir(root) if d.startswith(".export-")]  # no temporary folder left behind


def test_a_toy_export_recovers_its_env_and_eval_env_and_reference_scores(tiny_dataset, root, tmp_path):
    run("scripts/minari_export.py", "--dataset", tiny_dataset, "--dataset-id", "oilca/toy-env-v0")
    ds = minari.load_dataset("oilca/toy-env-v0")  # Minari's own API
    meta = envs.load_dataset(tiny_dataset)["metadata"]
    env, eval_env = ds.recover_environment(), ds.recover_environment(eval_env=True)
    assert env.spec.id == "oilca/Toy-v0" and env.spec.max_episode_steps == meta["episode_len"]
    assert env.spec.kwargs["classes"] == list(range(meta["n_classes"]))
    assert eval_env.spec.kwargs["classes"] == meta["heldout_classes"]  # the held-out classes of c
    stored = ds.storage.metadata
    assert stored["ref_min_score"] < stored["ref_max_score"] and "gymnasium==" in " ".join(stored["requirements"])
    returns = []
    for i in range(20):  # the toy's expert in the recovered env scores as ref_max_score says
        obs, info = env.reset(seed=i)
        assert info["c"] in env.spec.kwargs["classes"] and env.observation_space.contains(obs)
        total, done = 0.0, False
        while not done:
            obs, r, te, tr, info = env.step(env.unwrapped.core.expert_action(obs[None].astype(np.float64))[0])
            total, done = total + r, te or tr
        returns.append(total)
    assert abs(np.mean(returns) - stored["ref_max_score"]) < 2.0
    obs, info = eval_env.reset(seed=0, options={"c": meta["heldout_classes"][0]})
    assert info["c"] == meta["heldout_classes"][0]
    # an import that re-splits the export (not a restore) keeps its reference scores in metadata.sources
    out = str(tmp_path / "toy_resplit.npz")
    run("scripts/minari_import.py", "--datasets", "oilca/toy-env-v0", "--aux", "recorded", "--expert", "top",
        "--out", out)
    source = envs.load_dataset(out)["metadata"]["sources"][0]
    assert (source["ref_min_score"], source["ref_max_score"]) == (stored["ref_min_score"], stored["ref_max_score"])


def test_the_dmc_env_spec_rebuilds_a_perturbed_task():
    pytest.importorskip("dm_control")
    from envs import registered

    table = {"mean": [[0.0], [0.5]], "std": [[0.0], [0.0]]}
    meta = {"env_id": "dmc:cartpole-swingup", "class_table": table, "n_classes": 2, "obs_dim": 5, "act_dim": 1,
            "action_low": [-1.0], "action_high": [1.0], "episode_len": 1000}
    spec, eval_spec = registered.env_specs(meta)
    env = gym.make(gym.envs.registration.EnvSpec.from_json(spec.to_json()))  # as recover_environment() does
    obs, info = env.reset(seed=3, options={"c": 1})
    assert obs.shape == (5,) and info["c"] == 1 and env.spec.max_episode_steps == 1000
    obs, r, te, tr, info = env.step(np.array([0.0], np.float32))
    assert np.isfinite(obs).all() and 0.0 <= r <= 1.0 and info["c"] == 1


def test_a_data_collector_dataset_imports_trains_and_evaluates(root, tmp_path):
    pytest.importorskip("jax")  # minari's create extra (DataCollector)
    env = minari.DataCollector(gym.make("Pendulum-v1", max_episode_steps=EP_LEN))
    for i in range(4):
        env.reset(seed=i)
        done = False
        while not done:
            _, _, te, tr, _ = env.step(env.action_space.sample())
            done = te or tr
    env.create_dataset(dataset_id="pendulum/collector-v0", algorithm_name="random", author="test")
    out = str(tmp_path / "c.npz")
    run("scripts/minari_import.py", "--datasets", "pendulum/collector-v0", "--expert", "top", "--out", out)
    data = envs.load_dataset(out)
    assert data["metadata"]["env_id"] == "gym:Pendulum-v1" and len(data["rewards"]) == 4 * EP_LEN
    assert "ref_min_score" not in data["metadata"]["sources"][0]  # the collector wrote none
    run("train_bc.py", "--dataset", out, "--out-dir", str(tmp_path / "bc"), *TINY)
    run("evaluate.py", "--policy", str(tmp_path / "bc" / "policy.pt"), "--episodes", "2",
        "--out", str(tmp_path / "bc" / "eval_{split}.json"))
    assert len(json.load(open(tmp_path / "bc" / "eval_train.json"))["returns"]) == 2


def test_an_output_that_is_an_input_is_refused_through_force_and_links(tiny_dataset, root, tmp_path):
    run("scripts/minari_export.py", "--dataset", tiny_dataset, "--dataset-id", "oilca/own-v0")
    data_dir = os.path.join(root, "oilca", "own-v0", "data")
    before = {f: open(os.path.join(data_dir, f), "rb").read() for f in os.listdir(data_dir)}
    link = tmp_path / "link"
    link.symlink_to(root)
    for out in (os.path.join(data_dir, "main_data.hdf5"), str(link / "oilca" / "own-v0" / "data" / "main_data.hdf5")):
        proc = run("scripts/minari_import.py", "--datasets", "oilca/own-v0", "--out", out, "--force", ok=False)
        assert one_line_error(proc, "refusing to overwrite an input"), proc.stderr
    # an export whose input lies in the target dataset, reached through a symbolic link to the root
    inside = os.path.join(root, "oilca", "own-v0", "in.npz")
    with open(tiny_dataset, "rb") as f, open(inside, "wb") as g:
        g.write(f.read())
    proc = run("scripts/minari_export.py", "--dataset", str(link / "oilca" / "own-v0" / "in.npz"), "--dataset-id",
               "oilca/own-v0", "--force", ok=False)
    assert one_line_error(proc, "lies inside the target"), proc.stderr
    assert os.path.exists(inside)
    assert {f: open(os.path.join(data_dir, f), "rb").read() for f in os.listdir(data_dir)} == before


def test_damaged_minari_files_are_one_line(tiny_dataset, root, tmp_path):
    for damage, words in (("truncate", "truncated file"), ("json", "bad JSON")):
        name = f"oilca/damaged-{damage}-v0"
        run("scripts/minari_export.py", "--dataset", tiny_dataset, "--dataset-id", name)
        data_dir = os.path.join(root, name, "data")
        if damage == "truncate":
            os.truncate(os.path.join(data_dir, "main_data.hdf5"), 20000)
        else:
            with open(os.path.join(data_dir, "metadata.json"), "w") as f:
                f.write("{bad")
        out = str(tmp_path / f"{damage}.npz")
        proc = run("scripts/minari_import.py", "--datasets", name, "--out", out, ok=False)
        assert one_line_error(proc, words) and data_dir in proc.stderr, proc.stderr
        assert not os.path.exists(out)


def test_a_killed_exports_temporary_folder_is_removed_by_the_next(tiny_dataset, root):
    dead = os.path.join(root, ".export-999999999-abcd1234")  # no such pid: its export was killed
    alive = os.path.join(root, f".export-{os.getpid()}-abcd1234")  # a running export's: kept
    for d in (dead, alive):
        os.makedirs(os.path.join(d, "oilca"))
    run("scripts/minari_export.py", "--dataset", tiny_dataset, "--dataset-id", "oilca/after-kill-v0")
    assert not os.path.exists(dead) and os.path.exists(alive)
    os.rmdir(os.path.join(alive, "oilca"))
    os.rmdir(alive)


def test_import_expert_plus_supplementary_then_train_and_evaluate(pendulum, root, tmp_path):
    out = str(tmp_path / "pend.npz")
    run("scripts/minari_import.py", "--datasets", "pendulum/expert-v0", "pendulum/random-v0", "--expert", "pendulum/expert-v0",
        "--expert-episodes", "1", "--aux", "source", "--out", out)
    data = envs.load_dataset(out)
    meta = data["metadata"]
    assert meta["env_id"] == "gym:Pendulum-v1" and meta["episode_len"] == EP_LEN and meta["n_classes"] == 2
    assert (meta["obs_dim"], meta["act_dim"], meta["action_low"], meta["action_high"]) == (3, 1, [-2.0], [2.0])
    assert len(data["rewards"]) == 10 * EP_LEN and data["timeouts"].sum() == 10 and not data["terminals"].any()
    ep_expert = np.unique(data["episode_ids"][data["expert"]])
    assert len(ep_expert) == 1 and (data["aux"][data["expert"]] == 0).all()  # one episode of the expert dataset
    assert np.bincount(data["aux"]).tolist() == [4 * EP_LEN, 6 * EP_LEN]
    ep = pendulum[0][0]  # the rows are the Minari episode's transitions
    assert np.array_equal(data["observations"][:EP_LEN], ep.observations[:-1].astype(np.float32))
    assert np.array_equal(data["next_observations"][:EP_LEN], ep.observations[1:].astype(np.float32))

    # train on it (BC on D_E, DWBC on D_E ∪ D_U) and evaluate in the gymnasium env recovered from the dataset
    run("train_bc.py", "--dataset", out, "--out-dir", str(tmp_path / "bc"), *TINY)
    run("train_dwbc.py", "--dataset", out, "--out-dir", str(tmp_path / "dwbc"), *TINY,
        "--final-eval", str(tmp_path / "dwbc" / "final_{split}.json"), "--final-eval-episodes", "2")
    final = json.load(open(tmp_path / "dwbc" / "final_train.json"))
    assert final["env"] == "gym:Pendulum-v1" and len(final["returns"]) == 2
    proc = run("evaluate.py", "--policy", str(tmp_path / "bc" / "policy.pt"), "--episodes", "3",
               "--out", str(tmp_path / "bc" / "eval_{split}.json"))
    res = json.load(open(tmp_path / "bc" / "eval_train.json"))
    assert res["env"] == "gym:Pendulum-v1" and len(res["returns"]) == 3 and res["episode_classes"] is None
    assert all(-16.3 * EP_LEN <= r <= 0 for r in res["returns"])  # Pendulum's reward lies in [-16.27, 0]
    assert "return" in proc.stdout


def test_gym_rollout_matches_a_direct_gymnasium_run(pendulum, root, tmp_path):
    """gym_env.rollout runs episode i from seed (s·1_000_003 + i) mod 2³¹ in the recorded env, batched."""
    out = str(tmp_path / "p.npz")
    run("scripts/minari_import.py", "--datasets", "pendulum/random-v0", "--expert", "top", "--out", out)
    spec = envs.env_spec(envs.load_dataset(out)["metadata"])
    policy = lambda obs: np.clip(-obs[:, 2:3], -2, 2)  # noqa: E731
    res = envs.rollout(spec, policy, "train", [0], 3, seed=7)
    env = gym.make("Pendulum-v1", max_episode_steps=EP_LEN)
    for i in range(3):
        obs, _ = env.reset(seed=7 * 1_000_003 + i)
        total, done = 0.0, False
        while not done:
            obs, r, te, tr, _ = env.step(policy(obs[None].astype(np.float32))[0])
            total, done = total + r, te or tr
        assert res["returns"][i] == pytest.approx(total, rel=1e-5)


def test_import_kmeans_labels_transitions(pendulum, root, tmp_path):
    out = str(tmp_path / "km.npz")
    run("scripts/minari_import.py", "--datasets", "pendulum/expert-v0", "pendulum/random-v0", "--expert", "pendulum/expert-v0",
        "--aux", "kmeans:3", "--out", out)
    data = envs.load_dataset(out)  # the contract accepts c that changes inside an episode: aux_per_row
    meta = data["metadata"]
    assert meta["aux_per_row"] and meta["n_classes"] == 3 and set(np.unique(data["aux"])) == {0, 1, 2}
    assert np.array(meta["kmeans"]["centres"]).shape == (3, 3)
    # c is the nearest centre of s' (in standardised units)
    x = data["next_observations"]
    z, zc = (x - x.mean(0)) / (x.std(0) + 1e-6), (np.array(meta["kmeans"]["centres"]) - x.mean(0)) / (x.std(0) + 1e-6)
    assert (np.argmin(((z[:, None] - zc[None]) ** 2).sum(-1), 1) == data["aux"]).mean() > 0.99
    again = str(tmp_path / "km2.npz")
    run("scripts/minari_import.py", "--datasets", "pendulum/expert-v0", "pendulum/random-v0", "--expert", "pendulum/expert-v0",
        "--aux", "kmeans:3", "--out", again)
    assert_same_file(out, again)  # the same seed gives the same file
    run("train_dwbc.py", "--dataset", out, "--out-dir", str(tmp_path / "dwbc"), *TINY)
    too_many = str(tmp_path / "km3.npz")  # more clusters than transitions: one line, nothing written
    assert one_line_error(run("scripts/minari_import.py", "--datasets", "pendulum/expert-v0", "pendulum/random-v0",
                              "--expert", "pendulum/expert-v0", "--aux", "kmeans:10000000", "--out", too_many, ok=False),
                          "more clusters than the")
    assert not os.path.exists(too_many)


def test_import_top_split_and_episode_counts(pendulum, root, tmp_path):
    out = str(tmp_path / "top.npz")
    run("scripts/minari_import.py", "--datasets", "pendulum/expert-v0", "pendulum/random-v0", "--expert", "top",
        "--positive-frac", "0.5", "--expert-prob", "1.0", "--episodes", "2", "3", "--out", out)
    data = envs.load_dataset(out)
    returns = data["episode_returns"][data["timeouts"]]
    expert = data["expert"][data["timeouts"]]
    assert len(returns) == 5 and expert.sum() == 2  # round(0.5 * 5) = 2 positives, all in D_E
    assert set(returns[expert]) == set(np.sort(returns)[-2:])
    assert [len(s["taken_episodes"]) for s in data["metadata"]["sources"]] == [2, 3]


def test_exported_gym_data_keeps_its_env(pendulum, root, tmp_path):
    out = str(tmp_path / "g.npz")
    run("scripts/minari_import.py", "--datasets", "pendulum/expert-v0", "pendulum/random-v0", "--expert", "pendulum/expert-v0",
        "--out", out)
    run("scripts/minari_export.py", "--dataset", out, "--dataset-id", "oilca/pend-v0")
    env = minari.load_dataset("oilca/pend-v0").recover_environment()
    assert env.spec.id == "Pendulum-v1" and env.spec.max_episode_steps == EP_LEN
    run("scripts/minari_import.py", "--datasets", "oilca/pend-v0", "--out", str(tmp_path / "g2.npz"))
    assert_same_file(out, str(tmp_path / "g2.npz"))


@pytest.mark.parametrize("argv, words", [
    (["--datasets", "nowhere/missing-v0", "--expert", "top"], "not found"),
    (["--datasets", "pendulum/expert-v0", "--expert", "top", "--aux", "kmeans:0"], "bad --aux"),
    (["--datasets", "pendulum/expert-v0", "--expert", "top", "--aux", "kmeans:x"], "bad --aux"),
    (["--datasets", "pendulum/expert-v0", "--expert", "top", "--aux", "clusters"], "bad --aux"),
    (["--datasets", "pendulum/expert-v0", "pendulum/random-v0"], "missing --expert"),
    (["--datasets", "pendulum/random-v0", "--expert", "pendulum/expert-v0"], "is not one of --datasets"),
    (["--datasets", "pendulum/expert-v0", "--expert", "pendulum/expert-v0", "--expert-episodes", "9"], "--expert-episodes"),
    (["--datasets", "pendulum/expert-v0", "--expert", "top", "--episodes", "1", "2"], "one count per dataset"),
    (["--datasets", "pendulum/expert-v0", "--expert", "top", "--aux", "recorded"], "minari_export.py"),
    (["--expert", "top"], "no --datasets"),
])
def test_import_bad_input_is_one_line(pendulum, root, tmp_path, argv, words):
    out = str(tmp_path / "x.npz")
    proc = run("scripts/minari_import.py", *argv, "--out", out, ok=False)
    assert one_line_error(proc, words), proc.stderr
    assert not os.path.exists(out)


def test_import_never_overwrites_without_force(pendulum, root, tmp_path):
    out = tmp_path / "x.npz"
    out.write_bytes(b"keep")
    proc = run("scripts/minari_import.py", "--datasets", "pendulum/random-v0", "--expert", "top", "--out", str(out), ok=False)
    assert one_line_error(proc, "exists") and out.read_bytes() == b"keep"


def test_gym_backend_ids_and_collection(tmp_path):
    assert envs.parse_env_id("gym:Hopper-v5") == ("gym", "Hopper-v5")
    proc = run("collect_data.py", "--env", "gym:Pendulum-v1", "--out", str(tmp_path / "x.npz"), ok=False)
    assert one_line_error(proc, "minari_import.py"), proc.stderr
    with pytest.raises(ValueError, match="no expert"):
        envs.reference_policy({"env_id": "gym:Pendulum-v1", "action_low": [-2], "action_high": [2]}, "expert", 0)
