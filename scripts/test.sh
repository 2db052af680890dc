#!/usr/bin/env bash
# The test command: set up .venv if needed (with the optional Ray backend, Minari and tracking sets, which
# tests/test_runner.py, tests/test_minari.py and tests/test_tracking.py check), then run the whole suite (unit,
# in-process and subprocess smoke tests). Extra arguments go to pytest, e.g. -m "not slow". Nothing renders: no GL
# library is needed (MUJOCO_GL may stay unset).
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_RAY=1 WITH_MINARI=1 WITH_TRACK=1 bash scripts/setup.sh
exec .venv/bin/python -m pytest -q tests "$@"
