#!/usr/bin/env bash
# PARA against coordinate regression in the PARA paper's own setting (scene camera only), all of it on one GPU
# machine, every checkpoint, demonstration, evaluation and the report under one output folder
# (scripts/generalise --root OUT):
#   1. oneview        PARA and regression, scene camera only and both cameras, the shipped recipe (5000 it.) each on
#                     the same 222 demonstrations from the fixed camera;
#   2. oneview-sweep  the four in lockstep at orbits -40..40 deg and heights -15..15 cm (EPISODES at the points within
#                     +-25 deg / +-10 cm, OUTER beyond);
#   3. extrapolation  the four trained at the full budget with the cube at y < 0, evaluated at y >= 0 and y < 0;
#   4. fewshot        the one-view pair (and the two-view PARA) fine-tuned on 5 and 20 demos from orbit 40 deg;
#   5. report         OUT/docs/generalisation/oneview/{table.md,table.json,sweep.png}.
# Each step's log goes to OUT/<step>.log, its exit status and time to OUT/summary.txt; a failed step does not stop the
# steps that do not need it (oneview-sweep and fewshot need oneview); every step skips what OUT already holds, so the
# same command continues a stopped run.
#
#   OUT=/data/generalise bench/gpu_generalise.sh       # from the repository root (or anywhere: it cd's there)
#   DRY=1 OUT=/tmp/g bench/gpu_generalise.sh           # print every step's commands and run nothing (any machine)
#   STEPS="extrapolation report" JOBS=6 bench/gpu_generalise.sh
#
# Needs what scripts/generalise needs: the package set up by scripts/setup (ROS 2 Jazzy, MuJoCo rendering through
# EGL, torch with CUDA). Options (environment): DEVICE (cuda), EPISODES (30), OUTER (10), JOBS (4: graphs evaluating
# side by side, each about 2-3 cores; in lockstep the outcomes do not depend on it), STEPS, DRY.
#
# Expected time per step on one H100 / H200 with 16 cores: ESTIMATES, not measured (this script has not run on a GPU
# yet). They assume a 5000-iteration pick_place training takes 3-8 min on the GPU (the batch-8 step is small;
# the one loader worker of the recipe may bound it), expert demonstrations 2-4 s each, and a lockstep episode
# 10-20 s of wall time when it succeeds and 30-60 s when it runs to the 30 s limit, JOBS at a time:
#   oneview        demos 8-15 min + 4 trainings 15-30 min                        -> 25-45 min
#   oneview-sweep  4 policies x (5 points x 30 + 4 points x 10) = 760 episodes  -> 1-3 h
#   extrapolation  demos 8-15 min + 4 trainings 15-30 min + 240 episodes        -> 1-1.5 h
#   fewshot        demos 1-2 min + 6 fine-tunes of 300 it. 5-10 min + 540 episodes -> 1-2 h
#   report         seconds
# About 3.5-7 h in all; the same on 2 CPU cores: docs/generalisation.md ("PARA against regression, one camera").
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_generalise_out}
DEVICE=${DEVICE:-cuda}
EPISODES=${EPISODES:-30}
OUTER=${OUTER:-10}
JOBS=${JOBS:-4}
DRY=${DRY:-0}
STEPS=${STEPS:-oneview oneview-sweep extrapolation fewshot report}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
opts=(--root "$OUT" --device "$DEVICE" --episodes "$EPISODES" --outer-episodes "$OUTER" --jobs "$JOBS")
[[ $DRY == 1 ]] && opts+=(--dry-run)
: >"$OUT/summary.txt"
if [[ $DRY != 1 ]]; then
  { nvidia-smi; nproc; } >"$OUT/machine.txt" 2>&1
fi
failed=" "
for step in $STEPS; do
  needs=""
  case "$step" in
    oneview-sweep|fewshot) needs=oneview ;;
  esac
  if [[ -n $needs && $failed == *" $needs "* ]]; then
    echo "$step: skipped ($needs failed)" | tee -a "$OUT/summary.txt"
    failed+="$step "
    continue
  fi
  t0=$SECONDS
  scripts/generalise "$step" "${opts[@]}" >"$OUT/$step.log" 2>&1
  rc=$?
  ((rc == 0)) || failed+="$step "
  echo "$step: exit status $rc after $((SECONDS - t0)) s (log $OUT/$step.log)" | tee -a "$OUT/summary.txt"
done
[[ $failed == " " ]]
