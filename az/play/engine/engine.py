"""A USI engine for a trained checkpoint: ``python -m az.usi --checkpoint WORKDIR[@STEP]``.

For shogi GUIs (ShogiGUI, Shogidokoro, electron-shogi) and match runners (cshogi);
``scripts/azshogi-usi`` starts it without arguments (checkpoint from
``$AZSHOGI_CHECKPOINT`` or its first argument). It plays the agent's greedy Gumbel
search (sequential halving, no noise), as ``az.agent`` evaluates it.

Protocol
  ``usi`` is answered at once: nothing heavy (jax, the environment, the model) is
  imported before ``isready``, which loads the checkpoint, compiles the search for
  ``Simulations``, measures its speed on the start position and answers ``readyok``
  (with ``info string`` progress lines meanwhile, a keep-alive for GUIs with a timeout).
  Options: ``Simulations`` (spin, 800), ``Checkpoint`` (string, WORKDIR[@STEP]),
  ``CheckpointStep`` (string, ``latest`` or a step; reloads on the next ``isready``),
  ``NetworkDelay`` (spin, ms kept back from every time budget, 120).
  ``USI_Hash`` and ``USI_Ponder`` are accepted and ignored.
  ``position startpos|sfen ... [moves ...]``: parsed with ``envs.shogi.from_position``
  (the moves are played through the environment, so repetition history counts); a
  position extending the previous one only plays the new moves. A malformed position,
  bad SFEN or illegal move gets ``info string error: ...`` and leaves no position: the
  next ``go`` answers ``bestmove resign`` (playing on from a stale position would send
  the GUI an illegal move).
  ``go``: ``nodes N`` (N simulations), ``byoyomi``, ``btime``/``wtime``,
  ``binc``/``winc``, ``movetime``, ``infinite``, ``ponder`` (then ``ponderhit``);
  ``stop`` answers at once with the best finished result; ``go mate`` answers
  ``checkmate notimplemented``. ``gameover`` drops any pending answer; ``quit`` (or the
  end of stdin) exits with status 0. Unknown or malformed commands get an ``info string``
  naming the problem; the engine never stops on them. Output is flushed per line.

Moves
  ``bestmove resign`` when the side to move has no legal move, ``bestmove win`` when the
  entering-king declaration (CSA 27-point rule, ``envs.rules.can_declare``) holds for the
  side to move, otherwise the search's move. Before it, ``info depth D nodes N nps .. time
  .. score cp X pv ...``: N simulations; the PV is the chosen move followed by the most
  visited child at each node of the search tree (D = its length).

Score
  The search's value v in [-1, 1] (the chosen move's Q, side to move's view) is shown as
  ``cp = 1200 * atanh(v) = 600 * ln(p / (1 - p))`` with win probability ``p = (1 + v) / 2``
  (the logistic win-rate scale with coefficient 600 of Ponanza/dlshogi-style engines);
  |v| is clipped to 0.9999, so |cp| <= 5942.

Time
  Under ``isready`` the engine measures the network's time per evaluation and the
  search's time per simulation (updated after every timed search). A ``go`` with a
  clock gets the budget ``remaining / 40 + increment + byoyomi`` (never more than
  ``remaining + byoyomi``; ``movetime`` is taken as given) minus ``NetworkDelay``, and
  searches with the most simulations whose estimated time (x1.25) fits, among the sizes
  already compiled up to ``Simulations`` (or ``nodes``); if none fits it plays the policy
  network's move (one evaluation). It never compiles against the clock: when a size of
  the ladder ``Simulations, Simulations/2, ...`` would fit but is not compiled yet, it is
  compiled in a background thread for the next moves (so set ``Simulations`` to what
  the time control allows to play full strength from the first move). A watchdog answers
  with the policy move at the end of the budget should the search still run.
  ``go`` without a clock (plain, ``nodes``, ``infinite``) compiles what it needs.

Errors
  A checkpoint that cannot be loaded (``az.agent.AgentError``'s one-line message) is
  reported on ``isready`` as ``info string error: ...`` followed by ``readyok`` (GUIs
  hang on a missing ``readyok``); every ``go`` then answers ``info string error: ...``
  and ``bestmove resign``. At start-up a checkpoint whose ``checkpoints`` folder does not
  exist is also reported as one line on stderr. A relative WORKDIR that is not in the
  working directory (GUIs choose it) is looked up in the repository (``runs/x``). ``--compilation_cache`` (default: the
  workdir's ``jax_cache``, shared with training) makes later starts compile faster.

Search details: the tree uses the agent's rules (declaration, repetition within the
``history_window``) but no ply limit, since a GUI's game can be longer than the
training's ``max_length`` and the network does not see the ply; positions are parsed
without game-ending rules other than having no legal move, the GUI being the referee.
"""

import argparse
import dataclasses
import math
import os
import sys
import threading
import time

ENGINE_NAME = "azshogi"
ENGINE_AUTHOR = "azshogi authors"
DEFAULT_SIMULATIONS = 800
MAX_SIMULATIONS = 1_000_000
DEFAULT_NETWORK_DELAY_MS = 120
PV_LENGTH = 16  # plies of principal variation read from the tree at most
SCORE_SCALE = 1200.0  # cp = SCORE_SCALE * atanh(v)
VALUE_CLIP = 0.9999
TIME_SAFETY = 1.25  # estimated search time is multiplied by this
MOVES_TO_GO = 40  # a clock's remaining time is spent as if this many moves remain
KEEPALIVE_S = 5.0  # isready prints a progress line at least this often
_UNLIMITED_PLIES = 2**30
_PARSE_HISTORY = 256  # repetition hashes kept for a parsed position (the tree keeps fewer)


def value_to_cp(v: float) -> int:
    """USI centipawns of a value in [-1, 1] (side to move's view)."""
    v = float(v)
    if math.isnan(v):
        return 0
    v = max(-VALUE_CLIP, min(VALUE_CLIP, v))
    return int(round(SCORE_SCALE * math.atanh(v)))


@dataclasses.dataclass
class GoCommand:
    btime: int | None = None
    wtime: int | None = None
    byoyomi: int | None = None
    binc: int | None = None
    winc: int | None = None
    nodes: int | None = None
    movetime: int | None = None
    infinite: bool = False
    ponder: bool = False
    mate: bool = False

    @property
    def timed(self) -> bool:
        return any(
            v is not None for v in (self.btime, self.wtime, self.byoyomi, self.binc, self.winc, self.movetime)
        )


_GO_NUMBERS = ("btime", "wtime", "byoyomi", "binc", "winc", "nodes", "movetime")


def parse_go(args: list[str]) -> GoCommand:
    """The arguments of ``go``; ``ValueError`` names a malformed one."""
    go = GoCommand()
    i = 0
    while i < len(args):
        word = args[i]
        if word in _GO_NUMBERS:
            if i + 1 >= len(args):
                raise ValueError(f"go {word} needs a number")
            try:
                value = int(args[i + 1])
            except ValueError:
                raise ValueError(f"go {word}: {args[i + 1]!r} is not a number") from None
            if value < 0:
                raise ValueError(f"go {word}: {value} is negative")
            setattr(go, word, value)
            i += 2
        elif word in ("infinite", "ponder"):
            setattr(go, word, True)
            i += 1
        elif word == "mate":
            go.mate = True
            i = len(args)  # "mate <ms>" or "mate infinite"
        elif word in ("depth", "searchmoves", "movestogo"):  # UCI words a GUI may send: ignored
            i += 2 if word != "searchmoves" else len(args)
        else:
            raise ValueError(f"go: unknown argument {word!r}")
    if go.nodes == 0:
        raise ValueError("go nodes must be >= 1")
    return go


def time_budget_ms(go: GoCommand, color: int) -> float | None:
    """Milliseconds this move may take by the clock (None: no limit), before NetworkDelay."""
    if go.infinite or not go.timed:
        return None
    if go.movetime is not None:
        return float(go.movetime)
    remaining = (go.btime if color == 0 else go.wtime) or 0
    increment = (go.binc if color == 0 else go.winc) or 0
    byoyomi = go.byoyomi or 0
    budget = remaining / MOVES_TO_GO + increment + byoyomi
    return float(min(budget, remaining + byoyomi))


@dataclasses.dataclass
class Speed:
    """Measured under isready: seconds of one network evaluation, of one simulation,
    of compiling a search, and of the host work around a move."""

    policy_s: float
    simulation_s: float
    compile_s: float
    host_s: float

    def estimate(self, n: int) -> float:
        """Seconds to play a move with ``n`` compiled simulations (0: the policy move),
        with the safety factor."""
        if n == 0:
            return TIME_SAFETY * (self.policy_s + self.host_s)
        return TIME_SAFETY * (2 * self.policy_s + n * self.simulation_s + self.host_s)


def ladder(limit: int) -> set[int]:
    """The search sizes a clock may ask for: ``limit`` halved down to 1."""
    sizes = set()
    while limit >= 1:
        sizes.add(limit)
        limit //= 2
    return sizes


def most_simulations(candidates, seconds: float, speed: Speed) -> int:
    """The largest size in ``candidates`` whose move fits in ``seconds``; 0 (the policy
    move) if none does."""
    return max((n for n in candidates if speed.estimate(n) <= seconds), default=0)


_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def split_checkpoint(spec: str) -> tuple[str, str | None]:
    """``WORKDIR[@STEP]`` -> (workdir, step text or None), without importing jax.

    A relative WORKDIR missing from the working directory but present in the repository
    (``runs/x``) is taken from there: GUIs start engines in folders of their choosing.
    """
    workdir, at, step = spec.rpartition("@")
    if not (at and step.isdigit()):
        workdir, step = spec, None
    if workdir and not os.path.isabs(workdir) and not os.path.isdir(workdir):
        in_repo = os.path.join(_REPO, workdir)
        if os.path.isdir(os.path.join(in_repo, "checkpoints")):
            workdir = in_repo
    return workdir, step


def checkpoint_problem(spec: str) -> str | None:
    """A one-line complaint when the checkpoint's folder is missing (cheap, no jax)."""
    workdir, _ = split_checkpoint(spec)
    directory = os.path.abspath(os.path.join(workdir, "checkpoints"))
    if not os.path.isdir(directory):
        return f"checkpoint {spec!r}: no checkpoints in {directory}"
    return None


class Output:
    """Thread-safe, line-flushed writing to the GUI."""

    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, *lines: str):
        with self.lock:
            for line in lines:
                self.stream.write(line + "\n")
            self.stream.flush()


def _one_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    message = text[0] if text else ""
    if isinstance(error, ValueError) and message:
        return message
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


@dataclasses.dataclass
class Answer:
    bestmove: str
    info: list  # lines printed before bestmove


# The heavy part (jax, the environment, the model): imported under isready -------------


class Model:
    """A loaded checkpoint with its compiled policy and search functions."""

    _compiled_cache: dict = {}  # (config json, kind, n) -> compiled; survives reloads
    _compile_locks: dict = {}
    _locks_lock = threading.Lock()
    _background: threading.Thread | None = None

    def __init__(self, spec: str, parse_rules, progress):
        import jax

        from az import agent as agent_lib

        self.spec = spec
        self.agent = agent_lib.load_agent(spec)
        self.parse_rules = parse_rules
        self.progress = progress
        self.config_key = self.agent.config.to_json()
        self.speed: Speed | None = None
        self._params = self.agent.params
        self._jax = jax

    # Compiled functions ---------------------------------------------------------

    def _example_games(self):
        from az import agent as agent_lib
        from envs import shogi

        return agent_lib.stack_states([shogi.from_position("startpos", self.parse_rules)])

    def _compile(self, kind: str, n: int):
        key = (self.config_key, kind, n)
        with Model._locks_lock:
            lock = Model._compile_locks.setdefault(key, threading.Lock())
        with lock:  # one compile per key, also between the go and the background threads
            if key not in Model._compiled_cache:
                fn = self._make_policy() if kind == "policy" else self._make_search(n)
                Model._compiled_cache[key] = fn.lower(self._params, self._example_games()).compile()
        return Model._compiled_cache[key]

    def compiled_sizes(self) -> set[int]:
        return {n for (key, kind, n) in list(Model._compiled_cache) if key == self.config_key and kind == "search"}

    def compile_in_background(self, n: int):
        """Compiles the ``n``-simulation search in a thread, for later moves (one at a time)."""
        with Model._locks_lock:
            if Model._background is not None and Model._background.is_alive():
                return
            Model._background = threading.Thread(
                target=self._compile_quietly, args=(n,), daemon=True, name=f"azshogi-compile-{n}"
            )
            Model._background.start()

    def _compile_quietly(self, n: int):
        try:
            self._compile("search", n)
        except Exception:  # the clock keeps using the sizes it has
            pass

    def _make_policy(self):
        import jax
        import jax.numpy as jnp

        from az import search as search_lib

        apply = self.agent.network.apply

        def policy(params, games):
            logits, value = search_lib.evaluate(apply, params, games)
            action = jnp.argmax(logits, axis=-1).astype(jnp.int32)
            return {
                "action": action,
                "value": value,
                "pv": action[:, None],
                "pv_states": jax.tree.map(lambda a: a[:, None], games),
                "nodes": jnp.ones_like(action),
            }

        return jax.jit(policy)

    def _make_search(self, n: int):
        import jax
        import jax.numpy as jnp

        from az import search as search_lib
        from envs import env

        agent = self.agent
        rules = agent.rules
        tree_rules = env.Rules(
            max_length=_UNLIMITED_PLIES,
            declaration=rules.declaration,
            repetitions=rules.repetitions,
            perpetual_check_loses=rules.perpetual_check_loses,
        )
        search = search_lib.make_search(
            agent.network.apply,
            tree_rules,
            algorithm="gumbel",
            num_simulations=n,
            max_num_considered_actions=agent.config.search.max_num_considered_actions,
            gumbel_scale=0.0,
            history_window=agent.config.search.history_window,
        )

        def run(params, games):
            out = search(params, jax.random.PRNGKey(0), games)
            tree = out.search_tree
            batch = jnp.arange(out.action.shape[0])
            summary = tree.summary()
            chosen_visits = summary.visit_counts[batch, out.action]
            value = jnp.where(chosen_visits > 0, summary.qvalues[batch, out.action], summary.value)
            pv, nodes = principal_variation(tree, out.action, PV_LENGTH)
            pv_states = jax.tree.map(lambda e: e[batch[:, None], nodes], tree.embeddings)
            return {
                "action": out.action,
                "value": value,
                "pv": pv,
                "pv_states": pv_states,
                "nodes": summary.visit_counts.sum(axis=-1).astype(jnp.int32),
            }

        return jax.jit(run)

    # Playing --------------------------------------------------------------------

    def evaluate(self, n: int, state) -> dict:
        """Runs the policy (n = 0) or an n-simulation search on one state; host numpy out."""
        from az import agent as agent_lib

        fn = self._compile("policy" if n == 0 else "search", n)
        out = fn(self._params, agent_lib.stack_states([state]))
        return self._jax.device_get(out)

    def answer(self, out: dict, state, seconds: float, note: str = "") -> Answer:
        """``info`` lines and the bestmove of an evaluation's output."""
        from envs import shogi

        action = int(out["action"][0])
        move = shogi.action_to_usi(state, action)
        pv = []
        for k in range(out["pv"].shape[1]):
            a = int(out["pv"][0, k])
            if a < 0:
                break
            node = self._jax.tree.map(lambda x: x[0, k], out["pv_states"])
            try:
                pv.append(shogi.action_to_usi(node, a))
            except ValueError:
                break
        if not pv or pv[0] != move:
            pv = [move]
        nodes = int(out["nodes"][0])
        ms = max(int(seconds * 1000), 1)
        info = [
            f"info depth {len(pv)} nodes {nodes} nps {int(nodes * 1000 / ms)} time {ms} "
            f"score cp {value_to_cp(out['value'][0])} pv {' '.join(pv)}"
        ]
        if note:
            info.insert(0, f"info string {note}")
        return Answer(move, info)

    def prepare(self, simulations: int):
        """Compiles the policy and the ``simulations`` search and measures their speed."""
        from envs import shogi

        state = shogi.from_position("startpos", self.parse_rules)
        self.progress("compiling the policy network")
        self._compile("policy", 0)
        self.evaluate(0, state)
        start = time.perf_counter()
        for _ in range(3):
            self.evaluate(0, state)
        policy_s = (time.perf_counter() - start) / 3
        self.progress(f"compiling the search ({simulations} simulations)")
        start = time.perf_counter()
        self._compile("search", simulations)
        compile_s = time.perf_counter() - start
        start = time.perf_counter()
        out = self.evaluate(simulations, state)
        search_s = time.perf_counter() - start
        start = time.perf_counter()
        self.answer(out, state, search_s)
        host_s = time.perf_counter() - start
        self.speed = Speed(
            policy_s=policy_s,
            simulation_s=max(search_s - policy_s, 1e-6) / simulations,
            compile_s=compile_s,
            host_s=host_s,
        )
        return search_s

    def observe_speed(self, n: int, seconds: float):
        """Updates the time per simulation from a finished search."""
        if self.speed is None or n <= 0:
            return
        measured = max(seconds - self.speed.policy_s, 1e-6) / n
        self.speed.simulation_s = 0.5 * self.speed.simulation_s + 0.5 * measured


class Job:
    """One ``go``: computes in a thread; answers once (result, stop, ponderhit or watchdog)."""

    def __init__(self, engine: "Engine", go: GoCommand, received: float, position, position_error):
        self.engine = engine
        self.go = go
        self.position = position  # as at the go: a later position command does not change it
        self.position_error = position_error
        self.received = received
        self.lock = threading.Lock()
        self.wait_for_stop = go.infinite or go.ponder
        self.answer_requested = False
        self.answered = False
        self.fallback: Answer | None = None
        self.result: Answer | None = None
        self.finished = threading.Event()
        self.timer: threading.Timer | None = None
        self.thread: threading.Thread | None = None

    def start(self, previous: "Job | None"):
        self.thread = threading.Thread(target=self._run, args=(previous,), daemon=True, name="azshogi-go")
        self.thread.start()

    def _run(self, previous):
        try:
            if previous is not None and previous.thread is not None:
                previous.thread.join()
            self.engine.think(self)
        except Exception as e:  # never leave the GUI without a bestmove
            note = f"info string error: search failed ({_one_line(e)})"
            with self.lock:
                if self.fallback is None:
                    self.fallback = Answer("resign", [note])
                else:
                    self.fallback.info.insert(0, note)
        finally:
            self.finished.set()
            with self.lock:
                if not self.wait_for_stop:
                    self.answer_requested = True
                if self.result is None and self.fallback is None:
                    self.fallback = Answer("resign", ["info string error: no move found"])
                self._try_emit()

    def set_deadline(self, seconds_from_now: float):
        if self.timer is not None:
            self.timer.cancel()
        self.timer = threading.Timer(max(seconds_from_now, 0.0), self.request_answer)
        self.timer.daemon = True
        self.timer.start()

    def store(self, *, fallback: Answer | None = None, result: Answer | None = None):
        with self.lock:
            if fallback is not None:
                self.fallback = fallback
            if result is not None:
                self.result = result
            self._try_emit()

    def request_answer(self):
        with self.lock:
            self.answer_requested = True
            self._try_emit()

    def cancel(self):
        with self.lock:
            self.answered = True
        if self.timer is not None:
            self.timer.cancel()

    def _try_emit(self):  # self.lock held
        if self.answered or not self.answer_requested:
            return
        best = self.result or self.fallback
        if best is None:
            return  # emitted as soon as the thread stores something
        if best is self.fallback and self.result is None and self.fallback.bestmove not in ("resign", "win"):
            best = Answer(best.bestmove, ["info string search unfinished: the policy network's move", *best.info])
        self.answered = True
        if self.timer is not None:
            self.timer.cancel()
        self.engine.out(*best.info, f"bestmove {best.bestmove}")

    @property
    def active(self) -> bool:
        return not self.answered or not self.finished.is_set()


@dataclasses.dataclass
class Position:
    head: str  # "startpos" or "sfen ..."
    moves: list
    state: object  # envs.env.State


class Engine:
    """The USI command loop's state; ``handle(line)`` returns False on quit."""

    def __init__(self, checkpoint: str, simulations: int, network_delay_ms: int, out: Output, cache_dir: str | None):
        self.out = out
        self.checkpoint = checkpoint
        self.step_option = "latest"
        self.simulations = simulations
        self.network_delay_ms = network_delay_ms
        self.cache_dir = cache_dir  # "" disables the compilation cache, None: the workdir's
        self.model: Model | None = None
        self.load_error: str | None = None
        self.position: Position | None = None
        self.position_error: str | None = "no position given"
        self.job: Job | None = None
        self._parse_rules = None
        self._declare = None
        self._cache_set = False

    # Commands ------------------------------------------------------------------

    def handle(self, line: str) -> bool:
        words = line.split()
        if not words:
            return True
        command, args = words[0], words[1:]
        handler = getattr(self, f"cmd_{command}", None)
        if handler is None:
            self.out(f"info string unknown command: {line.strip()[:200]}")
            return True
        try:
            return handler(args, line) is not False
        except Exception as e:  # a command never stops the engine
            self.out(f"info string error: {command}: {_one_line(e)}")
            return True

    def cmd_usi(self, args, line):
        checkpoint = self.checkpoint or "<empty>"
        self.out(
            f"id name {ENGINE_NAME} {_version()}",
            f"id author {ENGINE_AUTHOR}",
            f"option name Simulations type spin default {self.simulations} min 1 max {MAX_SIMULATIONS}",
            f"option name Checkpoint type string default {checkpoint}",
            f"option name CheckpointStep type string default {self.step_option}",
            f"option name NetworkDelay type spin default {self.network_delay_ms} min 0 max 60000",
            "usiok",
        )

    def cmd_setoption(self, args, line):
        text = line.strip()[len("setoption"):].strip()
        if not text.startswith("name "):
            raise ValueError(f"expected 'setoption name NAME [value VALUE]', got {line.strip()!r}")
        name, _, value = text[len("name "):].partition(" value ")
        name, value = name.strip(), value.strip()
        key = name.lower()
        if key == "simulations":
            n = _int_option(name, value, 1, MAX_SIMULATIONS)
            self.simulations = n
        elif key == "networkdelay":
            self.network_delay_ms = _int_option(name, value, 0, 60000)
        elif key == "checkpoint":
            self.checkpoint = "" if value in ("", "<empty>") else value
        elif key == "checkpointstep":
            if value.lower() in ("", "latest", "<empty>"):
                self.step_option = "latest"
            elif value.isdigit():
                self.step_option = str(int(value))
            else:
                raise ValueError(f"option CheckpointStep: {value!r} is neither 'latest' nor a step number")
        elif key in ("usi_hash", "usi_ponder"):
            pass
        else:
            self.out(f"info string unknown option: {name}")

    def cmd_isready(self, args, line):
        if self.job is not None and self.job.thread is not None:
            self.job.thread.join()  # the computation ends by itself; the answer may wait for stop
        done = threading.Event()

        def keepalive():
            start = time.monotonic()
            while not done.wait(KEEPALIVE_S):
                self.out(f"info string loading ({time.monotonic() - start:.0f} s)")

        thread = threading.Thread(target=keepalive, daemon=True)
        thread.start()
        try:
            self._ready()
        except Exception as e:  # a failed compile: report it, still answer readyok
            self.model, self.load_error = None, f"isready: {_one_line(e)}"
            self.out(f"info string error: {self.load_error}")
        finally:
            done.set()
            thread.join()
        self.out("readyok")

    def cmd_usinewgame(self, args, line):
        pass

    def cmd_position(self, args, line):
        try:
            self._set_position(args)
        except Exception as e:
            self.position, self.position_error = None, _one_line(e)
            self.out(f"info string error: {self.position_error}")

    def cmd_go(self, args, line):
        received = time.monotonic()
        try:
            go = parse_go(args)
        except ValueError as e:
            self.out(f"info string error: {_one_line(e)}; searching with the defaults")
            go = GoCommand()
        if go.mate:
            self.out("checkmate notimplemented")
            return
        previous = self.job if self.job is not None and self.job.active else None
        if previous is not None and not previous.answered:  # a go without stop: answer the old one
            previous.request_answer()
        self.job = Job(self, go, received, self.position, self.position_error)
        self.job.start(previous)

    def cmd_stop(self, args, line):
        if self.job is not None:
            self.job.request_answer()

    def cmd_ponderhit(self, args, line):
        job = self.job
        if job is None or job.answered:
            return
        with job.lock:
            job.wait_for_stop = False
        if job.finished.is_set():
            job.request_answer()
            return
        state = job.position.state if job.position is not None else None
        budget = time_budget_ms(job.go, int(state.current_player)) if state is not None else None
        if budget is not None:
            job.set_deadline((budget - self.network_delay_ms) / 1000.0)

    def cmd_gameover(self, args, line):
        if self.job is not None:
            self.job.cancel()

    def cmd_quit(self, args, line):
        return False

    # Work ----------------------------------------------------------------------

    def parse_rules(self):
        if self._parse_rules is None:
            from envs import shogi

            # Only "no legal move" ends a parsed game: the GUI is the referee.
            self._parse_rules = shogi.Rules(
                max_length=_UNLIMITED_PLIES, declaration=False, repetitions=2**20, history=_PARSE_HISTORY
            )
        return self._parse_rules

    def _set_position(self, args):
        import jax.numpy as jnp

        from envs import notation, shogi

        if not args or args[0] == "moves":
            raise ValueError("position needs 'startpos' or 'sfen ...'")
        if "moves" in args:
            index = args.index("moves")
            head_words, moves = args[:index], args[index + 1:]
        else:
            head_words, moves = args, []
        head = " ".join(head_words)
        if head_words[0] not in ("startpos", "sfen") or (head_words[0] == "startpos" and len(head_words) > 1):
            raise ValueError(f"position must be 'startpos' or 'sfen ...' before 'moves', got {head!r}")
        rules = self.parse_rules()
        old = self.position
        if old is not None and old.head == head and moves[: len(old.moves)] == old.moves:
            state, done = old.state, len(old.moves)
        else:
            state, done = shogi.from_position(head, rules), 0
        _, step = notation._compiled(rules)  # the jitted step from_position uses
        for ply in range(done, len(moves)):
            try:
                action = shogi.usi_to_action(state, moves[ply])
            except ValueError as e:
                raise ValueError(f"position: move {ply + 1}: {_one_line(e)}") from None
            state = step(state, jnp.int32(action))
        self.position, self.position_error = Position(head, list(moves), state), None

    def _model_spec(self) -> str:
        workdir, step = split_checkpoint(self.checkpoint)
        if self.step_option != "latest":
            step = self.step_option
        return f"{workdir}@{step}" if step is not None else workdir

    def _enable_cache(self, workdir: str):
        if self._cache_set:
            return
        self._cache_set = True
        directory = self.cache_dir if self.cache_dir is not None else os.path.join(workdir, "jax_cache")
        if not directory:
            return
        directory = os.path.abspath(directory)
        try:
            os.makedirs(directory, exist_ok=True)
        except OSError:
            return
        if not os.access(directory, os.W_OK):
            return
        import jax

        jax.config.update("jax_compilation_cache_dir", directory)
        jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
        jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)

    def _ready(self):
        if not self.checkpoint:
            self.model = None
            self.load_error = "no checkpoint: start with --checkpoint WORKDIR[@STEP] or set the option Checkpoint"
            self.out(f"info string error: {self.load_error}")
            return
        spec = self._model_spec()
        if self.model is None or self.model.spec != spec:
            self.model = None
            problem = checkpoint_problem(spec)
            if problem:
                self.load_error = problem
                self.out(f"info string error: {problem}")
                return
            self.out(f"info string loading {spec}")
            self._enable_cache(split_checkpoint(spec)[0])
            from az import agent as agent_lib

            try:
                self.model = Model(spec, self.parse_rules(), lambda msg: self.out(f"info string {msg}"))
            except agent_lib.AgentError as e:
                self.load_error = _one_line(e)
            except Exception as e:  # a corrupt checkpoint, an orbax error: still one line
                self.load_error = f"checkpoint {spec!r}: {_one_line(e)}"
            if self.model is None:
                self.out(f"info string error: {self.load_error}")
                return
            self.load_error = None
        model = self.model
        if model.speed is None or self.simulations not in model.compiled_sizes():
            search_s = model.prepare(self.simulations)
            self.out(
                f"info string {ENGINE_NAME}: {model.agent.name} ({model.agent.config.name}), "
                f"{self.simulations} simulations in {search_s * 1000:.0f} ms, "
                f"policy {model.speed.policy_s * 1000:.1f} ms, compile {model.speed.compile_s:.1f} s"
            )
        self._declaration_check()

    def _declaration_check(self):
        if self._declare is None:
            import jax

            from envs import rules, shogi

            self._declare = jax.jit(rules.can_declare)
            state = shogi.from_position("startpos moves 7g7f", self.parse_rules())  # compiles step too
            self._declare(state.x, state.checked)
        return self._declare

    def think(self, job: Job):
        """Runs in the job's thread: stores a fallback, then the result."""
        import numpy as np

        model = self.model
        if model is None:
            reason = self.load_error or "not loaded (send isready first)"
            job.store(result=Answer("resign", [f"info string error: no model: {reason}"]))
            return
        if job.position is None:
            job.store(result=Answer("resign", [f"info string error: no valid position ({job.position_error})"]))
            return
        state = job.position.state
        if not np.asarray(state.legal_action_mask).any():
            job.store(result=Answer("resign", ["info string no legal move: resign"]))
            return
        if bool(self._declaration_check()(state.x, state.checked)):
            job.store(result=Answer("win", ["info string entering-king declaration (27-point rule) holds"]))
            return
        go = job.go
        budget_ms = time_budget_ms(go, int(state.current_player))
        fallback_out = model.evaluate(0, state)  # one evaluation: the answer to an early stop
        fallback = model.answer(fallback_out, state, time.monotonic() - job.received)
        job.store(fallback=fallback)
        limit = go.nodes if go.nodes is not None else self.simulations
        seconds = None
        if budget_ms is not None and not job.wait_for_stop:
            seconds = (budget_ms - self.network_delay_ms) / 1000.0 - (time.monotonic() - job.received)
        if seconds is None:
            n = limit  # compiled now if need be
        else:  # never compile against the clock: use a compiled size, compile the right one aside
            wanted = most_simulations(ladder(limit), seconds, model.speed)
            if wanted and wanted not in model.compiled_sizes():
                model.compile_in_background(wanted)
            n = most_simulations({s for s in model.compiled_sizes() if s <= limit}, seconds, model.speed)
        if n == 0:
            fallback.info.insert(0, "info string no time to search: the policy network's move")
            job.store(result=fallback)
            return
        if seconds is not None:
            job.set_deadline(seconds)  # the watchdog: the fallback if the search runs late
        compiled = n in model.compiled_sizes()
        start = time.monotonic()
        out = model.evaluate(n, state)
        if compiled:
            model.observe_speed(n, time.monotonic() - start)
        job.store(result=model.answer(out, state, time.monotonic() - job.received))

    def close(self):
        if self.job is not None:
            self.job.cancel()


def _int_option(name: str, value: str, low: int, high: int) -> int:
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"option {name}: {value!r} is not a number") from None
    if not low <= n <= high:
        raise ValueError(f"option {name}: {n} is outside [{low}, {high}]")
    return n


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("azshogi")
    except Exception:
        return "dev"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(prog="python -m az.usi", description="USI engine for an azshogi checkpoint.")
    parser.add_argument("--checkpoint", default="", help="training workdir, WORKDIR[@STEP] (default: latest step)")
    parser.add_argument(
        "--simulations", type=int, default=DEFAULT_SIMULATIONS, help="default of the Simulations option"
    )
    parser.add_argument(
        "--network_delay", type=int, default=DEFAULT_NETWORK_DELAY_MS, help="ms kept back from every time budget"
    )
    parser.add_argument(
        "--compilation_cache",
        default=None,
        help="JAX compilation cache folder (default: WORKDIR/jax_cache; '' disables it)",
    )
    args = parser.parse_args(argv)
    if not 1 <= args.simulations <= MAX_SIMULATIONS:
        parser.error(f"--simulations must be in [1, {MAX_SIMULATIONS}]")
    if args.checkpoint:
        problem = checkpoint_problem(args.checkpoint)
        if problem:
            print(f"azshogi-usi: error: {problem}", file=sys.stderr, flush=True)
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)
    stdout = open(sys.stdout.fileno(), "w", encoding="utf-8", errors="replace", closefd=False)
    engine = Engine(args.checkpoint, args.simulations, args.network_delay, Output(stdout), args.compilation_cache)
    while True:
        line = stdin.readline()
        if not line or not engine.handle(line):
            break
    engine.close()
    stdout.flush()
    return 0


def principal_variation(tree, action, length: int):
    """(actions [B, length], nodes [B, length]) from the root: ``action``, then the most
    visited child at each node; -1 once a node is unexpanded or its game has ended.
    ``nodes[:, k]`` is the node where ``actions[:, k]`` is played."""
    import jax.numpy as jnp

    batch = jnp.arange(action.shape[0])
    node = jnp.zeros_like(action)
    actions, nodes = [action], [node]
    child = tree.children_index[batch, node, action]
    for _ in range(length - 1):
        ok = child >= 0
        node = jnp.maximum(child, 0)
        ok &= ~(tree.embeddings.terminated[batch, node] | tree.embeddings.truncated[batch, node])
        visits = tree.children_visits[batch, node]
        best = jnp.argmax(visits, axis=-1).astype(action.dtype)
        ok &= visits[batch, best] > 0
        actions.append(jnp.where(ok, best, -1))
        nodes.append(node)
        child = jnp.where(ok, tree.children_index[batch, node, best], -1)
    return jnp.stack(actions, axis=1), jnp.stack(nodes, axis=1)


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    sys.stderr.flush()
    # A search or a compile in a thread cannot be interrupted; leave at once (nothing
    # else is left to write: compilation-cache entries are written when compiled).
    os._exit(status)
