"""Datasets larger than memory: uncompressed storage read memory-mapped, the contract's checks block by block, the
statistics and batches the stages take of mapped arrays (the same bits as in memory), and the toy pipeline giving the
same policies from either storage with its augmentation made in several blocks."""
import io
import os
import zipfile

import numpy as np
import pytest
import torch

from oilca import contract
from oilca.rows import block_mean_std, diff_mean_std, mean_std
import envs
from conftest import one_line_error, run


def reference_npz(arrays: dict) -> bytes:
    """The bytes save_npz wrote before it streamed: each array through np.lib.format.write_array, then writestr."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", compression=zipfile.ZIP_DEFLATED) as zf:
        for key in sorted(arrays):
            one = io.BytesIO()
            np.lib.format.write_array(one, np.asanyarray(arrays[key]), allow_pickle=False)
            info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
            info.compress_type = zipfile.ZIP_DEFLATED
            info.external_attr = 0o644 << 16
            zf.writestr(info, one.getvalue())
    return buf.getvalue()


def some_arrays(rng):
    return {"x": rng.standard_normal((70_001, 33)).astype(np.float32), "i": rng.integers(0, 3, 70_001),
            "b": rng.random(10) < 0.5, "metadata": np.array('{"a": 1}'), "empty": np.zeros((0, 4), np.float32),
            "f": np.asfortranarray(rng.standard_normal((40, 3))), "strided": rng.standard_normal((100, 8))[:, ::2]}


def test_streamed_writes_keep_the_bytes_and_rows_blocks_are_checked(tmp_path):
    rng = np.random.default_rng(0)
    arrays = some_arrays(rng)
    path = str(tmp_path / "a.npz")
    contract.save_npz(path, arrays)
    assert open(path, "rb").read() == reference_npz(arrays)
    x = arrays["x"]
    blocks = dict(arrays, x=contract.Rows(x.shape, x.dtype, lambda: (x[i:i + 999] for i in range(0, len(x), 999))))
    contract.save_npz(path, blocks)
    assert open(path, "rb").read() == reference_npz(arrays)
    for bad in (lambda: (x[:-1][i:i + 999] for i in range(0, len(x) - 1, 999)),  # a row short
                lambda: (x[i:i + 999].astype(np.float64) for i in range(0, len(x), 999))):  # wrong dtype
        with pytest.raises(ValueError, match="'x'"):
            contract.save_npz(str(tmp_path / "bad.npz"), dict(arrays, x=contract.Rows(x.shape, x.dtype, bad)))
        assert not os.path.exists(tmp_path / "bad.npz")
    stored = str(tmp_path / "s.npz")
    contract.save_npz(stored, arrays, compress=False)
    with np.load(stored) as z:  # a plain .npz that numpy reads too
        assert all(np.array_equal(z[k], arrays[k]) for k in arrays)


def test_check_runs_on_the_written_file_before_it_takes_the_place(tmp_path):
    path = str(tmp_path / "c.npz")
    seen = []
    contract.save_npz(path, {"a": np.arange(5)}, compress=False, check=lambda tmp: seen.append(np.load(tmp)["a"]))
    assert np.array_equal(seen[0], np.arange(5)) and os.path.exists(path)

    def refuse(tmp):
        raise contract.ContractError("refused")

    with pytest.raises(contract.ContractError):
        contract.save_npz(str(tmp_path / "d.npz"), {"a": np.arange(5)}, check=refuse)
    assert sorted(os.listdir(tmp_path)) == ["c.npz"]  # nothing written, no temp file left


@pytest.fixture(scope="module")
def toy_pair(tmp_path_factory):
    """The toy dataset stored both ways (collect_data.py's default recipe, seed 0)."""
    import collect_data

    folder = tmp_path_factory.mktemp("large")
    paths = {kind: str(folder / f"toy_{kind}.npz") for kind in ("deflated", "stored")}
    collect_data.main(collect_data.Args(out=paths["deflated"]))
    collect_data.main(collect_data.Args(out=paths["stored"], uncompressed=True))
    return paths


def test_stored_dataset_is_memory_mapped_with_the_same_arrays(toy_pair):
    a, b = envs.load_dataset(toy_pair["deflated"]), envs.load_dataset(toy_pair["stored"])
    assert a["metadata"] == b["metadata"] and contract.fingerprint(a) == contract.fingerprint(b)
    for k in a:
        if k != "metadata":
            assert np.array_equal(a[k], b[k]) and a[k].dtype == b[k].dtype, k
            assert contract.is_mapped(b[k]) and not contract.is_mapped(a[k]), k
            assert not b[k].flags.writeable  # an input is never written
    assert os.path.getsize(toy_pair["stored"]) > os.path.getsize(toy_pair["deflated"])


def corrupt(src: str, dst: str, key: str, where: float) -> None:
    """A copy of `src` with one byte of member `key`'s data changed (at `where` of its length)."""
    raw = bytearray(open(src, "rb").read())
    with zipfile.ZipFile(src) as zf:
        info = zf.getinfo(key + ".npy")
    local = raw[info.header_offset:info.header_offset + 30]
    start = info.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
    raw[start + int(where * info.file_size)] ^= 0xFF
    open(dst, "wb").write(bytes(raw))


def test_mapped_members_are_still_checked(toy_pair, tmp_path, monkeypatch):
    """A flipped byte fails the CRC as a read would; a truncated file is refused; NaN and bad episodes are found
    with the checks reading blocks of a few rows, at the right row."""
    bad = str(tmp_path / "bad.npz")
    corrupt(toy_pair["stored"], bad, "rewards", 0.9)
    with pytest.raises(contract.ContractError, match="Bad CRC-32 for file 'rewards.npy'"):
        envs.load_dataset(bad)
    raw = open(toy_pair["stored"], "rb").read()
    open(bad, "wb").write(raw[:len(raw) // 2])
    with pytest.raises(contract.ContractError, match="bad.npz"):
        envs.load_dataset(bad)
    monkeypatch.setattr(contract, "BLOCK_BYTES", 64)  # 8 rows of a 2-D float32 observation per block
    data = envs.load_dataset(toy_pair["stored"])
    raw = {k: (np.array(v) if k != "metadata" else contract.dataset_arrays_from_meta(v)) for k, v in data.items()}
    raw["observations"][1234, 1] = np.nan
    with pytest.raises(contract.ContractError, match=r"'observations' contains NaN or inf \(first at row 1234\)"):
        contract.validate_dataset("x.npz", raw)
    raw["observations"][1234, 1] = 2e9
    with pytest.raises(contract.ContractError, match="at row 1234"):
        contract.validate_dataset("x.npz", raw)
    raw["observations"][1234, 1] = data["observations"][1234, 1]
    row = int(np.flatnonzero(~(data["terminals"] | data["timeouts"]))[777])  # inside an episode
    raw["next_observations"][row, 0] += 1
    with pytest.raises(contract.ContractError, match=rf"next_observations\[{row}\] != observations\[{row + 1}\]"):
        contract.validate_dataset("x.npz", raw)
    path = str(tmp_path / "nan.npz")  # and through the whole path: stored file, mapped, refused by a stage
    raw["next_observations"][row, 0] -= 1
    raw["actions"][5000, 0] = np.inf
    contract.save_npz(path, raw, compress=False)
    proc = run("train_bc.py", "--dataset", path, "--out-dir", str(tmp_path / "bc"), ok=False)
    assert one_line_error(proc, "'actions' contains NaN or inf (first at row 5000)"), proc.stderr
    assert not os.path.exists(tmp_path / "bc")


@pytest.mark.parametrize("dim", [1, 2, 7, 168])
def test_mean_std_of_mapped_rows_matches_numpy_bit_for_bit(tmp_path, dim):
    rng = np.random.default_rng(dim)
    x = (rng.standard_normal((9_001, dim)) * 3 + 5).astype(np.float32)
    path = str(tmp_path / "x.npy")
    np.save(path, x)
    mapped = np.load(path, mmap_mode="r")
    assert contract.is_mapped(mapped) and contract.is_mapped(mapped[3:9]) and not contract.is_mapped(mapped[[1, 2]])
    picks = {"all": None, "mask": rng.random(len(x)) < 0.3, "index": rng.permutation(len(x))[:5000],
             "slice": slice(10, 8000)}
    for name, rows in picks.items():
        want = x if rows is None else x[rows]
        for block in (1000, 1 << 16):
            mean, std = mean_std(mapped, rows, block)
            assert np.array_equal(mean, want.mean(0)) and np.array_equal(std, want.std(0)), (name, block)
            assert mean.dtype == std.dtype == np.float32
    y = x * 0.5 + rng.standard_normal(x.shape).astype(np.float32)  # s' - s of the iVAE's normaliser
    np.save(str(tmp_path / "y.npy"), y)
    y_mapped = np.load(str(tmp_path / "y.npy"), mmap_mode="r")
    for block in (777, 1 << 16):
        d = diff_mean_std(mapped, y_mapped, block)
        assert np.array_equal(d[0], (y - x).mean(0)) and np.array_equal(d[1], (y - x).std(0)), block
    if dim > 1:
        d = block_mean_std(len(x), lambda i, j: y[i:j] - x[i:j], 777)
        assert np.array_equal(d[0], (y - x).mean(0)) and np.array_equal(d[1], (y - x).std(0))


def test_mapped_rows_give_the_tensors_of_the_whole_array(tmp_path):
    from training.trainer import MappedRows, Normalizer, rows_tensor

    rng = np.random.default_rng(1)
    x = rng.standard_normal((3000, 5)).astype(np.float32)
    np.save(str(tmp_path / "x.npy"), x)
    mapped = np.load(str(tmp_path / "x.npy"), mmap_mode="r")
    rows = rng.random(3000) < 0.5
    norm = Normalizer(x, [-1.0] * 5, [1.0] * 5, rows)
    assert np.array_equal(norm.mean, Normalizer(x[rows], [-1.0] * 5, [1.0] * 5).mean)
    full = rows_tensor(x, norm.obs, torch.device("cpu"), rows)
    lazy = rows_tensor(mapped, norm.obs, torch.device("cpu"), rows)
    assert isinstance(lazy, MappedRows) and torch.is_tensor(full) and len(lazy) == len(full) == rows.sum()
    idx = torch.as_tensor(rng.integers(0, len(full), 512))
    assert torch.equal(lazy[idx], full[idx]) and torch.equal(lazy[10:20], full[10:20])
    assert torch.equal(lazy[idx.numpy()], full[idx])


def test_toy_pipeline_gives_the_same_policies_from_either_storage(toy_pair, tmp_path, monkeypatch):
    """iVAE, augmentation (here made 1,000 rows at a time, spilled to disk) and the trainers read the stored
    dataset memory-mapped and produce what the deflated one gives: the same weights, rows and labels."""
    import augment
    import train_bc
    import train_dwbc
    import train_ivae

    out = {}
    for kind, path in toy_pair.items():
        if kind == "stored":
            monkeypatch.setattr(augment, "BLOCK", 1000)
        d = str(tmp_path / kind)
        fit = train_ivae.main(train_ivae.Args(dataset=path, out_dir=f"{d}/ivae", total_steps=60, restarts=1,
                                              compare=False))
        aug = f"{d}/aug.npz"
        augment.main(augment.Args(dataset=path, ivae=f"{d}/ivae/ivae.pt", out=aug, sampler_out=f"{d}/sampler.pt",
                                  sampler_steps=50))
        assert not [f for f in os.listdir(d) if f.startswith(".augment-spill-")]
        train_dwbc.main(train_dwbc.Args(dataset=aug, out_dir=f"{d}/oilca", total_steps=40, eval_every=0))
        train_bc.main(train_bc.Args(dataset=path, out_dir=f"{d}/bc", total_steps=40, data="all", eval_every=0))
        out[kind] = {"ivae": torch.load(f"{d}/ivae/ivae.pt", weights_only=False)["state_dict"], "fit": fit,
                     "aug": envs.load_dataset(aug), "oilca": contract.load_policy(f"{d}/oilca/policy.pt"),
                     "bc": contract.load_policy(f"{d}/bc/policy.pt")}
    a, b = out["deflated"], out["stored"]
    assert all(torch.equal(a["ivae"][k], b["ivae"][k]) for k in a["ivae"])
    assert len(b["aug"]["rewards"]) > 3000 and contract.is_mapped(b["aug"]["observations"])
    for k in a["aug"]:
        if k != "metadata":
            assert np.array_equal(a["aug"][k], b["aug"][k]), k
    for name in ("oilca", "bc"):
        for k in ("obs_mean", "obs_std"):
            assert np.array_equal(np.asarray(a[name][k]), np.asarray(b[name][k])), (name, k)
        sa, sb = a[name]["state_dict"], b[name]["state_dict"]
        assert all(torch.equal(torch.as_tensor(sa[k]), torch.as_tensor(sb[k])) for k in sa), name


def test_memory_benchmark_smoke(tmp_path):
    """scripts/benchmark_memory.py on a tiny toy dataset, tiled twice, stored: every stage runs and is measured; the
    table is rewritten from the JSON alone (--again) to the same text."""
    tiny = str(tmp_path / "tiny.npz")
    run("collect_data.py", "--out", tiny, "--toy.n-classes", "2", "--toy.episodes-per-class", "6",
        "--toy.env.episode-len", "20")
    out = str(tmp_path / "memory.json")
    proc = run("scripts/benchmark_memory.py", "--dataset", tiny, "--tile", "2", "--work",
               str(tmp_path / "work"), "--storages", "stored", "--ivae-steps", "5", "--sampler-steps", "5",
               "--policy-steps", "5", "--out", out)
    import json

    with open(out) as f:
        result = json.load(f)
    assert result["dataset"]["rows"] == 2 * len(envs.load_dataset(tiny)["rewards"])
    stages = result["runs"][0]["stages"]
    assert len(result["runs"]) == 1 and len(stages) == 5 and all(s["exit"] == 0 for s in stages.values()), proc.stdout
    assert all(0 < s["peak_anon_gb"] <= s["peak_rss_gb"] for s in stages.values())
    md = open(out[:-5] + ".md").read()
    assert "| OILCA (DWBC on the augmented file) |" in md and "tiled 2 times" in md
    os.remove(out[:-5] + ".md")
    run("scripts/benchmark_memory.py", "--again", out)
    assert open(out[:-5] + ".md").read() == md
    proc = run("scripts/benchmark_memory.py", "--tile", "2", ok=False)
    assert one_line_error(proc, "--dataset"), proc.stderr


@pytest.mark.parametrize("name, extra", [("oril", {"reward_steps": 20}), ("ilid", {}),
                                         ("bcnd", {"n_rounds": 2, "epochs": 1})])
def test_other_trainers_read_mapped_rows_to_the_same_weights(toy_pair, tmp_path, name, extra):
    """ORIL (its reward relabelling in blocks), ILID (next observations, passes over index arrays) and BCND (slices)
    on the stored (mapped) toy dataset give the weights they give on the deflated one. (LobsDICE and ISW-BC index
    their rows as ILID and DWBC do; a run of each on mapped data gave the same weights too, 2026-11-29.)"""
    import importlib

    trainer = importlib.import_module(f"train_{name}")
    weights = {}
    for kind, path in toy_pair.items():
        trainer.main(trainer.Args(dataset=path, out_dir=str(tmp_path / kind), total_steps=20, eval_every=0,
                                  eval_episodes=0, **extra))
        weights[kind] = contract.load_policy(str(tmp_path / kind / "policy.pt"))
    a, b = weights["deflated"], weights["stored"]
    assert np.array_equal(np.asarray(a["obs_mean"]), np.asarray(b["obs_mean"]))
    assert all(torch.equal(torch.as_tensor(a["state_dict"][k]), torch.as_tensor(b["state_dict"][k]))
               for k in a["state_dict"])
