"""Deferred value targets of ``az.replay`` on hand-made trajectories.

A tiny buffer: R = 8 rows (plies) x B = 3 columns (game slots), written T = 4 rows
per ``add``. Each position is tagged in its board (square 0: the row it was played
at in the trajectory, square 1: its column, square 2: which ``add`` wrote it), so a
sampled position can be traced back to where it came from.
"""

import jax
import jax.numpy as jnp
import numpy as np
import pytest

from az.train import replay
from envs import movegen

R, B, T = 8, 3, 4


def make_plies(
    color,
    starts=None,
    ends=None,
    outcome_black=None,
    truncated=None,
    search_value=None,
    write=0,
    played=None,
    full_search=None,
) -> replay.Plies:
    """T x B plies from [T, B] arrays (rows are plies, columns are games)."""
    color = np.asarray(color, np.int8)
    shape = color.shape

    def arr(x, dtype, fill=0):
        return np.full(shape, fill, dtype) if x is None else np.asarray(x, dtype).reshape(shape)

    board = np.full((*shape, 81), -1, np.int8)
    board[..., 0] = np.arange(shape[0])[:, None]
    board[..., 1] = np.arange(shape[1])[None, :]
    board[..., 2] = write
    return replay.Plies(
        board=jnp.asarray(board),
        hand=jnp.zeros((*shape, 2, 7), jnp.int8),
        color=jnp.asarray(color),
        policy=jnp.zeros((*shape, replay.NUM_ACTIONS), jnp.bfloat16),
        search_value=jnp.asarray(arr(search_value, np.float32)),
        played=jnp.asarray(arr(played, np.bool_, fill=True)),
        full_search=jnp.asarray(arr(full_search, np.bool_, fill=True)),
        starts_game=jnp.asarray(arr(starts, np.bool_)),
        ends_game=jnp.asarray(arr(ends, np.bool_)),
        truncated=jnp.asarray(arr(truncated, np.bool_)),
        outcome_black=jnp.asarray(arr(outcome_black, np.float32)),
    )


def label(buffer, w=0.0, truncated_value="zero"):
    out = replay.label(buffer, search_value_weight=w, truncated_value=truncated_value)
    return np.asarray(out.value_known), np.asarray(out.value_target), out


def column(*values):
    """A [T, 1] array from T values, to build columns one by one."""
    return np.asarray(values).reshape(-1, 1)


# Colours of a game that starts with black to move, for T rows.
ALTERNATING = np.asarray([0, 1, 0, 1])
BLACK_SIGN = np.where(ALTERNATING == 0, 1.0, -1.0)  # +1 where black moved


def test_label__decided_and_drawn_games_give_the_result_from_each_movers_view():
    # Column 0: black mates with its move at row 2 (colour 0); column 1: white mates
    # at row 3; column 2: a repetition draw at row 3. All three start at row 0.
    color = np.stack([ALTERNATING] * 3, axis=1)
    starts = np.zeros((T, B), bool)
    starts[0] = True
    starts[3, 0] = True  # the next game of column 0
    ends = np.zeros((T, B), bool)
    ends[2, 0] = ends[3, 1] = ends[3, 2] = True
    outcome = np.zeros((T, B), np.float32)
    outcome[2, 0], outcome[3, 1] = 1.0, -1.0
    buffer = replay.add(replay.init(R, B), make_plies(color, starts, ends, outcome))
    known, target, _ = label(buffer)

    # Black win: black's positions +1, white's -1; the next game (row 3) is running.
    np.testing.assert_array_equal(known[:T, 0], [True, True, True, False])
    np.testing.assert_array_equal(target[:3, 0], [1.0, -1.0, 1.0])
    # White win: black's positions -1, white's +1.
    assert known[:T, 1].all()
    np.testing.assert_array_equal(target[:T, 1], -BLACK_SIGN)
    # Draw: known, target 0.
    assert known[:T, 2].all()
    np.testing.assert_array_equal(target[:T, 2], 0.0)
    # Rows never written have no target.
    assert not known[T:].any()


def test_label__sign_follows_the_mover_not_the_row_parity():
    # A game starting with white to move (e.g. from a book position), won by black.
    color = column(1, 0, 1, 0)
    buffer = replay.add(
        replay.init(R, 1),
        make_plies(color, starts=column(1, 0, 0, 0), ends=column(0, 0, 0, 1), outcome_black=column(0, 0, 0, 1)),
    )
    known, target, _ = label(buffer)
    assert known[:T, 0].all()
    np.testing.assert_array_equal(target[:T, 0], [-1.0, 1.0, -1.0, 1.0])


@pytest.mark.parametrize("truncated_value", ["zero", "search"])
def test_label__truncated_game_gets_zero_or_the_search_value(truncated_value):
    q = column(0.25, -0.5, 0.75, -0.125)
    plies = make_plies(
        column(*ALTERNATING),
        starts=column(1, 0, 0, 0),
        ends=column(0, 0, 0, 1),
        truncated=column(0, 0, 0, 1),
        outcome_black=column(0, 0, 0, 0),
        search_value=q,
    )
    known, target, _ = label(replay.add(replay.init(R, 1), plies), truncated_value=truncated_value)
    assert known[:T, 0].all()
    expected = np.zeros(T) if truncated_value == "zero" else q[:, 0]
    np.testing.assert_allclose(target[:T, 0], expected)


def test_label__decided_game_ignores_truncated_value_search():
    # Only truncated games take the search value; a mate keeps its result.
    q = column(0.25, -0.5, 0.75, -0.125)
    plies = make_plies(
        column(*ALTERNATING),
        starts=column(1, 0, 0, 0),
        ends=column(0, 0, 0, 1),
        outcome_black=column(0, 0, 0, -1),
        search_value=q,
    )
    _, target, _ = label(replay.add(replay.init(R, 1), plies), truncated_value="search")
    np.testing.assert_allclose(target[:T, 0], -BLACK_SIGN)


def test_label__game_ending_mid_scan_then_a_new_game_in_the_same_column():
    # Rows 0-1: game A, white mates with its move at row 1. Rows 2-3: game B starts
    # at row 2 and is still running.
    plies = make_plies(
        column(0, 1, 0, 1),
        starts=column(1, 0, 1, 0),
        ends=column(0, 1, 0, 0),
        outcome_black=column(0, -1, 0, 0),
    )
    buffer = replay.add(replay.init(R, 1), plies)
    known, target, _ = label(buffer)
    np.testing.assert_array_equal(known[:T, 0], [True, True, False, False])
    np.testing.assert_array_equal(target[:T, 0], [-1.0, 1.0, 0.0, 0.0])

    # Game B ends in the next add (black mates at row 4): now B's rows get B's
    # result, A's keep theirs, and game C starting at row 5 stays unknown.
    more = make_plies(
        column(0, 0, 1, 0),
        starts=column(0, 1, 0, 0),
        ends=column(1, 0, 0, 0),
        outcome_black=column(1, 0, 0, 0),
        write=1,
    )
    known, target, _ = label(replay.add(buffer, more))
    np.testing.assert_array_equal(known[:, 0], [True] * 5 + [False] * 3)
    np.testing.assert_array_equal(target[:, 0], [-1.0, 1.0, 1.0, -1.0, 1.0, 0.0, 0.0, 0.0])


def test_label__game_spanning_two_adds_is_labelled_when_it_ends():
    first = make_plies(column(*ALTERNATING), starts=column(1, 0, 0, 0))
    buffer = replay.add(replay.init(R, 1), first)
    known, _, _ = label(buffer)
    assert not known.any(), "a running game has no target yet"

    second = make_plies(column(*ALTERNATING), ends=column(0, 1, 0, 0), outcome_black=column(0, -1, 0, 0), write=1)
    buffer = replay.add(buffer, second)
    assert int(buffer.next_row) == 0  # 8 rows written into 8: the ring is full
    known, target, _ = label(buffer)
    np.testing.assert_array_equal(known[:, 0], [True] * 6 + [False] * 2)
    # White won: black's positions (rows 0, 2, 4) -1, white's (rows 1, 3, 5) +1.
    np.testing.assert_array_equal(target[:6, 0], [-1.0, 1.0, -1.0, 1.0, -1.0, 1.0])


def test_label__reduced_searches_take_their_own_weight():
    # One game of four plies, black wins; rows 1 and 2 were searched with the reduced
    # simulations.
    q = np.asarray([0.6, -0.3, 0.2, 0.9], np.float32)
    full = np.asarray([1, 0, 0, 1], np.bool_)
    plies = make_plies(
        ALTERNATING.reshape(-1, 1),
        starts=column(1, 0, 0, 0),
        ends=column(0, 0, 0, 1),
        outcome_black=column(0, 0, 0, 1),
        search_value=q.reshape(-1, 1),
        full_search=full.reshape(-1, 1),
    )
    buffer = replay.add(replay.init(R, 1), plies)
    for reduced, w_of_row in ((-1.0, [0.5, 0.5, 0.5, 0.5]), (0.0, [0.5, 0.0, 0.0, 0.5]), (1.0, [0.5, 1.0, 1.0, 0.5])):
        out = replay.label(buffer, search_value_weight=0.5, truncated_value="zero", reduced_search_value_weight=reduced)
        w = np.asarray(w_of_row)
        np.testing.assert_allclose(np.asarray(out.value_target)[:T, 0], (1 - w) * BLACK_SIGN + w * q, rtol=1e-6)


def test_label__search_value_plies_reads_the_search_value_later_in_the_same_game():
    """One game of six plies that black wins (rows 0-5, over two adds), then a running
    game. With k plies, each position's q is the search value k rows on, negated where
    the other side moves there; where the game ends within k plies, q is the outcome."""
    q = np.asarray([0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8], np.float32)
    color = np.asarray([0, 1, 0, 1, 0, 1, 0, 1])
    ends = np.asarray([0, 0, 0, 0, 0, 1, 0, 0])
    starts = np.asarray([1, 0, 0, 0, 0, 0, 1, 0])
    buffer = replay.init(R, 1)
    for w in range(2):
        rows = slice(w * T, (w + 1) * T)
        buffer = replay.add(buffer, make_plies(color[rows].reshape(-1, 1), starts=starts[rows], ends=ends[rows],
                                               outcome_black=ends[rows], search_value=q[rows], write=w))
    z = np.where(color[:6] == 0, 1.0, -1.0)
    expected = {
        0: q[:6],
        1: np.concatenate([-q[1:6], z[5:]]),
        2: np.concatenate([q[2:6], z[4:]]),
    }
    for plies, later_q in expected.items():
        out = replay.label(buffer, search_value_weight=0.5, truncated_value="zero", search_value_plies=plies)
        np.testing.assert_array_equal(np.asarray(out.value_known)[:, 0], [True] * 6 + [False] * 2)
        np.testing.assert_allclose(np.asarray(out.value_target)[:6, 0], 0.5 * z + 0.5 * later_q, rtol=1e-6,
                                   err_msg=str(plies))


def test_label__search_value_weight_mixes_outcome_and_search_value():
    w = 1.0 / 3.0
    q = np.asarray([[0.6, 0.3], [-0.3, 0.9], [0.0, -0.6], [0.9, 0.0]], np.float32)
    color = np.stack([ALTERNATING, ALTERNATING], axis=1)
    plies = make_plies(
        color,
        starts=[[1, 1], [0, 0], [0, 0], [0, 0]],
        # Column 0: black wins (white's move at row 3 completes a perpetual check);
        # column 1: truncated at row 3.
        ends=[[0, 0], [0, 0], [0, 0], [1, 1]],
        truncated=[[0, 0], [0, 0], [0, 0], [0, 1]],
        outcome_black=[[0, 0], [0, 0], [0, 0], [1, 0]],
        search_value=q,
    )
    buffer = replay.add(replay.init(R, 2), plies)
    for truncated_value in ("zero", "search"):
        known, target, _ = label(buffer, w=w, truncated_value=truncated_value)
        assert known[:T].all()
        np.testing.assert_allclose(target[:T, 0], (1 - w) * BLACK_SIGN + w * q[:, 0], rtol=1e-6)
        z_truncated = np.zeros(T) if truncated_value == "zero" else q[:, 1]
        np.testing.assert_allclose(target[:T, 1], (1 - w) * z_truncated + w * q[:, 1], rtol=1e-6, atol=1e-7)


def test_label__ring_wraps_around_and_keeps_games_apart():
    # Three adds of 4 rows into 8 rows: the third overwrites rows 0-3.
    #   column 0: game G runs from write 0 through write 1 and ends at row 0 of
    #             write 2 (black mates); game H starts at row 1 of write 2 (running).
    #   column 1: game K ends at row 1 of write 1 (white wins); game L starts at
    #             row 2 of write 1 and is still running at the end of write 2.
    color = np.stack([ALTERNATING, ALTERNATING], axis=1)
    writes = [
        make_plies(color, starts=[[1, 1], [0, 0], [0, 0], [0, 0]], write=0),
        make_plies(
            color,
            starts=[[0, 0], [0, 0], [0, 1], [0, 0]],
            ends=[[0, 0], [0, 1], [0, 0], [0, 0]],
            outcome_black=[[0, 0], [0, -1], [0, 0], [0, 0]],
            write=1,
        ),
        make_plies(
            color,
            starts=[[0, 0], [1, 0], [0, 0], [0, 0]],
            ends=[[1, 0], [0, 0], [0, 0], [0, 0]],
            outcome_black=[[1, 0], [0, 0], [0, 0], [0, 0]],
            write=2,
        ),
    ]
    buffer = replay.init(R, 2)
    next_rows = []
    for plies in writes:
        buffer = replay.add(buffer, plies)
        next_rows.append(int(buffer.next_row))
    assert next_rows == [4, 0, 4]
    board = np.asarray(buffer.plies.board)
    np.testing.assert_array_equal(board[:, 0, 2], [2, 2, 2, 2, 1, 1, 1, 1])  # rows 0-3 overwritten
    assert np.asarray(buffer.filled).all()

    known, target, _ = label(buffer)
    sign = np.tile(BLACK_SIGN, 2)  # buffer rows 0..7 alternate black, white
    # Column 0: rows 4-7 (write 1) and 0 (write 2) are G's, black won; rows 1-3 are H's.
    np.testing.assert_array_equal(known[:, 0], [True, False, False, False, True, True, True, True])
    np.testing.assert_array_equal(target[[0, 4, 5, 6, 7], 0], sign[[0, 4, 5, 6, 7]])
    # Column 1: rows 4-5 are K's (white won); rows 6-7 and 0-3 are L's, still running:
    # the scan must not carry K's result across the ring's seam.
    np.testing.assert_array_equal(known[:, 1], [False, False, False, False, True, True, False, False])
    np.testing.assert_array_equal(target[4:6, 1], -sign[4:6])
    np.testing.assert_array_equal(target[~known], 0.0)


def test_sample__draws_only_positions_with_a_value_target():
    # Column 0: decided game in rows 0-1 (white mates), running game after; column 1:
    # running game; column 2: a draw in rows 0-3.
    plies = make_plies(
        np.stack([ALTERNATING] * 3, axis=1),
        starts=[[1, 1, 1], [0, 0, 0], [1, 0, 0], [0, 0, 0]],
        ends=[[0, 0, 0], [1, 0, 0], [0, 0, 0], [0, 0, 1]],
        outcome_black=[[0, 0, 0], [-1, 0, 0], [0, 0, 0], [0, 0, 0]],
        search_value=np.full((T, B), 0.5),
    )
    known, target, buffer = label(replay.add(replay.init(R, B), plies))
    expected_known = {(0, 0), (1, 0), (0, 2), (1, 2), (2, 2), (3, 2)}
    assert {tuple(rc) for rc in np.argwhere(known)} == expected_known

    batch = jax.jit(replay.sample, static_argnums=2)(buffer, jax.random.key(0), 512)
    assert batch.board.shape == (512, 81) and batch.hand.shape == (512, 2, 7)
    assert batch.policy.shape == (512, replay.NUM_ACTIONS) and batch.policy.dtype == jnp.float32
    board, value = np.asarray(batch.board), np.asarray(batch.value)
    drawn = {(int(b[0]), int(b[1])) for b in board}
    assert drawn <= expected_known, f"drew positions without a target: {drawn - expected_known}"
    assert drawn == expected_known, "uniform over 6 known positions: 512 draws should hit all"
    for b, v in zip(board, value):
        assert v == target[b[0], b[1]]
    assert set(value.tolist()) == {1.0, -1.0, 0.0}


def test_label__a_games_result_stops_at_its_first_position():
    # Rows 0-1 hold plies with no recorded end (a game abandoned, e.g. the first rows
    # of a buffer restored mid-game); the game starting at row 2 ends at row 3. Its
    # result must not leak backwards past its own first position.
    plies = make_plies(
        column(0, 1, 0, 1),
        starts=column(0, 0, 1, 0),
        ends=column(0, 0, 0, 1),
        outcome_black=column(0, 0, 0, -1),
    )
    known, target, _ = label(replay.add(replay.init(R, 1), plies))
    np.testing.assert_array_equal(known[:T, 0], [False, False, True, True])
    np.testing.assert_array_equal(target[:T, 0], [0.0, 0.0, -1.0, 1.0])


def test_label__a_start_already_over_gets_no_target_and_keeps_games_apart():
    """Rows 0-1: a game black wins; row 2: a start already over (scored, not played);
    row 3: the next game, still running."""
    plies = make_plies(
        column(0, 1, 0, 0),
        starts=column(1, 0, 1, 1),
        ends=column(0, 1, 1, 0),
        outcome_black=column(0, 1, -1, 0),
        played=column(1, 1, 0, 1),
    )
    buffer = replay.add(replay.init(R, 1), plies)
    known, target, out = label(buffer)
    np.testing.assert_array_equal(np.asarray(out.filled)[:T, 0], [True, True, False, True])
    np.testing.assert_array_equal(known[:T, 0], [True, True, False, False])
    np.testing.assert_array_equal(target[:2, 0], [1.0, -1.0])


@pytest.mark.parametrize("reduced_policy_weight", [0.0, 0.25])
def test_sample__policy_weight_is_one_for_full_searches_and_the_reduced_weight_else(reduced_policy_weight):
    """Playout caps: a full search's policy has weight 1, a reduced search's the given weight."""
    full = np.asarray([[1, 0, 1], [0, 1, 0], [1, 1, 0], [0, 0, 1]], bool)
    plies = make_plies(np.tile(ALTERNATING[:, None], (1, B)), starts=column(1, 0, 0, 0).repeat(B, 1),
                       ends=column(0, 0, 0, 1).repeat(B, 1), full_search=full)
    buffer = replay.label(replay.add(replay.init(R, B), plies), search_value_weight=0.0, truncated_value="zero")
    batch = replay.sample(buffer, jax.random.key(0), 512, reduced_policy_weight=reduced_policy_weight)
    rows, cols = np.asarray(batch.board)[:, 0], np.asarray(batch.board)[:, 1]
    expected = np.where(full[rows, cols], 1.0, reduced_policy_weight).astype(np.float32)
    np.testing.assert_array_equal(np.asarray(batch.policy_weight), expected)
    assert full[rows, cols].any() and not full[rows, cols].all()


def test_sample__mirror_flips_half_the_positions_with_their_policies():
    """``mirror``: the same draws, about half of them mirrored left to right, each with its
    policy moved to the mirrored actions; hands, weights and values stay."""
    plies = make_plies(np.tile(ALTERNATING[:, None], (1, B)), starts=column(1, 0, 0, 0).repeat(B, 1),
                       ends=column(0, 0, 0, 1).repeat(B, 1), outcome_black=column(0, 0, 0, 1).repeat(B, 1))
    rng = np.random.default_rng(0)
    policy = rng.dirichlet(np.ones(replay.NUM_ACTIONS), size=(T, B)).astype(np.float32)
    plies = plies._replace(policy=jnp.asarray(policy, jnp.bfloat16),
                           hand=jnp.asarray(rng.integers(0, 3, (T, B, 2, 7)), jnp.int8))
    buffer = replay.label(replay.add(replay.init(R, B), plies), search_value_weight=0.0, truncated_value="zero")
    plain = jax.tree.map(np.asarray, replay.sample(buffer, jax.random.key(3), 512))
    mirrored = jax.tree.map(np.asarray, replay.sample(buffer, jax.random.key(3), 512, mirror=True))
    flipped = (mirrored.board != plain.board).any(axis=1)
    assert 0.4 < flipped.mean() < 0.6
    files = plain.board.reshape(-1, 9, 9)
    np.testing.assert_array_equal(mirrored.board[flipped], files[flipped, ::-1].reshape(-1, 81))
    np.testing.assert_array_equal(mirrored.policy[flipped], plain.policy[flipped][:, movegen.MIRRORED_ACTIONS])
    np.testing.assert_array_equal(mirrored.policy[~flipped], plain.policy[~flipped])
    for field in ("hand", "policy_weight", "value"):
        np.testing.assert_array_equal(getattr(mirrored, field), getattr(plain, field))
    assert (plain.value != 0).any()


def test_future_material__counts_k_plies_on_in_the_same_game_from_the_movers_view():
    """Column 0: a game in rows 0-5, then a running one; column 1: a game in rows 0-7
    that ends at the newest row (the ring's next row is stale); column 2: never ends.
    Each position's material is made distinct (the mover's pawns in hand = its row + 1,
    the opponent's lances = its column); the target is the balance at min(row + k, the
    game's last row), negated where the other side moves there."""
    color = np.stack([np.arange(2 * T) % 2, (np.arange(2 * T) + 1) % 2, np.arange(2 * T) % 2], axis=1)
    starts = np.zeros((2 * T, B), bool)
    starts[0, :] = starts[6, 0] = True
    ends = np.zeros((2 * T, B), bool)
    ends[5, 0] = ends[7, 1] = True
    outcome = np.where(ends, 1.0, 0.0)
    buffer = replay.init(R, B)
    for w in range(2):
        rows = slice(w * T, (w + 1) * T)
        plies = make_plies(color[rows], starts=starts[rows], ends=ends[rows], outcome_black=outcome[rows], write=w)
        hand = np.zeros((T, B, 2, 7), np.int8)
        hand[..., 0, 0] = np.arange(w * T, (w + 1) * T)[:, None] + 1
        hand[..., 1, 1] = np.arange(B)[None, :]
        buffer = replay.add(buffer, plies._replace(board=jnp.full((T, B, 81), -1, jnp.int8), hand=jnp.asarray(hand)))
    known, _, buffer = label(buffer)
    index = jnp.asarray(np.flatnonzero(known))
    assert {(int(i) // B, int(i) % B) for i in index} == {(r, 0) for r in range(6)} | {(r, 1) for r in range(8)}
    last_row = {0: 5, 1: 7}
    for k in (0, 3):
        got = np.asarray(jax.jit(replay.future_material, static_argnums=2)(buffer, index, k))
        for i, value in zip(np.asarray(index), got):
            row, column = divmod(int(i), B)
            later = min(row + k, last_row[column])
            balance = (later + 1) - 3 * column  # pawns are worth 1, lances 3
            assert value == (balance if color[later, column] == color[row, column] else -balance), (k, row, column)
    batch = replay.sample(buffer, jax.random.key(0), 64, material_plies=2)
    assert batch.material.shape == (64,)
    assert replay.sample(buffer, jax.random.key(0), 64).material is None


def test_future_occupancy__reads_the_board_k_plies_on_in_the_sampled_movers_frame():
    """The games of ``future_material``'s test, each board holding two pieces whose
    squares and kinds depend on the row and the column. A square's target is the occupant
    of the board at min(row + k, the game's last row): where the same side moves there,
    that board as it is (pieces 0-13 the mover's); where the other side does, turned half
    a turn (square s reads square 80 - s) with the sides swapped."""
    color = np.stack([np.arange(2 * T) % 2, (np.arange(2 * T) + 1) % 2, np.arange(2 * T) % 2], axis=1)
    starts = np.zeros((2 * T, B), bool)
    starts[0, :] = starts[6, 0] = True
    ends = np.zeros((2 * T, B), bool)
    ends[5, 0] = ends[7, 1] = True
    boards = np.full((2 * T, B, 81), -1, np.int8)
    for row in range(2 * T):
        for column in range(B):
            boards[row, column, (row * 7 + column * 11) % 81] = (row * 3 + column) % 14  # the mover's
            boards[row, column, (row * 5 + column * 13 + 40) % 81] = 14 + (row + column) % 14  # the opponent's
    buffer = replay.init(R, B)
    for w in range(2):
        rows = slice(w * T, (w + 1) * T)
        plies = make_plies(color[rows], starts=starts[rows], ends=ends[rows], outcome_black=np.where(ends, 1.0, 0.0)[rows],
                           write=w)
        buffer = replay.add(buffer, plies._replace(board=jnp.asarray(boards[rows])))
    known, _, buffer = label(buffer)
    index = jnp.asarray(np.flatnonzero(known))
    last_row = {0: 5, 1: 7}
    flips = 0
    for k in (1, 2, 4):
        got = np.asarray(jax.jit(replay.future_occupancy, static_argnums=2)(buffer, index, k))
        for i, occupancy in zip(np.asarray(index), got):
            row, column = divmod(int(i), B)
            later = min(row + k, last_row[column])
            board = boards[later, column].astype(int)
            if color[later, column] == color[row, column]:
                expected = np.where(board < 0, replay.EMPTY, np.where(board < 14, replay.OWN, replay.OPPONENT))
            else:
                flips += 1
                turned = board[::-1]
                expected = np.where(turned < 0, replay.EMPTY, np.where(turned >= 14, replay.OWN, replay.OPPONENT))
            np.testing.assert_array_equal(occupancy, expected, err_msg=str((k, row, column)))
            assert (occupancy == replay.OWN).sum() == 1 and (occupancy == replay.OPPONENT).sum() == 1
    assert flips > 0
    batch = replay.sample(buffer, jax.random.key(0), 64, occupancy_plies=2)
    assert batch.occupancy.shape == (64, 81)
    mirrored = replay.sample(buffer, jax.random.key(0), 64, occupancy_plies=2, mirror=True)
    board, twin = np.asarray(batch.board), np.asarray(movegen.mirror_board(batch.board))
    asymmetric = (board != twin).any(-1)  # a symmetric board would not tell whether it was mirrored
    flipped = asymmetric & (np.asarray(mirrored.board) == twin).all(-1)
    kept = asymmetric & (np.asarray(mirrored.board) == board).all(-1)
    assert flipped.any() and kept.any()
    np.testing.assert_array_equal(mirrored.occupancy[flipped], movegen.mirror_board(batch.occupancy[flipped]))
    np.testing.assert_array_equal(mirrored.occupancy[kept], batch.occupancy[kept])
    assert replay.sample(buffer, jax.random.key(0), 64).occupancy is None


def test_next_policy__is_the_next_plys_target_in_the_same_game_when_searched_in_full():
    """The games of ``future_material``'s test, each ply's policy a one-hot on an action
    that names its row and column, and the plies of rows 2 and 9 searched with the reduced
    simulations. A position's target is the next row's policy with weight 1 where its game
    goes on there and that ply was searched in full; at a game's last ply, or before a
    reduced search, weight 0 and no policy. Mirrored draws carry it to the mirrored actions."""
    color = np.stack([np.arange(2 * T) % 2, (np.arange(2 * T) + 1) % 2, np.arange(2 * T) % 2], axis=1)
    starts = np.zeros((2 * T, B), bool)
    starts[0, :] = starts[6, 0] = True
    ends = np.zeros((2 * T, B), bool)
    ends[5, 0] = ends[7, 1] = True
    full = np.ones((2 * T, B), bool)
    full[2, :] = False
    policy = np.zeros((2 * T, B, replay.NUM_ACTIONS), np.float32)
    action = lambda row, col: 100 * row + 7 * col + 3
    for row in range(2 * T):
        for col in range(B):
            policy[row, col, action(row, col)] = 1.0
    buffer = replay.init(R, B)
    for w in range(2):
        rows = slice(w * T, (w + 1) * T)
        plies = make_plies(color[rows], starts=starts[rows], ends=ends[rows], outcome_black=np.where(ends, 1.0, 0.0)[rows],
                           write=w, full_search=full[rows])
        buffer = replay.add(buffer, plies._replace(policy=jnp.asarray(policy[rows], jnp.bfloat16)))
    known, _, buffer = label(buffer)
    index = jnp.asarray(np.flatnonzero(known))
    got_policy, got_weight = jax.tree.map(np.asarray, jax.jit(replay.next_policy)(buffer, index))
    last_row = {0: 5, 1: 7}
    targets = 0
    for i, target, weight in zip(np.asarray(index), got_policy, got_weight):
        row, col = divmod(int(i), B)
        has_next = row < last_row[col] and row + 1 != 2
        assert weight == float(has_next), (row, col)
        if has_next:
            targets += 1
            assert target[action(row + 1, col)] == 1.0 and target.sum() == 1.0, (row, col)
        else:
            assert not target.any(), (row, col)
    assert targets == 10  # column 0: rows 0, 2, 3, 4; column 1: rows 0, 2-6
    batch = jax.tree.map(np.asarray, replay.sample(buffer, jax.random.key(0), 64, reply=True))
    assert batch.reply.shape == (64, replay.NUM_ACTIONS) and batch.reply_weight.shape == (64,)
    assert 0 < batch.reply_weight.mean() < 1
    mirrored = jax.tree.map(np.asarray, replay.sample(buffer, jax.random.key(0), 64, reply=True, mirror=True))
    np.testing.assert_array_equal(mirrored.reply_weight, batch.reply_weight)
    flipped = (mirrored.policy != batch.policy).any(-1)
    assert flipped.any() and (~flipped).any()
    np.testing.assert_array_equal(mirrored.reply[flipped], batch.reply[flipped][:, movegen.MIRRORED_ACTIONS])
    np.testing.assert_array_equal(mirrored.reply[~flipped], batch.reply[~flipped])
    assert replay.sample(buffer, jax.random.key(0), 64).reply is None
