#!/usr/bin/env bash
# Strength per GPU minute (issue 22): train the :gpu preset for TRAIN_S seconds of wall time
# (compile included; SIGTERM saves the snapshot, as a preemption would), then measure the
# final snapshot against greedy (16 simulations, both colours from data/openings.tsv) and
# against the teacher set, with its logged teacher curve. Results into OUTDIR (7 files, as
# the device tool returns at most 8).
#
#   bench/gpu_training.sh OUTDIR [TRAIN_S (default 360)] [GAMES (default 108)]
#
# With the device tool: `bench/gpu_training.sh "$OUT"` (carry .whl, as bench/device.sh).
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: bench/gpu_training.sh OUTDIR [TRAIN_S] [GAMES]}"
train_s="${2:-360}"
games="${3:-108}"
mkdir -p "$out"
source bench/device_env.sh
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total --format=csv,noheader
run=runs/gpu_minutes
rm -rf "$run"
start=$(date +%s)
# The progress bar redraws in place; keep the log readable.
timeout -s TERM --kill-after=120 "$train_s" "$python" train.py --config configs/shogi816k.py:gpu --workdir "$run" \
    > "$out/train.log" 2>&1 || true
echo "trained for $(( $(date +%s) - start )) s"; tail -c 1500 "$out/train.log" | tr '\r' '\n' | tail -5
cp "$run/metrics.jsonl" "$out/metrics.jsonl"
"$python" - "$run" <<'EOF'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
last = rows[-1]
print(f"iterations {last['iteration']}, games {last['games_finished']}, positions {last['positions']}, "
      f"mean positions/s {sum(r['positions_per_second'] for r in rows[1:]) / max(len(rows) - 1, 1):.0f}")
for r in rows:
    if "teacher/top1" in r:
        print(f"it {r['iteration']:4d} games {r['games_finished']:6d} top1 {100 * r['teacher/top1']:.1f}% "
              f"top3 {100 * r['teacher/top3']:.1f}% value sign {r['teacher/value_sign_accuracy']:.3f} "
              f"rho {r['teacher/value_rank_correlation']:.3f} ({1000 * r['teacher/seconds']:.0f} ms, iteration "
              f"{1000 * r['seconds']:.0f} ms)")
EOF
"$python" eval.py --checkpoint "$run" --opponent greedy --simulations 16 --games "$games" \
    --openings data/openings.tsv --concurrency 54 --out "$run/vs_greedy" > "$run/eval.log" 2>&1 || tail -20 "$run/eval.log"
cp "$run/vs_greedy/summary.json" "$out/vs_greedy.json" && cat "$run/vs_greedy/summary.txt"
"$python" -m az.play.report teacher "$run@0" "$run" --simulations 0,16 --out "$out/teacher.png" 2>&1 | tail -4
"$python" -m az.play.report curve --workdir "$run" --out "$out/teacher_curve.png" 2>&1 | tail -1
echo "total $(( $(date +%s) - start )) s"
