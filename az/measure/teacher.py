"""The teacher set: shogi positions labelled with fairy-stockfish's best move (100k nodes).

MEASUREMENT data, for policy agreement of trained networks, the fitness of the classical
GA evaluation and reports. No training path reads it (tests/test_teacher.py checks that
the replay buffer, self-play and the learner do not import this module).
``scripts/make_teacher_set.py`` makes data/teacher.tsv and documents every column.

    ts = teacher.load()                      # data/teacher.tsv of this repository: fit and heldout
    held = ts.select(ts.heldout)             # the held-out games' positions
    test = teacher.load_split("test")        # data/teacher_test.tsv: new games no recipe is chosen on
    states, best = teacher.to_device(held, env.Rules())

``az.measure.agreement`` measures networks and searches against it.

P below is the number of positions. ``load`` needs only numpy (no JAX); ``to_device``
imports the environment.
"""

import os
import re
from typing import NamedTuple

import numpy as np

_REPOSITORY = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
DEFAULT_PATH = os.path.join(_REPOSITORY, "data", "teacher.tsv")
# The test part: read only to report a final figure, never to choose (not loaded by default).
TEST_PATH = os.path.join(_REPOSITORY, "data", "teacher_test.tsv")
COLUMNS = ("sfen", "best_move", "score_cp", "mate", "ply", "legal_moves", "drop", "promotion", "start", "players",
           "game", "split")
SPLITS = ("fit", "heldout", "test")
MATE_SCORE = 30000  # score_cp of a mate in N plies: +/-(MATE_SCORE - N)

_USI_MOVE = re.compile(r"[1-9][a-i][1-9][a-i]\+?|[PLNSGBR]\*[1-9][a-i]")  # as envs.notation.USI_MOVE
_SFEN = re.compile(r"[1-9+a-zA-Z]+(?:/[1-9+a-zA-Z]+){8} [bw] (?:-|(?:\d*[PLNSGBRplnsgbr])+) [1-9]\d*")
_INT = re.compile(r"-?\d+")


class TeacherSet(NamedTuple):
    """Parallel columns, one entry per position (P of them), in file order (by game, ply)."""

    sfens: list  # [P] str, SFEN with move number
    best_moves: list  # [P] str, fairy-stockfish's move in USI (``7g7f``, ``8h2b+``, ``P*5e``)
    score_cp: np.ndarray  # [P] int32, from the side to move; mates +/-(30000 - N)
    mate: np.ndarray  # [P] int32, N of ``score mate N`` (plies, < 0: the mover is mated); 0 if no mate
    ply: np.ndarray  # [P] int32, the SFEN's move number - 1
    legal_moves: np.ndarray  # [P] int32, number of legal moves
    drop: np.ndarray  # [P] bool, the best move is a drop
    promotion: np.ndarray  # [P] bool, the best move promotes
    start: list  # [P] str, start scheme of the game (``standard``, ``random_start(2)``, ``shogi816k``)
    players: list  # [P] str, ``black-white`` players of the game, e.g. ``fs2000-greedy``
    game: np.ndarray  # [P] int32, the game the position was sampled from
    fit: np.ndarray  # [P] bool, in the fitting part
    heldout: np.ndarray  # [P] bool, in the held-out part
    test: np.ndarray  # [P] bool, in the test part (fit, heldout and test partition the positions)
    path: str  # the file it was read from

    @property
    def size(self) -> int:
        """P, the number of positions (``len()`` of a NamedTuple counts its fields)."""
        return len(self.sfens)

    def select(self, which) -> "TeacherSet":
        """The positions picked by a [P] bool mask or an index array, in that order."""
        index = np.flatnonzero(which) if np.asarray(which).dtype == bool else np.asarray(which, np.int64)
        fields = {}
        for name, value in self._asdict().items():
            if name == "path":
                fields[name] = value
            elif isinstance(value, list):
                fields[name] = [value[i] for i in index]
            else:
                fields[name] = value[index]
        return TeacherSet(**fields)


def _parse_row(fields: list, fail) -> tuple:
    if len(fields) != len(COLUMNS):
        fail(f"expected {len(COLUMNS)} tab-separated fields, got {len(fields)}")
    row = dict(zip(COLUMNS, fields))
    if not _SFEN.fullmatch(row["sfen"]):
        fail(f"malformed SFEN {row['sfen']!r}")
    move = row["best_move"]
    if not _USI_MOVE.fullmatch(move):
        fail(f"best_move {move!r} is not a USI move")
    ints = {}
    for name in ("score_cp", "ply", "legal_moves", "game"):
        if not _INT.fullmatch(row[name]):
            fail(f"{name} {row[name]!r} is not an integer")
        ints[name] = int(row[name])
    if row["mate"] and not _INT.fullmatch(row["mate"]):
        fail(f"mate {row['mate']!r} is not an integer or empty")
    mate = int(row["mate"]) if row["mate"] else 0
    flags = {}
    for name in ("drop", "promotion"):
        if row[name] not in ("0", "1"):
            fail(f"{name} {row[name]!r} must be 0 or 1")
        flags[name] = row[name] == "1"
    if flags["drop"] != ("*" in move) or flags["promotion"] != move.endswith("+"):
        fail(f"drop/promotion ({row['drop']}, {row['promotion']}) disagree with the move {move!r}")
    if ints["legal_moves"] < 1 or ints["ply"] != int(row["sfen"].split()[3]) - 1:
        fail("legal_moves must be >= 1 and ply must be the SFEN's move number - 1")
    if row["split"] not in SPLITS:
        fail(f"split {row['split']!r} must be one of {', '.join(SPLITS)}")
    return (row["sfen"], move, ints["score_cp"], mate, ints["ply"], ints["legal_moves"], flags["drop"],
            flags["promotion"], row["start"], row["players"], ints["game"], row["split"])


def load(path: str = DEFAULT_PATH) -> TeacherSet:
    """Reads a teacher TSV (see scripts/make_teacher_set.py for its columns).

    Raises ``ValueError`` naming the file and line for a missing file, a wrong header,
    a malformed field or an empty set.
    """
    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError(f"teacher set {path}: cannot read it ({e.strerror})") from None
    if not lines or tuple(lines[0].split("\t")) != COLUMNS:
        raise ValueError(f"teacher set {path} line 1: the header must be {chr(9).join(COLUMNS)!r}")
    rows = []
    for lineno, line in enumerate(lines[1:], 2):
        def fail(what, lineno=lineno):
            raise ValueError(f"teacher set {path} line {lineno}: {what}")

        rows.append(_parse_row(line.split("\t"), fail))
    if not rows:
        raise ValueError(f"teacher set {path}: no positions in it")
    sfens, moves, score, mate, ply, legal, drop, promotion, start, players, game, split = zip(*rows)
    split = np.asarray(split)
    return TeacherSet(
        sfens=list(sfens), best_moves=list(moves), score_cp=np.asarray(score, np.int32),
        mate=np.asarray(mate, np.int32), ply=np.asarray(ply, np.int32), legal_moves=np.asarray(legal, np.int32),
        drop=np.asarray(drop, bool), promotion=np.asarray(promotion, bool), start=list(start),
        players=list(players), game=np.asarray(game, np.int32), fit=split == "fit", heldout=split == "heldout",
        test=split == "test", path=path,
    )


def load_split(split: str) -> TeacherSet:
    """The shipped positions of one split: ``fit`` and ``heldout`` from data/teacher.tsv,
    ``test`` from data/teacher_test.tsv. ValueError names an unknown split."""
    if split not in SPLITS:
        raise ValueError(f"teacher split {split!r}: choose one of {', '.join(SPLITS)}")
    teacher_set = load(TEST_PATH if split == "test" else DEFAULT_PATH)
    return teacher_set.select(getattr(teacher_set, split))


def to_device(teacher_set: TeacherSet, rules=None):
    """(states, best_action): the positions as a batched ``env.State`` ([P, ...] leaves, on
    the default device) and fairy-stockfish's move as an action, int32 [P].

    Each SFEN goes through ``envs.notation.from_sfen`` (no move history: a position's
    repetition count starts at one; one compiled set-up for every position, shared with the
    rest of the process) and each move through ``envs.notation.usi_to_action``;
    ``ValueError`` names the position whose move is illegal under ``rules``. Costs a few ms
    a position on a CPU host (select a subset first when only part is needed).
    """
    import jax

    from envs import env, notation

    rules = env.Rules() if rules is None else rules
    states, actions = [], []
    for i, (sfen, move) in enumerate(zip(teacher_set.sfens, teacher_set.best_moves)):
        state = jax.device_get(notation.from_sfen(sfen, rules))
        try:
            actions.append(notation.usi_to_action(state, move))
        except ValueError as e:
            raise ValueError(f"teacher set {teacher_set.path}, position {i} ({sfen}): {e}") from None
        states.append(state)
    if not states:
        raise ValueError(f"teacher set {teacher_set.path}: no positions to convert")
    batch = jax.tree.map(lambda *x: np.stack(x), *states)
    return jax.device_put(batch), jax.device_put(np.asarray(actions, np.int32))
