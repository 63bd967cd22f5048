"""Self-play's edges: starts that are already over, and the move generator a run names."""

import importlib

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az import network as network_lib
from az import search as search_lib
from az.network import AZNet
from az.train import replay as replay_lib
from az.train import selfplay as selfplay_lib
from az.train import trainer as trainer_lib
from envs import dense, env, notation, starts

import helpers

MATED = "4k4/9/9/9/9/9/4p4/4g4/4K4 b - 1"  # black to move is mated: white has won
DECLARES = "RBGGSSSS1/4K3B/1R1GG4/9/9/9/9/9/4k4 b - 1"  # black to move declares: black wins
NET = AZNet(num_blocks=0, channels=4, value_hidden=4)


@pytest.mark.slow  # its own self-play compile, ~1 min
def test_selfplay__a_start_already_over_is_scored_not_played(tmp_path):
    """A book of a mate and a declaration: every game ends at its start with its true
    result (never a draw), no search is recorded, and no position gets a target."""
    book = tmp_path / "over.book"
    book.write_text(f"{MATED}\n{DECLARES}\n", encoding="utf-8")
    rules = env.Rules(max_length=16, history=17)
    start = starts.make_start_fn(f"book({book})", rules)
    search = search_lib.make_search(NET.apply, rules, search_lib.SearchSettings(num_simulations=2,
                                                                                max_num_considered_actions=2))
    games_, plies_ = 4, 4
    selfplay = jax.jit(selfplay_lib.make_selfplay(
        search, start, rules, sample_visits_plies=0, num_plies=plies_, game_budget=100, num_schemes=1))
    params = network_lib.init_params(NET, jax.random.key(0))
    games = jax.vmap(start, in_axes=(0, None))(jax.random.split(jax.random.key(1), games_), 0.0)
    assert np.asarray(games.done).all()
    track = selfplay_lib.init_resign(jax.random.key(3), games_, threshold=-0.9, no_resign_fraction=0.1)
    _, _, finished, plies, stats = selfplay(params, games, track, jax.random.key(2), jnp.int32(0))
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

    for name in ("analyze", "observe", "observe_parts", "source", "checks"):
        monkeypatch.setattr(dense, name, record(name))
    config = importlib.import_module("configs.shogi816k_randomstart2").get_config("smoke")
    config.env.movegen = movegen
    config.search.mate_in_one = movegen == "dense"  # mate in one needs the dense core
    trainer = trainer_lib.make_trainer(config, trainer_lib.make_mesh())
    jax.eval_shape(trainer.iteration, trainer.abstract_state)
    jax.eval_shape(trainer.init)
    assert bool(calls) == traced, sorted(set(calls))
    if traced:  # the control: the same trace reaches the dense core's every entry it uses
        assert set(calls) == {"analyze", "observe_parts", "source", "checks"}


# Resignation on hand-made trajectories ------------------------------------------------


def _track(no_resign, threshold=-0.8):
    return selfplay_lib.Resign(
        no_resign=jnp.asarray(no_resign), below=jnp.zeros((len(no_resign), 2), jnp.int32),
        would=jnp.zeros((len(no_resign), 2), jnp.int32), threshold=jnp.float32(threshold),
        checked=jnp.float32(0), false=jnp.float32(0),
    )


def _play(track, values, movers, plies=2):
    """Feeds plies of [B] values and movers; the resign flags per ply."""
    flags = []
    for value, mover in zip(values, movers):
        track, resigns = selfplay_lib.resign_ply(track, jnp.asarray(value, jnp.float32), jnp.asarray(mover), plies=plies)
        flags.append(np.asarray(resigns))
    return track, np.stack(flags)


def test_resign__after_consecutive_own_moves_below_the_threshold_never_in_no_resign_games():
    # Game 0 resigns: black's (mover 0) values -0.9 then -0.95 on its two moves; white's
    # moves in between do not count. Game 1 is the same but a no-resign game. Game 2:
    # black dips once, recovers, dips once: never two in a row.
    movers = [[0, 0, 0], [1, 1, 1], [0, 0, 0], [1, 1, 1], [0, 0, 0]]
    values = [[-0.9, -0.9, -0.9], [0.5, 0.5, 0.5], [-0.95, -0.95, 0.1], [0.3, 0.3, 0.3], [-0.9, -0.9, -0.9]]
    track, flags = _play(_track([False, True, False]), values, movers)
    np.testing.assert_array_equal(flags[:, 0], [False, False, True, False, True])
    assert not flags[:, 1].any()  # a no-resign game never resigns...
    np.testing.assert_array_equal(np.asarray(track.would)[1], [2, 0])  # ...it counts the positions
    assert not flags[:, 2].any()


def test_resign__false_resignations_are_the_would_resign_positions_of_sides_that_did_not_lose():
    # Three no-resign games: in game 0 black would have resigned at 2 positions and lost
    # (right); in game 1 white would have resigned at 3 positions and won (false); in
    # game 2 black would have at 1 and it was drawn (false). Game 3 has not ended.
    track = _track([True, True, True, True])._replace(would=jnp.asarray([[2, 0], [0, 3], [1, 0], [4, 0]]))
    ended = jnp.asarray([True, True, True, False])
    outcome_black = jnp.asarray([-1.0, -1.0, 0.0, 0.0])
    track, checked, false = selfplay_lib.resign_game_ends(track, ended, outcome_black, jnp.asarray([False] * 4))
    assert int(checked) == 6 and int(false) == 4
    np.testing.assert_array_equal(np.asarray(track.would), [[0, 0], [0, 0], [0, 0], [4, 0]])
    np.testing.assert_array_equal(np.asarray(track.no_resign), [False, False, False, True])  # fresh draws
    # The threshold moves down (resign less) while false resignations exceed the target,
    # up slowly once they are rare, and only after enough evidence.
    calm = selfplay_lib.calibrate(track, jnp.float32(6), jnp.float32(4), target=0.05)
    assert float(calm.threshold) == float(track.threshold)  # 6 positions are too few
    worse = selfplay_lib.calibrate(track, jnp.float32(100), jnp.float32(40), target=0.05)
    assert float(worse.threshold) == pytest.approx(-0.81)
    better = selfplay_lib.calibrate(track, jnp.float32(100), jnp.float32(1), target=0.05)
    assert float(better.threshold) == pytest.approx(-0.8 + 0.0025)


# The mate guard on hand-made positions ------------------------------------------------


@pytest.mark.heavy  # compiles the guard's mate in one over every candidate
def test_the_selfplay_guard_plays_the_first_move_of_the_ranking_that_allows_no_mate_in_one():
    """Positions with moves after which the opponent mates in one (cshogi says which),
    each row playing one of them under a random ranking of its legal moves: the guard
    plays the first safe move among the chosen one and the next ``candidates - 1`` of the
    ranking, else keeps the chosen move; it reports the refuted moves it tried only where
    it replaced one; a safe move and a skipped row stay as they are."""
    rules = env.Rules(history=8)
    sfens = helpers.MIXED_THREATS + [helpers.ALL_THREATS]
    states = [notation.from_sfen(s, rules) for s in sfens]
    games = jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *states)
    candidates = 4
    rng = np.random.default_rng(5)
    legal = np.asarray(games.legal_action_mask)
    preference = np.where(legal, rng.random(legal.shape), 0.0).astype(np.float32)
    skip = np.zeros(len(sfens), bool)
    skip[1] = True
    actions, expected, expected_refuted, outcomes = [], [], np.zeros(legal.shape, bool), set()
    for row, (sfen, state) in enumerate(zip(sfens, states)):
        refuted = {notation.usi_to_action(state, m): r for m, r in helpers.mate_in_one_after(sfen).items()}
        assert 0 < sum(refuted.values()), sfen  # the positions are what they claim
        ranked = sorted(refuted, key=lambda a: -preference[row, a])
        played = ([a for a in ranked if not refuted[a]][-1] if row == 0 else [a for a in ranked if refuted[a]][-1])
        tried = [played] + [a for a in ranked if a != played][: candidates - 1]
        safe = [a for a in tried if not refuted[a]]
        actions.append(played)
        if row == 0 or skip[row] or not safe:
            expected.append(played)
            outcomes.add("kept" if row else "safe")
        else:
            expected.append(safe[0])
            expected_refuted[row, tried[: tried.index(safe[0])]] = True
            outcomes.add("replaced")
    assert outcomes == {"safe", "kept", "replaced"}, outcomes  # every branch is exercised
    step = jax.vmap(lambda s, a: env.step(s, a, rules))
    guard = jax.jit(lambda g, a, p, s: selfplay_lib.replace_moves_allowing_mate(g, a, p, s, step, candidates=candidates))
    played, after, refuted = guard(games, jnp.asarray(actions, jnp.int32), jnp.asarray(preference), jnp.asarray(skip))
    assert np.asarray(played).tolist() == expected
    np.testing.assert_array_equal(np.asarray(refuted), expected_refuted)
    stepped = step(games, jnp.asarray(expected, jnp.int32))
    np.testing.assert_array_equal(np.asarray(after.x.board), np.asarray(stepped.x.board))
    np.testing.assert_array_equal(np.asarray(after.x.hand), np.asarray(stepped.x.hand))
