"""Evolves the classical baseline's evaluation weights by a genetic algorithm (docs/classical.md),
resuming from --workdir.

    python evolve.py --config configs/ga_baseline.py[:smoke] --workdir runs/ga [--config.FIELD=VALUE]

Progress (generation, best and mean agreement, held-out agreement, ETA) is printed and
logged to WORKDIR/metrics.jsonl; the best genome's weights go to WORKDIR/weights.json
(play them: ``eval.py --opponent heuristic:WORKDIR``) with a plot in WORKDIR/fitness.png.
"""

import sys

from absl import app, flags
from ml_collections import config_flags

from az import cli

_CONFIG = config_flags.DEFINE_config_file("config", None, "config file, e.g. configs/ga_baseline.py:smoke.")
_WORKDIR = flags.DEFINE_string("workdir", None, "where the population, metrics and weights go; resumes from it.")
flags.mark_flags_as_required(["config", "workdir"])


def main(argv):
    del argv
    from absl import logging

    logging.set_verbosity(logging.WARNING)
    import os

    from az import workdir
    from az.classical import run

    workdir.enable_compilation_cache(os.path.join(_WORKDIR.value, "jax_cache"))  # a resumed run compiles in seconds
    try:
        run.run(_CONFIG.value, _WORKDIR.value, log=lambda text: print(text, flush=True))
    except ValueError as e:
        print(f"error: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    app.run(main, argv=cli.resolve_config_path(sys.argv), flags_parser=cli.parse_flags)
