#!/usr/bin/env python3
"""Builds data/openings_test.tsv: balanced openings that no recipe is chosen on.

    .venv/bin/python scripts/make_openings.py                    # data/openings_test.tsv, 20 + 20 openings
    .venv/bin/python scripts/make_openings.py --random 2 --book 2 --out /tmp/openings.tsv   # a dry run

data/openings.tsv (27 professional lines) is what matches are played from while a recipe
is tuned; these openings are for the final figures. Two kinds, everything from ``--seed``:

- ``Random line``: candidate ``i`` plays a number of uniformly random legal plies, from
  ``--min-plies`` to ``--max-plies`` (4 to 8), from the standard start, drawn from
  ``random.Random(f"openings:{seed}:random:{i}")``.
- ``<name> variation``: candidate ``i`` takes a line of data/openings.tsv (drawn from
  ``random.Random(f"openings:{seed}:book:{i}")``), plays its first ``d`` moves
  (``d`` from 6 to the line's length - 1), then another legal move than the book's at ply
  ``d`` (uniformly drawn), then the book's later moves for as long as each is legal
  (``d + 1`` plies at least, the book's length at most).

A candidate is kept when the side to move is not in check and has a legal move, its
position (SFEN without the move number) is none of the positions data/openings.tsv's
lines pass through nor an earlier kept opening's, and fairy-stockfish, searching it by
SFEN at ``--nodes`` (100,000) with the teacher set's settings and reset
(scripts/make_teacher_set.py: ``UCI_Variant shogi``, Threads 1, Hash 16, Contempt 0), scores
it within ``--margin`` (150) centipawns of even and finds no mate. Candidates are tried in
order until ``--random`` (20) and ``--book`` (20) are kept.

Output: data/openings.tsv's columns, ``opening_id  opening_name  line_id  usi_moves
final_sfen  fs_eval_cp``: ``opening_id`` numbers the names in order of appearance,
``line_id`` is ``random_<i>`` or ``<book line>_dev<d>_<i>``, ``usi_moves`` from the standard
start, ``fs_eval_cp`` fairy-stockfish's score from black's view (as data/openings.tsv's).
Progress goes to stderr.
"""

import argparse
import csv
import os
import random
import sys

import cshogi

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)

import make_teacher_set as teacher_script  # noqa: E402  (the engine set-up and reset of the labels)

BOOK = os.path.join(ROOT, "data", "openings.tsv")
HEADER = ["opening_id", "opening_name", "line_id", "usi_moves", "final_sfen", "fs_eval_cp"]
MIN_BOOK_PREFIX = 6  # book moves kept before the deviation


def _log(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def read_book(path: str = BOOK) -> list[dict]:
    with open(path, encoding="utf-8") as f:
        return list(csv.DictReader(f, delimiter="\t"))


def book_positions(book: list[dict]) -> set:
    """Every position (SFEN without move number) the book's lines pass through."""
    keys = set()
    for row in book:
        board = cshogi.Board(teacher_script.STANDARD_SFEN)
        keys.add(teacher_script.position_key(board.sfen()))
        for move in row["usi_moves"].split():
            board.push_usi(move)
            keys.add(teacher_script.position_key(board.sfen()))
    return keys


def random_line(seed: int, i: int, min_plies: int, max_plies: int) -> tuple[str, str, list]:
    """(name, line_id, moves) of random-line candidate ``i``."""
    rng = random.Random(f"openings:{seed}:random:{i}")
    board, moves = cshogi.Board(teacher_script.STANDARD_SFEN), []
    for _ in range(rng.randint(min_plies, max_plies)):
        legal = list(board.legal_moves)
        if not legal:
            break
        move = rng.choice(legal)
        moves.append(cshogi.move_to_usi(move))
        board.push(move)
    return "Random line", f"random_{i}", moves


def book_variation(seed: int, i: int, book: list[dict]) -> tuple[str, str, list]:
    """(name, line_id, moves) of book-variation candidate ``i``."""
    rng = random.Random(f"openings:{seed}:book:{i}")
    row = rng.choice(book)
    line = row["usi_moves"].split()
    deviation = rng.randint(MIN_BOOK_PREFIX, len(line) - 1)
    board = cshogi.Board(teacher_script.STANDARD_SFEN)
    for move in line[:deviation]:
        board.push_usi(move)
    others = [m for m in board.legal_moves if cshogi.move_to_usi(m) != line[deviation]]
    move = rng.choice(others)
    moves = line[:deviation] + [cshogi.move_to_usi(move)]
    board.push(move)
    for later in line[deviation + 1:]:
        usi = board.move_from_usi(later)
        if not usi or not board.is_legal(usi):
            break
        board.push(usi)
        moves.append(later)
    return f"{row['opening_name']} variation", f"{row['line_id']}_dev{deviation}_{i}", moves


def black_score(sfen: str, nodes: int) -> int | None:
    """fairy-stockfish's centipawns for black, or None for a mate score or no answer."""
    answer = teacher_script.label((sfen, nodes))
    if answer["kind"] != "cp" or answer["best_move"] in ("", "resign", "win"):
        return None
    return answer["value"] if sfen.split()[1] == "b" else -answer["value"]


def _parse_args(argv) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--out", default=os.path.join(ROOT, "data", "openings_test.tsv"))
    parser.add_argument("--random", type=int, default=20, help="random-line openings to keep (default 20)")
    parser.add_argument("--book", type=int, default=20, help="book variations to keep (default 20)")
    parser.add_argument("--nodes", type=int, default=100_000, help="fairy-stockfish nodes per score (default 100000)")
    parser.add_argument("--margin", type=int, default=150, help="largest |score| kept, centipawns (default 150)")
    parser.add_argument("--min-plies", type=int, default=4, help="random line: fewest plies (default 4)")
    parser.add_argument("--max-plies", type=int, default=8, help="random line: most plies (default 8)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    if min(args.random, args.book, args.margin) < 0 or args.nodes < 1 or not 1 <= args.min_plies <= args.max_plies:
        parser.error("--random, --book and --margin must be >= 0, --nodes >= 1, 1 <= --min-plies <= --max-plies")
    return args


def main(argv=None) -> int:
    args = _parse_args(argv)
    if not (os.path.isfile(teacher_script.ENGINE) and os.access(teacher_script.ENGINE, os.X_OK)):
        _log(f"error: {teacher_script.ENGINE} not found; install it with `make engines`")
        return 2
    book = read_book()
    taken = book_positions(book)
    teacher_script._worker_init()
    rows, names = [], {}
    for kind, wanted, make in (("random", args.random, lambda i: random_line(args.seed, i, args.min_plies,
                                                                                args.max_plies)),
                               ("book", args.book, lambda i: book_variation(args.seed, i, book))):
        kept, tried = 0, 0
        while kept < wanted:
            if tried >= 50 * max(wanted, 1):
                _log(f"error: only {kept} of {wanted} {kind} openings in {tried} candidates (raise --margin)")
                return 1
            name, line_id, moves = make(tried)
            tried += 1
            board = cshogi.Board(teacher_script.STANDARD_SFEN)
            for move in moves:
                board.push_usi(move)
            key = teacher_script.position_key(board.sfen())
            if board.is_check() or board.is_game_over() or key in taken:
                continue
            score = black_score(board.sfen(), args.nodes)
            if score is None or abs(score) > args.margin:
                continue
            taken.add(key)
            kept += 1
            opening_id = names.setdefault(name, len(names) + 1)
            rows.append([opening_id, name, line_id, " ".join(moves), board.sfen(), score])
            _log(f"{kind} {kept}/{wanted} after {tried} candidates: {line_id} ({len(moves)} plies, {score:+d} cp)")
    tmp = args.out + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write("\t".join(HEADER) + "\n")
        for row in rows:
            f.write("\t".join(str(v) for v in row) + "\n")
    os.replace(tmp, args.out)
    _log(f"wrote {args.out}: {len(rows)} openings")
    return 0


if __name__ == "__main__":
    sys.exit(main())
