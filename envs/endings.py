"""Game-ending rules on top of the core: repetition, perpetual check, declaration.

Positions are hashed (two uint32 words, i.e. 64 bits) over the board and hands in
the mover's frame plus the side to move, so equal positions have equal hashes
whatever the move order.
"""

import jax.numpy as jnp
import numpy as np
from jax import Array

from envs.movegen import GameState

HASH_WORDS = 2

# Fixed keys, not a seed of any run: hashes must agree across processes.
_keys = np.random.default_rng(0x5A0B15)
_SQUARE_KEYS = _keys.integers(0, 2**32, size=(81, HASH_WORDS), dtype=np.uint32)
_HAND_KEYS = _keys.integers(0, 2**32, size=(2, 7, HASH_WORDS), dtype=np.uint32)
_COLOR_KEYS = _keys.integers(0, 2**32, size=(2, HASH_WORDS), dtype=np.uint32)


def position_hash(x: GameState) -> Array:
    """Hash of the position: [2] uint32.

    A random linear form mod 2^32 of the square contents (piece + 1), the hand
    counts and the side to move, one per word: multiply-adds only, no table lookups.
    Two different positions collide with probability below 2^-28 per word.
    """
    squares = (x.board + 1).astype(jnp.uint32)[:, None] * jnp.asarray(_SQUARE_KEYS)
    hands = x.hand.astype(jnp.uint32)[..., None] * jnp.asarray(_HAND_KEYS)
    color = jnp.where(x.color == 0, jnp.asarray(_COLOR_KEYS[0]), jnp.asarray(_COLOR_KEYS[1]))
    return squares.sum(axis=0, dtype=jnp.uint32) + hands.sum(axis=(0, 1), dtype=jnp.uint32) + color


def repetition_outcome(history: Array, check_history: Array, ply: Array, *, repetitions: int) -> tuple[Array, Array]:
    """Judges repetition of the newest position in a ring buffer of hashes.

    Args:
      history: [H, 2] uint32, the hash of the position at ply p stored at p % H;
        the newest position (ply ``ply``) already written.
      check_history: [H] bool, whether the mover of that position was in check.
      ply: [] int32, plies played since the game's start position.
      repetitions: how many occurrences end the game (4: sennichite).

    Returns:
      (repeated, result): ``repeated`` [] bool; ``result`` [] float32 from the
      side to move's view: 0 a draw, -1 when the side to move gave check with every
      one of its moves since the first occurrence, +1 when the opponent did.
    """
    size = history.shape[0]
    slot = jnp.arange(size)
    newest_slot = ply % size
    age = newest_slot - slot + jnp.where(slot > newest_slot, size, 0)  # plies ago each slot was written
    in_game = (age >= 1) & (age <= ply)
    newest = jnp.where((slot == newest_slot)[:, None], history, 0).sum(axis=0, dtype=jnp.uint32)
    same = in_game & (history[:, 0] == newest[0]) & (history[:, 1] == newest[1])
    repeated = same.sum() + 1 >= repetitions
    first_age = jnp.max(jnp.where(same, age, 0))  # even: same side to move
    in_span = age < first_age  # positions reached by the moves since the first occurrence
    even = (age & 1) == 0  # reached by the last mover's moves (it checked the side to move)
    opponent_checked_always = jnp.all(~(in_span & even) | check_history)
    mover_checked_always = jnp.all(~(in_span & ~even) | check_history)
    result = jnp.where(opponent_checked_always, 1.0, jnp.where(mover_checked_always, -1.0, 0.0))
    return repeated, result.astype(jnp.float32)


# Declaration points (CSA 27-point rule): rook and bishop (promoted or not) 5, others 1.
_HAND_POINTS = np.array([1, 1, 1, 1, 5, 5, 1], dtype=np.int32)  # P L N S B R G


def can_declare(x: GameState, checked: Array) -> Array:
    """Does the side to move win by entering-king declaration (CSA 27-point rule)?

    King in the enemy camp (the three far ranks), at least 10 other own pieces
    there, 28 points for black or 27 for white (pieces in the camp and in hand,
    rook and bishop 5, others 1), and not in check.
    """
    rank = jnp.arange(81) % 9
    in_camp = rank < 3
    own = (x.board >= 0) & (x.board < 14)
    king_in_camp = (in_camp & (x.board == 7)).any()
    others = own & in_camp & (x.board != 7)
    major = ((x.board & 7) == 4) | ((x.board & 7) == 5)  # B R +B +R among own pieces 0..13
    points = jnp.where(others, jnp.where(major, 5, 1), 0).sum()
    points = points + (x.hand[0] * jnp.asarray(_HAND_POINTS)).sum()
    needed = jnp.where(x.color == 0, 28, 27)
    return king_in_camp & (others.sum() >= 10) & (points >= needed) & ~checked
