#!/usr/bin/env bash
# Create .venv beside the scripts (once) and install the pinned requirements; re-installs only when the
# requirement files change. Every other script in this folder calls it first, so a fresh clone just works.
# WITH_RAY=1 also installs requirements-ray.txt (the runner's optional Ray backend).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
case "$($PY -c 'import sys; print("%d.%d" % sys.version_info[:2])')" in
  3.11) ;;
  *) echo "setup: warning: tested on Python 3.11 only (pybullet has no wheel for newer Pythons)" >&2 ;;
esac
[ -x .venv/bin/python ] || $PY -m venv .venv
stamp=.venv/.requirements.sha256
want=$(cat requirements.txt requirements-lock.txt requirements-nodeps.txt | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  echo "setup: installing requirements into .venv (first run takes a couple of minutes)" >&2
  .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements.txt -c requirements-lock.txt
  # CausalWorld 1.2 pins pybullet==2.8.5 (no Python 3.11 wheel) and docs tools; it runs with the pybullet 3.2.7 and
  # gym 0.26.2 of requirements.txt, so it is installed without its declared dependencies (cw_env.py shims the rest).
  .venv/bin/python -m pip install -q --disable-pip-version-check --no-deps -r requirements-nodeps.txt
  # pip check, minus the complaints about causal-world's own (deliberately unmet) pins
  problems=$(.venv/bin/python -m pip check 2>&1 | grep -Ev '^No broken requirements|^causal-world 1\.2 (requires (catkin-pkg|sphinx|sphinx-rtd-theme),|has requirement pybullet==2\.8\.5,)' || true)
  if [ -n "$problems" ]; then echo "$problems" >&2; exit 1; fi
  echo "$want" > "$stamp"
fi
if [ "${WITH_RAY:-0}" = 1 ]; then
  ray_stamp=.venv/.requirements-ray.sha256
  ray_want=$(cat requirements-ray.txt requirements-lock.txt | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$ray_stamp" 2>/dev/null)" != "$ray_want" ]; then
    echo "setup: installing requirements-ray.txt into .venv" >&2
    .venv/bin/python -m pip install -q --disable-pip-version-check -r requirements-ray.txt -c requirements-lock.txt
    echo "$ray_want" > "$ray_stamp"
  fi
fi
