#!/usr/bin/env bash
# The main job: the whole toy pipeline of OILCA (§5.1, Alg. 1, Fig. 3–5) on a CPU, run by runner.py:
#   collect → iVAE and BC-exp → augment → BC-all, DWBC, OILCA (+ Fig. 5 ratios) × 5 seeds → evaluation → report
# into data/, runs/toy/ and results/toy/ (table.md, fig4.png, fig5.png, timing.json; Fig. 3 in runs/toy/ivae/).
# Finished jobs are skipped on a second run. Arguments go to runner.py, e.g.
#   bash scripts/toy_pipeline.sh --methods bc_exp bc_all dwbc oilca baselines     (adds ORIL, BCND, LobsDICE, +CA)
#   bash scripts/toy_pipeline.sh --methods bc_exp bc_all dwbc oilca newer         (adds ILID, ISW-BC and their +CA)
#   bash scripts/toy_pipeline.sh --dry-run                                        (list the jobs, run nothing)
#   bash scripts/toy_pipeline.sh --help
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
exec .venv/bin/python runner.py --benchmark toy "$@"
