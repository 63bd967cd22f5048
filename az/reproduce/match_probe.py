"""The evaluator's probe, in a process set up as the evaluator is (the CPU, the workdir's
compilation cache): a few games of a step-0 snapshot against the reference, timed apart
from the search's compile, and Table 2's engine scoring of a few positions.

    python -m az.reproduce.match_probe REQUEST.json      # started by reproduce.py's probe

REQUEST.json (written by ``probe.py``) says what to play; the measures go to
REQUEST.json's ``result`` path. The games and their records stay in the probe's scratch
folder. Nothing imports this module: ``python -m`` runs it as ``__main__``.
"""

import json
import os
import sys
import threading
import time

from az import workdir as workdir_lib
from az.reproduce import children
from az.reproduce.plan import BALANCE_STARTS, OPENINGS, REPO


class _ProbeOver(Exception):
    """Raised in a game's next move once the probe has measured long enough."""


class _Clock:
    """Moves of both sides, counted from our first move's end (the compile before it)."""

    def __init__(self, seconds: float):
        self.seconds = seconds
        self.started = time.time()
        self.first_move_at: float | None = None
        self.last_move_at: float | None = None
        self.plies = 0
        self.lock = threading.Lock()

    def record(self, ours: bool) -> None:
        with self.lock:
            now = time.time()
            if self.first_move_at is None:
                if ours:
                    self.first_move_at = now
                return
            self.plies += 1
            self.last_move_at = now

    def check(self) -> None:
        if self.first_move_at is not None and time.time() - self.first_move_at > self.seconds:
            raise _ProbeOver()


def _timed(player, clock: _Clock, ours: bool):
    """``player`` whose sessions report each move to ``clock`` and stop once it is over."""
    from az.play import players as players_lib

    class TimedSession(players_lib.Session):
        def __init__(self, inner):
            self.inner = inner

        def new_game(self):
            self.inner.new_game()

        def move(self, position):
            clock.check()
            move = self.inner.move(position)
            clock.record(ours)
            return move

        def game_over(self, result):
            self.inner.game_over(result)

        def close(self):
            self.inner.close()

    class TimedPlayer(players_lib.Player):
        name = player.name

        def session(self):
            return TimedSession(player.session())

    return TimedPlayer()


def _play(request: dict) -> dict:
    """The games' measures: compile, plies per second, finished games' lengths, per-match overhead."""
    from az.play import match as match_lib
    from az.play import players as players_lib
    from az.play.programs import Programs

    programs = Programs()
    reference = players_lib.parse_player(request["opponent"], num_simulations=request["simulations"],
                                         slots=request["concurrency"], seed=1, programs=programs)
    loading = time.time()
    ours = players_lib.parse_player(f"checkpoint:{request['snapshot']}", num_simulations=request["simulations"],
                                    slots=request["concurrency"], programs=programs)
    load_seconds = time.time() - loading
    clock = _Clock(request["seconds"])
    openings = match_lib.load_openings(os.path.join(REPO, OPENINGS))
    match = match_lib.Match(_timed(ours, clock, True), _timed(reference, clock, False), openings,
                            request["out_dir"], games=request["games"], concurrency=request["concurrency"],
                            progress=False)
    try:
        match.run()
    except _ProbeOver:
        pass
    finally:
        ours.close()
        reference.close()
    first, last = clock.first_move_at or time.time(), clock.last_move_at or time.time()
    return {"load_seconds": load_seconds, "compile_seconds": first - clock.started,
            "plies": clock.plies, "play_seconds": max(last - first, 1e-6),
            "finished_plies": [r.plies for r in match.results.values()]}


def _balance(request: dict) -> float:
    """Seconds to score a few positions, as the evaluator scores each of Table 2's."""
    from az.play import report

    count = min(request["balance_positions"], request["concurrency"])
    sfens = report.start_positions(BALANCE_STARTS[0], count)[:count]
    started = time.time()
    report.engine_scores(sfens, request["opponent"], jobs=request["concurrency"])
    return time.time() - started


def main(argv: list[str]) -> int:
    if len(argv) != 1:
        print("usage: python -m az.reproduce.match_probe REQUEST.json (started by reproduce.py)", file=sys.stderr)
        return 2
    with open(argv[0], encoding="utf-8") as f:
        request = json.load(f)
    workdir_lib.enable_compilation_cache(request["cache"])
    started = time.time()
    result = _play(request)
    result["balance_wave_seconds"] = _balance(request) if request["balance_positions"] else 0.0
    result["seconds"] = time.time() - started
    with open(request["result"], "w", encoding="utf-8") as f:
        json.dump(result, f)
    print(json.dumps(result), flush=True)
    return 0


if __name__ == "__main__":
    children.exit_at_once(main(sys.argv[1:]))
