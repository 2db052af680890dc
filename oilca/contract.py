"""The data contract: the one place that writes, reads and validates datasets (`.npz`) and checkpoints.

Every stage loads its inputs through `load_dataset` so a bad file stops the run with a one-line error that
names the file and the problem (missing key, wrong shape or dtype, NaN, a transition across an episode
boundary, dims that disagree with the metadata). The loader reads the array headers of the `.npz` before any
data, so a file whose members disagree with the schema is refused without inflating it.

Writes (docs/contract.md, "Errors and guarantees"):
* every file is written to a temporary file in the target folder (its name carries the writer's pid) that is then
  renamed over the destination, so a crash never leaves a half-written file; the next write to the same target
  removes the temporary files of writers that are gone;
* `check_paths` refuses an output that resolves to an input (or to another output) and one that cannot be written;
* `claim(path)` locks an output for the running stage (a second writer is refused with one line), and
  `RunFolder(out_dir)` stages a trainer's results in a temporary sibling that replaces `out_dir` in one rename when
  the run completes, so a folder never mixes the results of two runs;
* `together()` stages the writes of a block: a stage with several outputs writes each in full to its temporary file
  and renames them all into place only when the block ends without error (a full disk on the last figure leaves
  the previous table, summary and figures as they were);
* `all_or_nothing`, the decorator of a stage's `main`, releases the claims and undoes the unfinished run folders
  of a run that fails, and turns SIGTERM into KeyboardInterrupt (as SIGINT) while it runs, so both clean up.

The schema is documented for humans in docs/contract.md; `DATASET_KEYS` below is the machine-readable copy.
"""

import contextlib
import fnmatch
import functools
import hashlib
import io
import json
import math
import os
import pickle
import re
import secrets
import shutil
import signal
import threading
import time
import zipfile
import zlib
from typing import Any, Callable, Dict, Optional

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
# metadata that is not the env (minari_import.py adds its source datasets and KMeans centres)
DATASET_ONLY = ("schema_version", "collect_args", "seed", "versions", "split", "sources", "kmeans")
MAX_ABS = 1e9  # every float value of a dataset lies within ±MAX_ABS, so float32 mean/std stay finite
MAX_METADATA_BYTES = 1 << 24  # the metadata JSON string
MAX_INFLATION = 100  # declared (uncompressed) size / compressed size of a dataset's arrays; real data: ~1-5
STALE_AGE_S = 3600  # a temporary file without a pid in its name (an older writer's) counts as stale after this
# what a run folder may hold: an existing --out-dir with anything else is refused instead of replaced
RUN_MARK = ".oilca-run"  # written into every run folder: a folder holding it is a run folder, whatever else it holds
RUN_FOLDER_ENTRIES = ("policy.pt", "policy_step*.pt", "args.json", "progress*.csv", "tb", "ivae.pt", "latents.npz",
                      "metrics.json", "fig3.png", "eval_*.json")


class ContractError(ValueError):
    """A file breaks the data contract; the message is one line that names the file and the problem."""


# ------------------------------------------------------------------------------------------ atomic writes
def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process
        return True
    return True


def _temp_name(path: str, suffix: str = "tmp") -> str:
    """`.<name>.<pid>.<random>.<suffix>` beside `path`: the pid tells a later writer whether its owner is alive."""
    folder, name = os.path.split(os.path.abspath(path))
    return os.path.join(folder, f".{name}.{os.getpid()}.{secrets.token_hex(4)}.{suffix}")


def clean_stale(path: str) -> list:
    """Remove the temporary files and folders left beside `path` by writers that are gone (killed mid-write):
    `.<name>.<pid>.<random>.tmp|old` whose pid is not alive, or, without a pid, older than an hour. Returns them."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        entries = os.listdir(folder)
    except OSError:
        return []
    removed = []
    for entry in entries:
        if not (entry.startswith(f".{name}.") and entry.rsplit(".", 1)[-1] in ("tmp", "old")):
            continue
        middle = entry[len(name) + 2:].rsplit(".", 1)[0]  # <pid>.<random>, or an older writer's 8 random chars
        full = os.path.join(folder, entry)
        with_pid, without = re.fullmatch(r"(\d+)\.[0-9a-f]{8}", middle), re.fullmatch(r"[a-z0-9_]{8}", middle)
        try:
            stale = (with_pid is not None and not _pid_alive(int(with_pid.group(1)))) or \
                (without is not None and time.time() - os.lstat(full).st_mtime > STALE_AGE_S)
            if stale:
                shutil.rmtree(full) if os.path.isdir(full) and not os.path.islink(full) else os.remove(full)
                removed.append(full)
        except OSError:  # gone meanwhile, or not ours to remove
            continue
    return removed


def _atomic_write(path: str, write_fn, check: Optional[Callable[[str], Any]] = None) -> None:
    """Call write_fn(file_object) on a temp file beside `path`, fsync, `check(temp path)` if given (it raises to
    refuse the file), then rename it over `path`. The temp files of dead writers to the same path are removed
    first. An OSError becomes a one-line ContractError."""
    folder = os.path.dirname(os.path.abspath(path))
    tmp = None
    try:
        os.makedirs(folder, exist_ok=True)
        clean_stale(path)
        tmp = _temp_name(path)
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666)  # the umask applies, as for open()
        with os.fdopen(fd, "wb") as f:
            write_fn(f)
            f.flush()
            os.fsync(f.fileno())
        if check is not None:
            check(tmp)
        pending = getattr(_STAGED, "writes", None)
        if pending is not None:  # inside together(): renamed when the block ends
            pending.append((tmp, path))
            return
        os.replace(tmp, path)
    except OSError as e:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
        raise ContractError(f"{path}: cannot write ({e.strerror or e})") from None
    except BaseException:
        if tmp is not None and os.path.exists(tmp):
            os.remove(tmp)
        raise


_STAGED = threading.local()  # the (temporary file, destination) pairs of the running together() block


@contextlib.contextmanager
def together():
    """Stage every write of the block (save_npz, save_json, save_text, save_figure, save_policy, ...): each file is
    written in full to its temporary name beside its destination, and all are renamed into place when the block ends
    without error. An error inside it (a full disk on the last output, a refusal, SIGINT/SIGTERM) removes every
    temporary file and leaves every previous output as it was: a stage with several outputs writes all or none.
    A block inside another joins the outer one."""
    if getattr(_STAGED, "writes", None) is not None:
        yield
        return
    _STAGED.writes = pending = []
    try:
        yield
        _STAGED.writes = None
        while pending:
            tmp, path = pending[0]
            try:
                os.replace(tmp, path)
            except OSError as e:
                raise ContractError(f"{path}: cannot write ({e.strerror or e})") from None
            pending.pop(0)
    finally:
        _STAGED.writes = None
        for tmp, _ in pending:
            try:
                os.remove(tmp)
            except OSError:
                pass


class Rows:
    """An array given to save_npz in row blocks, for data that should never be whole in memory: `shape` and `dtype`
    of the whole, and `blocks`, a callable returning an iterator of arrays of that dtype whose rows, in order, make
    up the whole (checked while writing)."""

    def __init__(self, shape, dtype, blocks: Callable[[], Any]):
        self.shape, self.dtype, self.blocks = tuple(int(n) for n in shape), np.dtype(dtype), blocks


def _write_member(zf: zipfile.ZipFile, key: str, arr, compress: bool) -> None:
    """One `.npy` member written straight into the zip (no copy of the array in memory), the same bytes as
    np.lib.format.write_array of the whole array gives."""
    info = zipfile.ZipInfo(key + ".npy", date_time=(1980, 1, 1, 0, 0, 0))
    info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
    info.external_attr = 0o644 << 16
    if not isinstance(arr, Rows):
        arr = np.asanyarray(arr)
        if arr.dtype.hasobject or (arr.flags.f_contiguous and not arr.flags.c_contiguous):
            buf = io.BytesIO()  # a Fortran-ordered array keeps its own layout, as write_array writes it
            np.lib.format.write_array(buf, arr, allow_pickle=False)
            zf.writestr(info, buf.getvalue())
            return
    header = io.BytesIO()
    np.lib.format._write_array_header(header, {"descr": np.lib.format.dtype_to_descr(arr.dtype),
                                               "fortran_order": False, "shape": arr.shape}, None)
    nbytes = math.prod(arr.shape) * arr.dtype.itemsize
    info.file_size = len(header.getvalue()) + nbytes  # zip64 headers exactly when the member needs them
    rows, block = 0, max(1, (16 << 20) // max(1, math.prod(arr.shape[1:]) * arr.dtype.itemsize))
    with zf.open(info, "w") as dest:
        dest.write(header.getvalue())
        if isinstance(arr, Rows):
            for b in arr.blocks():
                b = np.ascontiguousarray(b)
                if b.dtype != arr.dtype or b.shape[1:] != arr.shape[1:] or rows + len(b) > arr.shape[0]:
                    raise ValueError(f"'{key}': a block of {b.dtype} {b.shape} does not fit {arr.dtype} {arr.shape}")
                dest.write(memoryview(b).cast("B"))
                rows += len(b)
            if rows != arr.shape[0]:
                raise ValueError(f"'{key}': the blocks hold {rows} rows, {arr.shape[0]} declared")
        elif arr.ndim == 0:
            dest.write(arr.tobytes())
        else:
            for i in range(0, len(arr), block):  # 16 MiB at a time
                dest.write(memoryview(np.ascontiguousarray(arr[i:i + block])).cast("B"))


def save_npz(path: str, arrays: Dict[str, Any], compress: bool = True,
             check: Optional[Callable[[str], Any]] = None) -> None:
    """Atomic, byte-reproducible `.npz` (fixed zip timestamps, sorted keys, deflate compression). Arrays are
    written straight into the file, never copied whole; a value may be `Rows`, written block by block.
    `compress=False` stores the arrays uncompressed, so that load_dataset memory-maps them instead of reading them
    (a dataset larger than memory); the arrays, and so every result, are the same either way. `check(path of the
    written file)` runs before the file takes `path`'s place, e.g. the data contract's checks of what was written
    block by block."""

    def write(f):
        with zipfile.ZipFile(f, "w", compression=zipfile.ZIP_DEFLATED) as zf:
            for key in sorted(arrays):
                _write_member(zf, key, arrays[key], compress)

    _atomic_write(path, write, check)


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
    """Versions of the packages that shape a dataset, recorded in its metadata: read from the installed packages'
    metadata (importlib.metadata), so nothing is imported (no banner, no second of start-up) and every installed one
    has its real version; a package that is not installed is absent."""
    import importlib.metadata
    import platform

    out = {"python": platform.python_version(), "numpy": np.__version__}
    for name, dist in (("torch", "torch"), ("dm_control", "dm-control"), ("mujoco", "mujoco"),
                       ("causal_world", "causal-world"), ("pybullet", "pybullet")):
        try:
            out[name] = importlib.metadata.version(dist)
        except importlib.metadata.PackageNotFoundError:
            continue
    return out


ISA_FLAGS = ("sse4_2", "avx", "avx2", "fma", "avx512f", "avx512_vnni", "avx512_bf16", "amx_tile", "asimd", "sve")


def machine() -> Dict[str, Any]:
    """The machine a job ran on, as the runner's ledger records it: the same code and data can give other floats on
    another CPU (vector width, BLAS code path), so a result says where it was made. CPU model and the instruction
    sets that pick the math kernels (from /proc/cpuinfo where there is one), cores, OS, architecture, and the
    package versions (package_versions)."""
    import platform

    info: Dict[str, str] = {}
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:  # the first processor's entries (they are alike on every machine here)
                key, _, value = line.partition(":")
                info.setdefault(key.strip(), value.strip())
    except OSError:
        pass
    model = info.get("model name") or info.get("Hardware") or platform.processor() or "unknown"
    if "cpu family" in info:  # the vendor's family/model numbers tell apart CPUs of one marketing name
        model += f" (family {info['cpu family']}, model {info.get('model', '?')})"
    flags = set((info.get("flags") or info.get("Features") or "").split())
    return {"cpu": model, "isa": [f for f in ISA_FLAGS if f in flags], "cores": os.cpu_count(),
            "os": platform.system(), "arch": platform.machine(), "versions": package_versions()}


# ------------------------------------------------------------------------------------------ outputs
def _real(path: str) -> str:
    return os.path.realpath(os.path.abspath(path))


def _inside(path: str, folder: str) -> bool:
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _writable(flag: str, path: str, folder: bool) -> None:
    """`path` can be created (or replaced) as a file, or as a folder with `folder`: one-line ValueError otherwise."""
    what = "folder" if folder else "file"
    if os.path.lexists(path):
        if folder and not os.path.isdir(path):
            raise ValueError(f"{flag} {path}: exists and is not a folder")
        if not folder and os.path.isdir(path):
            raise ValueError(f"{flag} {path}: is a folder; give a file path")
    parent = os.path.dirname(os.path.abspath(path))
    while not os.path.lexists(parent):  # the nearest existing ancestor must be a folder we may write in
        parent = os.path.dirname(parent)
    if not os.path.isdir(parent):
        raise ValueError(f"{flag} {path}: cannot create the {what}: {parent} is not a folder")
    if not os.access(parent, os.W_OK | os.X_OK):
        raise ValueError(f"{flag} {path}: cannot create the {what}: {parent} is not writable")
    if folder and os.path.isdir(path) and not os.path.isfile(os.path.join(path, RUN_MARK)):
        # a folder without the mark: a run folder of before the mark (only the usual outputs), or someone's files
        foreign = sorted(e for e in os.listdir(path) if not e.startswith(".")
                         and not any(fnmatch.fnmatch(e, pat) for pat in RUN_FOLDER_ENTRIES))
        if foreign:
            raise ValueError(f"{flag} {path}: holds '{foreign[0]}', which is not a run output; a finished run replaces "
                             f"the whole folder, so give a new or a run folder")


def check_paths(inputs: Dict[str, Any], files: Optional[Dict[str, Any]] = None,
                folders: Optional[Dict[str, Any]] = None) -> None:
    """Refuse, with a one-line ValueError naming the flag, an output that would clobber one of the run's inputs or
    another output, or that cannot be written. Each dict maps a flag (`--dataset`) to a path, a list of paths
    (e.g. one per split or seed) or None (not given). `files` are output files; `folders` are output folders
    (run folders: an input inside one, or foreign files in it, are refused too)."""
    def items(d):
        for flag, value in (d or {}).items():
            for p in ([value] if isinstance(value, str) or value is None else value):
                if p is not None:
                    yield flag, p

    ins = [(flag, p, _real(p)) for flag, p in items(inputs)]
    outs = [(flag, p, _real(p), False) for flag, p in items(files)] + \
           [(flag, p, _real(p), True) for flag, p in items(folders)]
    for i, (flag, p, real, folder) in enumerate(outs):
        for in_flag, in_p, in_real in ins:
            if real == in_real or (folder and _inside(in_real, real)):
                where = "is" if real == in_real else "contains"
                raise ValueError(f"{flag} {p} {where} the input {in_flag} {in_p}: refusing to overwrite an input")
        for other_flag, other_p, other_real, _ in outs[:i]:
            if real == other_real:
                raise ValueError(f"{flag} {p} is also {other_flag}: two outputs cannot share a path")
        _writable(flag, p, folder)


_HELD = threading.local()  # the claims and run folders of the stage running in this thread (all_or_nothing)


def _held() -> list:
    if not hasattr(_HELD, "stack"):
        _HELD.stack = []
    return _HELD.stack


class Claim:
    """An exclusive lock on an output for the running stage: a lock on `<path>.lock` (filelock's descriptor lock:
    `flock` on Linux and macOS, `LockFileEx` on Windows), which holds the owner's pid and is removed on release. A
    second writer is refused with a one-line ContractError."""

    def __init__(self, path: str):
        import filelock

        self.path, self.lock_path, self.fd = path, os.path.abspath(path) + ".lock", None
        self.created = _makedirs(os.path.dirname(self.lock_path))
        while self.fd is None:
            try:
                fd = os.open(self.lock_path, os.O_RDWR | os.O_CREAT, 0o644)
            except OSError as e:
                raise ContractError(f"{path}: cannot write ({e.strerror or e})") from None
            try:
                held = not filelock.lock_descriptor(fd, blocking=False)
            except OSError:
                held = True
            if held:
                try:
                    owner = os.read(fd, 32).decode(errors="replace").strip() or "?"
                except OSError:  # Windows: the owner's locked byte cannot be read
                    owner = "?"
                os.close(fd)
                raise ContractError(f"{path}: another run (pid {owner}) is writing it; wait for it to end or choose "
                                    f"another output (lock {self.lock_path})") from None
            try:  # a releasing owner unlinks the lock file: ours must still be the one at lock_path
                same = os.stat(self.lock_path).st_ino == os.fstat(fd).st_ino
            except FileNotFoundError:
                same = False
            if not same:
                os.close(fd)
                continue
            try:
                os.ftruncate(fd, 0)
                os.write(fd, f"{os.getpid()}\n".encode())
            except OSError as e:  # a full disk: no lock file is left behind
                os.remove(self.lock_path)
                os.close(fd)
                _remove_empty(self.created)
                raise ContractError(f"{path}: cannot write ({e.strerror or e})") from None
            self.fd = fd
        _held().append(self)

    def release(self) -> None:
        if self.fd is None:
            return
        try:
            os.remove(self.lock_path)  # while still locked, so that no one locks a file about to vanish
        except FileNotFoundError:
            pass
        os.close(self.fd)
        self.fd = None
        if self in _held():
            _held().remove(self)

    def abort(self) -> None:
        self.release()
        _remove_empty(self.created)


def claim(path: str) -> Claim:
    """Lock the output `path` until the stage ends (see Claim, all_or_nothing)."""
    return Claim(path)


def _makedirs(folder: str) -> list:
    """os.makedirs, returning the folders it created (deepest last), so a failed run can remove them again."""
    created, f = [], os.path.abspath(folder)
    while not os.path.lexists(f):
        created.append(f)
        f = os.path.dirname(f)
    try:
        os.makedirs(folder, exist_ok=True)
    except OSError as e:
        raise ContractError(f"{folder}: cannot create the folder ({e.strerror or e})") from None
    return created[::-1]


def _remove_empty(folders: list) -> None:
    for f in reversed(folders):
        try:
            os.rmdir(f)
        except OSError:
            break


class RunFolder:
    """A trainer's output folder, all or nothing. `RunFolder(out_dir)` claims `out_dir` (Claim), removes what dead
    runs left beside it, moves an existing `out_dir` (the previous run) aside to `.<name>.<pid>.<random>.old` and
    creates `out_dir` afresh: the run's logs (progress.csv, tb/) grow there (`.path`). Its results (policy.pt,
    args.json, …) are written to the temporary sibling `.staging` (`.<name>.<pid>.<random>.tmp`); `commit()` moves
    the logs in beside them and renames the whole folder to `out_dir`, then removes the previous run. So `out_dir`
    never holds the results of two runs, or some results of one: all of them or none. A run that fails or is
    interrupted (SIGINT, SIGTERM) removes its folder and puts the previous run back (all_or_nothing); a SIGKILLed one
    leaves its logs in `out_dir` without results, and the next run to `out_dir` removes what it left."""

    def __init__(self, out_dir: str):
        _writable("--out-dir", out_dir, folder=True)
        self.final = os.path.abspath(out_dir)
        self.claim = Claim(self.final)
        _held().remove(self.claim)  # released by this folder
        clean_stale(self.final)
        self.old = self.staging = None
        try:
            if os.path.lexists(self.final):
                self.old = _temp_name(self.final, "old")
                os.rename(self.final, self.old)
            os.mkdir(self.final)
            self.staging = _temp_name(self.final)
            os.mkdir(self.staging)
            for folder in (self.final, self.staging):  # marked as a run folder: a later run may replace it whole
                with open(os.path.join(folder, RUN_MARK), "w") as f:
                    f.write("a run folder: the next run to this --out-dir replaces it with everything in it\n")
        except OSError as e:
            self._undo()
            raise ContractError(f"{out_dir}: cannot create the run folder ({e.strerror or e})") from None
        self.path = self.final
        _held().append(self)

    def commit(self) -> str:
        """Move the logs beside the results and the whole folder into place; returns out_dir."""
        try:
            for entry in os.listdir(self.final):
                if not os.path.lexists(os.path.join(self.staging, entry)):  # a result of the same name wins
                    os.rename(os.path.join(self.final, entry), os.path.join(self.staging, entry))
            shutil.rmtree(self.final)
            os.rename(self.staging, self.final)
        except OSError as e:
            raise ContractError(f"{self.final}: cannot move the finished run into place ({e.strerror or e})") from None
        self.staging = None
        if self.old is not None:
            shutil.rmtree(self.old, ignore_errors=True)
            self.old = None
        if self in _held():
            _held().remove(self)
        self.claim.release()
        return self.final

    def _undo(self) -> None:
        if self.staging is not None:  # not committed: remove the unfinished run, put the previous one back
            shutil.rmtree(self.staging, ignore_errors=True)
            if os.path.isdir(self.final) and not os.path.islink(self.final):
                shutil.rmtree(self.final, ignore_errors=True)
            self.staging = None
        if self.old is not None and not os.path.lexists(self.final):
            os.rename(self.old, self.final)
            self.old = None
        self.claim.abort()

    def abort(self) -> None:
        if self in _held():
            _held().remove(self)
        self._undo()


def _raise_interrupt(signum, frame):
    raise KeyboardInterrupt(f"signal {signum}")


def all_or_nothing(main):
    """Decorator of a stage's `main`: while it runs, SIGTERM raises KeyboardInterrupt as SIGINT does, and when it
    ends with an exception (a refusal, a non-finite loss, an interrupt) every claim it holds is released and every
    run folder it has not committed is removed, so a failed run writes nothing."""

    @functools.wraps(main)
    def wrapped(*args, **kwargs):
        held, depth = _held(), len(_held())
        in_main = threading.current_thread() is threading.main_thread()
        previous = signal.signal(signal.SIGTERM, _raise_interrupt) if in_main else None
        try:
            return main(*args, **kwargs)
        finally:  # what a returning main still holds are claims (released); a failing main's run folders are undone
            while len(held) > depth:
                held[-1].abort()
            if in_main:
                signal.signal(signal.SIGTERM, previous)

    return wrapped


# ------------------------------------------------------------------------------------------ loading
def _fail(path: str, msg: str):
    raise ContractError(f"{path}: {msg}")


def _array_headers(path: str, zf: zipfile.ZipFile) -> Dict[str, tuple]:
    """{key: (shape, dtype, zip member, (length of its .npy header, Fortran order))} of the schema's members, read from the `.npy` headers alone; a member
    whose size in the zip header disagrees with its array header, or that holds objects, is refused here."""
    known = set(DATASET_KEYS) | set(OPTIONAL_KEYS) | {"metadata"}
    readers = {(1, 0): np.lib.format.read_array_header_1_0, (2, 0): np.lib.format.read_array_header_2_0}
    headers = {}
    for info in zf.infolist():
        key = info.filename[:-4] if info.filename.endswith(".npy") else None
        if key not in known:
            continue  # not part of the schema: never read
        with zf.open(info) as f:
            version = np.lib.format.read_magic(f)
            if version not in readers:
                _fail(path, f"'{key}' has .npy format version {version}, expected 1.0 or 2.0")
            shape, fortran, dtype = readers[version](f)
            offset = f.tell()
        if dtype.hasobject:
            _fail(path, f"'{key}' holds Python objects (pickled data is never loaded)")
        if info.file_size != offset + math.prod(shape) * dtype.itemsize:
            _fail(path, f"'{key}': the zip header declares {info.file_size} bytes but the array header {shape} "
                        f"{dtype} needs {offset + math.prod(shape) * dtype.itemsize}")
        headers[key] = (shape, dtype, info, (offset, fortran))
    return headers


def _mapped(path: str, zf: zipfile.ZipFile, key: str, shape, dtype, info, npy_header: tuple) -> np.ndarray:
    """A member stored without compression, memory-mapped read-only (pages are read as they are used and can be
    dropped again, so a dataset larger than memory can be used); its CRC is checked block by block, as reading
    it would."""
    if info.flag_bits & 0x1:
        _fail(path, f"'{key}' is encrypted")
    zf.fp.seek(info.header_offset)
    local = zf.fp.read(30)
    if len(local) != 30 or local[:4] != b"PK\x03\x04":
        _fail(path, f"'{key}': bad local zip header (truncated or corrupted?)")
    start = info.header_offset + 30 + int.from_bytes(local[26:28], "little") + int.from_bytes(local[28:30], "little")
    npy, fortran = npy_header
    if os.path.getsize(path) < start + info.file_size:
        _fail(path, f"'{key}' runs past the end of the file (truncated?)")
    arr = np.memmap(path, dtype=dtype, mode="r", offset=start + npy, shape=shape, order="F" if fortran else "C")
    with open(path, "rb") as f:
        f.seek(start)
        crc, left = 0, info.file_size
        while left:
            block = f.read(min(left, 64 << 20))
            if not block:
                _fail(path, f"'{key}' runs past the end of the file (truncated?)")
            crc, left = zlib.crc32(block, crc), left - len(block)
    if crc != info.CRC:
        _fail(path, f"not a readable .npz file (truncated or corrupted?): BadZipFile: Bad CRC-32 for file '{info.filename}'")
    return arr


def is_mapped(arr) -> bool:
    """Whether an array (or a view of one) lives in a memory-mapped file rather than in memory."""
    while isinstance(arr, np.ndarray):
        if isinstance(arr, np.memmap):
            return True
        arr = arr.base
    return False


def _read_npz(path: str) -> Dict[str, np.ndarray]:
    """The schema's arrays of a `.npz`, read only after every member's declared size has been checked: against its
    own array header, the metadata's dims and the row count of 'observations' (memory stays bounded by what the
    schema allows for that many rows)."""
    if not os.path.exists(path):
        _fail(path, "file not found")
    if os.path.isdir(path):
        _fail(path, "is a folder, not a .npz file")
    try:
        with zipfile.ZipFile(path) as zf:
            headers = _array_headers(path, zf)
            if "metadata" not in headers:
                _fail(path, "missing required key 'metadata' (a JSON string, see docs/contract.md)")
            shape, dtype, info, _ = headers["metadata"]
            if shape != () or dtype.kind != "U" or info.file_size > MAX_METADATA_BYTES:
                _fail(path, f"'metadata' must be a 0-d string of at most {MAX_METADATA_BYTES} bytes, found "
                            f"{dtype} {shape} ({info.file_size} bytes)")
            meta = _parse_metadata(path, {"metadata": np.lib.format.read_array(zf.open(info), allow_pickle=False)})
            _check_declared(path, headers, meta)
            return {k: _mapped(path, zf, k, *header)
                    if header[2].compress_type == zipfile.ZIP_STORED and k != "metadata" and math.prod(header[0])
                    else np.lib.format.read_array(zf.open(header[2]), allow_pickle=False)
                    for k, header in headers.items()}
    except ContractError:
        raise
    except Exception as e:  # zipfile.BadZipFile, EOFError, CRC errors, bad headers, …
        _fail(path, f"not a readable .npz file (truncated or corrupted?): {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")


def read_npz(path: str) -> Dict[str, np.ndarray]:
    """The schema's arrays of a dataset file as stored (members stored uncompressed memory-mapped), unvalidated:
    for validate_dataset."""
    return _read_npz(path)


def _check_declared(path: str, headers: Dict[str, tuple], meta: Dict[str, Any]) -> None:
    """Shapes and total size of the members, from their headers, before any of them is read."""
    if "observations" not in headers:
        _fail(path, "missing required key 'observations' (see docs/contract.md)")
    shape = headers["observations"][0]
    if len(shape) != 2:
        _fail(path, f"'observations' has shape {shape}, expected (N, obs_dim)")
    dims = {"N": shape[0], "obs": meta["obs_dim"], "act": meta["act_dim"], "u": meta.get("u_dim", 0)}
    for key, (kind, spec) in {**DATASET_KEYS, **OPTIONAL_KEYS}.items():
        if key in headers:
            if key == "exogenous" and "u_dim" not in meta:
                _fail(path, "'exogenous' is present but metadata has no 'u_dim'")
            _check_shape(path, key, headers[key][0], spec, dims)
    infos = [info for _, _, info, _ in headers.values()]
    declared, compressed = sum(i.file_size for i in infos), sum(i.compress_size for i in infos)
    if declared > MAX_INFLATION * max(compressed, 1) + (1 << 20):
        _fail(path, f"the arrays declare {declared} bytes for {compressed} compressed bytes (over {MAX_INFLATION}:1): "
                    f"refusing to inflate a suspected zip bomb")


def _parse_metadata(path: str, raw: Dict[str, np.ndarray], check_env=None) -> Dict[str, Any]:
    if "metadata" not in raw:
        _fail(path, "missing required key 'metadata' (a JSON string, see docs/contract.md)")
    if raw["metadata"].shape != () or raw["metadata"].dtype.kind != "U":
        _fail(path, f"'metadata' must be a 0-d string, found {raw['metadata'].dtype} {raw['metadata'].shape}")
    try:
        meta = json.loads(str(raw["metadata"]))
    except (json.JSONDecodeError, TypeError, RecursionError) as e:
        _fail(path, f"'metadata' is not valid JSON ({str(e).splitlines()[0]})")
    if not isinstance(meta, dict):
        _fail(path, "'metadata' must be a JSON object")
    for field in METADATA_FIELDS:
        if field not in meta:
            _fail(path, f"metadata is missing field '{field}'")
    if meta["schema_version"] != SCHEMA_VERSION or isinstance(meta["schema_version"], bool):
        _fail(path, f"schema_version {meta['schema_version']} is not the supported {SCHEMA_VERSION}")
    for field in ("obs_dim", "act_dim", "n_classes") + (("u_dim",) if "u_dim" in meta else ()):
        if not _is_int(meta[field]) or meta[field] < 1:
            _fail(path, f"metadata '{field}' must be an integer >= 1, found {meta[field]!r}")
    for field, kind in (("env_id", str), ("aux_meaning", str), ("collect_args", dict), ("versions", dict)):
        if not isinstance(meta[field], kind):
            _fail(path, f"metadata '{field}' must be a {'string' if kind is str else 'JSON object'}, found {meta[field]!r}"[:300])
    if not _is_int(meta["seed"]):
        _fail(path, f"metadata 'seed' must be an integer, found {meta['seed']!r}")
    for field in ("action_low", "action_high"):
        v = meta[field]
        if not (isinstance(v, list) and len(v) == meta["act_dim"] and all(_is_number(x) and abs(x) <= MAX_ABS for x in v)):
            _fail(path, f"metadata '{field}' must be a list of act_dim={meta['act_dim']} finite numbers, found {v!r}"[:300])
    low, high = np.float32(meta["action_low"]), np.float32(meta["action_high"])  # as the normaliser holds them
    narrow = np.flatnonzero(~(high > low))
    if len(narrow):
        i = narrow[0]
        _fail(path, f"metadata action bounds of dim {i}: action_high {meta['action_high'][i]} must exceed "
                    f"action_low {meta['action_low'][i]}")
    if check_env is None:
        return meta
    try:  # the env description must name an env this code can build
        check_env({k: v for k, v in meta.items() if k not in DATASET_ONLY})
    except (ValueError, TypeError, KeyError) as e:
        _fail(path, f"metadata: {str(e).splitlines()[0] if str(e) else type(e).__name__}")
    return meta


def _is_int(x) -> bool:
    return isinstance(x, int) and not isinstance(x, bool)


def _is_number(x) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool) and math.isfinite(x)


def _check_shape(path, key, shape, spec, dims) -> None:
    expected = tuple(dims[d] if isinstance(d, str) else d for d in spec)
    if tuple(shape) != expected:
        names = "[" + ", ".join(f"{d}={dims[d]}" for d in spec) + "]"
        _fail(path, f"'{key}' has shape {tuple(shape)}, expected {expected} {names}")


BLOCK_BYTES = 64 << 20  # the checks read a dataset's arrays this many bytes at a time


def _block_rows(arr) -> int:
    return max(1, BLOCK_BYTES // max(1, arr[:1].nbytes))


def _first(arr: np.ndarray, test) -> Optional[tuple]:
    """The index of the first element where test(block) is True, reading `arr` in blocks of rows (the temporaries
    stay small even when the array is memory-mapped and larger than memory); None if there is none."""
    step = _block_rows(arr)
    for i in range(0, len(arr), step):
        hit = np.argwhere(test(arr[i:i + step]))
        if len(hit):
            return (int(hit[0][0]) + i,) + tuple(int(j) for j in hit[0][1:])
    return None


def _check_array(path, key, arr, kind, shape, dims) -> np.ndarray:
    if not np.issubdtype(arr.dtype, _KINDS[kind]):
        _fail(path, f"'{key}' has dtype {arr.dtype}, expected {kind}")
    _check_shape(path, key, arr.shape, shape, dims)
    if kind == "float":
        arr = arr.astype(np.float32, copy=False)  # no second copy of a float32 array: datasets run to gigabytes
        at = _first(arr, lambda b: ~np.isfinite(b))
        if at is not None:
            _fail(path, f"'{key}' contains NaN or inf (first at row {at[0]})")
        at = _first(arr, lambda b: (b > MAX_ABS) | (b < -MAX_ABS))  # |x| > MAX_ABS, without a float temporary
        if at is not None:
            _fail(path, f"'{key}' holds {arr[at]:.3g} at row {at[0]}: values must lie within "
                        f"±{MAX_ABS:.0e} (normalisation statistics would overflow)")
    elif kind == "int":
        arr = arr.astype(np.int64, copy=False)
    return arr


def validate_dataset(path: str, raw: Dict[str, np.ndarray], check_env: Optional[Callable[[dict], None]] = None
                     ) -> Dict[str, Any]:
    """Check arrays against the contract; return {key: array (float32/int64/bool)} plus 'metadata': dict.
    Any problem is a ContractError whose one-line message starts with `path`. `check_env(env_spec)` also checks the
    env description (envs.load_dataset passes envs.check_spec: the env must be one this code can build)."""
    try:
        return _validate_dataset(path, raw, check_env)
    except ContractError:
        raise
    except Exception as e:  # a malformed file the checks above did not foresee: still one line naming the file
        _fail(path, f"malformed dataset ({type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''})")


def _validate_dataset(path: str, raw: Dict[str, np.ndarray], check_env=None) -> Dict[str, Any]:
    meta = _parse_metadata(path, raw, check_env)
    for key in DATASET_KEYS:
        if key not in raw:
            _fail(path, f"missing required key '{key}' (see docs/contract.md)")
    if raw["observations"].ndim != 2:
        _fail(path, f"'observations' has shape {raw['observations'].shape}, expected (N, obs_dim)")
    dims = {"N": raw["observations"].shape[0], "obs": meta["obs_dim"], "act": meta["act_dim"],
            "u": meta.get("u_dim", 0)}
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
    keep = collected_rows(data)
    ep = data["episode_ids"][keep]
    if not len(ep):
        return
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
    step = _block_rows(obs)
    for i in range(0, len(obs) - 1, step):  # block by block: the arrays may be larger than memory
        mismatch = np.flatnonzero(inner[i:i + step] & np.any(nxt[i:i + step][:len(inner) - i] != obs[i + 1:i + 1 + step], axis=1))
        if len(mismatch):
            row = int(mismatch[0]) + i
            _fail(path, f"next_observations[{row}] != observations[{row + 1}] inside an episode (broken or shuffled transitions)")
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


def load_dataset(path: str, check_env: Optional[Callable[[dict], None]] = None) -> Dict[str, Any]:
    """Read and validate a dataset `.npz`; raises ContractError with a one-line message on any problem. Stages call
    envs.load_dataset, which passes the env check."""
    return validate_dataset(path, _read_npz(path), check_env)


def load_dataset_raw(path: str, check_env: Optional[Callable[[dict], None]] = None):
    """(the arrays exactly as stored, in their own dtypes, with 'metadata' the JSON string; the validated dataset as
    load_dataset returns it): for a lossless copy of a file into another format (minari_export.py)."""
    raw = _read_npz(path)
    return raw, validate_dataset(path, raw, check_env)


def collected_rows(data: Dict[str, Any]):
    """The index of the collected (non-augmented) rows of a dataset: a slice when they are one contiguous block (as
    augment.py writes them, collected rows before augmented ones), so that `data[key][rows]` is a view, not a copy,
    of an array that may run to gigabytes; the boolean row mask otherwise."""
    if "augmented" not in data:
        return slice(0, len(data["rewards"]))
    mask = ~data["augmented"]
    rows = np.flatnonzero(mask)
    if len(rows) and rows[-1] - rows[0] + 1 == len(rows):
        return slice(int(rows[0]), int(rows[-1]) + 1)
    return mask


def fingerprint(data: Dict[str, Any]) -> str:
    """Content hash of the collected transitions (s, a, s', c): ties a model to the dataset it was fit on."""
    h = hashlib.sha256()
    keep = collected_rows(data)
    for key in ("observations", "actions", "next_observations", "aux"):
        h.update(np.ascontiguousarray(data[key][keep]))  # the same bytes as .tobytes(), without the copy
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
    if os.path.isdir(path):
        _fail(path, "is a folder, not a checkpoint file")
    try:
        ckpt = torch.load(path, map_location="cpu", weights_only=True)
    except pickle.UnpicklingError:
        _fail(path, "not a readable checkpoint: it holds Python objects beyond tensors and primitives, which are never "
                    "loaded (weights_only)")
    except Exception as e:
        first = re.sub(r"\x1b\[[0-9;]*m", "", str(e).splitlines()[0] if str(e) else "")[:160]
        _fail(path, f"not a readable checkpoint (truncated or corrupted?): {type(e).__name__}: {first}")
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
    """Save a policy artifact (see policy_artifact); it must name its method, seed, env and dataset, and hold only
    finite numbers (a diverged run is refused here with a one-line ValueError, and nothing is written)."""
    for key in POLICY_INFO:
        if key not in artifact:
            raise ValueError(f"policy artifact needs '{key}'")
    problem = _policy_numbers(artifact)
    if problem:
        raise ValueError(f"{path}: not saved: {problem} (training diverged?)")
    save_torch(path, artifact)


def _policy_numbers(art: Dict[str, Any]) -> Optional[str]:
    """What is wrong with the numbers of a policy artifact (non-finite weights, std <= 0, high <= low), or None."""
    import torch

    for name, t in art["state_dict"].items():
        if not isinstance(t, torch.Tensor) or not t.is_floating_point():
            return f"weight '{name}' is not a float tensor"
        if not bool(torch.isfinite(t).all()):
            return f"weight '{name}' holds NaN or inf"
    for key in ("obs_mean", "obs_std", "action_low", "action_high"):
        v = art[key]
        if not (isinstance(v, list) and all(_is_number(x) for x in v)):
            return f"'{key}' must be a list of finite numbers"
    if any(x <= 0 for x in art["obs_std"]):
        return "'obs_std' must be positive"
    if any(not hi > lo for lo, hi in zip(art["action_low"], art["action_high"])):
        return "'action_high' must exceed 'action_low'"
    return None


def _policy_layers(art: Dict[str, Any]) -> list:
    """The layers of an artifact as (name, in, out), checked to chain from obs_dim to act_dim and to match the
    state_dict's keys and shapes (without building a network: checks draw no random numbers). ValueError if not."""
    import torch

    cfg = art["config"]
    if not (isinstance(cfg, dict) and _is_int(cfg.get("obs_dim")) and _is_int(cfg.get("act_dim"))
            and isinstance(cfg.get("layers"), list) and cfg["layers"]):
        raise ValueError("'config' must hold integer obs_dim, act_dim and a non-empty list of layers")
    layers, width = [], cfg["obs_dim"]
    for layer in cfg["layers"]:
        name, *sizes = str(layer).split(":")
        if name not in POLICY_LAYERS or (name == "linear") != (len(sizes) == 2):
            raise ValueError(f"unknown policy layer '{layer}' (linear:<in>:<out>, relu, tanh)")
        if name == "linear" and not (all(s.isdigit() and 0 < int(s) <= 1 << 16 for s in sizes) and int(sizes[0]) == width):
            raise ValueError(f"policy layer '{layer}' does not take the previous width {width}")
        width = int(sizes[1]) if name == "linear" else width
        layers.append((name, *(int(s) for s in sizes)))
    if width != cfg["act_dim"] or not any(name == "linear" for name, *_ in layers):
        raise ValueError(f"policy layers end at width {width}, not act_dim={cfg['act_dim']}")
    expected = {}
    for i, (name, *sizes) in enumerate(layers):
        if name == "linear":
            expected[f"{i}.weight"], expected[f"{i}.bias"] = (sizes[1], sizes[0]), (sizes[1],)
    sd = art["state_dict"]
    if not isinstance(sd, dict) or set(sd) != set(expected):
        raise ValueError(f"'state_dict' keys {sorted(sd) if isinstance(sd, dict) else type(sd).__name__} do not "
                         f"match the layers ({sorted(expected)})"[:300])
    for key, shape in expected.items():
        if not isinstance(sd[key], torch.Tensor) or tuple(sd[key].shape) != shape:
            raise ValueError(f"'state_dict' entry '{key}' is not a tensor of shape {shape}")
    return layers


def load_policy(path: str) -> Dict[str, Any]:
    """Load and check a policy artifact; returns the dict (see save_policy). The layers must chain from obs_dim to
    act_dim, the weights fit them and be finite, obs_std positive, and the action bounds finite with high > low."""
    art = load_checkpoint(path, "policy", required=("config", "state_dict", "obs_mean", "obs_std", "action_low",
                                                     "action_high") + POLICY_INFO)
    try:
        _policy_layers(art)
    except ValueError as e:
        _fail(path, str(e))
    cfg = art["config"]
    for key, n in (("obs_mean", cfg["obs_dim"]), ("obs_std", cfg["obs_dim"]), ("action_low", cfg["act_dim"]), ("action_high", cfg["act_dim"])):
        if not isinstance(art[key], list) or len(art[key]) != n:
            _fail(path, f"policy '{key}' has {len(art[key]) if isinstance(art[key], list) else 'no list of'} entries, expected {n}")
    problem = _policy_numbers(art)
    if problem:
        _fail(path, problem)
    if not isinstance(art["method"], str) or not art["method"] or not _is_int(art["seed"]):
        _fail(path, f"policy 'method' must be a non-empty string and 'seed' an integer, found {art['method']!r}, {art['seed']!r}")
    if art["env"] is not None and not (isinstance(art["env"], dict) and isinstance(art["env"].get("env_id"), str)):
        _fail(path, "policy 'env' must be an env description with an env_id")
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
