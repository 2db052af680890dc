"""The bad-input corpus: every CLI refuses broken arguments, datasets, checkpoints, result files and output paths
with exactly one line (`error: …`) that names the flag or the file, a non-zero exit, and no new, changed or removed
file anywhere it could write (its case folder, the shared inputs, the repo's data/, runs/ and results/).

Each case runs the script's `__main__` in-process (runpy, with sys.argv set), so tyro parses the flags and the
stage's own error wrapper prints the line, without a Python start-up per case; tests/test_faults.py runs a subprocess
per CLI for the real stderr and exit status, and the kill and concurrency tests. Cases are grouped by category
(the first part of their id); `python tests/test_corpus.py` prints the count per category.

Bad inputs are made once per session from the tiny dataset, iVAE and policy (`BAD`: one generator per file).
"""
import argparse
import collections
import hashlib
import io
import json
import os
import runpy
import shutil
import sys
import zipfile
from dataclasses import dataclass
from typing import Callable, Dict, Tuple

import numpy as np
import pytest

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))



# ------------------------------------------------------------------------------------------------------ harness
def run_main(script: str, argv: list, capsys) -> Tuple[object, str, str]:
    """Run `python <script> <argv>` in this process; returns (exit code or SystemExit message, stdout, stderr)."""
    old = sys.argv
    sys.argv = [script, *map(str, argv)]
    try:
        runpy.run_path(os.path.join(ROOT, script), run_name="__main__")
        code = 0
    except SystemExit as e:
        code = e.code
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out, out.err


def snapshot(*roots: str, deep: bool = True) -> Dict[str, tuple]:
    """{path: (kind, size, sha256)} of every file and folder under the roots (deep=False: their entries only)."""
    state = {}
    for root in roots:
        if not os.path.exists(root):
            continue
        for dirpath, dirnames, filenames in os.walk(root):
            for name in dirnames:
                state[os.path.join(dirpath, name)] = ("dir",)
            for name in filenames:
                path = os.path.join(dirpath, name)
                with open(path, "rb") as f:
                    state[path] = ("file", os.path.getsize(path), hashlib.sha256(f.read()).hexdigest() if deep else "")
            if not deep:
                break
    return state


def assert_refused(code, err: str, words) -> str:
    """Non-zero exit and exactly one stderr line, `error: …`, holding every word."""
    lines = err.splitlines() + (code.splitlines() if isinstance(code, str) else [])
    assert code not in (0, None), f"exit status 0; stderr: {err!r}"
    assert len(lines) == 1, f"{len(lines)} stderr lines: {lines[:12]}"
    assert lines[0].startswith("error: "), lines[0]
    for w in words:
        assert w in lines[0], f"{w!r} not in {lines[0]!r}"
    return lines[0]


# ------------------------------------------------------------------------------------------------------ inputs
class Inputs:
    """The session's valid inputs and, on first use, each bad one of BAD (written into one folder)."""

    def __init__(self, folder, dataset, ivae_path, policy_path, results):
        self.folder, self.data, self.ivae, self.policy, self.results = folder, dataset, ivae_path, policy_path, results
        with np.load(dataset) as z:
            self.raw = {k: z[k] for k in z.files}
        self.meta = json.loads(str(self.raw["metadata"]))

    def __call__(self, name: str) -> str:
        """The path of the bad input `name` (see BAD), made the first time it is asked for."""
        path = os.path.join(self.folder, name)
        if not os.path.exists(path):
            BAD[name](self, path)
        return path


def raw_with(inp: Inputs, meta=None, **arrays) -> dict:
    out = {k: v.copy() for k, v in inp.raw.items()}
    out.update(arrays)
    if meta is not None:
        out["metadata"] = meta if isinstance(meta, np.ndarray) else np.array(json.dumps(meta))
    return out


def write_npz(path: str, arrays: dict) -> None:
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for k, v in arrays.items():
            buf = io.BytesIO()
            np.lib.format.write_array(buf, np.asanyarray(v), allow_pickle=True)
            zf.writestr(k + ".npy", buf.getvalue())


def meta_with(**changes):
    def make(inp: Inputs, path: str) -> None:
        meta = json.loads(json.dumps(inp.meta))
        for key, value in changes.items():
            if value is DELETE:
                meta.pop(key)
            elif key == "env_config":
                meta[key] = {**meta[key], **value}
            else:
                meta[key] = value
        write_npz(path, raw_with(inp, meta))
    return make


def array_with(key: str, edit: Callable):
    def make(inp: Inputs, path: str) -> None:
        write_npz(path, raw_with(inp, **{key: edit(inp.raw[key].copy())}))
    return make


def setitem(index, value):
    def edit(a):
        a[index] = value
        return a
    return edit


def bomb_member(inp: Inputs, path: str) -> None:
    """'rewards' declares 84 million float64 rows (673 MB) in ~650 KB of zeros; the other members are the tiny
    dataset's (600 rows)."""
    n = 84_000_000
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        for k, v in inp.raw.items():
            if k == "rewards":
                with zf.open("rewards.npy", "w", force_zip64=True) as f:
                    np.lib.format.write_array_header_1_0(f, {"descr": "<f8", "fortran_order": False, "shape": (n,)})
                    left, zero = n * 8, bytes(1 << 22)
                    while left:
                        f.write(zero[:min(left, len(zero))])
                        left -= min(left, len(zero))
            else:
                buf = io.BytesIO()
                np.lib.format.write_array(buf, v)
                zf.writestr(k + ".npy", buf.getvalue())


def bomb_consistent(inp: Inputs, path: str) -> None:
    """Every member consistent with N = 2 million rows of zeros (~110 MB declared, ~110 KB compressed)."""
    n, obs, act = 2_000_000, inp.meta["obs_dim"], inp.meta["act_dim"]
    shapes = {"observations": ("<f4", (n, obs)), "actions": ("<f4", (n, act)), "next_observations": ("<f4", (n, obs)),
              "rewards": ("<f4", (n,)), "terminals": ("|b1", (n,)), "timeouts": ("|b1", (n,)),
              "episode_ids": ("<i8", (n,)), "aux": ("<i8", (n,)), "expert": ("|b1", (n,)),
              "episode_returns": ("<f4", (n,))}
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as zf:
        zf.writestr("metadata.npy", _npy(inp.raw["metadata"]))
        for k, (descr, shape) in shapes.items():
            with zf.open(k + ".npy", "w", force_zip64=True) as f:
                np.lib.format.write_array_header_1_0(f, {"descr": descr, "fortran_order": False, "shape": shape})
                left = int(np.prod(shape)) * np.dtype(descr).itemsize
                zero = bytes(1 << 22)
                while left:
                    f.write(zero[:min(left, len(zero))])
                    left -= min(left, len(zero))


def _npy(a) -> bytes:
    buf = io.BytesIO()
    np.lib.format.write_array(buf, a)
    return buf.getvalue()


def object_member(inp: Inputs, path: str) -> None:
    arrays = raw_with(inp)
    arrays["aux"] = np.array([{"x": 1}] * len(arrays["aux"]), dtype=object)
    write_npz(path, arrays)


def blob(data: bytes):
    def make(inp: Inputs, path: str) -> None:
        with open(path, "wb") as f:
            f.write(data)
    return make


def truncated_copy(of: str):
    def make(inp: Inputs, path: str) -> None:
        src = getattr(inp, of)
        data = open(src, "rb").read()
        with open(path, "wb") as f:
            f.write(data[: len(data) // 2])
    return make


def a_folder(inp: Inputs, path: str) -> None:
    os.makedirs(path)


def torch_edit(of: str, edit: Callable):
    """A copy of the session's policy or iVAE checkpoint with `edit(dict)` applied (saved without checks)."""
    def make(inp: Inputs, path: str) -> None:
        import torch

        ckpt = torch.load(getattr(inp, of), weights_only=True)
        edit(ckpt)
        torch.save(ckpt, path)
    return make


def _set(key, value):
    def edit(ck):
        ck[key] = value
    return edit


def _weights(fn):
    def edit(ck):
        name = sorted(ck["state_dict"])[0]
        ck["state_dict"][name] = fn(ck["state_dict"][name])
    return edit


def _nan(t):
    t = t.clone()
    t.view(-1)[0] = float("nan")
    return t


def policy_for_dims(path: str, obs_dim: int, act_dim: int) -> None:
    """A valid policy artifact for an env of other dims."""
    import torch

    from oilca import contract
    from training import policy

    torch.manual_seed(0)
    actor = policy.Actor(obs_dim, act_dim, hidden=8)
    norm = policy.Normalizer(np.random.default_rng(0).normal(size=(50, obs_dim)), [-1.0] * act_dim, [1.0] * act_dim)
    contract.save_policy(path, policy.artifact(actor, norm, method="m", seed=0, dataset_fingerprint="f",
                                               env={"env_id": "toy", "obs_dim": obs_dim, "act_dim": act_dim}))


def pickled_object(inp: Inputs, path: str) -> None:
    """A checkpoint that only a full unpickler would load (a Namespace object): weights_only refuses it."""
    import torch

    torch.save({"kind": "policy", "config": argparse.Namespace(x=1)}, path)


def sac_snapshot(env_id: str):
    def make(inp: Inputs, path: str) -> None:
        import torch

        ckpt = torch.load(inp.policy, weights_only=True)
        ckpt["env"] = {"env_id": env_id, "obs_dim": inp.meta["obs_dim"], "act_dim": inp.meta["act_dim"]}
        torch.save(ckpt, path)
    return make


def result_json(edit: Callable = None, text: str = None):
    """A results folder holding one valid result JSON, edited (as a dict) or replaced by raw text."""
    def make(inp: Inputs, path: str) -> None:
        os.makedirs(path)
        r = {"method": "bc_exp", "seed": 0, "split": "train", "env": "toy", "episodes": 2, "eval_seed": 10000,
             "returns": [-5.0, -6.0], "mean_return": -5.5, "std_return": 0.5}
        if edit:
            edit(r)
        with open(os.path.join(path, "bc_exp_s0_train.json"), "w") as f:
            f.write(text if text is not None else json.dumps(r))
    return make


def result_text(text):
    return result_json(text=text)


DELETE = object()
BAD: Dict[str, Callable] = {
    # metadata
    "equal_bounds.npz": meta_with(action_high=[-1.0, -1.0]),
    "inverted_bounds.npz": meta_with(action_low=[1.0, 1.0], action_high=[-1.0, -1.0]),
    "bounds_short.npz": meta_with(action_low=[-1.0]),
    "bounds_text.npz": meta_with(action_high=["1", 1.0]),
    "bounds_infinite.npz": meta_with(action_high=[float("inf"), 1.0]),
    "bounds_huge.npz": meta_with(action_low=[-1e30, -1.0]),
    "obs_dim_null.npz": meta_with(obs_dim=None),
    "obs_dim_text.npz": meta_with(obs_dim="2"),
    "obs_dim_float.npz": meta_with(obs_dim=2.0),
    "act_dim_bool.npz": meta_with(act_dim=True),
    "n_classes_zero.npz": meta_with(n_classes=0),
    "u_dim_negative.npz": meta_with(u_dim=-2),
    "schema_bool.npz": meta_with(schema_version=True),
    "schema_2.npz": meta_with(schema_version=2),
    "env_id_bogus.npz": meta_with(env_id="mujoco:hopper"),
    "env_id_number.npz": meta_with(env_id=3),
    "env_id_toy_task.npz": meta_with(env_id="toy:maze"),
    "env_id_dmc_unknown.npz": meta_with(env_id="dmc:nosuch-task"),
    "env_id_cw_unknown.npz": meta_with(env_id="cw:juggling"),
    "toy_episode_len_0.npz": meta_with(env_config={"episode_len": 0}),
    "toy_box_negative.npz": meta_with(env_config={"box": -1.0}),
    "toy_config_unknown.npz": meta_with(env_config={"gravity": 9.8}),
    "toy_env_classes_small.npz": meta_with(env_n_classes=1),
    "heldout_out_of_range.npz": meta_with(heldout_classes=[9]),
    "aux_meaning_list.npz": meta_with(aux_meaning=["c"]),
    "collect_args_list.npz": meta_with(collect_args=[]),
    "seed_text.npz": meta_with(seed="0"),
    "versions_missing.npz": meta_with(versions=DELETE),
    "u_dim_missing.npz": meta_with(u_dim=DELETE),
    "metadata_list.npz": lambda inp, path: write_npz(path, raw_with(inp, np.array("[1, 2]"))),
    "metadata_2d.npz": lambda inp, path: write_npz(path, raw_with(inp, np.array(["{}", "{}"]))),
    "metadata_bytes.npz": lambda inp, path: write_npz(path, raw_with(inp, np.array(b"{}"))),
    "metadata_deep.npz": lambda inp, path: write_npz(path, raw_with(inp, np.array("[" * 100_000 + "]" * 100_000))),
    # arrays
    "obs_1e30.npz": array_with("observations", setitem((5, 0), 1e30)),
    "next_obs_1e12.npz": array_with("next_observations", setitem((7, 1), 1e12)),
    "rewards_1e20.npz": array_with("rewards", setitem(3, 1e20)),
    "actions_nan.npz": array_with("actions", setitem((3, 1), np.nan)),
    "obs_inf.npz": array_with("observations", setitem((0, 0), np.inf)),
    "obs_1d.npz": array_with("observations", lambda a: a.reshape(-1)),
    "obs_complex.npz": array_with("observations", lambda a: a.astype(np.complex64)),
    "aux_negative.npz": array_with("aux", lambda a: a - 1),
    "zero_rows.npz": lambda inp, path: write_npz(path, {k: (v[:0] if v.ndim else v) for k, v in inp.raw.items()}),
    "object_member.npz": object_member,
    "member_bomb.npz": bomb_member,
    "consistent_bomb.npz": bomb_consistent,
    # files
    "truncated.npz": truncated_copy("data"),
    "garbage.npz": blob(b"this is not a zip file"),
    "empty.npz": blob(b""),
    "folder.npz": a_folder,
    # checkpoints
    "ivae_truncated.pt": truncated_copy("ivae"),
    "ivae_is_policy.pt": lambda inp, path: shutil.copy(inp.policy, path),
    "ivae_config_missing.pt": torch_edit("ivae", lambda ck: ck["config"].pop("latent_dim")),
    "ivae_config_text.pt": torch_edit("ivae", _set("config", "oops")),
    "ivae_nan.pt": torch_edit("ivae", _weights(_nan)),
    "ivae_wrong_shapes.pt": torch_edit("ivae", lambda ck: ck["config"].update(hidden=ck["config"]["hidden"] + 1)),
    "ivae_other_data.pt": torch_edit("ivae", _set("dataset_fingerprint", "0123456789abcdef")),
    "ivae_pickle.pt": pickled_object,
    "policy_truncated.pt": truncated_copy("policy"),
    "policy_empty.pt": blob(b""),
    "policy_folder.pt": a_folder,
    "policy_pickle.pt": pickled_object,
    "policy_is_ivae.pt": lambda inp, path: shutil.copy(inp.ivae, path),
    "policy_layer_short.pt": torch_edit("policy", lambda ck: ck["config"]["layers"].__setitem__(0, "linear:2")),
    "policy_layer_unknown.pt": torch_edit("policy", lambda ck: ck["config"]["layers"].__setitem__(1, "gelu")),
    "policy_layer_chain.pt": torch_edit("policy", lambda ck: ck["config"]["layers"].__setitem__(0, "linear:3:8")),
    "policy_layers_text.pt": torch_edit("policy", lambda ck: ck["config"].__setitem__("layers", "linear:2:8")),
    "policy_layers_empty.pt": torch_edit("policy", lambda ck: ck["config"].__setitem__("layers", [])),
    "policy_state_shape.pt": torch_edit("policy", _weights(lambda t: t[:1])),
    "policy_state_missing.pt": torch_edit("policy", lambda ck: ck["state_dict"].pop(sorted(ck["state_dict"])[0])),
    "policy_nan.pt": torch_edit("policy", _weights(_nan)),
    "policy_std_zero.pt": torch_edit("policy", lambda ck: ck.__setitem__("obs_std", [0.0] * len(ck["obs_std"]))),
    "policy_equal_bounds.pt": torch_edit("policy", lambda ck: ck.__setitem__("action_high", list(ck["action_low"]))),
    "policy_mean_short.pt": torch_edit("policy", lambda ck: ck.__setitem__("obs_mean", [0.0])),
    "policy_method_number.pt": torch_edit("policy", _set("method", 7)),
    "policy_no_kind.pt": torch_edit("policy", lambda ck: ck.pop("kind")),
    "policy_sac_dmc.pt": sac_snapshot("dmc:cartpole-swingup"),
    "policy_sac_toy.pt": sac_snapshot("toy"),
    "policy_other_data.pt": torch_edit("policy", _set("dataset_fingerprint", "0123456789abcdef")),
    "policy_3d.pt": lambda inp, path: policy_for_dims(path, 3, 2),
    # result folders
    "res_nan_returns": result_text('{"method": "m", "seed": 0, "split": "train", "returns": [NaN, -1.0]}'),
    "res_inf_returns": result_text('{"method": "m", "seed": 0, "split": "train", "returns": [Infinity, -1.0]}'),
    "res_nan_mean": result_text('{"method": "m", "seed": 0, "split": "train", "returns": [-1.0], "mean_return": NaN}'),
    "res_mean_text": result_json(lambda r: r.update(mean_return="-5.5")),
    "res_success_nan": result_text('{"method": "m", "seed": 0, "split": "A", "returns": [1.0], "success": [NaN]}'),
    "res_ratio_inf": result_text('{"method": "m", "seed": 0, "split": "train", "returns": [1.0], "augmented_de_over_du": -Infinity}'),
    "res_returns_empty": result_json(lambda r: r.update(returns=[])),
    "res_returns_bool": result_json(lambda r: r.update(returns=[True, False])),
    "res_seed_float": result_json(lambda r: r.update(seed=0.5)),
    "res_method_empty": result_json(lambda r: r.update(method="")),
    "res_no_split": result_json(lambda r: r.pop("split")),
    "res_not_json": result_text("{not json"),
    "res_empty": lambda inp, path: os.makedirs(path),
    "res_env_number": result_json(lambda r: r.update(env=3)),
    "res_table_folder": result_json(),  # completed below: table.md is a folder
    # other files
    "plain_file": blob(b"x"),
    "doc_no_markers.md": blob(b"# a doc without report markers\n"),
}


def _table_folder(make):
    def wrapped(inp, path):
        make(inp, path)
        os.makedirs(os.path.join(path, "table.md"))
    return wrapped


BAD["res_table_folder"] = _table_folder(BAD["res_table_folder"])


@pytest.fixture(scope="session")
def inputs(tiny_dataset, tiny_ivae, tmp_path_factory):
    """The valid inputs the cases refer to (dataset, iVAE, a tiny BC policy, a results folder) and the bad ones."""
    import train_bc

    folder = str(tmp_path_factory.mktemp("corpus_inputs"))
    data = os.path.join(folder, "toy.npz")
    shutil.copy(tiny_dataset, data)
    ivae = os.path.join(folder, "ivae.pt")
    shutil.copy(tiny_ivae, ivae)
    train_bc.main(train_bc.Args(dataset=data, out_dir=os.path.join(folder, "bc"), total_steps=5, hidden=8,
                                eval_episodes=0, threads=1))
    results = os.path.join(folder, "results")
    os.makedirs(results)
    with open(os.path.join(results, "bc_exp_s0_train.json"), "w") as f:
        json.dump({"method": "bc_exp", "seed": 0, "split": "train", "env": "toy", "returns": [-5.0, -6.0]}, f)
    return Inputs(folder, data, ivae, os.path.join(folder, "bc", "policy.pt"), results)


# ------------------------------------------------------------------------------------------------------ cases
@dataclass
class Case:
    id: str
    script: str
    argv: Callable  # (inputs, case folder) -> argv list
    words: Callable  # (inputs, case folder) -> words the error line must hold


CASES = []


def case(category: str, name: str, script: str, argv: Callable, words):
    words_fn = words if callable(words) else (lambda inp, t, w=words: [w] if isinstance(w, str) else list(w))
    cid = f"{category}-{name}"  # datasets are checked by contract.load_dataset, which every stage calls already
    CASES.append(Case(cid, script, argv, words_fn))


def J(*parts):
    return os.path.join(*map(str, parts))


# the smallest flags that reach each stage's checks; outputs always in the case folder
def bc_argv(inp, t, *flags, script="train_bc.py", dataset=None):
    return ["--dataset", dataset or inp.data, "--out-dir", J(t, "run"), "--total-steps", 5, "--hidden", 8, "--threads", 1,
            "--eval-episodes", 0, *flags]


TRAINER_SCRIPTS = ("train_bc.py", "train_dwbc.py", "train_oril.py", "train_bcnd.py", "train_lobsdice.py", "train_ilid.py",
                   "train_iswbc.py")


def stage_argv(script, inp, t, dataset, *flags):
    """argv of `script` on `dataset` with tiny settings and outputs in the case folder."""
    if script in TRAINER_SCRIPTS:
        return bc_argv(inp, t, *flags, dataset=dataset)
    if script == "train_ivae.py":
        return ["--dataset", dataset, "--out-dir", J(t, "ivae"), "--total-steps", 5, "--restarts", 1, "--no-compare",
                "--hidden", 8, "--threads", 1, *flags]
    if script == "augment.py":
        return ["--dataset", dataset, "--ivae", inp.ivae, "--out", J(t, "aug.npz"), "--sampler-out", J(t, "s", "policy.pt"),
                "--sampler-steps", 5, "--hidden", 8, *flags]
    if script == "evaluate.py":
        return ["--reference", "expert", "--env-dataset", dataset, "--episodes", 2, "--out", J(t, "r_{split}.json"), *flags]
    if script == "collect_data.py":
        return ["--out", dataset, "--toy.n-classes", 2, "--toy.episodes-per-class", 6, *flags]
    raise KeyError(script)


# -- arguments: every flag with a range, per CLI ------------------------------------------------------------------------
ARGS = {
    "collect_data.py": [("seed", "-1"), ("positive-frac", "0"), ("positive-frac", "1.5"), ("positive-frac", "inf"),
                        ("expert-prob", "2"), ("expert-prob", "nan"), ("toy.n-classes", "0"),
                        ("toy.episodes-per-class", "0"), ("toy.heldout-classes", "-1"), ("toy.noise-levels", "-0.1"),
                        ("toy.env.episode-len", "0"), ("toy.env.box", "0"), ("toy.env.step-size", "-1"),
                        ("toy.env.sigma2-low", "0"), ("toy.env.sigma2-high", "0.01"), ("toy.env.leaky-slope", "0"),
                        ("toy.env.noise-scale", "inf"), ("toy.env.seed", "-4"), ("toy.env.alpha", "nan")],
    "train_ivae.py": [("total-steps", "0"), ("total-steps", "-5"), ("restarts", "0"), ("log-every", "0"),
                      ("batch-size", "0"), ("lr", "0"), ("lr", "nan"), ("lr", "1e39"), ("decoder-var", "0"), ("latent-dim", "0"),
                      ("threads", "0"), ("hidden", "0"), ("seed", "-3"), ("n-plot", "0"), ("n-hidden", "-1")],
    "augment.py": [("ratio", "inf"), ("ratio", "1e9"), ("ratio", "-0.5"), ("ratio", "nan"), ("sampler-steps", "0"),
                   ("sampler-lr", "-1e-4"), ("sampler-lr", "1e39"), ("threads", "0"), ("batch-size", "0"), ("hidden", "0"), ("seed", "-1")],
    "train_bc.py": [("total-steps", "0"), ("total-steps", "-5"), ("batch-size", "0"), ("lr", "0"), ("lr", "inf"),
                    ("weight-decay", "-1"), ("hidden", "0"), ("n-hidden", "-1"), ("eval-every", "-1"),
                    ("eval-episodes", "-1"), ("final-eval-episodes", "0"), ("threads", "0"), ("act-eps", "0"),
                    ("act-eps", "1"), ("seed", "3000000000"), ("eval-seed", "-1"), ("loss-trace", "-1"),
                    ("lr", "1e39"), ("weight-decay", "1e39")],  # finite in Python, beyond float32
    "train_dwbc.py": [("eta", "0"), ("eta", "1"), ("eta", "-0.5"), ("alpha", "0.5"), ("alpha", "nan"),
                      ("total-steps", "0"), ("d-update-every", "0"), ("aug-frac", "1.5"), ("actor-lr", "0"),
                      ("disc-lr", "-1"), ("actor-weight-decay", "-1"), ("batch-size", "0"), ("threads", "0"),
                      ("act-eps", "2"), ("final-eval-episodes", "-1"), ("actor-lr", "1e39"), ("disc-lr", "1e39")],
    "train_oril.py": [("total-steps", "0"), ("total-steps", "-5"), ("reward-steps", "0"), ("eta", "0"), ("eta", "1"),
                      ("expectile", "1.5"), ("beta", "-1"), ("gamma", "1.5"), ("polyak", "0"), ("threads", "0"),
                      ("batch-size", "0"), ("critic-lr", "0"), ("critic-lr", "1e39")],
    "train_bcnd.py": [("n-policies", "0"), ("n-rounds", "0"), ("epochs", "0"), ("total-steps", "-5"), ("lr", "0"),
                      ("weight-decay", "-1"), ("threads", "0"), ("batch-size", "0"), ("eval-every", "-1"),
                      ("lr", "1e39")],
    "train_lobsdice.py": [("total-steps", "0"), ("alpha", "-1"), ("gamma", "1"), ("cost-gp", "-1"), ("nu-gp", "nan"),
                          ("threads", "0"), ("batch-size", "0"), ("nu-lr", "0"), ("nu-lr", "1e39")],
    "train_ilid.py": [("total-steps", "0"), ("d-steps", "0"), ("bc-steps", "-1"), ("eta", "0"), ("eta", "1"),
                      ("bar", "1.5"), ("bar", "nan"), ("rollback", "0"), ("decay", "0"), ("decay", "1.5"),
                      ("weight-init", "0"), ("epsilon", "-0.1"), ("alpha", "0"), ("alpha", "inf"), ("actor-lr", "0"),
                      ("alpha-lr", "-1"), ("d-lr", "nan"), ("weight-decay", "-1"), ("d-weight-decay", "-1"),
                      ("threads", "0"), ("batch-size", "0"), ("weight-init", "1e39"), ("actor-lr", "1e39")],
    "train_iswbc.py": [("total-steps", "0"), ("tau", "-1"), ("tau", "inf"), ("grad-penalty", "-1"),
                       ("grad-penalty", "nan"), ("grad-penalty", "1e39"), ("disc-lr", "0"), ("disc-lr", "1e39"),
                       ("actor-lr", "-1"), ("threads", "0"), ("batch-size", "0"), ("act-eps", "1")],
    "evaluate.py": [("episodes", "0"), ("episodes", "-3"), ("seed", "-1"), ("classes", "-1")],
    "envs/toy.py": [("n-classes", "0"), ("episodes", "0"), ("env.episode-len", "0"), ("env.box", "-1"), ("seed", "-1"),
                   ("env.leaky-slope", "0")],
    "runner.py": [("steps", "0"), ("jobs", "0"), ("ratio", "inf"), ("seeds", "-1"), ("act-eps", "0"),
                  ("episodes", "0"), ("threads", "0"), ("fig5-ratios", "1e9")],
    "train_behavior.py": [("total-steps", "0"), ("eval-every", "0"), ("update-every", "0"), ("gamma", "1"),
                          ("tau", "0"), ("snapshot-steps", "0"), ("snapshot-steps", "-5"),
                          ("policy-frequency", "0"), ("buffer-size", "0"), ("eval-episodes", "0"), ("q-lr", "-1")],
}


def flag_argv(script, flag, value):
    def argv(inp, t):
        flags = [f"--{flag}", value]
        if script in TRAINER_SCRIPTS + ("train_ivae.py", "augment.py", "collect_data.py"):
            dataset = J(t, "new.npz") if script == "collect_data.py" else inp.data
            return stage_argv(script, inp, t, dataset) + flags  # the last occurrence of a flag wins
        if script == "evaluate.py":
            return ["--policy", inp.policy, "--out", J(t, "r_{split}.json"), *flags]
        if script == "envs/toy.py":
            return ["--plot-path", J(t, "p.png"), *flags]
        if script == "runner.py":
            return ["--root", t, "--dry-run", *flags]
        if script == "train_behavior.py":
            return ["--out-dir", J(t, "sac"), "--threads", 1, *flags]
        raise KeyError(script)
    return argv


for _script, _pairs in ARGS.items():
    for _flag, _value in _pairs:
        case("args", f"{_script[:-3]}-{_flag}={_value}", _script, flag_argv(_script, _flag, _value), f"--{_flag}")

case("args", "collect_data-env=mujoco", "collect_data.py", lambda inp, t: ["--env", "mujoco:hopper", "--out", J(t, "x.npz")], "--env")
case("args", "collect_data-env=toy:maze", "collect_data.py", lambda inp, t: ["--env", "toy:maze", "--out", J(t, "x.npz")], "--env")
case("args", "collect_data-dmc.episodes=0", "collect_data.py",
     lambda inp, t: ["--env", "dmc:cartpole-swingup", "--dmc.episodes", 0, "--out", J(t, "x.npz")], "--dmc.episodes")
case("args", "collect_data-dmc.noise-std-high<low", "collect_data.py",
     lambda inp, t: ["--env", "dmc:cartpole-swingup", "--dmc.noise-std-high", 0.01, "--out", J(t, "x.npz")], "--dmc.noise-std-high")
case("args", "collect_data-cw.episodes=0", "collect_data.py",
     lambda inp, t: ["--env", "cw:pushing", "--cw.episodes", 0, "--out", J(t, "x.npz")], "--cw.episodes")
case("args", "collect_data-no-behaviour", "collect_data.py",
     lambda inp, t: ["--out", J(t, "x.npz"), "--toy.noise-levels", "--toy.no-random-policy"], "--toy.noise-levels")
case("args", "train_behavior-env=bogus", "train_behavior.py", lambda inp, t: ["--env", "bogus", "--out-dir", J(t, "sac")], "--env")
case("args", "fast_train_bc-seeds-negative", "fast/train_bc.py", lambda inp, t: bc_argv(inp, t, "--seeds", 0, -1), "--seeds")
case("args", "fast_train_bc-seeds-repeated", "fast/train_bc.py",
     lambda inp, t: ["--dataset", inp.data, "--out-dir", J(t, "r{seed}"), "--seeds", 1, 1], "--seeds")
case("args", "fast_train_bc-seeds-without-{seed}", "fast/train_bc.py", lambda inp, t: bc_argv(inp, t, "--seeds", 0, 1), "--out-dir")
case("args", "train_bc-method-empty", "train_bc.py", lambda inp, t: bc_argv(inp, t, "--method", ""), "--method")
case("args", "train_bc-method-slash", "train_bc.py", lambda inp, t: bc_argv(inp, t, "--method", "a/b"), "--method")
# flags tyro itself refuses (a Literal's choices, a type, an unknown or unfinished flag): cli.parse's one line
case("args", "train_bc-data=not-a-choice", "train_bc.py", lambda inp, t: bc_argv(inp, t, "--data", "d.npz"),
     ["--data", "d.npz", "expert"])
case("args", "train_dwbc-eta=abc", "train_dwbc.py", lambda inp, t: bc_argv(inp, t, "--eta", "abc", script="train_dwbc.py"),
     ["--eta", "abc"])
case("args", "runner-unknown-flag", "runner.py", lambda inp, t: ["--root", t, "--dry-run", "--bogus", 1], "--bogus")
case("args", "evaluate-episodes-without-value", "evaluate.py",
     lambda inp, t: ["--policy", inp.policy, "--out", J(t, "r_{split}.json"), "--episodes"], "--episodes")
# memory: a batch no machine holds is one line too (cli.run), not numpy's or torch's traceback
for _script in ("train_bc.py", "train_dwbc.py", "train_oril.py"):
    case("args", f"{_script[:-3]}-batch-size-beyond-memory", _script,
         lambda inp, t, s=_script: bc_argv(inp, t, "--batch-size", 10**12, script=s), ["out of memory", "--batch-size"])
case("args", "collect_data-env-type", "collect_data.py", lambda inp, t: ["--out", J(t, "x.npz"), "--toy.n-classes", "two"],
     ["--toy.n-classes", "two"])
case("args", "fast_train_dwbc-seeds-without-{seed}", "fast/train_dwbc.py",
     lambda inp, t: bc_argv(inp, t, "--seeds", 0, 1, "--final-eval", J(t, "r_{split}.json")), "--out-dir")
case("args", "train_bc-final-eval-without-{split}", "train_bc.py",
     lambda inp, t: bc_argv(inp, t, "--final-eval", J(t, "r.json")), "--final-eval")
case("args", "evaluate-split=bogus", "evaluate.py",
     lambda inp, t: ["--policy", inp.policy, "--split", "bogus", "--out", J(t, "r.json")], "--split bogus")
case("args", "evaluate-split=A-on-toy", "evaluate.py",
     lambda inp, t: ["--policy", inp.policy, "--split", "A", "--out", J(t, "r.json")], "--split A")
case("args", "evaluate-classes-outside", "evaluate.py",
     lambda inp, t: ["--policy", inp.policy, "--classes", 9, "--out", J(t, "r.json")], "--classes")
case("args", "evaluate-reference-without-dataset", "evaluate.py",
     lambda inp, t: ["--reference", "expert", "--out", J(t, "r.json")], "--env-dataset")
case("args", "evaluate-several-splits-without-{split}", "evaluate.py",
     lambda inp, t: ["--policy", inp.policy, "--split", "train", "heldout", "--out", J(t, "r.json")], "--out")
case("args", "evaluate-method-empty", "evaluate.py",
     lambda inp, t: ["--policy", inp.policy, "--method", "", "--out", J(t, "r_{split}.json")], "--method")
case("args", "evaluate-env-mismatch", "evaluate.py",
     lambda inp, t: ["--policy", inp.policy, "--env", "dmc:cartpole-swingup", "--out", J(t, "r_{split}.json")], "--env")
case("args", "runner-benchmark=bogus", "runner.py", lambda inp, t: ["--root", t, "--dry-run", "--benchmark", "bogus"], "--benchmark")
case("args", "runner-methods=bogus", "runner.py", lambda inp, t: ["--root", t, "--dry-run", "--methods", "magic"], "magic")
case("args", "runner-collect-flags-unbalanced", "runner.py",
     lambda inp, t: ["--root", t, "--dry-run", "--collect-flags", '"--toy.n-classes 2'], "--collect-flags")
case("args", "train_oril-total-steps=2", "train_oril.py", lambda inp, t: bc_argv(inp, t, "--total-steps", 2), "--total-steps")
case("args", "train_ilid-total-steps=2", "train_ilid.py", lambda inp, t: bc_argv(inp, t, "--total-steps", 2), "--total-steps")

# -- datasets: broken metadata, arrays, files ---------------------------------------------------------------------------
ALL_STAGES = TRAINER_SCRIPTS + ("train_ivae.py", "augment.py", "evaluate.py")
ISSUE_DATA = {"equal_bounds.npz": "action_high", "obs_dim_null.npz": "obs_dim", "env_id_bogus.npz": "mujoco:hopper",
              "obs_1e30.npz": "1e+30"}  # the issue's examples: through every stage that reads a dataset
for _name, _word in ISSUE_DATA.items():
    for _script in ALL_STAGES:
        case("data", f"{_name[:-4]}-{_script[:-3]}", _script,
             lambda inp, t, n=_name, s=_script: stage_argv(s, inp, t, inp(n)), lambda inp, t, n=_name, w=_word: [n, w])

OTHER_DATA = {  # each through one stage, the stages taken in turn
    "inverted_bounds.npz": "action_high", "bounds_short.npz": "action_low", "bounds_text.npz": "action_high",
    "bounds_infinite.npz": "action_high", "bounds_huge.npz": "action_low", "obs_dim_text.npz": "obs_dim",
    "obs_dim_float.npz": "obs_dim", "act_dim_bool.npz": "act_dim", "n_classes_zero.npz": "n_classes",
    "u_dim_negative.npz": "u_dim", "schema_bool.npz": "schema_version", "schema_2.npz": "schema_version",
    "env_id_number.npz": "env_id", "env_id_toy_task.npz": "toy:maze", "env_id_dmc_unknown.npz": "dmc:nosuch-task",
    "env_id_cw_unknown.npz": "cw:juggling", "toy_episode_len_0.npz": "episode_len", "toy_box_negative.npz": "box",
    "toy_config_unknown.npz": "env_config", "toy_env_classes_small.npz": "env_n_classes",
    "heldout_out_of_range.npz": "heldout_classes", "aux_meaning_list.npz": "aux_meaning",
    "collect_args_list.npz": "collect_args", "seed_text.npz": "seed", "versions_missing.npz": "versions",
    "u_dim_missing.npz": "u_dim", "metadata_list.npz": "JSON object", "metadata_2d.npz": "0-d string",
    "metadata_bytes.npz": "0-d string", "metadata_deep.npz": "metadata", "next_obs_1e12.npz": "next_observations",
    "rewards_1e20.npz": "rewards", "actions_nan.npz": "NaN", "obs_inf.npz": "NaN or inf", "obs_1d.npz": "(N, obs_dim)",
    "obs_complex.npz": "dtype", "aux_negative.npz": "aux", "zero_rows.npz": "no transitions",
    "object_member.npz": "Python objects", "member_bomb.npz": "'rewards'", "consistent_bomb.npz": "zip bomb",
    "truncated.npz": "not a readable", "garbage.npz": "not a readable", "empty.npz": "not a readable",
    "folder.npz": "folder", "missing.npz": "file not found",
}
_ROTATION = ALL_STAGES
for _i, (_name, _word) in enumerate(OTHER_DATA.items()):
    _script = _ROTATION[_i % len(_ROTATION)]
    case("data", f"{_name[:-4]}-{_script[:-3]}", _script,
         lambda inp, t, n=_name, s=_script: stage_argv(s, inp, t, J(inp.folder, n) if n == "missing.npz" else inp(n)),
         lambda inp, t, n=_name, w=_word: [n, w])
case("data", "collect-over-truncated-output", "collect_data.py",
     lambda inp, t: stage_argv("collect_data.py", inp, t, inp("truncated.npz")), ["truncated.npz", "not a readable"])
case("data", "collect-over-equal-bounds-output", "collect_data.py",
     lambda inp, t: stage_argv("collect_data.py", inp, t, inp("equal_bounds.npz")), ["equal_bounds.npz", "action_high"])

# -- checkpoints: the iVAE for augment.py, policies for evaluate.py and augment.py --sampler -----------------------------
IVAE_CASES = {"ivae_truncated.pt": "not a readable checkpoint", "ivae_is_policy.pt": "expected a 'ivae' checkpoint",
              "ivae_config_missing.pt": "do not fit", "ivae_config_text.pt": "config", "ivae_nan.pt": "NaN",
              "ivae_wrong_shapes.pt": "do not fit", "ivae_other_data.pt": "another dataset",
              "ivae_pickle.pt": "Python objects", "policy_folder.pt": "folder", "missing.pt": "file not found"}
for _name, _word in IVAE_CASES.items():
    case("ckpt", f"augment-ivae-{_name[:-3]}", "augment.py",
         lambda inp, t, n=_name: stage_argv("augment.py", inp, t, inp.data)[:2] + [
             "--ivae", J(inp.folder, n) if n == "missing.pt" else inp(n)] + stage_argv("augment.py", inp, t, inp.data)[4:],
         lambda inp, t, n=_name, w=_word: [n, w])
POLICY_CASES = {"policy_truncated.pt": "not a readable checkpoint", "policy_empty.pt": "not a readable checkpoint",
                "policy_folder.pt": "folder", "policy_pickle.pt": "Python objects",
                "policy_is_ivae.pt": "expected a 'policy' checkpoint", "policy_layer_short.pt": "linear:2",
                "policy_layer_unknown.pt": "gelu", "policy_layer_chain.pt": "linear:3:8",
                "policy_layers_text.pt": "layers", "policy_layers_empty.pt": "layers",
                "policy_state_shape.pt": "state_dict", "policy_state_missing.pt": "state_dict",
                "policy_nan.pt": "NaN", "policy_std_zero.pt": "obs_std", "policy_equal_bounds.pt": "action_high",
                "policy_mean_short.pt": "obs_mean", "policy_method_number.pt": "method", "policy_no_kind.pt": "checkpoint",
                "policy_sac_dmc.pt": "--env-dataset", "policy_sac_toy.pt": "env_config", "missing.pt": "file not found"}
for _name, _word in POLICY_CASES.items():
    case("ckpt", f"evaluate-{_name[:-3]}", "evaluate.py",
         lambda inp, t, n=_name: ["--policy", J(inp.folder, n) if n == "missing.pt" else inp(n), "--episodes", 2,
                                  "--out", J(t, "r_{split}.json")], lambda inp, t, n=_name, w=_word: [n, w])
for _name, _word in {"policy_nan.pt": "NaN", "policy_other_data.pt": "another dataset", "policy_layer_chain.pt": "linear:3:8",
                     "policy_truncated.pt": "not a readable"}.items():
    case("ckpt", f"augment-sampler-{_name[:-3]}", "augment.py",
         lambda inp, t, n=_name: stage_argv("augment.py", inp, t, inp.data) + ["--sampler", inp(n)],
         lambda inp, t, n=_name, w=_word: [n, w])
case("ckpt", "evaluate-policy-dims-vs-env-dataset", "evaluate.py",
     lambda inp, t: ["--policy", inp("policy_3d.pt"), "--env-dataset", inp.data, "--out", J(t, "r_{split}.json")],
     ["policy_3d.pt", "obs_dim"])

# -- output paths: an output that is an input, another output, a folder, or cannot be created ----------------------------
def out_case(name, script, argv, words):
    case("paths", name, script, argv, words)


out_case("augment-out=dataset", "augment.py",
         lambda inp, t: ["--dataset", inp.data, "--ivae", inp.ivae, "--out", inp.data, "--sampler-out", J(t, "s.pt")], "--out")
out_case("augment-sampler-out=dataset", "augment.py",
         lambda inp, t: ["--dataset", inp.data, "--ivae", inp.ivae, "--out", J(t, "a.npz"), "--sampler-out", inp.data], "--sampler-out")
out_case("augment-out=ivae", "augment.py",
         lambda inp, t: ["--dataset", inp.data, "--ivae", inp.ivae, "--out", inp.ivae, "--sampler-out", J(t, "s.pt")], "--out")
out_case("augment-out=sampler-out", "augment.py",
         lambda inp, t: ["--dataset", inp.data, "--ivae", inp.ivae, "--out", J(t, "a.npz"), "--sampler-out", J(t, "a.npz")], "--sampler-out")
out_case("augment-out=dataset-via-dotdot", "augment.py",
         lambda inp, t: ["--dataset", inp.data, "--ivae", inp.ivae, "--out", J(inp.folder, "bc", "..", "toy.npz"),
                         "--sampler-out", J(t, "s.pt")], "--out")
out_case("augment-out=dataset-via-symlink", "augment.py",
         lambda inp, t: (os.symlink(inp.data, J(t, "link.npz")), ["--dataset", inp.data, "--ivae", inp.ivae, "--out",
                         J(t, "link.npz"), "--sampler-out", J(t, "s.pt")])[1], "--out")
out_case("augment-out-is-folder", "augment.py",
         lambda inp, t: ["--dataset", inp.data, "--ivae", inp.ivae, "--out", t, "--sampler-out", J(t, "s.pt")], "--out")
out_case("augment-out-under-a-file", "augment.py",
         lambda inp, t: ["--dataset", inp.data, "--ivae", inp.ivae, "--out", J(inp("plain_file"), "a.npz"),
                         "--sampler-out", J(t, "s.pt")], "--out")
out_case("augment-sampler-out-under-a-file", "augment.py",
         lambda inp, t: ["--dataset", inp.data, "--ivae", inp.ivae, "--out", J(t, "a.npz"),
                         "--sampler-out", J(inp("plain_file"), "x", "policy.pt")], "--sampler-out")
out_case("evaluate-out=policy", "evaluate.py", lambda inp, t: ["--policy", inp.policy, "--split", "train", "--out", inp.policy], "--out")
out_case("evaluate-out=env-dataset", "evaluate.py",
         lambda inp, t: ["--policy", inp.policy, "--env-dataset", inp.data, "--split", "train", "--out", inp.data], "--out")
out_case("evaluate-out-is-folder", "evaluate.py", lambda inp, t: ["--policy", inp.policy, "--split", "train", "--out", t], "--out")
out_case("evaluate-reference-out=dataset", "evaluate.py",
         lambda inp, t: ["--reference", "random", "--env-dataset", inp.data, "--split", "train", "--out", inp.data], "--out")
out_case("collect-out-is-folder", "collect_data.py", lambda inp, t: ["--out", t], "--out")
out_case("collect-out-under-a-file", "collect_data.py", lambda inp, t: ["--out", J(inp("plain_file"), "d.npz")], "--out")
out_case("ivae-out-dir-holds-dataset", "train_ivae.py",
         lambda inp, t: (shutil.copy(inp.data, J(t, "d.npz")), stage_argv("train_ivae.py", inp, t, J(t, "d.npz"))[:2] + [
             "--out-dir", t] + stage_argv("train_ivae.py", inp, t, J(t, "d.npz"))[4:])[1], "--out-dir")
out_case("ivae-out-dir-is-a-file", "train_ivae.py",
         lambda inp, t: stage_argv("train_ivae.py", inp, t, inp.data)[:2] + ["--out-dir", inp("plain_file")]
         + stage_argv("train_ivae.py", inp, t, inp.data)[4:], "--out-dir")
out_case("ivae-out-dir-foreign-files", "train_ivae.py",
         lambda inp, t: (open(J(t, "notes.txt"), "w").close(), stage_argv("train_ivae.py", inp, t, inp.data)[:2] + [
             "--out-dir", t] + stage_argv("train_ivae.py", inp, t, inp.data)[4:])[1], "notes.txt")
def doc_is_table(inp, t):
    res = J(t, "res")
    shutil.copytree(inp.results, res)
    with open(J(res, "table.md"), "w") as f:
        f.write(f"<!-- report: {res} -->\n<!-- /report -->\n")
    return ["--results", res, "--doc", J(res, "table.md")]


out_case("report-doc=table", "report.py", doc_is_table, "--doc")
out_case("report-table-is-folder", "report.py", lambda inp, t: ["--results", inp("res_table_folder")], "table.md")
out_case("toy_env-plot-under-a-file", "envs/toy.py", lambda inp, t: ["--plot-path", J(inp("plain_file"), "p.png")], "--plot-path")
for _script in TRAINER_SCRIPTS:
    _s = _script[:-3]
    out_case(f"{_s}-out-dir-holds-dataset", _script,
             lambda inp, t, s=_script: (shutil.copy(inp.data, J(t, "d.npz")),
                                        bc_argv(inp, t, "--out-dir", t, dataset=J(t, "d.npz")))[1], "--out-dir")
    out_case(f"{_s}-out-dir=dataset", _script, lambda inp, t: bc_argv(inp, t, "--out-dir", inp.data), "--out-dir")
    out_case(f"{_s}-final-eval=dataset", _script,
             lambda inp, t: (shutil.copy(inp.data, J(t, "train.npz")),
                             bc_argv(inp, t, "--final-eval", J(t, "{split}.npz"), dataset=J(t, "train.npz")))[1], "--final-eval")
    out_case(f"{_s}-out-dir-under-a-file", _script, lambda inp, t: bc_argv(inp, t, "--out-dir", J(inp("plain_file"), "run")), "--out-dir")

# -- result files for report.py -----------------------------------------------------------------------------------------
REPORT_CASES = {"res_nan_returns": "NaN", "res_inf_returns": "Infinity", "res_nan_mean": "NaN",
                "res_mean_text": "mean_return", "res_success_nan": "NaN", "res_ratio_inf": "Infinity",
                "res_returns_empty": "returns", "res_returns_bool": "returns", "res_seed_float": "seed",
                "res_method_empty": "method", "res_no_split": "split", "res_not_json": "not valid JSON",
                "res_empty": "no result JSON", "res_env_number": "'env' must be", "missing_results": "no such folder"}
for _name, _word in REPORT_CASES.items():
    case("results", f"report-{_name}", "report.py",
         lambda inp, t, n=_name: ["--results", J(inp.folder, n) if n == "missing_results" else inp(n)],
         lambda inp, t, n=_name, w=_word: [n, w])
case("results", "report-doc-without-markers", "report.py",
     lambda inp, t: (shutil.copy(inp("doc_no_markers.md"), J(t, "d.md")), ["--results", inp.results, "--doc", J(t, "d.md")])[1],
     ["d.md", "markers"])
case("results", "report-doc-missing", "report.py", lambda inp, t: ["--results", inp.results, "--doc", J(t, "none.md")], "none.md")

# -- training that diverges: stopped at the first logged non-finite loss, nothing written --------------------------------
for _script, _flags in (("train_bc.py", ["--lr", "1e30", "--eval-every", "10", "--total-steps", "20"]),
                        ("train_dwbc.py", ["--actor-lr", "1e30", "--disc-lr", "1e30", "--eval-every", "10", "--total-steps", "20"]),
                        ("train_ilid.py", ["--d-lr", "1e30", "--total-steps", "5"]),
                        ("train_iswbc.py", ["--actor-lr", "1e30", "--disc-lr", "1e30", "--total-steps", "5"])):
    case("diverged", _script[:-3], _script, lambda inp, t, s=_script, f=_flags: bc_argv(inp, t, *f), "diverged")
case("diverged", "train_ivae", "train_ivae.py",
     lambda inp, t: stage_argv("train_ivae.py", inp, t, inp.data, "--lr", "1e30", "--total-steps", 20, "--log-every", 10),
     "diverged")
case("diverged", "fast_train_bc-seeds", "fast/train_bc.py",
     lambda inp, t: ["--dataset", inp.data, "--out-dir", J(t, "r{seed}"), "--seeds", 0, 1, "--lr", "1e30", "--total-steps", 20,
                     "--eval-every", 10, "--eval-episodes", 0, "--hidden", 8, "--threads", 1], "diverged")


# ------------------------------------------------------------------------------------------------------ the test
@pytest.mark.parametrize("case", [pytest.param(c, id=c.id) for c in CASES])
def test_refused(case, inputs, tmp_path, capsys, monkeypatch):
    t = str(tmp_path / "case")
    os.makedirs(t)
    monkeypatch.chdir(t)  # relative default paths land here, where the snapshot sees them
    argv = case.argv(inputs, t)
    words = case.words(inputs, t)
    watched = (t, inputs.folder)
    repo = [os.path.join(ROOT, d) for d in ("data", "runs", "results")]
    before, before_repo = snapshot(*watched), snapshot(*repo, deep=False)
    code, _, err = run_main(case.script, argv, capsys)
    assert_refused(code, err, words)
    assert snapshot(*watched) == before, "files were written, changed or removed"
    assert snapshot(*repo, deep=False) == before_repo, "the repo's data/, runs/ or results/ changed"


def corpus_counts() -> Dict[str, int]:
    """Cases per category."""
    return dict(collections.Counter(c.id.split("-")[0] for c in CASES))


def test_corpus_size():
    counts = corpus_counts()
    assert len({c.id for c in CASES}) == len(CASES), "case ids must be unique"
    assert len(CASES) >= 120 and sum(counts.values()) == len(CASES)


if __name__ == "__main__":
    for k, v in corpus_counts().items():
        print(f"{k:<24}{v:>5}")
    print(f"{'total':<24}{len(CASES):>5}")
