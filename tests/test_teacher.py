"""The teacher set (data/teacher.tsv, az.measure.teacher): size, split, legality against cshogi,
conversion to states and actions, malformed input, and that training never reads it; its
test part (data/teacher_test.tsv): new games, read only where a final figure asks for it."""

import ast
import collections
import csv
import os
import random
import sys

import cshogi
import numpy as np
import pytest

from az.measure import teacher

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SHIPPED = os.path.join(ROOT, "data", "teacher.tsv")
SHIPPED_TEST = os.path.join(ROOT, "data", "teacher_test.tsv")
GOOD_ROW = "\t".join(["lnsgkgsnl/1r5b1/ppppppppp/9/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL w - 2", "8c8d", "-40", "", "1",
                      "30", "0", "0", "standard", "fs2000-fs200", "7", "fit"])


@pytest.fixture(scope="module")
def shipped() -> teacher.TeacherSet:
    return teacher.load()


@pytest.fixture(scope="module")
def shipped_test() -> teacher.TeacherSet:
    return teacher.load_split("test")


def _key(sfen: str) -> str:
    return " ".join(sfen.split()[:3])


def test_shipped__loads_from_the_package_path_with_the_promised_sizes(shipped):
    assert os.path.samefile(teacher.DEFAULT_PATH, SHIPPED)
    assert shipped.size >= 5000
    assert shipped.fit.sum() >= 4000 and shipped.heldout.sum() >= 1000
    assert (shipped.fit ^ shipped.heldout).all()
    assert os.path.getsize(SHIPPED) < 2 * 1024 * 1024  # small enough for git
    for column in ("score_cp", "mate", "ply", "legal_moves", "drop", "promotion", "game", "fit", "heldout"):
        assert getattr(shipped, column).shape == (shipped.size,)
    assert set(shipped.start) == {"standard", "random_start(2)", "shogi816k"}
    players = {p for pair in shipped.players for p in pair.split("-")}
    assert players == {"fs200", "fs2000", "fs20000", "greedy"}


def test_shipped__split_by_game_without_duplicates_or_evaluation_openings(shipped):
    assert not set(shipped.game[shipped.fit]) & set(shipped.game[shipped.heldout])
    keys = [_key(s) for s in shipped.sfens]
    assert len(set(keys)) == len(keys)
    with open(os.path.join(ROOT, "data", "openings.tsv"), encoding="utf-8") as f:
        openings = {_key(line.split("\t")[4]) for line in f.read().splitlines()[1:]}
    assert not openings & set(keys)
    order = list(zip(shipped.game, shipped.ply))
    assert order == sorted(order)  # deterministic order: by game, then ply


def test_shipped__moves_legal_and_counts_match_cshogi(shipped):
    _check_against_cshogi(shipped)


def _check_against_cshogi(shipped: teacher.TeacherSet) -> None:
    from envs import notation

    mates = 0
    for i, (sfen, move) in enumerate(zip(shipped.sfens, shipped.best_moves)):
        notation.parse_sfen(sfen)  # validated before cshogi sees it (cshogi aborts on a bad SFEN)
        board = cshogi.Board(sfen)
        assert not board.is_game_over(), sfen
        legal = list(board.legal_moves)
        assert len(legal) == shipped.legal_moves[i] >= 2, sfen
        parsed = board.move_from_usi(move)
        assert parsed != 0 and board.is_legal(parsed), (sfen, move)
        assert cshogi.move_is_drop(parsed) == shipped.drop[i]
        assert bool(cshogi.move_is_promotion(parsed)) == shipped.promotion[i]
        if shipped.mate[i]:
            mates += 1
            n = shipped.mate[i]
            assert shipped.score_cp[i] == (teacher.MATE_SCORE - n if n > 0 else -teacher.MATE_SCORE - n)
    assert np.abs(shipped.score_cp[shipped.mate == 0]).max() < teacher.MATE_SCORE - 1000
    assert shipped.drop.any() and shipped.promotion.any()


def test_shipped_test__new_games_from_new_starts_and_players(shipped, shipped_test):
    assert os.path.samefile(teacher.TEST_PATH, SHIPPED_TEST)
    assert 1000 <= shipped_test.size and shipped_test.test.all() and not shipped.test.any()
    assert set(shipped_test.start) == {"random_start(4)", "random_start(6)"}
    players = {p for pair in shipped_test.players for p in pair.split("-")}
    assert players == {"fs500", "fs5000", "fs50000"}
    keys = [_key(s) for s in shipped_test.sfens]
    assert len(set(keys)) == len(keys)
    with open(os.path.join(ROOT, "data", "openings.tsv"), encoding="utf-8") as f:
        openings = {_key(line.split("\t")[4]) for line in f.read().splitlines()[1:]}
    assert not (openings | {_key(s) for s in shipped.sfens}) & set(keys)
    order = list(zip(shipped_test.game, shipped_test.ply))
    assert order == sorted(order)
    _check_against_cshogi(shipped_test)


def test_shipped_test__read_only_where_asked_for():
    """Recipes are chosen on fit and heldout: the default file, the probe's default split and
    every module but the loader and the report's --split test leave the test file alone."""
    import inspect

    from az.measure import agreement

    assert teacher.DEFAULT_PATH != teacher.TEST_PATH
    assert inspect.signature(agreement.make_probe).parameters["split"].default == "heldout"
    readers = set()
    for folder in ("az", "envs", "configs"):
        for directory, _, files in os.walk(os.path.join(ROOT, folder)):
            for name in files:
                if name.endswith(".py"):
                    with open(os.path.join(directory, name), encoding="utf-8") as f:
                        text = f.read()
                    if "TEST_PATH" in text or "teacher_test" in text or 'load_split("test")' in text:
                        readers.add(os.path.relpath(os.path.join(directory, name), ROOT))
    assert readers <= {"az/measure/teacher.py", "az/measure/agreement.py", "az/play/report/cli.py"}, readers
    with pytest.raises(ValueError, match="teacher split 'train': choose one of fit, heldout, test"):
        teacher.load_split("train")


def test_shipped_test_openings__balanced_new_and_as_the_book_is_laid_out():
    """data/openings_test.tsv (scripts/make_openings.py): the book's columns, each line
    legal from the start and ending where it says, the mover not in check, within 150 cp,
    and no position the book's lines pass through."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import make_openings
    finally:
        sys.path.pop(0)
    with open(os.path.join(ROOT, "data", "openings_test.tsv"), encoding="utf-8") as f:
        rows = list(csv.DictReader(f, delimiter="\t"))
    with open(os.path.join(ROOT, "data", "openings.tsv"), encoding="utf-8") as f:
        assert list(rows[0]) == f.readline().rstrip("\n").split("\t")
    assert 30 <= len(rows) <= 50
    book = make_openings.book_positions(make_openings.read_book())
    finals = []
    for row in rows:
        board = cshogi.Board()
        for move in row["usi_moves"].split():
            parsed = board.move_from_usi(move)
            assert parsed and board.is_legal(parsed), (row["line_id"], move)
            board.push(parsed)
        assert board.sfen() == row["final_sfen"] and not board.is_check() and not board.is_game_over()
        assert abs(int(row["fs_eval_cp"])) <= 150, row["line_id"]
        finals.append(_key(row["final_sfen"]))
    assert len(set(finals)) == len(finals) and not set(finals) & book
    assert {r["opening_name"] for r in rows} >= {"Random line", "Yagura variation"}


def test_to_device__round_trips_moves(shipped):
    import jax

    from envs import env, notation

    # A few positions of each kind: drops, promotions, white to move, plain moves.
    picks = [int(np.flatnonzero(shipped.drop)[0]), int(np.flatnonzero(shipped.promotion)[0])]
    white = [i for i, s in enumerate(shipped.sfens) if s.split()[1] == "w"]
    picks += [white[0], white[-1], 0, shipped.size - 1]
    subset = shipped.select(np.asarray(picks))
    assert subset.sfens == [shipped.sfens[i] for i in picks]
    states, best = teacher.to_device(subset, env.Rules())
    assert best.shape == (len(picks),) and best.dtype == np.int32
    assert states.x.board.shape == (len(picks), 81)
    for i in range(len(picks)):
        state = jax.tree.map(lambda leaf: np.asarray(leaf)[i], states)
        assert notation.to_sfen(state) == cshogi.Board(subset.sfens[i]).sfen()
        assert notation.action_to_usi(state, int(best[i])) == subset.best_moves[i]


def _write(tmp_path, lines):
    path = tmp_path / "teacher.tsv"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_load__reads_a_minimal_file(tmp_path):
    ts = teacher.load(_write(tmp_path, ["\t".join(teacher.COLUMNS), GOOD_ROW]))
    assert ts.size == 1 and ts.best_moves == ["8c8d"] and ts.score_cp.tolist() == [-40]
    assert ts.mate.tolist() == [0] and ts.fit.tolist() == [True] and ts.heldout.tolist() == [False]
    ts = teacher.load(_write(tmp_path, ["\t".join(teacher.COLUMNS), GOOD_ROW.replace("\tfit", "\ttest")]))
    assert ts.test.tolist() == [True] and not ts.fit.any() and not ts.heldout.any()


@pytest.mark.parametrize("bad, message", [
    (GOOD_ROW.replace("8c8d", "8c8z"), "line 3: best_move '8c8z' is not a USI move"),
    (GOOD_ROW.replace("\t-40\t", "\tx\t"), "line 3: score_cp 'x' is not an integer"),
    (GOOD_ROW.replace("\tfit", "\ttrain"), "line 3: split 'train'"),
    (GOOD_ROW.replace(" w - 2", " w"), "line 3: malformed SFEN"),
    ("\t".join(GOOD_ROW.split("\t")[:-1]), "line 3: expected 12 tab-separated fields, got 11"),
    (GOOD_ROW.replace("\t0\t0\t", "\t1\t0\t"), "line 3: drop/promotion"),
])
def test_load__malformed_line_names_the_file_and_line(tmp_path, bad, message):
    path = _write(tmp_path, ["\t".join(teacher.COLUMNS), GOOD_ROW, bad])
    with pytest.raises(ValueError, match=r"teacher set .*teacher\.tsv " + message.replace("(", r"\(")):
        teacher.load(path)


def test_load__bad_header_missing_file_or_no_rows(tmp_path):
    with pytest.raises(ValueError, match="line 1: the header"):
        teacher.load(_write(tmp_path, ["sfen\tmove", GOOD_ROW]))
    with pytest.raises(ValueError, match="no positions"):
        teacher.load(_write(tmp_path, ["\t".join(teacher.COLUMNS)]))
    with pytest.raises(ValueError, match="cannot read"):
        teacher.load(str(tmp_path / "absent.tsv"))


def _imported_modules(path: str) -> set:
    with open(path, encoding="utf-8") as f:
        tree = ast.parse(f.read())
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = ("." * node.level) + (node.module or "")
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize("module", ["az/train/replay.py", "az/train/selfplay.py", "az/train/learner.py"])
def test_training_never_reads_the_teacher_set(module):
    """Measurement data never feeds training: the replay buffer, self-play and the learner
    do not import az.measure.teacher (nor name the teacher file)."""
    path = os.path.join(ROOT, module)
    imported = _imported_modules(path)
    assert not any(name.split(".")[-1] == "teacher" for name in imported), imported
    with open(path, encoding="utf-8") as f:
        text = f.read()
    assert "teacher.tsv" not in text and "teacher_test" not in text and "az.measure.teacher" not in text


def test_generator__random_starts_play_the_plies_they_name():
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import make_teacher_set
    finally:
        sys.path.pop(0)
    for plies in (2, 4, 6):
        board = make_teacher_set.start_board(f"random_start({plies})", random.Random(plies))
        assert board.sfen().split()[3] == str(plies + 1)
    assert make_teacher_set.PARTS["test"].rng_name != make_teacher_set.PARTS["fit-heldout"].rng_name


def test_generator__shogi816k_starts_follow_the_project_rule():
    """The host sampler draws what envs.starts.shogi816k_position draws (rotation rule)."""
    sys.path.insert(0, os.path.join(ROOT, "scripts"))
    try:
        import make_teacher_set
    finally:
        sys.path.pop(0)
    rng = random.Random(0)
    rook_files, seen = collections.Counter(), set()
    for _ in range(500):
        sfen = make_teacher_set.shogi816k_sfen(rng)
        seen.add(sfen)
        rows = cshogi.Board(sfen).sfen().split()[0].split("/")
        assert rows[2] == "ppppppppp" and rows[6] == "PPPPPPPPP" and rows[3:6] == ["9"] * 3
        assert rows[0] == rows[8][::-1].lower() and rows[1] == rows[7][::-1].lower()  # rotated
        assert sorted(rows[8]) == sorted("LLNNSSGGK")
        expanded = "".join("." * int(c) if c.isdigit() else c for c in rows[7])
        assert sorted(expanded) == sorted("BR.......")
        rook_files[9 - expanded.index("R")] += 1
        board = cshogi.Board(sfen)
        assert board.turn == cshogi.BLACK and not board.is_check() and len(list(board.legal_moves)) > 0
    assert len(seen) > 490 and set(rook_files) == set(range(1, 10))
