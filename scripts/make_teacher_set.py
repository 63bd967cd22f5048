#!/usr/bin/env python3
"""Builds the teacher set: shogi positions labelled with fairy-stockfish's best move.

    .venv/bin/python scripts/make_teacher_set.py                 # data/teacher.tsv, 6,000 positions
    .venv/bin/python scripts/make_teacher_set.py --positions 50 --out /tmp/teacher.tsv   # a dry run
    .venv/bin/python scripts/make_teacher_set.py --part test --jobs 1   # data/teacher_test.tsv, 1,200 positions

The teacher set is MEASUREMENT data: policy agreement of trained networks with a strong
engine, and the fitness of a classical evaluation tuned by a genetic algorithm. No training
path may read it (``az.measure.teacher`` loads it; tests/test_teacher.py checks the trainer does not).

How it is made (everything follows from ``--seed``; the output does not depend on ``--jobs``):

1. Games. Game ``g`` draws, from ``random.Random(f"teacher:{seed}:game:{g}")``:
   a start scheme, equally likely: ``standard``; ``random_start(2)`` (RandomStart2: two
   uniformly random legal plies from the standard start); ``shogi816k`` (the project's
   ``envs.starts.shogi816k_position`` rule: black's rook and bishop on two distinct random
   squares of rank 8, rank 9's L L N N S S G G K in a uniformly random order, pawns in place,
   white the 180-degree rotation of black, black to move);
   and a player for each side, independently: ``fs200`` / ``fs2000`` / ``fs20000``
   (fairy-stockfish at that many nodes, playing a uniformly random legal move instead with
   probability 0.15 at each of its turns; weights 0.25 / 0.3 / 0.3) or ``greedy`` (the
   project's one-ply material player, ``az.play.players.greedy_move``, random tie-breaks;
   weight 0.15). A game ends at mate (no legal move), at a repetition (cshogi's
   ``Board.is_draw()`` reports a draw or a perpetual check: the position occurred before)
   or after 256 plies. The positions of data/openings.tsv (the evaluation openings) are
   never starts, and any that a game reaches are left out of the set.
2. Samples. One per 10 of a game's eligible positions (rounded up, at most ``--per-game``,
   8), at distinct plies drawn uniformly among its positions that are not over and have at
   least two legal moves (short games are not over-sampled); a position whose SFEN
   without the move number was already taken (from an earlier game, or earlier in the
   same game) is dropped.
3. Labels. Each position is searched with ``position sfen SFEN`` (no move history: the
   label is a function of the SFEN alone) and ``go nodes --nodes`` (100,000), Threads 1,
   Hash 16, Contempt 0, in an engine set up as ``az.play.usi_client.UsiClient`` sets up
   the project's evaluation engines (every option set explicitly; ``UCI_Variant shogi``
   matters: left implicit, fairy-stockfish 11.1 evaluates differently, e.g. -1893 against
   -1061 cp) and reset before every position (``setoption name Threads`` re-creates the
   search threads and their histories, ``usinewgame`` clears the hash; ``usinewgame`` alone
   leaves results depending on earlier searches). A fresh process gives the same answer,
   whatever the order and ``--jobs``. Positions the engine answers with
   ``resign``/``win``, or with a move cshogi calls illegal, are skipped and counted.
   Labels are taken in sample order until ``--positions`` are labelled.
4. Split, by game: the games are shuffled (``random.Random(f"teacher:{seed}:split")``) and
   taken into ``heldout`` until it holds ``--heldout`` (0.2) of the positions; the rest is
   ``fit``. All positions of a game are on one side.

The test part (``--part test``, written to data/teacher_test.tsv, default ``--seed 1``)
is the positions no choice is made on: new games, from ``random.Random(f"teacher-test:{seed}:game:{g}")``,
with start schemes and players the fit/heldout games never used: ``random_start(4)`` or
``random_start(6)`` (four or six uniformly random legal plies from the standard start),
and ``fs500`` / ``fs5000`` / ``fs50000`` (weights 0.3 / 0.4 / 0.3, a random move with
probability 0.1). Samples and labels as above (same nodes, same engine settings); a
position of data/teacher.tsv is left out like an opening; every row's split is ``test``.

Output: a TSV sorted by (game, ply) with the header

    sfen  best_move  score_cp  mate  ply  legal_moves  drop  promotion  start  players  game  split

``sfen``: cshogi's SFEN with its move number; ``best_move``: USI text; ``score_cp``: the
last ``info ... score`` before ``bestmove``, from the side to move, in fairy-stockfish's
centipawns, mate scores as +/-(30000 - N) for ``score mate N``;
``mate``: that N (plies, negative when the side to move is mated; empty otherwise);
``ply``: the SFEN's move number - 1 (a RandomStart2 start has ply 2); ``legal_moves``:
cshogi's count; ``drop``/``promotion``: 1 if the best move is a drop / promotes; ``start``:
the scheme (the names of ``envs.starts``); ``players``: black-white, e.g. ``fs2000-greedy``;
``game``: the game's index; ``split``: ``fit`` or ``heldout`` (``test`` in the test part).

Progress (games, positions labelled, positions/s, nodes/s, ETA) goes to stderr.
``--cache FILE`` keeps every label (FILE) and game (FILE.games) as it arrives and reuses
them in a later run (a label depends only on the SFEN and ``--nodes``, a game only on the
seed and ``--per-game``), so an interrupted run resumes where it stopped, with any ``--jobs``.
Delete the cache after changing how games are played (the constants below).
"""

import argparse
import csv
import json
import multiprocessing
import os
import random
import re
import sys
import time
from typing import NamedTuple

import cshogi

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

from az.play.usi_client import EngineFailure, UsiClient  # noqa: E402  (no JAX in this import)

ENGINE = "/usr/games/fairy-stockfish"
ENGINE_OPTIONS = {"UCI_Variant": "shogi", "Threads": "1", "Hash": "16", "Contempt": "0"}
MAX_PLIES = 256
RANDOM_MOVE_CHANCE = 0.15  # of an fs player's turns
STARTS = (("standard", 1.0), ("random_start(2)", 1.0), ("shogi816k", 1.0))
PLAYERS = (("fs200", 0.25), ("fs2000", 0.3), ("fs20000", 0.3), ("greedy", 0.15))


class Part(NamedTuple):
    """How the games of one part of the teacher set are drawn."""

    rng_name: str  # the prefix of every random.Random seed string
    starts: tuple  # (scheme, weight)
    players: tuple  # (player, weight)
    random_move_chance: float  # of an fs player's turns
    out: str  # the default --out
    positions: int  # the default --positions
    seed: int  # the default --seed


PARTS = {
    "fit-heldout": Part("teacher", STARTS, PLAYERS, RANDOM_MOVE_CHANCE, "data/teacher.tsv", 6000, 0),
    # Other starts, node counts and seeds than the positions recipes are chosen on.
    "test": Part("teacher-test", (("random_start(4)", 1.0), ("random_start(6)", 1.0)),
                 (("fs500", 0.3), ("fs5000", 0.4), ("fs50000", 0.3)), 0.1, "data/teacher_test.tsv", 1200, 1),
}
MATE_SCORE = 30000
PLIES_PER_SAMPLE = 10  # a game gives one sample per 10 eligible positions (rounded up), at most --per-game
GAME_BATCH = 16  # games played per round (fixed, so the games played do not depend on --jobs)
LABEL_BATCH = 32  # positions labelled per round
STANDARD_SFEN = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"
HEADER = ["sfen", "best_move", "score_cp", "mate", "ply", "legal_moves", "drop", "promotion",
          "start", "players", "game", "split"]
SCORE = re.compile(r" score (cp|mate) ([-+]?\d+)")
NODES = re.compile(r" nodes (\d+)")


def position_key(sfen: str) -> str:
    """An SFEN without its move number (duplicates are judged on this)."""
    return " ".join(sfen.split()[:3])


# Starts ---------------------------------------------------------------------------------

_BACK_RANK = ["L", "L", "N", "N", "S", "S", "G", "G", "K"]


def shogi816k_sfen(rng: random.Random) -> str:
    """A Shogi816K start, drawn as ``envs.starts.shogi816k_position`` draws it (rotation rule)."""
    rook_file, bishop_file = rng.sample(range(9), 2)  # file indices 0..8 = files 1..9
    back = _BACK_RANK[:]
    rng.shuffle(back)  # back[i]: the piece on file i + 1 of rank 9
    rank8 = [""] * 9
    rank8[rook_file], rank8[bishop_file] = "R", "B"

    def row(pieces):  # SFEN lists a rank from file 9 to file 1
        text, empty = "", 0
        for piece in reversed(pieces):
            if not piece:
                empty += 1
                continue
            text, empty = text + (str(empty) if empty else "") + piece, 0
        return text + (str(empty) if empty else "")

    black_8, black_9 = row(rank8), row(back)
    white_1, white_2 = black_9[::-1].lower(), black_8[::-1].lower()  # the 180-degree rotation
    return f"{white_1}/{white_2}/ppppppppp/9/9/9/PPPPPPPPP/{black_8}/{black_9} b - 1"


def start_board(scheme: str, rng: random.Random) -> cshogi.Board:
    if scheme == "standard":
        return cshogi.Board(STANDARD_SFEN)
    if (plies := re.fullmatch(r"random_start\((\d+)\)", scheme)):
        board = cshogi.Board(STANDARD_SFEN)
        for _ in range(int(plies.group(1))):
            board.push(rng.choice(list(board.legal_moves)))
        return cshogi.Board(board.sfen())  # the start: history before it is not part of the game
    if scheme == "shogi816k":
        return cshogi.Board(shogi816k_sfen(rng))
    raise ValueError(f"unknown start scheme {scheme!r}")


def _weighted(rng: random.Random, table) -> str:
    names, weights = zip(*table)
    return rng.choices(names, weights)[0]


# Workers: one engine each -----------------------------------------------------------------

_engine: UsiClient | None = None


def _worker_init():
    global _engine
    _engine = UsiClient(ENGINE, dict(ENGINE_OPTIONS))


def _reset():
    """Makes the engine's next search independent of everything it searched before."""
    _engine.send("setoption name Threads value 1")  # new search threads: fresh histories, pawn tables
    _engine.send("usinewgame")  # clears the hash
    _engine.send("isready")
    list(_engine.until(lambda s: s == "readyok", 60))


def _search(position: str, nodes: int) -> tuple[str, list[str]]:
    lines = _engine.think(position, f"go nodes {nodes}", 600)
    parts = lines[-1].split()
    return (parts[1] if len(parts) > 1 else ""), lines


def _greedy_move(board: cshogi.Board, rng: random.Random) -> int:
    from az.play.players import greedy_move  # imports JAX: only in workers that play greedy games

    return greedy_move(board, rng)


def play_game(args) -> dict:
    """Plays game ``g``; its sampled positions as dicts (sfen, legal_moves, ...)."""
    part_name, seed, g, per_game = args
    part = PARTS[part_name]
    rng = random.Random(f"{part.rng_name}:{seed}:game:{g}")
    scheme = _weighted(rng, part.starts)
    players = (_weighted(rng, part.players), _weighted(rng, part.players))
    board = start_board(scheme, rng)
    start_sfen, moves, seen = board.sfen(), [], []  # seen: (sfen, legal moves) before each move
    _reset()
    end, engine_fallbacks = "max_length", 0
    while len(moves) < MAX_PLIES:
        if board.is_game_over():
            end = "mate"
            break
        if moves and board.is_draw() in (cshogi.REPETITION_DRAW, cshogi.REPETITION_WIN, cshogi.REPETITION_LOSE):
            end = "repetition"
            break
        legal = list(board.legal_moves)
        seen.append((board.sfen(), len(legal)))
        player = players[board.turn]
        if player == "greedy":
            move = _greedy_move(board, rng)
        elif rng.random() < part.random_move_chance:
            move = rng.choice(legal)
        else:
            usi, _ = _search(f"position sfen {start_sfen} moves {' '.join(moves)}".rstrip(), int(player[2:]))
            move = board.move_from_usi(usi) if usi not in ("resign", "win", "") else 0
            if move == 0 or not board.is_legal(move):  # never seen; keeps the game going
                engine_fallbacks += 1
                move = rng.choice(legal)
        moves.append(cshogi.move_to_usi(move))
        board.push(move)
    eligible = [i for i, (_, n) in enumerate(seen) if n >= 2]
    plies = sorted(rng.sample(eligible, min(per_game, -(-len(eligible) // PLIES_PER_SAMPLE))))
    samples = [{"sfen": seen[i][0], "legal_moves": seen[i][1], "start": scheme,
                "players": f"{players[0]}-{players[1]}", "game": g} for i in plies]
    return {"game": g, "samples": samples, "plies": len(moves), "end": end, "fallbacks": engine_fallbacks}


def label(args) -> dict:
    """fairy-stockfish's answer for one SFEN: best move, score, nodes searched."""
    sfen, nodes = args
    _reset()
    t0 = time.perf_counter()
    best, lines = _search(f"position sfen {sfen}", nodes)
    seconds = time.perf_counter() - t0
    kind, value, searched = "", 0, 0
    for line in lines:
        if line.startswith("info") and (m := SCORE.search(line)) and (" multipv " not in line or " multipv 1 " in line):
            kind, value = m.group(1), int(m.group(2))
            searched = int(n.group(1)) if (n := NODES.search(line)) else searched
    return {"sfen": sfen, "best_move": best, "kind": kind, "value": value, "nodes": searched, "seconds": seconds}


# Main -------------------------------------------------------------------------------------


def _excluded_positions(part: str) -> set:
    """Positions no game may contribute: the evaluation openings, and for the test part
    the fit/heldout positions too."""
    keys = set()
    for name, column in (("openings.tsv", "final_sfen"), ("teacher.tsv", "sfen")):
        path = os.path.join(ROOT, "data", name)
        if os.path.exists(path) and (name == "openings.tsv" or part == "test"):
            with open(path, encoding="utf-8") as f:
                keys |= {position_key(row[column]) for row in csv.DictReader(f, delimiter="\t")}
    return keys


def _load_games(path: str, part: str, seed: int, per_game: int) -> dict:
    games = {}
    if path and os.path.exists(path + ".games"):
        with open(path + ".games", encoding="utf-8") as f:
            for line in f:
                try:
                    record = json.loads(line)
                except json.JSONDecodeError:  # a line cut short by an interrupted run
                    continue
                same = record.pop("seed") == seed and record.pop("per_game") == per_game
                if same and record.pop("part", "fit-heldout") == part:
                    games[record["game"]] = record
    return games


def _load_cache(path: str, nodes: int) -> dict:
    cache = {}
    if path and os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            for line in f:
                fields = line.rstrip("\n").split("\t")
                if len(fields) == 6 and fields[1] == str(nodes) and re.fullmatch(r"-?\d+", fields[5] or "x"):
                    key, _, best, kind, value, searched = fields
                    cache[key] = {"best_move": best, "kind": kind, "value": int(value), "nodes": int(searched),
                                  "seconds": 0.0}
    return cache


def _log(message: str):
    print(message, file=sys.stderr, flush=True)


def _eta(seconds: float) -> str:
    seconds = max(0, int(seconds))
    return f"{seconds // 3600}:{seconds // 60 % 60:02d}:{seconds % 60:02d}"


def _parse_args(argv) -> tuple[argparse.ArgumentParser, argparse.Namespace]:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--part", default="fit-heldout", choices=tuple(PARTS),
                        help="fit-heldout (default) or test: new games no recipe is chosen on")
    parser.add_argument("--out", help="the TSV to write (default data/teacher.tsv; data/teacher_test.tsv for test)")
    parser.add_argument("--positions", type=int, help="positions to label (default 6000; 1200 for test)")
    parser.add_argument("--nodes", type=int, default=100_000, help="fairy-stockfish nodes per label (default 100000)")
    parser.add_argument("--seed", type=int, help="seed of the games, samples and split (default 0; 1 for test)")
    parser.add_argument("--jobs", type=int, default=2, help="engine processes, Threads=1 each (default 2)")
    parser.add_argument("--per-game", type=int, default=8, help="most positions sampled per game (default 8)")
    parser.add_argument("--heldout", type=float, default=0.2, help="share of positions held out (default 0.2)")
    parser.add_argument("--cache", default="", help="a file of labels (and FILE.games of games) to reuse and "
                        "extend: an interrupted run resumes")
    args = parser.parse_args(argv)
    part = PARTS[args.part]
    args.out = args.out or os.path.join(ROOT, part.out)
    args.positions = part.positions if args.positions is None else args.positions
    args.seed = part.seed if args.seed is None else args.seed
    return parser, args


def _play_games(pool, args, started: float) -> tuple[list, list]:
    """Step 1: games in rounds of GAME_BATCH until the unique samples cover the positions
    (+2%). Returns (candidate samples in order, the games)."""
    excluded = _excluded_positions(args.part)
    target = args.positions + max(10, args.positions // 50)
    candidates, taken, games = [], set(), []
    dropped = {"duplicate": 0, "openings": 0}
    game_cache = _load_games(args.cache, args.part, args.seed, args.per_game)
    games_file = open(args.cache + ".games", "a", encoding="utf-8") if args.cache else None
    g, played = 0, 0
    while len(candidates) < target:
        todo = [(args.part, args.seed, g + i, args.per_game) for i in range(GAME_BATCH) if g + i not in game_cache]
        played += len(todo)
        for result in pool.map(play_game, todo):
            game_cache[result["game"]] = result
            if games_file:
                games_file.write(json.dumps({"part": args.part, "seed": args.seed, "per_game": args.per_game,
                                             **result}) + "\n")
                games_file.flush()
        results = [game_cache[g + i] for i in range(GAME_BATCH)]
        g += GAME_BATCH
        for result in results:
            games.append(result)
            for sample in result["samples"]:
                key = position_key(sample["sfen"])
                if key in excluded:
                    dropped["openings"] += 1
                elif key in taken:
                    dropped["duplicate"] += 1
                else:
                    taken.add(key)
                    candidates.append(sample)
        elapsed = time.monotonic() - started
        rate = played / elapsed  # games played (not read from --cache) per second
        left = (target - len(candidates)) / max(1, len(candidates)) * g  # games still to play, estimated
        _log(f"games {g} ({played} played here): {len(candidates)}/{target} positions sampled, "
             f"{rate:.2f} games/s, ETA of the games {_eta(left / rate if rate else 0)}")
    if games_file:
        games_file.close()
    ends = {}
    for result in games:
        ends[result["end"]] = ends.get(result["end"], 0) + 1
    plies = sum(r["plies"] for r in games)
    _log(f"{len(games)} games ({plies / len(games):.1f} plies on average; ends {ends}; "
         f"engine moves replaced {sum(r['fallbacks'] for r in games)}), dropped samples {dropped}, "
         f"{time.monotonic() - started:.0f} s")
    return candidates, games


class _Labels(NamedTuple):
    rows: list  # the labelled samples, in sample order
    skipped: dict  # reason -> samples skipped
    searched: int  # positions searched here (not read from --cache)
    searched_nodes: int
    started: float  # time.monotonic() when labelling began


def _usable(sample: dict, answer: dict, skipped: dict) -> bool:
    """Is the engine's answer a label (a legal move with a score)? Counts the reason if not."""
    board = cshogi.Board(sample["sfen"])
    best = answer["best_move"]
    if best in ("resign", "win"):
        skipped["resign_or_win"] += 1
        return False
    move = board.move_from_usi(best) if best else 0
    if move == 0 or not board.is_legal(move):
        skipped["illegal"] += 1
        _log(f"illegal engine move {best!r} in {sample['sfen']}")
        return False
    if not answer["kind"]:
        skipped["no_score"] += 1
        return False
    return True


def _label_samples(pool, args, candidates: list) -> _Labels:
    """Step 2: labels, in sample order, until --positions are labelled."""
    cache = _load_cache(args.cache, args.nodes)
    cache_file = open(args.cache, "a", encoding="utf-8") if args.cache else None
    labelled, skipped = [], {"resign_or_win": 0, "illegal": 0, "no_score": 0}
    next_index, searched_nodes, searched, label_started = 0, 0, 0, time.monotonic()
    while len(labelled) < args.positions and next_index < len(candidates):
        need = args.positions - len(labelled)
        batch = candidates[next_index:next_index + min(LABEL_BATCH, need)]
        next_index += len(batch)
        todo = [s["sfen"] for s in batch if position_key(s["sfen"]) not in cache]
        for answer in pool.imap(label, [(sfen, args.nodes) for sfen in todo]):
            cache[position_key(answer["sfen"])] = answer
            searched_nodes += answer["nodes"]
            searched += 1
            if cache_file:
                fields = [position_key(answer["sfen"]), args.nodes, answer["best_move"], answer["kind"],
                          answer["value"], answer["nodes"]]
                cache_file.write("\t".join(str(v) for v in fields) + "\n")
                cache_file.flush()
        for sample in batch:
            answer = cache[position_key(sample["sfen"])]
            if _usable(sample, answer, skipped):
                labelled.append({**sample, **answer})
        elapsed = time.monotonic() - label_started
        rate = searched / elapsed if elapsed > 0 else 0.0
        _log(f"labelled {len(labelled)}/{args.positions} ({searched} searched, {rate:.2f} positions/s, "
             f"{searched_nodes / max(elapsed, 1e-9):,.0f} nodes/s), "
             f"ETA {_eta((args.positions - len(labelled)) / rate if rate else 0)}")
    if cache_file:
        cache_file.close()
    return _Labels(labelled, skipped, searched, searched_nodes, label_started)


def _split_rows(labelled: list, seed: int, heldout: float, part: str) -> tuple[list, int, int]:
    """Step 3: the split by game (every row ``test`` in the test part) and the TSV rows in
    (game, ply) order. Returns (rows, held-out positions, games)."""
    by_game = {}
    for row in labelled:
        by_game.setdefault(row["game"], []).append(row)
    order = sorted(by_game)
    random.Random(f"teacher:{seed}:split").shuffle(order)
    heldout_games, held = set(), 0
    for game in order:
        if part == "test" or held >= round(heldout * len(labelled)):
            break
        heldout_games.add(game)
        held += len(by_game[game])
    rows = []
    for row in sorted(labelled, key=lambda r: (r["game"], int(r["sfen"].split()[3]))):
        best, kind, value = row["best_move"], row["kind"], row["value"]
        if kind == "mate":
            score = MATE_SCORE - value if value > 0 else -MATE_SCORE - value
        else:
            score = value
        rows.append([row["sfen"], best, score, value if kind == "mate" else "", int(row["sfen"].split()[3]) - 1,
                     row["legal_moves"], int("*" in best), int(best.endswith("+")), row["start"], row["players"],
                     row["game"], "test" if part == "test" else "heldout" if row["game"] in heldout_games else "fit"])
    return rows, held, len(by_game)


def _write_tsv(path: str, rows: list) -> None:
    """The header and rows, written to a temporary file first so a reader never sees half."""
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".tmp"
    with open(tmp, "w", encoding="utf-8", newline="") as f:
        f.write("\t".join(HEADER) + "\n")
        for r in rows:
            f.write("\t".join(str(v) for v in r) + "\n")
    os.replace(tmp, path)


def main(argv=None) -> int:
    parser, args = _parse_args(argv)
    if not (os.path.isfile(ENGINE) and os.access(ENGINE, os.X_OK)):
        _log(f"error: {ENGINE} not found; install it with `make engines` (apt-get install fairy-stockfish)")
        return 2
    if args.positions < 1 or args.jobs < 1 or args.per_game < 1 or not 0 <= args.heldout < 1:
        parser.error("--positions, --jobs and --per-game must be >= 1, --heldout in [0, 1)")
    started = time.monotonic()
    pool = multiprocessing.get_context("fork").Pool(args.jobs, initializer=_worker_init)
    try:
        candidates, _ = _play_games(pool, args, started)
        labels = _label_samples(pool, args, candidates)
    finally:
        pool.close()
        pool.join()
    rows, held, games = _split_rows(labels.rows, args.seed, args.heldout, args.part)
    _write_tsv(args.out, rows)
    total = time.monotonic() - started
    label_time = time.monotonic() - labels.started
    parts = f"{len(rows)} test" if args.part == "test" else f"{len(rows) - held} fit, {held} heldout"
    _log(f"wrote {args.out}: {len(rows)} positions ({parts}) from "
         f"{games} games; skipped {labels.skipped}; {labels.searched} searches in {label_time:.0f} s "
         f"({labels.searched / max(label_time, 1e-9):.2f} positions/s, "
         f"{labels.searched_nodes / max(label_time, 1e-9):,.0f} nodes/s); total {total:.0f} s")
    if len(rows) < args.positions:
        _log(f"warning: only {len(rows)} of {args.positions} positions (raise the sample margin)")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
