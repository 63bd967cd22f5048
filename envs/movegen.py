"""The shogi core: board update, legal-action mask, check test and observation.

Every other module reaches move generation through the functions here. Two cores
sit behind them, chosen by name (``core=``, ``Rules.movegen``): ``"dense"``, the
bit-sliced whole-board generator of ``envs.dense`` (the default; its legal mask is
60-90x faster than pgx's on a CPU), and ``"pgx"`` (``envs.pgx_core``), pgx's own
generator through its public API, with its pawn-drop-mate bug fixed, kept as the
reference the tests and benchmarks compare against. Both give identical results.

The position is pgx's ``GameState`` (``x``), always seen from the side to move:
``board`` [81] int32 holds -1 for empty, 0..13 for the mover's pieces and 14..27
for the opponent's (pgx order: P L N S B R G K +P +L +N +S +B +R); square
``file_index * 9 + rank_index`` (``0`` is 1a in the mover's frame); ``hand`` [2, 7]
int32 counts P L N S B R G, row 0 the mover's; ``color`` 0 when black moves.

Actions are pgx's dlshogi encoding, A = 2187 = 27 directions x 81 target squares:
directions 0-9 move (up, up-left, up-right, left, right, down, down-left, down-right,
knight-left, knight-right), 10-19 the same with promotion, 20-26 drop P L N S B R G.
"""

from typing import NamedTuple

import jax.numpy as jnp
import numpy as np
from jax import Array

from envs import bitplanes, dense, pgx_core

# The standard start from black's view, and its 30 legal actions (tests/test_dense.py
# checks both against pgx).
_START_BOARD = (15, -1, 14, -1, -1, -1, 0, -1, 1, 16, 18, 14, -1, -1, -1, 0, 5, 2, 17, -1, 14, -1, -1, -1, 0, -1,
                3, 20, -1, 14, -1, -1, -1, 0, -1, 6, 21, -1, 14, -1, -1, -1, 0, -1, 7, 20, -1, 14, -1, -1, -1, 0,
                -1, 6, 17, -1, 14, -1, -1, -1, 0, -1, 3, 16, 19, 14, -1, -1, -1, 0, 4, 2, 15, -1, 14, -1, -1, -1, 0,
                -1, 1)
_START_ACTIONS = (5, 7, 14, 23, 25, 32, 34, 41, 43, 50, 52, 59, 61, 68, 77, 79, 115, 124, 133, 142, 187, 196, 205,
                  214, 268, 277, 286, 295, 304, 331)


class GameState(NamedTuple):
    """A position, field for field pgx's ``GameState`` (pgx's reference functions take it).

    Defined here rather than imported: pgx's shogi module builds its move tables in
    Python when imported (about 9 s on a 2-core CPU), and only the ``"pgx"`` core needs it.
    Defaults: the standard start.
    """

    step_count: Array = jnp.int32(0)
    color: Array = jnp.int32(0)  # 0 or 1
    board: Array = jnp.asarray(_START_BOARD, jnp.int32)  # [81], the mover's frame
    hand: Array = jnp.zeros((2, 7), dtype=jnp.int32)  # row 0 the mover's
    cache_m2b: Array = -jnp.ones(8, dtype=jnp.int32)  # pgx's check cache (its core only)
    cache_king: Array = jnp.int32(44)
    legal_action_mask: Array = jnp.asarray(np.isin(np.arange(27 * 81), _START_ACTIONS))


NUM_ACTIONS = 27 * 81
PAWN_DROP = 20  # direction index of a pawn drop
DROP_ACTIONS = np.arange(NUM_ACTIONS) // 81 >= PAWN_DROP  # [A] bool: the drops (directions 20-26)
OBSERVATION_SHAPE = (9, 9, 119)
BOARD_PLANES = 62  # of the 119: piece and attack planes, which vary over the board
BOARD_BYTES = dense.BOARD_BYTES  # those planes as the network reads them: 8 bytes a square
FLAGS = 57  # hands and check: constant over the board
unpack_board_planes = dense.unpack_board_planes  # [..., 648] uint8 -> [..., 9, 9, 62] bool
pack_board_planes = dense.pack_board_planes  # and back


def capture_actions(board: Array) -> Array:
    """[A] bool: the board moves (directions 0-19) onto a square the opponent holds, in
    the mover's frame ([81] board: 0-13 the mover's pieces, 14-27 the opponent's, -1
    empty); legal or not."""
    opponent = jnp.asarray(board) >= 14
    return jnp.concatenate([jnp.tile(opponent, PAWN_DROP), jnp.zeros(NUM_ACTIONS - PAWN_DROP * 81, jnp.bool_)])


def _pgx_analyze(x: GameState) -> tuple[Array, Array]:
    """pgx's legal mask with the pawn-drop mates it allows removed, and the check test."""
    mask = pgx_core.pgx_mask(x)
    is_mate, to = pgx_core.pawn_drop_mate(x.board)
    index = PAWN_DROP * 81 + to
    return mask.at[index].set(mask[index] & ~is_mate), pgx_core.in_check(x.board)


def _dense_analyze(x: GameState) -> tuple[Array, Array]:
    return dense.analyze(x.board, x.hand)


def successor(board: Array, hand: Array, action: Array) -> tuple[Array, Array]:
    """The position after a legal ``action``, seen by the new mover: (board [81], hand
    [2, 7]). The board update with masks instead of indices: no gathers or scatters."""
    action = jnp.asarray(action, jnp.int32)
    direction, to = action // 81, action % 81
    is_drop = direction >= 20
    at_to = jnp.arange(81) == to
    from_ = dense.source(board, to, direction % 10) & ~is_drop
    piece = jnp.where(from_, board, 0).sum()
    captured = jnp.where(at_to, board + 1, 0).sum() - 1  # -1: empty
    promote = (direction >= 10) & ~is_drop
    placed = jnp.where(is_drop, direction - 20, piece + 8 * promote)
    new_board = jnp.where(at_to, placed, jnp.where(from_, -1, board))
    kinds = jnp.arange(7)
    gained = (kinds == ((captured + 14) % 28) % 8) & (captured >= 0)  # +P..D revert to P..R
    spent = (kinds == direction - 20) & is_drop
    own_hand = hand[0] + gained.astype(hand.dtype) - spent.astype(hand.dtype)
    flipped = jnp.where(new_board >= 0, (new_board + 14) % 28, -1)[::-1]
    return flipped, jnp.stack([hand[1], own_hand])


def _dense_play(x: GameState, action: Array) -> GameState:
    board, hand = successor(x.board, x.hand, action)
    return x._replace(board=board, hand=hand)


CORES = {"dense": (_dense_play, _dense_analyze), "pgx": (pgx_core.play, _pgx_analyze)}


_BEHIND = pgx_core.squares_along(-1)[:8]  # [8, 81, 8]: the squares behind a move onto a square
_ALWAYS_PROMOTE = (bitplanes.P, bitplanes.B, bitplanes.R)


def unpromoted_twins(x: GameState) -> Array:
    """The legal plain moves of a pawn, bishop or rook whose promoted twin is legal
    too: [2187] bool, True only in directions 0-7.

    Promoting such a piece loses nothing (it keeps every move and gains more), so shogi
    engines' move generators leave these moves out of their search (Apery's and
    YaneuraOu's generate them only on request). Lances, knights and silvers keep both.
    The mover of a legal move onto ``to`` is the first piece behind it (dlshogi encoding).
    """
    padded = jnp.concatenate([x.board, jnp.full((1,), -1, x.board.dtype)])
    behind = padded[_BEHIND]  # [8, 81, 8]
    first = jnp.argmax(behind >= 0, axis=-1)
    mover = jnp.take_along_axis(behind, first[..., None], axis=-1)[..., 0]
    mask = x.legal_action_mask.reshape(27, 81)
    twins = jnp.isin(mover, jnp.asarray(_ALWAYS_PROMOTE)) & mask[:8] & mask[10:18]
    return jnp.concatenate([twins, jnp.zeros((19, 81), jnp.bool_)]).reshape(NUM_ACTIONS)


def _mirrored_actions() -> np.ndarray:
    """[2187] int32: each action's image when the board is mirrored left to right (file
    f to 10 - f). Moves swap their left and right directions; drops keep their piece."""
    direction_image = list(range(27))  # drops (20-26) keep theirs
    for d, (d_file, d_rank) in enumerate(bitplanes.MOVES):
        direction_image[d] = bitplanes.MOVES.index((-d_file, d_rank))
        direction_image[d + 10] = direction_image[d] + 10  # the same move, promoting
    square_image = [(8 - to // 9) * 9 + to % 9 for to in range(81)]
    return np.array([direction_image[a // 81] * 81 + square_image[a % 81] for a in range(NUM_ACTIONS)], np.int32)


MIRRORED_ACTIONS = _mirrored_actions()


def mirror_board(board: Array) -> Array:
    """[..., 81] board -> the same position mirrored left to right (file f to 10 - f).

    Shogi's rules do not tell the files apart, so the mirrored position has the mirrored
    legal moves (``MIRRORED_ACTIONS``) and the same value: a free second sample of every
    position for the learner."""
    return board.reshape(*board.shape[:-1], 9, 9)[..., ::-1, :].reshape(board.shape)


# Material in pawns, as the greedy player counts it (az/play/players.py): pgx's piece order.
PIECE_VALUES = np.array([1, 3, 4, 5, 8, 10, 6, 0, 6, 6, 6, 6, 10, 12], np.float32)  # P L N S B R G K +P..+R
HAND_VALUES = np.array([1, 3, 4, 5, 8, 10, 6], np.float32)  # P L N S B R G


def material(board: Array, hand: Array) -> Array:
    """The mover's material minus the opponent's, board and hands, in pawns:
    [..., 81], [..., 2, 7] -> [...] float32."""
    values = jnp.asarray(np.concatenate([PIECE_VALUES, -PIECE_VALUES, [0.0]]))
    on_board = values[jnp.where(board >= 0, board, 28)].sum(-1)
    in_hand = (hand[..., 0, :] * HAND_VALUES).sum(-1) - (hand[..., 1, :] * HAND_VALUES).sum(-1)
    return on_board + in_hand


def _core(core: str):
    if core not in CORES:
        raise ValueError(f"movegen core must be one of {sorted(CORES)}, got {core!r}")
    return CORES[core]


def advance(x: GameState, action: Array, core: str = "dense") -> tuple[GameState, Array]:
    """Plays a legal ``action``: (the position seen by the new mover, its mover in check).

    The returned state's ``legal_action_mask`` is already computed.
    """
    play_, analyze_ = _core(core)
    x = play_(x, action)
    x = x._replace(color=1 - x.color, step_count=x.step_count + 1)
    mask, checked = analyze_(x)
    return x._replace(legal_action_mask=mask), checked


def play(x: GameState, action: Array, core: str = "dense") -> GameState:
    """Plays a legal ``action``; the new position has its legal mask."""
    return advance(x, action, core)[0]


def analyze(x: GameState, core: str = "dense") -> tuple[Array, Array]:
    """(legal actions [2187] bool, the side to move is in check [] bool)."""
    return _core(core)[1](x)


def legal_action_mask(x: GameState, core: str = "dense") -> Array:
    """Legal actions of the side to move: [2187] bool."""
    return analyze(x, core)[0]


def in_check(x: GameState, core: str = "dense") -> Array:
    """Is the side to move in check? [] bool."""
    return analyze(x, core)[1]


def observe(x: GameState, core: str = "dense") -> Array:
    """pgx's 119 feature planes from the mover's view: [9, 9, 119] bool.

    Planes: 14 own piece kinds, 14 own attack maps, 3 attack counts (>=1, 2, 3),
    the same 31 for the opponent, hands (P 8, L N S G 4 each, B R 2 each) for both
    sides, and one plane set when the mover is in check.
    """
    _core(core)  # validates the name
    if core == "pgx":
        return pgx_core.observe(x)
    return dense.observe(x.board, x.hand)


def observe_parts(x: GameState, core: str = "dense") -> tuple[Array, Array]:
    """``observe`` in the network's form: (the 62 planes that vary over the board, packed
    [648] uint8 (``dense.observe_parts_batch`` gives the layout; ``unpack_board_planes``
    restores them), the 57 constant ones as flags [57] bool)."""
    _core(core)
    if core == "pgx":
        full = pgx_core.observe(x)
        return pack_board_planes(full[..., :BOARD_PLANES]), full[0, 0, BOARD_PLANES:]
    return dense.observe_parts(x.board, x.hand)
