"""Self-play's edges: starts that are already over, and the move generator a run names."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az import search as search_lib
from az.network import AZNet
from az.train import replay as replay_lib
from az.train import selfplay as selfplay_lib
from az.train import trainer as trainer_lib
from envs import dense, env, starts

MATED = "4k4/9/9/9/9/9/4p4/4g4/4K4 b - 1"  # black to move is mated: white has won
DECLARES = "RBGGSSSS1/4K3B/1R1GG4/9/9/9/9/9/4k4 b - 1"  # black to move declares: black wins
NET = AZNet(num_blocks=0, channels=4, value_hidden=4)


def test_selfplay__a_start_already_over_is_scored_not_played(tmp_path):
    """A book of a mate and a declaration: every game ends at its start with its true
    result (never a draw), no search is recorded, and no position gets a target."""
    book = tmp_path / "over.book"
    book.write_text(f"{MATED}\n{DECLARES}\n", encoding="utf-8")
    rules = env.Rules(max_length=16, history=17)
    start = starts.make_start_fn(f"book({book})", rules)
    search = search_lib.make_search(NET.apply, rules, num_simulations=2, max_num_considered_actions=2)
    games_, plies_ = 4, 4
    selfplay = jax.jit(selfplay_lib.make_selfplay(
        search, start, rules, sample_visits_plies=0, num_plies=plies_, game_budget=100, num_schemes=1))
    params = NET.init(jax.random.key(0), jnp.zeros((1, *env.OBSERVATION_SHAPE), jnp.bool_))
    games = jax.vmap(start, in_axes=(0, None))(jax.random.split(jax.random.key(1), games_), 0.0)
    assert np.asarray(games.done).all()
    _, finished, plies, stats = selfplay(params, games, jax.random.key(2), jnp.int32(0))
    n = games_ * plies_
    assert int(finished) == int(stats.finished) == int(stats.finished_at_start) == n
    reasons = np.asarray(stats.end_reasons)
    assert reasons[env.MATE] + reasons[env.DECLARATION] == n and reasons[env.MATE] > 0 and reasons[env.DECLARATION] > 0
    assert int(stats.white_wins) == reasons[env.MATE] and int(stats.black_wins) == reasons[env.DECLARATION]
    assert int(stats.draws) == 0 and int(stats.length_sum) == 0
    assert not np.asarray(plies.played).any()
    buffer = replay_lib.label(replay_lib.add(replay_lib.init(2 * plies_, games_), plies),
                              search_value_weight=0.0, truncated_value="zero")
    assert not np.asarray(buffer.filled).any() and not np.asarray(buffer.value_known).any()


@pytest.mark.parametrize("movegen, traced", [("pgx", False), ("dense", True)])
def test_trainer__a_pgx_run_never_traces_the_dense_core(monkeypatch, movegen, traced):
    """Every place that steps, observes or starts a game follows config.env.movegen."""
    calls = []

    def record(name):
        real = getattr(dense, name)
        return lambda *args: calls.append(name) or real(*args)

    for name in ("analyze", "observe", "source"):
        monkeypatch.setattr(dense, name, record(name))
    config = importlib.import_module("configs.shogi816k_randomstart2").get_config("smoke")
    config.env.movegen = movegen
    trainer = trainer_lib.make_trainer(config, trainer_lib.make_mesh())
    jax.eval_shape(trainer.iteration, trainer.abstract_state)
    jax.eval_shape(trainer.init)
    assert bool(calls) == traced, sorted(set(calls))
    if traced:  # the control: the same trace reaches all three with the dense core
        assert set(calls) == {"analyze", "observe", "source"}
