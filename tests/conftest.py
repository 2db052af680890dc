"""Shared test helpers: the repo on sys.path, one subprocess runner for every script, and tiny session fixtures.

Markers (pytest.ini): `slow` (over ~30 s on a 2-core CPU), `dmc` (needs dm_control), `cw` (needs causal-world);
e.g. `bash scripts/test.sh -m "not slow"` for a quick pass.
"""
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def run(*argv, ok=True, env=None, timeout=600, unset=()):
    """Run `python <argv>` from the repo root as a user would (`env` added to the environment, the variables named in
    `unset` removed); with ok=True, fail the test on a non-zero exit (showing its output). Returns the
    CompletedProcess (stdout, stderr as text)."""
    base = {k: v for k, v in os.environ.items() if k not in unset}
    proc = subprocess.run([sys.executable, *argv], cwd=ROOT, capture_output=True, text=True, timeout=timeout,
                          env={**base, **(env or {})})
    if ok:
        assert proc.returncode == 0, f"{argv} exited {proc.returncode}:\n{proc.stdout[-3000:]}\n{proc.stderr[-3000:]}"
    return proc


def load_script(name: str):
    """A fresh module object for `scripts/<name>.py` (the helper scripts are not a package). Fresh on every call, so a
    test that sets a module global (e.g. findings.ROOT) leaves no trace in another test."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(name, os.path.join(ROOT, "scripts", f"{name}.py"))
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def one_line_error(proc, words: str) -> bool:
    """A refused input: non-zero exit and exactly one line on stderr that contains `words`."""
    lines = proc.stderr.strip().splitlines()
    return proc.returncode != 0 and len(lines) == 1 and words in lines[0]


@pytest.fixture(scope="session")
def tiny_dataset(tmp_path_factory):
    """A small valid toy dataset written by collect_data.main (2 classes, 6 episodes each)."""
    import collect_data
    from envs.toy import ToyConfig

    path = str(tmp_path_factory.mktemp("data") / "tiny.npz")
    collect_data.main(collect_data.Args(out=path, toy=ToyConfig(n_classes=2, episodes_per_class=6), seed=3))
    return path


@pytest.fixture(scope="session")
def tiny_ivae(tiny_dataset, tmp_path_factory):
    """An iVAE checkpoint fit (briefly) on tiny_dataset."""
    import train_ivae

    out = str(tmp_path_factory.mktemp("ivae"))
    train_ivae.main(train_ivae.Args(dataset=tiny_dataset, out_dir=out, total_steps=100, restarts=1, compare=False,
                                    hidden=16, log_every=100))
    return os.path.join(out, "ivae.pt")


@pytest.fixture(scope="session")
def tiny_augmented_args(tiny_dataset, tiny_ivae, tmp_path_factory):
    """tiny_dataset augmented by augment.main (ratio 0.4, a 50-step sampler), as the augment.Args it ran with."""
    import augment

    folder = tmp_path_factory.mktemp("aug")
    args = augment.Args(dataset=tiny_dataset, ivae=tiny_ivae, out=str(folder / "aug.npz"),
                        sampler_out=str(folder / "sampler" / "policy.pt"), ratio=0.4, sampler_steps=50, hidden=32, seed=1)
    augment.main(args)
    return args


# The files whose end-to-end grids take minutes: collected first, so that with two workers (scripts/test.sh,
# `--dist loadfile` hands out files in collection order) they start at once and the many short files fill in after
# them, instead of one long file starting last and running alone. The order within a file is kept.
LONG_FIRST = ("test_label_sources.py", "test_runner.py", "test_runner_budgets.py", "test_smoke.py")


def pytest_collection_modifyitems(config, items):
    rank = {name: i for i, name in enumerate(LONG_FIRST)}
    items.sort(key=lambda item: rank.get(os.path.basename(str(item.fspath)), len(rank)))  # a stable sort
