#!/usr/bin/env bash
# Evaluate the policies of a budget study trained elsewhere (scripts/gpu_budget.sh): every <method>_b<max>_s<seed>/
# folder under RUNS holds policy.pt (the largest budget) and policy_step<N>.pt (the smaller ones); each is rolled out
# with evaluate.py (its evaluation seed, 10000) into RESULTS/<method>_b<N>_s<seed>_<split>.json, the names the
# runner's --budgets gives, so report.py builds the budget table from them. Finished results are kept.
# Usage: bash scripts/evaluate_budgets.sh RUNS RESULTS [EPISODES (30)] [SPLITS ("train")]
# Knob: BUDGETS (the order to evaluate in, e.g. "200000 5000 50000"; default: every budget found, largest first).
set -euo pipefail
cd "$(dirname "$0")/.."
RUNS=${1:?usage: bash scripts/evaluate_budgets.sh RUNS RESULTS [EPISODES] [SPLITS]}
RES=${2:?usage: bash scripts/evaluate_budgets.sh RUNS RESULTS [EPISODES] [SPLITS]}
EPISODES=${3:-30}
SPLITS=${4:-train}
PY=${PY:-.venv/bin/python}
mkdir -p "$RES"
folders=$(cd "$RUNS" && ls -d *_b*_s* 2>/dev/null || true)
[ -n "$folders" ] || { echo "evaluate_budgets: no <method>_b<steps>_s<seed> folders in $RUNS" >&2; exit 2; }
if [ -z "${BUDGETS:-}" ]; then
  BUDGETS=$(for f in $folders; do echo "${f##*_b}" | cut -d_ -f1; ls "$RUNS/$f" | sed -n 's/^policy_step\([0-9]*\)\.pt$/\1/p'; done | sort -rnu | tr '\n' ' ')
fi
for b in $BUDGETS; do
  for f in $folders; do
    method=${f%_b*}; top=$(echo "${f##*_b}" | cut -d_ -f1); seed=${f##*_s}
    policy=$RUNS/$f/policy.pt; [ "$b" = "$top" ] || policy=$RUNS/$f/policy_step$b.pt
    [ -f "$policy" ] || continue
    out=$RES/${method}_b${b}_s${seed}_{split}.json
    first=$(echo $SPLITS | cut -d' ' -f1)
    [ -f "${out/\{split\}/$first}" ] && continue
    OMP_NUM_THREADS=1 $PY evaluate.py --policy "$policy" --split $SPLITS --episodes "$EPISODES" --out "$out" | tail -n 1
  done
done
