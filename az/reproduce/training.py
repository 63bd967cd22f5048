"""One variant's ``train.py`` as the runner starts and watches it, and how side-by-side
trainings share the devices."""

import os
import subprocess
import sys
import time

from az import workdir as workdir_lib
from az.reproduce import durations
from az.reproduce.plan import ReproductionError


class Training:
    """One variant's train.py, watched: its speed, progress lines and the estimate."""

    def __init__(self, runner, variant: str, share: str | None):
        self.runner, self.variant, self.share = runner, variant, share
        self.index = runner.plan.variants.index(variant)
        self.run_dir = runner.run_dir(variant)
        self.config = runner.configs[variant]
        self.started = time.time()
        self.earlier_seconds = runner.timings.get(variant, 0.0)  # of the runner's earlier starts
        self.start_iteration = (workdir_lib.metrics_rows(self.run_dir) or [{"iteration": 0}])[-1]["iteration"]
        self.child = spawn_train(runner, variant, self.run_dir, share)
        # The speed is measured from the first iteration after the one-off costs (the
        # compile, and the teacher probe's build at its first measurement).
        every = self.config.teacher.every_iterations
        self.steady_after = (self.start_iteration // every + 1) * every if every > 0 else self.start_iteration + 1
        self.window: tuple[float, int] | None = None  # (time, iteration) where the speed's measure starts
        self.last_print = time.time()

    def seconds(self) -> float:
        return self.earlier_seconds + time.time() - self.started

    def _due(self) -> bool:
        """A progress line is due (and counted as printed)."""
        if time.time() - self.last_print < self.runner.progress_seconds:
            return False
        self.last_print = time.time()
        return True

    def _label(self) -> str:
        return f"[{self.index + 1}/{len(self.runner.plan.variants)} {self.variant}]"

    def poll(self) -> None:
        """Reads the run's metrics: prints the estimate once the speed is measured, and a
        progress line every ``progress_seconds``."""
        rows = workdir_lib.metrics_rows(self.run_dir)
        runner = self.runner
        if not rows or rows[-1]["iteration"] < self.steady_after:
            if self._due():
                done = f"iteration {rows[-1]['iteration']}" if rows else "compiling"
                print(f"{self._label()} starting ({done}), {time.time() - self.started:.0f} s | "
                      f"evaluation: {runner.evaluation_progress()}", flush=True)
            return
        if self.window is None:
            self.window = (time.time(), rows[-1]["iteration"])
            return
        measured = rows[-1]["iteration"] - self.window[1]
        if measured < 3:
            return
        per_iteration = (time.time() - self.window[0]) / measured
        needed = durations.iterations_needed(self.config, rows)
        if not runner.estimated:  # the first measured speed: the whole reproduction's time
            runner.estimated = True
            startup = self.window[0] - self.started - (self.window[1] - self.start_iteration - 1) * per_iteration
            print(runner.estimate(self.variant, needed, per_iteration, max(0.0, startup)), flush=True)
        if self._due():
            runner.timings.set(self.variant, self.seconds())
            self._print_progress(rows[-1], max(0, needed - rows[-1]["iteration"]) * per_iteration)

    def _print_progress(self, row: dict, seconds_left: float) -> None:
        budget = self.config.budget_games
        loss = f"{row['loss']:.3f}" if row.get("learned") else "-"
        print(f"{self._label()} iteration {row['iteration']}, {min(row['games_finished'], budget)}/{budget} games, "
              f"{row['positions_per_second']:,.0f} positions/s, loss {loss}; {durations.format_duration(seconds_left)} "
              f"left of this variant | evaluation: {self.runner.evaluation_progress()}", flush=True)


def spawn_train(runner, variant: str, run_dir: str, share: str | None, *extra_args: str, extra_env=None):
    """``train.py`` of ``variant`` at the plan's preset in ``run_dir`` (which reaches the
    workdir's shared compilation cache), on the devices of ``share``; output in its train.log."""
    os.makedirs(run_dir, exist_ok=True)
    shared_cache = os.path.join(run_dir, "jax_cache")
    if not os.path.lexists(shared_cache):  # one cache for all variants: their common programs compile once
        os.symlink(os.path.relpath(os.path.join(runner.workdir, "jax_cache"), run_dir), shared_cache)
    preset = "" if runner.plan.preset == "paper" else f":{runner.plan.preset}"
    env = runner.child_env() if share is None else dict(runner.child_env(), CUDA_VISIBLE_DEVICES=share)
    env.update(extra_env or {})
    return runner.children.spawn(
        ["train.py", f"--config=configs/{variant}.py{preset}", f"--workdir={run_dir}", *extra_args],
        os.path.join(run_dir, "train.log"), os.path.join(run_dir, "train.lock"), env)


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
        raise ReproductionError(
            f"--parallel {parallel}: could not ask JAX for the devices: {_last_line(probe.stderr)}") from None
    if backend == "cpu":
        return [None] * parallel
    if backend != "gpu":
        raise ReproductionError(f"--parallel {parallel}: side by side needs GPUs or the CPU, not {backend} "
                                "(on TPUs run one variant at a time, or one reproduction per TPU VM with --variants)")
    if count % parallel:
        raise ReproductionError(f"--parallel {parallel}: {count} GPU(s) do not split evenly")
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    ids = visible.split(",") if visible else [str(i) for i in range(count)]
    size = count // parallel
    return [",".join(ids[i * size:(i + 1) * size]) for i in range(parallel)]


def _last_line(text: str) -> str:
    lines = [line for line in text.strip().splitlines() if line.strip()]
    return lines[-1] if lines else "no output"
