#!/usr/bin/env bash
# Identifiability benchmark: MCC of the iVAE vs the no-c ablation for C classes over seeds.
# Each (C, seed) collects its own toy dataset and fits both models with train_ivae.py's defaults; two runs go
# in parallel (one per core). The table is rebuilt from runs/mcc/*/metrics.json by scripts/mcc_table.py.
#   CLASSES="3 5 10" SEEDS="0 1 2 3 4" bash scripts/ivae_mcc.sh        (about 40 min on 2 cores)
# Other environment variables (defaults: the fast toy's benchmark above):
#   COLLECT_FLAGS="..."   more collect_data.py flags, e.g. the paper toy's (docs/toy.md, "The paper toy")
#   OUT=mcc               data/$OUT/ and runs/$OUT/ hold the datasets and fits
#   PARALLEL=2            runs at a time
#   PY=path/to/python     an existing interpreter with the requirements (then scripts/setup.sh is not run)
set -euo pipefail
cd "$(dirname "$0")/.."
if [ -z "${PY:-}" ]; then
  bash scripts/setup.sh
  PY=.venv/bin/python
fi
CLASSES=${CLASSES:-"3 5 10"}
SEEDS=${SEEDS:-"0 1 2 3 4"}
OUT=${OUT:-mcc}
PARALLEL=${PARALLEL:-2}
read -r -a COLLECT <<< "${COLLECT_FLAGS:-}"
mkdir -p data/$OUT runs/$OUT
one() {
  local C=$1 seed=$2 name="C${1}_s${2}"
  $PY collect_data.py --out data/$OUT/$name.npz --toy.n-classes $C --seed $seed "${COLLECT[@]}" > runs/$OUT/$name.collect.log
  $PY train_ivae.py --dataset data/$OUT/$name.npz --out-dir runs/$OUT/$name --seed $seed --threads 1 > runs/$OUT/$name.log
  echo "$name: $(tail -n 1 runs/$OUT/$name.log | sed 's/.*| *//')"
}
jobs=()
for C in $CLASSES; do for seed in $SEEDS; do jobs+=("$C $seed"); done; done
for ((i = 0; i < ${#jobs[@]}; i += PARALLEL)); do
  for ((k = i; k < i + PARALLEL && k < ${#jobs[@]}; k++)); do one ${jobs[k]} & done
  wait
done
$PY scripts/mcc_table.py runs/$OUT
