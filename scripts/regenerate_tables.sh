#!/usr/bin/env bash
# Regenerate every committed results table from the committed per-run JSON alone: each results/<folder>/table.md and
# summary.json (with its figures), the generated blocks of the docs (`<!-- report: … -->`), the paper's Tables 1, 2,
# 4, 6 and 7 in docs/tables.md, the cross-task aggregate and the task table, the sampler study, the verdicts over
# data draws and the findings (README.md, docs/findings.md). Nothing is trained or evaluated.
# A refactor keeps results when this leaves `git status` clean: `bash scripts/regenerate_tables.sh && git status --short`.
# `python report.py --check-docs` runs it on a scratch copy and fails on any difference (CI runs that).
set -euo pipefail
cd "$(dirname "$0")/.."
PY=${PY:-.venv/bin/python}
for d in results/*/; do
  d=${d%/}
  [ -f "$d/table.md" ] && [ "$d" != results/aggregate ] && $PY report.py --results "$d" > /dev/null
done
for doc in docs/*.md README.md; do
  for folder in $(sed -n 's/^ *<!-- *report: *\(results\/[^ ]*\) *-->.*/\1/p' "$doc" | sort -u); do
    [ "$folder" = results/aggregate ] && continue
    $PY report.py --results "$folder" --doc "$doc" > /dev/null
  done
done
$PY report.py --aggregate results/toy results/dmc_cartpole-swingup results/cw_pushing --out results/aggregate \
  --doc docs/controls.md > /dev/null
for n in 1 2 6 4; do
  $PY report.py --paper-table $n --results-pattern 'results/{benchmark}_{task}_t5' --doc docs/tables.md > /dev/null
done
$PY report.py --paper-table 7 --results-pattern 'results/{benchmark}_{task}_t5' --c-pattern '{folder}-c{c}' \
  --doc docs/tables.md > /dev/null
$PY scripts/task_summary.py --doc docs/tables.md > /dev/null
for summary in results/*_summary.json; do  # verdicts over data draws: label sources (*_labels_summary.json,
  # scripts/label_summary.py) and the budget study (the others, scripts/budget_summary.py)
  case "$summary" in
    *_labels_summary.json) $PY scripts/label_summary.py --again "$summary" > /dev/null ;;
    *) [ -f "$summary" ] && $PY scripts/budget_summary.py --again "$summary" > /dev/null ;;
  esac
done
$PY scripts/sampler_table.py --results results/toy results/toy_d1 results/toy_d2 results/dmc_cartpole-swingup \
  results/cw_pushing --out results/sampler_study.md --doc docs/sampler.md > /dev/null
for memory in results/memory/*.json; do  # the peak-memory tables (scripts/benchmark_memory.py)
  [ -f "$memory" ] && $PY scripts/benchmark_memory.py --again "$memory" > /dev/null
done
$PY scripts/findings.py > /dev/null  # last: it reads the summaries above
[ -n "${NO_STATUS:-}" ] && exit 0  # report.py --check-docs compares the files itself
echo "regenerated every table; differences from the committed files:"
git status --short -- results docs README.md
