#!/usr/bin/env bash
# Strength per GPU minute, in one device call: train PRESET for a wall-time budget
# (train.py --budget_minutes: the game budget, hence the learning-rate schedule, fits the
# minutes; compile included; a SIGTERM guard saves, as a preemption would), then on the
# same machine, in parallel: the final snapshot's teacher top-1/top-3 (policy and 16-sim
# search; the teacher set's test split, held-out where data/teacher_test.tsv is absent),
# matches against greedy and against the depth-1 heuristic (16 simulations, both colours,
# from data/openings_test.tsv, else data/openings.tsv); and positions/s of the preset's
# iteration with learning beside self-play alone (bench/train_bench.py --fused-only, from
# the run's compiled program). Into OUTDIR, 8 files (the device tool returns at most 8):
# train.log, metrics.jsonl, budget.json, speed.json, teacher.json, vs_greedy.json,
# vs_heuristic.json, timings.txt.
#
#   bench/gpu_training.sh OUTDIR [PRESET] [--minutes M (5)] [--games N (108)] [--quick] [--plan]
#
# PRESET defaults to configs/shogi816k_randomstart2.py:size=gpu_short,recipe=small
# (docs/results.md, the GPU recipe). With the device tool: `bench/gpu_training.sh "$OUT"`
# (carry .whl, as bench/device.sh). On an H200 (docs/results.md): 352 s of training, 136 s of
# evaluation, 22 s for the speed; the call fits a 10-minute device limit.
# --quick: the CPU rehearsal of every step (tests/test_gpu_training.py): the :smoke size of
# PRESET's config file, a 1.5-minute budget, 4 games a match, 64 teacher positions.
# --plan: print the commands, run nothing.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: bench/gpu_training.sh OUTDIR [PRESET] [--minutes M] [--games N] [--quick] [--plan]"
out="" preset="" minutes="" games="" quick=0 plan=0
while [ $# -gt 0 ]; do
    case "$1" in
        --minutes) minutes="${2:?--minutes needs a number}"; shift ;;
        --games) games="${2:?--games needs a number}"; shift ;;
        --quick) quick=1 ;;
        --plan) plan=1 ;;
        -*) echo "error: unknown option $1; $usage" >&2; exit 2 ;;
        *) if [ -z "$out" ]; then out="$1"; elif [ -z "$preset" ]; then preset="$1"
           else echo "error: unexpected argument $1; $usage" >&2; exit 2; fi ;;
    esac
    shift
done
[ -n "$out" ] || { echo "error: no OUTDIR; $usage" >&2; exit 2; }
preset="${preset:-configs/shogi816k_randomstart2.py:size=gpu_short,recipe=small}"
[ -f "${preset%%:*}" ] || { echo "error: PRESET $preset: no config file ${preset%%:*}" >&2; exit 2; }
if [ "$quick" = 1 ]; then
    preset="${preset%%:*}:smoke"
    minutes="${minutes:-1.5}" games="${games:-4}" teacher_positions=64 concurrency=4
else
    minutes="${minutes:-5}" games="${games:-108}" teacher_positions=0 concurrency=54
fi
[[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "error: --minutes $minutes: a number of minutes" >&2; exit 2; }
[[ "$games" =~ ^[1-9][0-9]*$ ]] || { echo "error: --games $games: a positive whole number" >&2; exit 2; }
openings=data/openings.tsv; [ -f data/openings_test.tsv ] && openings=data/openings_test.tsv
split=heldout; [ -f data/teacher_test.tsv ] && split=test
run="runs/gpu_training"
mkdir -p "$out"
if [ "$plan" = 0 ]; then
    source bench/device_env.sh
    rm -rf "$run"
    command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
else
    python=python
fi
start=$(date +%s)
timings="$out/timings.txt"
: > "$timings"
mark() { echo "$1 $(( $(date +%s) - start )) s" | tee -a "$timings"; }
# One step: printed with --plan, else run with its output into LOG.
step() {
    local log="$1"; shift
    if [ "$plan" = 1 ]; then echo "$*"; else "$@" > "$log" 2>&1; fi
}

# Training: the budget counts from the process's start, compile included; the guard
# (SIGTERM, which saves) only stops a run whose games outlast the expected length.
guard_s=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 + 45 }')
step "$out/train.log" timeout -s TERM --kill-after=60 "$guard_s" "$python" train.py --config "$preset" \
    --workdir "$run" --budget_minutes "$minutes" || echo "training exited with status $?"
if [ "$plan" = 0 ]; then
    mark trained
    tail -c 1500 "$out/train.log" | tr '\r' '\n' | tail -4
    cp "$run/metrics.jsonl" "$run/budget.json" "$out/"
    "$python" bench/gpu_training_summary.py "$run" | tee -a "$timings"
fi

# Evaluation, three processes at once, so none may take most of the accelerator's
# memory; then the speed of learning beside self-play.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
pids=()
eval_step() { if [ "$plan" = 1 ]; then step "$@"; else step "$@" & pids+=($!); fi; }
eval_step "$run/teacher.log" "$python" -m az.play.report teacher "$run" --simulations 0,16 --split "$split" \
    --positions "$teacher_positions" --out "$run/teacher.png"
for opponent in greedy "heuristic?depth=1"; do
    name="${opponent%%\?*}"
    eval_step "$run/vs_$name.log" "$python" eval.py --checkpoint "$run" --opponent "$opponent" --simulations 16 \
        --games "$games" --openings "$openings" --concurrency "$concurrency" --out "$run/vs_$name"
done
failed=0
for pid in "${pids[@]}"; do wait "$pid" || failed=1; done
if [ "$plan" = 0 ]; then
    mark evaluated
    [ "$failed" = 0 ] || tail -n 5 "$run"/*.log
    cp "$run/teacher.json" "$out/teacher.json" && cat "$run/teacher.log" | tail -4
    for name in greedy heuristic; do cp "$run/vs_$name/summary.json" "$out/vs_$name.json" && cat "$run/vs_$name/summary.txt"; done
fi
step "$out/speed.log" "$python" bench/train_bench.py --config "$preset" --fused-only \
    --compilation-cache "$run/jax_cache" --json "$out/speed.json"
if [ "$plan" = 0 ]; then
    mark "speed measured"
    cat "$out/speed.log" && rm "$out/speed.log"
fi
exit "$failed"
