"""The host side of training: set-up, resume, progress, metrics, checkpoints, signals.

``train(config, workdir)`` runs until the game budget is spent (or ``max_iterations``),
resuming from the workdir's latest checkpoint when there is one.
"""

import json
import math
import os
import signal
import sys
import time

import jax
import ml_collections
import numpy as np
from tqdm import tqdm

from az import checkpoint as checkpoint_lib
from az import config as config_lib
from az import trainer as trainer_lib


class NonFiniteLoss(RuntimeError):
    pass


def _log(msg: str):
    if jax.process_index() == 0:
        print(msg, flush=True)


def _enable_compilation_cache(workdir: str):
    jax.config.update("jax_compilation_cache_dir", os.path.join(os.path.abspath(workdir), "jax_cache"))
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def _to_host(tree):
    """Replicated device values -> numpy, also when other processes hold the array."""
    return jax.tree.map(lambda a: np.asarray(a.addressable_data(0)), tree)


class _Writers:
    def __init__(self, workdir: str):
        self.enabled = jax.process_index() == 0
        if not self.enabled:
            return
        from tensorboardX import SummaryWriter

        self.jsonl = open(os.path.join(workdir, "metrics.jsonl"), "a", encoding="utf-8")
        self.tb = SummaryWriter(os.path.join(workdir, "tensorboard"))

    def write(self, step: int, metrics: dict):
        if not self.enabled:
            return
        self.jsonl.write(json.dumps({"iteration": step, **metrics}) + "\n")
        self.jsonl.flush()
        for k, v in metrics.items():
            if isinstance(v, (int, float)) and not isinstance(v, bool) and v is not None:
                self.tb.add_scalar(k, v, step)
        self.tb.flush()

    def close(self):
        if self.enabled:
            self.jsonl.close()
            self.tb.close()


def train(config: ml_collections.ConfigDict, workdir: str, *, max_iterations: int | None = None) -> dict:
    """Trains (or resumes) and returns the last iteration's host metrics.

    With ``config.distributed``, ``az.distributed.initialize`` must have run first.
    """
    os.makedirs(workdir, exist_ok=True)
    _enable_compilation_cache(workdir)
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
    writers = _Writers(workdir)
    games_done = int(_to_host(state.games_finished))
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
            metrics = trainer_lib.host_metrics(_to_host(device_metrics), trainer.scheme_names)
            seconds = time.time() - start
            step += 1
            metrics["seconds"] = seconds
            metrics["positions_per_second"] = config.selfplay.num_games * config.selfplay.plies_per_iteration / seconds
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
