"""The host side of training: set-up, resume, progress, metrics, checkpoints, signals.

``train(config, workdir)`` runs until the game budget is spent (or ``max_iterations``),
resuming from the workdir's latest checkpoint when there is one. With ``budget_minutes``
the game budget is what that much wall time holds, measured once (az/train/budget.py).
"""

import contextlib
import math
import os
import signal
import sys
import time

import jax
import ml_collections
from tqdm import tqdm

from az import workdir as workdir_lib
from az.train import budget as budget_lib
from az.train import checkpoint as checkpoint_lib
from az.train import config as config_lib
from az.train import metrics as metrics_lib
from az.train import trainer as trainer_lib


class NonFiniteLoss(RuntimeError):
    pass


def _log(msg: str):
    if jax.process_index() == 0:
        print(msg, flush=True)


def train(config: ml_collections.ConfigDict, workdir: str, *, max_iterations: int | None = None,
          budget_minutes: float | None = None) -> dict:
    """Trains (or resumes) and returns the last iteration's host metrics. ``budget_minutes``:
    the game budget is what that much wall time, from this call on, holds (recorded in the
    workdir at the start; a resumed run keeps it).

    With ``config.distributed``, ``az.distributed.initialize`` must have run first.
    """
    started = time.time()
    if budget_minutes is not None and not budget_minutes > 0:
        raise config_lib.ConfigError(f"--budget_minutes={budget_minutes:g}: must be > 0")
    os.makedirs(workdir, exist_ok=True)
    workdir_lib.enable_compilation_cache(os.path.join(workdir, "jax_cache"))
    mesh = trainer_lib.make_mesh(config)
    config = budget_lib.with_recorded(config, workdir, budget_minutes)
    config_lib.validate(config, mesh.size)
    _log(f"devices: {mesh.size} x {jax.devices()[0].platform} ({jax.process_count()} process(es))")
    _log(f"config:\n{config}")

    trainer = trainer_lib.make_trainer(config, mesh)
    checkpointer = checkpoint_lib.Checkpointer(workdir, keep=config.checkpoint.keep)
    if budget_minutes is not None and budget_lib.recorded(workdir) is None:
        if checkpointer.latest_step() is not None:
            raise config_lib.ConfigError(f"--budget_minutes={budget_minutes:g}: the run in {workdir} started with "
                                         f"a budget of {config.budget_games} games; resume it without the flag")
        trainer = budget_lib.fit(trainer, workdir, budget_minutes, started)
        config = trainer.config
    state, step = _start(config, trainer, checkpointer)
    if jax.process_index() == 0:
        with open(os.path.join(workdir, "config.json"), "w", encoding="utf-8") as f:
            f.write(config.to_json(indent=2))
    progress = _Progress(config.budget_games, int(metrics_lib.to_host(state.games_finished)))
    writers = metrics_lib.Writers(workdir)
    metrics = {}
    last_saved = step
    try:
        with _StopOnSigterm() as stop:
            while progress.games_done < config.budget_games and not stop.requested:
                if max_iterations is not None and step >= max_iterations:
                    break
                state, metrics = _iterate(config, trainer, state, step + 1)
                step += 1
                if metrics["learned"] and not math.isfinite(metrics["loss"]):
                    raise NonFiniteLoss(
                        f"non-finite loss ({metrics['loss']}) at iteration {step}; "
                        f"the last good checkpoint (iteration {last_saved}) is kept in {checkpointer.directory}"
                    )
                writers.write(step, metrics)
                progress.update(step, metrics)
                if step % config.checkpoint.every_iterations == 0:
                    checkpointer.save(step, state, config)
                    last_saved = step
            if step != last_saved:
                checkpointer.save(step, state, config)
                last_saved = step
            if stop.requested:
                _log(f"SIGTERM: saved iteration {step} to {checkpointer.directory}; run again to resume")
    finally:
        progress.close()
        writers.close()
        checkpointer.close()
    return metrics


def _start(config: ml_collections.ConfigDict, trainer: trainer_lib.Trainer,
           checkpointer: checkpoint_lib.Checkpointer) -> tuple[trainer_lib.TrainState, int]:
    """(state, iterations done): the workdir's latest checkpoint, or a fresh state saved
    as iteration 0 (the untrained network, a baseline for evaluation)."""
    step = checkpointer.latest_step()
    if step is not None:
        state = checkpointer.restore(config, trainer.abstract_state, step)
        _log(f"resumed from {checkpointer.directory} at iteration {step}")
        return state, step
    state = trainer.init()
    checkpointer.save(0, state, config)
    return state, 0


@contextlib.contextmanager
def transfer_guard(compiled: bool):
    """No transfer between host and device inside an iteration. A first call also compiles,
    and lowering reads the arrays the program closes over (pgx's tables) back from an
    accelerator, so until ``compiled`` reads to the host pass; every later call runs the
    same program and is checked whole."""
    with jax.transfer_guard("disallow"):
        if compiled:
            yield
        else:
            with jax.transfer_guard_device_to_host("allow"):
                yield


def _iterate(config: ml_collections.ConfigDict, trainer: trainer_lib.Trainer, state: trainer_lib.TrainState,
             step: int) -> tuple[trainer_lib.TrainState, dict]:
    """Iteration ``step`` (counted from 1) and its host metrics, with the teacher
    agreement when due and the rates of the iteration's wall time."""
    start = time.time()
    with transfer_guard(compiled=trainer.iteration.compiled):
        state, device_metrics = trainer.iteration(state)
    metrics = metrics_lib.host_metrics(metrics_lib.to_host(device_metrics), trainer.scheme_names)
    seconds = time.time() - start
    if trainer.teacher is not None and step % config.teacher.every_iterations == 0:
        measured = time.time()  # timed apart from the iteration: its cost is reported
        metrics.update({k: float(v) for k, v in metrics_lib.to_host(trainer.teacher(state)).items()})
        metrics["teacher/seconds"] = time.time() - measured
    metrics["seconds"] = seconds
    metrics["positions_per_second"] = config.selfplay.num_games * config.selfplay.plies_per_iteration / seconds
    # Positions of the games that ended this iteration (each now has a value target).
    metrics["useful_positions_per_second"] = metrics["selfplay/length_sum"] / seconds
    peak = (jax.local_devices()[0].memory_stats() or {}).get("peak_bytes_in_use")
    if peak is not None:  # GPUs and TPUs report it; the CPU does not
        metrics["device/peak_gib"] = peak / 2**30
    return state, metrics


class _Progress:
    """The progress bar over the game budget (process 0 only), and the games done."""

    def __init__(self, budget_games: int, games_done: int):
        self.budget_games, self.games_done = budget_games, games_done
        self._bar = tqdm(
            total=budget_games,
            initial=min(games_done, budget_games),
            unit="game",
            disable=jax.process_index() != 0,
            file=sys.stdout,
            dynamic_ncols=True,
        )

    def update(self, step: int, metrics: dict):
        self._bar.update(min(metrics["games_finished"], self.budget_games) - self._bar.n)
        self._bar.set_postfix(
            it=step,
            pos_s=f"{metrics['positions_per_second']:.0f}",
            loss=f"{metrics['loss']:.3f}" if metrics["learned"] else "-",
            refresh=False,
        )
        self.games_done = metrics["games_finished"]

    def close(self):
        self._bar.close()


class _StopOnSigterm:
    """Within it, SIGTERM (a TPU preemption) only sets ``requested``: the loop finishes
    its iteration, saves and exits. The previous handler comes back on leaving."""

    def __enter__(self):
        self.requested = False
        self._previous = signal.signal(signal.SIGTERM, self._on_sigterm)
        return self

    def _on_sigterm(self, signum, frame):
        self.requested = True

    def __exit__(self, *exc):
        signal.signal(signal.SIGTERM, self._previous)
        return False
