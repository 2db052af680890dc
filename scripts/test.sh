#!/usr/bin/env bash
# The test command: set up .venv if needed (with the optional Ray backend, which tests/test_runner.py checks), then
# run the whole suite (unit, in-process and subprocess smoke tests). Extra arguments go to pytest, e.g. -m "not slow".
set -euo pipefail
cd "$(dirname "$0")/.."
WITH_RAY=1 bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
exec .venv/bin/python -m pytest -q tests "$@"
