"""The host side of training: set-up, resume, progress, metrics, checkpoints, signals.

``train(config, workdir)`` runs until the game budget is spent (or ``max_iterations``),
resuming from the workdir's latest checkpoint when there is one.
"""

import math
import os
import signal
import sys
import time

import jax
import ml_collections
from tqdm import tqdm

from az import workdir as workdir_lib
from az.train import checkpoint as checkpoint_lib
from az.train import config as config_lib
from az.train import metrics as metrics_lib
from az.train import trainer as trainer_lib


class NonFiniteLoss(RuntimeError):
    pass


def _log(msg: str):
    if jax.process_index() == 0:
        print(msg, flush=True)


def train(config: ml_collections.ConfigDict, workdir: str, *, max_iterations: int | None = None) -> dict:
    """Trains (or resumes) and returns the last iteration's host metrics.

    With ``config.distributed``, ``az.distributed.initialize`` must have run first.
    """
    os.makedirs(workdir, exist_ok=True)
    workdir_lib.enable_compilation_cache(os.path.join(workdir, "jax_cache"))
    mesh = trainer_lib.make_mesh()
    config_lib.validate(config, mesh.size)
    _log(f"devices: {mesh.size} x {jax.devices()[0].platform} ({jax.process_count()} process(es))")
    _log(f"config:\n{config}")

    trainer = trainer_lib.make_trainer(config, mesh)
    checkpointer = checkpoint_lib.Checkpointer(workdir, keep=config.checkpoint.keep)
    step = checkpointer.latest_step()
    if step is not None:
        state = checkpointer.restore(config, trainer.abstract_state, step)
        _log(f"resumed from {checkpointer.directory} at iteration {step}")
    else:
        state = trainer.init()
        step = 0
        checkpointer.save(0, state, config)  # the untrained network, a baseline for evaluation
    if jax.process_index() == 0:
        with open(os.path.join(workdir, "config.json"), "w", encoding="utf-8") as f:
            f.write(config.to_json(indent=2))

    stop_requested = []

    def on_sigterm(signum, frame):  # TPU preemption: finish the iteration, save, exit
        stop_requested.append(signum)

    previous_handler = signal.signal(signal.SIGTERM, on_sigterm)
    writers = metrics_lib.Writers(workdir)
    games_done = int(metrics_lib.to_host(state.games_finished))
    bar = tqdm(
        total=config.budget_games,
        initial=min(games_done, config.budget_games),
        unit="game",
        disable=jax.process_index() != 0,
        file=sys.stdout,
        dynamic_ncols=True,
    )
    metrics = {}
    last_saved = step
    try:
        while games_done < config.budget_games and not stop_requested:
            if max_iterations is not None and step >= max_iterations:
                break
            start = time.time()
            with jax.transfer_guard("disallow"):
                state, device_metrics = trainer.iteration(state)
            metrics = metrics_lib.host_metrics(metrics_lib.to_host(device_metrics), trainer.scheme_names)
            seconds = time.time() - start
            step += 1
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
            if metrics["learned"] and not math.isfinite(metrics["loss"]):
                raise NonFiniteLoss(
                    f"non-finite loss ({metrics['loss']}) at iteration {step}; "
                    f"the last good checkpoint (iteration {last_saved}) is kept in {checkpointer.directory}"
                )
            writers.write(step, metrics)
            bar.update(min(metrics["games_finished"], config.budget_games) - bar.n)
            bar.set_postfix(
                it=step,
                pos_s=f"{metrics['positions_per_second']:.0f}",
                loss=f"{metrics['loss']:.3f}" if metrics["learned"] else "-",
                refresh=False,
            )
            games_done = metrics["games_finished"]
            if step % config.checkpoint.every_iterations == 0:
                checkpointer.save(step, state, config)
                last_saved = step
        if step != last_saved:
            checkpointer.save(step, state, config)
            last_saved = step
        if stop_requested:
            _log(f"SIGTERM: saved iteration {step} to {checkpointer.directory}; run again to resume")
    finally:
        bar.close()
        writers.close()
        checkpointer.close()
        signal.signal(signal.SIGTERM, previous_handler)
    return metrics
