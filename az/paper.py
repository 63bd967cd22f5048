"""The paper's six training runs, their evaluation and its figures in one command.

    python reproduce.py --preset gpu --workdir runs/paper        # resumes when run again

Trains the variants one after another, each on all of the machine's accelerators, with
``train.py`` (``configs/VARIANT.py:PRESET``). Beside it, an evaluator process on the CPU
(``JAX_PLATFORMS=cpu``) plays chosen snapshots against the reference engine as soon as
they are saved, so the figures need no second pass over the runs. At the end it draws:

    figures/fig2_elo.png        Elo against the reference over training games (Fig. 2)
    figures/fig2_teacher.png    agreement with the teacher set over training games
    figures/fig3_openings.png   the final snapshots' score per opening (Fig. 3)
    figures/fig4_balance.png    black's advantage over the start sets (Fig. 4, Table 2)
    figures/heatmaps.png        king and rook squares at ply 30 (Figs. 6-8)
    results.md, results.json    Table 2, the final matches, training time per variant

What a run keeps in WORKDIR:

    plan.json                   its settings; a rerun must ask for the same
    VARIANT/                    a train.py workdir each; matches in VARIANT/eval/OPPONENT/step_K
    VARIANT/train.log           train.py's output
    balance.json, eval.log      the evaluator's start-set scores and its output

Every part resumes: training from its checkpoints, matches game by game, the balance
table whole. Killing the runner (even SIGKILL) stops its children with SIGTERM, on which
training saves. The wall time is estimated from the first variant's measured iterations
and refined as variants finish; the evaluator prints each match's pace.
"""

import dataclasses
import json
import math
import os
import signal
import subprocess
import sys
import time

from az import workdir as workdir_lib

VARIANTS = ("base", "exploration_puct", "exploration_sh", "randomstart2", "shogi816k", "shogi816k_randomstart2")
BALANCE_STARTS = ("random_start(2)", "0.5*shogi816k + 0.5*shogi816k(line)", "random_start(4)")
OPENINGS = "data/openings.tsv"
PLANNING_PLIES = 150  # a game's length until the first games have finished (docs/reproduction.md)
_REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


class PaperError(ValueError):
    """A bad option or a run that cannot go on; the message says which."""


@dataclasses.dataclass(frozen=True)
class Plan:
    """What one reproduction runs. Evaluation: ``points`` snapshots per variant (the
    untrained network, the final one and evenly spaced training games between), each a
    match of ``games`` games, the final one of ``final_games`` (its per-opening scores
    are Fig. 3) at ``simulations`` simulations per move against ``opponent``."""

    preset: str
    variants: tuple[str, ...]
    opponent: str
    simulations: int
    games: int
    final_games: int
    points: int
    balance_positions: int
    concurrency: int


# Evaluation per preset: the paper's 800 simulations and a round of 54 games per point
# (432, 8 rounds, for the final: 80% power for 50 Elo, docs/reproduction.md) where an
# accelerator trains; less where the CPU does both.
EVALUATION = {
    "paper": dict(opponent="usi:/usr/games/fairy-stockfish?nodes=10000", simulations=800, games=54,
                  final_games=432, points=10, balance_positions=900, concurrency=8),
    "gpu": dict(opponent="usi:/usr/games/fairy-stockfish?nodes=10000", simulations=800, games=54,
                final_games=432, points=10, balance_positions=900, concurrency=8),
    "cpu": dict(opponent="usi:/usr/games/fairy-stockfish?nodes=1000", simulations=16, games=54,
                final_games=108, points=4, balance_positions=200, concurrency=2),
    "smoke": dict(opponent="usi:/usr/games/fairy-stockfish?nodes=100", simulations=2, games=2,
                  final_games=4, points=2, balance_positions=6, concurrency=1),
}


# At smoke size compiling is nearly all of the work: its processes compile as the test
# suite does (Makefile's TEST_XLA_FLAGS: a third of the time; the programs run slower).
SMOKE_XLA_FLAGS = "--xla_backend_optimization_level=0 --xla_cpu_use_fusion_emitters=false"


def make_plan(preset: str, *, variants: str | None = None, **overrides) -> Plan:
    """The preset's plan with the given (non-None) overrides; PaperError names a bad value."""
    if preset not in EVALUATION:
        raise PaperError(f"--preset {preset!r}: choose from {', '.join(EVALUATION)}")
    chosen = tuple(v.strip() for v in variants.split(",")) if variants else VARIANTS
    unknown = [v for v in chosen if v not in VARIANTS]
    if unknown or not chosen or len(set(chosen)) != len(chosen):
        raise PaperError(f"--variants {variants!r}: a comma-separated subset of {', '.join(VARIANTS)}")
    settings = dict(EVALUATION[preset])
    settings.update({k: v for k, v in overrides.items() if v is not None})
    for name in ("simulations", "games", "final_games", "concurrency"):
        if settings[name] < 1:
            raise PaperError(f"--{name.replace('_', '-')} must be >= 1, got {settings[name]}")
    if settings["points"] < 2:
        raise PaperError(f"--points must be >= 2 (the untrained and the final snapshot), got {settings['points']}")
    if settings["balance_positions"] < 0:
        raise PaperError(f"--balance-positions must be >= 0, got {settings['balance_positions']}")
    return Plan(preset=preset, variants=chosen, **settings)


def load_or_save_plan(workdir: str, plan: Plan) -> Plan:
    """The plan of ``workdir``: saved on the first run; a rerun must ask for the same."""
    path = os.path.join(workdir, "plan.json")
    wanted = dataclasses.asdict(plan)
    wanted["variants"] = list(plan.variants)
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            saved = json.load(f)
        differing = [f"{k}: {saved.get(k)!r} there, {v!r} now" for k, v in wanted.items() if saved.get(k) != v]
        if differing:
            raise PaperError(f"{workdir} holds a reproduction with other settings ({'; '.join(differing)}); "
                             "rerun with the same options or use another --workdir")
        return plan
    os.makedirs(workdir, exist_ok=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(wanted, f, indent=1)
    os.replace(path + ".tmp", path)
    return plan


def read_plan(workdir: str) -> Plan:
    with open(os.path.join(workdir, "plan.json"), encoding="utf-8") as f:
        saved = json.load(f)
    saved["variants"] = tuple(saved["variants"])
    return Plan(**saved)


def variant_config(variant: str, preset: str):
    """``configs/VARIANT.py:PRESET`` as train.py reads it."""
    import importlib

    return importlib.import_module(f"configs.{variant}").get_config(None if preset == "paper" else preset)


# --- what a variant's workdir says -----------------------------------------------------------


def is_trained(run_dir: str, budget_games: int) -> bool:
    """The budget is spent and the last iteration's snapshot saved."""
    rows = workdir_lib.metrics_rows(run_dir)
    return bool(rows) and rows[-1]["games_finished"] >= budget_games and \
        rows[-1]["iteration"] in workdir_lib.snapshot_steps(run_dir)


def evaluation_steps(rows: list[dict], saved: list[int], budget_games: int, points: int, trained: bool) -> list[int]:
    """Snapshot steps to evaluate: 0, the first saved snapshot at or past each of the
    ``points - 2`` evenly spaced game counts between, and the final one once trained."""
    games_at = {r["iteration"]: r["games_finished"] for r in rows}
    steps = [0] if 0 in saved else []
    for k in range(1, points - 1):
        target = budget_games * k / (points - 1)
        reached = [s for s in saved if s in games_at and games_at[s] >= target]
        if reached and reached[0] not in steps:
            steps.append(reached[0])
    if trained and saved and saved[-1] not in steps:
        steps.append(saved[-1])
    return steps


def match_dir(run_dir: str, opponent_name: str, step: int) -> str:
    from az.play import report

    return os.path.join(run_dir, "eval", report._slug(opponent_name), f"step_{step}")


def match_summary(out_dir: str, games: int) -> dict | None:
    """The summary of a finished match of at least ``games`` games in ``out_dir``, else None."""
    try:
        with open(os.path.join(out_dir, "results.json"), encoding="utf-8") as f:
            saved = json.load(f)
    except (OSError, ValueError):
        return None
    summary = saved.get("summary", {})
    return summary if summary.get("games", 0) >= games else None


# --- the wall-time estimate ------------------------------------------------------------------


def iterations_needed(config, rows: list[dict]) -> int:
    """Iterations to spend ``config.budget_games``: games per iteration from the measured
    mean game length once a batch of games has finished, else the planning length."""
    positions = config.selfplay.num_games * config.selfplay.plies_per_iteration
    finished = rows[-1]["games_finished"] if rows else 0
    lengths = sum(r.get("selfplay/length_sum", 0.0) for r in rows)
    plies = lengths / finished if finished >= config.selfplay.num_games else min(PLANNING_PLIES, config.env.max_length)
    return max(1, math.ceil(config.budget_games * plies / positions))


def format_duration(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


# --- the runner ------------------------------------------------------------------------------


# Run in the child before it becomes ``python ARGS``: SIGTERM when the runner dies, however
# it dies (Linux's PR_SET_PDEATHSIG survives exec), so that training saves; then a lock on
# LOCK held for the child's life (the descriptor survives exec), so that a rerun started
# while an old child still saves waits for it. Set in the child itself: a fork hook in the
# runner would run in a process JAX may have made multithreaded.
_EXEC_WITH_PARENT = """
import ctypes, fcntl, os, signal, sys
try:
    ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGTERM)
except (OSError, AttributeError):
    pass
if os.getppid() != int(sys.argv[1]):
    sys.exit(1)  # the runner died before the line above
lock = os.open(sys.argv[2], os.O_RDWR | os.O_CREAT, 0o644)
try:
    fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
except BlockingIOError:
    print(f"waiting for an earlier process holding {sys.argv[2]} to finish", flush=True)
    fcntl.flock(lock, fcntl.LOCK_EX)
os.set_inheritable(lock, True)
os.execv(sys.executable, [sys.executable] + sys.argv[3:])
"""


def _spawn(args: list[str], log_path: str, lock_path: str, env: dict | None = None) -> subprocess.Popen:
    """``python ARGS`` holding ``lock_path``, in a session of its own (a Ctrl-C reaches the
    runner, which stops the children in order), output appended to ``log_path``."""
    with open(log_path, "a", encoding="utf-8") as log:
        return subprocess.Popen([sys.executable, "-c", _EXEC_WITH_PARENT, str(os.getpid()), lock_path, *args],
                                cwd=_REPO, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)


def _tail(path: str, lines: int = 15) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


class Runner:
    def __init__(self, workdir: str, plan: Plan, *, parallel: int | None = None, progress_seconds: float = 30.0):
        self.workdir = os.path.abspath(workdir)  # its children run in the repository, not in the caller's folder
        self.plan = plan
        self.parallel = 1 if parallel is None else parallel
        if self.parallel < 1:
            raise PaperError(f"--parallel must be >= 1, got {self.parallel}")
        self.progress_seconds = progress_seconds
        self.configs = {v: variant_config(v, plan.preset) for v in plan.variants}
        self.opponent = opponent_name(plan.opponent)
        self.children: list[subprocess.Popen] = []
        self.stopping = False
        self.estimated = False
        self.timings_path = os.path.join(workdir, "timings.json")
        self.timings = self._read_timings()

    def child_env(self) -> dict:
        if self.plan.preset != "smoke":
            return dict(os.environ)
        return dict(os.environ, XLA_FLAGS=f"{SMOKE_XLA_FLAGS} {os.environ.get('XLA_FLAGS', '')}".strip())

    def _read_timings(self) -> dict:
        try:
            with open(self.timings_path, encoding="utf-8") as f:
                return json.load(f)
        except (OSError, ValueError):
            return {}

    def set_timing(self, variant: str, seconds: float):
        """Training seconds of ``variant`` so far (over all sessions; kept in timings.json)."""
        self.timings[variant] = seconds
        with open(self.timings_path + ".tmp", "w", encoding="utf-8") as f:
            json.dump(self.timings, f)
        os.replace(self.timings_path + ".tmp", self.timings_path)

    def run_dir(self, variant: str) -> str:
        return os.path.join(self.workdir, variant)

    def trained(self, variant: str) -> bool:
        return is_trained(self.run_dir(variant), self.configs[variant].budget_games)

    def _on_signal(self, signum, frame):
        self.stopping = True
        for child in self.children:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    def run(self) -> int:
        import fcntl

        os.makedirs(self.workdir, exist_ok=True)
        lock = open(os.path.join(self.workdir, "runner.lock"), "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise PaperError(f"another reproduce.py is running in {self.workdir}") from None
        previous = {s: signal.signal(s, self._on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            return self._run()
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            for child in self.children:
                if child.poll() is None:
                    child.send_signal(signal.SIGTERM)
            for child in self.children:
                try:
                    child.wait(timeout=120)
                except subprocess.TimeoutExpired:
                    child.kill()
            lock.close()

    def _run(self) -> int:
        print(f"reproduction in {self.workdir}: {', '.join(self.plan.variants)} at preset {self.plan.preset!r}, "
              f"{self.parallel} at a time; evaluation {self.plan.points} snapshots each against "
              f"{self.plan.opponent} at {self.plan.simulations} simulations ({self.plan.games} games, "
              f"the final {self.plan.final_games})", flush=True)
        shares = device_shares(self.parallel)
        eval_env = dict(self.child_env(), JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")
        evaluator = _spawn(["-m", "az.paper", "evaluate", self.workdir], os.path.join(self.workdir, "eval.log"),
                           os.path.join(self.workdir, "eval.lock"), eval_env)
        self.children.append(evaluator)
        waiting = [v for v in self.plan.variants if not self.trained(v)]
        running: list[_Training] = []
        evaluator_warned = False
        while (waiting or running) and not self.stopping:
            while waiting and shares:
                running.append(_Training(self, waiting.pop(0), shares.pop(0)))
            time.sleep(1)
            if evaluator.poll() not in (None, 0) and not evaluator_warned:  # said now, not after hours of training
                evaluator_warned = True
                log = os.path.join(self.workdir, "eval.log")
                print(f"warning: the evaluator stopped (exit {evaluator.returncode}); training goes on, and a rerun "
                      f"evaluates what it missed. The end of {log}:\n{_tail(log)}", file=sys.stderr, flush=True)
            for training in list(running):
                training.poll()
                if training.child.poll() is None:
                    continue
                running.remove(training)
                shares.append(training.share)
                self.set_timing(training.variant, training.seconds())
                if self.stopping:
                    break
                if training.child.returncode != 0 or not self.trained(training.variant):
                    log = os.path.join(self.run_dir(training.variant), "train.log")
                    print(f"error: training {training.variant} failed (exit {training.child.returncode}); "
                          f"the end of {log}:\n{_tail(log)}", file=sys.stderr, flush=True)
                    return 1
                print(f"{training.variant}: trained in {format_duration(self.timings[training.variant])}", flush=True)
        if self.stopping:
            print("stopped: training saved; run the same command again to resume", flush=True)
            return 0
        print(f"training done; waiting for the evaluator ({self._evaluation_progress()})", flush=True)
        last_print = time.time()
        while evaluator.poll() is None and not self.stopping:
            time.sleep(2)
            if time.time() - last_print >= self.progress_seconds:
                print(f"evaluation: {self._evaluation_progress()}", flush=True)
                last_print = time.time()
        if self.stopping:
            return 0
        if evaluator.returncode != 0:
            log = os.path.join(self.workdir, "eval.log")
            print(f"error: the evaluator failed (exit {evaluator.returncode}); the end of {log}:\n{_tail(log)}",
                  file=sys.stderr, flush=True)
            return 1
        draw_figures(self.workdir, self.plan, self.timings, self.opponent)
        print(f"wrote {os.path.join(self.workdir, 'results.md')} and {os.path.join(self.workdir, 'figures')}/",
              flush=True)
        return 0

    def _estimate(self, variant: str, needed: int, per_iteration: float, startup: float) -> str:
        this = startup + needed * per_iteration
        left = [v for v in self.plan.variants if not self.trained(v)]
        rounds = math.ceil(len(left) / self.parallel)
        return (f"estimate from {variant}'s first iterations ({per_iteration:.2f} s each, {startup:.0f} s to start, "
                f"{needed} iterations for {self.configs[variant].budget_games} games): "
                f"{format_duration(this)} for it, about {format_duration(rounds * this)} for the {len(left)} "
                f"variant(s) left ({self.parallel} at a time); evaluation runs beside on the CPU")

    def _evaluation_progress(self) -> str:
        done = total = 0
        opponent = self.opponent
        for variant in self.plan.variants:
            run_dir, config = self.run_dir(variant), self.configs[variant]
            trained = self.trained(variant)
            steps = evaluation_steps(workdir_lib.metrics_rows(run_dir), workdir_lib.snapshot_steps(run_dir),
                                     config.budget_games, self.plan.points, trained)
            total += self.plan.points if not trained else len(steps)
            done += sum(match_summary(match_dir(run_dir, opponent, s), self._games(steps, s, trained)) is not None
                        for s in steps)
        return f"{done}/{total} matches"

    def _games(self, steps: list[int], step: int, trained: bool) -> int:
        return self.plan.final_games if trained and step == steps[-1] else self.plan.games


class _Training:
    """One variant's train.py, watched: its speed, progress lines and the estimate."""

    def __init__(self, runner: Runner, variant: str, share: str | None):
        self.runner, self.variant, self.share = runner, variant, share
        self.index = runner.plan.variants.index(variant)
        self.run_dir = runner.run_dir(variant)
        self.config = runner.configs[variant]
        os.makedirs(self.run_dir, exist_ok=True)
        shared_cache = os.path.join(self.run_dir, "jax_cache")
        if not os.path.lexists(shared_cache):  # one cache for all variants: their common programs compile once
            os.symlink(os.path.join("..", "jax_cache"), shared_cache)
        preset = "" if runner.plan.preset == "paper" else f":{runner.plan.preset}"
        env = runner.child_env() if share is None else dict(runner.child_env(), CUDA_VISIBLE_DEVICES=share)
        self.started = time.time()
        self.earlier_seconds = runner.timings.get(variant, 0.0)  # of sessions before this one
        self.start_iteration = (workdir_lib.metrics_rows(self.run_dir) or [{"iteration": 0}])[-1]["iteration"]
        self.child = _spawn(["train.py", f"--config=configs/{variant}.py{preset}", f"--workdir={self.run_dir}"],
                            os.path.join(self.run_dir, "train.log"), os.path.join(self.run_dir, "train.lock"), env)
        runner.children.append(self.child)
        # The speed is measured from the first iteration after the one-off costs (the
        # compile, and the teacher probe's build at its first measurement).
        every = self.config.teacher.every_iterations
        self.steady_after = (self.start_iteration // every + 1) * every if every > 0 else self.start_iteration + 1
        self.window: tuple[float, int] | None = None
        self.last_print = time.time()

    def seconds(self) -> float:
        return self.earlier_seconds + time.time() - self.started

    def poll(self):
        rows = workdir_lib.metrics_rows(self.run_dir)
        runner = self.runner
        if not rows or rows[-1]["iteration"] < self.steady_after:
            if time.time() - self.last_print >= runner.progress_seconds:
                self.last_print = time.time()
                done = f"iteration {rows[-1]['iteration']}" if rows else "compiling"
                print(f"[{self.index + 1}/{len(runner.plan.variants)} {self.variant}] starting ({done}), "
                      f"{time.time() - self.started:.0f} s | evaluation: {runner._evaluation_progress()}", flush=True)
            return
        if self.window is None:
            self.window = (time.time(), rows[-1]["iteration"])
            return
        measured = rows[-1]["iteration"] - self.window[1]
        if measured < 3:
            return
        per_iteration = (time.time() - self.window[0]) / measured
        needed = iterations_needed(self.config, rows)
        left = max(0, needed - rows[-1]["iteration"]) * per_iteration
        if not runner.estimated:  # the first measured speed: the whole reproduction's time
            runner.estimated = True
            startup = self.window[0] - self.started - (self.window[1] - self.start_iteration - 1) * per_iteration
            print(runner._estimate(self.variant, needed, per_iteration, max(0.0, startup)), flush=True)
        if time.time() - self.last_print >= runner.progress_seconds:
            self.last_print = time.time()
            runner.set_timing(self.variant, self.seconds())
            row = rows[-1]
            loss = f"{row['loss']:.3f}" if row.get("learned") else "-"
            print(f"[{self.index + 1}/{len(runner.plan.variants)} {self.variant}] iteration {row['iteration']}, "
                  f"{min(row['games_finished'], self.config.budget_games)}/{self.config.budget_games} games, "
                  f"{row['positions_per_second']:,.0f} positions/s, loss {loss}; {format_duration(left)} left of "
                  f"this variant | evaluation: {runner._evaluation_progress()}", flush=True)


def device_shares(parallel: int) -> list[str | None]:
    """What each of ``parallel`` side-by-side trainings may use: ``CUDA_VISIBLE_DEVICES``
    values splitting the GPUs evenly, or None (everything: one at a time, or the CPU,
    which the processes share). Asked of JAX in a process of its own, so that this one
    never holds an accelerator."""
    if parallel == 1:
        return [None]
    probe = subprocess.run([sys.executable, "-c", "import jax; print(jax.default_backend(), jax.device_count())"],
                           capture_output=True, text=True, timeout=300)
    try:
        backend, count = probe.stdout.split()[-2], int(probe.stdout.split()[-1])
    except (IndexError, ValueError):
        raise PaperError(f"--parallel {parallel}: could not ask JAX for the devices: {_last_line(probe.stderr)}") from None
    if backend == "cpu":
        return [None] * parallel
    if backend != "gpu":
        raise PaperError(f"--parallel {parallel}: side by side needs GPUs or the CPU, not {backend} "
                         "(on TPUs run one variant at a time, or one reproduction per TPU VM with --variants)")
    if count % parallel:
        raise PaperError(f"--parallel {parallel}: {count} GPU(s) do not split evenly")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",") if visible else [str(i) for i in range(count)]
    size = count // parallel
    return [",".join(ids[i * size:(i + 1) * size]) for i in range(parallel)]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"


def opponent_name(spec: str) -> str:
    """The reference's name as matches record it; PaperError for a player that cannot
    start (a missing engine binary, a bad option)."""
    import jax

    jax.config.update("jax_platforms", "cpu")  # this process never holds the trainers' accelerator
    from az.play import players as players_lib

    try:
        player = players_lib.parse_player(spec, num_simulations=1, seed=1)
    except ValueError as e:  # PlayerError, AgentError: one line naming the culprit
        raise PaperError(f"--opponent {spec!r}: {e}") from None
    player.close()
    return player.name


# --- the evaluator (a process of its own, on the CPU) ----------------------------------------


def evaluate(workdir: str, *, poll_seconds: float = 5.0) -> int:
    """Plays each variant's chosen snapshots as they appear until all variants are trained
    and evaluated; first the start sets' balance (Table 2). Returns the exit status."""
    from az.play import match as match_lib
    from az.play import players as players_lib
    from az.play.usi_client import EngineFailure

    plan = read_plan(workdir)
    workdir_lib.enable_compilation_cache(os.path.join(workdir, "jax_cache"))
    configs = {v: variant_config(v, plan.preset) for v in plan.variants}
    # SIGTERM (the runner stopping or gone) ends this process at once: results are written
    # game by game, and the engines quit when their input closes.
    try:
        if plan.opponent.startswith("usi:"):
            balance(workdir, plan)
        openings = match_lib.load_openings(os.path.join(_REPO, OPENINGS))
        second = players_lib.parse_player(plan.opponent, num_simulations=plan.simulations,
                                          slots=plan.concurrency, seed=1)
    except (ValueError, EngineFailure) as e:
        print(f"error: {e}", flush=True)
        return 1
    try:
        while True:
            pending, all_trained = [], True
            for variant in plan.variants:
                run_dir = os.path.join(workdir, variant)
                trained = is_trained(run_dir, configs[variant].budget_games)
                all_trained &= trained
                steps = evaluation_steps(workdir_lib.metrics_rows(run_dir), workdir_lib.snapshot_steps(run_dir),
                                         configs[variant].budget_games, plan.points, trained)
                for step in steps:
                    games = plan.final_games if trained and step == steps[-1] else plan.games
                    if match_summary(match_dir(run_dir, second.name, step), games) is None:
                        pending.append((variant, run_dir, step, games))
            if not pending:
                if all_trained:
                    return 0
                time.sleep(poll_seconds)
                continue
            variant, run_dir, step, games = pending[0]
            started = time.time()
            first = players_lib.parse_player(f"checkpoint:{run_dir}@{step}", num_simulations=plan.simulations,
                                             slots=plan.concurrency)
            try:
                summary = match_lib.Match(first, second, openings, match_dir(run_dir, second.name, step),
                                          games=games, concurrency=plan.concurrency, resume=True,
                                          progress=False).run()
            finally:
                first.close()
            line = match_lib.format_summary(first.name, second.name, summary).splitlines()[0]
            print(f"{variant}@{step}: {line} [{time.time() - started:.0f} s, {len(pending) - 1} known left]",
                  flush=True)
    except (ValueError, EngineFailure) as e:
        print(f"error: {e}", flush=True)
        return 1
    finally:
        second.close()


def balance(workdir: str, plan: Plan) -> dict:
    """Black's advantage by the reference engine over the start sets (Table 2), kept in
    balance.json; empty with ``balance_positions`` 0."""
    from az.play import report

    path = os.path.join(workdir, "balance.json")
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    values = {}
    if plan.balance_positions:
        for start in BALANCE_STARTS:
            sfens = report.start_positions(start, plan.balance_positions)
            if len(sfens) > plan.balance_positions:  # random_start(2) lists all 900: an even sample
                sfens = sfens[:: len(sfens) // plan.balance_positions][: plan.balance_positions]
            started = time.time()
            values[start] = report.engine_scores(sfens, plan.opponent, jobs=plan.concurrency)
            print(f"balance: {start}, {len(sfens)} positions [{time.time() - started:.0f} s]", flush=True)
    with open(path + ".tmp", "w", encoding="utf-8") as f:
        json.dump(values, f)
    os.replace(path + ".tmp", path)
    return values


# --- the figures and the table ---------------------------------------------------------------


def draw_figures(workdir: str, plan: Plan, timings: dict, opponent: str) -> dict:
    """Figs. 2-4, the heatmaps, results.md and results.json from the finished runs."""
    from az.play import report

    figures = os.path.join(workdir, "figures")
    os.makedirs(figures, exist_ok=True)
    curves, finals, rows_of = {}, {}, {}
    for variant in plan.variants:
        run_dir = os.path.join(workdir, variant)
        config = variant_config(variant, plan.preset)
        rows = workdir_lib.metrics_rows(run_dir)
        rows_of[variant] = rows
        games_at = {r["iteration"]: r["games_finished"] for r in rows}
        steps = evaluation_steps(rows, workdir_lib.snapshot_steps(run_dir), config.budget_games, plan.points, True)
        points = []
        for step in steps:
            games = plan.final_games if step == steps[-1] else plan.games
            s = match_summary(match_dir(run_dir, opponent, step), games)
            if s is None:
                raise PaperError(f"{variant}@{step}: its match against {opponent} is not finished; run again")
            points.append((games_at.get(step, 0), s["elo"], s["elo_low"], s["elo_high"], s["score"], step))
        curves[variant] = points
        finals[variant] = match_summary(match_dir(run_dir, opponent, steps[-1]), plan.final_games)
    # Labelled without " vs ": plot_elo_curve colours curves by opponent, and here all have one.
    report.plot_elo_curve({f"{v} against {opponent}": p for v, p in curves.items()},
                          os.path.join(figures, "fig2_elo.png"))
    run_dirs = [os.path.join(workdir, v) for v in plan.variants]
    teacher_drawn = any("teacher/top1" in r for rows in rows_of.values() for r in rows)
    if teacher_drawn:
        report.plot_teacher_curve(run_dirs, os.path.join(figures, "fig2_teacher.png"))
    plot_openings_by_variant(finals, os.path.join(figures, "fig3_openings.png"), opponent=opponent)
    report.plot_heatmaps(run_dirs, os.path.join(figures, "heatmaps.png"))
    balance_values = balance(workdir, plan) if plan.opponent.startswith("usi:") else {}
    table2 = report.plot_balance(balance_values, os.path.join(figures, "fig4_balance.png"), unit="cp") \
        if balance_values else {}
    results = {"plan": dataclasses.asdict(plan), "opponent": opponent, "table2": table2, "variants": {}}
    for variant in plan.variants:
        rows, s = rows_of[variant], finals[variant]
        teacher = [r for r in rows if "teacher/top1" in r]
        results["variants"][variant] = {
            "iterations": rows[-1]["iteration"], "games": rows[-1]["games_finished"],
            "training_seconds": timings.get(variant), "final": {k: s[k] for k in (
                "games", "wins", "draws", "losses", "score", "elo", "elo_low", "elo_high")},
            "teacher_top1": teacher[-1]["teacher/top1"] if teacher else None, "curve": curves[variant],
        }
    with open(os.path.join(workdir, "results.json"), "w", encoding="utf-8") as f:
        json.dump(results, f, indent=1)
    with open(os.path.join(workdir, "results.md"), "w", encoding="utf-8") as f:
        f.write(results_markdown(results, teacher_drawn))
    return results


def results_markdown(results: dict, teacher: bool) -> str:
    plan = results["plan"]
    lines = [f"# Reproduction at preset `{plan['preset']}`", "",
             f"Final snapshots against {results['opponent']} at {plan['simulations']} simulations, "
             f"{plan['final_games']} games from `{OPENINGS}` (both colours):", "",
             "| variant | iterations | games | training time | +W =D -L | score | Elo [95%] | teacher top-1 |",
             "|---|---|---|---|---|---|---|---|"]
    for variant, r in results["variants"].items():
        f = r["final"]
        seconds = r["training_seconds"]
        top1 = f"{100 * r['teacher_top1']:.1f}%" if r["teacher_top1"] is not None else "-"
        lines.append(f"| {variant} | {r['iterations']} | {r['games']} | "
                     f"{format_duration(seconds) if seconds is not None else '-'} | "
                     f"+{f['wins']} ={f['draws']} -{f['losses']} | {f['score']:.3f} | "
                     f"{f['elo']:+.0f} [{f['elo_low']:+.0f}, {f['elo_high']:+.0f}] | {top1} |")
    if results["table2"]:
        lines += ["", "## Table 2: black's advantage over the start sets (cp, by the reference engine)", "",
                  "| start set | positions | mean | std |", "|---|---|---|---|"]
        for start, row in results["table2"].items():
            lines.append(f"| `{start}` | {row['positions']} | {row['mean']:+.1f} | {row['std']:.1f} |")
    lines += ["", "![Fig. 2](figures/fig2_elo.png)"]
    if teacher:
        lines.append("![teacher agreement](figures/fig2_teacher.png)")
    lines += ["![Fig. 3](figures/fig3_openings.png)"]
    if results["table2"]:
        lines.append("![Fig. 4](figures/fig4_balance.png)")
    lines.append("![Figs. 6-8](figures/heatmaps.png)")
    return "\n".join(lines) + "\n"


def plot_openings_by_variant(finals: dict, path: str, *, opponent: str) -> None:
    """The final snapshots' score per opening, one bar per variant (Fig. 3)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import numpy as np

    openings = list(dict.fromkeys(name for s in finals.values() for name in s["openings"]))
    height = 0.8 / max(1, len(finals))
    fig, ax = plt.subplots(figsize=(8, 0.5 * len(openings) * max(1, len(finals)) ** 0.5 + 1.5))
    for i, (variant, s) in enumerate(finals.items()):
        scores = [s["openings"].get(name, {}).get("score", np.nan) for name in openings]
        rows = np.arange(len(openings)) + i * height
        ax.barh(rows, scores, height=height, label=f"{variant} ({s['score']:.2f})")
        for row, name, score in zip(rows, openings, scores):
            if name in s["openings"]:  # the results, so that a score of 0 shows too
                o = s["openings"][name]
                ax.text(min(score, 0.9) + 0.01, row, f"+{o['wins']} ={o['draws']} -{o['losses']}", va="center",
                        fontsize=6)
    ax.set_yticks(np.arange(len(openings)) + 0.4 - height / 2, openings, fontsize=8)
    ax.axvline(0.5, color="gray", lw=1, ls="--")
    ax.set_xlim(0, 1)
    ax.invert_yaxis()
    ax.set_xlabel(f"score against {opponent} (final snapshots)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> int:
    """``python -m az.paper evaluate WORKDIR``: the runner's evaluator process."""
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) != 2 or argv[0] != "evaluate":
        print("usage: python -m az.paper evaluate WORKDIR (started by reproduce.py)", file=sys.stderr)
        return 2
    return evaluate(argv[1])


if __name__ == "__main__":
    sys.exit(main())
