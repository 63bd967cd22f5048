"""Trains a shogi agent by Gumbel AlphaZero self-play, resuming from --workdir.

    python train.py --config configs/shogi816k.py[:size=S,recipe=R] --workdir runs/x [--config.FIELD=VALUE]

Presets (configs/default.py): size smoke|cpu|gpu|paper says how big, recipe
paper|small|exercise which algorithm; both default to paper. Aliases:
  :paper = size=paper,recipe=paper   the paper's scale
  :gpu   = size=gpu,recipe=paper     the paper's search and network on one GPU
  :cpu   = size=cpu,recipe=small     an hour on a 2-core CPU (`make train`)
  :smoke = size=smoke,recipe=exercise  a tiny run that switches self-play features on
"""

import sys

from absl import app, flags
from ml_collections import config_flags

from az import cli

_CONFIG = config_flags.DEFINE_config_file("config", None, "config file and preset, e.g. configs/shogi816k.py:size=cpu,recipe=small (aliases: :paper, :gpu, :cpu, :smoke)")
_WORKDIR = flags.DEFINE_string("workdir", None, "where checkpoints and metrics go; resumes from it.")
_MAX_ITERATIONS = flags.DEFINE_integer("max_iterations", None, "stop after this many iterations in total.")
_BUDGET_MINUTES = flags.DEFINE_float("budget_minutes", None, "a wall-time budget: the game budget becomes what this "
                                     "many minutes hold at the speed measured after compiling (az/train/budget.py)")
_COORDINATOR = flags.DEFINE_string("coordinator_address", None, "multi-host: host:port of process 0.")
_NUM_PROCESSES = flags.DEFINE_integer("num_processes", None, "multi-host: how many processes.")
_PROCESS_ID = flags.DEFINE_integer("process_id", None, "multi-host: this process's index.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
    del argv
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # orbax logs every file it writes at INFO
    if _CONFIG.value.distributed:
        from az.train import distributed

        distributed.initialize(_COORDINATOR.value, _NUM_PROCESSES.value, _PROCESS_ID.value)
    from az.train import checkpoint, config, loop

    try:
        loop.train(_CONFIG.value, _WORKDIR.value, max_iterations=_MAX_ITERATIONS.value,
                   budget_minutes=_BUDGET_MINUTES.value)
    except (config.ConfigError, checkpoint.CheckpointMismatch, loop.NonFiniteLoss) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    cli.use_cpu_cores()  # before the config files, which import JAX
    app.run(main, argv=cli.resolve_config_path(sys.argv), flags_parser=cli.parse_flags)
