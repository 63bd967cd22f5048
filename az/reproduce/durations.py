"""The wall time: how many iterations a variant needs, how long the rest will take, and
each variant's training seconds over all the runner's starts (``WORKDIR/timings.json``)."""

import json
import math
import os

PLANNING_PLIES = 150  # a game's length until the first games have finished (docs/reproduction.md)


def iterations_needed(config, rows: list[dict]) -> int:
    """Iterations to spend ``config.budget_games``: games per iteration from the measured
    mean game length once a batch of games has finished, else the planning length."""
    positions = config.selfplay.num_games * config.selfplay.plies_per_iteration
    finished = rows[-1]["games_finished"] if rows else 0
    lengths = sum(r.get("selfplay/length_sum", 0.0) for r in rows)
    plies = lengths / finished if finished >= config.selfplay.num_games else min(PLANNING_PLIES, config.env.max_length)
    return max(1, math.ceil(config.budget_games * plies / positions))


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def estimate_line(variant: str, *, needed: int, per_iteration: float, startup: float, budget_games: int,
                  variants_left: int, parallel: int) -> str:
    """The whole reproduction's time from one variant's first measured iterations."""
    this = startup + needed * per_iteration
    rounds = math.ceil(variants_left / parallel)
    return (f"estimate from {variant}'s first iterations ({per_iteration:.2f} s each, {startup:.0f} s to start, "
            f"{needed} iterations for {budget_games} games): "
            f"{format_duration(this)} for it, about {format_duration(rounds * this)} for the {variants_left} "
            f"variant(s) left ({parallel} at a time); evaluation runs beside on the CPU")


class Timings:
    """Training seconds per variant so far, over all the runner's starts."""

    def __init__(self, path: str):
        self.path = path
        try:
            with open(path, encoding="utf-8") as f:
                self.seconds = json.load(f)
        except (OSError, ValueError):
            self.seconds = {}

    def get(self, variant: str, default=None):
        return self.seconds.get(variant, default)

    def set(self, variant: str, seconds: float) -> None:
        self.seconds[variant] = seconds
        with open(self.path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self.seconds, f)
        os.replace(self.path + ".tmp", self.path)
