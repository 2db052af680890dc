#!/usr/bin/env bash
# Create .venv beside the scripts (once) and install the pinned requirements; re-installs only when the
# requirement files (or the torch build) change. Every other script in this folder calls it first, so a fresh clone
# just works. Environment variables (docs/install.md):
#   PYTHON=python3.11      the interpreter that creates .venv (default python3); Python 3.11 only, checked first
#   ANY_PYTHON=1           try another Python anyway (pybullet, which CausalWorld needs, then builds from source)
#   TORCH=cpu | cu126 | …  the torch build: wheels from https://download.pytorch.org/whl/$TORCH
#   TORCH_INDEX_URL=URL    the torch build from any other index (a mirror); default (neither set): the default
#                          index, like every other package (PyPI: a CUDA build on Linux x86_64, CPU elsewhere)
#   CORE_ONLY=1            the core set alone (requirements-core.txt: no MuJoCo, dm_control, PyBullet, gym or
#                          CausalWorld), e.g. with WITH_MINARI=1 for gymnasium/Minari data; the default adds them
#   SETUP_VERBOSE=1        show pip's own output
#   WITH_RAY=1             also requirements-ray.txt (the runner's optional Ray backend)
#   WITH_MINARI=1          also requirements-minari.txt (Minari import/export, the gymnasium backend)
#   WITH_TRACK=1           also requirements-track.txt (the trainers' --track: Weights & Biases)
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PYTHON:-python3}
[ -x .venv/bin/python ] && PY=.venv/bin/python  # an existing .venv is checked, not the interpreter that would make one
# The Python check comes before anything is created or downloaded.
ver=$("$PY" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null) \
  || { echo "setup: error: cannot run the Python interpreter '$PY' (set PYTHON=/path/to/python3.11)" >&2; exit 1; }
if [ "$ver" != 3.11 ] && [ "${ANY_PYTHON:-0}" != 1 ]; then
  echo "setup: error: Python $ver ($PY) is not supported: use 3.11 (PYTHON=/path/to/python3.11, and remove .venv if it was made with $ver), or ANY_PYTHON=1 to try anyway (docs/install.md)" >&2
  exit 1
fi
[ "$ver" = 3.11 ] || echo "setup: warning: ANY_PYTHON=1 with Python $ver: pybullet builds from source (or fails), see docs/install.md" >&2
if [ -n "${TORCH:-}" ] && [ -n "${TORCH_INDEX_URL:-}" ]; then
  echo "setup: error: set TORCH or TORCH_INDEX_URL, not both" >&2; exit 1
fi
torch_index=${TORCH_INDEX_URL:-${TORCH:+https://download.pytorch.org/whl/$TORCH}}
torch_pin=$(grep -E '^torch==' requirements-core.txt)
base=requirements.txt  # the default set; CORE_ONLY=1: the core set alone (no MuJoCo, dm_control, PyBullet, CausalWorld)
[ "${CORE_ONLY:-0}" = 1 ] && base=requirements-core.txt
say() { echo "setup: $*" >&2; }
t0=$SECONDS
if [ ! -x .venv/bin/python ]; then
  say "creating .venv with $PY (Python $ver)"
  "$PY" -m venv .venv
fi
PIP=(.venv/bin/python -m pip install -q --disable-pip-version-check)
[ "${SETUP_VERBOSE:-0}" = 1 ] && PIP=(.venv/bin/python -m pip install --disable-pip-version-check)
stamp=.venv/.requirements.sha256
want=$( (cat "$base" requirements-core.txt requirements-lock.txt; [ "$base" = requirements.txt ] && cat requirements-nodeps.txt
         echo "torch index: $torch_index") | sha256sum | cut -d' ' -f1)
if [ "$(cat "$stamp" 2>/dev/null)" != "$want" ]; then
  if ! .venv/bin/python -c "import torch" 2>/dev/null || [ -n "$torch_index" ]; then
    if [ -n "$torch_index" ]; then
      say "[1/3] $torch_pin, the build from $torch_index (pick another with TORCH=cpu|cu126|… or TORCH_INDEX_URL)"
      # The chosen build first, alone (its +cpu / +cu126 label still satisfies the plain pin); its dependencies come
      # from the default index with the rest, below.
      "${PIP[@]}" --no-deps --force-reinstall --index-url "$torch_index" "$torch_pin"
    else
      case "$(uname -s)-$(uname -m)" in
        Linux-x86_64) build="on Linux x86_64 PyPI's build is the CUDA one (a download of several GB; about 5.6 GB in .venv); a CPU-only install (a 192 MB wheel, 754 MB in .venv): TORCH=cpu bash scripts/setup.sh" ;;
        *) build="here PyPI's build is the CPU one (under 1 GB); a CUDA one: TORCH=cu126 bash scripts/setup.sh" ;;
      esac
      say "[1/3] $torch_pin from the default index: $build"
    fi
  fi
  say "[2/3] installing $base$([ "$base" = requirements.txt ] && echo " (the core set, DeepMind Control, CausalWorld's simulators)") into .venv: a couple of minutes (SETUP_VERBOSE=1 shows pip's output)"
  "${PIP[@]}" -r "$base" -c requirements-lock.txt
  if [ "$base" = requirements.txt ]; then
    # CausalWorld 1.2 pins pybullet==2.8.5 (no Python 3.11 wheel) and docs tools; it runs with the pybullet 3.2.7 and
    # gym 0.26.2 of requirements.txt, so it is installed without its declared dependencies (cw_env.py shims the rest).
    say "[3/3] causal-world 1.2 without its declared dependencies (requirements-nodeps.txt), then pip check"
    "${PIP[@]}" --no-deps -r requirements-nodeps.txt
  else
    say "[3/3] pip check (CORE_ONLY=1: no MuJoCo, dm_control, PyBullet, gym or CausalWorld)"
  fi
  # pip check, minus the complaints about causal-world's own (deliberately unmet) pins
  problems=$(.venv/bin/python -m pip check 2>&1 | grep -Ev '^No broken requirements|^causal-world 1\.2 (requires (catkin-pkg|sphinx|sphinx-rtd-theme),|has requirement pybullet==2\.8\.5,)' || true)
  if [ -n "$problems" ]; then echo "$problems" >&2; exit 1; fi
  echo "$want" > "$stamp"
  changed=1
fi
# optional sets: WITH_<NAME>=1 installs requirements-<name>.txt (re-installed when it or the lock changes)
for extra in ray minari track; do
  flag=WITH_$(echo "$extra" | tr a-z A-Z)
  [ "${!flag:-0}" = 1 ] || continue
  extra_stamp=.venv/.requirements-$extra.sha256
  extra_want=$(cat "requirements-$extra.txt" requirements-lock.txt | sha256sum | cut -d' ' -f1)
  if [ "$(cat "$extra_stamp" 2>/dev/null)" != "$extra_want" ]; then
    say "installing requirements-$extra.txt into .venv"
    "${PIP[@]}" -r "requirements-$extra.txt" -c requirements-lock.txt
    echo "$extra_want" > "$extra_stamp"
    changed=1
  fi
done
if [ "${changed:-0}" = 1 ]; then
  say "done in $((SECONDS - t0)) s: .venv is $(du -sh .venv 2>/dev/null | cut -f1)"
fi
