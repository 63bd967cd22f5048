"""The reproduction's wall time before it starts: from a short measured probe of each
variant's training iteration and of the evaluator's games (``probe.py`` measures), a
timeline of the trainings (``parallel`` at a time) and of the evaluator beside them,
printed as one block and kept in ``WORKDIR/estimate.json``.

Times are seconds. The evaluator plays a snapshot's match once it is saved: the
untrained one at once, the middle ones as training passes their game counts, the final
one when its variant is trained; it plays what is ready in the plan's order, one match
at a time, so the last variant's final match always follows the training.
"""

import dataclasses
import json
import math
import os
from typing import NamedTuple

from az.reproduce.durations import format_duration


@dataclasses.dataclass(frozen=True)
class TrainingProbe:
    """One variant's probe: a few iterations of its real config in a scratch workdir."""

    variant: str
    startup_seconds: float  # process start, tracing, init, saves: all of the probe but XLA's compiles and iterations
    compile_seconds: float  # XLA's compiles: paid once by the probe, then read from the cache
    iteration_seconds: float  # a steady iteration, with its share of the teacher probe
    iterations_needed: int  # to spend the game budget (durations.iterations_needed)
    iterations_done: int  # trained already (a resumed run)
    probe_seconds: float  # the probe's wall time

    def seconds_left(self) -> float:
        """Training time still to spend; the compile comes from the cache the probe filled."""
        left = max(0, self.iterations_needed - self.iterations_done)
        return self.startup_seconds + left * self.iteration_seconds if left else 0.0


@dataclasses.dataclass(frozen=True)
class EvaluationProbe:
    """The evaluator's probe: a few games of a step-0 snapshot against the reference."""

    startup_seconds: float  # process start, the engine, loading the snapshot, tracing the search
    compile_seconds: float  # XLA's compile of the search: paid once by the probe, then read from the cache
    plies_per_second: float  # both sides' moves, ``concurrency`` games at once
    plies_per_game: float  # of the games that finished, else the planning length
    games_finished: int  # of those the probe played
    match_overhead_seconds: float  # loading a snapshot and starting the engines, per match
    balance_seconds: float  # Table 2 (0 when done or not asked), scaled from a few positions
    probe_seconds: float

    def match_seconds(self, games: int) -> float:
        return self.match_overhead_seconds + games * self.plies_per_game / max(self.plies_per_second, 1e-9)


class PendingMatch(NamedTuple):
    variant: str
    point: int  # 0 the untrained snapshot, points - 1 the final one
    games: int


class Forecast(NamedTuple):
    training_seconds: float  # until the last variant is trained
    evaluation_seconds: float  # the evaluator's busy time: its start, Table 2, matches
    total_seconds: float  # until the last match is played
    spans: dict  # variant -> (start, end) of its training
    matches: int
    games: int


def pending_matches(variants, *, points: int, games: int, final_games: int, done: dict) -> list[PendingMatch]:
    """The matches still to play in the plan's order; ``done``: matches played per variant."""
    out = []
    for variant in variants:
        for point in range(done.get(variant, 0), points):
            out.append(PendingMatch(variant, point, final_games if point == points - 1 else games))
    return out


def forecast(trainings: list[TrainingProbe], evaluation: EvaluationProbe | None, matches: list[PendingMatch], *,
             points: int, parallel: int) -> Forecast:
    """The timeline: trainings in the plan's order, ``parallel`` at a time, and the
    evaluator playing each match once its snapshot is saved."""
    free_at = [0.0] * parallel
    spans, by_variant = {}, {t.variant: t for t in trainings}
    for t in trainings:
        slot = min(range(parallel), key=free_at.__getitem__)
        start = free_at[slot] if t.seconds_left() else 0.0
        spans[t.variant] = (start, start + t.seconds_left())
        free_at[slot] = spans[t.variant][1]
    training_end = max((end for _, end in spans.values()), default=0.0)
    if evaluation is None or not matches:
        return Forecast(training_end, 0.0, training_end, spans, 0, 0)

    def ready_at(match: PendingMatch) -> float:
        t = by_variant.get(match.variant)
        if t is None or not t.seconds_left():
            return 0.0
        start, end = spans[match.variant]
        if match.point == points - 1:
            return end
        iteration = t.iterations_needed * match.point / (points - 1)
        if t.iterations_done and iteration <= t.iterations_done:  # saved on an earlier start
            return 0.0
        return start + t.startup_seconds + max(0.0, iteration - t.iterations_done) * t.iteration_seconds

    queue = sorted(((ready_at(m), i, m) for i, m in enumerate(matches)), key=lambda r: r[1])
    busy = evaluation.startup_seconds + evaluation.balance_seconds  # the compile: read from the probe's cache
    clock = busy
    while queue:
        ready = [r for r in queue if r[0] <= clock]
        if not ready:
            clock = min(r[0] for r in queue)
            continue
        queue.remove(ready[0])
        seconds = evaluation.match_seconds(ready[0][2].games)
        clock, busy = clock + seconds, busy + seconds
    return Forecast(training_end, busy, max(clock, training_end), spans, len(matches), sum(m.games for m in matches))


def summary_lines(forecast_: Forecast, trainings: list[TrainingProbe], evaluation: EvaluationProbe | None, *,
                  parallel: int, backend: str, probe_seconds: float, path: str) -> list[str]:
    """The printed block: training, evaluation and total, then what each is made of."""
    side_by_side = f"{parallel} at a time" + (" sharing the CPU's cores" if backend == "cpu" and parallel > 1 else "")
    left = [t for t in trainings if t.seconds_left()]
    lines = [f"estimate before training ({format_duration(probe_seconds)} of probing; kept in {path}):",
             f"  training    {format_duration(forecast_.training_seconds)}  {len(left)} variant(s) to train, "
             f"{side_by_side}, on {backend}"]
    for t in left:
        lines.append(f"    {t.variant:24s} {format_duration(t.seconds_left())}  "
                     f"{t.iterations_needed - t.iterations_done} iterations x {t.iteration_seconds:.2f} s + "
                     f"{t.startup_seconds:.0f} s to start (compile {t.compile_seconds:.0f} s: paid by the probe, "
                     "then read from the cache)")
    if evaluation is not None and forecast_.matches:
        lines.append(f"  evaluation  {format_duration(forecast_.evaluation_seconds)}  {forecast_.matches} match(es), "
                     f"{forecast_.games} games, on the CPU beside training")
        finished = (f"{evaluation.games_finished} probe game(s)" if evaluation.games_finished
                    else "the planning length: no probe game finished")
        lines.append(f"    {evaluation.plies_per_second:.1f} plies/s, {evaluation.plies_per_game:.0f} plies a game "
                     f"(from {finished}); compile {evaluation.compile_seconds:.0f} s, "
                     f"Table 2 {evaluation.balance_seconds:.0f} s")
    lines.append(f"  total       {format_duration(forecast_.total_seconds)}  until the last match is played")
    if backend == "cpu":
        lines.append("  (on a CPU the evaluator and the trainings share the cores: expect more than this)")
    return lines


def save(path: str, forecast_: Forecast, trainings: list[TrainingProbe], evaluation: EvaluationProbe | None,
         **context) -> None:
    """``estimate.json``: the forecast, the measurements it came from and ``context``."""
    data = {"training_seconds": forecast_.training_seconds, "evaluation_seconds": forecast_.evaluation_seconds,
            "total_seconds": forecast_.total_seconds, "matches": forecast_.matches, "games": forecast_.games,
            "spans": {v: list(span) for v, span in forecast_.spans.items()},
            "training_probes": [dataclasses.asdict(t) for t in trainings],
            "evaluation_probe": None if evaluation is None else dataclasses.asdict(evaluation), **context}
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(data, f, indent=1)
    os.replace(path + ".tmp", path)


def steady(values: list[float]) -> float:
    """The median: one slow iteration (a save, another process's burst) does not move it."""
    ordered = sorted(values)
    middle = len(ordered) // 2
    return ordered[middle] if len(ordered) % 2 else (ordered[middle - 1] + ordered[middle]) / 2


def waves(count: int, at_once: int) -> int:
    return math.ceil(count / max(1, at_once))
