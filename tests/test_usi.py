"""The USI engine (``az/play/engine``) as GUIs and match runners start it:
``scripts/azshogi-usi`` without arguments, the checkpoint in ``$AZSHOGI_CHECKPOINT``.

One smoke run's snapshots (module fixture ``workdir``: its untrained network at step 0
and a zeroed network at step 7) and one engine process (module fixture ``engine``,
Simulations 4) serve the tests; its ``isready`` compiles the search once (~30-60 s on a
2-core CPU). Lines are read by a thread with timeouts, so a hung or
dead engine fails a test instead of hanging it; cshogi's own USI client
(``cshogi.usi.Engine``, which loops forever at EOF) is driven through the same reader.
"""

import io
import json
import os
import pathlib
import queue
import random
import subprocess
import sys
import threading
import time
import types

import cshogi
import cshogi.usi
import pytest

from az import workdir as workdir_lib
from az.play.engine import clock, moves, protocol
from az.play.engine import engine as engine_lib

ROOT = pathlib.Path(__file__).resolve().parents[1]
WRAPPER = ROOT / "scripts" / "azshogi-usi"
SIMULATIONS = 4
ITERATIONS = 0  # of the smoke run the engine loads
ZEROED_STEP = 7  # a snapshot whose parameters are all 0
LOAD_TIMEOUT = 600  # s for an isready that compiles, on a busy 2-core CPU
MOVE_TIMEOUT = 60  # s for a bestmove without a clock

MATED_BLACK = "4k4/9/9/9/9/9/4p4/4g4/4K4 b - 1"  # black to move is checkmated
MATED_WHITE = "4k4/4G4/4P4/9/9/9/9/9/4K4 w - 1"
MATE_IN_ONE = "4k4/9/4P4/9/9/9/9/9/4K4 b G 1"  # G*5b mates
DECLARATION = "RBGGSSSS1/4K3B/1R1GG4/9/9/9/9/9/4k4 b - 1"  # black: king in camp, 11 pieces, 28 points
DECLARATION_HAND = "RBGGSSSS1/4K3B/2GG5/9/9/9/9/9/4k4 b R 1"  # the rook in hand counts too
NO_DECLARATION = "RBGGSSSS1/4K3B/2GG5/9/9/9/9/9/4k4 b - 1"  # 23 points only


class UsiProcess:
    """An engine process with a reader thread; ``read`` times out instead of blocking."""

    def __init__(self, checkpoint: str | None, *args: str, cwd=None):
        env = dict(os.environ)
        env.pop("AZSHOGI_CHECKPOINT", None)
        if checkpoint is not None:
            env["AZSHOGI_CHECKPOINT"] = checkpoint
        self.started = time.monotonic()
        self.proc = subprocess.Popen(
            [str(WRAPPER), *args],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            env=env,
            cwd=cwd,
        )
        self.lines: queue.Queue = queue.Queue()
        self.transcript: list[str] = []
        self.stderr: list[str] = []
        threading.Thread(target=self._read_stdout, daemon=True).start()
        threading.Thread(target=self._read_stderr, daemon=True).start()

    def _read_stdout(self):
        for raw in self.proc.stdout:
            self.lines.put(raw.decode("utf-8", "replace").rstrip("\r\n"))
        self.lines.put(None)  # EOF

    def _read_stderr(self):
        for raw in self.proc.stderr:
            self.stderr.append(raw.decode("utf-8", "replace").rstrip("\r\n"))

    def send(self, command: str):
        self.transcript.append(f"> {command}")
        self.proc.stdin.write(command.encode() + b"\n")
        self.proc.stdin.flush()

    def read(self, timeout: float) -> str:
        try:
            line = self.lines.get(timeout=max(timeout, 0.0))
        except queue.Empty:
            raise AssertionError(f"no line from the engine in {timeout:.1f} s; transcript:\n{self.tail()}") from None
        if line is None:
            self.lines.put(None)
            raise AssertionError(f"the engine closed its output (rc={self.proc.poll()}); transcript:\n{self.tail()}")
        self.transcript.append(f"< {line}")
        return line

    def until(self, predicate, timeout: float) -> list[str]:
        """Lines up to and including the first one ``predicate`` accepts (a prefix: startswith)."""
        if isinstance(predicate, str):
            prefix = predicate
            predicate = lambda line: line.startswith(prefix)  # noqa: E731
        end = time.monotonic() + timeout
        lines = []
        while True:
            lines.append(self.read(end - time.monotonic()))
            if predicate(lines[-1]):
                return lines

    def quiet(self, seconds: float) -> list[str]:
        """Whatever the engine says in the next ``seconds``."""
        end, lines = time.monotonic() + seconds, []
        while (left := end - time.monotonic()) > 0:
            try:
                line = self.lines.get(timeout=left)
            except queue.Empty:
                break
            if line is None:
                self.lines.put(None)
                break
            self.transcript.append(f"< {line}")
            lines.append(line)
        return lines

    def go(self, command: str, timeout: float = MOVE_TIMEOUT) -> tuple[str, list[str]]:
        """Sends a go command; (bestmove, the lines before it)."""
        self.send(command)
        lines = self.until("bestmove", timeout)
        return lines[-1].split()[1], lines[:-1]

    def isready(self, timeout: float = LOAD_TIMEOUT) -> list[str]:
        self.send("isready")
        return self.until(lambda line: line == "readyok", timeout)

    def drain(self):
        self.quiet(0.05)

    def tail(self, n: int = 40) -> str:
        return "\n".join(self.transcript[-n:])

    def close(self, timeout: float = 30) -> int:
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.stdin.close()
            except (OSError, ValueError):  # already gone, or stdin closed by the test
                pass
            try:
                self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode

    def cshogi_engine(self, timeout: float = MOVE_TIMEOUT) -> cshogi.usi.Engine:
        """cshogi's USI client on this process, reading through the timed reader."""
        engine = cshogi.usi.Engine(str(WRAPPER), connect=False)
        engine.proc = _CshogiPipes(self, timeout)
        return engine


class _CshogiPipes:
    """The part of a Popen that ``cshogi.usi.Engine`` uses, with a timeout on reading."""

    def __init__(self, process: UsiProcess, timeout: float):
        self.process, self.timeout = process, timeout
        self.stdin = self
        self.stdout = self

    def write(self, data: bytes):
        for command in data.decode().splitlines():
            self.process.send(command)

    def readline(self) -> bytes:
        return (self.process.read(self.timeout) + "\n").encode()

    def flush(self):
        pass


def cshogi_board(position: str) -> cshogi.Board:
    """A cshogi board for 'startpos moves ...' or 'sfen ... moves ...' (valid input only)."""
    head, _, moves = position.partition(" moves ")
    board = cshogi.Board() if head == "startpos" else cshogi.Board(head[len("sfen "):])
    for move in moves.split():
        board.push_usi(move)
    return board


def assert_legal(position: str, move: str):
    board = cshogi_board(position)
    parsed = board.move_from_usi(move)
    assert parsed and board.is_legal(parsed), f"{move} is illegal in {position}"


def info_lines(lines):
    return [line for line in lines if line.startswith("info ") and " pv " in line]


# Fixtures ----------------------------------------------------------------------------


@pytest.fixture(scope="module")
def workdir(tmp_path_factory):
    """A smoke run's workdir, made by train.py in its own process like a user's run.

    ``--max_iterations 0`` stops after the run saved its untrained network as snapshot 0
    (~20 s); iterations would add their compile (~1 min on a busy 2-core CPU). A second
    snapshot, step 7, holds the same network with every parameter 0, so its value is 0
    exactly: the engine's score tells which one it loaded.
    """
    path = tmp_path_factory.mktemp("usi_smoke") / "run"
    result = subprocess.run(
        [sys.executable, str(ROOT / "train.py"), "--config", "base.py:smoke", "--workdir", str(path)]
        + ["--max_iterations", str(ITERATIONS)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    import jax

    config, params, _ = workdir_lib.load_snapshot(str(path))
    workdir_lib.save_snapshot(str(path), ZEROED_STEP, jax.tree.map(lambda a: a * 0, params), config)
    assert workdir_lib.snapshot_steps(str(path)) == [0, ZEROED_STEP]
    return path


@pytest.fixture(scope="module")
def engine(workdir, tmp_path_factory):
    """One engine for the protocol tests: started, ``usi`` timed, Simulations 4, ready."""
    process = UsiProcess(str(workdir), cwd=tmp_path_factory.mktemp("gui_cwd"))
    try:
        process.send("usi")
        process.usi_lines = process.until(lambda line: line == "usiok", 30)
        process.usi_seconds = time.monotonic() - process.started
        process.send(f"setoption name Simulations value {SIMULATIONS}")
        process.ready_lines = process.isready()
        yield process
    finally:
        status = process.close()
    assert status == 0, f"quit: exit status {status}\n{process.tail()}"


@pytest.fixture
def fresh(engine):
    engine.drain()
    return engine


# Without jax: helpers and the start-up ---------------------------------------------


def test_usi_and_options_import_nothing_heavy():
    """``usi``, ``setoption`` and friends are answered before jax or the environment load."""
    code = (
        "import sys\n"
        "from az.play.engine import engine\n"
        "status = engine.main(['--checkpoint', 'nowhere'])\n"
        "heavy = ('jax', 'jaxlib', 'numpy', 'envs', 'cshogi', 'orbax', 'flax', 'mctx')\n"
        "print(sorted(m for m in sys.modules if m.split('.')[0] in heavy), status, file=sys.stderr)\n"
    )
    commands = "\n".join(
        ["usi", "setoption name Simulations value 16", "setoption name USI_Hash value 256", "usinewgame", "frobnicate"]
        + ["quit", ""]
    )
    result = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, input=commands, capture_output=True, text=True, timeout=60
    )
    assert result.returncode == 0, result.stderr
    assert result.stderr.splitlines()[-1] == "[] 0"
    lines = result.stdout.splitlines()
    assert lines[-2:] == ["usiok", "info string unknown command: frobnicate"]


def test_parse_go():
    assert protocol.parse_go(["btime", "1000", "wtime", "2000", "byoyomi", "500"]) == protocol.GoCommand(
        btime=1000, wtime=2000, byoyomi=500
    )
    assert protocol.parse_go(["nodes", "4"]).nodes == 4
    assert protocol.parse_go(["infinite"]).infinite
    assert protocol.parse_go(["ponder", "btime", "0", "wtime", "0", "byoyomi", "1000"]).ponder
    assert protocol.parse_go(["mate", "infinite"]).mate
    for bad in (["nodes"], ["nodes", "x"], ["byoyomi", "-5"], ["frobnicate"], ["nodes", "0"]):
        with pytest.raises(ValueError):
            protocol.parse_go(bad)


def test_time_budget():
    go = protocol.parse_go
    assert clock.time_budget_ms(go(["nodes", "8"]), 0) is None
    assert clock.time_budget_ms(go(["infinite"]), 0) is None
    assert clock.time_budget_ms(go(["byoyomi", "500"]), 0) == 500
    assert clock.time_budget_ms(go(["btime", "0", "wtime", "0", "byoyomi", "0"]), 1) == 0
    assert clock.time_budget_ms(go(["btime", "40000", "wtime", "4000", "byoyomi", "1000"]), 0) == 2000
    assert clock.time_budget_ms(go(["btime", "40000", "wtime", "4000", "byoyomi", "1000"]), 1) == 1100
    assert clock.time_budget_ms(go(["btime", "8000", "wtime", "8000", "binc", "1000", "winc", "2000"]), 1) == 2200
    assert clock.time_budget_ms(go(["btime", "100", "wtime", "100", "binc", "1000", "winc", "1000"]), 0) == 100
    assert clock.time_budget_ms(go(["movetime", "300"]), 0) == 300
    # MaxMovesToDraw: the remaining time is shared among the mover's moves left, if fewer than 40.
    assert clock.time_budget_ms(go(["btime", "40000", "wtime", "0", "byoyomi", "1000"]), 0, moves_left=10) == 5000
    assert clock.time_budget_ms(go(["btime", "40000", "wtime", "0", "byoyomi", "1000"]), 0, moves_left=100) == 2000
    assert clock.time_budget_ms(go(["btime", "40000", "wtime", "0"]), 0, moves_left=0) == 40000


def test_simulations_fit_the_time():
    speed = clock.Speed(policy_s=0.01, simulation_s=0.001, compile_s=30.0, host_s=0.01)
    assert clock.simulation_sizes(800) == {800, 400, 200, 100, 50, 25, 12, 6, 3, 1}
    assert clock.most_simulations(clock.simulation_sizes(800), 10.0, speed) == 800
    assert clock.most_simulations(clock.simulation_sizes(800), 0.3, speed) == 200  # 1.25 * (0.03 + 0.2) = 0.29
    assert clock.most_simulations({800}, 0.3, speed) == 0  # the policy move
    assert clock.most_simulations(set(), 0.3, speed) == 0
    assert speed.estimate(0) < 0.03


def test_value_to_cp():
    assert protocol.value_to_cp(0.0) == 0
    assert protocol.value_to_cp(0.5) == round(1200 * 0.5493061443)  # 600 * ln(0.75 / 0.25)
    assert protocol.value_to_cp(-0.5) == -protocol.value_to_cp(0.5)
    assert protocol.value_to_cp(1.0) == protocol.value_to_cp(2.0) == 5942
    assert protocol.value_to_cp(float("nan")) == 0


def test_parse_spec_finds_relative_workdirs_in_the_repository(tmp_path, monkeypatch):
    assert workdir_lib.parse_spec("/abs/run@12") == ("/abs/run", 12)
    assert workdir_lib.parse_spec("/abs/run") == ("/abs/run", None)
    assert workdir_lib.parse_spec("/abs/r@n") == ("/abs/r@n", None)
    repo, elsewhere = tmp_path / "repo", tmp_path / "gui"
    (repo / "runs" / "x" / "snapshots" / "3").mkdir(parents=True)
    elsewhere.mkdir()
    monkeypatch.setattr(workdir_lib, "_REPO", str(repo))
    monkeypatch.chdir(elsewhere)
    assert workdir_lib.parse_spec("runs/x@3") == (str(repo / "runs" / "x"), 3)
    assert workdir_lib.snapshot_problem("runs/x") is None
    assert workdir_lib.snapshot_problem("runs/x@4") == "checkpoint 'runs/x@4': no snapshot of step 4 (have 3)"
    assert workdir_lib.snapshot_problem("runs/y") == f"checkpoint 'runs/y': no snapshots in {elsewhere}/runs/y/snapshots"


class _ScriptedEngine(engine_lib.Engine):
    """An engine whose search is a script: (seconds to wait, what to store) steps."""

    def __init__(self, script):
        self.stream = io.StringIO()
        super().__init__("", 800, 0, protocol.Output(self.stream), "")
        self.script = script

    def think(self, job):
        for seconds, kind, move in self.script:
            if kind == "deadline":
                job.set_deadline(seconds)
                continue
            time.sleep(seconds)
            job.store(**{kind: protocol.Answer(move, [f"info depth 1 nodes 1 score cp 0 pv {move}"])})

    def said(self) -> list[str]:
        return self.stream.getvalue().splitlines()


def wait_for(predicate, timeout: float = 5.0):
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "timed out"
        time.sleep(0.01)


def test_watchdog_answers_with_the_fallback_when_the_search_runs_late():
    engine = _ScriptedEngine([(0, "fallback", "7g7f"), (0.2, "deadline", None), (1.0, "result", "2g2f")])
    engine.handle("go byoyomi 1000")
    time.sleep(0.5)
    assert engine.said() == [
        "info string search unfinished: the policy network's move",
        "info depth 1 nodes 1 score cp 0 pv 7g7f",
        "bestmove 7g7f",
    ]
    engine.job.finished.wait(5)
    assert engine.said()[-1] == "bestmove 7g7f"  # answered once


class _ArmedEngine(_ScriptedEngine):
    """A scripted engine with a network model and a position: ``arm`` sets the watchdog and
    a host fallback (a stand-in for the model module's first legal move)."""

    def __init__(self, script):
        super().__init__(script)
        self.model = types.SimpleNamespace(fixed_size=False, speed=None)
        self.position = types.SimpleNamespace(state=types.SimpleNamespace(ply=10, current_player=0))
        first_legal = types.SimpleNamespace(first_legal_answer=lambda state: protocol.Answer("1g1f", []))
        self.heavy_half = lambda: first_legal

    def arm(self, job):
        moves.arm(self, job, self.heavy_half)


def test_a_move_is_answered_at_its_deadline_while_the_previous_search_still_runs():
    """The watchdog is set before a go waits for the previous go's search (still running
    after its own watchdog answered): the host fallback answers at the deadline."""
    engine = _ArmedEngine([(1.5, "result", "2g2f")])
    start = time.monotonic()
    engine.handle("go btime 0 wtime 0 byoyomi 300")
    wait_for(lambda: len(engine.said()) == 2, 2.0)
    engine.handle("go btime 0 wtime 0 byoyomi 300")
    wait_for(lambda: len(engine.said()) == 4, 2.0)
    assert time.monotonic() - start < 1.2  # the previous search ends at 1.5 s
    assert engine.said() == [moves.HOST_FALLBACK_NOTE, "bestmove 1g1f"] * 2
    engine.job.finished.wait(5)
    assert engine.said()[-1] == "bestmove 1g1f"  # the late results are not sent


def test_stop_waits_for_a_first_move_and_answers_once():
    engine = _ScriptedEngine([(0.3, "fallback", "7g7f"), (0.3, "result", "2g2f")])
    engine.handle("go infinite")
    engine.handle("stop")  # nothing to answer with yet
    assert engine.said() == []
    wait_for(lambda: engine.said())
    assert engine.said()[-1] == "bestmove 7g7f"
    engine.job.finished.wait(5)
    engine.handle("stop")
    assert [line for line in engine.said() if line.startswith("bestmove")] == ["bestmove 7g7f"]


def test_infinite_keeps_its_result_until_stop_and_gameover_drops_an_answer():
    engine = _ScriptedEngine([(0, "fallback", "7g7f"), (0, "result", "2g2f")])
    engine.handle("go infinite")
    engine.job.finished.wait(5)
    time.sleep(0.1)
    assert engine.said() == []
    engine.handle("stop")
    assert engine.said()[-1] == "bestmove 2g2f"
    engine.handle("go ponder")
    engine.job.finished.wait(5)
    engine.handle("gameover lose")
    engine.handle("stop")
    assert [line for line in engine.said() if line.startswith("bestmove")] == ["bestmove 2g2f"]


def test_a_go_without_stop_answers_the_previous_infinite_first():
    engine = _ScriptedEngine([(0, "fallback", "7g7f"), (0, "result", "2g2f")])
    engine.handle("go infinite")
    engine.job.finished.wait(5)
    engine.handle("go nodes 10")
    wait_for(lambda: len([line for line in engine.said() if line.startswith("bestmove")]) == 2)


def test_wrapper_without_a_checkpoint_answers_usi_then_reports_on_isready(tmp_path):
    process = UsiProcess(None, cwd=tmp_path)
    try:
        process.send("usi")
        lines = process.until(lambda line: line == "usiok", 10)
        assert "option name Checkpoint type string default <empty>" in lines
        ready = process.isready(30)
        assert ready[-2].startswith("info string error: no checkpoint")
        move, lines = process.go("go byoyomi 1000", 30)
        assert move == "resign" and lines[-1].startswith("info string error: no model")
    finally:
        assert process.close() == 0


def test_missing_checkpoint_is_one_line_and_the_engine_keeps_going(tmp_path):
    missing = tmp_path / "no_such_run"
    error = f"checkpoint '{missing}@5': no snapshots in {missing}/snapshots"
    process = UsiProcess("/elsewhere", str(missing) + "@5", cwd=tmp_path)  # the argument wins
    try:
        process.send("usi")
        process.until(lambda line: line == "usiok", 10)
        ready = process.isready(30)
        assert ready == [f"info string error: {error}", "readyok"]
        move, lines = process.go("go", 30)
        assert move == "resign"
        assert lines == [f"info string error: no model: {error}"]
        process.proc.stdin.close()  # end of input: exits like quit
        assert process.proc.wait(30) == 0
    finally:
        process.close()
    assert process.stderr == [f"azshogi-usi: error: {error}"]


# With the model -----------------------------------------------------------------


def test_usi_is_answered_at_once_and_isready_loads(engine, workdir):
    assert engine.usi_seconds < 1.0, f"usiok after {engine.usi_seconds:.2f} s"
    lines = engine.usi_lines
    assert lines[0].startswith("id name azshogi") and lines[1].startswith("id author ")
    assert "option name Simulations type spin default 800 min 1 max 1000000" in lines
    assert "option name CheckpointStep type string default latest" in lines
    # What match runners set: the game-length limit (YaneuraOu's name) and threads.
    assert "option name MaxMovesToDraw type spin default 0 min 0 max 100000" in lines
    assert "option name Threads type spin default 1 min 1 max 1024" in lines
    assert lines[-1] == "usiok"
    assert engine.ready_lines[-1] == "readyok"
    loaded = f"@{ZEROED_STEP} (base), {SIMULATIONS} simulations"
    assert any(loaded in line for line in engine.ready_lines), engine.ready_lines
    assert not engine.stderr or all("error" not in line.lower() for line in engine.stderr), engine.stderr


def test_go_nodes(fresh):
    position = "startpos moves 7g7f 3c3d"
    fresh.send(f"position {position}")
    move, lines = fresh.go(f"go nodes {SIMULATIONS}")
    assert_legal(position, move)
    info = info_lines(lines)
    assert len(info) == 1
    words = info[0].split()
    assert words[words.index("nodes") + 1] == str(SIMULATIONS)
    assert words[words.index("score") + 1] == "cp" and int(words[words.index("score") + 2]) in range(-6000, 6001)
    assert words[words.index("pv") + 1] == move


@pytest.mark.parametrize(
    "clock, seconds",
    [
        ("byoyomi 500", 0.5),
        ("btime 1000 wtime 1000 binc 200 winc 200", 0.225),
        ("btime 60000 wtime 60000 byoyomi 300", 1.8),
        (f"nodes {SIMULATIONS} byoyomi 300", 0.3),
    ],
)
def test_go_with_a_clock_answers_in_time(fresh, clock, seconds):
    position = "startpos moves 2g2f 8c8d 2f2e"
    fresh.send(f"position {position}")
    start = time.monotonic()
    move, lines = fresh.go(f"go {clock}")
    elapsed = time.monotonic() - start
    assert elapsed < seconds + 0.3, f"bestmove after {elapsed:.2f} s for {clock}\n{fresh.tail()}"
    assert_legal(position, move)
    assert info_lines(lines)


RUNNER_BYOYOMI_S = 1.0  # a third-party runner's default: go btime 0 wtime 0 byoyomi 1000
ANSWER_MARGIN_S = 0.5  # what a byoyomi move may take beyond it here (the runner's own margin)


def test_a_runners_game_length_limit_compiles_nothing_and_moves_come_in_time(fresh):
    """A runner's order: MaxMovesToDraw before isready, usinewgame, position, go at 1 s
    byoyomi. The limit is a value of the compiled programs: isready has nothing to compile
    (no progress line), and every move comes within the byoyomi and the margin, also right
    after the limit changed without an isready (where a move once waited 12 s for the new
    limit's programs)."""
    try:
        for limit, isready in ((320, True), (256, False), (0, True)):
            fresh.send(f"setoption name MaxMovesToDraw value {limit}")
            if isready:
                start = time.monotonic()
                assert fresh.isready(30) == ["readyok"]
                assert time.monotonic() - start < 5.0, "isready after a changed limit took long"
            fresh.send("usinewgame")
            moves = []
            for _ in range(2):
                position = "startpos" + (" moves " + " ".join(moves) if moves else "")
                fresh.send(f"position {position}")
                start = time.monotonic()
                move, lines = fresh.go(f"go btime 0 wtime 0 byoyomi {int(RUNNER_BYOYOMI_S * 1000)}")
                elapsed = time.monotonic() - start
                assert elapsed < RUNNER_BYOYOMI_S + ANSWER_MARGIN_S, f"{elapsed:.2f} s at limit {limit}\n{fresh.tail()}"
                assert_legal(position, move)
                moves.append(move)
    finally:
        fresh.send("setoption name MaxMovesToDraw value 0")


def test_go_without_time_plays_the_policy_move_at_once(fresh):
    """Every answer comes at once; the policy's move unless the machine is so loaded (the
    other test worker compiling) that its run outlasts the deadline, when the host's
    first legal move answers as designed. So up to three tries for the policy's move."""
    fresh.send("position startpos")
    for _ in range(3):
        start = time.monotonic()
        move, lines = fresh.go("go btime 0 wtime 0 byoyomi 0")
        assert time.monotonic() - start < 0.5
        assert_legal("startpos", move)
        if moves.HOST_FALLBACK_NOTE not in lines:
            break
    assert "info string no time to search: the policy network's move" in lines
    assert " nodes 1 " in info_lines(lines)[0]


def test_go_infinite_answers_only_after_stop(fresh):
    position = "startpos moves 7g7f"
    fresh.send(f"position {position}")
    fresh.send("go infinite")
    said = fresh.quiet(1.5)
    assert not any(line.startswith("bestmove") for line in said), said
    fresh.send("stop")
    move = fresh.until("bestmove", 10)[-1].split()[1]
    assert_legal(position, move)
    fresh.send("stop")  # a second stop is ignored
    assert fresh.quiet(0.3) == []


def test_go_ponder_answers_after_ponderhit(fresh):
    position = "startpos moves 7g7f 3c3d"
    fresh.send(f"position {position}")
    fresh.send("go ponder btime 0 wtime 0 byoyomi 1000")
    said = fresh.quiet(1.0)
    assert not any(line.startswith("bestmove") for line in said), said
    fresh.send("ponderhit")
    move = fresh.until("bestmove", 5)[-1].split()[1]
    assert_legal(position, move)


@pytest.mark.parametrize("sfen", [MATED_BLACK, MATED_WHITE])
def test_resigns_when_mated(fresh, sfen):
    assert cshogi.Board(sfen).is_game_over()
    fresh.send(f"position sfen {sfen}")
    move, lines = fresh.go("go byoyomi 1000")
    assert move == "resign"
    assert lines == ["info string no legal move: resign"]


@pytest.mark.parametrize("sfen", [DECLARATION, DECLARATION_HAND])
def test_declares_a_win_when_the_27_point_rule_holds(fresh, sfen):
    assert cshogi.Board(sfen).is_nyugyoku()
    fresh.send(f"position sfen {sfen}")
    move, _ = fresh.go("go byoyomi 1000")
    assert move == "win"


def test_does_not_declare_short_of_points(fresh):
    assert not cshogi.Board(NO_DECLARATION).is_nyugyoku()
    fresh.send(f"position sfen {NO_DECLARATION}")
    move, _ = fresh.go(f"go nodes {SIMULATIONS}")
    assert_legal(f"sfen {NO_DECLARATION}", move)


def test_bad_commands_get_info_strings_and_the_engine_goes_on(fresh):
    def said_after(command: str) -> list[str]:
        fresh.send(command)
        return fresh.until("info string", 30)

    assert said_after("frobnicate now") == ["info string unknown command: frobnicate now"]
    assert said_after("setoption name Simulations value many")[-1] == (
        "info string error: setoption: option Simulations: 'many' is not a number"
    )
    assert said_after("setoption name Hash value 16") == ["info string unknown option: Hash"]
    assert said_after("setoption name MaxMovesToDraw value -1")[-1] == (
        "info string error: setoption: option MaxMovesToDraw: -1 is outside [0, 100000]"
    )
    fresh.send("setoption name Threads value 8")  # accepted silently, like USI_Hash
    fresh.send("setoption name Draw_Ply value 0")  # the alias; 0 keeps the compiled searches
    assert said_after("position sfen garbage")[-1].startswith("info string error: SFEN needs 3 or 4 fields")
    move, lines = fresh.go("go byoyomi 1000")
    assert move == "resign" and lines[-1].startswith("info string error: no valid position (SFEN needs")
    line = said_after("position startpos moves 7g7f 7g7f")[-1]
    assert line.startswith("info string error: move 2: illegal move in ") and "'7g7f'" in line
    assert said_after("position startpos moves 7g7f 3c3d 9z9y")[-1].endswith("malformed USI move: '9z9y'")
    assert said_after("position sfen 4k4/9/9/9/9/9/9/9/4K4 b - 1 moves 5i5j")[-1].endswith("'5i5j'")
    assert said_after("position start")[-1].startswith("info string error: position must be 'startpos' or 'sfen")
    assert said_after("position")[-1].startswith("info string error: position must be 'startpos' or 'sfen")
    fresh.send("position startpos moves 7g7f")
    fresh.send("go nodes many")
    lines = fresh.until("bestmove", MOVE_TIMEOUT)
    assert lines[0] == "info string error: go nodes: 'many' is not a number; searching with the defaults"
    assert_legal("startpos moves 7g7f", lines[-1].split()[1])
    assert fresh.isready(30) == ["readyok"]


def test_positions_extend_and_diverge(fresh):
    """A position extending the last one plays only the new moves; another one starts over."""
    moves = "7g7f 3c3d 8h2b+ 3a2b B*4e 8c8d"
    for k in (2, 4, 6, 3):
        position = "startpos moves " + " ".join(moves.split()[:k])
        fresh.send(f"position {position}")
        move, _ = fresh.go(f"go nodes {SIMULATIONS}")
        assert_legal(position, move)
    sfen_position = f"sfen {cshogi_board('startpos moves 7g7f 3c3d').sfen()} moves 8h2b+"
    fresh.send(f"position {sfen_position}")
    move, _ = fresh.go(f"go nodes {SIMULATIONS}")
    assert_legal(sfen_position, move)


def test_positions_count_plies_from_the_games_first_move():
    """An SFEN's move number N is N - 1 plies into the game, so a ply limit is the game's;
    repetition still counts in the moves after it."""
    from az.play.engine import model
    from envs import endings, notation

    sfen = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 37"
    shuffle = "5i4h 5a4b 4h5i 4b5a"
    position = model.parse_position(["sfen", sfen, "moves", *shuffle.split(), *shuffle.split()], None)
    state = position.state
    assert int(state.ply) == 36 + 8 and int(state.start_move_number) == 1
    assert notation.to_sfen(state).endswith(" 45")
    # The start position recurs after 4 and 8 moves: a third occurrence, not yet a fourth.
    for repetitions, expected in ((3, True), (4, False)):
        repeated, _ = endings.repetition_outcome(state.history, state.check_history, state.ply, repetitions=repetitions)
        assert bool(repeated) is expected


def _policy_score(engine) -> int:
    """The score of the policy network's move (no time to search) at the start."""
    engine.send("position startpos")
    _, lines = engine.go("go btime 0 wtime 0 byoyomi 0")
    words = info_lines(lines)[0].split()
    return int(words[words.index("cp") + 1])


def test_checkpoint_step_option_reloads(fresh):
    assert _policy_score(fresh) == 0  # the latest snapshot: every parameter 0, value 0
    fresh.send("setoption name CheckpointStep value 99")
    ready = fresh.isready(LOAD_TIMEOUT)
    assert ready[-1] == "readyok"
    assert any(line.startswith("info string error: ") and "no snapshot of step 99" in line for line in ready), ready
    fresh.send("position startpos")
    move, lines = fresh.go("go byoyomi 1000")
    assert move == "resign" and lines[-1].startswith("info string error: no model: ")
    fresh.send("setoption name CheckpointStep value 0")
    ready = fresh.isready(LOAD_TIMEOUT)
    assert any("@0 (base)" in line for line in ready), ready
    assert _policy_score(fresh) != 0  # the untrained network has a value of its own
    move, _ = fresh.go(f"go nodes {SIMULATIONS}")
    assert_legal("startpos", move)
    fresh.send("setoption name CheckpointStep value latest")
    ready = fresh.isready(LOAD_TIMEOUT)
    assert any(f"@{ZEROED_STEP} (base)" in line for line in ready), ready
    assert _policy_score(fresh) == 0


def test_cshogi_client_plays_a_legal_game(fresh):
    """cshogi's USI client against a random mover (every third ply), 60 plies or to the end."""
    client = fresh.cshogi_engine()
    client.isready()
    client.usinewgame()
    board, moves, rng = cshogi.Board(), [], random.Random(0)
    listener = cshogi.usi.InfoListener()
    clocks = [dict(nodes=SIMULATIONS), dict(btime=30000, wtime=30000, byoyomi=200)]
    engine_moves = 0
    for ply in range(60):
        if ply % 3 == 2:
            legal = list(board.legal_moves)
            if not legal:
                break
            move = cshogi.move_to_usi(rng.choice(legal))
        else:
            client.position(moves)
            move, _ = client.go(**clocks[ply % 2], listener=listener.listen())
            engine_moves += 1
            if move == "resign":
                assert board.is_game_over(), board.sfen()
                break
            if move == "win":
                assert board.is_nyugyoku(), board.sfen()
                break
            parsed = board.move_from_usi(move)
            assert parsed and board.is_legal(parsed), f"{move} is illegal in {board.sfen()}"
            assert listener.pv[0] == move and isinstance(listener.score, int)
        board.push_usi(move)
        moves.append(move)
    client.gameover("draw")
    assert engine_moves >= 10
    assert fresh.isready(30) == ["readyok"]


@pytest.mark.slow
@pytest.mark.promise
def test_cshogi_match_runner_plays_clean_games_at_one_second_byoyomi(fresh, workdir, fairy_stockfish, tmp_path):
    """A match runner this project did not write (``python -m cshogi.cli``), as it comes:
    it starts ``scripts/azshogi-usi`` (checkpoint from the environment) once per game against
    fairy-stockfish at 1 s byoyomi; no illegal move, no time loss. Only the game length is
    shortened (``--draw``, 256 by default) to keep the suite short."""
    env = dict(os.environ, AZSHOGI_CHECKPOINT=str(workdir))
    result = subprocess.run(
        [sys.executable, "-m", "cshogi.cli", str(WRAPPER), fairy_stockfish, "--options1", f"Simulations:{SIMULATIONS}",
         "--games", "2", "--byoyomi", "1000", "--draw", "24", "--csa", str(tmp_path)],
        cwd=tmp_path, env=env, capture_output=True, text=True, timeout=LOAD_TIMEOUT,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    endings = [line for line in result.stdout.splitlines() if line.startswith("まで")]
    assert len(endings) == 2, result.stdout[-3000:]
    assert not any("反則" in line or "切れ負け" in line for line in endings), endings  # illegal, time loss
    records = sorted(tmp_path.glob("*.csa"))
    assert len(records) == 2 and all("azshogi" in r.read_text() for r in records)


@pytest.mark.heavy  # compiles the network's search for the teacher set
def test_report_teacher_measures_a_snapshots_policy(workdir, tmp_path):
    """``report teacher`` on the zeroed snapshot: equal logits, so its move is the first
    legal action, or where a pawn, bishop or rook may promote, the first such promotion
    (the plain move's prior goes to it, as the agent plays); it agrees where the teacher's
    move is that one."""
    import numpy as np

    from az.measure import teacher
    from az.play import report
    from envs import env

    out = tmp_path / "teacher.png"
    spec = f"{workdir}@{ZEROED_STEP}"
    assert report.main(["teacher", spec, "--simulations", "0", "--positions", "16", "--one-ply",
                        "--out", str(out)]) == 0
    summary = json.loads(out.with_suffix(".json").read_text())
    row = summary["results"][spec]["policy"]["all"]
    shipped = teacher.load()
    held = shipped.select(shipped.heldout).select(np.arange(16))
    games, best = teacher.to_device(held, env.Rules())
    from az import search as search_lib

    twins = np.asarray(search_lib.searched_moves(games, True)[1])
    first_legal = np.where(twins.any(axis=1), np.argmax(twins, axis=1) + 10 * 81,
                           np.argmax(np.asarray(games.legal_action_mask), axis=1))
    assert twins.any(axis=1).sum() > 0  # some of the positions go the promoted way
    assert row["positions"] == 16 and row["agreement"] == np.mean(first_legal == np.asarray(best))
    assert row["low"] <= row["agreement"] <= row["high"] and out.exists()
    drops = summary["drops"][spec]["policy"]
    assert drops["share"] == np.mean(first_legal // 81 >= 20) and drops["positions"] == 16
    assert summary["teacher_drops"] == np.mean(held.drop)
    from az.measure import agreement
    _, could = agreement.promotion_choices(first_legal, np.asarray(games.legal_action_mask))
    assert summary["promotions"][spec]["policy"]["positions"] == could
    teacher_promoted, teacher_could = agreement.promotion_choices(np.asarray(best), np.asarray(games.legal_action_mask))
    assert teacher_could > 0 and summary["teacher_promotions"] == teacher_promoted / teacher_could
    # The zeroed value rates every position after a move alike (0): the value's one-ply
    # move is the first legal one, but where a move mates (+1): one of these 16 is the
    # teacher's mate in one, which it plays.
    one_ply = summary["results"][spec]["value 1 ply"]["all"]
    first = np.argmax(np.asarray(games.legal_action_mask), axis=1)
    assert (held.mate == 1).sum() == 1
    expected = np.where(held.mate == 1, True, first == np.asarray(best))
    assert one_ply["positions"] == 16 and one_ply["agreement"] == np.mean(expected)


# Slow: compiles more search sizes ---------------------------------------------------


@pytest.mark.slow
def test_go_nodes_compiles_another_size_and_its_pv_is_legal(fresh):
    position = "startpos moves 7g7f 3c3d"
    fresh.send(f"position {position}")
    move, lines = fresh.go("go nodes 32", LOAD_TIMEOUT)
    words = info_lines(lines)[0].split()
    assert words[words.index("nodes") + 1] == "32"
    pv = words[words.index("pv") + 1:]
    assert pv[0] == move and len(pv) >= 2 and words[words.index("depth") + 1] == str(len(pv))
    board = cshogi_board(f"{position}")
    for m in pv:
        parsed = board.move_from_usi(m)
        assert parsed and board.is_legal(parsed), f"pv {pv}: {m} is illegal in {board.sfen()}"
        board.push(parsed)


# White mates in three with R*8f (round 24's drawn game, move 116; tests/test_agent.py).
MATE_IN_THREE = "1+P1+P3+P1/2+L6/5p2l/S8/9/K1+p5p/4kPG1+b/5R1P1/1NS1GS3 w GSNrbg2n2l10p 116"


@pytest.mark.parametrize("sfen, move, plies", [(MATE_IN_THREE, "R*8f", 3), (MATE_IN_ONE, "G*5b", 1)])
def test_a_mate_the_root_finds_is_scored_as_a_mate(fresh, sfen, move, plies):
    """The root's mate search plays the mate and the info line says ``score mate N``
    (plies to mate), not the centipawns of a won value."""
    fresh.send(f"position sfen {sfen}")
    played, lines = fresh.go(f"go nodes {SIMULATIONS}")
    assert played == move, fresh.tail()
    words = info_lines(lines)[-1].split()
    assert words[words.index("score") + 1:words.index("pv") + 2] == ["mate", str(plies), "pv", move], lines


def _search_score(engine, position: str) -> int:
    engine.send(f"position {position}")
    move, lines = engine.go(f"go nodes {SIMULATIONS}")
    assert_legal(position, move)
    words = info_lines(lines)[-1].split()
    return int(words[words.index("cp") + 1])


@pytest.mark.slow
@pytest.mark.promise
def test_max_moves_to_draw_is_a_draw_in_the_tree(fresh):
    """At move 300 of a game limited to 300 plies every move ends it drawn: the search's
    score is 0 exactly, where the untrained network's own values are not."""
    position = "sfen lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 300"
    fresh.send("setoption name CheckpointStep value 0")
    assert fresh.isready(LOAD_TIMEOUT)[-1] == "readyok"
    try:
        assert _search_score(fresh, position) != 0
        fresh.send("setoption name MaxMovesToDraw value 300")
        assert fresh.isready(LOAD_TIMEOUT)[-1] == "readyok"
        assert _search_score(fresh, position) == 0
        fresh.send("setoption name Draw_Ply value 301")  # one more ply: the network's values again
        assert fresh.isready(LOAD_TIMEOUT)[-1] == "readyok"
        assert _search_score(fresh, position) != 0
    finally:
        fresh.send("setoption name MaxMovesToDraw value 0")
        fresh.send("setoption name CheckpointStep value latest")
        assert fresh.isready(LOAD_TIMEOUT)[-1] == "readyok"


@pytest.mark.slow
@pytest.mark.skipif("optimization_level=0" in os.environ.get("XLA_FLAGS", ""), reason="every program is -O0 already")
def test_a_first_start_answers_with_quick_programs_and_optimizes_them_aside(workdir):
    """On a CPU with nothing serialized, ``prepare`` answers with the quick programs; the
    -O2 ones compile in a thread, their (faster) speed replaces the quick one's, they pick
    the same moves, and a later start would load them."""
    import jax

    from az.play.engine import model as model_lib

    from az.play import programs as programs_lib

    workbench = model_lib.Workbench()
    workbench.programs = programs_lib.Programs(digest=f"first-start-{time.time()}")  # nothing serialized for it
    model = model_lib.Model(f"{workdir}@0", max_plies=123, workbench=workbench)
    assert model._starts_quick(SIMULATIONS)
    said = []
    model.prepare(SIMULATIONS, said.append)
    assert "(quick; the faster search compiles aside)" in said[0], said
    assert {0, SIMULATIONS} <= model._compiled(True) and not model._compiled(False)
    quick_speed = model.speed
    model.workbench.background.join(LOAD_TIMEOUT)
    assert {0, SIMULATIONS} <= model._compiled(False)
    assert model.speed is not quick_speed and model.speed.simulation_s < quick_speed.simulation_s
    for position in ("startpos", "startpos moves 7g7f 3c3d 8h2b+"):
        state = model_lib.parse_position(position.split(), None).state
        optimized = model.analyse(SIMULATIONS, state)
        games = model_lib.agent_lib.stack_states([state])
        quick = model._search(SIMULATIONS, True)(model.agent.params, jax.random.PRNGKey(0), games)
        assert int(quick.action[0]) == optimized["action"], position
        assert abs(float(quick.chosen_q[0]) - optimized["value"]) < 1e-4, position
    assert not model._starts_quick(SIMULATIONS)


@pytest.mark.slow
def test_clock_compiles_a_fitting_size_aside(fresh):
    """With Simulations 8 not compiled, a clock plays a compiled size and compiles 8 aside."""
    fresh.send("setoption name Simulations value 8")
    fresh.send("position startpos moves 7g7f")
    move, lines = fresh.go("go btime 0 wtime 0 byoyomi 3000", 10)
    assert_legal("startpos moves 7g7f", move)
    assert " nodes 8 " not in info_lines(lines)[0]
    deadline = time.monotonic() + LOAD_TIMEOUT
    while time.monotonic() < deadline:
        move, lines = fresh.go("go btime 0 wtime 0 byoyomi 3000", 10)
        if " nodes 8 " in info_lines(lines)[0]:
            break
        time.sleep(2)
    else:
        raise AssertionError("the 8-simulation search was never compiled")
    fresh.send(f"setoption name Simulations value {SIMULATIONS}")
    assert fresh.isready(30) == ["readyok"]


# Heuristic mode ------------------------------------------------------------------


def test_heuristic_with_missing_weights_reports_on_isready_and_resigns(tmp_path):
    """No network and nothing compiled: the bad file is one line, then readyok and resign.
    $AZSHOGI_CHECKPOINT is not passed on with --heuristic."""
    missing = tmp_path / "nonexistent"
    process = UsiProcess("/elsewhere", "--heuristic", str(missing), cwd=tmp_path)
    try:
        process.send("usi")
        lines = process.until(lambda line: line == "usiok", 10)
        assert lines[0].startswith("id name azshogi heuristic d1 ")
        assert time.monotonic() - process.started < 5, process.tail()
        ready = process.isready(30)
        assert ready[-1] == "readyok"
        assert ready[-2].startswith("info string error: heuristic weights") and str(missing) in ready[-2], ready
        error = ready[-2][len("info string error: "):]
        move, lines = process.go("go byoyomi 1000", 30)
        assert move == "resign" and lines == [f"info string error: no model: {error}"]
        assert time.monotonic() - process.started < 10, process.tail()  # nothing heavy is loaded
    finally:
        assert process.close() == 0
    assert process.stderr == [f"azshogi-usi: error: {error}"]


@pytest.mark.slow
def test_heuristic_mates_in_one_and_plays_legal_moves(tmp_path):
    """``--heuristic WEIGHTS --depth 1``: isready compiles the evaluation (minutes on a
    busy 2-core CPU); a mate in one is found, an opening move is legal."""
    from az.classical import features

    pieces = dict(zip("PLNSBRG", (100, 300, 400, 500, 800, 1000, 600)))
    named = {name: float(pieces.get(name[-1], 1)) if name.startswith("material_") else 1.0 for name in features.NAMES}
    weights = tmp_path / "weights.json"
    weights.write_text(json.dumps({"weights": named}))
    process = UsiProcess(None, "--heuristic", str(weights), "--depth", "1", cwd=tmp_path)
    try:
        process.send("usi")
        assert process.until(lambda line: line == "usiok", 10)[0].startswith("id name azshogi heuristic d1 ")
        ready = process.isready()
        assert not any(line.startswith("info string error") for line in ready), ready
        assert any("heuristic depth 1" in line for line in ready), ready
        process.send(f"position sfen {MATE_IN_ONE}")
        move, lines = process.go("go byoyomi 1000", 2 * MOVE_TIMEOUT)
        assert move == "G*5b", process.tail()
        assert info_lines(lines)[-1].startswith("info depth 1 nodes ") and " score mate 1 pv G*5b" in lines[-1]
        process.send("position startpos moves 7g7f")
        move, lines = process.go("go", MOVE_TIMEOUT)
        assert_legal("startpos moves 7g7f", move)
        info = info_lines(lines)[-1].split()
        assert info[info.index("score") + 1] == "cp" and info[info.index("pv") + 1] == move, lines
        assert int(info[info.index("nodes") + 1]) == len(list(cshogi_board("startpos moves 7g7f").legal_moves))
    finally:
        status = process.close()
    assert status == 0, f"quit: exit status {status}\n{process.tail()}"
