"""Property-based fuzz of the USI engine: what a client may send, valid or not, in any order.

A hypothesis strategy (``sequences``) draws command sequences: valid commands interleaved
with malformed and out-of-order ones (``go`` before ``isready``, ``stop``/``ponderhit``
with no search, positions with illegal or garbage moves, SFENs that are no position,
``setoption`` with unknown names or bad values, overlong lines, non-UTF-8 bytes, empty
lines, the end of input in the middle of a line). After each sequence the engine must
answer ``isready`` with ``readyok`` and a valid ``position`` + ``go`` with a legal move
(cshogi judges), every error must have been reported as exactly one ``info string``
line, and every ``bestmove`` must be legal in the position of the ``go`` it answers.

Fast: the command loop (``az.play.engine.engine``) with a stub model (``StubModel``, no
JAX: positions through cshogi) that checks what it is asked: no search before
``isready`` prepared it, only positions a ``position`` command set and that have a
legal move, simulation counts within the protocol's bounds; 500 sequences through
``Engine.handle``, 50 as bytes through ``main``'s own stdin (any line ends, EOF in the
middle of a line). Slow: the real engine process on a smoke snapshot (Simulations 2),
50 sequences through the same checks, a barrier command after each line to tell its
reply. The stub stands for ``az.play.engine.model``: it follows that module's interface
(``parse_position``, ``Model``, ``first_legal_answer``...), and changes there show here.
"""

import dataclasses
import functools
import os
import threading
import time

import cshogi
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from az.play.engine import clock
from az.play.engine import engine as engine_lib
from az.play.engine import protocol
from envs import notation

STARTS = [  # where positions start: the usual one, a mated side, a declaration, a mate in one, a late move number
    notation.STARTPOS_SFEN,
    "4k4/9/9/9/9/9/4p4/4g4/4K4 b - 1",
    "RBGGSSSS1/4K3B/1R1GG4/9/9/9/9/9/4k4 b - 1",
    "4k4/9/4P4/9/9/9/9/9/4K4 b G 1",
    "ln1g3nl/1r1sk1gb1/p1ppppspp/1p4p2/9/2P1P1P2/PP1P1P1PP/1BG1S2R1/LN2KGSNL w - 40",
]
GARBAGE_WORDS = ["", "x", "0", "-1", "+5", "1_000", "²", "١٢", "nan", "1e3", "9" * 30, "\x00", "\ufffd", "moves",
                 "startpos", "sfen", "name", "value", "7g7f", "P*5e", "9z9y", "5i5j", "infinite", "nodes", "\u2028"]
ANSWER_INFO = ("info depth ", "info string error: no model", "info string error: no valid position",
               "info string no legal move", "info string entering-king", "info string search unfinished",
               "info string no time to search", "info string error: search failed", "info string error: no move found")


# The commands -----------------------------------------------------------------------


@dataclasses.dataclass
class Command:
    raw: bytes  # one line as sent, without its line end
    expect: str = "judge"  # "none": no reply; "error": exactly one info string; "judge": by its words

    @property
    def text(self) -> str:
        return self.raw.decode("utf-8", "replace")  # as the engine's stdin decodes it


def _sent(text: str, expect: str = "judge") -> Command:
    return Command(text.encode("utf-8", "surrogatepass"), expect)


@st.composite
def legal_lines(draw, max_moves: int = 12):
    """(start SFEN, legal USI moves from it) by random playouts through cshogi."""
    start = draw(st.sampled_from(STARTS))
    board, moves = cshogi.Board(start), []
    for pick in draw(st.lists(st.integers(0, 2**16), max_size=max_moves)):
        legal = [cshogi.move_to_usi(m) for m in board.legal_moves]
        if not legal:
            break
        moves.append(legal[pick % len(legal)])
        board.push_usi(moves[-1])
    return start, moves


def position_text(start: str, moves: list[str]) -> str:
    head = "startpos" if start == notation.STARTPOS_SFEN else f"sfen {start}"
    return f"position {head}" + (f" moves {' '.join(moves)}" if moves else "")


@st.composite
def positions(draw, real: bool):
    start, moves = draw(legal_lines(max_moves=30))
    how = draw(st.sampled_from(["valid", "valid", "move", "sfen", "words", "garbage", "long"]))
    if how == "move":  # a malformed or illegal move somewhere in the line
        at = draw(st.integers(0, len(moves)))
        bad = draw(st.sampled_from(["7g7f", "9a1i", "P*1a", "zz", "5i5j", "1a1a", "8h2b+", "K*5e", "\ufffd"]))
        moves = moves[:at] + [bad] + moves[at:]
    elif how == "sfen":  # one character of the SFEN replaced, or a field dropped
        fields = start.split()
        if draw(st.booleans()):
            del fields[draw(st.integers(0, len(fields) - 1))]
            start = " ".join(fields)
        else:
            at = draw(st.integers(0, len(start) - 1))
            start = start[:at] + draw(st.sampled_from(list("0123456789/+-bwPLNSGBRKplnsgbrkx"))) + start[at + 1:]
        return _sent(f"position sfen {start}" + (f" moves {' '.join(moves)}" if moves else ""))
    elif how == "words":
        return _sent("position " + " ".join(draw(st.lists(st.sampled_from(GARBAGE_WORDS), max_size=6))))
    elif how == "garbage":
        return _sent("position " + draw(st.text(max_size=40)))
    elif how == "long":  # an overlong line: a long legal game
        start, moves = draw(legal_lines(max_moves=60 if real else 160))
    return _sent(position_text(start, moves))


@functools.cache  # strategies are built once: building them per draw costs more than the engine's work
def go_commands(real: bool):
    nodes = st.sampled_from([2]) if real else st.integers(1, 8)
    ms = st.integers(0, 3000)
    valid = st.one_of(
        st.just("go"),
        nodes.map(lambda n: f"go nodes {n}"),
        ms.map(lambda t: f"go byoyomi {t}"),
        st.tuples(ms, ms, ms).map(lambda t: f"go btime {t[0]} wtime {t[1]} byoyomi {t[2]}"),
        st.tuples(ms, ms, ms, ms).map(lambda t: f"go btime {t[0]} wtime {t[1]} binc {t[2]} winc {t[3]}"),
        ms.map(lambda t: f"go movetime {t}"),
        st.sampled_from(["go infinite", "go ponder btime 0 wtime 0 byoyomi 1000", "go mate 1000", "go mate infinite",
                         "go depth 3", "go movestogo 20 byoyomi 100", "go searchmoves 7g7f 2g2f",
                         f"go byoyomi {10**25}", f"go btime {10**40} wtime 0"]),
    )
    huge = [] if real else ["1000000"]  # nodes a real engine would compile a search of
    extreme = st.sampled_from(["0", "-1", "x", "", "²", "1000001", str(2**31), str(10**14), str(10**40), "x" * 5000,
                               "9" * 5000] + huge)
    malformed = st.one_of(
        st.tuples(st.sampled_from(protocol._GO_NUMBERS), extreme).map(lambda pair: f"go {pair[0]} {pair[1]}"),
        st.sampled_from(["go nodes", "go btime", "go frob", "go byoyomi 100 nodes"]),
        st.lists(st.sampled_from(GARBAGE_WORDS + ["btime", "byoyomi", "ponder"]), max_size=5).map(
            lambda words: "go " + " ".join(words)),
    )
    return st.one_of(valid, malformed).map(_sent)


@functools.cache
def setoptions(real: bool, checkpoint: str):
    simulations = [2] if real else [1, 4, 16, 800]
    draws = [0] if real else [0, 1, 300]
    ok = st.sampled_from(
        [f"setoption name Simulations value {n}" for n in simulations]
        + [f"setoption name MaxMovesToDraw value {n}" for n in draws] + [f"setoption name Draw_Ply value {draws[-1]}"]
        + ["setoption name NetworkDelay value 0", "setoption name NetworkDelay value 500",
           "setoption name USI_Hash value 256", "setoption name Threads value 8", "setoption name USI_Ponder value true",
           f"setoption name Checkpoint value {checkpoint}", "setoption name CheckpointStep value latest",
           "setoption name CheckpointStep value 0", "setoption name Checkpoint value /nowhere/run",
           "setoption name Checkpoint value <empty>", "setoption name CheckpointStep value 12",
           f"setoption name Checkpoint value {checkpoint}@²"])
    error = st.sampled_from(
        ["setoption name Simulations value many", "setoption name Simulations value 0",
         f"setoption name Simulations value {10**7}", f"setoption name Simulations value {'9' * 5000}",
         "setoption name Simulations", "setoption name NetworkDelay value -1",
         "setoption name MaxMovesToDraw value -1", "setoption name CheckpointStep value x", "setoption",
         "setoption Simulations 4", "setoption value 4", "setoption name Hash value 16",
         "setoption name  value 3", "setoption name Frobnicate"])
    anything = st.lists(st.sampled_from(GARBAGE_WORDS), max_size=5).map(lambda w: "setoption name " + " ".join(w))
    return st.one_of(ok.map(lambda t: _sent(t, "none")), error.map(lambda t: _sent(t, "error")),
                     anything.map(_sent))


@functools.cache
def other_commands(real: bool):
    raw_bytes = st.binary(max_size=60).map(lambda b: Command(b.replace(b"\n", b" ").replace(b"\r", b" ")))
    unknown = st.text(alphabet=st.characters(blacklist_characters="\n\r"), min_size=1, max_size=30)
    return st.one_of(
        st.sampled_from(["usi", "isready", "usinewgame", "stop", "ponderhit", "gameover win", "gameover lose",
                         "gameover draw", "gameover", "", "   ", "\t", "isready now", "stop stop"]
                        + ([] if real else ["quit"])).map(_sent),
        unknown.map(_sent),
        raw_bytes,
        st.sampled_from([b"\xff\xfe go", b"isready\xc3", b"\xe3\x81\x82 position", b"usi\x00ok"]).map(Command),
        st.integers(1000, 20000 if real else 200000).map(lambda n: _sent("frobnicate " + "x" * n)),
    )


@st.composite
def sequences(draw, real: bool, checkpoint: str):
    """Commands in any order; most start as a GUI would (``usi``, ``isready``), so that
    malformed ones also reach a loaded model and a valid position."""
    command = st.one_of(positions(real), go_commands(real), setoptions(real, checkpoint), other_commands(real),
                        positions(real), go_commands(real))
    opening = draw(st.sampled_from([[], ["isready"], ["usi", "isready"], ["usi", "isready"]]))
    start, moves = draw(legal_lines(max_moves=6)) if opening else (None, [])
    prefix = [_sent(text) for text in opening] + ([_sent(position_text(start, moves))] if opening else [])
    return prefix + draw(st.lists(command, min_size=1, max_size=12))


# What the engine must answer --------------------------------------------------------


@functools.lru_cache(maxsize=4096)
def judged_position(text: str) -> tuple[str, tuple[str, ...]] | None:
    """(SFEN, moves) of a ``position`` line (notation's parser; cshogi judges the moves),
    or None where it is malformed or illegal."""
    try:
        sfen, moves = notation.split_position(text)
        notation.play_line(sfen, moves)
    except ValueError:
        return None
    return sfen, tuple(moves)


def board_of(position: tuple[str, list[str]]) -> cshogi.Board:
    """The board after a valid position (not to be changed: boards are shared)."""
    return _board(position[0], tuple(position[1]))


@functools.lru_cache(maxsize=4096)
def _board(sfen: str, moves: tuple[str, ...]) -> cshogi.Board:
    return notation.play_line(sfen, moves)[0]


def check_reply(command: Command, reply: list[str]):
    """The engine's own lines in answer to one command (bestmove groups taken out)."""
    words = command.text.split()
    where = f"{command.text[:120]!r} -> {[line[:160] for line in reply]}"
    errors = [line for line in reply if line.startswith("info string error")]
    if not words:
        assert reply == [], where
    elif command.expect == "none":
        assert reply == [], where
    elif command.expect == "error":
        assert len(reply) == 1 and reply[0].startswith("info string "), where
    elif words[0] == "usi":
        assert reply[-1] == "usiok" and all(line.startswith(("id ", "option ")) for line in reply[:-1]), where
    elif words[0] == "isready":
        assert reply[-1] == "readyok" and len(errors) <= 1, where
        assert all(line.startswith("info string ") for line in reply[:-1]), where
    elif words[0] == "position":
        valid = judged_position(command.text) is not None
        assert (reply == []) if valid else (len(reply) == 1 and reply[0].startswith("info string error: ")), where
    elif words[0] == "go":
        try:
            go = protocol.parse_go(words[1:])
            expected = ["checkmate notimplemented"] if go.mate else []
            assert reply == expected, where
        except ValueError:
            assert len(reply) == 1 and reply[0].startswith("info string error: ") and reply[0].endswith(
                "searching with the defaults"), where
    elif hasattr(engine_lib.Engine, f"cmd_{words[0]}"):
        assert len(reply) <= 1 and all(line.startswith("info string ") for line in reply), where
    else:
        assert len(reply) == 1 and reply[0].startswith("info string unknown command: "), where


@dataclasses.dataclass
class Go:
    position: tuple[str, list[str]] | None  # as the engine holds it at the go
    may_go_unanswered: bool = False  # a gameover (or the end of input) followed it


def gos_of(commands: list[Command]) -> list[Go]:
    """The searches a sequence starts, with the position each one searches."""
    gos, position = [], None
    for command in commands:
        words = command.text.split()
        if words[:1] == ["position"]:
            position = judged_position(command.text)
        elif words[:1] == ["go"] and not _is_mate(words):
            gos.append(Go(position))
        elif words[:1] == ["gameover"] and gos:
            gos[-1].may_go_unanswered = True
        elif words[:1] == ["quit"]:
            break
    return gos


def _is_mate(words: list[str]) -> bool:
    try:
        return protocol.parse_go(words[1:]).mate
    except ValueError:
        return False


def check_answers(gos: list[Go], answers: list[list[str]]):
    """Each bestmove answers one go (``resign``, ``win`` or a legal move in that go's
    position), and each go is answered unless a gameover or the end of input dropped it;
    before a bestmove only ``info`` lines, at most one of them an error.

    Matched here without order; the order itself is tested apart
    (``test_usi_fuzz__answers_come_in_the_order_of_the_gos``)."""
    for answer in answers:
        assert answer[-1].startswith("bestmove ") and len(answer[-1].split()) == 2, answer
        assert all(line.startswith("info ") for line in answer[:-1]), answer
        assert sum(line.startswith("info string error") for line in answer) <= 1, answer
    moves = [answer[-1].split()[1] for answer in answers]
    fits = [[_answers(go, move) for go in gos] for move in moves]  # [answer][go]
    owed = [j for j, go in enumerate(gos) if not go.may_go_unanswered]
    # A matching that covers every answer and one that covers every owed go: then one covers
    # both (Mendelsohn-Dulmage).
    assert _matched(range(len(moves)), lambda i: [j for j in range(len(gos)) if fits[i][j]]) == len(moves), (
        f"bestmoves {moves} do not answer the searches {gos} one each")
    assert _matched(owed, lambda j: [i for i in range(len(moves)) if fits[i][j]]) == len(owed), (
        f"searches {gos} left unanswered by {moves}")


def _matched(left, edges) -> int:
    """The size of a largest bipartite matching of ``left`` (``edges(x)``: its neighbours),
    by augmenting paths."""
    partner = {}

    def augment(x, seen) -> bool:
        for y in edges(x):
            if y not in seen:
                seen.add(y)
                if y not in partner or augment(partner[y], seen):
                    partner[y] = x
                    return True
        return False

    return sum(augment(x, set()) for x in left)


def _answers(go: Go, move: str) -> bool:
    if move == "resign":
        return True
    if go.position is None:
        return False
    board = board_of(go.position)
    if move == "win":
        return board.is_nyugyoku()
    parsed = board.move_from_usi(move) if notation.is_usi_move(move) else 0
    return bool(parsed) and board.is_legal(parsed)


# The stub model (fast) --------------------------------------------------------------


@dataclasses.dataclass(eq=False)
class StubState:
    """What the stub's ``parse_position`` makes: a cshogi board, as ``UsiPosition.state``."""

    board: cshogi.Board
    ply: int
    current_player: int


@dataclasses.dataclass
class StubPosition:
    sfen: str
    moves: list
    state: StubState


class StubModel:
    """Stands for ``az.play.engine.model`` (the module and its ``Model``): positions
    through notation's validation and cshogi, instant searches that pick a legal move,
    and a record of what the command loop asked that it should not have."""

    fixed_size = False

    def __init__(self):
        self.violations: list[str] = []
        self.states: set[int] = set()  # ids of the states parse_position made
        self.prepared_sizes: set[int] = set()
        self.spec, self.max_plies, self.speed = None, 0, None

    # The module's functions.
    def parse_position(self, args, previous, parser=None):
        sfen, moves = notation.split_position(" ".join(["position", *args]))
        board, _ = notation.play_line(sfen, moves)
        state = StubState(board, board.move_number - 1, board.turn)
        self.states.add(id(state))
        return StubPosition(sfen, moves, state)

    def has_legal_move(self, state) -> bool:
        self._check_state(state)
        return any(True for _ in state.board.legal_moves)

    def can_declare(self, state) -> bool:
        return state.board.is_nyugyoku()

    def first_legal_answer(self, state):
        self._check_state(state)
        legal = [cshogi.move_to_usi(m) for m in state.board.legal_moves]
        return protocol.Answer(legal[0], [f"info depth 1 nodes 1 score cp 0 pv {legal[0]}"]) if legal else None

    def Model(self, spec, max_plies=0, workbench=None):  # noqa: N802: the module's class, as the engine calls it
        self.spec, self.max_plies, self.workbench = spec, max_plies, workbench
        self.prepared_sizes = set()
        return self

    def Workbench(self):  # noqa: N802
        return self

    # The workbench's and the model's methods.
    def install_parser(self):
        pass

    def parser(self):
        return None  # the stub's parse_position reads positions with cshogi

    def loads_quickly(self, simulations):
        return False

    def prepared(self, simulations):
        return simulations in self.prepared_sizes

    def prepare(self, simulations, progress):
        progress(f"compiling the stub's search ({simulations} simulations)")
        self.prepared_sizes |= {0, simulations}
        self.speed = clock.Speed(policy_s=1e-4, simulation_s=1e-6, compile_s=0.0, host_s=1e-4)
        return 1e-3

    def summary(self, simulations, search_s):
        return f"stub, {simulations} simulations"

    def compiled_sizes(self):
        return self.prepared_sizes - {0}

    def compile_in_background(self, n):
        self._check_size(n)
        self.prepared_sizes.add(n)

    delay_s = 0.0  # the next search's time

    def analyse(self, n, state):
        delay, self.delay_s = self.delay_s, 0.0
        time.sleep(delay)
        if not self.prepared_sizes:
            self.violations.append(f"a search of {n} simulations before isready prepared one")
        self._check_size(n)
        self._check_state(state)
        return {"n": n}

    def answer(self, out, state, seconds):
        legal = sorted(cshogi.move_to_usi(m) for m in state.board.legal_moves)
        if not legal:
            self.violations.append(f"asked to answer in a position without a legal move: {state.board.sfen()}")
            return protocol.Answer("resign", [])
        move = legal[out["n"] % len(legal)]
        return protocol.Answer(move, [f"info depth 1 nodes {max(out['n'], 1)} score cp 0 pv {move}"])

    def _check_size(self, n):
        if not 0 <= n <= protocol.MAX_SIMULATIONS:
            self.violations.append(f"asked for {n} simulations")

    def _check_state(self, state):
        if id(state) not in self.states:
            self.violations.append(f"asked about a position no position command set: {state!r}")


class RecordingStream:
    """The engine's stdout: each flush (one ``Output`` call, under its lock) is one group,
    with the thread that wrote it and the command being handled."""

    def __init__(self):
        self.pending: list[str] = []
        self.groups: list[tuple[int, int, str]] = []  # (command index, thread id, text)
        self.command = -1

    def write(self, text: str):
        self.pending.append(text)

    def flush(self):
        self.groups.append((self.command, threading.get_ident(), "".join(self.pending)))
        self.pending = []


def group_lines(text: str) -> list[str]:
    lines = text.split("\n")
    assert lines[-1] == "" and lines[:-1] == text.splitlines(), f"not whole lines: {text[:300]!r}"
    return lines[:-1]


@pytest.fixture
def stub_checkpoint(tmp_path_factory):
    """A workdir that ``snapshot_problem`` accepts (the stub loads nothing from it)."""
    path = tmp_path_factory.mktemp("stub_run")
    (path / "snapshots" / "0").mkdir(parents=True)
    return str(path)


@pytest.fixture
def thread_errors():
    """Exceptions raised in any thread (a watchdog timer, a job) fail the test."""
    errors, previous = [], threading.excepthook
    threading.excepthook = lambda args: errors.append(f"{args.thread.name}: {args.exc_type.__name__}: {args.exc_value}")
    yield errors
    threading.excepthook = previous


def run_with_stub(commands: list[Command], checkpoint: str, probe: tuple[str, list[str]] | None, monkeypatch):
    """Sends ``commands`` through a fresh engine's command loop (as its stdin decodes them),
    then, unless the input ended (``probe`` None), the probe; checks every reply."""
    stub, stream = StubModel(), RecordingStream()
    monkeypatch.setattr(engine_lib, "_model", lambda: stub)
    engine = engine_lib.Engine(checkpoint, 4, 0, protocol.Output(stream), "")
    sent = []
    for command in commands:
        stream.command = len(sent)
        sent.append(command)
        if not engine.handle(command.text):
            probe = None  # quit
            break
    if probe is not None:
        for text in ("stop", f"setoption name Checkpoint value {checkpoint}", "setoption name CheckpointStep value latest",
                     "isready", position_text(*probe), "go nodes 3"):
            stream.command = len(sent)
            sent.append(_sent(text, "judge"))
            engine.handle(text)
            if text == "isready":
                ready = [line for c, _, t in stream.groups if c == len(sent) - 1 and "bestmove" not in t
                         for line in group_lines(t)]
                assert not any(line.startswith("info string error") for line in ready), ready
        deadline = time.monotonic() + 10
        while not any(t.endswith("\n") and group_lines(t)[-1].startswith("bestmove") and c == len(sent) - 1
                      for c, _, t in stream.groups):
            assert time.monotonic() < deadline, "no bestmove to the probe's go in 10 s"
            time.sleep(0.001)
    engine.close()  # what main does at the end of input: drops the last go's answer
    if engine.job is not None and engine.job.thread is not None:  # it joins the earlier ones' threads
        engine.job.thread.join(10)
        assert not engine.job.thread.is_alive(), "a search still runs 10 s after the input ended"
    return sent, stream.groups, stub, probe is not None


def split_groups(sent: list[Command], groups, main_thread: int) -> tuple[list[list[str]], list[list[str]]]:
    """(each command's own reply lines, the bestmove answers in order)."""
    replies, answers = [[] for _ in sent], []
    for command, thread, text in groups:
        lines = group_lines(text)
        if lines and lines[-1].startswith("bestmove"):
            answers.append(lines)
        else:
            assert thread == main_thread, f"a reply from another thread: {lines}"
            replies[command] += lines
    return replies, answers


FAST = settings(max_examples=500, deadline=None, derandomize=True, database=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.function_scoped_fixture])


@FAST
@given(data=st.data())
def test_usi_fuzz__the_command_loop_survives_any_sequence(data, stub_checkpoint, thread_errors, monkeypatch):
    thread_errors.clear()
    commands = data.draw(sequences(real=False, checkpoint=stub_checkpoint), label="commands")
    ends = data.draw(st.sampled_from(["probe", "probe", "probe", "eof"]), label="end")
    if ends == "eof":  # the input ends in the middle of a line: what came of it is handled, then EOF
        cut = data.draw(st.integers(0, max(len(commands[-1].raw) - 1, 0)))
        commands[-1] = Command(commands[-1].raw[:cut], "judge")
    probe = data.draw(legal_lines(max_moves=8), label="probe") if ends == "probe" else None
    if probe is not None and not any(True for _ in board_of(probe).legal_moves):
        probe = (notation.STARTPOS_SFEN, [])
    sent, groups, stub, probed = run_with_stub(commands, stub_checkpoint, probe, monkeypatch)
    replies, answers = split_groups(sent, groups, threading.get_ident())
    for command, reply in zip(sent, replies):
        check_reply(command, reply)
    gos = gos_of(sent)
    if gos and not probed:  # the end of input (or quit) drops a pending answer
        gos[-1].may_go_unanswered = True
    check_answers(gos, answers)
    assert stub.violations == []
    assert thread_errors == []
    if probed:
        assert answers and answers[-1][-1] != "bestmove resign", answers[-1:]
        assert _answers(Go(probe), answers[-1][-1].split()[1]), (probe, answers[-1])


def test_usi_fuzz__answers_come_in_the_order_of_the_gos(stub_checkpoint, monkeypatch):
    """Three gos sent at once (a client that does not wait for bestmove): the first still
    searches when the third arrives; the bestmoves must still come first, second, third."""
    stub, stream = StubModel(), RecordingStream()
    monkeypatch.setattr(engine_lib, "_model", lambda: stub)
    engine = engine_lib.Engine(stub_checkpoint, 4, 0, protocol.Output(stream), "")
    for text in ("isready", "position startpos"):
        engine.handle(text)
    stub.delay_s = 0.5
    for text in ("go nodes 3", "position startpos moves 7g7f", "go byoyomi 5000", "go nodes 3"):
        engine.handle(text)
    deadline = time.monotonic() + 10
    while len(answers := [group_lines(t) for _, _, t in list(stream.groups) if "bestmove" in t]) < 3:
        assert time.monotonic() < deadline, answers
        time.sleep(0.01)
    engine.close()
    first = answers[0][-1].split()[1]
    assert _answers(Go((notation.STARTPOS_SFEN, [])), first), f"the second go answered first: {answers}"


def test_usi_fuzz__an_answer_is_out_before_the_next_command_counts_it_answered(stub_checkpoint, monkeypatch):
    """A go's thread that is slow to write its bestmove (here held until readyok, 0.5 s at
    most): the next go must still wait for it, and isready's readyok must come after both
    answers. Were an answer counted as given before its line is out, the next go would
    not wait for it, and the old bestmove would follow readyok."""
    stub, stream = StubModel(), RecordingStream()
    monkeypatch.setattr(engine_lib, "_model", lambda: stub)
    engine = engine_lib.Engine(stub_checkpoint, 4, 0, protocol.Output(stream), "")
    write, main_thread = engine.out, threading.get_ident()
    writing_first, readyok = threading.Event(), threading.Event()

    def held_out(*lines):
        if threading.get_ident() != main_thread and not writing_first.is_set():
            writing_first.set()
            readyok.wait(0.5)
        write(*lines)
        if "readyok" in lines:
            readyok.set()

    engine.out = held_out
    engine.handle("go nodes 3")  # no model loaded yet: answers resign at once, from its thread
    assert writing_first.wait(10), "the first go never answered"
    for text in ("go nodes 3", "stop", "isready"):
        engine.handle(text)
    engine.close()
    lines = [line for _, _, text in stream.groups for line in group_lines(text)]
    assert [line for line in lines if line.startswith(("bestmove", "readyok"))] == \
        ["bestmove resign", "bestmove resign", "readyok"], lines


# The command loop's own input and output (``engine.main``: bytes, line ends, EOF) --------


class _Fd:
    """Stands for ``sys.stdin``/``sys.stdout``: ``main`` opens their file descriptors itself."""

    def __init__(self, fd: int):
        self.fd = fd

    def fileno(self) -> int:
        return self.fd

    def flush(self):
        pass


def _commands_as_bytes():
    """Command lines as a client's bytes: any line end (``\\n``, ``\\r\\n``, ``\\r``), any bytes."""
    line = st.one_of(other_commands(False).map(lambda c: c.raw), go_commands(False).map(lambda c: c.raw),
                     positions(False).map(lambda c: c.raw), st.binary(max_size=40))
    ending = st.sampled_from([b"\n", b"\r\n", b"\r"])
    return st.lists(st.tuples(line, ending).map(lambda pair: pair[0].replace(b"quit", b"quiz") + pair[1]),
                    max_size=10).map(b"".join)


@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture])
@given(sent=_commands_as_bytes(), tail=st.sampled_from([b"isready", b"usi", b"position startpos moves 7g7f", b""]),
       cut=st.integers(0, 30))
def test_usi_fuzz__main_reads_any_bytes_and_exits_at_the_end_of_input(sent, tail, cut, stub_checkpoint, thread_errors,
                                                                       monkeypatch):
    """Through ``main``'s own stdin and stdout: whatever bytes came, the probe is answered
    with a legal move, every output line is UTF-8, and input that ends in the middle of a
    line ends the loop with status 0."""
    thread_errors.clear()
    monkeypatch.setattr(engine_lib, "_model", lambda: StubModel())
    stdin_read, stdin_write = os.pipe()
    stdout_read, stdout_write = os.pipe()
    monkeypatch.setattr("sys.stdin", _Fd(stdin_read))
    monkeypatch.setattr("sys.stdout", _Fd(stdout_write))
    output, status = [], []
    reader = threading.Thread(target=lambda: output.extend(iter(lambda: os.read(stdout_read, 65536), b"")))
    loop = threading.Thread(target=lambda: status.append(
        engine_lib.main(["--checkpoint", stub_checkpoint, "--compilation_cache", ""])))
    reader.start()
    loop.start()
    try:
        os.write(stdin_write, sent + b"\nstop\nisready\nprobe-marker\nposition startpos moves 2g2f\ngo nodes 2\n")
        deadline = time.monotonic() + 10
        marker = b"info string unknown command: probe-marker\n"
        while marker not in (answered := b"".join(output)) or b"bestmove" not in answered.split(marker)[-1]:
            assert time.monotonic() < deadline, f"no bestmove to the probe: {answered[-500:]!r}"
            time.sleep(0.002)
        os.write(stdin_write, tail[:cut])  # the end of input in the middle of a line
    finally:
        os.close(stdin_write)
        loop.join(10)
        os.close(stdout_write)
        reader.join(10)
        os.close(stdin_read)
        os.close(stdout_read)
    assert status == [0]
    lines = b"".join(output).decode("utf-8").split("\n")  # strict: the engine writes UTF-8 only
    assert lines[-1] == "" and all(line.startswith(("info ", "bestmove ", "readyok", "id ", "option ", "usiok",
                                                    "checkmate ")) for line in lines[:-1]), lines
    probe = answered.split(marker)[-1].decode("utf-8").splitlines()
    bestmoves = [line.split()[1] for line in probe if line.startswith("bestmove ")]
    assert len(bestmoves) == 1 and _answers(Go((notation.STARTPOS_SFEN, ["2g2f"])), bestmoves[0]), probe
    assert thread_errors == []


# The real engine process (slow) ------------------------------------------------------

from test_usi import LOAD_TIMEOUT, UsiProcess, workdir  # noqa: E402,F401: the smoke run's fixture


@pytest.fixture(scope="module")
def real_engine(workdir, tmp_path_factory):  # noqa: F811
    """One engine process on the smoke snapshot, Simulations 2, ready; every sequence goes to it."""
    process = UsiProcess(str(workdir), cwd=tmp_path_factory.mktemp("fuzz_gui_cwd"))
    try:
        process.send("usi")
        process.until(lambda line: line == "usiok", 30)
        process.send("setoption name Simulations value 2")
        process.isready()
        process.barriers = 0
        yield process
    finally:
        status = process.close()
    assert status == 0, f"quit: exit status {status}\n{process.tail()}"


def send_and_read(process, command: Command) -> tuple[list[str], list[list[str]]]:
    """Sends one line, then an unknown command as a barrier: (the engine's reply to the
    line, the bestmove answers that came meanwhile). An answer is written in one piece
    (``Output``'s lock): its ``bestmove`` and the answer lines just before it."""
    process.barriers += 1
    barrier = f"fuzz-barrier-{process.barriers}"
    process.transcript.append(f"> {command.raw[:200]!r}")
    process.proc.stdin.write(command.raw + b"\n" + barrier.encode() + b"\n")
    process.proc.stdin.flush()
    lines = process.until(lambda line: line == f"info string unknown command: {barrier}", LOAD_TIMEOUT)[:-1]
    reply, answers, pending = [], [], []
    for line in lines:
        if line.startswith("bestmove"):
            answers.append(pending + [line])
            pending = []
        elif line.startswith(ANSWER_INFO):
            pending.append(line)
        else:
            reply += pending + [line]
            pending = []
    return reply + pending, answers


@pytest.mark.slow
@settings(max_examples=50, deadline=None, derandomize=True, database=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(data=st.data())
def test_usi_fuzz__the_engine_process_survives_any_sequence(data, real_engine, workdir):  # noqa: F811
    """The real engine (``scripts/azshogi-usi`` on a smoke snapshot), one process for
    every sequence: the same checks as the stub's, cshogi judging every bestmove."""
    commands = data.draw(sequences(real=True, checkpoint=str(workdir)), label="commands")
    probe = data.draw(legal_lines(max_moves=8), label="probe")
    if not any(True for _ in board_of(probe).legal_moves) or board_of(probe).is_nyugyoku():
        probe = (notation.STARTPOS_SFEN, [])
    real_engine.drain()
    # The process goes on from the previous sequence: its searches end and its position is
    # set before this one starts.
    for text in ("stop", "isready", "position startpos"):
        check_reply(_sent(text), send_and_read(real_engine, _sent(text))[0])
    commands = [_sent("position startpos")] + commands  # already sent: what the gos start from
    tail = ["stop", f"setoption name Checkpoint value {workdir}", "setoption name CheckpointStep value latest",
            "isready", position_text(*probe), "go nodes 2"]
    sent = commands + [_sent(text) for text in tail]
    answers = []
    for command in sent[1:-1]:
        reply, answered = send_and_read(real_engine, command)
        check_reply(command, reply)
        answers += answered
        if command is sent[-3]:  # the probe's isready: everything earlier is answered, the snapshot loads
            assert not any(line.startswith("info string error") for line in reply), reply
    real_engine.send(sent[-1].text)
    answers.append(real_engine.until("bestmove", LOAD_TIMEOUT))
    check_answers(gos_of(sent), answers)
    assert answers[-1][-1] != "bestmove resign" and _answers(Go(probe), answers[-1][-1].split()[1]), answers[-1]
