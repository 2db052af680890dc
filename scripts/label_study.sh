#!/usr/bin/env bash
# The toy label-source study of docs/labels.md: three data draws, BC-exp, DWBC, OILCA (BC-exp labels), OILCA with
# oracle labels and every label source (--methods labels), at the toy's CPU budget (5,000 steps, ratio 0.5). Seeds
# 0-2 of every draw first, then 3-4: each call goes through the runner (resumable: a finished job is skipped, so the
# same command continues where a stopped run left off; --ledger: in a fresh clone too, from the records committed in
# results/toy_labels*/ledger/). Extra arguments go to every runner call, e.g. `--jobs 1`; DRAWS="1 2" runs those
# data draws only (the summary still reads all three).
#
# BENCH=dmc:cartpole-swingup (or another dmc:/cw: task) runs the same methods on that task's row at Table 5's size
# (runner --protocol table5 --tag labels: 5,000 steps, ratio 1.0, 30 evaluation episodes), seeds 0-2 then 0-4, for
# the data draws in DRAWS (default 0: one draw; DRAWS="0 1" adds --data-seed 1, results/<slug>_labels_d1), and the
# summary over every draw of that row found in results/ to results/<slug>_labels_summary.json; cartpole-swingup has 2
# D_E episodes, so its held-out choices use 2 folds of one episode each.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
if [ "${BENCH:-toy}" != toy ]; then
  folds=3
  [ "$BENCH" = dmc:cartpole-swingup ] && folds=2
  slug=${BENCH/:/_}_labels
  for d in ${DRAWS:-0}; do
    for seeds in "0 1 2" "0 1 2 3 4"; do
      # shellcheck disable=SC2086
      $PY runner.py --benchmark "$BENCH" --protocol table5 --tag labels --data-seed "$d" --select-folds "$folds" \
        --methods bc_exp dwbc oilca oilca_oracle labels --seeds $seeds --train-flags="--flush-denormal" --jobs 2 \
        --threads 1 --ledger "$@"
    done
  done
  case " $* " in *" --dry-run "*) exit 0 ;; esac
  folders=(results/"$slug")
  for f in results/"$slug"_d[0-9]*; do [ -d "$f" ] && folders+=("$f"); done
  $PY scripts/label_summary.py --results "${folders[@]}" --out "results/${slug}_summary.json" --doc docs/labels.md
  exit 0
fi
for seeds in "0 1 2" "0 1 2 3 4"; do
  for d in ${DRAWS:-0 1 2}; do
    # shellcheck disable=SC2086
    $PY runner.py --benchmark toy --tag labels --data-seed "$d" --methods bc_exp dwbc oilca oilca_oracle labels \
      --fig5-ratios --seeds $seeds --train-flags="--flush-denormal" --jobs 2 --threads 1 --ledger "$@"
  done
done
case " $* " in *" --dry-run "*) exit 0 ;; esac  # a dry run lists the jobs only
$PY scripts/label_summary.py --results results/toy_labels results/toy_labels_d1 results/toy_labels_d2 \
  --out results/toy_labels_summary.json --doc docs/labels.md
