"""Shared helpers for the environment tests: host slicing, SFEN transforms, the cshogi oracle.

cshogi aborts the whole process on a malformed SFEN, so every SFEN built here goes
through ``envs.notation.parse_sfen`` before cshogi sees it.
"""

import cshogi
import jax
import jax.numpy as jnp
import numpy as np

from envs import env, notation


# Host-side views of (batched) states ----------------------------------------------


def to_host(tree):
    """A pytree of device arrays as numpy arrays."""
    return jax.device_get(tree)


def take(tree, i):
    """Game ``i`` of a batched pytree (works on host numpy batches)."""
    return jax.tree.map(lambda a: a[i], tree)


def our_moves(state) -> dict[str, int]:
    """USI -> action for every legal action of one (unbatched, host or device) state."""
    return notation._legal_table(state)


# SFEN helpers ----------------------------------------------------------------------


def cshogi_board(sfen: str) -> cshogi.Board:
    """A cshogi board for an SFEN that passed our validation first."""
    board, hands, color, number = notation.parse_sfen(sfen)
    return cshogi.Board(notation._format_sfen(board, hands, color, number))


def normalized(sfen: str) -> str:
    """cshogi's canonical form of a (valid) SFEN."""
    return cshogi_board(sfen).sfen()


def cshogi_moves(board: cshogi.Board) -> set[str]:
    return {cshogi.move_to_usi(m) for m in board.legal_moves}


def sfen_of_mover_frame(board, hand, color, move_number=1) -> str:
    """Canonical SFEN of a position given in the mover's frame (like ``GameState``)."""
    board, hand = notation._to_mover_frame(np.asarray(board), np.asarray(hand), int(color))
    text = notation._format_sfen(board, hand, int(color), int(move_number))
    notation.parse_sfen(text)  # never hand cshogi something malformed
    return cshogi.Board(text).sfen()


def rotate_sfen(sfen: str) -> str:
    """The same position with the colours swapped (board rotated 180 degrees)."""
    board, hands, color, number = notation.parse_sfen(sfen)
    rotated = np.where(board >= 0, (board + 14) % 28, -1)[::-1]
    return normalized(notation._format_sfen(rotated, hands[::-1], 1 - color, number))


def mirror_sfen(sfen: str) -> str:
    """The same position mirrored left-right (file f -> 10 - f)."""
    board, hands, color, number = notation.parse_sfen(sfen)
    mirrored = board.reshape(9, 9)[::-1].reshape(81)
    return normalized(notation._format_sfen(mirrored, hands, color, number))


def drop_move_number(sfen: str) -> str:
    return sfen.rsplit(" ", 1)[0]


# Playing moves ---------------------------------------------------------------------


def play_line(state: env.State, moves, rules: env.Rules = env.Rules()) -> list[env.State]:
    """Plays USI ``moves`` one by one with the (cached) jitted step; all states, start first."""
    _, step = notation._compiled(rules)
    states = [state]
    for move in moves.split() if isinstance(moves, str) else moves:
        states.append(step(states[-1], jnp.int32(notation.usi_to_action(states[-1], move))))
    return states


def pick_move(rng: np.random.Generator, board: cshogi.Board, moves: list[int], biased: bool) -> int:
    """A random legal move; ``biased`` favours captures, drops, checks and promotions."""
    if not biased:
        return moves[rng.integers(len(moves))]
    checks = set(board.check_moves)
    weights = np.ones(len(moves))
    for i, m in enumerate(moves):
        if cshogi.move_is_drop(m):
            weights[i] += 3.0
        else:
            if board.piece(cshogi.move_to(m)) != cshogi.NONE:
                weights[i] += 6.0
            if cshogi.move_is_promotion(m):
                weights[i] += 4.0
        if m in checks:
            weights[i] += 6.0
    return moves[rng.choice(len(moves), p=weights / weights.sum())]


def reference_repetition(keys: list[str], checks: list[bool], repetitions: int = 4):
    """Repetition judged from the list of positions (newest last), independently of hashing.

    ``keys[p]`` identifies the position at ply p (SFEN without move number), ``checks[p]``
    whether its mover is in check. Returns None (no repetition) or the result for the
    side to move of the newest position: 0 draw, -1 it checked throughout, +1 the
    opponent did.
    """
    newest = len(keys) - 1
    same = [p for p in range(newest) if keys[p] == keys[newest]]
    if len(same) + 1 < repetitions:
        return None
    first = same[0]
    # positions first+1..newest; those at odd distance from newest were reached by the
    # side to move's own moves, those at even distance by the opponent's.
    span = range(first + 1, newest + 1)
    opponent_checked = all(checks[p] for p in span if (newest - p) % 2 == 0)
    mover_checked = all(checks[p] for p in span if (newest - p) % 2 == 1)
    return 1 if opponent_checked else (-1 if mover_checked else 0)
