"""The dataset contract (contract.py): validation errors are one line naming the file and the problem."""
import hashlib
import json
import os

import numpy as np
import pytest

from oilca import contract

import envs
from conftest import run


def raw(path):
    with np.load(path) as z:
        return {k: z[k] for k in z.files}


def write(tmp_path, arrays, name="bad.npz"):
    path = str(tmp_path / name)
    contract.save_npz(path, arrays)
    return path


def expect_error(path, *fragments):
    with pytest.raises(contract.ContractError) as e:
        envs.load_dataset(path)
    msg = str(e.value)
    assert "\n" not in msg and msg.startswith(path)
    for frag in fragments:
        assert frag in msg, msg
    return msg


def test_valid_dataset_loads(tiny_dataset):
    data = envs.load_dataset(tiny_dataset)
    meta = data["metadata"]
    n = len(data["rewards"])
    assert n == 2 * 6 * meta["episode_len"]
    assert data["observations"].dtype == np.float32 and data["aux"].dtype == np.int64
    assert data["exogenous"].shape == (n, 2)
    for field in ("env_id", "obs_dim", "act_dim", "action_low", "action_high", "aux_meaning", "collect_args", "seed", "versions"):
        assert field in meta
    assert data["expert"].any() and (~data["expert"]).any()


@pytest.mark.parametrize("key", list(contract.DATASET_KEYS) + ["metadata"])
def test_missing_key(tiny_dataset, tmp_path, key):
    arrays = raw(tiny_dataset)
    del arrays[key]
    expect_error(write(tmp_path, arrays), f"missing required key '{key}'")


def test_wrong_shape_and_dtype(tiny_dataset, tmp_path):
    arrays = raw(tiny_dataset)
    arrays["actions"] = arrays["actions"][:, :1]
    expect_error(write(tmp_path, arrays), "'actions'", "shape")
    arrays = raw(tiny_dataset)
    arrays["rewards"] = arrays["rewards"][:-3]
    expect_error(write(tmp_path, arrays), "'rewards'", "shape")
    arrays = raw(tiny_dataset)
    arrays["aux"] = arrays["aux"].astype(np.float32)
    expect_error(write(tmp_path, arrays), "'aux'", "dtype")


def test_dims_must_match_metadata(tiny_dataset, tmp_path):
    arrays = raw(tiny_dataset)
    meta = json.loads(str(arrays["metadata"]))
    meta["obs_dim"] = 3
    arrays["metadata"] = np.array(json.dumps(meta))
    expect_error(write(tmp_path, arrays), "'observations'", "obs=3")


@pytest.mark.parametrize("key", ["observations", "next_observations", "rewards", "exogenous"])
def test_nan_is_refused(tiny_dataset, tmp_path, key):
    arrays = raw(tiny_dataset)
    arrays[key] = arrays[key].copy()
    arrays[key][17] = np.nan
    expect_error(write(tmp_path, arrays), f"'{key}'", "NaN", "row 17")


def test_truncated_and_garbage_files(tiny_dataset, tmp_path):
    blob = open(tiny_dataset, "rb").read()
    truncated = tmp_path / "truncated.npz"
    truncated.write_bytes(blob[: len(blob) // 2])
    expect_error(str(truncated), "not a readable .npz")
    garbage = tmp_path / "garbage.npz"
    garbage.write_bytes(b"this is not a zip file at all")
    expect_error(str(garbage), "not a readable .npz")
    expect_error(str(tmp_path / "absent.npz"), "file not found")


def test_bad_metadata(tiny_dataset, tmp_path):
    arrays = raw(tiny_dataset)
    arrays["metadata"] = np.array("{not json")
    expect_error(write(tmp_path, arrays), "'metadata' is not valid JSON")
    meta = json.loads(str(raw(tiny_dataset)["metadata"]))
    del meta["act_dim"]
    arrays["metadata"] = np.array(json.dumps(meta))
    expect_error(write(tmp_path, arrays), "metadata is missing field 'act_dim'")


def test_aux_out_of_range_and_actions_out_of_bounds(tiny_dataset, tmp_path):
    arrays = raw(tiny_dataset)
    arrays["aux"] = arrays["aux"] + 5
    expect_error(write(tmp_path, arrays), "'aux'", "n_classes")
    arrays = raw(tiny_dataset)
    arrays["actions"] = arrays["actions"] * 3
    expect_error(write(tmp_path, arrays), "'actions'", "action bounds")


def test_episode_structure(tiny_dataset, tmp_path):
    # shuffled rows: transitions no longer chain inside an episode
    arrays = raw(tiny_dataset)
    T = json.loads(str(arrays["metadata"]))["episode_len"]
    perm = np.arange(len(arrays["rewards"]))
    perm[[3, 4]] = perm[[4, 3]]
    shuffled = {k: (v[perm] if v.ndim and k != "metadata" else v) for k, v in arrays.items()}
    expect_error(write(tmp_path, shuffled), "next_observations")
    # a missing time-out flag
    arrays = raw(tiny_dataset)
    arrays["timeouts"] = np.zeros_like(arrays["timeouts"])
    expect_error(write(tmp_path, arrays), "terminals|timeouts")
    # a truncated episode: the stored return no longer equals the sum of its rewards
    arrays = raw(tiny_dataset)
    cut = {k: (v[T // 2:] if v.ndim and k != "metadata" else v) for k, v in arrays.items()}
    expect_error(write(tmp_path, cut), "episode_returns", "truncated")
    # an episode split in two places
    arrays = raw(tiny_dataset)
    arrays["episode_ids"] = arrays["episode_ids"].copy()
    arrays["episode_ids"][2 * T:3 * T] = 0
    expect_error(write(tmp_path, arrays), "not contiguous")


def test_save_npz_is_byte_reproducible_and_atomic(tmp_path):
    arrays = {"b": np.arange(5), "a": np.ones((2, 3), np.float32)}
    p1, p2 = str(tmp_path / "x.npz"), str(tmp_path / "y.npz")
    contract.save_npz(p1, arrays)
    contract.save_npz(p2, dict(reversed(list(arrays.items()))))
    assert open(p1, "rb").read() == open(p2, "rb").read()
    before = open(p1, "rb").read()
    with pytest.raises(ValueError):
        contract.save_npz(p1, {"obj": np.array([{"x": 1}], dtype=object)})  # fails while writing
    assert open(p1, "rb").read() == before  # the old file is untouched
    assert sorted(os.listdir(tmp_path)) == ["x.npz", "y.npz"]  # no temp file left behind


def test_fingerprint_tracks_content(tiny_dataset):
    data = envs.load_dataset(tiny_dataset)
    fp = contract.fingerprint(data)
    assert fp == contract.fingerprint(envs.load_dataset(tiny_dataset))
    data["next_observations"] = data["next_observations"].copy()
    data["next_observations"][0, 0] += 1e-3
    assert contract.fingerprint(data) != fp


def test_loading_keeps_one_copy_of_the_arrays(tiny_dataset):
    """A CausalWorld dataset runs to gigabytes: validation returns the float32 arrays it read, not copies, and checks
    the collected rows of an augmented dataset through a view when they form one block (its fingerprint unchanged)."""
    raw, data = envs.load_dataset_raw(tiny_dataset)
    for key in ("observations", "next_observations", "actions", "rewards"):
        assert data[key] is raw[key]
    n = len(data["rewards"])
    assert contract.collected_rows(data) == slice(0, n)
    aug = {**data, "augmented": np.r_[np.zeros(n - 5, bool), np.ones(5, bool)]}
    assert contract.collected_rows(aug) == slice(0, n - 5)
    assert contract.collected_rows({**data, "augmented": np.r_[np.ones(5, bool), np.zeros(n - 5, bool)]}) == slice(5, n)
    scattered = np.zeros(n, bool)
    scattered[[1, 4]] = True  # not one block: the collected-row mask itself
    np.testing.assert_array_equal(contract.collected_rows({**data, "augmented": scattered}), ~scattered)
    manual = hashlib.sha256()
    for key in ("observations", "actions", "next_observations", "aux"):
        manual.update(data[key][:-5].tobytes())
    assert contract.fingerprint(aug) == manual.hexdigest()[:16]


def test_cli_reports_one_line_error(tiny_dataset, tmp_path):
    arrays = raw(tiny_dataset)
    del arrays["actions"]
    bad = write(tmp_path, arrays)
    proc = run("train_ivae.py", "--dataset", bad, "--out-dir", str(tmp_path / "run"), ok=False)
    assert proc.returncode != 0
    assert proc.stderr.strip() == f"error: {bad}: missing required key 'actions' (see docs/contract.md)"
    assert not (tmp_path / "run").exists()


def test_aux_per_row_lets_c_vary_inside_an_episode(tiny_dataset, tmp_path):
    """c is constant within an episode unless the metadata says aux_per_row (minari_import.py --aux kmeans:K)."""
    arrays = raw(tiny_dataset)
    arrays["aux"] = arrays["aux"].copy()
    arrays["aux"][1] = 1 - arrays["aux"][1]
    expect_error(write(tmp_path, arrays), "'aux' changes inside an episode")
    meta = json.loads(str(arrays["metadata"]))
    arrays["metadata"] = contract.dataset_arrays_from_meta({**meta, "aux_per_row": True})
    assert envs.load_dataset(write(tmp_path, arrays, "per_row.npz"))["aux"][1] == arrays["aux"][1]
