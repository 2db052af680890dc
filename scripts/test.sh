#!/usr/bin/env bash
# The test command: set up .venv if needed, then run the whole suite (unit, in-process and subprocess smoke tests).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
exec .venv/bin/python -m pytest -q tests "$@"
