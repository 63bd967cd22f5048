"""Game-ending rules from concrete positions: repetition, perpetual check, max length,
declaration, mate and pawn-drop mate, each cross-checked with cshogi where it can judge."""

import cshogi
import jax
import numpy as np
import pytest

from conftest import VARIANT_RULES
from envs import env, notation
from helpers import cshogi_board, cshogi_moves, mirror_sfen, play_line, rotate_sfen

BLACK, WHITE = 0, 1


def _rotate_usi(move: str) -> str:
    """A USI move seen from the other side (board rotated 180 degrees)."""

    def square(s):
        return f"{10 - int(s[0])}{'abcdefghi'[8 - 'abcdefghi'.index(s[1])]}"

    if move[1] == "*":
        return move[:2] + square(move[2:4])
    return square(move[0:2]) + square(move[2:4]) + move[4:]


def _mirror_usi(move: str) -> str:
    def square(s):
        return f"{10 - int(s[0])}{s[1]}"

    if move[1] == "*":
        return move[:2] + square(move[2:4])
    return square(move[0:2]) + square(move[2:4]) + move[4:]


def _replay_cshogi(sfen: str, moves: str) -> cshogi.Board:
    board = cshogi_board(sfen)
    for move in moves.split():
        board.push_usi(move)
    return board


def _outcome(state):
    return bool(state.terminated), bool(state.truncated), int(state.end_reason), np.asarray(state.rewards).tolist()


ONGOING = (False, False, env.ONGOING, [0.0, 0.0])

# Repetition -------------------------------------------------------------------------

SHUFFLE = "2h3h 8b7b 3h2h 7b8b"


def test_step__fourth_occurrence_is_a_repetition_draw():
    moves = " ".join([SHUFFLE] * 3)  # the start position occurs at plies 0, 4, 8 and 12
    states = play_line(notation.from_sfen(notation.STARTPOS_SFEN), moves)
    for ply in range(12):  # including ply 8, the third occurrence
        assert _outcome(states[ply]) == ONGOING, ply
    assert _outcome(states[12]) == (True, False, env.REPETITION, [0.0, 0.0])
    assert notation.legal_moves(states[12]) == []
    assert _replay_cshogi(notation.STARTPOS_SFEN, moves).is_draw() == cshogi.REPETITION_DRAW


def test_step__repetition_counts_positions_not_move_orders():
    """The start position recurs via different move orders; it ends on its 4th occurrence."""
    moves = "2h3h 8b7b 3h2h 7b8b 2h4h 8b6b 4h2h 6b8b 7g7f 3c3d 2h3h 8b7b 3h2h 7b8b"
    states = play_line(notation.from_sfen(notation.STARTPOS_SFEN), moves)
    assert all(_outcome(s) == ONGOING for s in states[:-1])
    # The start position occurs only 3 times; the position after 7g7f 3c3d twice. Not over.
    assert _outcome(states[-1]) == ONGOING
    more = play_line(states[-1], f"{SHUFFLE} {SHUFFLE}")
    assert all(_outcome(s) == ONGOING for s in more[:-1])
    assert _outcome(more[-1]) == (True, False, env.REPETITION, [0.0, 0.0])


# White king on 1a, black rook checking from rank b and rank a in turn.
PERPETUAL = "8k/R8/9/9/9/9/9/9/4K4 b - 1"
PERPETUAL_MOVES = "9b9a 1a1b 9a9b 1b1a"
# The same cycle entered one ply later: the defender is to move when it ends.
PERPETUAL_DEFENDER = "R7k/9/9/9/9/9/9/9/4K4 w - 1"
PERPETUAL_DEFENDER_MOVES = "1a1b 9a9b 1b1a 9b9a"


@pytest.mark.parametrize("rotated", [False, True], ids=["black_checks", "white_checks"])
def test_step__perpetual_check_loses_for_the_checking_side(rotated):
    sfen, moves = PERPETUAL, " ".join([PERPETUAL_MOVES] * 3)
    if rotated:
        sfen, moves = rotate_sfen(sfen), " ".join(_rotate_usi(m) for m in moves.split())
    checker = WHITE if rotated else BLACK
    states = play_line(notation.from_sfen(sfen), moves)
    assert all(_outcome(s) == ONGOING for s in states[:-1])
    rewards = [0.0, 0.0]
    rewards[checker], rewards[1 - checker] = -1.0, 1.0
    assert _outcome(states[-1]) == (True, False, env.PERPETUAL_CHECK, rewards)
    assert int(states[-1].current_player) == checker
    assert _replay_cshogi(sfen, moves).is_draw() == cshogi.REPETITION_LOSE  # for the side to move


def test_step__perpetual_check_wins_for_the_defender_to_move():
    moves = " ".join([PERPETUAL_DEFENDER_MOVES] * 3)
    states = play_line(notation.from_sfen(PERPETUAL_DEFENDER), moves)
    assert all(_outcome(s) == ONGOING for s in states[1:-1])
    assert _outcome(states[-1]) == (True, False, env.PERPETUAL_CHECK, [-1.0, 1.0])
    assert int(states[-1].current_player) == WHITE
    assert _replay_cshogi(PERPETUAL_DEFENDER, moves).is_draw() == cshogi.REPETITION_WIN


def test_step__repetition_with_some_quiet_moves_is_a_draw():
    """The rook checks only every other move (a gold on 2b blocks rank b): a plain draw."""
    sfen = "8k/R6g1/9/9/9/9/9/9/4K4 b - 1"
    moves = " ".join([PERPETUAL_MOVES] * 3)
    states = play_line(notation.from_sfen(sfen), moves)
    assert [bool(s.checked) for s in states[1:5]] == [True, False, False, False]
    assert _outcome(states[-1]) == (True, False, env.REPETITION, [0.0, 0.0])
    assert _replay_cshogi(sfen, moves).is_draw() == cshogi.REPETITION_DRAW


def test_step__perpetual_check_is_a_draw_when_the_rule_is_off():
    """With ``perpetual_check_loses=False``; it also ends on ply 12 = max_length as a
    repetition, not a truncation (a decided game is never flagged truncated)."""
    states = play_line(notation.from_sfen(PERPETUAL, VARIANT_RULES), " ".join([PERPETUAL_MOVES] * 3), VARIANT_RULES)
    assert all(_outcome(s) == ONGOING for s in states[:-1])
    assert _outcome(states[-1]) == (True, False, env.REPETITION, [0.0, 0.0])


# Max length -------------------------------------------------------------------------


def test_step__max_length_truncates_as_a_draw():
    moves = "2g2f 8c8d 2f2e 8d8e 6i7h 4a3b 2e2d 2c2d 2h2d P*2c 2d2f 8e8f"
    states = play_line(notation.from_sfen(notation.STARTPOS_SFEN, VARIANT_RULES), moves, VARIANT_RULES)
    assert VARIANT_RULES.max_length == len(states) - 1 == 12
    assert all(_outcome(s) == ONGOING for s in states[:-1])
    assert _outcome(states[-1]) == (False, True, env.MAX_LENGTH, [0.0, 0.0])
    assert notation.legal_moves(states[-1]) == []
    assert states[-1].legal_action_mask.any()  # the position itself is not over
    with pytest.raises(ValueError, match="after the game ended"):
        notation.from_position(f"startpos moves {moves} 8g8f", VARIANT_RULES)


# Declaration (CSA 27-point rule) ----------------------------------------------------

# Black: king on 5b, rook, bishop and 8 tokins in the camp (18 points, 10 pieces) + pawns in hand.
DECLARE_28 = "R7B/4K4/+P+P+P+P+P+P+P+P1/9/8k/9/9/9/9 b 10P 1"
DECLARE_27 = "R7B/4K4/+P+P+P+P+P+P+P+P1/9/8k/9/9/9/9 b 9P 1"
DECLARE_IN_CHECK = "R3g3B/4K4/+P+P+P+P+P+P+P+P1/9/8k/9/9/9/9 b 10P 1"  # a gold on 5a checks
DECLARE_9_PIECES = "R7B/4K4/+P+P+P+P+P+P+P2/9/8k/9/9/9/9 b 11P 1"  # 28 points, 9 pieces


@pytest.mark.parametrize(
    "sfen,wins",
    [
        (DECLARE_28, True),
        (DECLARE_27, False),  # black needs 28
        (rotate_sfen(DECLARE_27), True),  # white needs only 27
        (rotate_sfen(DECLARE_28), True),
        (DECLARE_IN_CHECK, False),
        (rotate_sfen(DECLARE_IN_CHECK), False),
        (DECLARE_9_PIECES, False),
    ],
    ids=["black_28", "black_27", "white_27", "white_28", "in_check", "white_in_check", "9_pieces"],
)
def test_init_from__declaration_wins_for_the_side_to_move(sfen, wins):
    state = notation.from_sfen(sfen)
    mover = int(state.current_player)
    rewards = [0.0, 0.0]
    if wins:
        rewards[mover], rewards[1 - mover] = 1.0, -1.0
        assert _outcome(state) == (True, False, env.DECLARATION, rewards)
    else:
        assert _outcome(state) == ONGOING
    assert cshogi_board(sfen).is_nyugyoku() == wins  # cshogi's 27-point rule agrees
    # Without the rule the game goes on.
    assert _outcome(notation.from_sfen(sfen, VARIANT_RULES)) == ONGOING


def test_step__declaration_after_the_opponents_move():
    sfen = DECLARE_28.replace(" b ", " w ")  # white moves first; then black may declare
    start = notation.from_sfen(sfen)
    assert _outcome(start) == ONGOING
    after = play_line(start, "1e1f")[-1]
    assert _outcome(after) == (True, False, env.DECLARATION, [1.0, -1.0])
    assert _replay_cshogi(sfen, "1e1f").is_nyugyoku()
    off = play_line(notation.from_sfen(sfen, VARIANT_RULES), "1e1f", VARIANT_RULES)[-1]
    assert _outcome(off) == ONGOING


# Mate -------------------------------------------------------------------------------

MATED = "4k4/9/9/9/9/9/4s4/4g4/4K4 b - 1"  # black king 5i, white gold 5h guarded by a silver
NO_MOVE = "4k4/9/9/9/9/9/8p/6g2/8K b - 1"  # black king 1i: every square attacked, not in check


@pytest.mark.parametrize("sfen", [MATED, rotate_sfen(MATED), NO_MOVE, rotate_sfen(NO_MOVE)])
def test_init_from__a_side_without_legal_moves_loses(sfen):
    state = notation.from_sfen(sfen)
    board = cshogi_board(sfen)
    assert cshogi_moves(board) == set() and notation.legal_moves(state) == []
    assert not state.legal_action_mask.any()
    mover = int(state.current_player)
    assert mover == board.turn
    rewards = [0.0, 0.0]
    rewards[mover], rewards[1 - mover] = -1.0, 1.0
    assert _outcome(state) == (True, False, env.MATE, rewards)
    assert bool(state.checked) == board.is_check()


@pytest.mark.parametrize("rotated", [False, True], ids=["black_mates", "white_mates"])
def test_step__mating_move_wins(rotated):
    sfen, move = "4k4/9/4S4/9/9/9/9/9/4K4 b G 1", "G*5b"
    if rotated:
        sfen, move = rotate_sfen(sfen), _rotate_usi(move)
    state = play_line(notation.from_sfen(sfen), move)[-1]
    winner = WHITE if rotated else BLACK
    rewards = [0.0, 0.0]
    rewards[winner], rewards[1 - winner] = 1.0, -1.0
    assert _outcome(state) == (True, False, env.MATE, rewards)
    assert bool(state.checked)
    assert _replay_cshogi(sfen, move).is_game_over()


# Pawn-drop mate ---------------------------------------------------------------------

# (SFEN, pawn drop, legal?)
PAWN_DROPS = [
    # pgx 2.6.0 allows this one: the king on the edge "escapes" off the board.
    ("6R2/8k/9/6NG1/9/9/9/9/K8 b P 1", "P*1c", False),
    # King in the middle, boxed in by its own pieces, the pawn guarded by a gold.
    ("9/9/9/3ppp3/3lkl3/9/4G4/9/K8 b P 1", "P*5f", False),
    ("9/9/9/3ppp3/3lkl3/9/9/9/K8 b P 1", "P*5f", True),  # unguarded: the king takes it
    # The only capturer (gold 4b) is pinned by the bishop on 1e: still mate.
    ("3lkl3/5g3/4G4/9/8B/9/9/9/K8 b P 1", "P*5b", False),
    ("3lkl3/5g3/4G4/9/9/9/9/9/K8 b P 1", "P*5b", True),  # unpinned: the gold takes it
    ("4k4/9/9/9/9/9/9/9/4K4 b P 1", "P*5b", True),  # a plain pawn check
]


def _after_pawn_drop(sfen: str, move: str) -> str:
    """The SFEN after the pawn drop ``move``, built by hand (legal or not)."""
    board, hands, color, number = notation.parse_sfen(sfen)
    square = (int(move[2]) - 1) * 9 + "abcdefghi".index(move[3])
    assert board[square] < 0 and hands[color, 0] > 0
    board[square] = 0 if color == BLACK else 14
    hands[color, 0] -= 1
    return notation.format_sfen(board, hands, 1 - color, number + 1)


def _variants():
    for sfen, move, legal in PAWN_DROPS:
        yield sfen, move, legal
        yield mirror_sfen(sfen), _mirror_usi(move), legal
        yield rotate_sfen(sfen), _rotate_usi(move), legal
        yield rotate_sfen(mirror_sfen(sfen)), _rotate_usi(_mirror_usi(move)), legal


@pytest.mark.parametrize("sfen,move,legal", list(_variants()))
def test_legal_action_mask__pawn_drop_mate_is_illegal(sfen, move, legal):
    state = notation.from_sfen(sfen)
    board = cshogi_board(sfen)
    assert set(notation.legal_moves(state)) == cshogi_moves(board)
    assert (move in notation.legal_moves(state)) == legal
    # Every one of these drops gives check; the illegal ones would mate.
    after_drop = cshogi_board(_after_pawn_drop(sfen, move))
    assert after_drop.is_check()
    assert (len(cshogi_moves(after_drop)) == 0) == (not legal)
    if not legal:
        with pytest.raises(ValueError, match="illegal move"):
            notation.usi_to_action(state, move)
    else:
        after = play_line(state, move)[-1]
        assert bool(after.checked) and not bool(after.terminated)


def test_legal_action_mask__pawn_drop_mate_regression_pgx_edge_bug():
    """The position where pgx 2.6.0 lets P*1c mate a king on the edge."""
    from pgx._src.games import shogi as pgx_shogi

    state = notation.from_sfen("6R2/8k/9/6NG1/9/9/9/9/K8 b P 1")
    action = 20 * 81 + 2  # drop a pawn (direction 20) on 1c (file index 0, rank index 2)
    assert notation.board_action_to_usi(np.asarray(state.x.board), 0, action) == "P*1c"
    assert not bool(state.legal_action_mask[action])
    # The position still trips pgx's own generator (else this test would prove nothing).
    assert bool(jax.jit(pgx_shogi._legal_action_mask)(state.x)[action])
    assert "P*1c" not in notation.legal_moves(state)


def test_capture_actions__the_legal_captures_are_cshogis_for_both_movers():
    """``movegen.capture_actions`` on the legal mask: exactly cshogi's legal moves onto an
    occupied square, on scattered positions with Black and White to move."""
    from envs import movegen
    from helpers import random_scattered_sfen

    rng = np.random.default_rng(7)
    captures = jax.jit(lambda s: movegen.capture_actions(s.x.board) & s.legal_action_mask)
    seen = 0
    for i in range(12):
        sfen = random_scattered_sfen(rng)
        if i % 2:
            sfen = rotate_sfen(sfen)
        board = cshogi_board(sfen)
        expected = {cshogi.move_to_usi(m) for m in board.legal_moves
                    if not cshogi.move_is_drop(m) and board.piece(cshogi.move_to(m)) != cshogi.NONE}
        state = notation.from_sfen(sfen)
        mask = np.asarray(captures(state))
        got = {notation.action_to_usi(state, a) for a in np.flatnonzero(mask)}
        assert got == expected, sfen
        seen += len(expected)
    assert seen > 20, "the positions hold captures to check"
