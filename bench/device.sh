#!/usr/bin/env bash
# One call on a lent accelerator: speed, memory and a short training run, into OUTDIR
# (device.json and device.md; see bench/device_bench.py). At most 7 minutes on one H100
# or H200 (--budget-s 400 and the wheels' install).
#
#   bench/device.sh OUTDIR [--quick] [--budget-s SECONDS] [--parts self-play,search,...]
#
# With the device tool: run `bench/device.sh "$OUT"` (carry .whl); then, here, keep the
# report under the card's name and the date (FILES_AT: where the tool put $OUT's files):
#   cp FILES_AT/device.json docs/data/device/h100_$(date +%Y%m%d).json   # or h200_...
#
# The device machines reach no package registry and lack pgx, mctx, cshogi, ml-collections,
# tensorboardX and svgwrite: `make device-wheels` puts their wheels in .whl/ here, and this
# script installs them from there when the folder travels (carry .whl). On a CPU
# (`--quick`, as tests/test_bench.py runs it) the repository's .venv is used.
set -euo pipefail
cd "$(dirname "$0")/.."
out="${1:?usage: bench/device.sh OUTDIR [--quick] [--budget-s SECONDS] [--parts ...]}"
shift
source bench/device_env.sh
# What ran: the card and the versions the numbers belong to.
command -v nvidia-smi >/dev/null && nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader
"$python" -c 'import importlib.metadata as m, sys; print("python", sys.version.split()[0], *(f"{p} {m.version(p)}" for p in ("jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "chex", "mctx", "pgx", "cshogi")))'
exec "$python" bench/device_bench.py "$out" "$@"
