"""The shogi core: board update, legal-action mask, check test and observation.

Every other module reaches move generation through the four functions here, so a
faster generator can replace pgx's behind them and be checked by the same tests.

The position is pgx's ``GameState`` (``x``), always seen from the side to move:
``board`` [81] int32 holds -1 for empty, 0..13 for the mover's pieces and 14..27
for the opponent's (pgx order: P L N S B R G K +P +L +N +S +B +R); square
``file_index * 9 + rank_index`` (``0`` is 1a in the mover's frame); ``hand`` [2, 7]
int32 counts P L N S B R G, row 0 the mover's; ``color`` 0 when black moves.

Actions are pgx's dlshogi encoding, A = 2187 = 27 directions x 81 target squares:
directions 0-9 move (up, up-left, up-right, left, right, down, down-left, down-right,
knight-left, knight-right), 10-19 the same with promotion, 20-26 drop P L N S B R G.
"""

import jax
import jax.numpy as jnp
from jax import Array
from pgx._src.games import shogi as pgx_shogi

GameState = pgx_shogi.GameState

NUM_ACTIONS = 27 * 81
PAWN_DROP = 20  # direction index of a pawn drop
OBSERVATION_SHAPE = (9, 9, 119)


def legal_action_mask(x: GameState) -> Array:
    """Legal actions of the side to move: [2187] bool.

    pgx's generator, with its pawn-drop-mate test replaced where it is wrong: pgx
    lets the mated king "escape" to off-board squares (its neighbour index -1 wraps
    to square 80), so a pawn-drop mate of a king on the edge is allowed there.
    """
    mask = pgx_shogi._legal_action_mask(x)
    is_mate, to = _pawn_drop_mates(x)
    index = PAWN_DROP * 81 + to
    return mask.at[index].set(mask[index] & ~is_mate)


def _pawn_drop_mates(x: GameState) -> tuple[Array, Array]:
    """Would a pawn dropped in front of the enemy king mate it? -> (bool, square)."""
    enemy_king = jnp.argmin(jnp.abs(x.board - pgx_shogi.OPP_KING)).astype(jnp.int32)
    has_square = enemy_king % 9 != 8  # the square in front of it (towards us) exists
    to = jnp.where(has_square, enemy_king + 1, enemy_king)
    # The defender's view after the drop.
    defender = pgx_shogi._set_cache(pgx_shogi._flip(x._replace(board=x.board.at[to].set(pgx_shogi.PAWN))))
    pawn_square = 80 - to
    king_square = 80 - enemy_king

    def legal(from_, to_):
        return pgx_shogi._is_legal_move_wo_pro(from_, to_, defender)

    capturers = pgx_shogi.CAN_MOVE_ANY[pawn_square]  # [36], -1 padded (pgx rejects from_ < 0)
    can_capture = jax.vmap(legal, (0, None))(capturers, pawn_square).any()
    escapes = pgx_shogi.AROUND_IX[king_square]  # [8], -1 where off the board
    can_escape = ((escapes >= 0) & jax.vmap(legal, (None, 0))(king_square, jnp.maximum(escapes, 0))).any()
    return has_square & ~can_capture & ~can_escape, to


def play(x: GameState, action: Array) -> GameState:
    """Plays a legal ``action`` and returns the position seen by the new mover.

    The returned state's ``legal_action_mask`` is already computed.
    """
    move = pgx_shogi.Action._from_dlshogi_action(x, action)
    x = jax.lax.cond(move.is_drop, pgx_shogi._step_drop, pgx_shogi._step_move, x, move)
    x = pgx_shogi._flip(x)
    x = x._replace(color=1 - x.color, step_count=x.step_count + 1)
    return x._replace(legal_action_mask=legal_action_mask(x))


def in_check(x: GameState) -> Array:
    """Is the side to move in check? [] bool."""
    return pgx_shogi._is_checked(pgx_shogi._set_cache(x))


def observe(x: GameState) -> Array:
    """pgx's 119 feature planes from the mover's view: [9, 9, 119] bool.

    Planes: 14 own piece kinds, 14 own attack maps, 3 attack counts (>=1, 2, 3),
    the same 31 for the opponent, hands (P 8, L N S G 4 each, B R 2 each) for both
    sides, and one plane set when the mover is in check.
    """
    return pgx_shogi._observe(x, True)
