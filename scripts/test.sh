#!/usr/bin/env bash
# The test command: set up .venv if needed (with the optional Ray backend, Minari and tracking sets, which
# tests/test_runner.py, tests/test_minari.py and tests/test_tracking.py check), then run the whole suite (unit,
# in-process and subprocess smoke tests). Extra arguments go to pytest, e.g. -m "not slow". Nothing renders: no GL
# library is needed (MUJOCO_GL may stay unset).
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_RAY=1 WITH_MINARI=1 WITH_TRACK=1 bash scripts/setup.sh
# Two test files at a time (pytest-xdist; each file stays on one worker, so a module's fixtures are built once), each
# torch process on one thread: on 2 cores this halves the wall time of the single-process tests. TEST_WORKERS=0 runs
# the suite in one process.
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
workers=${TEST_WORKERS:-2}
if [ "$workers" = 0 ]; then
  exec .venv/bin/python -m pytest -q tests "$@"
fi
exec .venv/bin/python -m pytest -q -n "$workers" --dist loadfile tests "$@"
