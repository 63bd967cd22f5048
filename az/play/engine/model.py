"""The engine's heavy half: positions in the environment and the loaded agent's searches
(``Model``) or the classical player's (``HeuristicModel``).

The engine imports this module on the first command that needs it (``position``,
``isready``, ``go``), never to answer ``usi``: JAX, the environment and the network
load here.

Positions are parsed with rules under which only "no legal move" ends a game (the GUI
is the referee), their plies counted from the game's first move (an SFEN's move number
N means N - 1 plies before it). The search tree uses the agent's rules (declaration,
repetition within its ``history_window``) and the GUI's ply limit, ``MaxMovesToDraw``
(a move that reaches it without a mate is a draw in the tree); 0, the default, means no
limit (a GUI's game can be longer than the training's ``max_length``).
"""

import dataclasses
import os
import threading
import time

import jax
import numpy as np

from az.play import agent as agent_lib
from az.play import programs as programs_lib
from az.play.engine.clock import Speed
from az.play.engine.protocol import Answer, value_to_cp
from envs import endings, env, notation

UNLIMITED_PLIES = 2**30
PV_LENGTH = 16  # plies of principal variation read from the tree at most
# Only "no legal move" ends a parsed game: the GUI is the referee.
PARSE_RULES = env.Rules(max_length=UNLIMITED_PLIES, declaration=False, repetitions=2**20, history=256)


# Where XLA_FLAGS compile every program at -O0 already (the test suite's), the -O2 programs
# would be the quick ones again: nothing to compile aside.
ALL_AT_O0 = "xla_backend_optimization_level=0" in os.environ.get("XLA_FLAGS", "")


class Workbench:
    """What the engine keeps across snapshot reloads: the compiled programs (the models of
    one config share their searches; the position parser's programs) and the one compile
    that runs beside the search."""

    def __init__(self):
        self.programs = programs_lib.Programs()
        self.background: threading.Thread | None = None  # the compile beside the search
        self._background_lock = threading.Lock()

    def install_parser(self) -> None:
        """The position set-up and move programs of ``PARSE_RULES``, loaded serialized where
        an earlier start left them (``Programs.position_parser``); once, whichever thread
        asks first."""
        self.programs.position_parser(PARSE_RULES)

    def parser(self) -> notation.Parser:
        """The installed parser of ``PARSE_RULES``; before it is, the one jitted on use."""
        return self.programs.get(("parser", PARSE_RULES)) or notation.parser(PARSE_RULES)

    def in_background(self, work, *args, name: str) -> None:
        """Runs ``work(*args)`` in a thread unless another one's is still running: one
        compile at a time beside the search."""
        with self._background_lock:
            if self.background is not None and self.background.is_alive():
                return
            self.background = threading.Thread(target=work, args=args, daemon=True, name=name)
            self.background.start()


def info_line(depth: int, nodes: int, seconds: float, score: str, pv: list[str]) -> str:
    """A USI ``info`` line; ``score`` as USI writes it (``cp 35``, ``mate 3``)."""
    ms = max(int(seconds * 1000), 1)
    return f"info depth {depth} nodes {nodes} nps {int(nodes * 1000 / ms)} time {ms} score {score} pv {' '.join(pv)}"


def mate_score(state: env.State, move: str, parser: notation.Parser) -> str:
    """The USI score of a move the agent's root mate search found (``SearchResult.mate``):
    ``mate 1`` where it mates at once, else ``mate 3`` (the search finds no longer ones)."""
    after = parser.play_moves(state, [move])
    return "mate 3" if has_legal_move(after) else "mate 1"


@dataclasses.dataclass
class UsiPosition:
    """The position of a USI ``position`` command, played through the environment."""

    sfen: str  # where the moves start
    moves: list  # USI moves played from sfen
    state: env.State  # after the moves (PARSE_RULES)


def parse_position(args: list[str], previous: UsiPosition | None, parser: notation.Parser | None = None) -> UsiPosition:
    """The position of a ``position`` command's arguments; one that extends ``previous``
    plays only the new moves. ``ValueError`` names what is wrong. ``parser``: of
    ``PARSE_RULES`` (default: the one jitted on use)."""
    parser = parser or notation.parser(PARSE_RULES)
    sfen, moves = notation.split_position(" ".join(["position", *args]))
    if previous is not None and previous.sfen == sfen and moves[: len(previous.moves)] == previous.moves:
        state, done = previous.state, len(previous.moves)
    else:
        state, done = counted_from_move_one(parser.from_sfen(sfen)), 0
    state = parser.play_moves(state, moves[done:], first_number=done + 1)
    return UsiPosition(sfen, moves, state)


def counted_from_move_one(state: env.State) -> env.State:
    """A freshly set-up position (ply 0, move number N) with its ply counted from the
    game's first move instead: ply N - 1, move number 1, its hash in that ply's history
    slot (the earlier slots stay empty, as for a game whose moves are unknown)."""
    before = int(state.start_move_number) - 1
    if before <= 0:
        return state
    slots = state.history.shape[0]
    history = np.zeros_like(np.asarray(state.history))
    history[before % slots] = np.asarray(state.history)[0]
    check_history = np.zeros_like(np.asarray(state.check_history))
    check_history[before % slots] = np.asarray(state.check_history)[0]
    return state._replace(x=state.x._replace(step_count=jax.numpy.int32(before)), history=jax.numpy.asarray(history),
                          check_history=jax.numpy.asarray(check_history), start_move_number=jax.numpy.int32(1))


def first_legal_answer(state: env.State) -> Answer | None:
    """The first legal move, found on the host (no program runs): the answer while no
    program's is ready. None without a legal move."""
    legal = np.flatnonzero(np.asarray(state.legal_action_mask))
    if not len(legal):
        return None
    move = notation.action_to_usi(state, int(legal[0]))
    return Answer(move, [info_line(1, 1, 0.001, "cp 0", [move])])


def has_legal_move(state: env.State) -> bool:
    return bool(np.asarray(state.legal_action_mask).any())


_can_declare = jax.jit(endings.can_declare)


def can_declare(state: env.State) -> bool:
    """The entering-king declaration (CSA 27-point rule) holds for the side to move."""
    return bool(_can_declare(state.x, state.checked))


class Model:
    """A loaded snapshot with its compiled searches (in ``workbench``'s programs: shared
    across reloads of one config)."""

    fixed_size = False  # the clock chooses the number of simulations

    def __init__(self, spec: str, max_plies: int = 0, workbench: Workbench | None = None):
        self.spec = spec
        self.workbench = workbench or Workbench()
        self.agent = agent_lib.load_agent(spec, programs=self.workbench.programs)
        self.speed: Speed | None = None
        self.max_plies = max_plies  # the game's ply limit (MaxMovesToDraw); 0: none

    @property
    def _tree_limit(self) -> int:
        return self.max_plies or UNLIMITED_PLIES

    def _search(self, n: int, quick: bool = False):
        """The ``n``-simulation search, its ply limit the current ``max_plies`` (a value:
        a changed limit compiles nothing)."""
        return self.agent.search(n, **self._shape, max_length=self._tree_limit, quick=quick)

    @property
    def _shape(self) -> dict:
        return dict(batch=1, history=PARSE_RULES.history, pv_length=PV_LENGTH)

    def _compiled(self, quick: bool) -> set[int]:
        return self.agent.compiled_simulations(**self._shape, quick=quick)

    def _starts_quick(self, simulations: int) -> bool:
        """A CPU without the -O2 programs serialized: ``prepare`` compiles quick ones (or
        loads them) and the -O2 ones follow aside, for the next moves and the next start."""
        optimized = all(self.agent.serialized(n, **self._shape) for n in (0, simulations))
        return not optimized and jax.default_backend() == "cpu" and not ALL_AT_O0

    def loads_quickly(self, simulations: int) -> bool:
        """The programs ``prepare(simulations)`` uses were serialized by an earlier start
        (the engine then warms the parser beside the loads, not after them)."""
        quick = self._starts_quick(simulations)
        return all(self.agent.serialized(n, **self._shape, quick=quick) for n in (0, simulations))

    def prepared(self, simulations: int) -> bool:
        """``prepare(simulations)`` has nothing left to do (for the current ply limit)."""
        return self.speed is not None and {0, simulations} <= self._compiled(False) | self._compiled(True)

    def summary(self, simulations: int, search_s: float) -> str:
        """One line on what ``prepare`` loaded and measured."""
        return (
            f"{self.agent.name} ({self.agent.config.name}), {simulations} simulations in {search_s * 1000:.0f} ms, "
            f"policy {self.speed.policy_s * 1000:.1f} ms, compile {self.speed.compile_s:.1f} s"
        )

    def compiled_sizes(self) -> set[int]:
        """Simulation counts (> 0) whose search is compiled (either way)."""
        return (self._compiled(False) | self._compiled(True)) - {0}

    def compile_in_background(self, n: int):
        """Compiles the ``n``-simulation search in a thread, for later moves (one at a time)."""
        self.workbench.in_background(self._compile_quietly, n, name=f"azshogi-compile-{n}")

    def _compile_quietly(self, n: int):
        try:
            self._search(n)
        except Exception:  # the clock keeps using the sizes it has
            pass

    def _optimize(self, simulations: int):
        """The -O2 policy and search after a quick start, then their speed: once measured,
        every move uses them."""
        try:
            start = time.perf_counter()
            for n in (0, simulations):
                self._search(n)
            self.speed, _ = self._measure(simulations, time.perf_counter() - start)
        except Exception:  # the quick programs stay in use
            pass

    def analyse(self, n: int, state: env.State) -> dict:
        """An ``n``-simulation search (0: the policy network) of one position; host values.
        The -O2 program where compiled, else the quick one, else the -O2 one compiled now."""
        quick = n not in self._compiled(False) and n in self._compiled(True)
        result = self._search(n, quick)(self.agent.params, jax.random.PRNGKey(0), agent_lib.stack_states([state]))
        action, value, pv, mate = jax.device_get((result.action[0], result.chosen_q[0], result.pv[0], result.mate[0]))
        return {"action": int(action), "value": float(value), "pv": pv, "nodes": max(n, 1), "mate": bool(mate)}

    def answer(self, out: dict, state: env.State, seconds: float) -> Answer:
        """``info`` lines and the bestmove of an analysis (``analyse``'s output)."""
        move = notation.action_to_usi(state, out["action"])
        pv = notation.line_to_usi(state, out["pv"])
        if not pv or pv[0] != move:
            pv = [move]
        score = mate_score(state, move, self.workbench.parser()) if out["mate"] else f"cp {value_to_cp(out['value'])}"
        return Answer(move, [info_line(len(pv), out["nodes"], seconds, score, pv)])

    def _measure(self, simulations: int, compile_s: float) -> tuple[Speed, float]:
        """The speed of the programs ``analyse`` uses, on the start position; and the
        search's seconds."""
        state = self.workbench.parser().from_sfen(notation.STARTPOS_SFEN)
        self.analyse(0, state)
        start = time.perf_counter()
        for _ in range(3):
            self.analyse(0, state)
        policy_s = (time.perf_counter() - start) / 3
        start = time.perf_counter()
        out = self.analyse(simulations, state)
        search_s = time.perf_counter() - start
        start = time.perf_counter()
        self.answer(out, state, search_s)
        host_s = time.perf_counter() - start
        speed = Speed(policy_s=policy_s, simulation_s=max(search_s - policy_s, 1e-6) / simulations,
                      compile_s=compile_s, host_s=host_s)
        return speed, search_s

    def prepare(self, simulations: int, progress) -> float:
        """Compiles the policy and the ``simulations`` search, measures their speed; the
        search's seconds. On a CPU's first start these are the quick programs (``quick``
        in ``Agent.search``), and the -O2 ones compile aside (``_optimize``)."""
        quick = self._starts_quick(simulations)
        how = " (quick; the faster search compiles aside)" if quick else ""
        progress(f"compiling the policy network and the search ({simulations} simulations){how}")
        timed = {}

        def compile_search():
            start = time.perf_counter()
            self._search(simulations, quick)
            timed["compile_s"] = time.perf_counter() - start

        # The search beside the parser and the policy: on two idle cores the quick compiles
        # overlap (first start 67 -> 47 s), and serialized programs load side by side.
        thread = threading.Thread(target=compile_search, daemon=True, name="azshogi-compile")
        thread.start()
        self.workbench.install_parser()
        self._search(0, quick)
        thread.join()
        if "compile_s" not in timed:  # it failed in the thread: its error reaches isready here
            compile_search()
        self.speed, search_s = self._measure(simulations, timed["compile_s"])
        if quick:
            self.workbench.in_background(self._optimize, simulations, name="azshogi-optimize")
        return search_s


MAX_CP = 30000  # |score cp| of the heuristic at most


class HeuristicModel:
    """The classical player (``az.classical.heuristic``, as ``az.play.players``'
    ``HeuristicPlayer``): the evolved linear evaluation with a full-width search of
    ``depth`` 1 or 2. The command loop uses it as a ``Model``; it has no network and no
    simulations: ``analyse`` ignores ``n`` and, being ``fixed_size``, the clock leaves it
    alone (one search per move, whatever the limits).

    Equal best moves are told apart by one ``numpy`` Generator seeded at load, so an
    engine process given the same commands plays the same moves. Scores: the value of the
    chosen move (mover's side) in centipawns of the weights (``value / weights[material_P]
    * 100``, or the raw value where that weight is not positive), clipped to +-``MAX_CP``;
    a move that mates is ``score mate 1``, and when every move allows a mate in one
    (depth 2 only) ``score mate -2``.
    """

    fixed_size = True
    max_plies = 0  # a search of depth <= 2 needs no ply limit

    def __init__(self, path: str, depth: int, seed: int = 0, workbench: Workbench | None = None):
        from az.classical import heuristic

        self.heuristic = heuristic
        self.workbench = workbench or Workbench()  # the parser's programs
        self.spec = f"heuristic:{path}?depth={depth}"
        self.path, self.depth = path, depth
        self.weights = heuristic.load_weights(path or None)  # ValueError names the file
        pawn = float(self.weights[0])
        self.cp_per_unit = 100.0 / pawn if pawn > 0 else 1.0
        self.rng = np.random.default_rng(seed)
        self.search_s: float | None = None  # measured by prepare
        self.compile_s: float | None = None
        self.speed = None  # no simulations: nothing for the clock to measure

    def _values(self, state: env.State):
        x = state.x
        return self.heuristic.move_values(np.asarray(x.board), np.asarray(x.hand), np.asarray(x.legal_action_mask),
                                          self.weights, self.depth)

    def analyse(self, n: int, state: env.State) -> dict:
        """The heuristic's move in one position (``n`` is ignored); host values."""
        actions, values = self._values(state)
        best = np.flatnonzero(values == values.max())
        i = int(self.rng.choice(best))
        return {"action": int(actions[i]), "value": float(values[i]), "pv": [int(actions[i])], "nodes": len(actions)}

    def score(self, value: float) -> str:
        """The USI score (``cp X`` or ``mate N``) of a heuristic value."""
        if value >= self.heuristic.MATE:
            return "mate 1"
        if value <= -self.heuristic.MATE:
            return "mate -2"
        if not np.isfinite(value):
            return "cp 0"
        return f"cp {int(round(min(max(value * self.cp_per_unit, -MAX_CP), MAX_CP)))}"

    def answer(self, out: dict, state: env.State, seconds: float) -> Answer:
        """``info`` line (nodes: the children of the position evaluated) and the bestmove."""
        move = notation.action_to_usi(state, out["action"])
        return Answer(move, [info_line(self.depth, out["nodes"], seconds, self.score(out["value"]), [move])])

    def prepared(self, simulations: int) -> bool:
        return self.search_s is not None

    def loads_quickly(self, simulations: int) -> bool:
        """An earlier start serialized the block programs (the parser loads beside them)."""
        from az.classical import features

        return all(self.workbench.programs.loadable(("heuristic", name, features.BLOCK)) for name in features.BLOCK_JITS)

    def prepare(self, simulations: int, progress) -> float:
        """Compiles the heuristic's block programs (``simulations`` is ignored), or loads
        them where an earlier start serialized them, then evaluates the start position; the
        seconds of one search. The tie-break Generator is not used."""
        progress(f"compiling the heuristic (depth {self.depth})")
        start = time.perf_counter()
        self.install_blocks()
        self.workbench.install_parser()
        state = self.workbench.parser().from_sfen(notation.STARTPOS_SFEN)
        self._values(state)
        self.compile_s = time.perf_counter() - start
        start = time.perf_counter()
        self._values(state)
        self.search_s = time.perf_counter() - start
        return self.search_s

    def install_blocks(self) -> None:
        """The evaluation's block programs (``features.BLOCK_JITS``) through the
        workbench's ``Programs``: serialized for the next start, shared by engines starting
        together; compiled side by side (they overlap on two cores)."""
        from az.classical import features

        programs = self.workbench.programs
        built, threads = {}, []

        def build(name: str):
            shape = ("heuristic", name, features.BLOCK)
            fn, args = features.BLOCK_JITS[name], features.block_arguments(name)
            out_tree = jax.tree.structure(jax.eval_shape(fn, *args))
            built[name] = programs.once(shape, lambda: programs.compile(shape, fn, args, out_tree))

        for name in ("successors", "features", "legal"):
            threads.append(threading.Thread(target=build, args=(name,), daemon=True, name=f"azshogi-{name}"))
            threads[-1].start()
        for thread in threads:
            thread.join()
        for name in ("successors", "features", "legal"):
            if name not in built:  # failed in its thread: the error shows here
                build(name)
        features.install_blocks(built)

    def summary(self, simulations: int, search_s: float) -> str:
        weights = self.path or "shipped weights"
        return (
            f"heuristic depth {self.depth} ({weights}), start position in {search_s * 1000:.0f} ms, "
            f"compile {self.compile_s:.1f} s"
        )
