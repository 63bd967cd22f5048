"""The USI command loop (``Engine``) and its command line: ``python -m az.play.engine``.

The protocol it speaks, the options and the heuristic mode are described in the
package's docstring (``az.play.engine``). This module imports no JAX: ``model`` (the
heavy half) is imported through ``_model()`` on the first command that needs it.
"""

import argparse
import importlib
import os
import sys
import threading
import time

from az import workdir as workdir_lib
from az.play.engine import moves
from az.play.engine.job import Job
from az.play.engine.protocol import (
    DEFAULT_NETWORK_DELAY_MS,
    DEFAULT_SIMULATIONS,
    ENGINE_AUTHOR,
    ENGINE_NAME,
    MAX_SIMULATIONS,
    Answer,
    GoCommand,
    Output,
    int_option,
    one_line,
    parse_go,
    version,
)

KEEPALIVE_S = 5.0  # isready prints a progress line at least this often
MAX_MOVES_TO_DRAW = 100_000
_REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__)))))


def weights_path(path: str) -> str:
    """The heuristic's weights ``path`` ("": the shipped file), a relative one missing from
    the working directory but present in the repository taken from there."""
    if path and not os.path.isabs(path) and not os.path.exists(path):
        in_repo = os.path.join(_REPO, path)  # GUIs start engines in folders of their choosing
        if os.path.exists(in_repo):
            return in_repo
    return path


def weights_problem(path: str) -> str | None:
    """A one-line complaint, worded as ``heuristic.load_weights``', when the weights file
    (or a GA workdir's ``weights.json``) is missing; cheap: no JAX. None otherwise (and
    for the shipped file: ``load_weights`` checks it)."""
    if not path:
        return None
    file = os.path.join(path, "weights.json") if os.path.isdir(path) else path
    if not os.path.exists(file):
        return f"heuristic weights {file!r}: no such file (a GA workdir holds weights.json)"
    return None


def _warm_parser(workbench):
    """The parser's programs and the declaration check, which every go runs: none of them
    compiles on a move."""
    try:
        workbench.install_parser()
        position = _model().parse_position(["startpos", "moves", "7g7f"], None, workbench.parser())
        _model().can_declare(position.state)
    except Exception:
        pass


def _model():
    """The heavy half (``az.play.engine.model``): the one place this module imports it."""
    return importlib.import_module("az.play.engine.model")


class Engine:
    """The USI command loop's state; ``handle(line)`` returns False on quit."""

    def __init__(self, checkpoint: str, simulations: int, network_delay_ms: int, out: Output, cache_dir: str | None,
                 heuristic: str | None = None, depth: int = 1):
        self.out = out
        self.heuristic = heuristic  # heuristic mode: the weights ("" the shipped ones); None: the network
        self.depth = depth  # of the heuristic's search
        self.checkpoint = checkpoint
        self.step_option = "latest"
        self.simulations = simulations
        self.network_delay_ms = network_delay_ms
        self.max_moves = 0  # MaxMovesToDraw: the game's ply limit, 0: none
        self.cache_dir = cache_dir  # "" disables the compilation cache, None: the workdir's
        self.model = None  # model.Model once a snapshot is loaded (model.HeuristicModel: weights)
        self.workbench = None  # model.Workbench: the compiled programs, kept across reloads
        self.load_error: str | None = None
        self.position = None  # model.UsiPosition
        self.position_error: str | None = "no position given"
        self.job: Job | None = None
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
            self.out(f"info string error: {command}: {one_line(e)}")
            return True

    def cmd_usi(self, args, line):
        checkpoint = self.checkpoint or "<empty>"
        name = ENGINE_NAME if self.heuristic is None else f"{ENGINE_NAME} heuristic d{self.depth}"
        self.out(
            f"id name {name} {version()}",
            f"id author {ENGINE_AUTHOR}",
            f"option name Simulations type spin default {self.simulations} min 1 max {MAX_SIMULATIONS}",
            f"option name Checkpoint type string default {checkpoint}",
            f"option name CheckpointStep type string default {self.step_option}",
            f"option name NetworkDelay type spin default {self.network_delay_ms} min 0 max 60000",
            f"option name MaxMovesToDraw type spin default {self.max_moves} min 0 max {MAX_MOVES_TO_DRAW}",
            "option name Threads type spin default 1 min 1 max 1024",
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
            n = int_option(name, value, 1, MAX_SIMULATIONS)
            self.simulations = n
        elif key == "networkdelay":
            self.network_delay_ms = int_option(name, value, 0, 60000)
        elif key == "checkpoint":
            self.checkpoint = "" if value in ("", "<empty>") else value
        elif key == "checkpointstep":
            if value.lower() in ("", "latest", "<empty>"):
                self.step_option = "latest"
            elif value.isascii() and value.isdigit():
                self.step_option = str(int(value))
            else:
                raise ValueError(f"option CheckpointStep: {value!r} is neither 'latest' nor a step number")
        elif key in ("maxmovestodraw", "draw_ply"):
            self.max_moves = int_option(name, value, 0, MAX_MOVES_TO_DRAW)
            if self.model is not None:
                self.model.max_plies = self.max_moves  # a value of its compiled searches: nothing compiles
        elif key in ("threads", "usi_hash", "usi_ponder"):
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
            self.model, self.load_error = None, f"isready: {one_line(e)}"
            self.out(f"info string error: {self.load_error}")
        finally:
            done.set()
            thread.join()
        self.out("readyok")

    def cmd_usinewgame(self, args, line):
        pass

    def cmd_position(self, args, line):
        try:
            parser = self.workbench.parser() if self.workbench is not None else None
            self.position, self.position_error = _model().parse_position(args, self.position, parser), None
        except Exception as e:
            self.position, self.position_error = None, one_line(e)
            self.out(f"info string error: {self.position_error}")

    def cmd_go(self, args, line):
        received = time.monotonic()
        try:
            go = parse_go(args)
        except ValueError as e:
            self.out(f"info string error: {one_line(e)}; searching with the defaults")
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
        budget = moves.budget_ms(self, job) if job.position is not None else None
        if budget is not None:
            job.set_deadline((budget - self.network_delay_ms) / 1000.0)

    def cmd_gameover(self, args, line):
        if self.job is not None:
            self.job.cancel()

    def cmd_quit(self, args, line):
        return False

    # Work ----------------------------------------------------------------------

    def _model_spec(self) -> str:
        workdir, step = workdir_lib.parse_spec(self.checkpoint)
        if self.step_option != "latest":
            step = self.step_option
        return f"{workdir}@{step}" if step is not None else workdir

    def _enable_cache(self, workdir: str):
        """The compilation cache: ``--compilation_cache``, else ``workdir``'s ``jax_cache``."""
        if self._cache_set:
            return
        self._cache_set = True
        directory = self.cache_dir if self.cache_dir is not None else os.path.join(workdir, "jax_cache")
        if directory:
            workdir_lib.enable_compilation_cache(directory)

    def _ready(self):
        model = self._load_network() if self.heuristic is None else self._load_heuristic()
        if model is None:
            return
        # The position's step: from JAX's cache beside searches loaded from disk, after
        # searches that compile (compiles slow each other down). A failure shows at the first position.
        parser = threading.Thread(target=_warm_parser, args=(model.workbench,), daemon=True, name="azshogi-parser")
        quick = model.loads_quickly(self.simulations)
        if quick:
            parser.start()
        if not model.prepared(self.simulations):
            search_s = model.prepare(self.simulations, lambda msg: self.out(f"info string {msg}"))
            self.out(f"info string {ENGINE_NAME}: {model.summary(self.simulations, search_s)}")
        if not quick:
            parser.start()
        parser.join()

    def _load_heuristic(self):
        """The heuristic's model (loaded once; retried after a failure), or None with the
        error reported."""
        if self.model is None:
            path = weights_path(self.heuristic)
            problem = weights_problem(path)
            if problem:  # said before JAX loads
                self.load_error = problem
                self.out(f"info string error: {problem}")
                return None
            self.out(f"info string loading the heuristic's weights ({path or 'shipped'}), depth {self.depth}")
            self._enable_cache(workdir_lib.user_cache_dir())  # no workdir: the user's cache
            try:
                self.model = _model().HeuristicModel(path, self.depth, workbench=self._workbench())
            except ValueError as e:  # a missing or malformed weights file
                self.load_error = one_line(e)
            except Exception as e:
                self.load_error = f"heuristic weights {path!r}: {one_line(e)}"
            if self.model is None:
                self.out(f"info string error: {self.load_error}")
                return None
            self.load_error = None
        return self.model

    def _load_network(self):
        """The snapshot's model (reloaded when the checkpoint options changed), or None with
        the error reported."""
        if not self.checkpoint:
            self.model = None
            self.load_error = "no checkpoint: start with --checkpoint WORKDIR[@STEP] or set the option Checkpoint"
            self.out(f"info string error: {self.load_error}")
            return None
        spec = self._model_spec()
        if self.model is None or self.model.spec != spec:
            self.model = None
            problem = workdir_lib.snapshot_problem(spec)
            if problem:
                self.load_error = problem
                self.out(f"info string error: {problem}")
                return None
            self.out(f"info string loading {spec}")
            self._enable_cache(workdir_lib.parse_spec(spec)[0])
            try:
                self.model = _model().Model(spec, max_plies=self.max_moves, workbench=self._workbench())
            except ValueError as e:  # AgentError
                self.load_error = one_line(e)
            except Exception as e:  # a corrupt snapshot, an orbax error: still one line
                self.load_error = f"checkpoint {spec!r}: {one_line(e)}"
            if self.model is None:
                self.out(f"info string error: {self.load_error}")
                return None
            self.load_error = None
        return self.model

    def _workbench(self):
        """The programs and compile thread every model of this engine shares (made on the
        first load)."""
        if self.workbench is None:
            self.workbench = _model().Workbench()
        return self.workbench

    def arm(self, job: Job):
        """Runs first in the job's thread, before anything that may wait: the watchdog and a
        host fallback (``moves.arm``)."""
        try:
            moves.arm(self, job, _model)
        except Exception:  # think still answers, later
            pass

    def think(self, job: Job):
        """Runs in the job's thread: stores a fallback, then the result (``moves.think``)."""
        moves.think(self, job, _model())

    def close(self):
        if self.job is not None:
            self.job.cancel()


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="python -m az.play.engine",
        description="USI engine for an azshogi checkpoint (--checkpoint) or for the classical heuristic player "
        "(--heuristic [WEIGHTS] [--depth D]: no network; the network's options are ignored).",
    )
    parser.add_argument("--checkpoint", default="", help="training workdir, WORKDIR[@STEP] (default: latest step)")
    parser.add_argument(
        "--heuristic",
        nargs="?",
        const="",
        default=None,
        metavar="WEIGHTS",
        help="play the classical heuristic instead of a network: a weights file or GA workdir "
        "(default: the shipped data/heuristic_weights.json)",
    )
    parser.add_argument(
        "--depth", type=int, choices=(1, 2), default=None, help="the heuristic's search depth (default 1)"
    )
    parser.add_argument(
        "--simulations", type=int, default=DEFAULT_SIMULATIONS, help="default of the Simulations option."
    )
    parser.add_argument(
        "--network_delay", type=int, default=DEFAULT_NETWORK_DELAY_MS, help="ms kept back from every time budget."
    )
    parser.add_argument(
        "--compilation_cache",
        default=None,
        help="JAX compilation cache folder (default: WORKDIR/jax_cache, with --heuristic the user's "
        "~/.cache/azshogi/jax_cache; '' disables it)",
    )
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not 1 <= args.simulations <= MAX_SIMULATIONS:
        parser.error(f"--simulations must be in [1, {MAX_SIMULATIONS}]")
    if args.heuristic is None and args.depth is not None:
        parser.error("--depth is the heuristic's: use it with --heuristic")
    if args.heuristic is not None and args.checkpoint:
        parser.error("--heuristic plays without a network: drop --checkpoint")
    problem = None
    if args.heuristic:
        problem = weights_problem(weights_path(args.heuristic))
    elif args.checkpoint:
        problem = workdir_lib.snapshot_problem(args.checkpoint)
    if problem:
        print(f"azshogi-usi: error: {problem}", file=sys.stderr, flush=True)
    stdin = open(sys.stdin.fileno(), encoding="utf-8", errors="replace", closefd=False)
    stdout = open(sys.stdout.fileno(), "w", encoding="utf-8", errors="replace", closefd=False)
    engine = Engine(args.checkpoint, args.simulations, args.network_delay, Output(stdout), args.compilation_cache,
                    heuristic=args.heuristic, depth=args.depth or 1)
    while True:
        line = stdin.readline()
        if not line or not engine.handle(line):
            break
    engine.close()
    stdout.flush()
    return 0
