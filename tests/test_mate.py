"""Mate in one (``envs.mate``) and the checking moves under it, against cshogi.

6,144 positions (512 in the normal suite): random scattered ones (all 40 pieces over boards and hands), crowded
ones around the enemy king (pawn-drop mates common: such a drop is no mate), and
positions from random games that favour checks. On every position the legal checking
moves must equal cshogi's (push, ``is_check``), a mate must be found exactly where
pushing some checking move leaves the opponent without a legal move, the move returned
must be one of those, and cshogi's ``mate_move_in_1ply`` must agree wherever it finds one
(it assumes the side to move is not in check, so only there).

Mate in three against a brute-force cshogi search (``helpers.mates_in_three``), on crowded
positions chosen for a mix of mates in three only, mates at once and no mate, each also
at the ply limit and with a history in which the mating checks repeat into a draw.
"""

import cshogi
import jax
import numpy as np
import pytest

from envs import env, mate, notation
from helpers import cshogi_checks, cshogi_moves, mates_in_three, pick_move, random_scattered_sfen

MATED = "4k4/9/9/9/9/9/4p4/4g4/4K4 b - 1"  # black to move has no move: the game is over
SIZES = [pytest.param(512, id="512"), pytest.param(6144, id="6k", marks=pytest.mark.slow)]


def _game_positions(n: int, seed: int) -> list[str]:
    rng = np.random.default_rng(seed)
    sfens = []
    while len(sfens) < n:
        board = cshogi.Board()
        for _ in range(int(rng.integers(20, 160))):
            moves = list(board.legal_moves)
            if not moves:
                break
            board.push(pick_move(rng, board, moves, biased=True))
        if not board.is_game_over():
            sfens.append(board.sfen())
    return sfens


@pytest.fixture(scope="module", params=SIZES)
def positions(request):
    """A third each of scattered, crowded and game positions, and one finished game."""
    third = request.param // 3
    rng = np.random.default_rng(61)
    sfens = [random_scattered_sfen(rng) for _ in range(third)]
    sfens += [random_scattered_sfen(rng, crowd_enemy_king=True) for _ in range(third)]
    sfens += _game_positions(request.param - 2 * third - 1, 62) + [MATED]
    return sfens


@pytest.fixture(scope="module")
def ours(positions):
    """(checking moves [N, A], found [N], action [N]) in chunks of one compiled shape."""
    rules = env.Rules(history=1)
    analyze = jax.jit(lambda g: (mate.checking_moves(g), *mate.mate_in_one(g)))
    parts = []
    for i in range(0, len(positions), 1024):
        states = [notation.from_sfen(s, rules) for s in positions[i:i + 1024]]
        games = jax.tree.map(lambda *a: np.stack(a), *states)
        parts.append(jax.device_get(analyze(games)))
    return [np.concatenate([p[k] for p in parts]) for k in range(3)], rules


def _cshogi_truth(sfen: str) -> tuple[set, set]:
    """(legal checking moves, mating moves) by pushing every legal move."""
    board = cshogi.Board(sfen)
    checks, mates = set(), set()
    for move in board.legal_moves:
        board.push(move)
        if board.is_check():
            checks.add(cshogi.move_to_usi(move))
            if not any(True for _ in board.legal_moves):
                mates.add(cshogi.move_to_usi(move))
        board.pop()
    return checks, mates


def _pawn_drop_mate_refused(board: cshogi.Board, legal: set) -> bool:
    """A pawn drop in front of the enemy king, possible but for the pawn-drop-mate rule."""
    if board.is_check() or not board.pieces_in_hand[board.turn][cshogi.HPAWN]:
        return False
    file_, rank = divmod(board.king_square(1 - board.turn), 9)
    rank += 1 if board.turn == cshogi.BLACK else -1
    if not 0 <= rank <= 8 or board.piece(file_ * 9 + rank) != cshogi.NONE:
        return False
    own_pawn = cshogi.BPAWN if board.turn == cshogi.BLACK else cshogi.WPAWN
    if any(board.piece(file_ * 9 + r) == own_pawn for r in range(9)):
        return False
    return f"P*{file_ + 1}{'abcdefghi'[rank]}" not in legal


def test_mate_in_one__agrees_with_cshogi(positions, ours):
    (checking, found, action), rules = ours
    found_moves, refused_drop_mates = [], 0
    for i, sfen in enumerate(positions):
        state = notation.from_sfen(sfen, rules)
        if sfen == MATED:  # a finished game has no checking move and no mate
            assert not checking[i].any() and not found[i]
            continue
        table = {a: u for u, a in notation.legal_actions(state).items()}
        checks, mates = _cshogi_truth(sfen)
        assert {table[a] for a in np.flatnonzero(checking[i])} == checks, sfen
        assert bool(found[i]) == bool(mates), f"{sfen}: found {bool(found[i])}, cshogi mates {sorted(mates)}"
        if found[i]:
            assert table[int(action[i])] in mates, sfen
            found_moves.append(table[int(action[i])])
        board = cshogi.Board(sfen)
        oracle = board.mate_move_in_1ply() if not board.is_check() else 0  # it assumes no check
        if oracle:
            assert cshogi.move_to_usi(oracle) in mates, sfen
        refused_drop_mates += _pawn_drop_mate_refused(board, cshogi_moves(board))
    # The sets hold many mates of every kind, and pawn drops that would mate but are illegal.
    assert len(found_moves) >= len(positions) // 20, len(found_moves)
    assert any("*" in m for m in found_moves) and any(m.endswith("+") for m in found_moves)
    assert any("*" not in m and not m.endswith("+") for m in found_moves)
    assert refused_drop_mates >= len(positions) // 300, refused_drop_mates


THREE_RULES = env.Rules(max_length=200, history=256)
ROOT_PLY = 190  # the roots are set at this ply; the history before it is empty or staged


def _mate_in_three_positions() -> list[tuple[str, dict[str, int]]]:
    """Crowded positions (cshogi's brute force truth): 24 with mates in three only,
    8 with a mate at once, 16 with neither."""
    rng = np.random.default_rng(67)
    wanted = {"three": 24, "once": 8, "none": 16}
    chosen = []
    while any(wanted.values()):
        sfen = random_scattered_sfen(rng, crowd_enemy_king=True)
        mates = mates_in_three(sfen)
        kind = "none" if not mates else "once" if 0 in mates.values() else "three"
        if wanted[kind] and not cshogi.Board(sfen).is_check() and len(mates) <= 15:  # 15: room to stage
            wanted[kind] -= 1
            chosen.append((sfen, mates))
    return chosen


def _at_ply(state: env.State, ply: int, repeated=()) -> env.State:
    """``state`` as the position at ``ply`` of a game whose history holds each hash of
    ``repeated`` three times before (same side to move as after one more ply, no checks)."""
    size = THREE_RULES.history
    history = np.zeros_like(np.asarray(state.history))
    history[ply % size] = np.asarray(state.hash)
    for i, hash_ in enumerate(repeated):
        for k in range(3):
            history[(ply + 1 - 4 * (3 * i + k + 1)) % size] = np.asarray(hash_)
    check_history = np.zeros_like(np.asarray(state.check_history))
    check_history[ply % size] = bool(state.checked)
    return state._replace(x=state.x._replace(step_count=np.int32(ply)), history=history, check_history=check_history)


@pytest.fixture(scope="module")
def mate_in_three_cases():
    """(sfen, cshogi's mates {usi: replies}, the roots' considered checks {usi}, roots [3N]:
    each position at ``ROOT_PLY``, at 2 plies before the limit, and with its mating checks
    repeated into a draw), and our (found, action) for all of them in one compiled call."""
    cases = _mate_in_three_positions()
    step = jax.jit(lambda s, a: env.step(s, a, THREE_RULES))
    plain, late, repeated, considered = [], [], [], []
    for sfen, mates in cases:
        state = notation.from_sfen(sfen, THREE_RULES)
        legal = notation.legal_actions(state)
        checks = sorted(legal[m] for m in cshogi_checks(sfen))  # ours equal them (above)
        considered.append({u for u, a in legal.items() if a in checks[:32]})
        plain.append(_at_ply(state, ROOT_PLY))
        late.append(_at_ply(state, THREE_RULES.max_length - 2))
        hashes = [step(_at_ply(state, ROOT_PLY), legal[m]).hash for m in mates]
        repeated.append(_at_ply(state, ROOT_PLY, hashes))
    roots = plain + late + repeated
    games = jax.tree.map(lambda *a: np.stack([np.asarray(x) for x in a]), *roots)
    found, action = jax.device_get(jax.jit(lambda g: mate.mate_in_three(g, THREE_RULES))(games))
    return cases, considered, roots, found, action


def test_mate_in_three__agrees_with_a_brute_force_search(mate_in_three_cases):
    cases, considered, roots, found, action = mate_in_three_cases
    kinds = {"three": 0, "once": 0}
    for i, ((sfen, mates), checks) in enumerate(zip(cases, considered)):
        within = {m for m, replies in mates.items() if m in checks and replies <= 32}
        assert bool(found[i]) == bool(within), f"{sfen}: found {bool(found[i])}, cshogi {mates}"
        if found[i]:
            move = notation.action_to_usi(roots[i], int(action[i]))
            at_once = {m for m in within if mates[m] == 0}
            assert move in (at_once or within), f"{sfen}: played {move}, cshogi {mates}"
            kinds["once" if at_once else "three"] += 1
    assert kinds["three"] >= 20 and kinds["once"] >= 6, kinds  # the bounds drop few mates here


def test_mate_in_three__ends_at_the_ply_limit_and_avoids_repetition(mate_in_three_cases):
    cases, _, roots, found, action = mate_in_three_cases
    n = len(cases)
    for i, (sfen, mates) in enumerate(cases):
        # Two plies before the limit the reply ends the game (a draw): only a mate at once is left.
        at_once = {m for m, replies in mates.items() if replies == 0}
        assert bool(found[n + i]) == (bool(found[i]) and bool(at_once)), sfen
        if found[n + i]:
            assert notation.action_to_usi(roots[n + i], int(action[n + i])) in at_once, sfen
        # A check that repeats a position for the fourth time draws, unless it mates: mate ends the game.
        assert bool(found[2 * n + i]) == (bool(found[i]) and bool(at_once)), sfen
