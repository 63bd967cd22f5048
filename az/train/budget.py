"""A wall-time budget turned into a game budget, once, at the start of a run.

    python train.py --config configs/shogi816k_randomstart2.py:size=gpu_short,recipe=small \\
        --workdir runs/x --budget_minutes=6

The learning rate's schedule and the start phases follow games finished / ``budget_games``
(az/train/learner.py). With ``--budget_minutes`` a fresh run first compiles its
iteration and times it with learning on (``probe``); the minutes left after that, at the
measured positions/s and an expected game length (half the ply limit: the small recipe's
games at the cpu size averaged 120 of 256 plies, docs/stall_study.md, playout caps),
become ``budget_games``, written to WORKDIR/budget.json before the first checkpoint. A
run that resumes reads that count and never measures again, so it finishes the schedule
it started, bit for bit as an unstopped run.
"""

import json
import os
import time

import jax
import jax.numpy as jnp
import ml_collections

from az.train import config as config_lib
from az.train import trainer as trainer_lib

BUDGET_FILE = "budget.json"
GAME_LENGTH_SHARE = 0.5  # expected mean game length, as a share of env.max_length
PROBE_ITERATIONS = 3  # timed iterations of the probe, at least ...
PROBE_SECONDS = 5.0  # ... and at least this long, so a fast device's timing is not one call


def recorded(workdir: str) -> dict | None:
    """The workdir's recorded budget (``fit``'s record), or None."""
    path = os.path.join(workdir, BUDGET_FILE)
    if not os.path.exists(path):
        return None
    with open(path, encoding="utf-8") as f:
        return json.load(f)


def games_for(seconds_left: float, positions_per_second: float, *, plies_per_game: float, num_games: int) -> int:
    """Games that ``seconds_left`` at ``positions_per_second`` finish: the positions over
    the expected game length, less the B games still running at the end (on average half
    played), at least one."""
    positions = max(seconds_left, 0.0) * positions_per_second
    return max(1, int(positions / plies_per_game - num_games / 2))


def learning_state(trainer: trainer_lib.Trainer) -> trainer_lib.TrainState:
    """A fresh state whose replay rows are all played positions, each a game of its own
    that has ended, so that labelling gives every one a value target and each iteration
    from it runs its K learner steps at the cost they have in a run (the rows' contents do
    not change what a step costs). For timing only."""
    state = trainer.init()
    every = state.replay.filled
    plies = state.replay.plies._replace(starts_game=jnp.ones_like(every), ends_game=jnp.ones_like(every))
    return state._replace(replay=state.replay._replace(plies=plies, filled=jnp.ones_like(every)))  # three
    # buffers, not one: the iteration donates its input, and a buffer may be donated once


def probe(trainer: trainer_lib.Trainer) -> float:
    """Positions/s of whole iterations with learning on (from ``learning_state``), the
    compile excluded, over ``PROBE_ITERATIONS`` iterations and at least ``PROBE_SECONDS``.
    The state is thrown away; the compiled program stays for the run."""
    state, metrics = jax.block_until_ready(trainer.iteration(learning_state(trainer)))  # compiles
    start, iterations = time.perf_counter(), 0
    while iterations < PROBE_ITERATIONS or time.perf_counter() - start < PROBE_SECONDS:
        state, metrics = jax.block_until_ready(trainer.iteration(state))
        iterations += 1
    seconds = time.perf_counter() - start
    assert bool(metrics["learned"]), "the probe's iterations must learn"
    c = trainer.config.selfplay
    return iterations * c.num_games * c.plies_per_iteration / seconds


def fit(trainer: trainer_lib.Trainer, workdir: str, minutes: float, started: float) -> trainer_lib.Trainer:
    """``trainer`` with the game budget that ``minutes`` of wall time since ``started``
    (``time.time()``) hold, after compiling and probing; the count is written to
    WORKDIR/budget.json (process 0) with what it was derived from."""
    config = trainer.config
    positions_per_second = probe(trainer)
    elapsed = time.time() - started
    plies_per_game = GAME_LENGTH_SHARE * config.env.max_length
    games = games_for(60.0 * minutes - elapsed, positions_per_second, plies_per_game=plies_per_game,
                      num_games=config.selfplay.num_games)
    record = {"budget_games": games, "budget_minutes": minutes, "positions_per_second": round(positions_per_second, 1),
              "seconds_before_training": round(elapsed, 1), "plies_per_game": plies_per_game,
              "replaces_budget_games": config.budget_games}
    if jax.process_index() == 0:
        with open(os.path.join(workdir, BUDGET_FILE), "w", encoding="utf-8") as f:
            json.dump(record, f, indent=2)
        print(f"budget: {minutes:g} min -> {games} games ({positions_per_second:,.0f} positions/s with learning, "
              f"{elapsed:.0f} s spent compiling and measuring, {plies_per_game:g} plies a game expected)", flush=True)
    return trainer_lib.with_budget(trainer, games)


def with_recorded(config: ml_collections.ConfigDict, workdir: str, minutes: float | None) -> ml_collections.ConfigDict:
    """``config`` with the workdir's recorded game budget, when it has one (a copy: the
    caller's config is not changed). ConfigError when ``minutes`` asks for another
    wall-time budget than the one recorded."""
    record = recorded(workdir)
    if record is None:
        return config
    if minutes is not None and minutes != record["budget_minutes"]:
        raise config_lib.ConfigError(
            f"--budget_minutes={minutes:g}: {os.path.join(workdir, BUDGET_FILE)} holds the budget of "
            f"{record['budget_minutes']:g} minutes ({record['budget_games']} games) this run started with; "
            "resume with that, or start another workdir")
    config = config.copy_and_resolve_references()
    config.budget_games = int(record["budget_games"])
    return config
