#!/usr/bin/env bash
# The main job: the whole toy pipeline of OILCA (§5.1, Alg. 1, Fig. 3–5) on a CPU. Each stage is a standalone
# script; this file only chains them and runs independent jobs side by side (one per core).
#   1. collect_data.py  D_all = D_E ∪ D_U with the class label c                        -> data/toy.npz
#   2. train_ivae.py    conditional iVAE (+ no-c ablation), MCC, Fig. 3 (on one core)    -> runs/ivae/
#   3. train_bc.py      BC-exp and BC-all, seeds 0-4 (on the other core, beside 2.)      -> runs/toy/bc_{exp,all}_s*/
#   4. augment.py       counterfactual rows (sampler π̂_E = that seed's BC-exp policy)    -> data/toy_aug_r*_s*.npz
#   5. train_dwbc.py    DWBC on D_all, OILCA on the augmented data (+ Fig. 5 ratios)      -> runs/toy/{dwbc,oilca*}_s*/
#      train_oril.py, train_bcnd.py, train_lobsdice.py: the baselines ORIL, BCND, LobsDICE on D_all, and ORIL+CA,
#                       BCND+CA on OILCA's augmented data                                 -> runs/toy/{oril,bcnd,lobsdice}*_s*/
#   6. evaluate.py      every policy on the training classes and on the held-out class    -> results/toy/*.json
#                       (run in-process at the end of each training script, --final-eval)
#   7. report.py        table (mean ± std over seeds) and Fig. 4 / Fig. 5, from the JSON files alone
# Knobs (environment variables): SEEDS ("0 1 2 3 4"), FIG5_SEEDS ("0 1"), FIG5_RATIOS ("0.1 1.0"; 0.5 is the main
# OILCA run), STEPS (policy gradient steps, 5000), EPISODES (evaluation episodes per split, 100), IVAE_STEPS (10000),
# OUT_ROOT (where data/, runs/ and results/ go; default the repo), FORCE=1 (rebuild the dataset and the iVAE),
# BASELINES=1 (also ORIL / BCND / LobsDICE and the +CA variants: 28 min more on 2 cores, so off by default to
# keep the main job within its 15 minutes).
# The baselines' budgets follow STEPS: ORIL trains its reward model for 0.4·STEPS steps, then IQL for STEPS;
# LobsDICE STEPS; BCND 100·STEPS/5000 epochs in each of its 5 rounds.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
PY=.venv/bin/python
SEEDS=${SEEDS:-"0 1 2 3 4"}
FIG5_SEEDS=${FIG5_SEEDS:-"0 1"}
FIG5_RATIOS=${FIG5_RATIOS:-"0.1 1.0"}
RATIO=0.5
STEPS=${STEPS:-5000}
EPISODES=${EPISODES:-100}
IVAE_STEPS=${IVAE_STEPS:-10000}
force=(); [ "${FORCE:-0}" = 1 ] && force=(--force)
R=${OUT_ROOT:-.}
OUT=$R/results/toy
mkdir -p $OUT $R/runs/toy $R/data
rm -f $OUT/*.json
timing=()
t_all=$(date +%s)
stage() { timing+=("\"$1\": $(( $(date +%s) - $2 ))"); echo "== $1 done in $(( $(date +%s) - $2 ))s"; }
parallel() { xargs -d '\n' -P "${1:-2}" -n 1 bash -c || { echo "a job failed; see $R/runs/toy/*/train.log" >&2; exit 1; }; }
EVAL="--final-eval-episodes $EPISODES --final-eval"  # the training script evaluates its policy on both splits

t=$(date +%s)
$PY collect_data.py --env toy --out $R/data/toy.npz --seed 0 "${force[@]}"
stage collect $t

# the iVAE and BC-exp / BC-all do not depend on each other: one core each
t=$(date +%s)
$PY train_ivae.py --dataset $R/data/toy.npz --out-dir $R/runs/ivae --seed 0 --total-steps $IVAE_STEPS --threads 1 \
  "${force[@]}" > $R/runs/ivae.log 2>&1 &
ivae_pid=$!
for s in $SEEDS; do
  for data in expert all; do
    name=bc_${data/expert/exp}_s$s; d=$R/runs/toy/$name; mkdir -p $d
    echo "$PY train_bc.py --dataset $R/data/toy.npz --data $data --seed $s --total-steps $STEPS --out-dir $d $EVAL $OUT/${name}_{split}.json > $d/train.log"
  done
done | parallel 1
stage bc $t
wait $ivae_pid || { cat $R/runs/ivae.log >&2; exit 1; }
tail -n 1 $R/runs/ivae.log
stage train_ivae_beside_bc $t

t=$(date +%s)
for s in $SEEDS; do
  ratios=$RATIO; [[ " $FIG5_SEEDS " == *" $s "* ]] && ratios="$RATIO $FIG5_RATIOS"
  for r in $ratios; do
    $PY augment.py --dataset $R/data/toy.npz --ivae $R/runs/ivae/ivae.pt --sampler $R/runs/toy/bc_exp_s$s/policy.pt \
      --ratio $r --seed $s --out $R/data/toy_aug_r${r}_s$s.npz | tail -n 1
  done
done
stage augment $t

t=$(date +%s)
for s in $SEEDS; do
  d=$R/runs/toy/dwbc_s$s; mkdir -p $d
  echo "$PY train_dwbc.py --dataset $R/data/toy.npz --seed $s --total-steps $STEPS --out-dir $d $EVAL $OUT/dwbc_s${s}_{split}.json > $d/train.log"
  d=$R/runs/toy/oilca_s$s; mkdir -p $d
  echo "$PY train_dwbc.py --dataset $R/data/toy_aug_r${RATIO}_s$s.npz --seed $s --total-steps $STEPS --out-dir $d $EVAL $OUT/oilca_s${s}_{split}.json > $d/train.log"
done | parallel
stage dwbc_oilca $t

if [ "${BASELINES:-0}" = 1 ]; then
  t=$(date +%s)
  BCND_EPOCHS=$(( (STEPS * 100 + 4999) / 5000 ))
  for s in $SEEDS; do
    for m in oril lobsdice bcnd oril_ca bcnd_ca; do
      d=$R/runs/toy/${m}_s$s; mkdir -p $d
      data=$R/data/toy.npz; [[ $m == *_ca ]] && data=$R/data/toy_aug_r${RATIO}_s$s.npz
      case ${m%_ca} in
        oril) flags="--reward-steps $(( (STEPS * 2 + 4) / 5 )) --total-steps $STEPS" ;;
        lobsdice) flags="--total-steps $STEPS" ;;
        bcnd) flags="--epochs $BCND_EPOCHS" ;;
      esac
      echo "$PY train_${m%_ca}.py --dataset $data --seed $s $flags --out-dir $d $EVAL $OUT/${m}_s${s}_{split}.json > $d/train.log"
    done
  done | parallel
  stage baselines $t
fi

t=$(date +%s)
for s in $FIG5_SEEDS; do
  for r in $FIG5_RATIOS; do
    name=oilca_r${r}_s$s; d=$R/runs/toy/$name; mkdir -p $d
    echo "$PY train_dwbc.py --dataset $R/data/toy_aug_r${r}_s$s.npz --seed $s --total-steps $STEPS --method oilca_r$r --out-dir $d $EVAL $OUT/${name}_{split}.json > $d/train.log"
  done
done | parallel
stage fig5_ratios $t

t=$(date +%s)
for ref in expert random; do
  $PY evaluate.py --reference $ref --env-dataset $R/data/toy.npz --split train heldout --episodes $EPISODES \
    --out $OUT/reference_${ref}_{split}.json > /dev/null
done
$PY report.py --results $OUT
stage report $t

total=$(( $(date +%s) - t_all ))
echo "{$(IFS=,; echo "${timing[*]}"), \"total\": $total}" > $OUT/timing.json
echo "toy pipeline done in ${total}s: $OUT/{table.md,fig4.png,fig5.png,timing.json}, $R/runs/ivae/fig3.png"
