"""The ``"pgx"`` move generator: the reference the dense core (``envs.dense``) is tested
and benchmarked against.

Moves, legal masks and observations are pgx's, through its public ``pgx.shogi.Game``.
What that API does not offer is written here, square by square and independent of the
bit-sliced code: the check test, and the pawn-drop-mate test that ``envs.movegen`` uses
to correct pgx's mask (pgx lets a mated king "escape" to off-board squares: its
neighbour index -1 wraps to square 80, so a pawn-drop mate of a king on the edge is
allowed there).

Positions are ``envs.movegen.GameState`` (pgx's fields), in the mover's frame: board
[81] int32 (-1 empty, 0..13 the mover's pieces, 14..27 the opponent's), square
``file_index * 9 + rank_index``; directions are pgx's (``envs.bitplanes.MOVES``).
"""

import functools

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from envs import bitplanes

_KING, _THEIR_KING = 7, 21


def squares_along(sign: int) -> np.ndarray:
    """[10, 81, 8] int32: from square ``to``, the squares ``to + sign * k * MOVES[d]`` for
    k = 1..8, nearest first, 81 (off the board) past the edge; a knight's jump (d = 8, 9)
    has only k = 1. ``sign`` -1: where a piece of the mover that moves in d onto ``to``
    can stand; +1: where an opponent's piece that moves in d (the other way) can."""
    table = np.full((10, 81, 8), 81, np.int32)
    for d, (d_file, d_rank) in enumerate(bitplanes.MOVES):
        for to in range(81):
            file_index, rank = divmod(to, 9)
            for k in range(1 if d >= 8 else 8):
                file_index, rank = file_index + sign * d_file, rank + sign * d_rank
                if not (0 <= file_index < 9 and 0 <= rank < 9):
                    break
                table[d, to, k] = file_index * 9 + rank
    return table


_BEHIND = squares_along(-1)  # [10, 81, 8]
_AHEAD = squares_along(1)  # [10, 81, 8]


def _kind_table(kinds_by_direction) -> np.ndarray:
    """[10, 14] bool: does piece kind p (in its owner's frame) move in direction d?"""
    table = np.zeros((10, 14), np.bool_)
    for d, kinds in enumerate(kinds_by_direction):
        table[d, list(kinds)] = True
    return table


_STEPS = _kind_table(bitplanes.STEPPERS)  # one square (or a knight's jump)
_SLIDES = _kind_table(bitplanes.SLIDERS)  # any number of empty squares, then one


@functools.cache
def _game():
    """pgx's public shogi game, imported on first use: its module computes move tables
    when imported (about 9 s on a 2-core CPU), also when that happens inside a trace."""
    with jax.ensure_compile_time_eval():
        from pgx.shogi import Game

    return Game()


def flip_board(board: Array) -> Array:
    """[81] board -> the same position seen by the other side (colours swapped, rotated)."""
    return jnp.where(board >= 0, (board + 14) % 28, -1)[::-1]


def _first_pieces(board: Array, table: np.ndarray, square: Array) -> tuple[Array, Array, Array]:
    """Along each of the 10 lines of ``table`` from ``square``, the first piece: (piece [10]
    (-1 on an empty line), its square [10] (81 there), distance [10] (1 = adjacent))."""
    lines = jnp.asarray(table)[:, square]  # [10, 8]
    padded = jnp.concatenate([board, jnp.full((1,), -1, board.dtype)])
    first = jnp.argmax(padded[lines] >= 0, axis=-1)  # [10]
    where = jnp.take_along_axis(lines, first[:, None], axis=-1)[:, 0]
    return padded[where], where, first + 1


def _moves_onto(piece: Array, distance: Array, own: int) -> Array:
    """[10] bool: the first pieces found along the 10 lines, of the side whose ids start at
    ``own`` (0 the mover, 14 the opponent), that move in that line's direction onto the square."""
    kind = piece - own
    ours = (kind >= 0) & (kind < 14)
    kind = jnp.where(ours, kind, 0)
    d = np.arange(10)
    return ours & ((jnp.asarray(_STEPS)[d, kind] & (distance == 1)) | jnp.asarray(_SLIDES)[d, kind])


def attacked(board: Array, square: Array) -> Array:
    """Does the opponent (pieces 14..27) attack ``square``? [] bool."""
    piece, _, distance = _first_pieces(board, _AHEAD, square)
    return _moves_onto(piece, distance, 14).any()


def in_check(board: Array) -> Array:
    """Is the mover's king attacked? [] bool."""
    return attacked(board, jnp.argmax(board == _KING))


def _safe_after(board: Array, king: Array, from_: Array, to: Array) -> Array:
    """Is the mover's king (on ``king``) safe after its piece moves ``from_`` -> ``to``?"""
    after = board.at[to].set(board[from_]).at[from_].set(-1)
    return ~attacked(after, jnp.where(from_ == king, to, king))


def pawn_drop_mate(board: Array) -> tuple[Array, Array]:
    """Would a pawn dropped in front of the opponent's king mate it? -> ([] bool, the
    square [] int32). Mate: no piece of the defender may take the pawn and no king move is
    safe, each tried on the board after it (so pins and uncovered lines count)."""
    their_king = jnp.argmax(board == _THEIR_KING).astype(jnp.int32)
    has_square = their_king % 9 != 8  # the square in front of it (towards us) exists
    to = jnp.where(has_square, their_king + 1, their_king)
    defender = flip_board(board.at[to].set(0))  # the defender's view after the drop
    pawn, king = 80 - to, 80 - their_king

    piece, source, distance = _first_pieces(defender, _BEHIND, pawn)
    source = jnp.minimum(source, 80)  # empty lines: masked by _moves_onto
    safe = jax.vmap(_safe_after, (None, None, 0, None))(defender, king, source, pawn)
    can_capture = (_moves_onto(piece, distance, 0) & safe).any()

    steps = jnp.asarray(_AHEAD)[:8, king, 0]  # the king's neighbours in its own frame, 81 off the board
    target = jnp.minimum(steps, 80)
    open_square = (steps < 81) & ~((defender[target] >= 0) & (defender[target] < 14))
    can_escape = (open_square & jax.vmap(_safe_after, (None, None, None, 0))(defender, king, king, target)).any()
    return has_square & ~can_capture & ~can_escape, to


def pgx_mask(x) -> Array:
    """pgx's own legal mask of the side to move: [2187] bool, its pawn-drop-mate test
    included (wrong for a king on the edge; ``pawn_drop_mate`` corrects it)."""
    return _game().legal_action_mask(x)


def play(x, action: Array):
    """The position after a legal ``action``, seen by the new mover; ``color``,
    ``step_count`` and the legal mask are left to the caller (pgx's own mask, computed by
    its step, is unused and compiled away)."""
    after = _game().step(x, action)
    return after._replace(color=x.color, step_count=x.step_count, legal_action_mask=x.legal_action_mask)


def observe(x) -> Array:
    """pgx's observation from the mover's view: [9, 9, 119] bool. pgx's ``Game.observe``
    sees a position from the side not to move, so it is given the flipped one."""
    return _game().observe(x._replace(board=flip_board(x.board), hand=x.hand[::-1]))
