#!/usr/bin/env bash
# One DeepMind Control task end to end (OILCA §5.2, Table 1) on a CPU. Each stage is a standalone script:
#   1. train_behavior.py  SAC on the clean task, snapshots at 10k/30k/60k/100k/200k steps   -> runs/dmc/sac_<task>/
#   2. collect_data.py    D_all under 3 action-perturbation classes c, snapshots as behaviour -> data/dmc_<task>.npz
#      scripts/return_hist.py  histogram of episode returns, D_E marked                       -> results/dmc_<task>/returns_hist.png
#   3. train_ivae.py      iVAE (+ no-c ablation), MCC against the true perturbations          -> runs/dmc/<task>/ivae/
#   4. train_bc.py        BC-exp and BC-all (beside 3.)                                       -> runs/dmc/<task>/bc_*_s*/
#   5. augment.py         counterfactual expert rows, sampler = that seed's BC-exp policy     -> data/dmc_<task>_aug_s*.npz
#   6. train_dwbc.py      DWBC on D_all, OILCA on the augmented data                           -> runs/dmc/<task>/{dwbc,oilca}_s*/
#      train_oril.py, train_bcnd.py, train_lobsdice.py: ORIL, BCND, LobsDICE on D_all, ORIL+CA and BCND+CA on the
#                         augmented data (BASELINES=1, the default)                          -> runs/dmc/<task>/{oril,bcnd,lobsdice}*_s*/
#   7. evaluate.py        in-distribution returns under the same perturbations (train split)  -> results/dmc_<task>/*.json
#   8. report.py          table.md + fig4.png from the JSON files
# Knobs (environment variables): TASK (cartpole-swingup), SEEDS ("0 1 2"), SAC_STEPS (200000), SAC_UPDATE_EVERY (2:
# one SAC gradient step per 2 env steps, the CPU budget), DATA_EPISODES (200), STEPS (policy gradient steps, 10000),
# EVAL_EPISODES (30 per policy, 10 per class), IVAE_STEPS (10000), RATIO (0.5), JOBS (2), OUT_ROOT, FORCE=1,
# BASELINES (1: also the baselines; their budgets follow STEPS: ORIL 0.4·STEPS reward-model steps then STEPS of IQL,
# LobsDICE STEPS, BCND as many epochs per round as make about STEPS batched steps over its 5 rounds).
# Re-running is safe and cheap: a finished SAC run is reused (an interrupted one resumes from its checkpoint), the
# dataset and the iVAE are kept when made with the same arguments, and a training run whose result JSON exists is
# skipped (one whose policy.pt exists is only evaluated). FORCE=1 rebuilds everything after the SAC stage.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export MUJOCO_GL=${MUJOCO_GL:-egl}
PY=.venv/bin/python
TASK=${TASK:-cartpole-swingup}
SEEDS=${SEEDS:-"0 1 2"}
SAC_STEPS=${SAC_STEPS:-200000}
SAC_UPDATE_EVERY=${SAC_UPDATE_EVERY:-2}
DATA_EPISODES=${DATA_EPISODES:-200}
STEPS=${STEPS:-10000}
EVAL_EPISODES=${EVAL_EPISODES:-30}
IVAE_STEPS=${IVAE_STEPS:-10000}
RATIO=${RATIO:-0.5}
JOBS=${JOBS:-2}
force=(); [ "${FORCE:-0}" = 1 ] && force=(--force)
R=${OUT_ROOT:-.}
SAC=$R/runs/dmc/sac_$TASK
RUNS=$R/runs/dmc/$TASK
DATA=$R/data/dmc_$TASK.npz
OUT=$R/results/dmc_$TASK
mkdir -p $OUT $RUNS $R/data
[ "${FORCE:-0}" = 1 ] && rm -rf $OUT/*.json $RUNS/bc_* $RUNS/dwbc_* $RUNS/oilca_* $RUNS/oril* $RUNS/bcnd* $RUNS/lobsdice* $R/data/dmc_${TASK}_aug_s*.npz
timing=()
t_all=$(date +%s)
stage() { timing+=("\"$1\": $(( $(date +%s) - $2 ))"); echo "== $1 done in $(( $(date +%s) - $2 ))s"; }
parallel() { xargs -r -d '\n' -P "$JOBS" -n 1 bash -c || { echo "a job failed; see $RUNS/*/train.log" >&2; exit 1; }; }
EVAL="--eval-every 0 --final-eval-episodes $EVAL_EPISODES --final-eval"
# job NAME TRAIN_COMMAND: print the command that still has to run for this result (nothing if its JSON exists)
job() {
  local name=$1 d=$RUNS/$1; shift
  mkdir -p $d
  if [ -f $OUT/${name}_train.json ]; then return; fi
  if [ -f $d/policy.pt ]; then
    echo "$PY evaluate.py --policy $d/policy.pt --episodes $EVAL_EPISODES --out $OUT/${name}_{split}.json > $d/eval.log"
  else
    echo "$* --out-dir $d $EVAL $OUT/${name}_{split}.json > $d/train.log"
  fi
}

t=$(date +%s)
if [ ! -f $SAC/snapshots/step_$SAC_STEPS.pt ]; then
  $PY train_behavior.py --env dmc:$TASK --out-dir $SAC --total-steps $SAC_STEPS --update-every $SAC_UPDATE_EVERY --resume
fi
stage sac $t

t=$(date +%s)
snaps=$(ls $SAC/snapshots/step_*.pt | sort -t_ -k2 -n | awk -F_ -v max=$SAC_STEPS '{split($NF, a, "."); if (a[1] <= max) print}')
$PY collect_data.py --env dmc:$TASK --out $DATA --seed 0 --dmc.snapshots $snaps --dmc.episodes $DATA_EPISODES "${force[@]}"
$PY scripts/return_hist.py --dataset $DATA --out $OUT/returns_hist.png
stage collect $t

t=$(date +%s)
$PY train_ivae.py --dataset $DATA --out-dir $RUNS/ivae --seed 0 --total-steps $IVAE_STEPS --threads 1 "${force[@]}" \
  > $RUNS/ivae.log 2>&1 &
ivae_pid=$!
for s in $SEEDS; do
  for data in expert all; do
    job bc_${data/expert/exp}_s$s $PY train_bc.py --dataset $DATA --data $data --seed $s --total-steps $STEPS
  done
done | JOBS=$(( JOBS > 1 ? JOBS - 1 : 1 )) parallel
wait $ivae_pid || { cat $RUNS/ivae.log >&2; exit 1; }
tail -n 1 $RUNS/ivae.log
stage ivae_and_bc $t

t=$(date +%s)
for s in $SEEDS; do
  [ -f $R/data/dmc_${TASK}_aug_s$s.npz ] && continue
  $PY augment.py --dataset $DATA --ivae $RUNS/ivae/ivae.pt --sampler $RUNS/bc_exp_s$s/policy.pt --ratio $RATIO \
    --seed $s --out $R/data/dmc_${TASK}_aug_s$s.npz | tail -n 1
done
stage augment $t

t=$(date +%s)
for s in $SEEDS; do
  job dwbc_s$s $PY train_dwbc.py --dataset $DATA --seed $s --total-steps $STEPS
  job oilca_s$s $PY train_dwbc.py --dataset $R/data/dmc_${TASK}_aug_s$s.npz --seed $s --total-steps $STEPS
done | parallel
stage dwbc_oilca $t

if [ "${BASELINES:-1}" = 1 ]; then
  t=$(date +%s)
  rows=$($PY -c "import numpy as np; print(len(np.load('$DATA')['rewards']))")
  bcnd_epochs=$(( (STEPS + 5 * ((rows / 5 + 255) / 256) - 1) / (5 * ((rows / 5 + 255) / 256)) ))  # 5 rounds, K = 5
  for s in $SEEDS; do
    aug=$R/data/dmc_${TASK}_aug_s$s.npz
    job oril_s$s $PY train_oril.py --dataset $DATA --seed $s --reward-steps $(( STEPS * 2 / 5 )) --total-steps $STEPS
    job lobsdice_s$s $PY train_lobsdice.py --dataset $DATA --seed $s --total-steps $STEPS
    job bcnd_s$s $PY train_bcnd.py --dataset $DATA --seed $s --epochs $bcnd_epochs
    job oril_ca_s$s $PY train_oril.py --dataset $aug --seed $s --reward-steps $(( STEPS * 2 / 5 )) --total-steps $STEPS
    job bcnd_ca_s$s $PY train_bcnd.py --dataset $aug --seed $s --epochs $bcnd_epochs
  done | parallel
  stage baselines $t
fi

t=$(date +%s)
for ref in expert random; do
  [ -f $OUT/reference_${ref}_train.json ] && continue
  $PY evaluate.py --reference $ref --env-dataset $DATA --episodes $EVAL_EPISODES --out $OUT/reference_${ref}_{split}.json > /dev/null
done
$PY report.py --results $OUT
stage evaluate_report $t

total=$(( $(date +%s) - t_all ))
echo "{$(IFS=,; echo "${timing[*]}"), \"total\": $total}" > $OUT/timing.json
echo "dmc:$TASK done in ${total}s: $OUT/{table.md,fig4.png,returns_hist.png,timing.json}, $SAC/returns.png"
