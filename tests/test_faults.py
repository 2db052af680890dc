"""Faults and the guarantees around writes (docs/contract.md, "Errors and guarantees"): one subprocess per CLI for the
real one-line stderr and exit status; SIGKILL and SIGTERM in the middle of a write and of a run; a second writer to
the same output; stale temporary files; re-runs that check what they keep; the memory of loading a zip bomb."""
import glob
import hashlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time

import numpy as np
import pytest

from oilca import contract

import envs
import runner
import train_bc
import train_ivae
from conftest import ROOT, one_line_error, run

PY = sys.executable


def sha(path):
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def folder_state(folder):
    return {os.path.relpath(p, folder): sha(p) for p in glob.glob(os.path.join(folder, "**"), recursive=True)
            if os.path.isfile(p)}


def leftovers(folder):
    """Temporary files, run folders and locks beside or inside `folder`'s parent."""
    return sorted(glob.glob(os.path.join(folder, ".*.tmp")) + glob.glob(os.path.join(folder, ".*.old"))
                  + glob.glob(os.path.join(folder, "*.lock")))


def wait_for(predicate, timeout=60.0, what="condition"):
    t0 = time.time()
    while not predicate():
        if time.time() - t0 > timeout:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.05)


def bad_bounds(tiny_dataset, folder):
    """A copy of the tiny dataset whose action bounds are equal (the issue's NaN-policy example)."""
    with np.load(tiny_dataset) as z:
        arrays = {k: z[k] for k in z.files}
    meta = json.loads(str(arrays["metadata"]))
    meta["action_high"] = list(meta["action_low"])
    arrays["metadata"] = np.array(json.dumps(meta))
    path = os.path.join(folder, "equal_bounds.npz")
    contract.save_npz(path, arrays)
    return path


# ---------------------------------------------------------------------------------------------- one subprocess per CLI
CLI = [
    ("collect_data.py", lambda d, t, b: ["--toy.env.episode-len", "0", "--out", f"{t}/x.npz"], "--toy.env.episode-len"),
    ("train_ivae.py", lambda d, t, b: ["--dataset", d, "--restarts", "0", "--out-dir", f"{t}/i"], "--restarts"),
    ("augment.py", lambda d, t, b: ["--dataset", d, "--ratio", "inf", "--out", f"{t}/a.npz"], "--ratio"),
    ("train_bc.py", lambda d, t, b: ["--dataset", d, "--total-steps", "0", "--out-dir", f"{t}/b"], "--total-steps"),
    ("train_dwbc.py", lambda d, t, b: ["--dataset", d, "--eta", "0", "--out-dir", f"{t}/w"], "--eta"),
    ("train_oril.py", lambda d, t, b: ["--dataset", b, "--out-dir", f"{t}/o"], "equal_bounds.npz"),
    ("train_bcnd.py", lambda d, t, b: ["--dataset", b, "--out-dir", f"{t}/n"], "equal_bounds.npz"),
    ("train_lobsdice.py", lambda d, t, b: ["--dataset", b, "--out-dir", f"{t}/l"], "equal_bounds.npz"),
    ("train_ilid.py", lambda d, t, b: ["--dataset", b, "--out-dir", f"{t}/il"], "equal_bounds.npz"),
    ("train_iswbc.py", lambda d, t, b: ["--dataset", b, "--out-dir", f"{t}/is"], "equal_bounds.npz"),
    ("evaluate.py", lambda d, t, b: ["--reference", "expert", "--env-dataset", d, "--episodes", "0"], "--episodes"),
    ("report.py", lambda d, t, b: ["--results", f"{t}/nowhere"], "nowhere"),
    ("envs/toy.py", lambda d, t, b: ["--episodes", "0"], "--episodes"),
    ("runner.py", lambda d, t, b: ["--root", t, "--steps", "0", "--dry-run"], "--steps"),
    ("train_behavior.py", lambda d, t, b: ["--total-steps", "0", "--out-dir", f"{t}/s"], "--total-steps"),
]


@pytest.mark.parametrize("script,argv,words", CLI, ids=[c[0][:-3] for c in CLI])
def test_every_cli_prints_one_line_and_exits_nonzero(script, argv, words, tiny_dataset, tmp_path):
    bad = bad_bounds(tiny_dataset, str(tmp_path))
    before = folder_state(str(tmp_path))
    proc = run(script, *argv(tiny_dataset, str(tmp_path), bad), ok=False, timeout=120)
    assert one_line_error(proc, words), proc.stderr
    assert proc.stderr.startswith("error: ")
    assert folder_state(str(tmp_path)) == before and sorted(os.listdir(tmp_path)) == ["equal_bounds.npz"]


# ---------------------------------------------------------------------------------------------- kills mid-write
WRITER = textwrap.dedent("""
    import os, sys, time
    sys.path.insert(0, {root!r})
    from oilca import contract

    def slow(f):
        f.write(b"partial " * 1000)
        f.flush()
        open({marker!r}, "w").close()
        time.sleep(60)

    contract.all_or_nothing(contract._atomic_write)({target!r}, slow)  # as inside a stage's main
""")


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_kill_mid_write(tmp_path, sig):
    """Killed inside a write: the target keeps its old content. SIGTERM cleans its temp file up at once; a SIGKILLed
    writer's temp file stays until the next write to the same target, which removes it."""
    target, marker = str(tmp_path / "out.json"), str(tmp_path / "marker")
    contract.save_text(target, "old")
    proc = subprocess.Popen([PY, "-c", WRITER.format(root=ROOT, marker=marker, target=target)],
                            stderr=subprocess.PIPE, text=True)
    wait_for(lambda: os.path.exists(marker), what="the writer")
    os.kill(proc.pid, sig)
    proc.wait(timeout=30)
    assert proc.returncode != 0
    temps = glob.glob(str(tmp_path / ".out.json.*.tmp"))
    assert open(target).read() == "old"  # the interrupted write never landed
    if sig == signal.SIGKILL:
        assert len(temps) == 1 and f".{proc.pid}." in temps[0]
    else:
        assert temps == [], temps
    contract.save_text(target, "new")
    assert open(target).read() == "new" and glob.glob(str(tmp_path / ".out.json.*")) == []


def test_stale_temp_files_of_live_writers_are_kept(tmp_path):
    target = str(tmp_path / "x.txt")
    dead = subprocess.Popen([PY, "-c", "pass"])
    dead.wait()
    names = {"live": f".x.txt.{os.getpid()}.0000aaaa.tmp", "dead": f".x.txt.{dead.pid}.0000bbbb.tmp",
             "old_style_new": ".x.txt.k3j9d0a1.tmp", "old_style_old": ".x.txt.z9z9z9z9.tmp",
             "other_target": f".y.txt.{dead.pid}.0000cccc.tmp", "dead_folder": f".x.txt.{dead.pid}.0000dddd.old"}
    for key, name in names.items():
        if key == "dead_folder":
            os.makedirs(tmp_path / name / "sub")
        else:
            (tmp_path / name).write_text("x")
    hour_ago = time.time() - 2 * contract.STALE_AGE_S
    os.utime(tmp_path / names["old_style_old"], (hour_ago, hour_ago))
    contract.save_text(target, "ok")
    assert sorted(os.listdir(tmp_path)) == sorted(["x.txt", names["live"], names["old_style_new"], names["other_target"]])


# ---------------------------------------------------------------------------------------------- kills mid-run
LONG = ["--total-steps", "10000000", "--eval-every", "0", "--eval-episodes", "0", "--hidden", "8", "--threads", "1"]


def start_long_run(dataset, out):
    proc = subprocess.Popen([PY, "train_bc.py", "--dataset", dataset, "--out-dir", out, *LONG], cwd=ROOT,
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    parent, name = os.path.split(out)
    wait_for(lambda: glob.glob(os.path.join(parent, f".{name}.{proc.pid}.*.tmp")) and os.path.exists(out + ".lock"),
             what="the run's temporary folder and lock")
    return proc


@pytest.mark.parametrize("sig", [signal.SIGKILL, signal.SIGTERM], ids=["SIGKILL", "SIGTERM"])
def test_kill_mid_run_never_mixes_two_runs(tiny_dataset, tmp_path, sig):
    """SIGTERM (as SIGINT) puts the previous run folder back whole. SIGKILL cannot clean up: --out-dir then holds the
    killed run's logs and no results (never a policy.pt of one run beside args.json of another), the previous run
    is whole in the `.old` folder beside it, and the next run to --out-dir removes what the killed one left."""
    out = str(tmp_path / "bc")
    train_bc.main(train_bc.Args(dataset=tiny_dataset, out_dir=out, total_steps=5, hidden=8, eval_episodes=0, threads=1))
    before = folder_state(out)
    assert set(before) == {"policy.pt", "args.json", "progress.csv"}
    proc = start_long_run(tiny_dataset, out)
    os.kill(proc.pid, sig)
    proc.wait(timeout=60)
    assert proc.returncode != 0
    left = leftovers(str(tmp_path))
    if sig == signal.SIGTERM:
        assert folder_state(out) == before and left == [], left
    else:
        assert not {"policy.pt", "args.json"} & set(os.listdir(out))
        old = [p for p in left if p.endswith(".old")]
        assert len(old) == 1 and folder_state(old[0]) == before and len(left) == 3, left  # .old, staging .tmp, lock
    train_bc.main(train_bc.Args(dataset=tiny_dataset, out_dir=out, total_steps=6, hidden=8, eval_episodes=0, threads=1))
    assert leftovers(str(tmp_path)) == [] and json.load(open(os.path.join(out, "args.json")))["total_steps"] == 6
    assert sorted(os.listdir(out)) == [".oilca-run", "args.json", "policy.pt", "progress.csv"]


def test_a_failed_run_writes_nothing_and_the_next_commit_is_whole(tiny_dataset, tmp_path):
    out = str(tmp_path / "bc")
    with pytest.raises(ValueError, match="diverged"):
        train_bc.main(train_bc.Args(dataset=tiny_dataset, out_dir=out, total_steps=20, eval_every=10, hidden=8,
                                    lr=1e30, eval_episodes=0, threads=1))
    assert os.listdir(tmp_path) == []
    train_bc.main(train_bc.Args(dataset=tiny_dataset, out_dir=out, total_steps=5, hidden=8, eval_episodes=0, threads=1,
                                tensorboard=True))
    assert sorted(os.listdir(out)) == [".oilca-run", "args.json", "policy.pt", "progress.csv", "tb"] and leftovers(str(tmp_path)) == []


# ---------------------------------------------------------------------------------------------- concurrency
def test_a_second_trainer_on_the_same_out_dir_is_refused(tiny_dataset, tmp_path):
    out = str(tmp_path / "bc")
    first = start_long_run(tiny_dataset, out)
    try:
        second = run("train_bc.py", "--dataset", tiny_dataset, "--out-dir", out, "--total-steps", "5", ok=False, timeout=120)
        assert one_line_error(second, f"another run (pid {first.pid}) is writing it"), second.stderr
        assert out in second.stderr and first.poll() is None  # the first run goes on
    finally:
        first.send_signal(signal.SIGTERM)
        first.wait(timeout=60)
    assert not os.path.exists(out) and leftovers(str(tmp_path)) == []


def test_a_second_collection_to_the_same_out_is_refused(tmp_path):
    out = str(tmp_path / "toy.npz")
    flags = ["--toy.n-classes", "2", "--toy.episodes-per-class", "4", "--toy.env.episode-len", "10"]
    held = contract.claim(out)  # a collection to `out` in progress (the lock collect_data.py takes)
    try:
        second = run("collect_data.py", "--out", out, *flags, ok=False, timeout=120)
        assert one_line_error(second, f"another run (pid {os.getpid()}) is writing it"), second.stderr
        assert not os.path.exists(out)
    finally:
        held.release()
    assert "wrote" in run("collect_data.py", "--out", out, *flags).stdout and not os.path.exists(out + ".lock")


def test_two_collections_at_once_write_once(tmp_path):
    """Started together: one writes; the other is refused while the first holds --out, or (if it starts after the
    first has finished) keeps the identical file. Never two writes where the last silently wins."""
    out = str(tmp_path / "toy.npz")
    flags = ["--toy.n-classes", "2", "--toy.episodes-per-class", "2000", "--toy.env.episode-len", "50"]
    procs = [subprocess.Popen([PY, "collect_data.py", "--out", out, *flags], cwd=ROOT, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for _ in range(2)]
    outs = [p.communicate(timeout=300) + (p.returncode,) for p in procs]
    wrote = [o for o in outs if o[2] == 0 and "wrote" in o[0]]
    others = [o for o in outs if o not in wrote]
    assert len(wrote) == 1 and len(others) == 1, outs
    stdout, stderr, code = others[0]
    assert (code != 0 and len(stderr.strip().splitlines()) == 1 and "another run" in stderr) or \
           (code == 0 and "kept" in stdout), others[0]
    envs.load_dataset(out)
    assert not os.path.exists(out + ".lock")


def test_claims_in_one_process(tmp_path):
    out = str(tmp_path / "r" / "x.json")
    held = contract.claim(out)
    try:
        with pytest.raises(contract.ContractError, match=r"another run \(pid \d+\) is writing it"):
            contract.claim(out)
    finally:
        held.abort()
    assert os.listdir(tmp_path) == []  # the lock and the folder made for it are gone
    contract.claim(out).release()


# ---------------------------------------------------------------------------------------------- re-runs that keep work
def test_ivae_rerun_checks_the_kept_checkpoint(tiny_dataset, tmp_path, capsys):
    out = str(tmp_path / "ivae")
    args = train_ivae.Args(dataset=tiny_dataset, out_dir=out, total_steps=20, restarts=1, compare=False, hidden=8,
                           log_every=20, threads=1)
    train_ivae.main(args)
    train_ivae.main(args)
    assert "already holds this fit: kept" in capsys.readouterr().out
    ckpt = os.path.join(out, "ivae.pt")
    data = open(ckpt, "rb").read()
    with open(ckpt, "wb") as f:
        f.write(data[: len(data) // 2])
    train_ivae.main(args)
    printed = capsys.readouterr().out
    assert "damaged" in printed and "re-fitting" in printed and "already holds this fit" not in printed
    contract.load_checkpoint(ckpt, "ivae")  # whole again


def test_runner_skip_rule_checks_the_outputs(tmp_path):
    out = str(tmp_path / "traj.png")
    job = runner.Job("plot", "plot", ["envs/toy.py", "--episodes", "1", "--n-classes", "2", "--plot-path", out],
                     outputs=[out], log=str(tmp_path / "plot.log"), record=str(tmp_path / "plot.json"))
    assert runner.execute(job)["ok"] and runner.up_to_date(job)
    data = open(out, "rb").read()
    with open(out, "wb") as f:
        f.write(data[:100])  # truncated behind the runner's back
    assert not runner.up_to_date(job)


# ---------------------------------------------------------------------------------------------- bounded memory
RSS = textwrap.dedent("""
    import sys
    sys.path.insert(0, {root!r})
    import envs
    from oilca import contract
    try:
        envs.load_dataset({path!r})
        print("loaded")
    except contract.ContractError as e:
        print("refused:", e)
    # the peak resident memory of this process since its exec (getrusage's ru_maxrss would also count the memory of
    # the forked parent, pytest with torch loaded)
    print(next(int(l.split()[1]) for l in open("/proc/self/status") if l.startswith("VmHWM:")) // 1024)
""")


def peak_rss_mb(path):
    proc = subprocess.run([PY, "-c", RSS.format(root=ROOT, path=path)], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    lines = proc.stdout.strip().splitlines()
    return lines[0], int(lines[-1])


def test_oversized_archives_are_refused_before_they_are_inflated(tiny_dataset, tmp_path):
    """A 673 MB member in ~650 KB of zip, and 100 MB of consistent arrays in ~100 KB: both refused from their headers,
    with the loader's peak memory that of a tiny load (printed: pytest -s)."""
    import test_corpus

    inp = test_corpus.Inputs(str(tmp_path), tiny_dataset, None, None, None)
    base_msg, base = peak_rss_mb(tiny_dataset)
    assert base_msg == "loaded"
    for name in ("member_bomb.npz", "consistent_bomb.npz"):
        path = inp(name)
        msg, peak = peak_rss_mb(path)
        print(f"{name}: {os.path.getsize(path) / 1e3:.0f} KB on disk, peak RSS {peak} MB (valid tiny dataset: {base} MB): {msg}")
        assert msg.startswith(f"refused: {path}")
        assert peak < base + 30
