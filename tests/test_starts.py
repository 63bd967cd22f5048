"""Start positions: RandomStart2, Shogi816K, books, mixtures and schedules.

Distribution tests use a fixed PRNG key and a chi-square test at p > 1e-4: a correct
sampler essentially never fails, a biased one does.
"""

import collections
import functools

import cshogi
import jax
import jax.numpy as jnp
import numpy as np
import pytest
from scipy import stats

from envs import env, notation, starts
from helpers import cshogi_board, cshogi_moves, normalized, sfen_of_mover_frame, take, to_host

P_MIN = 1e-4


def _sample(spec: str, n: int, progress: float = 0.0, seed: int = 0, chunk: int | None = None):
    """``n`` start states of ``spec`` (vmapped, in chunks of one compiled shape), on the host."""
    fn = _compiled_start(spec)
    chunk = chunk or n
    assert n % chunk == 0
    keys = jax.random.split(jax.random.key(seed), n).reshape(n // chunk, chunk)
    parts = [to_host(fn(k, jnp.float32(progress))) for k in keys]
    return jax.tree.map(lambda *a: np.concatenate(a), *parts)


@functools.lru_cache(maxsize=None)
def _compiled_start(spec: str):
    return jax.jit(jax.vmap(starts.make_start_fn(spec, env.Rules()), in_axes=(0, None)))


def _position_counts(batch) -> dict[str, int]:
    """SFEN -> how often it occurs in a batch of states (unique rows first: fast)."""
    x = batch.x
    n = len(x.board)
    rows = np.concatenate([x.board, x.hand.reshape(n, -1), x.color[:, None], batch.start_move_number[:, None]], 1)
    _, index, counts = np.unique(rows, axis=0, return_index=True, return_counts=True)
    return {
        sfen_of_mover_frame(x.board[i], x.hand[i], x.color[i], batch.start_move_number[i]): int(c)
        for i, c in zip(index, counts)
    }


def _cshogi_two_ply_positions() -> dict[str, tuple[str, str]]:
    """SFEN -> (black's move, white's reply) for every position two plies from the start."""
    board, positions = cshogi.Board(), {}
    for first in list(board.legal_moves):
        board.push(first)
        for reply in list(board.legal_moves):
            board.push(reply)
            positions[board.sfen()] = (cshogi.move_to_usi(first), cshogi.move_to_usi(reply))
            board.pop()
        board.pop()
    return positions


def _check_random_start_2(n: int, chunk: int):
    batch = _sample("random_start(2)", n, chunk=chunk)
    assert (batch.start_scheme == 0).all() and (batch.x.step_count == 0).all()
    assert (batch.start_move_number == 3).all() and (batch.x.color == 0).all()
    assert not batch.terminated.any() and not batch.x.hand.any()
    counts = _position_counts(batch)
    expected = _cshogi_two_ply_positions()
    assert len(expected) == 900
    assert set(counts) == set(expected)
    p = stats.chisquare(list(counts.values())).pvalue
    assert p > P_MIN, f"RandomStart2 is not uniform over its 900 positions (p = {p:.2g})"
    # Each ply's move on its own (30 cells each: far more power against a skewed move choice).
    for ply in range(2):
        by_move = collections.Counter()
        for sfen, count in counts.items():
            by_move[expected[sfen][ply]] += count
        assert len(by_move) == 30
        p = stats.chisquare(list(by_move.values())).pvalue
        assert p > P_MIN, f"RandomStart2's ply {ply + 1} moves are not uniform (p = {p:.2g})"


@pytest.mark.slow  # ~25 s; the large-sample version below is slow too
def test_random_start__yields_the_900_positions_evenly():
    _check_random_start_2(18_000, chunk=3_000)


@pytest.mark.slow
def test_random_start__yields_the_900_positions_evenly_large_sample():
    _check_random_start_2(90_000, chunk=3_000)


def test_random_start__chi_square_detects_a_biased_sampler():
    """The uniformity check has power: a sampler favouring 10% of the positions fails it."""
    rng = np.random.default_rng(0)
    weights = np.ones(900)
    weights[:90] = 1.5
    counts = np.bincount(rng.choice(900, 18_000, p=weights / weights.sum()), minlength=900)
    assert stats.chisquare(counts).pvalue < P_MIN


# Shogi816K --------------------------------------------------------------------------

_BACK_RANK = collections.Counter({1: 2, 2: 2, 3: 2, 6: 2, 7: 1})  # L N S G K (pgx ids)


def _black_frame(board, color):
    board = np.asarray(board)
    return board if color == 0 else np.where(board >= 0, (board + 14) % 28, -1)[::-1]


def _check_shogi816k_side(board_black_frame, side: int, sfen: str):
    """Piece placement of one side, in its own frame (rank index 8 = its back rank)."""
    own = board_black_frame if side == 0 else np.where(board_black_frame >= 0, (board_black_frame + 14) % 28, -1)[::-1]
    grid = own.reshape(9, 9)  # [file, rank]
    assert (grid[:, 6] == 0).all(), f"pawns not on the third rank: {sfen}"
    assert collections.Counter(grid[:, 8].tolist()) == _BACK_RANK, f"back rank: {sfen}"
    second = collections.Counter(grid[:, 7].tolist())
    assert second == collections.Counter({-1: 7, 4: 1, 5: 1}), f"rook and bishop: {sfen}"
    mine = (own >= 0) & (own < 14)
    assert mine.sum() == 20 and (np.arange(81)[mine] % 9 >= 6).all(), f"stray pieces: {sfen}"


def test_shogi816k__positions_are_legal_with_the_chosen_symmetry():
    batch = _sample("shogi816k + shogi816k(line)", 200, seed=3)
    spec = starts.parse_start("shogi816k + shogi816k(line)")
    assert [leaf.symmetry for leaf in spec.leaves] == ["rotation", "line"]
    n_line = int(batch.start_scheme.sum())
    assert 60 <= n_line <= 140  # about half each
    distinct = set()
    for i in range(200):
        state = take(batch, i)
        sfen = notation.to_sfen(state)
        distinct.add(sfen)
        board = cshogi_board(sfen)
        assert board.is_ok() and not board.is_check() and board.turn == cshogi.BLACK, sfen
        assert set(notation.legal_moves(state)) == cshogi_moves(board) != set(), sfen
        assert not bool(state.terminated) and not bool(state.checked)
        assert int(state.start_move_number) == 1 and int(state.ply) == 0 and not state.x.hand.any()
        black = _black_frame(state.x.board, int(state.x.color))
        _check_shogi816k_side(black, 0, sfen)
        _check_shogi816k_side(black, 1, sfen)
        squares = np.arange(81)
        source = 80 - squares if state.start_scheme == 0 else (squares // 9) * 9 + 8 - squares % 9
        white = np.where(black >= 14, black - 14, -1)
        black_only = np.where((black >= 0) & (black < 14), black, -1)
        assert np.array_equal(white, black_only[source]), f"white does not mirror black: {sfen}"
    assert len(distinct) >= 198  # 1.6 million arrangements: (almost) no repeats in 200


def test_shogi816k__spread_is_uniform():
    sample = jax.jit(jax.vmap(lambda k: starts.shogi816k_position(k, "rotation")))
    board = np.asarray(sample(jax.random.split(jax.random.key(4), 45_000)).board).reshape(-1, 9, 9)  # [n, file, rank]
    rook_file = np.argmax(board[:, :, 7] == 5, axis=1)
    bishop_file = np.argmax(board[:, :, 7] == 4, axis=1)
    king_file = np.argmax(board[:, :, 8] == 7, axis=1)
    assert (rook_file != bishop_file).all()
    for name, files in [("rook", rook_file), ("bishop", bishop_file), ("king", king_file)]:
        p = stats.chisquare(np.bincount(files, minlength=9)).pvalue
        assert p > P_MIN, f"{name} file is not uniform (p = {p:.2g})"
    pairs = np.bincount(rook_file * 9 + bishop_file, minlength=81).reshape(9, 9)
    p = stats.chisquare(pairs[~np.eye(9, dtype=bool)]).pvalue  # the 72 ordered pairs
    assert p > P_MIN, f"rook/bishop squares are not uniform (p = {p:.2g})"
    # Every back-rank file holds L N S G with probability 2/9 each and K with 1/9.
    kinds = np.stack([(board[:, :, 8] == k).sum(0) for k in (1, 2, 3, 6, 7)], 1)  # [file, kind]
    expected = np.tile(np.array([2, 2, 2, 2, 1]) / 9 * len(board), (9, 1))
    p = stats.chisquare(kinds.reshape(-1), expected.reshape(-1), ddof=0).pvalue
    assert p > P_MIN, f"back rank pieces are not uniform over files (p = {p:.2g})"


# Mixtures and schedules -------------------------------------------------------------


def test_parse_start__schedule_structure():
    spec = starts.parse_start("shogi816k@0.6 > random_start(2)")
    assert spec.leaves == (starts.Shogi816K("rotation"), starts.RandomStart(2))
    assert spec.phase_ends == (0.6, 1.0)
    assert spec.weights == ((1.0, 0.0), (0.0, 1.0))
    assert spec.names == ("shogi816k", "random_start(2)")
    mixture = starts.parse_start("0.25*standard + 0.75*shogi816k")
    assert mixture.phase_ends == (1.0,) and mixture.weights == ((0.25, 0.75),)
    same = starts.parse_start("standard + 3*shogi816k(line) + standard")  # repeated leaves add up
    assert same.leaves == (starts.Standard(), starts.Shogi816K("line")) and same.weights == ((0.4, 0.6),)


def test_make_start_fn__schedule_switches_scheme_at_the_phase_end():
    spec = "shogi816k@0.6 > random_start(2)"
    for progress, scheme in [(0.0, 0), (0.3, 0), (0.59, 0), (0.6, 1), (0.61, 1), (1.0, 1)]:
        batch = _sample(spec, 64, progress=progress, seed=5)
        assert (batch.start_scheme == scheme).all(), progress
        # The positions come from the scheme: Shogi816K at move 1, RandomStart2 at move 3.
        assert (batch.start_move_number == (1 if scheme == 0 else 3)).all(), progress


def test_make_start_fn__mixture_follows_the_weights():
    n = 2_000
    batch = _sample("0.25*standard + 0.75*shogi816k", n, seed=6)
    fraction = batch.start_scheme.mean()
    assert abs(fraction - 0.75) < 5 * np.sqrt(0.25 * 0.75 / n), fraction
    standard = np.asarray(starts.standard_position(None).board)
    is_standard = (batch.x.board == standard).all(axis=1)
    # Scheme 0 gives the standard start; Shogi816K gives it only by a 1-in-1.6-million chance.
    assert is_standard[batch.start_scheme == 0].all() and is_standard[batch.start_scheme == 1].sum() <= 1


@pytest.mark.parametrize(
    "spec,message",
    [
        ("chess960", "unknown scheme"),
        ("shogi816k(diagonal)", "symmetry"),
        ("shogi816k > random_start(2)", "needs '@END'"),
        ("shogi816k@0.6 > standard@0.4 > random_start(2)", "must increase"),
        ("shogi816k@0.6 > standard@0.6 > random_start(2)", "must increase"),
        ("shogi816k@1.5 > standard", "must increase"),
        ("shogi816k@0.6 > standard@0.9", "last phase"),
        ("shogi816k@soon > standard", "not a number"),
        ("abc*shogi816k", "not a number"),
        ("0*shogi816k", "positive"),
        ("-1*shogi816k + standard", "positive"),
        ("random_start(65)", "at most 64"),
        ("random_start(two)", "unknown scheme"),
        ("shogi816k + ", "unknown scheme"),
        ("", "non-empty"),
    ],
)
def test_parse_start__bad_specs_raise(spec, message):
    with pytest.raises(ValueError, match=message):
        starts.parse_start(spec)


# Books ------------------------------------------------------------------------------


def test_load_book__reads_sfen_lines(book_file, openings):
    book = starts.load_book(book_file)
    assert book.board.shape == (len(openings), 81)
    got = [sfen_of_mover_frame(*(np.asarray(a[i]) for a in book)) for i in range(len(openings))]
    assert got == [normalized(row["final_sfen"]) for row in openings]


def test_load_book__reads_position_lines_with_comments(tmp_path, openings):
    """``startpos moves ...`` lines of the openings reach their recorded final SFEN."""
    path = tmp_path / "lines.txt"
    lines = ["# the openings as move lines", ""]
    lines += [f"startpos moves {row['usi_moves']}" for row in openings]
    lines += [f"position sfen {notation.STARTPOS_SFEN} moves {openings[0]['usi_moves']}"]
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    book = starts.load_book(str(path))
    got = [sfen_of_mover_frame(*(np.asarray(a[i]) for a in book)) for i in range(book.board.shape[0])]
    want = [normalized(row["final_sfen"]) for row in openings] + [normalized(openings[0]["final_sfen"])]
    assert got == want


def test_load_book__sfen_without_move_number(tmp_path):
    path = tmp_path / "three_fields.sfen"
    path.write_text("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL  b  -\n", encoding="utf-8")
    book = starts.load_book(str(path))
    assert int(book.move_number[0]) == 1
    assert np.array_equal(np.asarray(book.board[0]), np.asarray(starts.standard_position(None).board))


@pytest.mark.parametrize(
    "bad_line,message",
    [
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1 b - 1", "9 ranks"),
        ("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNX b - 1", "unknown piece"),
        ("startpos moves 7g7f 7g7f", "illegal move"),
        ("startpos moves 7g7f 3c3d 8h2b+ zz", "illegal move"),
        ("startpos moves 7g7f 3c3d 8h2b++", "illegal move"),
        ("nonsense", "must be 'startpos' or 'sfen ...'"),
        ("sfen nonsense", "SFEN needs 3 or 4 fields"),
    ],
)
def test_load_book__bad_line_names_file_and_line(tmp_path, bad_line, message):
    path = tmp_path / "bad.book"
    path.write_text(f"# a book\n{notation.STARTPOS_SFEN}\n\n{bad_line}\n", encoding="utf-8")
    with pytest.raises(ValueError, match=message) as info:
        starts.load_book(str(path))
    assert str(path) in str(info.value) and "line 4" in str(info.value)


def test_load_book__missing_or_empty_file_raises(tmp_path):
    with pytest.raises(ValueError, match="cannot read"):
        starts.load_book(str(tmp_path / "missing.sfen"))
    empty = tmp_path / "empty.sfen"
    empty.write_text("# nothing\n\n", encoding="utf-8")
    with pytest.raises(ValueError, match="no positions"):
        starts.load_book(str(empty))
    with pytest.raises(ValueError, match="cannot read"):
        starts.make_start_fn(f"book({tmp_path / 'missing.sfen'})", env.Rules())


def test_make_start_fn__book_samples_every_book_position(book_file, openings):
    n = 27 * 40
    batch = _sample(f"book({book_file})", n, seed=7)
    counts = _position_counts(batch)
    assert set(counts) == {normalized(row["final_sfen"]) for row in openings}
    p = stats.chisquare(list(counts.values())).pvalue
    assert p > P_MIN, f"book positions are not equally likely (p = {p:.2g})"
    assert not batch.terminated.any()


def test_shogi816k__count_by_enumeration():
    assert starts.count_shogi816k() == {"back_ranks": 22_680, "per_symmetry_rule": 1_632_960,
                                        "up_to_left_right_mirror": 816_480, "mirror_symmetric": 0}
