#!/usr/bin/env bash
# The toy budget study of docs/budget.md: three data draws, one after the other (seeds 0-2 of a draw, then 3-4), each
# through the runner (resumable: a finished job is skipped, so the same command continues where a stopped run left
# off; --ledger: in a fresh clone too, from the records committed in results/toy_study*/ledger/), then the verdict
# over the draws. Extra arguments go to every runner call, e.g. `--fast --gpus 1 --budgets 5000 20000 50000 100000 200000`
# on a GPU machine (the last --budgets given wins); DRAWS="1 2" runs those data draws only (the verdict still reads
# all three).
#
# BENCH=dmc:cartpole-swingup or BENCH=dmc:walker-walk runs the same study on that task's row at Table 5's size
# (--tag t5study: its data size and D_E count, budgets 5k/20k/50k on the CPU, OILCA's fixed sampler BC-exp at 5,000
# steps as on the toy and in the Table 5 rows (--steps 5000: the DeepMind Control preset's own is 10,000);
# cartpole-swingup's 2 D_E episodes make its budget choice hold out one of them, --select-folds 2), in the same two
# passes, then its summary to results/dmc_<task>_t5study_summary.json and its block in docs/budget.md.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
# each draw's first three seeds complete first (a table sooner), with the budget choice on held-out D_E; then seeds
# 3-4 without it: the choice comes from fold policies of training seed 0 and does not depend on the seeds, and
# budget_summary.py applies each budget_selection_<family>.json to every seed (a selection run for seeds 0-4 would
# remake the whole fold tree on a fresh machine, about 7,700 s of job time, to copy files)
PASSES=("--select-budget-folds 1 --seeds 0 1 2" "--seeds 0 1 2 3 4")
dry_run() { case " $* " in *" --dry-run "*) return 0 ;; esac; return 1; }  # a dry run lists the jobs only
if [ "${BENCH:-toy}" != toy ]; then
  case "$BENCH" in
    dmc:cartpole-swingup) size=(--data-episodes 40 "--collect-flags=--expert-episodes 2" --sac-steps 100000 --select-folds 2) ;;
    dmc:walker-walk) size=(--data-episodes 200 "--collect-flags=--expert-episodes 6") ;;
    *) echo "budget_study.sh: error: BENCH=$BENCH: the study runs on toy, dmc:cartpole-swingup or dmc:walker-walk" >&2
       exit 2 ;;
  esac
  slug=${BENCH/:/_}_t5study
  for pass in "${PASSES[@]}"; do
    # shellcheck disable=SC2086
    $PY runner.py --benchmark "$BENCH" --tag t5study "${size[@]}" --steps 5000 --ratio 1.0 --budgets 5000 20000 50000 \
      --methods bc_exp bc_all dwbc oilca oilca_matched $pass --train-flags="--flush-denormal" --jobs 2 --threads 1 \
      --ledger "$@"
  done
  dry_run "$@" && exit 0
  $PY scripts/budget_summary.py --results "results/$slug" --out "results/${slug}_summary.json" --doc docs/budget.md \
    --complete-seeds
  exit 0
fi
for d in ${DRAWS:-0 1 2}; do
  for pass in "${PASSES[@]}"; do
    # shellcheck disable=SC2086
    $PY runner.py --benchmark toy --tag study --data-seed "$d" --ratio 1.0 --budgets 5000 20000 50000 100000 \
      --methods bc_exp bc_all dwbc oilca oilca_matched --fig5-ratios $pass \
      --train-flags="--flush-denormal" --jobs 2 --threads 1 --ledger "$@"
  done
done
dry_run "$@" && exit 0
$PY scripts/budget_summary.py --results results/toy_study results/toy_study_d1 results/toy_study_d2 \
  --out results/toy_study_summary.json --doc docs/budget.md --complete-seeds
