#!/usr/bin/env bash
# The main job: the toy pipeline of OILCA §5.1 on a CPU, each stage a standalone script.
#   1. collect_data.py  D_all = D_E ∪ D_U with the class label c          -> data/toy.npz
#   2. train_ivae.py    conditional iVAE (+ the no-c ablation), MCC, Fig. 3 -> runs/ivae/
# Stages keep outputs made with the same arguments (pass FORCE=1 to rebuild everything).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=.venv/bin/python
force=(); [ "${FORCE:-0}" = 1 ] && force=(--force)
start=$(date +%s)
$PY collect_data.py --env toy --out data/toy.npz --seed 0 "${force[@]}"
$PY train_ivae.py --dataset data/toy.npz --out-dir runs/ivae --seed 0 "${force[@]}"
echo "toy pipeline done in $(( $(date +%s) - start ))s: data/toy.npz, runs/ivae/{ivae.pt,latents.npz,metrics.json,fig3.png}"
