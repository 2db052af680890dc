"""Install: portable pins (no local version labels such as +cpu, which only PyTorch's own index serves), a lock that
agrees with the direct pins, and scripts/setup.sh's checks, which stop with one line before anything is created or
downloaded."""

import glob
import os
import re
import shutil
import subprocess

from conftest import ROOT

PIN = re.compile(r"^\s*([A-Za-z0-9][A-Za-z0-9._-]*)(\[[^\]]*\])?\s*==\s*([^\s;#]+)")


def pins(path):
    """{normalised name: version} of the `name==version` lines of a requirement file."""
    out = {}
    for line in open(path):
        m = PIN.match(line.split("#")[0])
        if m:
            out[re.sub(r"[-_.]+", "-", m.group(1)).lower()] = m.group(3)
    return out


def test_no_pin_carries_a_local_version_label():
    files = sorted(glob.glob(os.path.join(ROOT, "requirements*.txt")))
    assert len(files) >= 4
    for path in files:
        found = pins(path)
        assert found, path
        bad = {name: v for name, v in found.items() if "+" in v}
        assert not bad, f"{os.path.basename(path)}: local version labels resolve only on their own index: {bad}"


def test_lock_agrees_with_the_direct_pins():
    lock = pins(os.path.join(ROOT, "requirements-lock.txt"))
    for name in ("requirements-core.txt", "requirements.txt", "requirements-minari.txt", "requirements-nodeps.txt",
                 "requirements-track.txt"):
        for pkg, version in pins(os.path.join(ROOT, name)).items():
            assert lock.get(pkg) == version, f"{name}: {pkg}=={version}, lock: {lock.get(pkg)}"


def test_license():
    text = open(os.path.join(ROOT, "LICENSE")).read()
    assert text.startswith("MIT License") and "Copyright (c) 2026 the oilca authors" in text


def setup_copy(tmp_path, fake_version):
    """scripts/setup.sh in an empty folder, with a stand-in interpreter that reports `fake_version`."""
    (tmp_path / "scripts").mkdir()
    shutil.copy(os.path.join(ROOT, "scripts", "setup.sh"), tmp_path / "scripts" / "setup.sh")
    fake = tmp_path / "python-fake"
    fake.write_text(f"#!/bin/sh\necho {fake_version}\n")
    fake.chmod(0o755)
    return str(tmp_path / "scripts" / "setup.sh"), str(fake)


def test_setup_refuses_an_unsupported_python_before_anything(tmp_path):
    script, fake = setup_copy(tmp_path, "3.13")
    env = {k: v for k, v in os.environ.items() if k != "ANY_PYTHON"}
    proc = subprocess.run(["bash", script], env={**env, "PYTHON": fake}, capture_output=True, text=True, timeout=60)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode != 0 and len(lines) == 1, proc.stderr
    assert "Python 3.13" in lines[0] and "ANY_PYTHON=1" in lines[0]
    assert not (tmp_path / ".venv").exists()  # nothing created, nothing downloaded


def test_setup_refuses_two_torch_choices(tmp_path):
    script, fake = setup_copy(tmp_path, "3.11")
    proc = subprocess.run(["bash", script], env={**os.environ, "PYTHON": fake, "TORCH": "cpu",
                                                 "TORCH_INDEX_URL": "https://example.invalid/whl"},
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode != 0 and proc.stderr.strip() == "setup: error: set TORCH or TORCH_INDEX_URL, not both"
    assert not (tmp_path / ".venv").exists()
