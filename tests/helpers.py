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
    return notation.legal_actions(state)


# SFEN helpers ----------------------------------------------------------------------


def cshogi_board(sfen: str) -> cshogi.Board:
    """A cshogi board for an SFEN that passed our validation first."""
    board, hands, color, number = notation.parse_sfen(sfen)
    return cshogi.Board(notation.format_sfen(board, hands, color, number))


def normalized(sfen: str) -> str:
    """cshogi's canonical form of a (valid) SFEN."""
    return cshogi_board(sfen).sfen()


def cshogi_moves(board: cshogi.Board) -> set[str]:
    return {cshogi.move_to_usi(m) for m in board.legal_moves}


def sfen_of_mover_frame(board, hand, color, move_number=1) -> str:
    """Canonical SFEN of a position given in the mover's frame (like ``GameState``)."""
    board, hand = notation.to_mover_frame(np.asarray(board), np.asarray(hand), int(color))
    text = notation.format_sfen(board, hand, int(color), int(move_number))
    notation.parse_sfen(text)  # never hand cshogi something malformed
    return cshogi.Board(text).sfen()


def rotate_sfen(sfen: str) -> str:
    """The same position with the colours swapped (board rotated 180 degrees)."""
    board, hands, color, number = notation.parse_sfen(sfen)
    rotated = np.where(board >= 0, (board + 14) % 28, -1)[::-1]
    return normalized(notation.format_sfen(rotated, hands[::-1], 1 - color, number))


def mirror_sfen(sfen: str) -> str:
    """The same position mirrored left-right (file f -> 10 - f)."""
    board, hands, color, number = notation.parse_sfen(sfen)
    mirrored = board.reshape(9, 9)[::-1].reshape(81)
    return normalized(notation.format_sfen(mirrored, hands, color, number))


def drop_move_number(sfen: str) -> str:
    return sfen.rsplit(" ", 1)[0]


# Playing moves ---------------------------------------------------------------------


def play_line(state: env.State, moves, rules: env.Rules = env.Rules()) -> list[env.State]:
    """Plays USI ``moves`` one by one with the (cached) jitted step; all states, start first."""
    step = notation.jitted_step(rules)
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


# Random scattered positions ----------------------------------------------------------

_KINDS = [0] * 18 + [1] * 4 + [2] * 4 + [3] * 4 + [6] * 4 + [4] * 2 + [5] * 2  # P L N S G B R, pgx ids
_KING = 7


def _placeable(board, square: int, piece: int, owner: int) -> bool:
    """Whether an unpromoted ``piece`` of ``owner`` may stand on ``square`` (black's frame)."""
    rank = square % 9
    ahead = rank if owner == 0 else 8 - rank  # ranks left in front of the piece
    if piece in (0, 1) and ahead == 0 or piece == 2 and ahead < 2:
        return False
    if piece == 0:  # no second unpromoted pawn of the same owner on the file
        file_ = board[square - rank:square - rank + 9]
        return not (file_ == 14 * owner).any()
    return True


def random_scattered_sfen(rng: np.random.Generator, crowd_enemy_king: bool = False) -> str:
    """A random legal position with all 40 pieces over both boards and hands.

    Each non-king piece goes to a random owner, to the hand (1 in 4) or a random empty
    square, promoted there with probability 0.3 when it can be; unpromoted pieces
    never stand where they could not move, and no file holds two unpromoted pawns of
    one side. The side to move is random and the other side is not in check. With
    ``crowd_enemy_king`` the side to move gets a pawn in hand (its pawns on the board
    promoted) and the pieces first fill the squares around the other king, the one in
    front of it left empty: pawn-drop mates become common.
    """
    while True:
        board = np.full(81, -1, np.int64)
        hands = np.zeros((2, 7), np.int64)
        color = int(rng.integers(2))
        kings = rng.choice(81, size=2, replace=False)  # [0] black's, [1] white's
        board[kings[0]], board[kings[1]] = _KING, 14 + _KING
        enemy_king = int(kings[1 - color])
        keep_empty = -1
        near = []
        if crowd_enemy_king:
            f, r = divmod(enemy_king, 9)
            front = r + 1 if color == 0 else r - 1  # where the mover's pawn would drop
            if not 0 <= front <= 8:
                continue
            keep_empty = f * 9 + front
            if board[keep_empty] >= 0:
                continue
            near = [x * 9 + y for x in range(f - 2, f + 3) for y in range(r - 2, r + 3)
                    if 0 <= x <= 8 and 0 <= y <= 8 and board[x * 9 + y] < 0 and x * 9 + y != keep_empty]
        kinds = list(rng.permutation(_KINDS))
        if crowd_enemy_king:
            kinds.remove(0)
            hands[color, 0] += 1
        for i, kind in enumerate(kinds):
            owner = int(rng.integers(2))
            if rng.random() < 0.25:
                hands[owner, kind] += 1
                continue
            crowd = crowd_enemy_king and bool(near)
            square = int(rng.choice(near) if crowd else rng.choice(np.flatnonzero(board < 0)))
            if square == keep_empty or board[square] >= 0:
                hands[owner, kind] += 1
                continue
            if crowd:
                near.remove(square)
            promoted = kind != 6 and (rng.random() < 0.3 or not _placeable(board, square, kind, owner))
            promoted |= crowd_enemy_king and kind == 0 and owner == color  # keeps every file open to a drop
            board[square] = 14 * owner + (kind + 8 if promoted else kind)
        sfen = notation.format_sfen(board, hands, color, 1)
        try:
            notation.parse_sfen(sfen)  # rejects the side not to move being in check
        except ValueError:
            continue
        return cshogi.Board(sfen).sfen()


# Mates in one -------------------------------------------------------------------

# Positions where some moves let the opponent mate in one and others do not (found in
# random games and scattered positions), and one where every move does.
MIXED_THREATS = [
    "1n1k2s2/1Sgsr2p+P/l5n1p/3p2p2/PP1sp4/2P3PP1/p2PPKG1P/L1pG2l1L/B+n+p2B1N1 b GPr 121",
    "1n1gk1+S1+L/l1bb1r3/ppp2p3/3pp2+Pp/9/PPPN4P/L1SGN1PG1/2K2+nS1L/7S1 w RG2P3p 122",
    "+P2+PS1+P+P1/3p4l/2p4pP/3n5/2nK3+B1/b+P5+ln/L1+p+p+Ps3/Pl5R1/4S3k w RGS2P3gn3p 1",
    "1rs1k1sn1/2gsB1g1l/l2p1+R1p1/Lp3p2p/2+B1pP3/NP1PG3P/2G+s2PPL/5K3/P5NN1 w 5P 102",
    "l1s1gp1n1/r3psgb1/pp+P3pPp/3p3+R1/3k2P1n/P3P3N/NP1GS2GP/LB2K2l1/4S3L w 4P 70",
]
ALL_THREATS = "5k+pG1/9/PRlpG2+P1/L+b1+p1R2s/1Np2+p3/2+pG+p4/n1+b1N2P1/1pS2K3/1+l6P w GSLPsn5p 1"


def mate_in_one_after(sfen: str) -> dict[str, bool]:
    """cshogi: each legal move (USI) -> the opponent then has a move that leaves no legal reply."""
    board = cshogi.Board(sfen)
    refuted = {}
    for move in list(board.legal_moves):
        board.push(move)
        replies = list(board.legal_moves)
        refuted[cshogi.move_to_usi(move)] = False
        for reply in replies:
            board.push(reply)
            over = board.is_game_over()
            board.pop()
            if over:
                refuted[cshogi.move_to_usi(move)] = True
                break
        board.pop()
    return refuted


def cshogi_checks(sfen: str) -> list[str]:
    """The legal checking moves (USI)."""
    return [cshogi.move_to_usi(m) for m in _checks(cshogi.Board(sfen))]


def _checks(board: cshogi.Board) -> list[int]:
    checking = []
    for move in list(board.legal_moves):
        board.push(move)
        if board.is_check():
            checking.append(move)
        board.pop()
    return checking


def _mates_at_once(board: cshogi.Board) -> bool:
    """The side to move has a checking move that leaves no legal reply (a pawn-drop mate is illegal)."""
    for move in list(board.legal_moves):
        board.push(move)
        mated = board.is_check() and not any(True for _ in board.legal_moves)
        board.pop()
        if mated:
            return True
    return False


def mates_in_three(sfen: str) -> dict[str, int]:
    """cshogi, brute force: each checking move (USI) that mates at once or after which every
    reply allows a mating check -> the number of replies to it (0: it mates at once)."""
    board = cshogi.Board(sfen)
    mates = {}
    for check in _checks(board):
        board.push(check)
        replies = list(board.legal_moves)
        proven = True
        for reply in replies:
            board.push(reply)
            proven = _mates_at_once(board)
            board.pop()
            if not proven:
                break
        board.pop()
        if proven:
            mates[cshogi.move_to_usi(check)] = len(replies)
    return mates
