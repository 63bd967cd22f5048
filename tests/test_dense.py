"""The dense core (``envs.dense``) against cshogi and against pgx's generator.

Random scattered positions (all 40 pieces over both boards and hands, random
promotions and side to move) reach what games from the start rarely do; a second set
crowds pieces around the enemy king so that pawn-drop mates are common. On every
position the legal moves must equal cshogi's, and mask, check and observation must
equal those of the pgx core (``core="pgx"``), which stays the reference.
"""

import functools
import re

import cshogi
import jax
import jax.numpy as jnp
import numpy as np
import pytest

from envs import dense, env, movegen, notation, pgx_core
from helpers import cshogi_moves, random_scattered_sfen

# Positions per set: the normal suite checks 1,024 of each kind (one compiled shape),
# the slow suite 20,480 scattered and 4,096 crowded.
SIZES = [pytest.param((1_024, 1_024), id="1k"), pytest.param((20_480, 4_096), id="full", marks=pytest.mark.slow)]


def _mover_frame_arrays(sfens):
    boards, hands, colors = [], [], []
    for sfen in sfens:
        board, hand, color, _ = notation.parse_sfen(sfen)
        board, hand = notation.to_mover_frame(board, hand, color)
        boards.append(board)
        hands.append(hand)
        colors.append(color)
    return np.array(boards, np.int32), np.array(hands, np.int32), np.array(colors, np.int32)


@functools.partial(jax.jit, static_argnames="core")
def _analyze(board, hand, color, core):
    def one(board, hand, color):
        x = movegen.GameState(board=board, hand=hand, color=color)
        mask, checked = movegen.analyze(x, core)
        return mask, checked, movegen.observe(x, core)

    return jax.vmap(one)(board, hand, color)


def _evaluate(sfens, chunk=4096):
    """Host arrays of (mask, checked, observation) for both cores."""
    board, hand, color = _mover_frame_arrays(sfens)
    out = {}
    for core in ("dense", "pgx"):
        parts = [_analyze(board[i:i + chunk], hand[i:i + chunk], color[i:i + chunk], core)
                 for i in range(0, len(sfens), chunk)]
        out[core] = [np.concatenate([np.asarray(p[k]) for p in parts]) for k in range(3)]
    return board, color, out


@pytest.fixture(scope="module", params=SIZES)
def scattered(request):
    rng = np.random.default_rng(20480)
    sfens = [random_scattered_sfen(rng) for _ in range(request.param[0])]
    return sfens, *_evaluate(sfens, chunk=2048)


@pytest.fixture(scope="module", params=SIZES)
def crowded(request):
    rng = np.random.default_rng(4096)
    sfens = [random_scattered_sfen(rng, crowd_enemy_king=True) for _ in range(request.param[1])]
    return sfens, *_evaluate(sfens, chunk=2048)


def _assert_moves_match_cshogi(sfens, board, color, masks):
    for i, sfen in enumerate(sfens):
        actions = np.flatnonzero(masks[i])
        ours = {notation.board_action_to_usi(board[i], int(color[i]), int(a)) for a in actions}
        theirs = cshogi_moves(cshogi.Board(sfen))
        assert ours == theirs, f"{sfen}: only ours {sorted(ours - theirs)}, only cshogi's {sorted(theirs - ours)}"


def test_scattered_positions__legal_moves_equal_cshogi(scattered):
    sfens, board, color, out = scattered
    masks, checked, _ = out["dense"]
    _assert_moves_match_cshogi(sfens, board, color, masks)
    check_flags = np.array([cshogi.Board(s).is_check() for s in sfens])
    np.testing.assert_array_equal(checked, check_flags)
    # The set is varied: drops, promotions, checks and positions with no legal move.
    drops, promotions = masks[:, 20 * 81:].any(axis=1), masks[:, 10 * 81:20 * 81].any(axis=1)
    print(f"in check {check_flags.mean():.2f}, drops {drops.mean():.2f}, promotions {promotions.mean():.2f}, "
          f"no move {(masks.sum(axis=1) == 0).sum()}")
    assert check_flags.mean() > 0.05 and drops.mean() > 0.4 and promotions.mean() > 0.4
    if len(sfens) > 10_000:
        assert (masks.sum(axis=1) == 0).sum() >= 1


def test_scattered_positions__mask_check_and_observation_equal_pgx(scattered):
    *_, out = scattered
    for name, ours, reference in zip(("mask", "check", "observation"), out["dense"], out["pgx"]):
        different = np.flatnonzero((ours != reference).reshape(len(ours), -1).any(axis=1))
        assert different.size == 0, f"{name} differs from pgx's on {different.size} positions, e.g. {different[:5]}"


@jax.jit
def _unpromoted_twins(board, mask):
    return jax.vmap(lambda b, m: movegen.unpromoted_twins(movegen.GameState(board=b, legal_action_mask=m)))(board, mask)


def _cshogi_unpromoted_twins(sfen: str) -> set[str]:
    """cshogi's legal plain moves of a pawn, bishop or rook that may promote instead."""
    board = cshogi.Board(sfen)
    legal = cshogi_moves(board)
    twins = set()
    for move in legal:
        if "*" in move or move.endswith("+") or move + "+" not in legal:
            continue
        square = (int(move[0]) - 1) * 9 + "abcdefghi".index(move[1])
        if cshogi.piece_to_piece_type(board.piece(square)) in (cshogi.PAWN, cshogi.BISHOP, cshogi.ROOK):
            twins.add(move)
    return twins


def test_scattered_positions__unpromoted_twins_equal_cshogi_s(scattered):
    sfens, board, color, out = scattered
    twins = np.asarray(_unpromoted_twins(board, out["dense"][0]))
    found = 0
    for i, sfen in enumerate(sfens):
        ours = {notation.board_action_to_usi(board[i], int(color[i]), int(a)) for a in np.flatnonzero(twins[i])}
        theirs = _cshogi_unpromoted_twins(sfen)
        assert ours == theirs, f"{sfen}: only ours {sorted(ours - theirs)}, only cshogi's {sorted(theirs - ours)}"
        found += len(theirs)
    assert found > len(sfens)  # more than one a position: the check is not vacuous


def _mirrored_sfen(sfen: str) -> str:
    """``sfen`` with its files reversed (file f to 10 - f)."""
    rows, rest = sfen.split(" ", 1)
    tokens = [re.findall(r"\+?[A-Za-z]|\d", row) for row in rows.split("/")]
    cells = [[c for t in row for c in (["1"] * int(t) if t.isdigit() else [t])] for row in tokens]
    packed = [re.sub(r"1+", lambda m: str(len(m.group())), "".join(row[::-1])) for row in cells]
    return "/".join(packed) + " " + rest


def _mirrored_usi(move: str) -> str:
    chars = list(move)
    for i in (2,) if move[1] == "*" else (0, 2):  # the files of 7g7f, 8h2b+, P*5e
        chars[i] = str(10 - int(chars[i]))
    return "".join(chars)


def test_scattered_positions__mirrored_position_has_the_mirrored_moves(scattered):
    """Shogi's rules do not tell the files apart (what the learner's ``replay.mirror``
    rests on): by cshogi, the mirrored position's legal moves are the mirrored moves;
    by the dense core, its legal mask is the mask taken through ``MIRRORED_ACTIONS``."""
    sfens, board, color, out = scattered
    hand = _mover_frame_arrays(sfens)[1]
    for sfen in sfens[:256]:
        theirs = {_mirrored_usi(m) for m in cshogi_moves(cshogi.Board(sfen))}
        assert cshogi_moves(cshogi.Board(_mirrored_sfen(sfen))) == theirs, sfen
    mirrored_mask = np.asarray(_analyze(np.asarray(movegen.mirror_board(jnp.asarray(board))), hand, color, "dense")[0])
    masks = out["dense"][0]
    np.testing.assert_array_equal(mirrored_mask, masks[:, movegen.MIRRORED_ACTIONS])
    assert (mirrored_mask != masks).any(axis=1).mean() > 0.9  # mirroring moves something
    np.testing.assert_array_equal(movegen.MIRRORED_ACTIONS[movegen.MIRRORED_ACTIONS], np.arange(movegen.NUM_ACTIONS))


def _is_pawn_drop_mate_square(sfen: str, legal: set[str]) -> bool:
    """Whether dropping a pawn in front of the enemy king is refused only as pawn-drop mate.

    In the crowded set the mover holds a pawn, has no unpromoted pawn on the board and
    the square is empty; not being in check, any refusal can only be the mate rule.
    """
    board = cshogi.Board(sfen)
    file_, rank = divmod(board.king_square(1 - board.turn), 9)
    rank += 1 if board.turn == cshogi.BLACK else -1
    if not 0 <= rank <= 8 or board.piece(file_ * 9 + rank) != cshogi.NONE or board.is_check():
        return False
    return f"P*{file_ + 1}{'abcdefghi'[rank]}" not in legal


def test_crowded_positions__pawn_drop_mates_are_refused_like_cshogi(crowded):
    sfens, board, color, out = crowded
    masks = out["dense"][0]
    _assert_moves_match_cshogi(sfens, board, color, masks)
    mates = sum(_is_pawn_drop_mate_square(s, cshogi_moves(cshogi.Board(s))) for s in sfens)
    assert mates >= len(sfens) // 40, mates
    np.testing.assert_array_equal(masks, out["pgx"][0])


def _odd_batch():
    rng = np.random.default_rng(45)
    board, hand, _ = _mover_frame_arrays([random_scattered_sfen(rng) for _ in range(45)])
    return board, hand, jax.jit(jax.vmap(dense.analyze))(board, hand)


@pytest.mark.slow  # ~30 s of compiles; every batched test exercises the vmap rule
def test_custom_vmap__unbatched_and_odd_batches_agree():
    """One position and a batch of 45 (not a multiple of 32)."""
    board, hand, batched = _odd_batch()
    single = jax.jit(dense.analyze)(board[7], hand[7])
    np.testing.assert_array_equal(single[0], batched[0][7])
    assert bool(single[1]) == bool(batched[1][7])


@pytest.mark.slow
def test_custom_vmap__nested_and_broadcast_batches_agree():
    """A vmap of a vmap, and an unbatched argument under vmap."""
    board, hand, batched = _odd_batch()
    nested = jax.jit(jax.vmap(jax.vmap(dense.analyze)))(board.reshape(5, 9, 81), hand.reshape(5, 9, 2, 7))
    np.testing.assert_array_equal(np.asarray(nested[0]).reshape(45, -1), batched[0])
    # An unbatched argument under vmap is broadcast: the same hand for every board.
    shared = jax.jit(jax.vmap(dense.analyze, in_axes=(0, None)))(board, hand[0])
    np.testing.assert_array_equal(shared[0][0], batched[0][0])


@pytest.mark.slow  # ~30 s; bench/env_bench.py checks the same
def test_step__compiles_without_gathers_or_scatters():
    """The batched step plus observation: no data-dependent gathers or scatters in the HLO."""
    rules = env.Rules(history=17)
    state = jax.tree.map(lambda a: jnp.stack([a, a]), notation.from_sfen(notation.STARTPOS_SFEN, rules))

    def step(state, action):
        state = env.step(state, action, rules)
        return state, env.observe(state, rules)

    hlo = jax.jit(jax.vmap(step)).lower(state, jnp.zeros(2, jnp.int32)).compile().as_text()
    assert re.search(r"\bgather\(", hlo) is None
    assert re.search(r"\bscatter\(", hlo) is None


def test_game_state__is_pgx_s_field_for_field_with_the_same_start():
    """``movegen.GameState`` stands in for pgx's (not imported with the environment)."""
    from pgx._src.games import shogi as pgx_shogi

    assert movegen.GameState._fields == pgx_shogi.GameState._fields
    ours, theirs = movegen.GameState(), pgx_shogi.GameState()
    for name in movegen.GameState._fields:
        a, b = np.asarray(getattr(ours, name)), np.asarray(getattr(theirs, name))
        assert a.dtype == b.dtype and a.shape == b.shape, name
        np.testing.assert_array_equal(a, b, err_msg=name)


def test_importing_the_environment_does_not_import_pgx_s_shogi():
    import subprocess
    import sys

    code = "import sys, envs.env, envs.notation, az.network; print('pgx._src.games.shogi' in sys.modules)"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120)
    assert result.stdout.strip() == "False", result.stderr[-2000:]


# The "pgx" core's own parts (envs.pgx_core) against pgx's private functions, the oracle. -


def test_pgx_core__tables_equal_pgx_s():
    """``squares_along``: a square's 8 neighbours are pgx's ``AROUND_IX``, and every square a
    piece of either side can reach it from, or go to from it, is pgx's ``CAN_MOVE_ANY``."""
    from pgx._src.games import shogi as pgx_shogi

    behind, ahead = pgx_core.squares_along(-1), pgx_core.squares_along(1)
    around, any_move = np.asarray(pgx_shogi.AROUND_IX), np.asarray(pgx_shogi.CAN_MOVE_ANY)
    for square in range(81):
        assert set(ahead[:8, square, 0]) - {81} == set(around[square]) - {-1}, square
        assert set(np.concatenate([behind[:, square].ravel(), ahead[:, square].ravel()])) - {81} == (
            set(any_move[square]) - {-1}), square


def test_pgx_core__check_observation_and_pawn_drop_mate_equal_pgx_s_own(crowded):
    """What pgx's public API lacks, written in envs.pgx_core, equals pgx's private
    functions: the check test and the observation everywhere; the pawn-drop-mate test
    where the enemy king is off the edge (on the edge pgx's is wrong, which the dense
    core's test against cshogi covers)."""
    from pgx._src.games import shogi as pgx_shogi

    sfens = crowded[0]
    board, hand, color = _mover_frame_arrays(sfens)

    @jax.jit
    @jax.vmap
    def both(board, hand, color):
        x = movegen.GameState(board=board, hand=hand, color=color)
        ours = (pgx_core.in_check(board), *pgx_core.pawn_drop_mate(board), pgx_core.observe(x))
        theirs = (pgx_shogi._is_checked(pgx_shogi._set_cache(x)), *pgx_shogi._is_drop_pawn_mate(x),
                  pgx_shogi._observe(x, True))
        return ours, theirs

    (checked, mate, square, observation), (their_checked, their_mate, their_square, their_observation) = both(
        board, hand, color)
    np.testing.assert_array_equal(checked, their_checked)
    np.testing.assert_array_equal(observation, their_observation)
    file_index, rank = np.divmod(np.argmax(board == 21, axis=1), 9)
    inside = (file_index % 8 != 0) & (rank % 8 != 0)
    np.testing.assert_array_equal(np.asarray(mate)[inside], np.asarray(their_mate)[inside])
    np.testing.assert_array_equal(np.asarray(square)[inside], np.asarray(their_square)[inside])
    assert np.asarray(checked).any() and np.asarray(mate)[inside].sum() >= 5  # not vacuous
