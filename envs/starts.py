"""Diversified starting positions, sampled on the device from a PRNG key.

A start specification is a string, parsed once on the host:

    spec    := phase (">" phase)*          phases follow each other over training
    phase   := mixture ["@" END]           END: fraction of the game budget where it ends
    mixture := term ("+" term)*
    term    := [WEIGHT "*"] scheme         weights are relative (default 1)
    scheme  := "standard" | "random_start(N)" | "shogi816k" ["(rotation)" | "(line)"]
             | "book(PATH)"

Examples: ``shogi816k``; ``random_start(2)`` (RandomStart2, the 900 positions two plies
from the start, equally likely); ``0.5*shogi816k + 0.5*random_start(2)``;
``shogi816k@0.6 > random_start(2)`` (the paper's Shogi816K->RandomStart2).

``make_start_fn(spec, rules)`` returns ``start(key, progress) -> State`` for one game
(vmap it), where ``progress`` in [0, 1] is the fraction of the game budget used;
``State.start_scheme`` indexes ``spec.leaves`` so statistics can be split by scheme.
"""

import dataclasses
import re
from typing import Callable, NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from envs import movegen
from envs import env
from envs.movegen import GameState

_PAWN, _LANCE, _KNIGHT, _SILVER, _BISHOP, _ROOK, _GOLD, _KING = range(8)


class StartPosition(NamedTuple):
    """A start position in the mover's frame (see ``envs.movegen``)."""

    board: Array  # [81] int32
    hand: Array  # [2, 7] int32
    color: Array  # [] int32
    move_number: Array  # [] int32, SFEN move number


@dataclasses.dataclass(frozen=True)
class Standard:
    name: str = "standard"


@dataclasses.dataclass(frozen=True)
class RandomStart:
    plies: int

    @property
    def name(self) -> str:
        return f"random_start({self.plies})"


@dataclasses.dataclass(frozen=True)
class Shogi816K:
    symmetry: str = "rotation"  # white = black rotated 180 degrees; "line": mirrored across rank 5

    @property
    def name(self) -> str:
        return "shogi816k" if self.symmetry == "rotation" else f"shogi816k({self.symmetry})"


@dataclasses.dataclass(frozen=True)
class Book:
    path: str

    @property
    def name(self) -> str:
        return f"book({self.path})"


Leaf = Standard | RandomStart | Shogi816K | Book


@dataclasses.dataclass(frozen=True)
class StartSpec:
    """A parsed start specification: leaf schemes, phases and their weights."""

    leaves: tuple  # distinct leaf schemes; State.start_scheme indexes this
    phase_ends: tuple  # [phases] float, fraction of the budget where each phase ends (last 1.0)
    weights: tuple  # [phases][leaves] float, normalised per phase

    @property
    def names(self) -> tuple:
        return tuple(leaf.name for leaf in self.leaves)


def _parse_leaf(text: str, spec: str) -> Leaf:
    text = text.strip()
    if text == "standard":
        return Standard()
    if m := re.fullmatch(r"random_start\(\s*(\d+)\s*\)", text):
        return RandomStart(int(m.group(1)))
    if m := re.fullmatch(r"shogi816k(?:\(\s*(\w+)\s*\))?", text):
        symmetry = m.group(1) or "rotation"
        if symmetry not in ("rotation", "line"):
            raise ValueError(f"start {spec!r}: shogi816k symmetry must be 'rotation' or 'line', got {symmetry!r}")
        return Shogi816K(symmetry)
    if m := re.fullmatch(r"book\((.+)\)", text):
        return Book(m.group(1).strip())
    raise ValueError(
        f"start {spec!r}: unknown scheme {text!r} (standard, random_start(N), shogi816k[(line)], book(PATH))"
    )


def parse_start(spec: str) -> StartSpec:
    """Parses a start specification (see the module docstring)."""
    if not isinstance(spec, str) or not spec.strip():
        raise ValueError(f"start {spec!r}: expected a non-empty string such as 'shogi816k'")
    leaves: list = []
    phases = []
    for phase_text in spec.split(">"):
        phase_text, _, end_text = phase_text.partition("@")
        if end_text:
            try:
                end = float(end_text)
            except ValueError:
                raise ValueError(f"start {spec!r}: phase end {end_text.strip()!r} is not a number") from None
        else:
            end = None
        terms = {}
        for term in phase_text.split("+"):
            weight_text, star, leaf_text = term.rpartition("*")
            weight = 1.0
            if star:
                try:
                    weight = float(weight_text)
                except ValueError:
                    raise ValueError(f"start {spec!r}: weight {weight_text.strip()!r} is not a number") from None
            if not weight > 0 or not np.isfinite(weight):
                raise ValueError(f"start {spec!r}: weight {weight} must be positive")
            leaf = _parse_leaf(leaf_text, spec)
            if leaf not in leaves:
                leaves.append(leaf)
            terms[leaves.index(leaf)] = terms.get(leaves.index(leaf), 0.0) + weight
        phases.append((end, terms))
    ends = [end for end, _ in phases]
    if ends[-1] is not None and ends[-1] != 1.0:
        raise ValueError(f"start {spec!r}: the last phase runs to the end; drop its '@{ends[-1]}'")
    if any(end is None for end in ends[:-1]):
        raise ValueError(f"start {spec!r}: every phase but the last needs '@END' (a fraction of the budget)")
    ends = [*ends[:-1], 1.0]
    if any(not 0 < e <= 1 for e in ends) or any(a >= b for a, b in zip(ends, ends[1:])):
        raise ValueError(f"start {spec!r}: phase ends must increase within (0, 1], got {ends}")
    for leaf in leaves:
        if isinstance(leaf, RandomStart) and leaf.plies > 64:
            raise ValueError(f"start {spec!r}: random_start takes at most 64 plies, got {leaf.plies}")
    weights = []
    for _, terms in phases:
        total = sum(terms.values())
        weights.append(tuple(terms.get(i, 0.0) / total for i in range(len(leaves))))
    return StartSpec(tuple(leaves), tuple(ends), tuple(weights))


# Leaf samplers: key -> StartPosition ----------------------------------------------


def _standard_board() -> np.ndarray:
    return np.asarray(GameState().board)


def standard_position(key: Array) -> StartPosition:
    del key
    return StartPosition(jnp.asarray(_standard_board()), jnp.zeros((2, 7), jnp.int32), jnp.int32(0), jnp.int32(1))


def random_start_position(key: Array, plies: int, core: str = "dense") -> StartPosition:
    """``plies`` uniformly random legal moves from the standard start (move generator ``core``)."""

    def play_one(i, carry):
        x, key = carry
        key, sub = jax.random.split(key)
        mask = x.legal_action_mask
        action = jax.random.categorical(sub, jnp.where(mask, 0.0, -jnp.inf))
        return jax.lax.cond(mask.any(), lambda: movegen.play(x, action, core), lambda: x), key

    x, _ = jax.lax.fori_loop(0, plies, play_one, (GameState(), key))
    return StartPosition(x.board, x.hand, x.color, jnp.int32(plies + 1))


_BACK_RANK = np.array([_LANCE, _LANCE, _KNIGHT, _KNIGHT, _SILVER, _SILVER, _GOLD, _GOLD, _KING], np.int32)
_SQ = np.arange(81)
_MIRROR = {"rotation": 80 - _SQ, "line": (_SQ // 9) * 9 + 8 - _SQ % 9}  # white square -> black source


def shogi816k_position(key: Array, symmetry: str) -> StartPosition:
    """Shogi816K: rook and bishop on two random squares of rank 8, the rest of rank 9
    shuffled, pawns in place; white the rotation (or line mirror) of black."""
    k_major, k_back = jax.random.split(key)
    rook_file, bishop_file = jax.random.choice(k_major, 9, (2,), replace=False)
    back = jax.random.permutation(k_back, jnp.asarray(_BACK_RANK))  # uniform over the 22,680 arrangements
    black = jnp.full((9, 9), -1, jnp.int32)  # [file, rank]
    black = black.at[:, 6].set(_PAWN).at[:, 8].set(back)
    black = black.at[rook_file, 7].set(_ROOK).at[bishop_file, 7].set(_BISHOP).reshape(81)
    white = black[jnp.asarray(_MIRROR[symmetry])]
    board = jnp.where(black >= 0, black, jnp.where(white >= 0, white + 14, -1))
    return StartPosition(board, jnp.zeros((2, 7), jnp.int32), jnp.int32(0), jnp.int32(1))


def count_shogi816k() -> dict:
    """Shogi816K's positions, by enumerating what ``shogi816k_position`` draws from: rook
    and bishop on two of rank 8's nine squares (72 ways) times the distinct orders of
    rank 9's pieces (9! / 2!^4 = 22,680). White follows from black (rotated or mirrored
    across the middle rank), so each symmetry rule has that many boards, and the two
    rules' sets are disjoint. The name counts them up to the left-right mirror, under
    which no arrangement maps to itself (rook and bishop would have to swap)."""
    import itertools

    back_ranks = set(itertools.permutations(_BACK_RANK.tolist()))
    arrangements = {(r, b, back) for r in range(9) for b in range(9) if r != b for back in back_ranks}
    mirror = {a: (8 - a[0], 8 - a[1], a[2][::-1]) for a in arrangements}
    return {
        "back_ranks": len(back_ranks),
        "per_symmetry_rule": len(arrangements),
        "up_to_left_right_mirror": len({min(a, m) for a, m in mirror.items()}),
        "mirror_symmetric": sum(a == m for a, m in mirror.items()),
    }


def load_book(path: str) -> StartPosition:
    """Reads SFEN lines or ``startpos|sfen ... moves ...`` lines: a batched StartPosition [N].

    Blank lines and lines starting with '#' are skipped. A bad line raises
    ``ValueError`` naming the file, the line number and what is wrong.
    """
    from envs import notation

    try:
        with open(path, encoding="utf-8") as f:
            lines = f.read().splitlines()
    except OSError as e:
        raise ValueError(f"book {path}: cannot read it ({e.strerror})") from None
    boards, hands, colors, numbers = [], [], [], []
    for lineno, line in enumerate(lines, 1):
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            sfen, moves = notation.split_position(text)
            board, _ = notation.play_line(sfen, moves)
            b, h, color, number = notation.parse_sfen(board.sfen())
        except ValueError as e:
            raise ValueError(f"book {path} line {lineno}: {e}") from None
        b, h = notation.to_mover_frame(b, h, color)
        boards.append(b)
        hands.append(h)
        colors.append(color)
        numbers.append(number)
    if not boards:
        raise ValueError(f"book {path}: no positions in it")
    return StartPosition(
        jnp.asarray(np.stack(boards), jnp.int32),
        jnp.asarray(np.stack(hands), jnp.int32),
        jnp.asarray(colors, jnp.int32),
        jnp.asarray(numbers, jnp.int32),
    )


def _leaf_fn(leaf: Leaf, rules: env.Rules) -> Callable[[Array], StartPosition]:
    if isinstance(leaf, Standard):
        return standard_position
    if isinstance(leaf, RandomStart):
        return lambda key: random_start_position(key, leaf.plies, rules.movegen)
    if isinstance(leaf, Shogi816K):
        return lambda key: shogi816k_position(key, leaf.symmetry)
    book = load_book(leaf.path)
    size = book.board.shape[0]
    return lambda key: jax.tree.map(lambda a: a[jax.random.randint(key, (), 0, size)], book)


def make_start_fn(spec: StartSpec | str, rules: env.Rules) -> Callable[[Array, Array], env.State]:
    """``start(key, progress) -> State`` for one game; books are read here, once."""
    if isinstance(spec, str):
        spec = parse_start(spec)
    leaf_fns = [_leaf_fn(leaf, rules) for leaf in spec.leaves]
    ends = jnp.asarray(spec.phase_ends[:-1], jnp.float32)
    log_weights = jnp.log(jnp.asarray(spec.weights, jnp.float32))

    def start(key: Array, progress: Array) -> env.State:
        k_scheme, k_position = jax.random.split(key)
        phase = jnp.searchsorted(ends, jnp.asarray(progress, jnp.float32), side="right")
        scheme = jax.random.categorical(k_scheme, log_weights[phase]).astype(jnp.int32)
        if len(leaf_fns) == 1:
            position = leaf_fns[0](k_position)
        else:
            position = jax.lax.switch(scheme, leaf_fns, k_position)
        x = GameState(board=position.board, hand=position.hand, color=position.color)
        return env.init_from(x, rules, start_scheme=scheme, start_move_number=position.move_number)

    return start
