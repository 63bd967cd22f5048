"""``az.search`` over the true environment: an untrained network still finds a mate in one.

The positions have few legal moves (10 each, two of them mate), so with m >= 10
considered actions and n = 2m simulations every legal move is visited: the search
must then see the mate's reward (+1, discount 0) whatever the network says, pick a
mating move and report its Q as +1 from the mover's view.
"""

import functools

import cshogi
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az import search as search_lib
from az.network import AZNet
from envs import env, shogi

RULES = env.Rules()
# Black to move: gold 3c-2b (or pawn 2c-2b+) mates the king on 1a.
BLACK_MATES = "8k/9/6GP1/9/9/9/9/9/K8 b - 1"
# The same position rotated, white to move: gold 7g-8h (or pawn 8g-8h+) mates on 9i.
WHITE_MATES = "8k/9/9/9/9/9/1pg6/9/K8 w - 1"
SFENS = (BLACK_MATES, WHITE_MATES)
M = 16  # >= the 10 legal moves of each position
N = 2 * M
NET = AZNet(num_blocks=1, channels=8, value_hidden=8)


def mating_moves(sfen: str) -> set[str]:
    """The side to move's mates in one, by cshogi."""
    board = cshogi.Board(sfen)
    assert board.mate_move_in_1ply(), f"{sfen}: cshogi finds no mate in one"
    mates = set()
    for move in board.legal_moves:
        board.push(move)
        if board.is_game_over():
            mates.add(cshogi.move_to_usi(move))
        board.pop()
    assert cshogi.move_to_usi(board.mate_move_in_1ply()) in mates
    return mates


def stack(states):
    return jax.tree.map(lambda *a: jnp.stack(a), *states)


@pytest.fixture(scope="module")
def games():
    return stack([shogi.from_sfen(s, RULES) for s in SFENS])


@pytest.fixture(scope="module")
def host_games():
    return [shogi.from_sfen(s, RULES) for s in SFENS]


@pytest.fixture(scope="module")
def step_batch():
    return jax.jit(jax.vmap(functools.partial(env.step, rules_=RULES)))


def init_params(seed: int):
    return NET.init(jax.random.key(seed), jnp.zeros((1, *env.OBSERVATION_SHAPE), jnp.bool_))


@pytest.fixture(scope="module")
def gumbel_search():
    search = search_lib.make_search(
        NET.apply, RULES, algorithm="gumbel", num_simulations=N, max_num_considered_actions=M, gumbel_scale=0.0
    )
    return jax.jit(search)


def test_mate_positions__have_few_legal_moves_and_two_mates():
    for sfen in SFENS:
        board = cshogi.Board(sfen)
        assert len(list(board.legal_moves)) == 10
        assert len(mating_moves(sfen)) == 2
        assert set(shogi.legal_moves(shogi.from_sfen(sfen, RULES))) == {
            cshogi.move_to_usi(m) for m in board.legal_moves
        }


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_search__gumbel_finds_mate_in_one_for_both_colours(gumbel_search, games, host_games, step_batch, seed):
    out = gumbel_search(init_params(seed), jax.random.key(seed), games)
    action = np.asarray(out.action)
    visits = np.asarray(out.search_tree.summary().visit_counts)
    legal = np.asarray(games.legal_action_mask)
    assert (visits[legal] >= 1).all(), "precondition: every legal move is visited"
    assert (visits[~legal] == 0).all()

    for i, sfen in enumerate(SFENS):
        usi = shogi.action_to_usi(host_games[i], int(action[i]))
        assert usi in mating_moves(sfen), f"{sfen}: chose {usi}, not a mate"

    children = step_batch(games, out.action)
    assert np.asarray(children.terminated).all()
    np.testing.assert_array_equal(np.asarray(children.end_reason), [env.MATE, env.MATE])
    mover = np.asarray(games.current_player)
    np.testing.assert_array_equal(mover, [0, 1])
    np.testing.assert_array_equal(np.asarray(children.rewards)[np.arange(2), mover], [1.0, 1.0])
    np.testing.assert_array_equal(np.asarray(children.rewards)[np.arange(2), 1 - mover], [-1.0, -1.0])


def test_chosen_q__is_plus_one_for_mates_and_less_for_other_moves(gumbel_search, games, host_games):
    out = gumbel_search(init_params(0), jax.random.key(0), games)
    np.testing.assert_allclose(np.asarray(search_lib.chosen_q(out, out.action)), [1.0, 1.0], atol=1e-6)
    q = np.asarray(out.search_tree.summary().qvalues)
    for i, sfen in enumerate(SFENS):
        moves = shogi.legal_moves(host_games[i])
        mates = mating_moves(sfen)
        for usi in moves:
            a = shogi.usi_to_action(host_games[i], usi)
            # chosen_q of an arbitrary action agrees with the tree's Q.
            one = np.asarray(search_lib.chosen_q(out, jnp.full((2,), a)))[i]
            assert one == q[i, a]
            if usi in mates:
                assert q[i, a] == pytest.approx(1.0, abs=1e-6), usi
            else:
                # The opponent is not mated: -1 < Q < 1 (an untrained value, negated).
                assert -1.0 < q[i, a] < 0.999, (usi, q[i, a])


def test_search__puct_returns_a_legal_action_and_weights_on_legal_moves():
    positions = [shogi.from_sfen(s, RULES) for s in (*SFENS, shogi.STARTPOS_SFEN)]
    batch = stack(positions)
    search = jax.jit(search_lib.make_search(NET.apply, RULES, algorithm="puct", num_simulations=16))
    out = search(init_params(0), jax.random.key(3), batch)
    legal = np.asarray(batch.legal_action_mask)
    action = np.asarray(out.action)
    weights = np.asarray(out.action_weights)
    assert legal[np.arange(3), action].all()
    np.testing.assert_allclose(weights.sum(-1), 1.0, rtol=1e-5)
    assert (weights[~legal] == 0).all()
    assert (weights >= 0).all()
    # PUCT's weights are visit counts / n: 16 simulations over legal moves only.
    visits = np.asarray(out.search_tree.summary().visit_counts)
    assert visits.sum(-1).tolist() == [16, 16, 16]
    assert (visits[~legal] == 0).all()


def test_make_search__rejects_an_unknown_algorithm(games):
    search = search_lib.make_search(NET.apply, RULES, algorithm="alphabeta", num_simulations=4)
    with pytest.raises(ValueError, match="search.algorithm"):
        jax.eval_shape(search, init_params(0), jax.random.key(0), games)
