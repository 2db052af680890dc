#!/usr/bin/env bash
# The budget study's GPU point (issue: does a longer training budget change the ordering?): BC-exp, BC-all, DWBC and
# OILCA × 5 seeds trained to 200k steps on one GPU machine, DWBC and OILCA each one process of 5 batched replicas whose
# training step is replayed as a CUDA graph (--cuda --cuda-graph), with the policies of the smaller budgets saved on the way
# (--checkpoints 5000 20000 50000 100000). First, the same DWBC step eager and as a graph side by side (replica-updates/s).
# Datasets are made on a CPU beforehand (the runner's: `runner.py --benchmark dmc:cartpole-swingup --tag t5 ...
# --ratio 1.0 --methods bc_exp oilca`, see docs/budget.md) and copied along; the GPU machine needs only torch,
# numpy<2 (the pinned 1.26.4) and tyro. Policies come back as one tar per method and are evaluated on a CPU with
# evaluate.py.
# Usage: bash scripts/gpu_budget.sh RAW.npz AUG_PATTERN OUT_DIR     (AUG_PATTERN with {seed}, e.g. d/x_aug_r1.0_s{seed}.npz)
# Knobs: PY (python3), STEPS (200000), CKPTS ("5000 20000 50000 100000"), SEEDS ("0 1 2 3 4"), BENCH_STEPS (3000; 0
# skips the side-by-side timing), DEADLINE (seconds after which no further GPU method is started; default 540), CPU_BC
# (0: BC-exp and BC-all on the GPU after DWBC and OILCA, as graphs, about 75 s each; 1: on the machine's CPU cores, one
# process per seed, while the GPU trains DWBC and OILCA: on the H100 machine ten such processes had not finished 200k
# steps after 469 s, so 0 is the default), CPU_DEADLINE (seconds after which unfinished BC runs are stopped; default 560). The last lines of
# every log go to OUT/logs.txt.
set -euo pipefail
cd "$(dirname "$0")/.."
RAW=${1:?usage: bash scripts/gpu_budget.sh RAW.npz AUG_PATTERN OUT_DIR}
AUG=${2:?usage: bash scripts/gpu_budget.sh RAW.npz AUG_PATTERN OUT_DIR}
OUT=${3:?usage: bash scripts/gpu_budget.sh RAW.npz AUG_PATTERN OUT_DIR}
PY=${PY:-python3}
STEPS=${STEPS:-200000}
CKPTS=${CKPTS:-"5000 20000 50000 100000"}
SEEDS=${SEEDS:-"0 1 2 3 4"}
BENCH_STEPS=${BENCH_STEPS:-3000}
DEADLINE=${DEADLINE:-540}
CPU_BC=${CPU_BC:-0}
CPU_DEADLINE=${CPU_DEADLINE:-560}
export PYTHONUNBUFFERED=1
[ -f "$RAW" ] || { echo "gpu_budget: $RAW not found" >&2; exit 2; }
for s in $SEEDS; do f=${AUG//\{seed\}/$s}; [ -f "$f" ] || { echo "gpu_budget: $f not found" >&2; exit 2; }; done
mkdir -p "$OUT"
T0=$(date +%s)
$PY -c "import torch; print(f'torch {torch.__version__}, device:', torch.cuda.get_device_name(0) if torch.cuda.is_available() else 'no GPU')"
n=$(echo $SEEDS | wc -w)
elapsed() { echo $(( $(date +%s) - T0 )); }

# the graph check: the same 300 steps of DWBC (2 replicas) eager and as a CUDA graph must agree up to float rounding
$PY - "$RAW" "$OUT" <<'PY'
import sys
import numpy as np
import train_dwbc
raw, out = sys.argv[1:3]
kw = dict(dataset=raw, seeds=(0, 1), total_steps=300, loss_trace=300, eval_every=0, eval_episodes=0, cuda=True)
runs = [train_dwbc.main(train_dwbc.Args(out_dir=f"{out}/check_{g}_s{{seed}}", cuda_graph=g, **kw))["runs"] for g in (False, True)]
diff = max(np.abs(np.subtract(a["loss_trace"][k], b["loss_trace"][k])).max() for a, b in zip(*runs) for k in a["loss_trace"])
scale = max(np.abs(a["loss_trace"]["policy_loss"]).max() for a in runs[0])
print(f"graph check: 300 DWBC steps x 2 replicas, eager vs CUDA graph: max |difference| of the losses {diff:.2e} "
      f"(largest |policy loss| {scale:.2f})")
PY
rm -rf "$OUT"/check_*

if [ "$BENCH_STEPS" -gt 0 ]; then  # the same DWBC run (5 replicas), eager and as a CUDA graph, timed by the trainer's own progress line
  for mode in eager graph; do
    flags=(); [ $mode = graph ] && flags=(--cuda-graph)
    $PY fast/train_dwbc.py --dataset "$RAW" --seeds $SEEDS --total-steps "$BENCH_STEPS" --eval-every 0 --eval-episodes 0 \
      --out-dir "$OUT/bench_$mode/s{seed}" --cuda "${flags[@]}" > "$OUT/bench_$mode.log" 2>&1 || { tail -n 20 "$OUT/bench_$mode.log" >&2; exit 1; }
    rate=$(grep -o '[0-9.]* steps/s' "$OUT/bench_$mode.log" | tail -n 1 | cut -d' ' -f1)
    echo "bench DWBC x$n $mode: $rate steps/s = $($PY -c "print(round($n * $rate))") replica-updates/s"
    rm -rf "$OUT/bench_$mode"
  done
fi

# BC-exp and BC-all meanwhile on the machine's CPU cores (one single-threaded process per seed: a BC step is cheap
# enough that the host's cores keep up, and the GPU stays with the two DWBC runs)
cpu_train() {  # NAME DATASET [flags]
  local name=$1 data=$2; shift 2
  for s in $SEEDS; do
    $PY train_bc.py --dataset "$data" --seed "$s" --total-steps "$STEPS" --checkpoints $CKPTS --eval-every 0 \
      --eval-episodes 0 --out-dir "$OUT/${name}_b${STEPS}_s$s" --threads 1 "$@" > "$OUT/${name}_s$s.log" 2>&1 &
  done
}
if [ "$CPU_BC" = 1 ]; then
  t_cpu=$(date +%s)
  cpu_train bc_exp "$RAW" --data expert
  cpu_train bc_all "$RAW" --data all
fi

train() {  # NAME SCRIPT DATASET [flags]
  local name=$1 script=$2 data=$3; shift 3
  if [ "$(elapsed)" -gt "$DEADLINE" ]; then echo "$name: not started (deadline ${DEADLINE}s passed)"; return; fi
  local t0=$(date +%s.%N)
  $PY "fast/$script" --dataset "$data" --seeds $SEEDS --total-steps "$STEPS" --checkpoints $CKPTS --eval-every 0 \
    --eval-episodes 0 --out-dir "$OUT/${name}_b${STEPS}_s{seed}" --cuda --cuda-graph "$@" > "$OUT/$name.log" 2>&1 \
    || { tail -n 20 "$OUT/$name.log" >&2; return 1; }
  local dt=$($PY -c "import time; print(f'{time.time() - $t0:.1f}')")
  echo "$name (GPU): $n replicas × $STEPS steps in $dt s = $($PY -c "print(f'{$n * $STEPS / $dt:.0f}')") replica-updates/s (wall, start-up and saving included)"
  pack "$name"
}
pack() { tar -cf "$OUT/$1.tar" -C "$OUT" $(cd "$OUT" && ls -d ${1}_b${STEPS}_s*) && rm -rf "$OUT"/${1}_b${STEPS}_s*; }
train dwbc train_dwbc.py "$RAW"
train oilca train_dwbc.py "$AUG"
if [ "$CPU_BC" = 1 ]; then
  while [ -n "$(jobs -rp)" ] && [ "$(elapsed)" -lt "$CPU_DEADLINE" ]; do sleep 2; done
  [ -n "$(jobs -rp)" ] && { echo "BC runs still going at ${CPU_DEADLINE}s: stopped"; kill $(jobs -rp) 2>/dev/null || true; sleep 2; }
  echo "bc_exp, bc_all (CPU, $((2 * n)) single-threaded processes side by side): $(( $(date +%s) - t_cpu )) s for $STEPS steps each"
  for name in bc_exp bc_all; do
    ok=1; for s in $SEEDS; do [ -f "$OUT/${name}_b${STEPS}_s$s/policy.pt" ] || { ok=0; tail -n 5 "$OUT/${name}_s$s.log" >&2; }; done
    [ $ok = 1 ] && pack $name
  done
else
  train bc_exp train_bc.py "$RAW" --data expert
  train bc_all train_bc.py "$RAW" --data all
fi
for f in "$OUT"/*.log; do echo "== $(basename "$f")"; tail -n 3 "$f"; done > "$OUT/logs.txt" && rm -f "$OUT"/*.log
echo "gpu_budget done in $(elapsed) s: $(ls "$OUT"/*.tar | tr '\n' ' ')"
