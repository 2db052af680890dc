#!/usr/bin/env bash
# The GPU check: on a machine with one GPU, within 10 minutes, train DWBC and OILCA × 5 seeds at the paper's
# 200k-step budget on the DeepMind Control cartpole-swingup data, each method as one process of 5 batched replicas,
# and print replica-updates/s for 1 and 5 replicas next to this project's CPU figure. It builds nothing it can take
# from disk: the datasets are made beforehand on a CPU (scripts/gpu_check_data.sh) and copied along (about 20 MB).
# Policies are evaluated afterwards where dm_control is installed (the GPU machine needs only torch, tyro and
# numpy<2, the pinned 1.26.4):
#   .venv/bin/python evaluate.py --policy OUT/dwbc_s0/policy.pt --episodes 30 --out results/gpu_check/dwbc_s0_{split}.json
# Usage: bash scripts/gpu_check.sh DATA_DIR OUT_DIR
# Knobs: PY (python3), DEVICE (cuda; cpu for a smoke run), STEPS (200000), SEEDS ("0 1 2 3 4"), BENCH (1: run
# scripts/benchmark_replicas.py first; 0: skip), BENCH_FLAGS (more benchmark flags).
set -euo pipefail
cd "$(dirname "$0")/.."
DATA=${1:?usage: bash scripts/gpu_check.sh DATA_DIR OUT_DIR}
OUT=${2:?usage: bash scripts/gpu_check.sh DATA_DIR OUT_DIR}
PY=${PY:-python3}
DEVICE=${DEVICE:-cuda}
STEPS=${STEPS:-200000}
SEEDS=${SEEDS:-"0 1 2 3 4"}
raw=$DATA/dmc_cartpole-swingup.npz
aug=$DATA/dmc_cartpole-swingup_aug_r0.5.npz
for f in $raw $aug; do [ -f "$f" ] || { echo "gpu_check: $f not found (make it with scripts/gpu_check_data.sh)" >&2; exit 2; }; done
mkdir -p "$OUT"
cuda=(); [ "$DEVICE" = cuda ] && cuda=(--cuda)
$PY -c "import torch; d = torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU'; print(f'torch {torch.__version__}, device: {d}')"

if [ "${BENCH:-1}" = 1 ]; then
  $PY scripts/benchmark_replicas.py --device "$DEVICE" ${BENCH_FLAGS:-} | tee "$OUT/benchmark.txt"
fi

# in-training evaluation is off (--eval-episodes 0): the rollouts need dm_control, evaluation runs afterwards
train() {  # NAME DATASET [flags]
  local name=$1 data=$2; shift 2
  local t0=$(date +%s.%N)
  $PY fast/train_dwbc.py --dataset "$data" --seeds $SEEDS --total-steps "$STEPS" --eval-every 0 --eval-episodes 0 \
    --out-dir "$OUT/${name}_s{seed}" "${cuda[@]}" "$@" > "$OUT/$name.log" 2>&1 || { tail -n 20 "$OUT/$name.log" >&2; exit 1; }
  local dt=$($PY -c "import time; print(f'{time.time() - $t0:.1f}')")
  local n=$(echo $SEEDS | wc -w)
  echo "$name: $n replicas × $STEPS steps in $dt s = $($PY -c "print(f'{$n * $STEPS / $dt:.0f}')") replica-updates/s (wall, start-up and saving included)"
  tail -n 1 "$OUT/$name.log"
}
train dwbc "$raw"
train oilca "$aug" --method oilca
tar -cf "$OUT/policies.tar" -C "$OUT" $(cd "$OUT" && ls -d dwbc_s* oilca_s* | sed 's|$|/policy.pt|')
echo "gpu_check done: $OUT/policies.tar, logs in $OUT"
