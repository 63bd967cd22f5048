"""Players for matches: our agent, any USI engine, and the random and greedy floors.

``parse_player(spec)`` turns a command-line spec into a ``Player``:

    checkpoint:WORKDIR[@STEP]          our agent (greedy Gumbel search, --simulations n)
    usi:PATH?option=value&nodes=N      a USI engine; limits: nodes, depth, byoyomi (ms), movetime (ms);
                                       timeout (s) per move before it loses (default 120 or limit + 30)
    random | greedy                    uniform random legal moves | one-ply material

A player hands out ``Session``s, one per concurrently played game slot; a session's
``move(position)`` returns a USI move, ``resign`` or ``win`` (a declaration).
"""

import abc
import os
import queue
import random
import shutil
import subprocess
import threading
import time
import urllib.parse
from typing import NamedTuple

import cshogi
import jax

from envs import env, notation


class PlayerError(ValueError):
    """A player spec that cannot be used (unknown kind, missing binary, bad option)."""


class EngineFailure(RuntimeError):
    """An engine crashed, hung or broke the protocol during a game; it loses that game."""


class Position(NamedTuple):
    start_sfen: str
    moves: tuple  # USI moves played from start_sfen
    state: env.State  # after the moves


class Session(abc.ABC):
    """One game slot of a player: asked for a move at each of its turns."""

    def new_game(self) -> None:
        pass

    @abc.abstractmethod
    def move(self, position: Position) -> str:
        """A USI move, ``resign`` or ``win``."""

    def game_over(self, result: str) -> None:  # "win" | "lose" | "draw", from this player's view
        pass

    def close(self) -> None:
        pass


class Player(abc.ABC):
    name: str

    @abc.abstractmethod
    def session(self) -> Session:
        """A new game slot (an engine process, a client of the agent's search server)."""

    def close(self) -> None:
        pass


# Floors -------------------------------------------------------------------------------


class _RandomSession(Session):
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def move(self, position: Position) -> str:
        return self.rng.choice(notation.legal_moves(position.state))


_MATERIAL = {
    cshogi.PAWN: 1, cshogi.LANCE: 3, cshogi.KNIGHT: 4, cshogi.SILVER: 5, cshogi.GOLD: 6, cshogi.BISHOP: 8,
    cshogi.ROOK: 10, cshogi.KING: 0, cshogi.PROM_PAWN: 6, cshogi.PROM_LANCE: 6, cshogi.PROM_KNIGHT: 6,
    cshogi.PROM_SILVER: 6, cshogi.PROM_BISHOP: 10, cshogi.PROM_ROOK: 12,
}
_HAND_MATERIAL = [1, 3, 4, 5, 6, 8, 10]  # cshogi hand order: P L N S G B R


def material(board: cshogi.Board, color: int) -> int:
    """Material of ``color`` minus the opponent's (board and hands)."""
    total = 0
    for piece in board.pieces:
        if piece:
            value = _MATERIAL[cshogi.piece_to_piece_type(piece)]
            total += value if (piece < 16) == (color == cshogi.BLACK) else -value
    for side, hand in enumerate(board.pieces_in_hand):
        value = sum(n * v for n, v in zip(hand, _HAND_MATERIAL))
        total += value if side == color else -value
    return total


class _GreedySession(Session):
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def move(self, position: Position) -> str:
        board = cshogi.Board(notation.to_sfen(position.state))
        me = board.turn
        best, best_moves = None, []
        for move in board.legal_moves:
            board.push(move)
            score = 10_000 if board.is_game_over() else material(board, me)
            board.pop()
            if best is None or score > best:
                best, best_moves = score, [move]
            elif score == best:
                best_moves.append(move)
        return cshogi.move_to_usi(self.rng.choice(best_moves))


class FloorPlayer(Player):
    """``random`` or ``greedy``; each session gets its own seeded generator."""

    _SESSIONS = {"random": _RandomSession, "greedy": _GreedySession}

    def __init__(self, kind: str, seed: int = 0):
        self.name, self.seed, self.count = kind, seed, 0

    def session(self) -> Session:
        self.count += 1
        return self._SESSIONS[self.name](self.seed * 1000 + self.count)


# USI engines ----------------------------------------------------------------------------

LIMIT_KEYS = ("nodes", "depth", "byoyomi", "movetime")
# Set unless the spec says otherwise, when the engine has the option: one thread, a small
# hash, no contempt (fairy-stockfish skews scores by 24 cp), no opening book (gpsshogi).
_ENGINE_DEFAULTS = {"Threads": "1", "Thread": "1", "Hash": "16", "USI_Hash": "16", "Contempt": "0", "BookDepth": "0"}


class _UsiProcess:
    """A USI engine process with a reader thread, so every wait has a timeout."""

    def __init__(self, path: str, options: dict, *, start_timeout: float = 60.0):
        self.path = path
        try:
            self.proc = subprocess.Popen(
                [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                cwd=os.path.dirname(path) or None, text=True, encoding="utf-8", errors="replace", bufsize=1,
            )
        except OSError as e:
            raise EngineFailure(f"cannot start {path}: {e.strerror}") from None
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.send("usi")
        advertised = {}
        for line in self.until(lambda s: s == "usiok", start_timeout):
            if line.startswith("option name "):
                name = line[len("option name "):].split(" type ")[0]
                default = line.split(" default ", 1)[1].split(" ")[0] if " default " in line else None
                advertised[name] = default
        for name, value in _ENGINE_DEFAULTS.items():
            if name in advertised and name not in options:
                options = {**options, name: value}
        for name, default in advertised.items():  # every option explicitly (gpsshogi remembers them)
            value = options.get(name, default)
            if value is not None and default is not None or name in options:
                self.send(f"setoption name {name} value {value}")
        unknown = [name for name in options if name not in advertised]
        if unknown:
            self.close()
            raise PlayerError(f"engine {path} has no option {unknown[0]!r}")
        self.send("isready")
        list(self.until(lambda s: s == "readyok", start_timeout))

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\r\n"))
        self.lines.put(None)  # EOF

    def send(self, command: str):
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise EngineFailure(f"{self.path} exited (exit code {self.proc.poll()})") from None

    def until(self, done, timeout: float):
        """Lines up to and including the first for which ``done(line)``; EngineFailure on EOF/timeout."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EngineFailure(f"{self.path} did not answer within {timeout:.0f} s")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise EngineFailure(f"{self.path} exited (exit code {self.proc.wait()})")
            yield line
            if done(line):
                return

    def close(self):
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=2)
            except (EngineFailure, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()


class _UsiSession(Session):
    def __init__(self, player: "UsiPlayer"):
        self.player = player
        self.engine: _UsiProcess | None = None

    def new_game(self):
        if self.engine is None or self.engine.proc.poll() is not None:
            self.engine = _UsiProcess(self.player.path, self.player.options)
        self.engine.send("usinewgame")

    def move(self, position: Position) -> str:
        head = notation.to_usi_position(position.start_sfen, list(position.moves))
        self.engine.send(head)
        self.engine.send(self.player.go_command)
        last = ""
        for line in self.engine.until(lambda s: s.startswith("bestmove"), self.player.move_timeout):
            last = line
        parts = last.split()
        if len(parts) < 2:
            raise EngineFailure(f"{self.player.path} sent {last!r}")
        return parts[1]

    def game_over(self, result: str):
        if self.engine is not None and self.engine.proc.poll() is None:
            try:
                self.engine.send(f"gameover {result}")
            except EngineFailure:
                pass

    def close(self):
        if self.engine is not None:
            self.engine.close()
            self.engine = None


class UsiPlayer(Player):
    def __init__(self, spec: str):
        path, _, query = spec.partition("?")
        resolved = path if os.path.sep in path else shutil.which(path)
        if not resolved or not os.path.isfile(resolved) or not os.access(resolved, os.X_OK):
            raise PlayerError(f"engine binary {path!r} not found or not executable")
        self.path = resolved
        params = dict(urllib.parse.parse_qsl(query, keep_blank_values=True, strict_parsing=False)) if query else {}
        limits = {k: params.pop(k) for k in LIMIT_KEYS + ("timeout",) if k in params}
        for key, value in limits.items():
            if not value.isdigit() or int(value) < 1:
                raise PlayerError(f"engine {spec!r}: {key} must be a positive integer, got {value!r}")
        timeout = limits.pop("timeout", None)
        if not limits:
            limits = {"nodes": "10000"}
        self.options = params
        if "byoyomi" in limits:  # gpsshogi accepts only this form
            self.go_command = f"go btime 0 wtime 0 byoyomi {limits['byoyomi']}"
            self.move_timeout = int(limits["byoyomi"]) / 1000 + 30
        elif "movetime" in limits:
            self.go_command = f"go movetime {limits['movetime']}"
            self.move_timeout = int(limits["movetime"]) / 1000 + 30
        else:
            self.go_command = " ".join(["go"] + [f"{k} {v}" for k, v in limits.items()])
            self.move_timeout = 120.0
        if timeout is not None:  # seconds an engine may take for one move before it loses
            self.move_timeout = float(timeout)
        label = "&".join(f"{k}={v}" for k, v in {**params, **limits}.items())
        self.name = f"{os.path.basename(path)}?{label}"
        probe = _UsiProcess(self.path, self.options)  # fail fast on a bad option or a broken binary
        probe.close()

    def session(self) -> Session:
        return _UsiSession(self)


# Our agent --------------------------------------------------------------------------------


class _AgentServer:
    """Batches the searches of concurrent games into one device call (padded to ``slots``)."""

    def __init__(self, agent, num_simulations: int, slots: int, seed: int):
        from az import agent as agent_lib

        self.agent, self.slots, self.n = agent, slots, num_simulations
        self.choose = agent_lib.choose_moves
        self.key = jax.random.PRNGKey(seed)
        self.requests: queue.Queue = queue.Queue()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self):
        while True:
            first = self.requests.get()
            if first is None:
                return
            batch = [first]
            deadline = time.monotonic() + 0.005
            while len(batch) < self.slots:
                try:
                    item = self.requests.get(timeout=max(0.0, deadline - time.monotonic()))
                except queue.Empty:
                    break
                if item is None:
                    self.requests.put(None)
                    break
                batch.append(item)
            self.key, sub = jax.random.split(self.key)
            try:
                results = self.choose(self.agent, [s for s, _ in batch], num_simulations=self.n, rng_key=sub,
                                      pad_to=self.slots)
                for (_, reply), result in zip(batch, results):
                    reply.put(result)
            except Exception as e:  # reported to each waiting game
                for _, reply in batch:
                    reply.put(e)

    def search(self, state: env.State) -> dict:
        reply: queue.Queue = queue.Queue()
        self.requests.put((state, reply))
        result = reply.get()
        if isinstance(result, Exception):
            raise result
        return result

    def close(self):
        self.requests.put(None)


class _AgentSession(Session):
    def __init__(self, player: "AgentPlayer"):
        self.player = player

    def move(self, position: Position) -> str:
        from envs import rules

        state = position.state
        if bool(rules.can_declare(state.x, state.checked)):
            return "win"
        result = self.player.server().search(state)
        return notation.action_to_usi(state, int(result["action"]))


class AgentPlayer(Player):
    def __init__(self, spec: str, *, num_simulations: int, slots: int, seed: int = 0):
        from az import agent as agent_lib

        try:
            self.agent = agent_lib.load_agent(spec)
        except agent_lib.AgentError as e:
            raise PlayerError(str(e)) from None
        self.name = f"{self.agent.name} n={num_simulations}"
        self.num_simulations, self.slots, self.seed = num_simulations, slots, seed
        self._server = None
        self._lock = threading.Lock()

    def server(self) -> _AgentServer:
        with self._lock:
            if self._server is None:
                self._server = _AgentServer(self.agent, self.num_simulations, self.slots, self.seed)
            return self._server

    def session(self) -> Session:
        return _AgentSession(self)

    def close(self):
        if self._server is not None:
            self._server.close()


def parse_player(spec: str, *, num_simulations: int = 800, slots: int = 1, seed: int = 0) -> Player:
    """A player from its spec (see the module docstring); PlayerError names what is wrong."""
    if spec in FloorPlayer._SESSIONS:
        return FloorPlayer(spec, seed)
    if spec.startswith("usi:"):
        return UsiPlayer(spec[4:])
    if spec.startswith("checkpoint:"):
        return AgentPlayer(spec[len("checkpoint:"):], num_simulations=num_simulations, slots=slots, seed=seed)
    raise PlayerError(f"player {spec!r}: expected checkpoint:WORKDIR[@STEP], usi:PATH[?...], random or greedy")
