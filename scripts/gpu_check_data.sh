#!/usr/bin/env bash
# The data of the GPU check (scripts/gpu_check.sh), made on a CPU: the DeepMind Control cartpole-swingup dataset of
# the runner's preset (SAC behaviour snapshots at 10k/30k/60k/100k/200k steps, 200 episodes under 3 perturbation
# classes, data seed 0), its iVAE (10k steps) and one augmented dataset (ratio 0.5, augmentation seed 0, the sampler
# π̂_E trained by augment.py on D_E), so that the five OILCA replicas of the check share one augmented dataset.
# Usage: bash scripts/gpu_check_data.sh DATA_DIR [SAC_DIR]   (SAC_DIR: an existing train_behavior.py run to reuse;
# default runs/dmc_cartpole-swingup/sac, the runner's, trained here if missing: about 30 min on one core)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=.venv/bin/python
DATA=${1:?usage: bash scripts/gpu_check_data.sh DATA_DIR [SAC_DIR]}
SAC=${2:-runs/dmc_cartpole-swingup/sac}
mkdir -p "$DATA"
[ -f "$SAC/snapshots/step_200000.pt" ] || $PY train_behavior.py --env dmc:cartpole-swingup --out-dir "$SAC" \
  --total-steps 200000 --update-every 2 --resume
snaps=(); for s in 10000 30000 60000 100000 200000; do snaps+=("$SAC/snapshots/step_$s.pt"); done
$PY collect_data.py --env dmc:cartpole-swingup --out "$DATA/dmc_cartpole-swingup.npz" --seed 0 \
  --dmc.snapshots "${snaps[@]}" --dmc.episodes 200
$PY train_ivae.py --dataset "$DATA/dmc_cartpole-swingup.npz" --out-dir "$DATA/ivae" --seed 0 --total-steps 10000 \
  --threads 1 --no-compare
$PY augment.py --dataset "$DATA/dmc_cartpole-swingup.npz" --ivae "$DATA/ivae/ivae.pt" --ratio 0.5 --seed 0 \
  --out "$DATA/dmc_cartpole-swingup_aug_r0.5.npz" --sampler-out "$DATA/sampler/policy.pt"
ls -la "$DATA"/*.npz
