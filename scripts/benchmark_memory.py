"""Benchmark (not a test): peak memory of every stage on a large dataset, stored compressed (read into memory) and
uncompressed (memory-mapped), side by side in one run.

    .venv/bin/python collect_data.py --env cw:towers --cw.expert scripted --cw.episodes 8 --out data/cw_towers_8.npz
    .venv/bin/python scripts/benchmark_memory.py --dataset data/cw_towers_8.npz --tile 75 --limit-gb 2 \
        --out results/memory/towers_2.5M.json

The dataset's episodes are repeated `--tile` times (episode ids renumbered, metadata `tiled`), which gives a file of
the row count and observation size of a large collection without collecting it: memory depends on the shapes, not
the values. Each run (a checkout of the code given by --code, so an older one can be measured beside this one, and a
storage) executes, each stage in its own process: loading and checking the dataset; the iVAE (--ivae-steps, 2
restarts, as the tables' rows); augmentation at ratio 1 (--sampler-steps); BC-all and OILCA (DWBC on the augmented
file), --policy-steps each, without rollouts. For every process the peak resident memory (VmHWM: counts the pages of a mapped file it
touched, which the kernel can drop again) and the peak anonymous memory (RssAnon sampled every 20 ms: what cannot be
dropped) are reported. With --limit-gb the runs on the uncompressed file run in a memory cgroup of that size (cgroup
v1, where it can be made; the page cache is dropped before each stage, so that the pages of the file it reads are
charged to it): a dataset larger than the limit then shows that the stages need less than it.
"""

import json
import os
import platform
import shutil
import subprocess
import sys
import time
from dataclasses import dataclass
from typing import Optional, Tuple

import numpy as np

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from oilca import cli, contract  # noqa: E402
import envs  # noqa: E402

CGROUP = "/sys/fs/cgroup/memory"
GB = 1e9


@dataclass
class Args:
    dataset: Optional[str] = None
    """a collected dataset (e.g. a CausalWorld towers collection of a few episodes)"""
    tile: int = 1
    """repeat its episodes this many times"""
    work: str = "runs/memory"
    """folder for the tiled files and the stages' outputs (emptied first)"""
    code: Tuple[str, ...] = ("new=.",)
    """label=checkout whose scripts run; the first is run on both storages, the others on the compressed file only"""
    storages: Tuple[str, ...] = ("deflated", "stored")
    """which files the first checkout runs on"""
    limit_gb: Optional[float] = None
    """memory cgroup limit of the runs on the stored file"""
    collect_episodes: int = 0
    """also measure collect_data.py on a CausalWorld dataset's task with this many episodes, the simulator replaced by
    random numbers of the same shapes (the collection's own arrays and write, not pybullet's)"""
    ivae_steps: int = 200
    sampler_steps: int = 200
    policy_steps: int = 200
    out: Optional[str] = None
    """result JSON; its table goes beside it (.md)"""
    again: Optional[str] = None
    """only rewrite the table of this result JSON (scripts/regenerate_tables.sh)"""


def tile(src: str, dst: str, times: int, compress: bool) -> None:
    """`src`'s episodes `times` times over, as one dataset (written block by block, checked as written)."""
    data = envs.load_dataset(src)
    meta = dict(data.pop("metadata"))
    n_ep = int(data["episode_ids"].max()) + 1
    if not np.array_equal(np.unique(data["episode_ids"]), np.arange(n_ep)):
        raise SystemExit(f"error: --dataset {src}: episode ids are not 0..{n_ep - 1}")

    def rows(key):
        x = data[key]
        return contract.Rows((len(x) * times,) + x.shape[1:], x.dtype,
                             lambda: (x + r * n_ep if key == "episode_ids" else x for r in range(times)))

    meta["tiled"] = {"from": os.path.basename(src), "times": times}
    if "episode_success" in meta:
        meta["episode_success"] = meta["episode_success"] * times
    arrays = {k: rows(k) for k in data}
    arrays["metadata"] = contract.dataset_arrays_from_meta(meta)
    envs.save_dataset(dst, arrays, compress=compress)


def in_cgroup(limit_gb: Optional[float]):
    """(preexec_fn, folder) of a fresh memory cgroup with that limit, or (None, None)."""
    if not limit_gb:
        return None, None
    folder = os.path.join(CGROUP, f"oilca_memory_{os.getpid()}")
    os.makedirs(folder, exist_ok=True)
    with open(os.path.join(folder, "memory.limit_in_bytes"), "w") as f:
        f.write(str(int(limit_gb * GB)))

    def enter():
        with open(os.path.join(folder, "cgroup.procs"), "w") as f:
            f.write(str(os.getpid()))

    return enter, folder


def measure(cmd: list, cwd: str, log: str, limit_gb: Optional[float]) -> dict:
    """Run `cmd`, sampling its memory; peak RSS (VmHWM), peak anonymous RSS, seconds, exit status."""
    enter, folder = in_cgroup(limit_gb)
    if folder:  # pages already cached are charged to whoever read them first: start cold, so the limit holds
        os.sync()
        try:
            with open("/proc/sys/vm/drop_caches", "w") as f:
                f.write("1")
        except OSError:
            row_note = "page cache not dropped (not permitted): pages cached before the stage were not charged"
            print(row_note, flush=True)
    t0, anon = time.time(), 0
    with open(log, "w") as out:
        proc = subprocess.Popen(cmd, cwd=cwd, stdout=out, stderr=subprocess.STDOUT, preexec_fn=enter,
                                env={**os.environ, "PYTHONPATH": cwd})
        hwm = 0
        while proc.poll() is None:
            try:
                status = open(f"/proc/{proc.pid}/status").read()
            except OSError:
                break
            for line in status.splitlines():
                if line.startswith("RssAnon:"):
                    anon = max(anon, int(line.split()[1]) * 1024)
                elif line.startswith("VmHWM:"):
                    hwm = max(hwm, int(line.split()[1]) * 1024)
            time.sleep(0.02)
        rc = proc.wait()
    row = {"peak_rss_gb": round(hwm / GB, 3), "peak_anon_gb": round(anon / GB, 3),
           "seconds": round(time.time() - t0, 1), "exit": rc}
    if folder:
        row["cgroup_limit_gb"] = limit_gb
        row["cgroup_peak_gb"] = round(int(open(os.path.join(folder, "memory.max_usage_in_bytes")).read()) / GB, 3)
        row["cgroup_failcnt"] = int(open(os.path.join(folder, "memory.failcnt")).read())
        os.rmdir(folder)
    return row


FAKE_COLLECT = """
import numpy as np, collect_data, envs, envs.cw as cw
meta = envs.load_dataset({src!r})["metadata"]
class Simulated:  # run_episodes' record of a batch, drawn at random: the shapes of the real one
    def __init__(self, task, skip_frame, lockstep, specs, env_seed=0):
        self.rng = np.random.default_rng(env_seed)
    def run(self, T, interventions, ep_seeds, ep_specs, record=True):
        n, d = len(interventions), meta["obs_dim"]
        return {{"returns": np.zeros(n), "success": np.zeros(n),
                "obs": self.rng.standard_normal((n, T + 1, d), dtype=np.float32),
                "act": self.rng.uniform(-1, 1, (n, T, 9)).astype(np.float32),
                "rew": self.rng.random((n, T), dtype=np.float32)}}
    def close(self):
        pass
cw.Lockstep = Simulated
kw = dict(meta["collect_args"]["cw"], episodes={episodes})
kw.pop("workers", None)
extra = {{"uncompressed": True}} if {stored} else {{}}
collect_data.main(collect_data.Args(env=meta["env_id"], out={out!r}, cw=cw.CWConfig(**kw), **extra))
"""

STAGE_ORDER = ["collection (simulator replaced)", "load and check", "iVAE (2 restarts)", "augmentation (ratio 1)", "BC-all",
               "OILCA (DWBC on the augmented file)"]


def stages(py: str, data: str, work: str, args: Args, source: str = "", storage: str = "deflated") -> list:
    collect = [("collection (simulator replaced)", [py, "-c", FAKE_COLLECT.format(
        src=source, episodes=args.collect_episodes, stored=storage == "stored", out=f"{work}/collected.npz")])]
    return (collect if args.collect_episodes else []) + [
        ("load and check", [py, "-c", f"import envs; d = envs.load_dataset({data!r}); print(len(d['rewards']))"]),
        ("iVAE (2 restarts)", [py, "train_ivae.py", "--dataset", data, "--out-dir", f"{work}/ivae", "--total-steps",
                               str(args.ivae_steps), "--restarts", "2", "--no-compare"]),
        ("augmentation (ratio 1)", [py, "augment.py", "--dataset", data, "--ivae", f"{work}/ivae/ivae.pt", "--out",
                                    f"{work}/aug.npz", "--sampler-out", f"{work}/sampler.pt", "--sampler-steps",
                                    str(args.sampler_steps)]),
        ("BC-all", [py, "train_bc.py", "--dataset", data, "--data", "all", "--out-dir", f"{work}/bc_all",
                    "--total-steps", str(args.policy_steps), "--eval-every", "0", "--eval-episodes", "0"]),
        ("OILCA (DWBC on the augmented file)", [py, "train_dwbc.py", "--dataset", f"{work}/aug.npz", "--out-dir",
                                                f"{work}/oilca", "--total-steps", str(args.policy_steps),
                                                "--eval-every", "0", "--eval-episodes", "0"]),
    ]


def table(result: dict) -> str:
    """The result as a markdown table: a row per stage, a column per run (peak RSS / peak anonymous memory)."""
    d, runs = result["dataset"], result["runs"]
    head = [f"{r['code']} ({r['commit']}), {r['storage']}" + (", cgroup limit "
            f"{r['stages'][next(iter(r['stages']))]['cgroup_limit_gb']} GB" if "cgroup_limit_gb" in
            r["stages"][next(iter(r["stages"]))] else "") for r in runs]
    lines = [f"recorded output, {result['date']}, {result['machine']}; `{result['command']}`",
             f"dataset: {d['env_id']}, {d['rows']:,} rows of {d['obs_dim']}-dim observations ({d['source']} tiled "
             f"{d['tile']} times); files " + ", ".join(f"{k} {v} GB" for k, v in d["file_gb"].items()),
             "peak resident memory (VmHWM) / peak anonymous memory (RssAnon, sampled every 20 ms), GB; seconds",
             "", "| stage | " + " | ".join(head) + " |", "|---|" + "---|" * len(runs)]
    names = list(runs[0]["stages"])  # in the order they ran (the JSON keeps its keys sorted)
    for name in sorted(names, key=lambda n: STAGE_ORDER.index(n) if n in STAGE_ORDER else len(STAGE_ORDER)):
        cells = []
        for r in runs:
            row = r["stages"].get(name)
            cells.append("–" if row is None else f"{row['peak_rss_gb']:.2f} / {row['peak_anon_gb']:.2f}; "
                         f"{row['seconds']:.0f} s" + ("" if row["exit"] == 0 else f" (exit {row['exit']})"))
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def main(args: Args) -> dict:
    if args.again:
        with open(args.again) as f:
            result = json.load(f)
        contract.save_text(args.again[:-len(".json")] + ".md", table(result))
        return result
    if not args.dataset:
        raise SystemExit("error: --dataset: required (or --again RESULT_JSON)")
    contract.check_paths({"--dataset": args.dataset}, files={"--out": args.out} if args.out else {})
    work = os.path.abspath(args.work)
    shutil.rmtree(work, ignore_errors=True)
    os.makedirs(work)
    files = {}
    for storage in ("deflated", "stored"):
        if storage in args.storages or (storage == "deflated" and len(args.code) > 1):
            files[storage] = os.path.join(work, f"tiled_{storage}.npz")
            t0 = time.time()
            tile(args.dataset, files[storage], args.tile, compress=storage == "deflated")
            print(f"{files[storage]}: {os.path.getsize(files[storage]) / GB:.2f} GB ({time.time() - t0:.0f} s)",
                  flush=True)
    head = envs.load_dataset(files.get("stored") or files["deflated"])
    facts = {"rows": int(len(head["rewards"])), "obs_dim": int(head["metadata"]["obs_dim"]),
             "env_id": head["metadata"]["env_id"], "tile": args.tile, "source": args.dataset,
             "file_gb": {k: round(os.path.getsize(p) / GB, 3) for k, p in files.items()}}
    del head
    runs = []
    for i, spec in enumerate(args.code):
        label, _, code = spec.partition("=")
        code = os.path.abspath(code or ".")
        venv = os.path.join(code, ".venv", "bin", "python")
        py = sys.executable if code == ROOT or not os.path.exists(venv) else venv  # another checkout: its own venv
        for storage in (args.storages if i == 0 else ("deflated",)):
            limit = args.limit_gb if storage == "stored" else None
            folder = os.path.join(work, f"{label}_{storage}")
            os.makedirs(folder)
            git = lambda *a: subprocess.run(["git", "-C", code, *a], capture_output=True, text=True).stdout.strip()  # noqa: E731
            dirty = bool(git("status", "--porcelain", "--untracked-files=no"))
            run = {"code": label, "commit": git("rev-parse", "--short", "HEAD") + (" with uncommitted changes" if dirty else ""),
                   "storage": storage, "stages": {}}
            for name, cmd in stages(py, files[storage], folder, args, os.path.abspath(args.dataset), storage):
                row = measure(cmd, code, os.path.join(folder, name.split(" ")[0] + ".log"), limit)
                run["stages"][name] = row
                print(f"{label:>6} {storage:>8} {name:<36} peak RSS {row['peak_rss_gb']:6.2f} GB  anonymous "
                      f"{row['peak_anon_gb']:6.2f} GB  {row['seconds']:7.1f} s  exit {row['exit']}"
                      + (f"  cgroup peak {row['cgroup_peak_gb']:.2f} of {limit} GB" if limit else ""), flush=True)
            runs.append(run)
            shutil.rmtree(os.path.join(folder, "ivae"), ignore_errors=True)
            for f in ("aug.npz", "collected.npz"):
                if os.path.exists(os.path.join(folder, f)):
                    os.remove(os.path.join(folder, f))
    result = {"dataset": facts, "runs": runs, "machine": f"{platform.machine()}, {os.cpu_count()} cores, "
              f"{os.sysconf('SC_PAGE_SIZE') * os.sysconf('SC_PHYS_PAGES') / GB:.0f} GB",
              "date": time.strftime("%Y-%m-%d"), "command": " ".join(sys.argv)}
    print(table(result))
    if args.out:
        with contract.together():
            contract.save_json(args.out, result)
            contract.save_text(args.out[:-len(".json")] + ".md" if args.out.endswith(".json") else args.out + ".md",
                               table(result))
    return result


if __name__ == "__main__":
    main(cli.parse(Args))
