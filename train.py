"""Trains a shogi agent by Gumbel AlphaZero self-play, resuming from --workdir.

    python train.py --config configs/shogi816k.py[:smoke|:cpu] --workdir runs/x [--config.FIELD=VALUE]
"""

import os
import sys

from absl import app, flags
from ml_collections import config_flags


def _resolve_config_path(argv: list[str]) -> list[str]:
    """Lets ``--config shogi816k.py`` find ``configs/shogi816k.py``."""
    here = os.path.dirname(os.path.abspath(__file__))
    out = list(argv)
    for i, arg in enumerate(out):
        value, prefix = None, None
        if arg == "--config" and i + 1 < len(out):
            value, prefix, index = out[i + 1], "", i + 1
        elif arg.startswith("--config="):
            value, prefix, index = arg[len("--config="):], "--config=", i
        if value is None:
            continue
        path, colon, preset = value.partition(":")
        if not os.path.exists(path):
            for candidate in (os.path.join("configs", path), os.path.join(here, "configs", path)):
                if os.path.exists(candidate):
                    out[index] = prefix + candidate + colon + preset
                    break
    return out


_CONFIG = config_flags.DEFINE_config_file("config", None, "config file, e.g. configs/shogi816k.py:smoke")
_WORKDIR = flags.DEFINE_string("workdir", None, "where checkpoints and metrics go; resumes from it")
_MAX_ITERATIONS = flags.DEFINE_integer("max_iterations", None, "stop after this many iterations in total")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
    del argv
    from absl import logging

    logging.set_verbosity(logging.WARNING)  # orbax logs every file it writes at INFO
    from az import checkpoint, config, loop

    try:
        loop.train(_CONFIG.value, _WORKDIR.value, max_iterations=_MAX_ITERATIONS.value)
    except (config.ConfigError, checkpoint.CheckpointMismatch, loop.NonFiniteLoss) as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    app.run(main, argv=_resolve_config_path(sys.argv))
