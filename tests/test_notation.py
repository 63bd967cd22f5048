"""The host API: SFEN, USI, observations, game records; cshogi (and pgx) as oracles.

Malformed SFEN tests double as a safety test: cshogi aborts the process on a malformed
SFEN, so a test run that survives them shows we validate first.
"""

import cshogi
import cshogi.CSA
import cshogi.KIF
import jax
import jax.numpy as jnp
import numpy as np
import pgx
import pytest

from envs import env, notation, records
from helpers import cshogi_board, cshogi_moves, drop_move_number, normalized, pick_move, play_line

STARTPOS = notation.STARTPOS_SFEN


def _random_positions(n_games: int, seed: int, max_plies: int = 160) -> list[str]:
    """SFENs sampled along random cshogi games (biased: hands, promotions, checks)."""
    rng = np.random.default_rng(seed)
    sfens = []
    for game in range(n_games):
        board = cshogi.Board()
        stop = rng.integers(20, max_plies)
        for ply in range(stop):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(pick_move(rng, board, moves, biased=game % 2 == 1))
            if ply % 23 == 7:
                sfens.append(board.sfen())
        sfens.append(board.sfen())
    return sfens


@pytest.fixture(scope="module")
def random_sfens():
    return _random_positions(40, seed=11)


# from_sfen / to_sfen ----------------------------------------------------------------


def test_from_sfen__matches_cshogi_on_random_positions(random_sfens):
    assert len(random_sfens) >= 150
    with_hands = 0
    for sfen in random_sfens:
        state = notation.from_sfen(sfen)
        board = cshogi.Board(sfen)  # came from cshogi itself
        assert int(state.current_player) == (0 if sfen.split()[1] == "b" else 1) == board.turn
        assert notation.to_sfen(state) == sfen
        assert bool(state.checked) == board.is_check()
        assert set(notation.legal_moves(state)) == cshogi_moves(board), sfen
        assert bool(state.terminated) == (not cshogi_moves(board))
        assert int(state.ply) == 0 and int(state.start_move_number) == board.move_number
        with_hands += sfen.split()[2] != "-"
    assert with_hands >= 50


def test_action_to_usi__round_trips_every_legal_action(random_sfens):
    for sfen in random_sfens[::3]:
        state = notation.from_sfen(sfen)
        actions = np.flatnonzero(np.asarray(state.legal_action_mask))
        for action in actions:
            usi = notation.action_to_usi(state, int(action))
            assert notation.usi_to_action(state, usi) == action, (sfen, usi)
        board = cshogi.Board(sfen)
        for move in board.legal_moves:
            usi = cshogi.move_to_usi(move)
            assert notation.action_to_usi(state, notation.usi_to_action(state, usi)) == usi


def test_action_to_usi__rejects_illegal_actions():
    state = notation.from_sfen(STARTPOS)
    illegal = int(np.flatnonzero(~np.asarray(state.legal_action_mask))[0])
    for action in (illegal, -1, env.NUM_ACTIONS):
        with pytest.raises(ValueError, match="not legal"):
            notation.action_to_usi(state, action)


def test_from_sfen__accepts_prefix_and_missing_move_number():
    assert notation.to_sfen(notation.from_sfen("sfen " + STARTPOS)) == STARTPOS
    state = notation.from_sfen("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w -")
    assert int(state.current_player) == 1 and int(state.start_move_number) == 1
    assert notation.to_sfen(state) == STARTPOS.replace(" b ", " w ")
    assert int(notation.from_sfen(STARTPOS.replace(" 1", " 77")).start_move_number) == 77


@pytest.mark.parametrize(
    "sfen,black_pawns,white_pawns",
    [("4k4/9/9/9/9/9/9/9/4K4 b 12P6p 1", 12, 6), ("4k4/9/9/9/9/9/9/9/4K4 w 10p8P 1", 8, 10)],
)
def test_from_sfen__hands_with_ten_or_more_pawns(sfen, black_pawns, white_pawns):
    state = notation.from_sfen(sfen)
    mover = int(state.current_player)
    hand = np.asarray(state.x.hand)  # row 0 = the side to move
    assert hand[0, 0] == (black_pawns, white_pawns)[mover] and hand[1, 0] == (white_pawns, black_pawns)[mover]
    assert notation.to_sfen(state) == normalized(sfen) == cshogi.Board(sfen).sfen()
    assert set(notation.legal_moves(state)) == cshogi_moves(cshogi.Board(sfen))


STARTPOS_BOARD = STARTPOS.split()[0]


@pytest.mark.parametrize(
    "sfen,message",
    [
        ("", "3 or 4 fields"),
        (f"{STARTPOS_BOARD} b", "3 or 4 fields"),
        (f"{STARTPOS_BOARD} b - 1 extra", "3 or 4 fields"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "9 ranks"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "9 ranks"),
        ("lnsgkgsnl1/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "exactly 9 squares"),
        ("lnsgkgsnlp/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "longer than 9"),
        ("lnsgkgsn/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "exactly 9 squares"),
        ("lnsgkgsnx/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "unknown piece"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGK+GSNL b - 1", "unknown piece"),  # +G
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL x - 1", "side to move"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL B - 1", "side to move"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b K 1", "hand"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b P2 1", "hand"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b 0P 1", "hand count"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 0", "move number"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - x", "move number"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/4k4/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "at most 2"),  # 3 kings
        ("lnsg1gsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "white king"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSG1GSNL b - 1", "black king"),
        ("lnsgkgsnl/1r5b1/pppppppp1/9/4P4/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", "two unpromoted pawns"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b 2P 1", "at most 18"),
        ("4k3P/9/9/9/9/9/9/9/4K4 b - 1", "never move"),  # black pawn on the last rank
        ("4k4/9/9/9/9/9/9/9/4K3p b - 1", "never move"),  # white pawn on black's back rank
        ("4k4/8N/9/9/9/9/9/9/4K4 b - 1", "never move"),  # black knight on rank b
        ("L3k4/9/9/9/9/9/9/9/4K4 b - 1", "never move"),
        ("4k4/4R4/9/9/9/9/9/9/4K4 b - 1", "not to move in check"),  # white king attacked, black to move
        ("4k4/9/9/9/9/9/9/4r4/4K4 w - 1", "not to move in check"),
        ("9/9/9/9/4k4/3K5/9/9/9 b - 1", "kings on adjacent squares"),  # cshogi sees no check
    ],
)
def test_from_sfen__malformed_sfen_raises(sfen, message):
    with pytest.raises(ValueError, match=message):
        notation.from_sfen(sfen)
    with pytest.raises(ValueError):
        notation.from_position(f"sfen {sfen} moves 7g7f")


# USI moves and positions ------------------------------------------------------------


@pytest.mark.parametrize(
    "move,message",
    [
        ("", "malformed"),
        ("7g7", "malformed"),
        ("7g7f++", "malformed"),
        ("0a1b", "malformed"),
        ("7j7f", "malformed"),
        ("K*5e", "malformed"),
        ("p*5e", "malformed"),
        ("7g7f ", "malformed"),
        ("7g7e", "illegal"),
        ("7g7f+", "illegal"),  # no promotion outside the zone
        ("P*5e", "illegal"),  # no pawn in hand
        ("5a5b", "illegal"),  # the opponent's king
    ],
)
def test_usi_to_action__bad_moves_raise(move, message):
    with pytest.raises(ValueError, match=message):
        notation.usi_to_action(notation.from_sfen(STARTPOS), move)


def test_from_position__plays_moves_like_cshogi():
    moves = "7g7f 3c3d 8h2b+ 3a2b B*4e 8c8d 4e3d"
    board = cshogi.Board()
    for move in moves.split():
        board.push_usi(move)
    for text in (f"startpos moves {moves}", f"position startpos moves {moves}", f"sfen {STARTPOS} moves {moves}"):
        state = notation.from_position(text)
        assert notation.to_sfen(state) == board.sfen()
        assert int(state.ply) == 7 and int(state.history[7, 0]) == int(state.hash[0])
    assert notation.to_sfen(notation.from_position("startpos")) == STARTPOS
    assert notation.to_sfen(notation.from_position("startpos moves")) == STARTPOS


@pytest.mark.parametrize(
    "position,message",
    [
        ("startpos moves 7g7f 7g7f", "illegal move"),
        ("startpos moves 7g7f 3c3d 2b8h", "illegal move"),
        ("startpos moves 7g7f x", "malformed"),
        ("startpos movesX 7g7f", "must be 'startpos' or 'sfen ...' before 'moves'"),
        ("start moves 7g7f", "must be 'startpos' or 'sfen ...' before 'moves'"),
        ("sfen 4k4/9/9/9/9/9/9/9/4K4 b - 1 moves 5i5h 5a5b 5h5i 5b5a 5i5j", "malformed"),
    ],
)
def test_from_position__bad_input_raises(position, message):
    with pytest.raises(ValueError, match=message):
        notation.from_position(position)


def test_to_usi_position__uses_startpos_for_the_standard_start():
    moves = ["7g7f", "3c3d"]
    assert records.to_usi_position(STARTPOS, moves) == "position startpos moves 7g7f 3c3d"
    assert records.to_usi_position(STARTPOS.rsplit(" ", 1)[0], []) == "position startpos"
    other = "lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2"
    assert records.to_usi_position(other, ["3c3d"]) == f"position sfen {other} moves 3c3d"
    assert notation.to_sfen(notation.from_position(records.to_usi_position(other, ["3c3d"]))) == normalized(
        "lnsgkgsnl/1r5b1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL b - 3"
    )


# Observation ------------------------------------------------------------------------


def test_observe__matches_pgx_along_pgx_games(observe_fn):
    """pgx's own env plays the same (legal) actions; its observation must equal ours,
    also for the state rebuilt from the SFEN, and its legal mask equal ours except for
    pawn-drop mates (which pgx wrongly allows at the edge)."""
    pgx_env = pgx.make("shogi")
    pgx_init, pgx_step = jax.jit(pgx_env.init), jax.jit(pgx_env.step)
    step = notation.jitted_step(env.Rules())
    rng = np.random.default_rng(12)
    compared = 0
    for game in range(4):
        ours = notation.from_sfen(STARTPOS)
        theirs = pgx_init(jax.random.key(game))
        for ply in range(60):
            if bool(ours.terminated) or bool(theirs.terminated):
                break
            obs = observe_fn(ours)
            assert obs.shape == env.OBSERVATION_SHAPE == (9, 9, 119) and obs.dtype == jnp.bool_
            assert np.array_equal(obs, theirs.observation), (game, ply)
            mask, pgx_mask = np.asarray(ours.legal_action_mask), np.asarray(theirs.legal_action_mask)
            assert not (mask & ~pgx_mask).any() and ((pgx_mask & ~mask).nonzero()[0] // 81 == 20).all()
            if ply % 10 == 9:
                rebuilt = notation.from_sfen(notation.to_sfen(ours))
                assert np.array_equal(observe_fn(rebuilt), obs)
                assert np.array_equal(rebuilt.legal_action_mask, mask)
                assert int(rebuilt.current_player) == int(ours.current_player)
            action = jnp.int32(rng.choice(np.flatnonzero(mask)))
            ours, theirs = step(ours, action), pgx_step(theirs, action)
            compared += 1
    assert compared >= 200


def test_observe__in_check_plane_and_hands(observe_fn):
    """The last plane flags check; hand planes count pieces (8 pawn planes per side)."""
    state = notation.from_sfen("4k4/9/9/9/9/9/9/9/4K4 b 3P 1")
    assert not np.asarray(observe_fn(state))[..., -1].any()
    checked = play_line(state, "P*5b")[-1]
    obs = np.asarray(observe_fn(checked))
    assert obs[..., -1].all()
    before = np.asarray(observe_fn(state))
    # From black's view: own pawns in hand 3 -> 3 of the 8 pawn planes set.
    pawn_planes = before[0, 0, 62:70]
    assert pawn_planes.tolist() == [True] * 3 + [False] * 5


# Game records -----------------------------------------------------------------------


def _random_game(sfen: str, plies: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    board = cshogi_board(sfen)
    moves = []
    for _ in range(plies):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = pick_move(rng, board, legal, biased=True)
        moves.append(cshogi.move_to_usi(move))
        board.push(move)
    return moves


GAME_STARTS = [
    STARTPOS,
    "ln1gk1snl/2s3gb1/2pppppp1/pr6p/9/P6RP/1PPPPPP2/1BG3S2/LNS1KG1NL b Pp 23",  # a book line, pawns in hand
    "lsgnkgnsl/2b4r1/ppppppppp/9/9/9/PPPPPPPPP/1R4B2/LSNGKNGSL w - 1",  # a shuffled start, white first
]


@pytest.mark.parametrize("start", GAME_STARTS)
def test_to_kif__parses_back_with_cshogi(start):
    moves = _random_game(start, 80, seed=13)
    kif = records.to_kif(start, moves, end="mate", names=("alice", "bob"))
    board = cshogi_board(start)
    if normalized(start) == STARTPOS:
        parsed = cshogi.KIF.Parser.parse_str(kif)
        assert parsed.sfen == STARTPOS and "手合割：平手" in kif
        assert [cshogi.move_to_usi(m) for m in parsed.moves] == moves
        assert parsed.names == ["alice", "bob"] and parsed.endgame == "%TORYO"
    else:
        # cshogi's KIF parser reads no board diagram (it starts from the standard
        # position), so check the diagram and parse the move lines from the start.
        assert cshogi.KIF.board_to_bod(board) in kif
        assert ("後手番" in kif) == (board.turn == cshogi.WHITE)
    body = kif.split("手数----指手---------消費時間--\n", 1)[1]
    parsed_moves = []
    for line in body.splitlines():
        move, _, _ = cshogi.KIF.Parser.parse_move_str(line, board)
        if move is not None:
            assert board.is_legal(move), line
            parsed_moves.append(cshogi.move_to_usi(move))
            board.push(move)
    assert parsed_moves == moves


@pytest.mark.parametrize("start", GAME_STARTS)
@pytest.mark.parametrize("end,csa", [("repetition", "%SENNICHITE"), ("declaration", "%KACHI"), ("", "")])
def test_to_csa__parses_back_with_cshogi(start, end, csa):
    moves = _random_game(start, 80, seed=14)
    (parsed,) = cshogi.CSA.Parser.parse_str(records.to_csa(start, moves, end=end))
    assert drop_move_number(parsed.sfen) == drop_move_number(normalized(start))  # CSA has no move number
    assert [cshogi.move_to_usi(m) for m in parsed.moves] == moves
    assert parsed.endgame == csa


def test_to_kif__rejects_illegal_records():
    with pytest.raises(ValueError, match=r"illegal move \(move 2\)"):
        records.to_kif(STARTPOS, ["7g7f", "7g7f"])
    with pytest.raises(ValueError, match=r"illegal move \(move 1\)"):
        records.to_csa(STARTPOS, ["bad"])
    with pytest.raises(ValueError, match="unknown piece"):
        records.to_kif("lnsgkgsnx/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1", [])
