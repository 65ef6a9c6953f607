#!/usr/bin/env bash
# Every GPU figure docs/benchmarks.md asks for, in one run (about 15 minutes on one GPU):
#   1. policy latency, paper config, batch 1: reference vs fast vs fast + torch.compile (CUDA graphs), fp32 and bf16,
#      and the fp32 reference against the fast path at dtype auto (bf16 on a GPU that has it),
#      50 runs each after warm-up, peak memory, TFLOP/s against the device's peak;
#   2. one training step of the paper preset at batch 4 (bf16 autocast): step time and peak memory;
#   3. camera -> chunk latency through the inference node with the paper model on the GPU.
# Each part writes its own log under OUT (default ./gpu_bench_out) and a failing part does not stop the others.
#
#   OUT=/tmp/out bench/gpu_all.sh                  # after scripts/setup; on the device machine: OUT=$OUT
#   PEAK_FP32=67 PEAK_BF16=989 bench/gpu_all.sh    # the device's dense peaks, TFLOP/s (defaults: H200 SXM)
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu_bench_out}"
mkdir -p "$OUT"
PY="${PY:-.venv/bin/python}"
PEAK_FP32="${PEAK_FP32:-67}"
PEAK_BF16="${PEAK_BF16:-989}"
RUNS="${RUNS:-50}"

run() {  # name, then the command: its output to OUT/name.txt, its exit status and time to OUT/summary.txt
    local name="$1"; shift
    local t0=$SECONDS
    "$@" >"$OUT/$name.txt" 2>&1
    local rc=$?
    echo "$name: exit status $rc after $((SECONDS - t0)) s (log $OUT/$name.txt)" | tee -a "$OUT/summary.txt"
}

{ nvidia-smi; "$PY" -c "import torch; print(torch.__version__, torch.version.cuda, torch.cuda.get_device_name(0))"; } \
    >"$OUT/machine.txt" 2>&1
run policy_fp32 "$PY" bench/bench_policy.py --config paper --device cuda --dtype fp32 --runs "$RUNS" \
    --paths reference fast compiled --compile-mode reduce-overhead --peak-tflops "$PEAK_FP32"
run policy_fp32_vs_fast_auto "$PY" bench/bench_policy.py --config paper --device cuda --dtype fp32 --fast-dtype auto \
    --runs "$RUNS" --paths reference fast compiled --compile-mode reduce-overhead --peak-tflops "$PEAK_BF16"
run policy_bf16 "$PY" bench/bench_policy.py --config paper --device cuda --dtype bf16 --runs "$RUNS" \
    --paths reference fast compiled --compile-mode reduce-overhead --peak-tflops "$PEAK_BF16"
run training_b4_bf16 "$PY" bench/bench_training.py --preset paper --device cuda --batch-size 4 --amp bf16 \
    --steps 5 --warmup 2
run node_paper "$PY" -m para_ros.dds_env -- "$PY" bench/bench_inference_node.py --preset paper --device cuda \
    --dtype bf16 --image-size 480 --rate 15 --duration 20 --fast-path
cat "$OUT/summary.txt"
