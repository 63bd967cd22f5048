"""The paper's diversity measure: where each side's king and rooks stand at ply 30.

Self-play counts the squares on the device (``square_counts``); the trainer's metrics
and the report's heatmaps turn counts into entropies (``entropy_bits``) and pictures
(``board_grid``). Squares are ``file_index * 9 + rank_index`` in black's frame
(``0`` is 1a).
"""

import jax.numpy as jnp
import numpy as np
from jax import Array

PLY = 30
KINDS = (("king", (7,)), ("rook", (5, 13)))  # pgx ids of black's pieces: K; R and dragon


def black_frame_board(games) -> Array:
    """Boards in black's frame (black 0..13, white 14..27): [B, 81] int32."""
    board = games.x.board
    flipped = jnp.where(board >= 0, (board + 14) % 28, -1)[:, ::-1]
    return jnp.where((games.current_player == 0)[:, None], board, flipped)


def square_counts(games) -> Array:
    """[2 sides (black, white), 2 kinds (king, rook), 81] int32: pieces on each square,
    summed over the games standing at ply 30."""
    board = black_frame_board(games)
    at_ply = (games.ply == PLY)[:, None]
    sides = []
    for offset in (0, 14):
        kinds = []
        for _, pieces in KINDS:
            hit = jnp.zeros(board.shape, jnp.bool_)
            for piece in pieces:
                hit |= board == piece + offset
            kinds.append((hit & at_ply).sum(axis=0).astype(jnp.int32))
        sides.append(jnp.stack(kinds))
    return jnp.stack(sides)


def entropy_bits(counts) -> float:
    """Shannon entropy (bits) of the distribution ``counts`` describe; NaN when empty."""
    p = np.asarray(counts, np.float64).ravel()
    if p.sum() == 0:
        return float("nan")
    p = p[p > 0] / p.sum()
    return float(-(p * np.log2(p)).sum())


def board_grid(counts81) -> np.ndarray:
    """Counts by square -> [rank a..i, file 9..1], as a board is drawn."""
    c = np.asarray(counts81).reshape(9, 9)  # [file_index, rank]
    return c.T[:, ::-1]
