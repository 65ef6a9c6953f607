#!/usr/bin/env bash
# Train the robust pick-and-place recipe, the same recipe fine-tuned from the camera-randomised checkpoint, the
# regression baseline and the colour-invariance fine-tune of the robust checkpoint on the same data, side by side on
# one GPU, on a machine with torch / transformers / OpenCV but
# no ROS and no MuJoCo (the episodes come packed by para_core.data.episode_archive).
#
#   python -m para_core.data.episode_archive pack data/pick_place_robust .gpudata/pick_place_robust --size 128
#   python bench/check_reference_prediction.py --checkpoint checkpoints/pick_place --write .gpudata/reference.npz
#   OUT=/tmp/out DEADLINE_S=480 bench/gpu_train_robust.sh        # on the GPU machine, from the repo root
#
# Each run's log and, at the end, one archive of the run folders (runs.tgz: checkpoints, metrics, loss curves) land in
# OUT. Runs still going at DEADLINE_S seconds are stopped; `RESUME=1` continues them from their last checkpoint.
set -u
cd "$(dirname "$0")/.."
OUT=${OUT:-gpu_train_out}
PACKED=${PACKED:-.gpudata/pick_place_robust}
RUNS=${RUNS:-.gpurun}
DEADLINE_S=${DEADLINE_S:-480}
PY=${PY:-python3}
RESUME=${RESUME:-0}
DEVICE=${DEVICE:-cuda}
EXTRA=${EXTRA:-}  # more para-train options for every run (e.g. a smoke test: "--max-iters 4")
mkdir -p "$OUT" "$RUNS"
export PYTHONUNBUFFERED=1
t0=$SECONDS
{ nvidia-smi; nproc; "$PY" -c "import torch, transformers, cv2; print(torch.__version__, transformers.__version__, \
cv2.__version__, torch.cuda.get_device_name(0))"; } >"$OUT/machine.txt" 2>&1
if [[ ! -d "$RUNS/data" ]]; then
  "$PY" -m para_core.data.episode_archive unpack "$PACKED" "$RUNS/data.tmp" >"$OUT/unpack.txt" 2>&1 \
    && mv "$RUNS/data.tmp" "$RUNS/data" || { cat "$OUT/unpack.txt"; exit 1; }
fi
echo "unpacked after $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
for dev in cpu "$DEVICE"; do
  "$PY" bench/check_reference_prediction.py --checkpoint checkpoints/pick_place --reference .gpudata/reference.npz \
    --device "$dev" >>"$OUT/reference.txt" 2>&1
done
cat "$OUT/reference.txt"
pids=()
train() {  # name, then para-train arguments
  local name=$1; shift
  if [[ "$RESUME" == 1 && -d "$RUNS/$name" ]]; then
    "$PY" -m para_core.train.cli --out "$RUNS/$name" --resume --device "$DEVICE" --num-workers 4 --no-progress \
      >>"$OUT/train_$name.log" 2>&1 &
  else
    "$PY" -m para_core.train.cli --data "$RUNS/data" --out "$RUNS/$name" --device "$DEVICE" --num-workers 4 \
      --no-progress --no-tensorboard "$@" $EXTRA >"$OUT/train_$name.log" 2>&1 &
  fi
  pids+=($!)
}
train robust --preset pick_place --config config/train_pick_place_robust.yaml
train robust_ft --preset pick_place --config config/train_pick_place_robust.yaml \
  --init-from checkpoints/pick_place_randomised
train regression --preset pick_place_regression --config config/train_pick_place_robust.yaml
train robust_colour --preset pick_place --config config/train_pick_place_robust_colour.yaml \
  --init-from checkpoints/pick_place_robust
while (( SECONDS - t0 < DEADLINE_S )); do
  alive=0
  for p in "${pids[@]}"; do kill -0 "$p" 2>/dev/null && alive=1; done
  (( alive )) || break
  sleep 5
done
for p in "${pids[@]}"; do kill "$p" 2>/dev/null; done
wait
echo "trainings stopped after $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
for f in "$OUT"/train_*.log; do echo "== $f"; tail -4 "$f"; done | tee -a "$OUT/summary.txt"
# GPU figures of the training step and the policy, after the trainings (each capped, so the run ends in time).
if [[ "$DEVICE" == cuda* ]]; then
  timeout 45 "$PY" bench/bench_training.py --preset pick_place --device "$DEVICE" --steps 20 --warmup 5 --no-compare \
    >"$OUT/bench_training_pick_place.txt" 2>&1
  timeout 60 "$PY" bench/bench_policy.py --config paper --device "$DEVICE" --dtype bf16 --runs 20 --paths reference fast \
    >"$OUT/bench_policy_paper_bf16.txt" 2>&1
  echo "benchmarks done after $((SECONDS - t0)) s" | tee -a "$OUT/summary.txt"
fi
# What comes back: each run's final checkpoint (or its newest periodic one when stopped early) and its records.
rm -rf "$RUNS/back" && mkdir -p "$RUNS/back"
for name in robust robust_ft regression robust_colour; do
  [[ -d "$RUNS/$name" ]] || continue
  mkdir -p "$RUNS/back/$name"
  cp "$RUNS/$name"/{run.json,metrics.jsonl,loss_curve.png} "$RUNS/back/$name/" 2>/dev/null
  if [[ -f "$RUNS/$name/checkpoint/model.safetensors" ]]; then src="$RUNS/$name/checkpoint"
  else src=$(ls -d "$RUNS/$name"/checkpoints/iter_* 2>/dev/null | sort | tail -1); fi
  [[ -n "$src" ]] && cp -r "$src" "$RUNS/back/$name/checkpoint"
done
tar czf "$OUT/runs.tgz" -C "$RUNS/back" . 2>>"$OUT/summary.txt"
ls -la "$OUT"
