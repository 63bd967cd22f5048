"""The USI engines as a match runner starts them: each readyok's time and the slowest move.

    python bench/engine_start.py --checkpoint runs/x [--instances 1,2] [--moves 8] [--byoyomi 1000]
                                 [--max-moves 320] [--handshake 120] [--logs DIR] [--quick]

A game is the network engine (``python -m az.play.engine --checkpoint``, black) against
the classical one (``--heuristic``, white), both started at once, as a third-party runner
with default settings drives them: ``usi``, ``setoption name MaxMovesToDraw value M``,
``isready`` (a readyok later than ``--handshake`` seconds loses the game), ``usinewgame``,
then ``position startpos moves ...`` and ``go btime 0 wtime 0 byoyomi B`` for ``--moves``
plies. For each number of games in ``--instances`` (1: one game, 2: two games at once,
four engines starting together) it runs twice: on a cold cache (fresh compilation caches,
one for the network engines and one for the classical ones, shared by the games) and on
the warm one the cold run left. It prints each engine's seconds from its start to
readyok, each engine's slowest move as a ratio of the byoyomi (above 1: late, a loss
at a runner with no margin), and, after the game, the seconds to readyok once
``MaxMovesToDraw`` is set to another value (a limit is a value, so nothing compiles).
``--quick`` (one game, 2 plies, a smoke snapshot made here when no ``--checkpoint`` is
given) is the smoke test (tests/test_engine_start.py).
"""

import argparse
import os
import pathlib
import queue
import subprocess
import sys
import tempfile
import threading
import time

import cshogi

ROOT = pathlib.Path(__file__).resolve().parents[1]


class EngineProcess:
    """An engine subprocess whose lines a thread reads, so that every wait has a timeout."""

    def __init__(self, name: str, command: list[str], log_path: str | None = None):
        self.name = name
        self.started = time.monotonic()
        env = {k: v for k, v in os.environ.items() if k != "JAX_COMPILATION_CACHE_DIR"}  # caches of its own
        stderr = open(log_path, "w") if log_path else subprocess.DEVNULL
        self.proc = subprocess.Popen(command, stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                     stderr=stderr, cwd=ROOT, env=env, text=True, bufsize=1)
        if log_path:
            stderr.close()  # the child holds its own copy
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\r\n"))
        self.lines.put(None)

    def send(self, command: str):
        self.proc.stdin.write(command + "\n")
        self.proc.stdin.flush()

    def until(self, prefix: str, timeout: float) -> str | None:
        """The first line starting with ``prefix`` within ``timeout`` s; None if none came."""
        end = time.monotonic() + timeout
        while (left := end - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self.lines.put(None)
                return None
            if line.startswith(prefix):
                return line
        return None

    def close(self, timeout: float = 10.0):
        try:
            self.send("quit")
            self.proc.wait(timeout)
        except (OSError, subprocess.TimeoutExpired):
            self.proc.kill()
            self.proc.wait()


def handshake(engine: EngineProcess, max_moves: int, timeout: float) -> float | None:
    """Seconds from the engine's start to its readyok, as a runner asks for it; None
    past ``timeout`` (a runner's lost game)."""
    engine.send("usi")
    if engine.until("usiok", timeout) is None:
        return None
    if limit_change(engine, max_moves, timeout - (time.monotonic() - engine.started)) is None:
        return None
    return time.monotonic() - engine.started


def limit_change(engine: EngineProcess, max_moves: int, timeout: float) -> float | None:
    """Seconds from ``setoption name MaxMovesToDraw`` to readyok: at the handshake, and
    again on an engine that has played (a runner changing the game length between games)."""
    start = time.monotonic()
    engine.send(f"setoption name MaxMovesToDraw value {max_moves}")
    engine.send("isready")
    return time.monotonic() - start if engine.until("readyok", timeout) is not None else None


def play(black: EngineProcess, white: EngineProcess, plies: int, byoyomi_ms: int) -> dict:
    """``plies`` moves from the start position at ``go btime 0 wtime 0 byoyomi B``: each
    engine's move seconds (stops early at a game's end or a missing or illegal move)."""
    board, moves = cshogi.Board(), []
    seconds = {black.name: [], white.name: []}
    for engine in (black, white):
        engine.send("usinewgame")
    for ply in range(plies):
        engine = black if ply % 2 == 0 else white
        engine.send("position startpos" + (" moves " + " ".join(moves) if moves else ""))
        start = time.monotonic()
        engine.send(f"go btime 0 wtime 0 byoyomi {byoyomi_ms}")
        line = engine.until("bestmove", 10 * byoyomi_ms / 1000 + 30)
        seconds[engine.name].append(time.monotonic() - start)
        move = line.split()[1] if line else None
        parsed = board.move_from_usi(move) if move else 0
        if not parsed or not board.is_legal(parsed):
            break
        board.push(parsed)
        moves.append(move)
        if board.is_game_over():
            break
    return seconds


def engine_commands(checkpoint: str, network_cache: str, classical_cache: str) -> dict[str, list[str]]:
    python = [sys.executable, "-m", "az.play.engine"]
    return {"network": python + ["--checkpoint", checkpoint, "--compilation_cache", network_cache],
            "classical": python + ["--heuristic", "--compilation_cache", classical_cache]}


def run_games(commands: dict[str, list[str]], games: int, *, plies: int, byoyomi_ms: int, max_moves: int,
              handshake_s: float, logs: str | None = None) -> list[dict]:
    """``games`` games whose engines all start at once: per engine, its readyok seconds
    (None: past the handshake) and move seconds. ``logs``: a path prefix for each engine's
    stderr (``{logs}{name}.err``), else it is dropped."""
    engines = [EngineProcess(f"{kind}{g + 1}", command, logs and f"{logs}{kind}{g + 1}.err")
               for g in range(games) for kind, command in commands.items()]
    ready = {}
    try:
        threads = [threading.Thread(target=lambda e=e: ready.__setitem__(e.name, handshake(e, max_moves, handshake_s)))
                   for e in engines]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        moves = {}
        pairs = [engines[i:i + 2] for i in range(0, len(engines), 2)]
        playing = [threading.Thread(target=lambda b=b, w=w: moves.update(play(b, w, plies, byoyomi_ms)))
                   for b, w in pairs if ready[b.name] is not None and ready[w.name] is not None]
        for thread in playing:
            thread.start()
        for thread in playing:
            thread.join()
        changed = {e.name: limit_change(e, max_moves // 2, handshake_s) for e in engines if ready[e.name] is not None}
        return [{"engine": e.name, "readyok_s": ready[e.name], "moves_s": moves.get(e.name, []),
                 "limit_change_s": changed.get(e.name)} for e in engines]
    finally:
        for engine in engines:
            engine.close(10.0 if ready.get(engine.name) is not None else 1.0)  # a silent one is killed


def report(label: str, rows: list[dict], byoyomi_ms: int, handshake_s: float) -> list[str]:
    """One line per engine: readyok seconds (or a missed handshake) and its slowest move
    against the byoyomi."""
    lines = []
    for row in rows:
        ready = row["readyok_s"]
        said = f"readyok {ready:6.1f} s" if ready is not None else f"no readyok in {handshake_s:.0f} s (LOST)"
        if row["moves_s"]:
            slowest = max(row["moves_s"])
            said += (f", {len(row['moves_s'])} moves, slowest {slowest:5.2f} s = {slowest * 1000 / byoyomi_ms:.2f}"
                     " x byoyomi")
        if row.get("limit_change_s") is not None:
            said += f", new MaxMovesToDraw readyok {row['limit_change_s']:.2f} s"
        lines.append(f"{label}: {row['engine']:<10} {said}")
    return lines


def smoke_snapshot(directory: str) -> str:
    """An untrained smoke run's workdir (its snapshot 0), made by train.py."""
    workdir = os.path.join(directory, "smoke_run")
    subprocess.run([sys.executable, str(ROOT / "train.py"), "--config", "base.py:smoke", "--workdir", workdir,
                    "--max_iterations", "0"], cwd=ROOT, check=True, capture_output=True, timeout=900)
    return workdir


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", default="", help="the network engine's WORKDIR[@STEP]")
    parser.add_argument("--instances", default="1,2", help="games started at once, in turn (default 1,2)")
    parser.add_argument("--moves", type=int, default=8, help="plies of each game (default 8)")
    parser.add_argument("--byoyomi", type=int, default=1000, help="ms per move (default 1000)")
    parser.add_argument("--max-moves", type=int, default=320, help="MaxMovesToDraw sent before isready")
    parser.add_argument("--handshake", type=float, default=120.0, help="s a runner waits for readyok")
    parser.add_argument("--logs", default="", help="a folder for each engine's stderr (JAX_LOG_COMPILES=1 "
                        "shows what it compiles)")
    parser.add_argument("--quick", action="store_true", help="one game, 2 plies, a smoke snapshot")
    args = parser.parse_args(argv)
    if args.quick:
        args.instances, args.moves = "1", 2
    try:
        instances = [int(n) for n in args.instances.split(",")]
    except ValueError:
        parser.error(f"--instances {args.instances!r}: expected integers separated by commas")
    if args.logs:
        os.makedirs(args.logs, exist_ok=True)
    if not args.checkpoint and not args.quick:
        parser.error("--checkpoint WORKDIR[@STEP] is needed (or --quick, which makes a smoke snapshot)")
    with tempfile.TemporaryDirectory(prefix="engine_start_") as scratch:
        checkpoint = args.checkpoint or smoke_snapshot(scratch)
        for games in instances:
            caches = [os.path.join(scratch, f"x{games}_{kind}_cache") for kind in ("network", "classical")]
            commands = engine_commands(checkpoint, *caches)
            for cache in ("cold", "warm"):
                logs = args.logs and os.path.join(args.logs, f"{cache}_x{games}_")
                rows = run_games(commands, games, plies=args.moves, byoyomi_ms=args.byoyomi,
                                 max_moves=args.max_moves, handshake_s=args.handshake, logs=logs)
                for line in report(f"{cache} x{games}", rows, args.byoyomi, args.handshake):
                    print(line, flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
