"""Fixed-capacity replay buffer on the device, with value targets filled in later.

Layout [R, B]: B game slots (columns, sharded over devices) and R rows of plies
(a ring, written T rows per iteration). A game occupies consecutive rows of one
column, so once it ends, ``label`` can hand its outcome back to all its positions by
one reverse scan over the rows, however many iterations the game spanned.
Positions are stored compactly (board and hands, 96 bytes) and turned into
observations when sampled.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
from jax import Array

from envs import movegen
from envs.movegen import NUM_ACTIONS


class Plies(NamedTuple):
    """What self-play records per ply: leaves [T, B, ...] (or [R, B, ...] in the buffer)."""

    board: Array  # [.., B, 81] int8, mover's frame
    hand: Array  # [.., B, 2, 7] int8, row 0 the mover's
    color: Array  # [.., B] int8, 0 black to move
    policy: Array  # [.., B, A] bfloat16, the search's improved policy
    search_value: Array  # [.., B] float32, the search's Q of the chosen move (mover's view)
    played: Array  # [.., B] bool, a move was searched and played here (not: a start already over)
    full_search: Array  # [.., B] bool, searched with the full simulations: the policy is a target
    starts_game: Array  # [.., B] bool, the first position of its game
    ends_game: Array  # [.., B] bool, the move played here ended the game
    truncated: Array  # [.., B] bool, ... by reaching the maximum length
    outcome_black: Array  # [.., B] float32, result for black where ends_game


class Replay(NamedTuple):
    plies: Plies  # [R, B, ...]
    filled: Array  # [R, B] bool, holds a played position
    value_known: Array  # [R, B] bool, the position's game has ended
    value_target: Array  # [R, B] float32, mover's view
    next_row: Array  # [] int32, where the next T rows go


def empty_plies(shape: tuple[int, ...]) -> Plies:
    return Plies(
        board=jnp.full((*shape, 81), -1, jnp.int8),
        hand=jnp.zeros((*shape, 2, 7), jnp.int8),
        color=jnp.zeros(shape, jnp.int8),
        policy=jnp.zeros((*shape, NUM_ACTIONS), jnp.bfloat16),
        search_value=jnp.zeros(shape, jnp.float32),
        played=jnp.zeros(shape, jnp.bool_),
        full_search=jnp.zeros(shape, jnp.bool_),
        starts_game=jnp.zeros(shape, jnp.bool_),
        ends_game=jnp.zeros(shape, jnp.bool_),
        truncated=jnp.zeros(shape, jnp.bool_),
        outcome_black=jnp.zeros(shape, jnp.float32),
    )


def init(rows: int, games: int) -> Replay:
    shape = (rows, games)
    return Replay(
        plies=empty_plies(shape),
        filled=jnp.zeros(shape, jnp.bool_),
        value_known=jnp.zeros(shape, jnp.bool_),
        value_target=jnp.zeros(shape, jnp.float32),
        next_row=jnp.int32(0),
    )


def add(replay: Replay, plies: Plies) -> Replay:
    """Writes T rows at ``next_row`` (R is a multiple of T, so it never wraps inside).
    A row where no move was played (a start already over) is written but never filled."""
    rows = plies.color.shape[0]
    capacity = replay.filled.shape[0]

    def write(buffer, new):
        start = (replay.next_row,) + (0,) * (buffer.ndim - 1)
        return jax.lax.dynamic_update_slice(buffer, new.astype(buffer.dtype), start)

    return replay._replace(
        plies=jax.tree.map(write, replay.plies, plies),
        filled=write(replay.filled, plies.played),
        next_row=(replay.next_row + rows) % capacity,
    )


def label(
    replay: Replay,
    *,
    search_value_weight: float,
    truncated_value: str,
    reduced_search_value_weight: float = -1.0,
    search_value_plies: int = 0,
) -> Replay:
    """Recomputes every position's value target from the outcome of its game.

    target = (1 - w) * z + w * q, with z the game result from the mover's view (draw
    0) and q the search value; for a game cut at the maximum length z is 0
    (``truncated_value="zero"``) or q (``"search"``). w is ``search_value_weight`` for
    plies searched in full and ``reduced_search_value_weight`` for the playout caps'
    reduced searches (< 0: the same w), whose q rests on a visit or two of each move.
    With ``search_value_plies`` = k > 0, q is the search value k plies later in the same
    game, turned to this mover's view, where exchanges under way have been played out;
    z where the game ends sooner. Positions of running games have no target yet.
    """
    capacity = replay.filled.shape[0]
    newest_first = (replay.next_row - 1 - jnp.arange(capacity)) % capacity
    p = replay.plies

    class Carry(NamedTuple):
        known: Array  # [B] bool
        outcome_black: Array  # [B] float32
        truncated: Array  # [B] bool

    def backwards(carry: Carry, row):
        ends = p.ends_game[row] & replay.filled[row]
        carry = Carry(
            known=carry.known | ends,
            outcome_black=jnp.where(ends, p.outcome_black[row], carry.outcome_black),
            truncated=jnp.where(ends, p.truncated[row], carry.truncated),
        )
        here = carry
        # The row before a game's first position belongs to another game.
        starts = p.starts_game[row]
        carry = carry._replace(known=carry.known & ~starts)
        return carry, here

    games = replay.filled.shape[1]
    zeros = Carry(jnp.zeros(games, jnp.bool_), jnp.zeros(games, jnp.float32), jnp.zeros(games, jnp.bool_))
    _, rows = jax.lax.scan(backwards, zeros, newest_first)
    order = jnp.argsort(newest_first)  # back to buffer order
    known = rows.known[order] & replay.filled
    mover_sign = jnp.where(p.color == 0, 1.0, -1.0)
    z = rows.outcome_black[order] * mover_sign
    q = p.search_value
    if truncated_value == "search":
        z = jnp.where(rows.truncated[order], q, z)
    if search_value_plies > 0:
        q = _search_value_later(replay, search_value_plies, z)
    w = search_value_weight
    if reduced_search_value_weight >= 0:
        w = jnp.where(p.full_search, search_value_weight, reduced_search_value_weight)
    target = (1.0 - w) * z + w * q
    return replay._replace(value_known=known, value_target=jnp.where(known, target, 0.0))


def _search_value_later(replay: Replay, plies: int, outcome: Array) -> Array:
    """Each position's search value ``plies`` plies later in its game, from its own mover's
    view, or ``outcome`` [R, B] where the game ends sooner: [R, B] float32. Read only
    where the game has ended, so that its later rows are in the buffer."""
    capacity, games = replay.filled.shape
    row, column, later = _later_rows(replay, jnp.arange(capacity * games), plies)
    p = replay.plies
    same_mover = p.color[later, column] == p.color[row, column]
    q = jnp.where(same_mover, 1.0, -1.0) * p.search_value[later, column]
    ended_sooner = (later - row) % capacity < plies  # ``later`` stops at the game's last row
    return jnp.where(ended_sooner, outcome.reshape(-1), q).reshape(capacity, games)


class Batch(NamedTuple):
    board: Array  # [N, 81] int8
    hand: Array  # [N, 2, 7] int8
    policy: Array  # [N, A] float32
    policy_weight: Array  # [N] float32, 1 for a full search's policy, a reduced search's weight (0 by default)
    value: Array  # [N] float32
    material: Array | None = None  # [N] float32, the mover's material k plies later (``future_material``)
    occupancy: Array | None = None  # [N, 81] int32, each square's occupant k plies later (``future_occupancy``)
    reply: Array | None = None  # [N, A] float32, the opponent's policy target at the next ply (``next_policy``)
    reply_weight: Array | None = None  # [N] float32, 1 where that ply exists and was searched in full


def _later_rows(replay: Replay, index: Array, plies: int) -> tuple[Array, Array, Array]:
    """For each flat ``index`` [N]: (its row, its column, the row ``plies`` plies later in
    the same game, or of its last position when it ends sooner), each [N] int32. Only for
    positions whose game has ended (``value_known``): their game's later rows are all in
    the buffer, up to its end."""
    capacity, games = replay.filled.shape
    row, column = index // games, index % games
    ahead = (row[:, None] + jnp.arange(plies + 1)) % capacity  # [N, k+1]
    ends = replay.plies.ends_game[ahead, column[:, None]] & replay.filled[ahead, column[:, None]]
    first_end = jnp.where(ends.any(-1), jnp.argmax(ends, -1), plies)
    return row, column, ahead[jnp.arange(index.shape[0]), first_end]


def future_material(replay: Replay, index: Array, plies: int) -> Array:
    """The material balance (``movegen.material``, in pawns, from the view of the mover
    at each flat ``index`` [N]) ``plies`` plies later in the same game, or at its last
    position when it ends sooner: [N] float32."""
    row, column, later = _later_rows(replay, index, plies)
    p = replay.plies
    balance = movegen.material(p.board[later, column], p.hand[later, column])
    same_mover = p.color[later, column] == p.color[row, column]
    return jnp.where(same_mover, balance, -balance)


EMPTY, OWN, OPPONENT = 0, 1, 2  # the occupancy classes


def future_occupancy(replay: Replay, index: Array, plies: int) -> Array:
    """Each square's occupant ``plies`` plies later in the same game, or at its last
    position when it ends sooner, in the frame and from the view of the mover at each
    flat ``index`` [N]: [N, 81] int32, ``EMPTY``, ``OWN`` or ``OPPONENT``. A piece of the
    mover's that is captured in between stands as the capturer's or as empty."""
    row, column, later = _later_rows(replay, index, plies)
    p = replay.plies
    board = p.board[later, column].astype(jnp.int32)  # [N, 81], the later mover's frame
    same_mover = (p.color[later, column] == p.color[row, column])[:, None]
    # The other mover's frame is the board turned half a turn, with the sides swapped.
    board = jnp.where(same_mover, board, board[:, ::-1])
    theirs = board >= 14
    own = jnp.where(same_mover, ~theirs, theirs)
    return jnp.where(board < 0, EMPTY, jnp.where(own, OWN, OPPONENT))


def next_policy(replay: Replay, index: Array) -> tuple[Array, Array]:
    """The policy target of the ply after each flat ``index`` [N] in the same game, the
    opponent's search in the opponent's frame: ([N, A] float32, [N] float32 weight, 1
    where the game went on and that ply was searched in full, else 0 with a zero policy).
    Only for positions whose game has ended (``_later_rows``)."""
    row, column, after = _later_rows(replay, index, 1)
    p = replay.plies
    weight = (after != row) & p.full_search[after, column]  # ``after`` is ``row`` where the game ended there
    policy = jnp.where(weight[:, None], p.policy[after, column].astype(jnp.float32), 0.0)
    return policy, weight.astype(jnp.float32)


def sample(replay: Replay, rng_key: Array, size: int, *, mirror: bool = False, material_plies: int = -1,
           occupancy_plies: int = -1, reply: bool = False, reduced_policy_weight: float = 0.0) -> Batch:
    """``size`` positions drawn uniformly (with replacement) among those with a target;
    with ``mirror``, each is mirrored left to right (board, policy and occupancy) with
    probability 1/2; with ``material_plies`` >= 0, each comes with its ``future_material``
    that many plies on, with ``occupancy_plies`` >= 0 its ``future_occupancy``, with
    ``reply`` its ``next_policy``. A full search's policy has weight 1, a reduced
    search's ``reduced_policy_weight`` (0: KataGo's playout caps, no policy target)."""
    known = replay.value_known.reshape(-1)
    weights = known / jnp.maximum(known.sum(), 1)
    weights = jnp.where(known.any(), weights, 1.0 / known.shape[0])
    index = jax.random.choice(rng_key, known.shape[0], (size,), p=weights)
    flat = jax.tree.map(lambda a: a.reshape(-1, *a.shape[2:]), replay.plies)
    board, policy = flat.board[index], flat.policy[index].astype(jnp.float32)
    occupancy = future_occupancy(replay, index, occupancy_plies) if occupancy_plies >= 0 else None
    reply_policy, reply_weight = next_policy(replay, index) if reply else (None, None)
    if mirror:
        flip = jax.random.bernoulli(jax.random.fold_in(rng_key, 1), 0.5, (size,))
        board = jnp.where(flip[:, None], movegen.mirror_board(board), board)
        policy = jnp.where(flip[:, None], policy[:, movegen.MIRRORED_ACTIONS], policy)
        if occupancy is not None:
            occupancy = jnp.where(flip[:, None], movegen.mirror_board(occupancy), occupancy)
        if reply_policy is not None:  # left and right are the same files in both frames
            reply_policy = jnp.where(flip[:, None], reply_policy[:, movegen.MIRRORED_ACTIONS], reply_policy)
    return Batch(
        board=board,
        hand=flat.hand[index],
        policy=policy,
        policy_weight=jnp.where(flat.full_search[index], 1.0, reduced_policy_weight).astype(jnp.float32),
        value=replay.value_target.reshape(-1)[index],
        material=future_material(replay, index, material_plies) if material_plies >= 0 else None,
        occupancy=occupancy,
        reply=reply_policy,
        reply_weight=reply_weight,
    )
