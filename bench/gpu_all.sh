#!/usr/bin/env bash
# Every GPU figure docs/benchmarks.md asks for, in one run (about 5 minutes on one H200; at most BUDGET_S seconds):
#   1. policy latency, paper preset, batch 1: reference vs fast vs fast + torch.compile (CUDA graphs) in bf16, with
#      peak memory and TFLOP/s against the device's peak; the same in fp32 without the compiled path;
#   2. one training step of the paper preset at batch 4 in bf16 autocast: the phase profile (data, forward, loss,
#      backward, optimiser), FLOPs per step against a plain matmul measured in the same run, peak memory;
#   3. policy latency (reference vs fast, bf16, batch 1) and a bf16 training step (batch 4) of EVERY other preset
#      (para_core.model.config.PRESET_NAMES), the PARA v4 design's backbone presets first (paper_da3: Depth-Anything-3,
#      paper_vlm: InternVL 2.5-1B with its frozen language model, paper_internvl: its vision tower alone), then the v2
#      ablation, the DINO-KV head, the coordinate-regression baseline, the pick-and-place and tiny models;
#   4. camera -> chunk latency through the inference node, only where ROS 2 (rclpy) is installed.
# Needs python3 with torch (CUDA), transformers, safetensors, numpy, opencv and pyyaml, and for paper_da3 the
# Depth-Anything-3 model code (pip install -r requirements-da3.txt && pip install --no-deps depth-anything-3==0.1.1;
# without it that preset's parts fail with the install hint and the others run); SciPy where present, else
# bench/gpu_shim (a NumPy stand-in for the few rotation functions para_core uses) goes on PYTHONPATH. No ROS, no
# MuJoCo. Each part writes its log to OUT/<part>.txt (OUT: the environment's, else ./gpu_bench_out), its exit status
# and time to OUT/summary.txt; a failing or timed-out part does not stop the others; parts left when BUDGET_S is
# spent are listed as skipped.
#
#   bench/gpu_all.sh                                  # from the repository root (or anywhere: it cd's there)
#   OUT=/tmp/out PY=python3 bench/gpu_all.sh          # OUT, PY: where the figures go, which interpreter
#   PEAK_FP32=67 PEAK_BF16=989 bench/gpu_all.sh       # the device's dense peaks, TFLOP/s (defaults: H200 SXM)
set -u
cd "$(dirname "$0")/.."
OUT="${OUT:-gpu_bench_out}"
mkdir -p "$OUT"
if [ -z "${PY:-}" ]; then
    if [ -x .venv/bin/python ]; then PY=.venv/bin/python; else PY=python3; fi
fi
PEAK_FP32="${PEAK_FP32:-67}"
PEAK_BF16="${PEAK_BF16:-989}"
RUNS="${RUNS:-30}"
BUDGET_S="${BUDGET_S:-330}"
PART_TIMEOUT_S="${PART_TIMEOUT_S:-150}"
DEVICE="${DEVICE:-cuda}"  # DEVICE=cpu PAPER=0 PRESETS=tiny RUNS=2: a smoke test of the script on any machine
PAPER="${PAPER:-1}"
export PYTHONPATH="$PWD${PYTHONPATH:+:$PYTHONPATH}"
export PYTHONUNBUFFERED=1
: >"$OUT/summary.txt"
if ! "$PY" -c "import scipy" 2>/dev/null; then
    export PYTHONPATH="$PWD/bench/gpu_shim:$PYTHONPATH"
    echo "SciPy missing: bench/gpu_shim on PYTHONPATH" | tee -a "$OUT/summary.txt"
fi

run() {  # name, then the command: its output to OUT/name.txt, its exit status and time to OUT/summary.txt
    local name="$1"; shift
    if [ "$SECONDS" -ge "$BUDGET_S" ]; then
        echo "$name: skipped (time budget BUDGET_S=$BUDGET_S s spent)" | tee -a "$OUT/summary.txt"
        return
    fi
    local t0=$SECONDS
    local limit=$((BUDGET_S + 20 - SECONDS))  # no part runs past the budget (+20 s)
    [ "$limit" -gt "$PART_TIMEOUT_S" ] && limit=$PART_TIMEOUT_S
    timeout "$limit" "$@" >"$OUT/$name.txt" 2>&1
    local rc=$?
    local note=""
    [ "$rc" -eq 124 ] && note=" (timed out after $limit s)"
    echo "$name: exit status $rc$note after $((SECONDS - t0)) s (log $OUT/$name.txt)" | tee -a "$OUT/summary.txt"
}

{ nvidia-smi; "$PY" -c "import platform, torch, transformers, numpy, cv2
print('python', platform.python_version(), 'torch', torch.__version__, 'cuda', torch.version.cuda,
      'transformers', transformers.__version__, 'numpy', numpy.__version__, 'opencv', cv2.__version__)
print('gpu', torch.cuda.get_device_name(0), 'bf16', torch.cuda.is_bf16_supported())"; nproc; uptime; } \
    >"$OUT/machine.txt" 2>&1
# the backbone experiments first, so that a spent budget skips the small presets, not them
PRESETS="${PRESETS:-$("$PY" -c "from para_core.model.config import PRESET_NAMES as p
first = [n for n in ('paper_da3', 'paper_vlm', 'paper_internvl') if n in p]
print(' '.join(first + [n for n in p if n not in first]))")}"
echo "presets: $PRESETS" | tee -a "$OUT/summary.txt"

# 1-2: the paper preset, the figures the design is judged by
[ "$PAPER" = 1 ] && run policy_paper_bf16 "$PY" bench/bench_policy.py --config paper --device cuda --dtype bf16 --runs "$RUNS" \
    --paths reference fast compiled --compile-mode reduce-overhead --peak-tflops "$PEAK_BF16"
[ "$PAPER" = 1 ] && run training_paper_b4_bf16 "$PY" bench/bench_training.py --preset paper --device cuda --batch-size 4 --amp bf16 \
    --steps 5 --warmup 2 --no-compare
[ "$PAPER" = 1 ] && run policy_paper_fp32 "$PY" bench/bench_policy.py --config paper --device cuda --dtype fp32 --runs "$RUNS" \
    --paths reference fast --peak-tflops "$PEAK_FP32"

# 3: every other preset (batch 4 for the paper-sized ones, bench_training's default 8 otherwise)
for preset in $PRESETS; do
    [ "$preset" = paper ] && continue
    run "policy_${preset}_bf16" "$PY" bench/bench_policy.py --config "$preset" --device "$DEVICE" --dtype bf16 \
        --runs "$RUNS" --paths reference fast --decoding argmax
    case "$preset" in paper*|dino_kv) batch=(--batch-size 4) ;; *) batch=() ;; esac
    run "training_${preset}_bf16" "$PY" bench/bench_training.py --preset "$preset" --device "$DEVICE" --amp bf16 \
        ${batch[@]+"${batch[@]}"} --steps 5 --warmup 2 --no-compare
done

# 4: the inference node over DDS (needs ROS 2)
if [ "$PAPER" = 1 ] && "$PY" -c "import rclpy" 2>/dev/null; then
    run node_paper "$PY" -m para_ros.dds_env -- "$PY" bench/bench_inference_node.py --preset paper --device cuda \
        --dtype bf16 --image-size 480 --rate 15 --duration 20 --fast-path
else
    echo "node_paper: skipped (no rclpy: ROS 2 is not installed here; or PAPER=0)" | tee -a "$OUT/summary.txt"
fi
echo "total: $SECONDS s" | tee -a "$OUT/summary.txt"
