"""Players for matches: our agent, any USI engine, and the random and greedy floors.

``parse_player(spec)`` turns a command-line spec into a ``Player``:

    checkpoint:WORKDIR[@STEP]          our agent (greedy Gumbel search, --simulations n)
    usi:PATH?option=value&nodes=N      a USI engine; limits: nodes, depth, byoyomi (ms), movetime (ms);
                                       timeout (s) per move before it loses (default 120 or limit + 30)
    fairy-stockfish?nodes=N            /usr/games/fairy-stockfish at N nodes a move (the reference ladder's rungs)
    gpsusi?depth=D                     /usr/games/gpsusi at LimitDepth D (4-10), one minute's byoyomi
    random | greedy                    uniform random legal moves | one-ply material
    heuristic[:WEIGHTS][?depth=D]      the GA-evolved classical evaluation (az.classical), full-width
                                       search to depth D (1 or 2, default 1); WEIGHTS a weights file
                                       or a GA workdir (default: the shipped data/heuristic_weights.json)

A player hands out ``Session``s, one per concurrently played game slot; a session's
``move(position)`` (a ``MatchPosition``) returns a ``Move``: an action of the position's
state (our agent, which never leaves the action encoding), or USI text: a move,
``resign`` or ``win`` (a declaration).
"""

import abc
import os
import queue
import random
import shutil
import threading
import time
import urllib.parse
from typing import NamedTuple

import cshogi
import jax
import numpy as np

from az.play.usi_client import EngineFailure, EngineOptionError, UsiClient
from envs import endings, env, notation, records

Move = int | str  # an action of the position's state, or USI text


class PlayerError(ValueError):
    """A player spec that cannot be used (unknown kind, missing binary, bad option)."""


class MatchPosition(NamedTuple):
    """A match game's position, as a player is asked to move in it."""

    start_sfen: str
    moves: tuple  # USI moves played from start_sfen
    state: env.State  # after the moves


class Session(abc.ABC):
    """One game slot of a player: asked for a move at each of its turns."""

    def new_game(self) -> None:
        pass

    @abc.abstractmethod
    def move(self, position: MatchPosition) -> Move:
        """An action, or a USI move, ``resign`` or ``win``."""

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

    def move(self, position: MatchPosition) -> str:
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


def greedy_move(board: cshogi.Board, rng: random.Random) -> int:
    """The greedy player's move (a cshogi move): the best material after one ply, a mating
    move first, ties broken by ``rng``. ``board`` is left as it was."""
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
    return rng.choice(best_moves)


class _GreedySession(Session):
    def __init__(self, seed: int):
        self.rng = random.Random(seed)

    def move(self, position: MatchPosition) -> str:
        return cshogi.move_to_usi(greedy_move(cshogi.Board(notation.to_sfen(position.state)), self.rng))


class FloorPlayer(Player):
    """``random`` or ``greedy``; each session gets its own seeded generator."""

    _SESSIONS = {"random": _RandomSession, "greedy": _GreedySession}

    def __init__(self, kind: str, seed: int = 0):
        self.name, self.seed, self.count = kind, seed, 0

    def session(self) -> Session:
        self.count += 1
        return self._SESSIONS[self.name](self.seed * 1000 + self.count)


class _HeuristicSession(Session):
    def __init__(self, player: "HeuristicPlayer", seed: int):
        self.player = player
        self.rng = np.random.default_rng(seed)

    def move(self, position: MatchPosition) -> Move:
        from az.classical import heuristic

        state = position.state
        if bool(endings.can_declare(state.x, state.checked)):
            return "win"
        x = state.x
        return heuristic.choose(x.board, x.hand, x.legal_action_mask, self.player.weights, self.player.depth, self.rng)


class HeuristicPlayer(Player):
    """``heuristic[:WEIGHTS][?depth=D]``: the classical evaluation's full-width search."""

    def __init__(self, spec: str, seed: int = 0):
        from az.classical import heuristic

        head, _, query = spec.partition("?")
        path = head[len("heuristic:"):] if head.startswith("heuristic:") else None
        if head not in ("heuristic",) and path is None:
            raise PlayerError(f"player {spec!r}: expected heuristic[:WEIGHTS][?depth=D]")
        options = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
        unknown = sorted(set(options) - {"depth"})
        if unknown:
            raise PlayerError(f"player {spec!r}: unknown option {unknown[0]!r} (heuristic takes depth)")
        depth = options.get("depth", "1")
        if depth not in ("1", "2"):
            raise PlayerError(f"player {spec!r}: depth must be 1 or 2, got {depth!r}")
        self.depth = int(depth)
        try:
            self.weights = heuristic.load_weights(path or None)
        except ValueError as e:
            raise PlayerError(str(e)) from None
        self.name = f"heuristic d{self.depth}" + (f" ({path})" if path else "")
        self.seed, self.count = seed, 0

    def session(self) -> Session:
        self.count += 1
        return _HeuristicSession(self, self.seed * 1000 + self.count)


# USI engines ----------------------------------------------------------------------------

LIMIT_KEYS = ("nodes", "depth", "byoyomi", "movetime")


class _UsiSession(Session):
    def __init__(self, player: "UsiPlayer"):
        self.player = player
        self.engine: UsiClient | None = None

    def new_game(self):
        if self.engine is None or self.engine.proc.poll() is not None:
            self.engine = UsiClient(self.player.path, self.player.options)
        self.engine.send("usinewgame")

    def move(self, position: MatchPosition) -> Move:
        head = records.to_usi_position(position.start_sfen, list(position.moves))
        last = self.engine.think(head, self.player.go_command, self.player.move_timeout)[-1]
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
        try:
            UsiClient(self.path, self.options).close()  # fail fast on a bad option or a broken binary
        except EngineOptionError as e:
            raise PlayerError(str(e)) from None

    def session(self) -> Session:
        return _UsiSession(self)


# The reference engines by short name (docs/reference_engines.md): the one option each
# takes, and how it becomes a ``usi:`` spec.
REFERENCE_ENGINES = {
    "fairy-stockfish": ("/usr/games/fairy-stockfish", "nodes", range(1, 10**9), "nodes={}"),
    # gpsusi knows no `go depth`: a depth limit with a byoyomi long enough to reach it.
    "gpsusi": ("/usr/games/gpsusi", "depth", range(4, 11), "LimitDepth={}&byoyomi=60000"),
}


def reference_engine(spec: str) -> UsiPlayer:
    """``fairy-stockfish?nodes=N`` or ``gpsusi?depth=D``, named by that spelling."""
    name, _, query = spec.partition("?")
    path, key, allowed, usi_query = REFERENCE_ENGINES[name]
    options = dict(urllib.parse.parse_qsl(query, keep_blank_values=True))
    value = options.pop(key, "")
    if options or not value.isdigit() or int(value) not in allowed:
        letter = key[0].upper()
        bounds = f"from {allowed.start} to {allowed.stop - 1}" if len(allowed) < 100 else f">= {allowed.start}"
        raise PlayerError(f"player {spec!r}: expected {name}?{key}={letter}, {letter} an integer {bounds}, "
                          "and no other option")
    player = UsiPlayer(f"{path}?{usi_query.format(int(value))}")
    player.name = f"{name}?{key}={int(value)}"
    return player


# Our agent --------------------------------------------------------------------------------


class _AgentServer:
    """Batches the searches of concurrent games into one device call (padded to ``slots``)."""

    def __init__(self, agent, num_simulations: int, slots: int, seed: int):
        self.agent, self.slots, self.n = agent, slots, num_simulations
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
                actions = self.agent.choose_actions([s for s, _ in batch], num_simulations=self.n, rng_key=sub,
                                                    pad_to=self.slots)
                for (_, reply), action in zip(batch, actions):
                    reply.put(action)
            except Exception as e:  # reported to each waiting game
                for _, reply in batch:
                    reply.put(e)

    def action(self, state: env.State) -> int:
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

    def move(self, position: MatchPosition) -> Move:
        state = position.state
        if bool(endings.can_declare(state.x, state.checked)):
            return "win"
        return self.player.server().action(state)


class AgentPlayer(Player):
    """``checkpoint:WORKDIR[@STEP]``; its searches compile into ``programs`` (default: its own)."""

    def __init__(self, spec: str, *, num_simulations: int, slots: int, seed: int = 0, programs=None, search=None):
        from az.play import agent as agent_lib

        try:
            self.agent = agent_lib.load_agent(spec, programs, search)
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


def parse_player(spec: str, *, num_simulations: int = 800, slots: int = 1, seed: int = 0, programs=None,
                 search: dict[str, str] | None = None) -> Player:
    """A player from its spec (see the module docstring); PlayerError names what is wrong.
    ``programs``: the ``az.play.programs.Programs`` an agent's searches compile into
    (agents given the same one share them; default: programs of its own). ``search``:
    playing-search settings for a checkpoint's agent ({field: text}, ``agent.load_agent``)."""
    if spec in FloorPlayer._SESSIONS:
        return FloorPlayer(spec, seed)
    if spec.startswith("usi:"):
        return UsiPlayer(spec[4:])
    if spec.partition("?")[0] in REFERENCE_ENGINES:
        return reference_engine(spec)
    if spec == "heuristic" or spec.startswith(("heuristic:", "heuristic?")):
        return HeuristicPlayer(spec, seed)
    if spec.startswith("checkpoint:"):
        return AgentPlayer(spec[len("checkpoint:"):], num_simulations=num_simulations, slots=slots, seed=seed,
                           programs=programs, search=search)
    raise PlayerError(f"player {spec!r}: expected checkpoint:WORKDIR[@STEP], usi:PATH[?...], fairy-stockfish?nodes=N, "
                      "gpsusi?depth=D, heuristic[:WEIGHTS][?depth=D], random or greedy")
