#!/usr/bin/env bash
# Identifiability benchmark: MCC of the iVAE vs the no-c ablation for C classes over seeds.
# Each (C, seed) collects its own toy dataset and fits both models with train_ivae.py's defaults; two runs go
# in parallel (one per core). The table is rebuilt from runs/mcc/*/metrics.json by scripts/mcc_table.py.
#   CLASSES="3 5 10" SEEDS="0 1 2 3 4" bash scripts/ivae_mcc.sh        (about 40 min on 2 cores)
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=.venv/bin/python
CLASSES=${CLASSES:-"3 5 10"}
SEEDS=${SEEDS:-"0 1 2 3 4"}
mkdir -p data/mcc runs/mcc
one() {
  local C=$1 seed=$2 name="C${1}_s${2}"
  $PY collect_data.py --out data/mcc/$name.npz --toy.n-classes $C --seed $seed > runs/mcc/$name.collect.log
  $PY train_ivae.py --dataset data/mcc/$name.npz --out-dir runs/mcc/$name --seed $seed --threads 1 > runs/mcc/$name.log
  echo "$name: $(tail -n 1 runs/mcc/$name.log | sed 's/.*| *//')"
}
jobs=()
for C in $CLASSES; do for seed in $SEEDS; do jobs+=("$C $seed"); done; done
for ((i = 0; i < ${#jobs[@]}; i += 2)); do
  one ${jobs[i]} &
  if ((i + 1 < ${#jobs[@]})); then one ${jobs[i + 1]} & fi
  wait
done
$PY scripts/mcc_table.py runs/mcc
