#!/usr/bin/env bash
# A screen of the stall study at the CPU hour's games, on one GPU: every arm trains
# `make train`'s config (configs/shogi816k_randomstart2.py:cpu, its 7,000 games and
# cosine schedule) at every seed, all runs at once on the one accelerator (through CUDA's
# MPS where it starts, so their small kernels overlap). An arm that costs what the control
# costs per game on the 2-core CPU is so compared at the hour's games in minutes; its cost
# per game on the CPU is measured there (bench/train_bench.py). Into OUTDIR: snapshots_NAME.tar
# (each run's final snapshot, one file an arm), runs.tar (metrics gzipped, config and the log's end
# of each run), timings.txt. Evaluate the snapshots where they land (docs/stall_study.md, protocol).
#
#   scripts/stall_study/gpu_screen.sh OUTDIR [--seeds "0 1 2"] [--minutes M (7)] [--quick] NAME=OVERRIDES ...
#
# NAME=OVERRIDES: an arm, its train.py flags space-separated (`control=` for none), e.g.
# `b128=--config.learner.batch_size=128`. --minutes: a guard (SIGTERM, which saves) for runs
# that have not finished by then; compare such runs at equal games on their logged curves.
# On an H200, 12 runs at once under MPS played about 4,000 positions/s each and reached
# 5,000-6,700 of the 7,000 games in 8 minutes (docs/stall_study.md, a GPU screen).
# --quick: the CPU rehearsal, the :smoke size for a minute.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage='usage: scripts/stall_study/gpu_screen.sh OUTDIR [--seeds "0 1 2"] [--minutes M] [--quick] NAME=OVERRIDES ...'
out="" seeds="0 1 2" minutes=7 quick=0 arms=()
while [ $# -gt 0 ]; do
    case "$1" in
        --seeds) seeds="${2:?--seeds needs a list}"; shift ;;
        --minutes) minutes="${2:?--minutes needs a number}"; shift ;;
        --quick) quick=1 ;;
        -*) echo "error: unknown option $1; $usage" >&2; exit 2 ;;
        *=*) arms+=("$1") ;;
        *) if [ -z "$out" ]; then out="$1"; else echo "error: unexpected argument $1; $usage" >&2; exit 2; fi ;;
    esac
    shift
done
[ -n "$out" ] && [ "${#arms[@]}" -gt 0 ] || { echo "error: an OUTDIR and at least one arm; $usage" >&2; exit 2; }
[[ "$minutes" =~ ^[0-9]+(\.[0-9]+)?$ ]] || { echo "error: --minutes $minutes: a number of minutes" >&2; exit 2; }
preset=configs/shogi816k_randomstart2.py:cpu
[ "$quick" = 1 ] && preset=configs/shogi816k_randomstart2.py:smoke
mkdir -p "$out"
out="$(cd "$out" && pwd)"
source bench/device_env.sh
start=$(date +%s)
mark() { echo "$1 $(( $(date +%s) - start )) s" | tee -a "$out/timings.txt"; }

# MPS lets the runs' kernels share the GPU at once; without it they take turns.
export XLA_PYTHON_CLIENT_PREALLOCATE=false
if command -v nvidia-smi >/dev/null; then
    nvidia-smi --query-gpu=name,memory.total --format=csv,noheader | tee -a "$out/timings.txt"
    export CUDA_MPS_PIPE_DIRECTORY=/tmp/mps_pipe CUDA_MPS_LOG_DIRECTORY=/tmp/mps_log
    mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
    if nvidia-cuda-mps-control -d 2>>"$out/timings.txt" &&
        timeout 120 "$python" -c "import jax.numpy as j; print(float(j.ones(3).sum()))" >/dev/null 2>&1; then
        echo "MPS on" | tee -a "$out/timings.txt"
    else
        echo quit | nvidia-cuda-mps-control 2>/dev/null || true
        unset CUDA_MPS_PIPE_DIRECTORY CUDA_MPS_LOG_DIRECTORY
        echo "MPS off" | tee -a "$out/timings.txt"
    fi
fi

guard_s=$(awk -v m="$minutes" 'BEGIN { printf "%d", m * 60 }')
runs=() pids=()
for arm in "${arms[@]}"; do
    name="${arm%%=*}" overrides="${arm#*=}"
    for seed in $seeds; do
        run="runs/screen/${name}_s$seed"
        rm -rf "$run" && mkdir -p "$run"
        # shellcheck disable=SC2086  # the overrides are separate flags
        timeout -s TERM --kill-after=60 "$guard_s" "$python" train.py --config "$preset" --workdir "$run" \
            --config.seed="$seed" --config.checkpoint.every_iterations=100 --config.checkpoint.keep=1 \
            $overrides > "$run/train.log" 2>&1 &
        runs+=("$run") pids+=($!)
    done
done
mark "started ${#runs[@]} runs"
for i in "${!runs[@]}"; do
    status=0; wait "${pids[$i]}" || status=$?
    echo "${runs[$i]} exit $status, $(wc -l < "${runs[$i]}/metrics.jsonl" 2>/dev/null || echo 0) iterations," \
        "snapshots: $(ls "${runs[$i]}/snapshots" 2>/dev/null | tr '\n' ' ')" | tee -a "$out/timings.txt"
done
mark trained

# Each run's last snapshot, and what it logged (the log's end: the progress bar's last line).
finals=()
for run in "${runs[@]}"; do
    last=$(ls "$run/snapshots" 2>/dev/null | grep -E '^[0-9]+$' | sort -n | tail -1 || true)
    [ -n "$last" ] && finals+=("$run/snapshots/$last")
    tail -c 3000 "$run/train.log" | tr '\r' '\n' | tail -8 > "$run/train_tail.log"
done
# One tar an arm: the device tool returns files of at most 16 MiB.
for arm in "${arms[@]}"; do
    name="${arm%%=*}" mine=()
    for f in "${finals[@]}"; do [[ "$f" == "runs/screen/${name}_s"* ]] && mine+=("$f"); done
    [ "${#mine[@]}" -gt 0 ] && tar -cf "$out/snapshots_$name.tar" "${mine[@]}"
done
# The metrics compressed: 12 runs' uncompressed lines pass 16 MiB.
for run in "${runs[@]}"; do [ -f "$run/metrics.jsonl" ] && gzip -c "$run/metrics.jsonl" > "$run/metrics.jsonl.gz"; done
tar -cf "$out/runs.tar" $(for run in "${runs[@]}"; do
    for f in metrics.jsonl.gz config.json train_tail.log; do [ -f "$run/$f" ] && echo "$run/$f"; done
done)
ls -l "$out"
[ "${CUDA_MPS_PIPE_DIRECTORY:-}" ] && { echo quit | nvidia-cuda-mps-control || true; }
mark done
