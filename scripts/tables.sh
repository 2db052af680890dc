#!/usr/bin/env bash
# The rows of the paper's Tables 1, 2, 4 and 6 (docs/tables.md): every DeepMind Control and CausalWorld task through
# `runner.py --protocol table5` (Table 5's data sizes and D_E, ratio 1.0, the seven columns plus ORIL+CA/BCND+CA on
# Table 4's tasks, 5 seeds, 5,000 steps, 30 evaluation episodes per split), one task after the other; then the tables.
# Resumable: finished jobs are skipped, so run it again after a stop. A task that fails is reported and the next
# one goes on. The skip rule reads the runner's job records under runs/: on a new machine (no runs/) a row runs all
# its jobs again, so name the missing ones, e.g. TASKS=general bash scripts/tables.sh cw --methods oril --seeds 3 4
# (collection is redone: the same seed gives the same dataset, which every result JSON fingerprints).
# `table7` runs Table 7 instead: OILCA on pushing and picking with the intervened feature sets C = 1, 2, 4, 5
# (--tag t5-c<C>; C = 3 is the default feature set, Table 2's own runs).
# Usage: bash scripts/tables.sh [dmc|cw|all (default)|table7] [runner flags, e.g. --jobs 2 --threads 1]
# Knobs: TASKS (a subset, e.g. TASKS="cheetah-run walker-walk" bash scripts/tables.sh dmc); CS, table7's feature sets
# (a subset of 1 2 4 5, e.g. TASKS=pushing CS=5 bash scripts/tables.sh table7); CW_WORKERS, processes per CausalWorld
# collection (--cw.workers; the same data, but the flag is part of the collection's command, so a finished row run
# again with another value collects again); DMC_WORKERS, likewise for a DeepMind Control collection (--dmc.workers).
set -uo pipefail
cd "$(dirname "$0")/.."
which=${1:-all}; shift || true
case $which in dmc|cw|all|table7) ;; *) echo "tables.sh: first argument must be dmc, cw, all or table7, got '$which'" >&2; exit 2;; esac
PY=${PY:-.venv/bin/python}
DMC="cartpole-swingup walker-stand cheetah-run walker-walk finger-turn_hard fish-swim manipulator-insert_ball manipulator-insert_peg humanoid-run"
CW="pushing picking reaching pick_and_place stacking2 towers stacked_blocks creative_stacked_blocks general"
failed=()
run() {  # BENCHMARK [runner flags]; a finished row of Tables 1/2/6 also gets its results/<slug>/task.json
  echo "== tables.sh: $1 ($(date -u +%H:%M:%S))"
  if $PY runner.py --benchmark "$@" --protocol table5 --ledger; then
    [[ " $* " == *" --tag "* || " $* " == *" --dry-run "* ]] || $PY scripts/task_summary.py --collect "results/${1/:/_}_t5" \
      || failed+=("$1 (task summary)")
  else
    failed+=("$1")
  fi
}
if [ "$which" = table7 ]; then
  for c in ${CS:-}; do case $c in 1|2|4|5) ;; *) echo "tables.sh: CS must list feature sets among 1 2 4 5 (3 is Table 2's own runs), got '$c'" >&2; exit 2;; esac; done
  declare -A FEATURES  # Table 7's feature sets, as paper_results.py transcribes them
  for c in 1 2 4 5; do FEATURES[$c]=$($PY -c "from analysis import paper_results; print(*paper_results.FEATURE_SETS[$c])") || exit 1; done
  for t in ${TASKS:-pushing picking}; do for c in ${CS:-1 2 4 5}; do
    run "cw:$t" --tag "t5-c$c" --methods oilca --collect-flags="--cw.features ${FEATURES[$c]}" "$@"
  done; done
fi
report() {  # the tables of docs/tables.md from whatever results exist
  for n in 1 2 6 4 7; do $PY report.py --paper-table $n --doc docs/tables.md > /dev/null || failed+=("table $n"); done
  $PY scripts/task_summary.py --doc docs/tables.md || failed+=("task table")
}
# manipulator-insert_ball and -insert_peg: SAC does not learn them here; the scripted experts of envs/dmc_scripted.py
# and envs/dmc_scripted_peg.py are their sources
declare -A DMC_SOURCE=([manipulator-insert_ball]="--dmc.scripted-noise 0 0.25 0.5 1.0 --dmc.random-policy"
                       [manipulator-insert_peg]="--dmc.scripted-noise 0 0.25 0.5 1.0 --dmc.random-policy")
if [ "$which" != cw ] && [ "$which" != table7 ]; then for t in ${TASKS:-$DMC}; do
  [[ " $DMC " == *" $t "* ]] || continue
  flags="${DMC_SOURCE[$t]:-}${DMC_WORKERS:+ --dmc.workers $DMC_WORKERS}"
  extra=(); [ -z "$flags" ] || extra+=(--collect-flags="${flags# }")
  run "dmc:$t" "${extra[@]}" "$@"
done; fi
# CausalWorld tasks without a shipped expert: the scripted pick-and-place source (docs/causalworld.md); stacked_blocks
# at an 834-step limit (its default episode is 29,166 steps; a deviation: 35 blocks step at about 67 env steps/s here,
# docs/causalworld.md "What a row costs"); general and creative_stacked_blocks on their fixed
# structures (cw_env.STRUCTURES; creative_stacked_blocks: 3 blocks, 2,500 steps, 1.5 M transitions of 101 dims);
# stacked_blocks stored uncompressed (--uncompressed: memory-mapped, docs/contract.md; 2 GB of observations at 834
# steps, 10 GB at 4,166)
declare -A CW_SOURCE=([towers]="--cw.expert scripted" [stacked_blocks]="--cw.expert scripted --cw.episode-len 834 --uncompressed"
                      [general]="--cw.expert scripted" [creative_stacked_blocks]="--cw.expert scripted")
# 2.5 M transitions of 168-dim observations (towers, general; stacked_blocks more): an augmentation peaks at 19 GB
# and two at once ran out of 24 GiB; OILCA trains on twice the rows. So they run alone (docs/causalworld.md).
# stacked_blocks is memory-mapped (--uncompressed): its OILCA runs hold under 2 GB of their own and may run two at a time
declare -A CW_SOLO=([towers]="augment oilca" [stacked_blocks]="augment" [general]="augment oilca")
if [ "$which" != dmc ] && [ "$which" != table7 ]; then for t in ${TASKS:-$CW}; do
  [[ " $CW " == *" $t "* ]] || continue
  flags="${CW_SOURCE[$t]:-}${CW_WORKERS:+ --cw.workers $CW_WORKERS}"
  extra=(); [ -z "$flags" ] || extra+=(--collect-flags="${flags# }")
  [ -z "${CW_SOLO[$t]:-}" ] || extra+=(--solo ${CW_SOLO[$t]})
  run "cw:$t" "${extra[@]}" "$@"
done; fi
[[ " $* " == *" --dry-run "* ]] || report
[ ${#failed[@]} -eq 0 ] || echo "tables.sh: failed: ${failed[*]} (see runs/<slug>_t5/logs/)" >&2
[ ${#failed[@]} -eq 0 ]
