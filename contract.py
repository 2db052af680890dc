"""The data contract: the one place that writes, reads and validates datasets (`.npz`) and checkpoints.

Every stage loads its inputs through `load_dataset` so a bad file stops the run with a one-line error that
names the file and the problem (missing key, wrong shape or dtype, NaN, a transition across an episode
boundary, dims that disagree with the metadata). Every write goes to a temporary file in the target folder
that is then renamed over the destination, so a crash never leaves a half-written file behind.

The schema is documented for humans in docs/contract.md; `DATASET_KEYS` below is the machine-readable copy.
"""

import hashlib
import io
import json
import os
import tempfile
import zipfile
from typing import Any, Dict

import numpy as np

SCHEMA_VERSION = 1

# key -> (kind, shape); shape entries: "N" rows, "obs"/"act"/"u" dims from metadata
DATASET_KEYS = {
    "observations": ("float", ("N", "obs")),
    "actions": ("float", ("N", "act")),
    "next_observations": ("float", ("N", "obs")),
    "rewards": ("float", ("N",)),
    "terminals": ("bool", ("N",)),
    "timeouts": ("bool", ("N",)),
    "episode_ids": ("int", ("N",)),
    "aux": ("int", ("N",)),
    "expert": ("bool", ("N",)),
    "episode_returns": ("float", ("N",)),
}
OPTIONAL_KEYS = {
    "exogenous": ("float", ("N", "u")),
    "policy_ids": ("int", ("N",)),
    "augmented": ("bool", ("N",)),
    "aug_source": ("int", ("N",)),
    "aug_partner": ("int", ("N",)),
}
METADATA_FIELDS = ("schema_version", "env_id", "obs_dim", "act_dim", "action_low", "action_high",
                   "n_classes", "aux_meaning", "collect_args", "seed", "versions")
_KINDS = {"float": np.floating, "bool": np.bool_, "int": np.integer}


class ContractError(ValueError):
    """A file breaks the data contract; the message is one line that names the file and the problem."""


# ------------------------------------------------------------------------------------------ atomic writes
def _atomic_write(path: str, write_fn) -> None:
    """Call write_fn(file_object) on a temp file beside `path`, fsync, then rename it over `path`."""
    folder = os.path.dirname(os.path.abspath(path))
    os.makedirs(folder, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=folder, prefix="." + os.path.basename(path) + ".", suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            write_fn(f)
            f.flush()
            os.fsync(f.fileno())
        umask = os.umask(0)
        os.umask(umask)
        os.chmod(tmp, 0o666 & ~umask)  # mkstemp creates 0600; give the file the usual permissions
        os.replace(tmp, path)
    except BaseException:
        if os.path.exists(tmp):
            os.remove(tmp)
        raise


def save_npz(path: str, arrays: Dict[str, Any]) -> None:
    """Atomic, byte-reproducible `.npz` (fixed zip timestamps, sorted keys, deflate compression)."""

    def write(f):
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for key in sorted(arrays):
                buf = io.BytesIO()
                np.lib.format.write_array(buf, np.asanyarray(arrays[key]), allow_pickle=False)
                info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
                info.compress_type = zipfile.ZIP_DEFLATED
                info.external_attr = 0o644 << 16
                zf.writestr(info, buf.getvalue())

    _atomic_write(path, write)


def save_text(path: str, text: str) -> None:
    _atomic_write(path, lambda f: f.write(text.encode()))


def save_json(path: str, obj: Any) -> None:
    save_text(path, json.dumps(obj, indent=2, sort_keys=True) + "\n")


def save_csv(path: str, rows: list) -> None:
    """Rows (dicts with the same keys) as CSV."""
    import csv

    buf = io.StringIO()
    if rows:
        writer = csv.DictWriter(buf, fieldnames=list(rows[0]))
        writer.writeheader()
        writer.writerows(rows)
    save_text(path, buf.getvalue())


def save_torch(path: str, obj: Any) -> None:
    import torch

    _atomic_write(path, lambda f: torch.save(obj, f))


def save_figure(path: str, fig) -> None:
    ext = os.path.splitext(path)[1].lstrip(".") or "png"
    _atomic_write(path, lambda f: fig.savefig(f, format=ext, dpi=110, bbox_inches="tight"))


def package_versions() -> Dict[str, str]:
    """Versions of the packages that shape a dataset, recorded in its metadata."""
    import platform

    out = {"python": platform.python_version(), "numpy": np.__version__}
    for name in ("torch", "dm_control", "mujoco", "causal_world", "pybullet"):
        try:
            mod = __import__(name)
            out[name] = getattr(mod, "__version__", "unknown")
        except Exception:  # not installed, or fails to import: recorded as absent
            continue
    return out


# ------------------------------------------------------------------------------------------ loading
def _fail(path: str, msg: str):
    raise ContractError(f"{path}: {msg}")


def _read_npz(path: str) -> Dict[str, np.ndarray]:
    if not os.path.exists(path):
        _fail(path, "file not found")
    try:
        with np.load(path, allow_pickle=False) as z:
            return {k: z[k] for k in z.files}
    except Exception as e:  # zipfile.BadZipFile, EOFError, CRC errors, pickled objects, …
        _fail(path, f"not a readable .npz file (truncated or corrupted?): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def _parse_metadata(path: str, raw: Dict[str, np.ndarray]) -> Dict[str, Any]:
    if "metadata" not in raw:
        _fail(path, "missing required key 'metadata' (a JSON string, see docs/contract.md)")
    try:
        meta = json.loads(str(raw["metadata"]))
    except (json.JSONDecodeError, TypeError) as e:
        _fail(path, f"'metadata' is not valid JSON ({e})")
    if not isinstance(meta, dict):
        _fail(path, "'metadata' must be a JSON object")
    for field in METADATA_FIELDS:
        if field not in meta:
            _fail(path, f"metadata is missing field '{field}'")
    if meta["schema_version"] != SCHEMA_VERSION:
        _fail(path, f"schema_version {meta['schema_version']} is not the supported {SCHEMA_VERSION}")
    return meta


def _check_array(path, key, arr, kind, shape, dims) -> np.ndarray:
    if not np.issubdtype(arr.dtype, _KINDS[kind]):
        _fail(path, f"'{key}' has dtype {arr.dtype}, expected {kind}")
    expected = tuple(dims[d] if isinstance(d, str) else d for d in shape)
    if arr.shape != expected:
        names = "[" + ", ".join(f"{d}={dims[d]}" for d in shape) + "]"
        _fail(path, f"'{key}' has shape {arr.shape}, expected {expected} {names}")
    if kind == "float":
        arr = arr.astype(np.float32)
        bad = ~np.isfinite(arr)
        if bad.any():
            row = int(np.argwhere(bad)[0][0])
            _fail(path, f"'{key}' contains NaN or inf (first at row {row})")
    elif kind == "int":
        arr = arr.astype(np.int64)
    return arr


def validate_dataset(path: str, raw: Dict[str, np.ndarray]) -> Dict[str, Any]:
    """Check arrays against the contract; return {key: array (float32/int64/bool)} plus 'metadata': dict."""
    meta = _parse_metadata(path, raw)
    for key in DATASET_KEYS:
        if key not in raw:
            _fail(path, f"missing required key '{key}' (see docs/contract.md)")
    if raw["observations"].ndim != 2:
        _fail(path, f"'observations' has shape {raw['observations'].shape}, expected (N, obs_dim)")
    dims = {"N": raw["observations"].shape[0], "obs": int(meta["obs_dim"]), "act": int(meta["act_dim"]),
            "u": int(meta.get("u_dim", 0))}
    if dims["N"] == 0:
        _fail(path, "dataset has no transitions")
    data: Dict[str, Any] = {}
    for key, (kind, shape) in {**DATASET_KEYS, **OPTIONAL_KEYS}.items():
        if key in raw:
            if key == "exogenous" and "u_dim" not in meta:
                _fail(path, "'exogenous' is present but metadata has no 'u_dim'")
            data[key] = _check_array(path, key, raw[key], kind, shape, dims)
    aux = data["aux"]
    if aux.min() < 0 or aux.max() >= int(meta["n_classes"]):
        _fail(path, f"'aux' values must lie in [0, {meta['n_classes']}) (n_classes in metadata), found [{aux.min()}, {aux.max()}]")
    lo, hi = np.asarray(meta["action_low"], np.float32), np.asarray(meta["action_high"], np.float32)
    if lo.shape != (dims["act"],) or hi.shape != (dims["act"],):
        _fail(path, f"metadata action_low/action_high must have act_dim={dims['act']} entries")
    out = np.argwhere((data["actions"] < lo - 1e-5) | (data["actions"] > hi + 1e-5))
    if len(out):
        _fail(path, f"'actions' row {out[0][0]} lies outside the action bounds in metadata")
    _check_episodes(path, data, per_row_aux=bool(meta.get("aux_per_row")))
    data["metadata"] = meta
    return data


def _check_episodes(path: str, data: Dict[str, Any], per_row_aux: bool = False) -> None:
    """Episode structure of the collected (non-augmented) rows: contiguous episodes, one end flag at each
    episode's last row and nowhere else, s'_t == s_{t+1} inside an episode, per-episode constants (c too, unless
    the metadata says `aux_per_row`: a label of each transition, e.g. minari_import.py's KMeans clusters of s′)."""
    keep = ~data["augmented"] if "augmented" in data else np.ones(len(data["rewards"]), bool)
    if not keep.any():
        return
    ep = data["episode_ids"][keep]
    starts = np.flatnonzero(np.r_[True, ep[1:] != ep[:-1]])
    if len(np.unique(ep)) != len(starts):
        _fail(path, "'episode_ids' rows of one episode are not contiguous")
    ends = np.r_[starts[1:] - 1, len(ep) - 1]
    done = (data["terminals"] | data["timeouts"])[keep]
    if (data["terminals"] & data["timeouts"])[keep].any():
        _fail(path, "a row is flagged both terminal and timeout")
    is_end = np.zeros(len(ep), bool)
    is_end[ends] = True
    if (done != is_end).any():
        row = int(np.flatnonzero(done != is_end)[0])
        _fail(path, f"row {row} of the collected data: terminals|timeouts must be set exactly at each episode's last row")
    obs, nxt = data["observations"][keep], data["next_observations"][keep]
    inner = ~is_end[:-1]
    mismatch = np.flatnonzero(inner & np.any(nxt[:-1] != obs[1:], axis=1))
    if len(mismatch):
        _fail(path, f"next_observations[{mismatch[0]}] != observations[{mismatch[0] + 1}] inside an episode (broken or shuffled transitions)")
    rewards = data["rewards"][keep]
    for key in ("expert", "episode_returns") + (() if per_row_aux else ("aux",)):
        col = data[key][keep]
        if (col[1:] != col[:-1])[inner].any():
            _fail(path, f"'{key}' changes inside an episode")
    sums = np.add.reduceat(rewards.astype(np.float64), starts)
    rets = data["episode_returns"][keep][starts]
    bad = np.flatnonzero(~np.isclose(sums, rets, rtol=1e-4, atol=1e-3))
    if len(bad):
        _fail(path, f"'episode_returns' of episode {ep[starts[bad[0]]]} ({rets[bad[0]]:.4f}) is not the sum of its rewards ({sums[bad[0]]:.4f}): truncated episode?")


def load_dataset(path: str) -> Dict[str, Any]:
    """Read and validate a dataset `.npz`; raises ContractError with a one-line message on any problem."""
    return validate_dataset(path, _read_npz(path))


def load_dataset_raw(path: str):
    """(the arrays exactly as stored, in their own dtypes, with 'metadata' the JSON string; the validated dataset as
    load_dataset returns it): for a lossless copy of a file into another format (minari_export.py)."""
    raw = _read_npz(path)
    return raw, validate_dataset(path, raw)


def fingerprint(data: Dict[str, Any]) -> str:
    """Content hash of the collected transitions (s, a, s', c): ties a model to the dataset it was fit on."""
    h = hashlib.sha256()
    keep = ~data["augmented"] if "augmented" in data else np.ones(len(data["rewards"]), bool)
    for key in ("observations", "actions", "next_observations", "aux"):
        h.update(np.ascontiguousarray(data[key][keep]).tobytes())
    return h.hexdigest()[:16]


def dataset_arrays_from_meta(meta: Dict[str, Any]) -> np.ndarray:
    """The metadata dict as the 0-d string array stored under 'metadata'."""
    return np.array(json.dumps(meta, sort_keys=True))


def describe(data: Dict[str, Any]) -> str:
    """Short human summary of a loaded dataset."""
    ep = data["episode_ids"]
    n_ep = len(np.unique(ep))
    n_exp = len(np.unique(ep[data["expert"]]))
    return (f"{len(ep)} transitions, {n_ep} episodes ({n_exp} in D_E), obs_dim={data['metadata']['obs_dim']}, "
            f"act_dim={data['metadata']['act_dim']}, classes={sorted(np.unique(data['aux']).tolist())}")


# ------------------------------------------------------------------------------------------ checkpoints
def load_checkpoint(path: str, kind: str, required=("config", "state_dict")) -> Dict[str, Any]:
    """Load a torch checkpoint written by save_torch (tensors and primitives only) and check its kind/keys."""
    import torch

    if not os.path.exists(path):
        _fail(path, "file not found")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        _fail(path, f"not a readable checkpoint (truncated or corrupted?): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    if not isinstance(ckpt, dict) or ckpt.get("kind") != kind:
        found = ckpt.get("kind") if isinstance(ckpt, dict) else type(ckpt).__name__
        _fail(path, f"expected a '{kind}' checkpoint, found '{found}'")
    for key in required:
        if key not in ckpt:
            _fail(path, f"checkpoint is missing '{key}'")
    return ckpt


# ------------------------------------------------------------------------------------------ policy artifact
# A policy is saved as a plain MLP (the deterministic mean head) plus the observation normalisation and the
# action bounds, so evaluate.py runs it without importing the script that trained it:
#     action = low + (tanh(net((obs - obs_mean) / obs_std)) + 1) / 2 * (high - low)
POLICY_LAYERS = ("linear", "relu", "tanh")


def policy_artifact(net, obs_mean, obs_std, action_low, action_high, **info) -> Dict[str, Any]:
    """The artifact dict of `net` (an nn.Sequential of Linear/ReLU/Tanh modules: the policy's mean head).
    `info` adds method, seed, env (the dataset's env description), dataset_fingerprint, train_args, …"""
    import torch.nn as nn

    layers = []
    for m in net:
        if isinstance(m, nn.Linear):
            layers.append(f"linear:{m.in_features}:{m.out_features}")
        elif isinstance(m, (nn.ReLU, nn.Tanh)):
            layers.append(type(m).__name__.lower())
        else:
            raise ValueError(f"policy artifact supports Linear, ReLU and Tanh layers, not {type(m).__name__}")
    linear = [l for l in layers if l.startswith("linear")]
    return {"kind": "policy",
            "config": {"obs_dim": int(linear[0].split(":")[1]), "act_dim": int(linear[-1].split(":")[2]), "layers": layers},
            "state_dict": {k: v.detach().cpu().clone() for k, v in net.state_dict().items()},
            "obs_mean": np.asarray(obs_mean, np.float32).tolist(), "obs_std": np.asarray(obs_std, np.float32).tolist(),
            "action_low": np.asarray(action_low, np.float32).tolist(), "action_high": np.asarray(action_high, np.float32).tolist(),
            **info}


POLICY_INFO = ("method", "seed", "env", "dataset_fingerprint")


def save_policy(path: str, artifact: Dict[str, Any]) -> None:
    """Save a policy artifact (see policy_artifact); it must name its method, seed, env and dataset."""
    for key in POLICY_INFO:
        if key not in artifact:
            raise ValueError(f"policy artifact needs '{key}'")
    save_torch(path, artifact)


def load_policy(path: str) -> Dict[str, Any]:
    """Load and check a policy artifact; returns the dict (see save_policy)."""
    art = load_checkpoint(path, "policy", required=("config", "state_dict", "obs_mean", "obs_std", "action_low",
                                                     "action_high") + POLICY_INFO)
    cfg = art["config"]
    for key, n in (("obs_mean", cfg["obs_dim"]), ("obs_std", cfg["obs_dim"]), ("action_low", cfg["act_dim"]), ("action_high", cfg["act_dim"])):
        if len(art[key]) != n:
            _fail(path, f"policy '{key}' has {len(art[key])} entries, expected {n}")
    for layer in cfg["layers"]:
        if layer.split(":")[0] not in POLICY_LAYERS:
            _fail(path, f"unknown policy layer '{layer}'")
    return art


def load_snapshot(path: str, obs_dim: int, act_dim: int, env_id: str) -> Dict[str, Any]:
    """A behaviour policy for collection: the policy artifact at `path`, checked against the env it will drive
    (its dims, and the env it was trained on where recorded). Each problem is a one-line ValueError."""
    if not os.path.exists(path):
        raise ValueError(f"behaviour snapshot {path} does not exist (train one with train_behavior.py --env {env_id})")
    art = load_policy(path)
    dims = (art["config"]["obs_dim"], art["config"]["act_dim"])
    if dims != (obs_dim, act_dim):
        raise ValueError(f"{path}: snapshot has obs_dim, act_dim = {dims} but {env_id} has {(obs_dim, act_dim)}")
    env_of = (art.get("env") or {}).get("env_id")
    if env_of not in (None, env_id):
        raise ValueError(f"{path}: snapshot was trained on {env_of}, not {env_id}")
    return art


def build_policy(art: Dict[str, Any]):
    """The deterministic policy of an artifact as a numpy function obs [B, obs_dim] -> action [B, act_dim]."""
    import torch
    import torch.nn as nn

    modules = []
    for layer in art["config"]["layers"]:
        name, *sizes = layer.split(":")
        modules.append(nn.Linear(int(sizes[0]), int(sizes[1])) if name == "linear" else {"relu": nn.ReLU, "tanh": nn.Tanh}[name]())
    net = nn.Sequential(*modules)
    net.load_state_dict(art["state_dict"])
    net.eval()
    mean, std = (torch.tensor(art[k], dtype=torch.float32) for k in ("obs_mean", "obs_std"))
    low, high = np.asarray(art["action_low"], np.float32), np.asarray(art["action_high"], np.float32)

    @torch.no_grad()
    def act(obs: np.ndarray) -> np.ndarray:
        x = (torch.as_tensor(np.asarray(obs, np.float32)) - mean) / std
        return low + (np.tanh(net(x).numpy()) + 1) / 2 * (high - low)

    return act


def require_expert(data: Dict[str, Any], path: str) -> None:
    """Methods that learn from D_E need at least one expert row."""
    if not data["expert"].any():
        _fail(path, "D_E is empty (no row has expert=True): the method needs expert demonstrations")
