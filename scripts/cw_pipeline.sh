#!/usr/bin/env bash
# CausalWorld end to end (OILCA §5.3, Tables 2 and 6) on a CPU. Each stage is a standalone script; this file only
# chains them and runs independent jobs side by side (one per core).
#   1. collect_data.py  cw:<task> datasets (Table 5 defaults: 600 episodes, c = 3 do-interventions in space A)
#                       for DATA_TASKS, plus a return histogram of each            -> data/cw_<task>.npz, runs/cw/returns_<task>.png
#   For every task of TASKS and seed of SEEDS:
#   2. train_ivae.py    conditional iVAE on D_all (one core)                        -> runs/cw/<task>/ivae/
#   3. train_bc.py      BC-exp and BC-all (the other core, beside 2.)                -> runs/cw/<task>/bc_{exp,all}_s*/
#   4. augment.py       counterfactual rows, sampler π̂_E = that seed's BC-exp         -> data/cw_<task>_aug_s*.npz
#   5. train_dwbc.py    DWBC on D_all, OILCA on the augmented data                   -> runs/cw/<task>/{dwbc,oilca}_s*/
#      train_oril.py, train_bcnd.py, train_lobsdice.py: ORIL, BCND, LobsDICE on D_all, ORIL+CA and BCND+CA on the
#                       augmented data (BASELINES=1, the default)                    -> runs/cw/<task>/{oril,bcnd,lobsdice}*_s*/
#   6. evaluate.py      every policy on space A and space B (return and fractional success; run in-process at the
#                       end of each training script), plus the shipped expert and random actions -> results/cw_<task>/
#   7. report.py        table (mean ± std over seeds) from the JSON files alone     -> results/cw_<task>/table.md
# Knobs (environment variables): DATA_TASKS ("reaching pushing picking pick_and_place"), TASKS ("pushing picking"),
# SEEDS ("0 1 2"), CW_EPISODES (episodes per dataset, 600), STEPS (gradient steps of BC/DWBC/OILCA, 5000),
# EPISODES (evaluation episodes per space, 10), IVAE_STEPS (5000), IVAE_RESTARTS (2), RATIO (0.5), CW_FLAGS (more
# collect_data.py flags, e.g. "--cw.episode-len 20" for a smoke run), JOBS (processes at a time, 2; 1 runs everything
# one after the other), ACT_EPS (0.01: the policies' likelihoods clip actions to ±(1 - ACT_EPS); the shipped experts
# act at exactly ±1 most of the time, and with the trainers' default 1e-6 BC chases targets at atanh = ±7.25),
# BASELINES (1: also ORIL / BCND / LobsDICE / ORIL+CA / BCND+CA, budgets as in scripts/dmc_pipeline.sh),
# TRAIN_FLAGS (more flags for the BC, DWBC/OILCA, ORIL and LobsDICE scripts),
# TAG (suffix of the runs/results folders and augmented datasets of this variant), REFERENCES (1: also evaluate the shipped expert and random actions; 0: skip),
# OUT_ROOT (where data/, runs/, results/ go; default the repo), FORCE=1 (rebuild datasets and iVAEs, retrain all).
# Re-running is safe: datasets and iVAEs made with the same arguments are kept, augmented datasets are kept, and a
# training run whose result JSON exists is skipped.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1  # small matrices: threaded BLAS only stalls next to a busy core
PY=.venv/bin/python
DATA_TASKS=${DATA_TASKS-"reaching pushing picking pick_and_place"}  # may be empty: datasets already built
TASKS=${TASKS:-"pushing picking"}
SEEDS=${SEEDS:-"0 1 2"}
CW_EPISODES=${CW_EPISODES:-600}
STEPS=${STEPS:-5000}
EPISODES=${EPISODES:-10}
IVAE_STEPS=${IVAE_STEPS:-5000}
IVAE_RESTARTS=${IVAE_RESTARTS:-2}
RATIO=${RATIO:-0.5}
CW_FLAGS=${CW_FLAGS:-}
JOBS=${JOBS:-2}
REFERENCES=${REFERENCES:-1}
ACT_EPS=${ACT_EPS:-0.01}
BASELINES=${BASELINES:-1}
TRAIN_FLAGS="--act-eps $ACT_EPS ${TRAIN_FLAGS:-}"  # BCND has no tanh: it gets neither
TAG=${TAG:-}
force=(); [ "${FORCE:-0}" = 1 ] && force=(--force)
R=${OUT_ROOT:-.}
mkdir -p $R/data $R/runs/cw
t_all=$(date +%s)
parallel() { xargs -r -d '\n' -P "${1:-$JOBS}" -n 1 bash -c || { echo "a job failed; see the logs under $R/runs/cw" >&2; exit 1; }; }
# the training scripts evaluate their policy on both spaces at the end; the in-training check is one episode
EVAL="--eval-every 0 --eval-episodes 1 --final-eval-episodes $EPISODES --final-eval"
# job DIR NAME TRAIN_COMMAND: print the command that still has to run for result NAME (nothing if its JSON exists)
job() {
  local d=$1/$2 name=$2; shift 2
  mkdir -p $d
  [ -f $OUT/${name}_A.json ] || echo "$* --out-dir $d $EVAL $OUT/${name}_{split}.json > $d/train.log 2>&1"
}

t=$(date +%s)
for task in $DATA_TASKS; do
  echo "$PY collect_data.py --env cw:$task --out $R/data/cw_$task.npz --seed 0 --cw.episodes $CW_EPISODES $CW_FLAGS ${force[*]} > $R/runs/cw/collect_$task.log 2>&1 && tail -n 2 $R/runs/cw/collect_$task.log"
done | parallel
for task in $DATA_TASKS; do
  $PY scripts/return_hist.py --dataset $R/data/cw_$task.npz --out $R/runs/cw/returns_$task.png
done
echo "== collect done in $(( $(date +%s) - t ))s"

for task in $TASKS; do
  data=$R/data/cw_$task.npz; runs=$R/runs/cw/$task$TAG; OUT=$R/results/cw_$task$TAG; aug=$R/data/cw_${task}_aug$TAG
  mkdir -p $runs $OUT $R/runs/cw/$task
  [ "${FORCE:-0}" = 1 ] && rm -f $OUT/*.json ${aug}_s*.npz
  t=$(date +%s)
  ivae() { $PY train_ivae.py --dataset $data --out-dir $R/runs/cw/$task/ivae --seed 0 --total-steps $IVAE_STEPS \
    --restarts $IVAE_RESTARTS --no-compare --threads 1 "${force[@]}" > $R/runs/cw/$task/ivae.log 2>&1 || { cat $R/runs/cw/$task/ivae.log >&2; exit 1; }; }
  if [ "$JOBS" -gt 1 ]; then ivae & ivae_pid=$!; else ivae; ivae_pid=; fi  # JOBS=1: the iVAE first, then BC
  for s in $SEEDS; do
    for d in expert all; do
      job $runs bc_${d/expert/exp}_s$s $PY train_bc.py --dataset $data --data $d --seed $s --total-steps $STEPS $TRAIN_FLAGS
    done
  done | parallel 1
  [ -z "$ivae_pid" ] || wait $ivae_pid
  tail -n 1 $R/runs/cw/$task/ivae.log
  echo "== $task: iVAE beside BC done in $(( $(date +%s) - t ))s"

  t=$(date +%s)
  for s in $SEEDS; do
    [ -f ${aug}_s$s.npz ] && continue
    $PY augment.py --dataset $data --ivae $R/runs/cw/$task/ivae/ivae.pt --sampler $runs/bc_exp_s$s/policy.pt \
      --ratio $RATIO --seed $s --out ${aug}_s$s.npz | tail -n 1
  done
  echo "== $task: augmentation done in $(( $(date +%s) - t ))s"

  t=$(date +%s)
  for s in $SEEDS; do
    job $runs dwbc_s$s $PY train_dwbc.py --dataset $data --seed $s --total-steps $STEPS $TRAIN_FLAGS
    job $runs oilca_s$s $PY train_dwbc.py --dataset ${aug}_s$s.npz --seed $s --total-steps $STEPS --method oilca $TRAIN_FLAGS
  done | parallel
  echo "== $task: DWBC and OILCA done in $(( $(date +%s) - t ))s"

  if [ "$BASELINES" = 1 ]; then
    t=$(date +%s)
    rows=$($PY -c "import numpy as np; print(len(np.load('$data')['rewards']))")
    bcnd_epochs=$(( (STEPS + 5 * ((rows / 5 + 255) / 256) - 1) / (5 * ((rows / 5 + 255) / 256)) ))  # 5 rounds, K = 5
    for s in $SEEDS; do
      job $runs oril_s$s $PY train_oril.py --dataset $data --seed $s --reward-steps $(( STEPS * 2 / 5 )) --total-steps $STEPS $TRAIN_FLAGS
      job $runs lobsdice_s$s $PY train_lobsdice.py --dataset $data --seed $s --total-steps $STEPS $TRAIN_FLAGS
      job $runs bcnd_s$s $PY train_bcnd.py --dataset $data --seed $s --epochs $bcnd_epochs
      job $runs oril_ca_s$s $PY train_oril.py --dataset ${aug}_s$s.npz --seed $s --reward-steps $(( STEPS * 2 / 5 )) --total-steps $STEPS $TRAIN_FLAGS
      job $runs bcnd_ca_s$s $PY train_bcnd.py --dataset ${aug}_s$s.npz --seed $s --epochs $bcnd_epochs
    done | parallel
    echo "== $task: baselines done in $(( $(date +%s) - t ))s"
  fi

  t=$(date +%s)
  refs=""; [ "$REFERENCES" = 1 ] && refs="expert random"
  for ref in $refs; do
    [ -f $OUT/reference_${ref}_A.json ] && continue
    echo "$PY evaluate.py --reference $ref --env-dataset $data --space A B --episodes $EPISODES --out $OUT/reference_${ref}_{split}.json > /dev/null"
  done | parallel
  echo "== $task: references done in $(( $(date +%s) - t ))s"
  $PY report.py --results $OUT
done
echo "CausalWorld pipeline done in $(( $(date +%s) - t_all ))s: $(for task in $TASKS; do echo -n "$R/results/cw_$task$TAG/table.md "; done)"
