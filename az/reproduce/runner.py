"""The runner: trains the variants (``parallel`` at a time), keeps the evaluator process
beside them, and draws the figures once both are done. One runner per workdir at a time."""

import fcntl
import functools
import os
import signal
import sys
import time

from az.reproduce import durations, figures, probe, progress
from az.reproduce.children import Children, tail
from az.reproduce.plan import (SMOKE_XLA_FLAGS, Plan, ReproductionError, load_or_save_plan, make_plan, opponent_name,
                               variant_config)
from az.reproduce.training import Training, device_shares


class Runner:
    """One reproduction in ``workdir``: its plan, the variants' configs, the children it
    started (``children``) and the training seconds so far (``timings``)."""

    def __init__(self, workdir: str, plan: Plan, *, parallel: int | None = None, progress_seconds: float = 30.0):
        self.workdir = os.path.abspath(workdir)  # its children run in the repository, not in the caller's folder
        self.plan = plan
        self.parallel = 1 if parallel is None else parallel
        if self.parallel < 1:
            raise ReproductionError(f"--parallel must be >= 1, got {self.parallel}")
        self.progress_seconds = progress_seconds
        self.configs = {v: variant_config(v, plan.preset) for v in plan.variants}
        self.opponent = opponent_name(plan.opponent)
        self.children = Children()
        self.estimated = False  # the whole reproduction's time is printed once
        self.timings = durations.Timings(os.path.join(workdir, "timings.json"))

    @functools.cached_property
    def shares(self) -> list[str | None]:
        """What each side-by-side training may use (``device_shares``), asked once."""
        return device_shares(self.parallel)

    def evaluator_env(self) -> dict:
        """The evaluator's (and its probe's): the CPU, whatever the trainers use."""
        return dict(self.child_env(), JAX_PLATFORMS="cpu", CUDA_VISIBLE_DEVICES="")

    def child_env(self) -> dict:
        if self.plan.preset != "smoke":
            return dict(os.environ)
        return dict(os.environ, XLA_FLAGS=f"{SMOKE_XLA_FLAGS} {os.environ.get('XLA_FLAGS', '')}".strip())

    def run_dir(self, variant: str) -> str:
        return os.path.join(self.workdir, variant)

    def trained(self, variant: str) -> bool:
        return progress.is_trained(self.run_dir(variant), self.configs[variant].budget_games)

    def evaluation_progress(self) -> str:
        return progress.evaluation_progress(self.workdir, self.plan, self.configs, self.opponent)

    def estimate(self, variant: str, needed: int, per_iteration: float, startup: float) -> str:
        left = [v for v in self.plan.variants if not self.trained(v)]
        return durations.estimate_line(variant, needed=needed, per_iteration=per_iteration, startup=startup,
                                       budget_games=self.configs[variant].budget_games, variants_left=len(left),
                                       parallel=self.parallel)

    def run(self, *, estimate_only: bool = False) -> int:
        """The whole reproduction (or with ``estimate_only`` its estimate), or as much as a
        signal lets it do; the exit status."""
        os.makedirs(self.workdir, exist_ok=True)
        lock = open(os.path.join(self.workdir, "runner.lock"), "w")
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            lock.close()
            raise ReproductionError(f"another reproduce.py is running in {self.workdir}") from None
        previous = {s: signal.signal(s, self.children.on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
        try:
            return self._run(estimate_only)
        finally:
            for s, handler in previous.items():
                signal.signal(s, handler)
            self.children.stop()
            lock.close()

    def _run(self, estimate_only: bool) -> int:
        plan = self.plan
        print(f"reproduction in {self.workdir}: {', '.join(plan.variants)} at preset {plan.preset!r}, "
              f"{self.parallel} at a time; evaluation {plan.points} snapshots each against "
              f"{plan.opponent} at {plan.simulations} simulations ({plan.games} games, "
              f"the final {plan.final_games})", flush=True)
        if not probe.estimate_run(self) or estimate_only:
            return 0
        evaluator = self.children.spawn(["-m", "az.reproduce.evaluator", self.workdir],
                                        os.path.join(self.workdir, "eval.log"),
                                        os.path.join(self.workdir, "eval.lock"), self.evaluator_env())
        if not self._train_all(evaluator):
            return 1
        if self.children.stopping:
            print("stopped: training saved; run the same command again to resume", flush=True)
            return 0
        print(f"training done; waiting for the evaluator ({self.evaluation_progress()})", flush=True)
        if not self._await_evaluator(evaluator):
            return 1
        if self.children.stopping:
            return 0
        figures.draw_figures(self.workdir, plan, self.timings.seconds, self.opponent)
        print(f"wrote {os.path.join(self.workdir, 'results.md')} and {os.path.join(self.workdir, 'figures')}/",
              flush=True)
        return 0

    def _train_all(self, evaluator) -> bool:
        """Trains the variants not yet trained, ``parallel`` at a time, until all are or a
        signal stops the runner; False when one fails."""
        shares = list(self.shares)
        waiting = [v for v in self.plan.variants if not self.trained(v)]
        running: list[Training] = []
        evaluator_warned = False
        while (waiting or running) and not self.children.stopping:
            while waiting and shares:
                running.append(Training(self, waiting.pop(0), shares.pop(0)))
            time.sleep(1)
            if evaluator.poll() not in (None, 0) and not evaluator_warned:  # said now, not after hours of training
                evaluator_warned = True
                log = os.path.join(self.workdir, "eval.log")
                print(f"warning: the evaluator stopped (exit {evaluator.returncode}); training goes on, and a rerun "
                      f"evaluates what it missed. The end of {log}:\n{tail(log)}", file=sys.stderr, flush=True)
            for training in list(running):
                training.poll()
                if training.child.poll() is None:
                    continue
                running.remove(training)
                shares.append(training.share)
                self.timings.set(training.variant, training.seconds())
                if self.children.stopping:
                    break
                if not self._finished(training):
                    return False
        return True

    def _finished(self, training: Training) -> bool:
        """Says how a training that exited went: True when trained, else False and its log's end."""
        variant, child = training.variant, training.child
        if child.returncode != 0 or not self.trained(variant):
            log = os.path.join(self.run_dir(variant), "train.log")
            print(f"error: training {variant} failed (exit {child.returncode}); the end of {log}:\n{tail(log)}",
                  file=sys.stderr, flush=True)
            return False
        print(f"{variant}: trained in {durations.format_duration(self.timings.get(variant))}", flush=True)
        return True

    def _await_evaluator(self, evaluator) -> bool:
        """Waits for the evaluator, printing its progress; False when it failed."""
        last_print = time.time()
        while evaluator.poll() is None and not self.children.stopping:
            time.sleep(2)
            if time.time() - last_print >= self.progress_seconds:
                print(f"evaluation: {self.evaluation_progress()}", flush=True)
                last_print = time.time()
        if self.children.stopping or evaluator.returncode == 0:
            return True
        log = os.path.join(self.workdir, "eval.log")
        print(f"error: the evaluator failed (exit {evaluator.returncode}); the end of {log}:\n{tail(log)}",
              file=sys.stderr, flush=True)
        return False


def run_reproduction(workdir: str, preset: str, *, parallel: int | None = None, estimate_only: bool = False,
                     **plan_options) -> int:
    """``reproduce.py``: the plan of ``preset`` with ``plan_options`` (make_plan's), run in
    ``workdir`` (or with ``estimate_only`` its estimate, which leaves no plan.json); the
    exit status. ReproductionError for a bad option or a run that cannot go on."""
    plan = make_plan(preset, **plan_options)
    runner = Runner(workdir, plan, parallel=parallel)  # checks the opponent starts
    load_or_save_plan(workdir, plan, save=not estimate_only)
    return runner.run(estimate_only=estimate_only)
