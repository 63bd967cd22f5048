"""The classical evaluation's static features, batched on the dense core.

The feature set of the genetic-algorithm study this baseline follows
(``docs/classical.md``): a linear evaluation ``h(p, w) = features(p) . w`` whose
weights a GA evolves. Every feature is read from one player's side, the *root*:
the player who chose the move that led to the position. Nearly all are a difference,
the root's count minus the opponent's, so ``h`` is antisymmetric.

Positions come in pgx's mover frame (``envs.movegen``: board [81] int, square
``file * 9 + rank``, rank 0 the far side, pieces 0..13 the mover's, 14..27 the
opponent's, -1 empty; hand [2, 7] in the order P L N S B R G), with the *root to
move*: ``root_frame`` turns a child position (the opponent to move) around.

Features [76] (index: name), 0-23 "major" (10-bit weights in the GA):
  0-6    material, P L N S B R G: pieces of the kind on the board (promoted or not)
         and in hand
  7-12   promotion bonus, P L N S B R: promoted pieces of the kind on the board
  13-19  in-hand bonus, P L N S B R G: pieces of the kind in hand
  20     king threats: the opponent's attacks (attackers per square, up to 3) on the
         root's king and its neighbours, negated; a penalty
  21     bishop mobility: squares a bishop or horse attacks that hold no piece of its
         side and that the other side does not attack
  22     rook mobility: the same for rooks and dragons
  23     king attacks: the root's attacks on the opponent's king and its neighbours
and 50 "minor" (6-bit signed weights):
  24     king defenders: attackers of each of the king's neighbours (counted up to 3
         with the king) less the king itself
  25     escape routes: king neighbours with no piece of its side, not attacked
  26     home-camp weakness: own-camp squares attacked more often than defended
  27     enemy-camp control: enemy-camp squares attacked more often than defended
  28     castle: pieces (the king not counted) in place in the closest matching castle
         (``CASTLES``) whose king square the king holds
  29     gold ahead of silver: gold-movers directly ahead of a silver of their side
  30     gold beside rook: gold-movers directly left or right of a rook of their side
  31     boxed-in bishop: diagonal neighbours of an unpromoted bishop held by its side
  32     piece ahead of pawn: pieces directly ahead of a pawn of their side
  33     bishop head protected: unpromoted bishops whose head square their side attacks
  34     bishop head attacked: the opponent's unpromoted bishops whose head square the
         root attacks (a root-only count, not a difference)
  35     reclining silver: silvers on their side's 4th-6th rank with a pawn of their
         side directly left or right
  36     claimed files: pawns on the 5th rank that their side defends
  37     adjacent silvers: 1 if two silvers of a side stand side by side
  38     adjacent golds: 1 if two golds of a side stand side by side
  39     rook in enemy camp: rooks and dragons in the opponent's camp
  40     rook on the king's file: rooks and dragons on the opponent king's file
  41     rook on a file next to the opponent king's
  42     the same, only while that king is on an edge file pair (9, 8, 2, 1)
  43     rook on an open file: no other piece on its file
  44     rook on a semi-open file: the only other piece on its file is one opponent's
  45     blocked flow: squares the opponent's sliders would reach if the root's pieces
         other than the king on safe squares (attacked no more often than defended)
         were gone, and do not reach now (a root-only count)
  46     aggression: ranks advanced (from the side's own back rank) summed over its
         pieces other than the king
  47     total attacking: pieces of the other side that a side attacks
  48-60  distance to own king, per kind P L N S B R G +P +L +N +S +B +R: Euclidean
         distances (in squares) of the side's pieces of the kind to its own king
  61-73  distance to the enemy king, per kind, the same to the other side's king
and 2 more major ones, this project's addition to the study's 74 (a one-ply search
cannot see a capture coming; these let it see what stands to be taken):
  74     hanging: the ``greedy`` value (P1 L3 N4 S5 B8 R10 G6, +P..+S 6, +B 10, +R 12)
         of the root's pieces on squares the opponent attacks more often than the root
         defends them, negated; a penalty
  75     threatened: the same value of the opponent's pieces that the root attacks more
         often than the opponent defends them
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from envs import bitplanes, dense, movegen

NUM_FEATURES = 76
MAJOR = tuple(range(24)) + (74, 75)  # 10-bit unsigned weights; the rest are 6-bit signed
NUM_MAJOR = len(MAJOR)
KINDS = "P L N S B R G +P +L +N +S +B +R".split()  # the 13 non-king kinds, pgx order without K
HAND_KINDS = "P L N S B R G".split()
NAMES = (
    [f"material_{k}" for k in "PLNSBRG"]
    + [f"promoted_{k}" for k in "PLNSBR"]
    + [f"in_hand_{k}" for k in "PLNSBRG"]
    + ["king_threats", "bishop_mobility", "rook_mobility", "king_attacks",
       "king_defenders", "escape_routes", "home_camp_weakness", "enemy_camp_control", "castle",
       "gold_ahead_of_silver", "gold_beside_rook", "boxed_in_bishop", "piece_ahead_of_pawn",
       "bishop_head_protected", "bishop_head_attacked", "reclining_silver", "claimed_files",
       "adjacent_silvers", "adjacent_golds", "rook_in_enemy_camp", "rook_on_king_file",
       "rook_beside_king_file", "rook_beside_edge_king_file", "rook_open_file", "rook_semi_open_file",
       "blocked_flow", "aggression", "total_attacking"]
    + [f"distance_own_king_{k}" for k in KINDS]
    + [f"distance_enemy_king_{k}" for k in KINDS]
    + ["hanging", "threatened"]
)
assert len(NAMES) == NUM_FEATURES

P, L, N, S, B, R, G, K, PP, PL, PN, PS, H, D = range(14)
GOLD_MOVERS = (G, PP, PL, PN, PS)
NON_KING = (P, L, N, S, B, R, G, PP, PL, PN, PS, H, D)

# Castles, in the side's own frame as USI squares of black: (king square, other pieces).
# The study used 44 formations; these are the common ones of both rook styles.
CASTLES = {
    "yagura": ("8h", {"G": ("7h", "6g"), "S": ("7g",), "P": ("7f", "6f", "8g", "9g"), "N": ("8i",), "L": ("9i",)}),
    "yagura_kanimachi": ("6i", {"G": ("7h", "5h"), "S": ("6h",), "P": ("7g", "6g", "5g")}),
    "boat": ("7h", {"G": ("6i", "5h"), "S": ("6h",), "P": ("7g", "8g", "9g"), "N": ("8i",), "L": ("9i",)}),
    "left_mino": ("8h", {"G": ("6i", "5h"), "S": ("7h",), "P": ("8g", "7g", "6g", "9g")}),
    "elmo": ("7h", {"G": ("6i",), "S": ("8h",), "B": ("7i",), "P": ("7g", "8g", "9g"), "L": ("9i",), "N": ("8i",)}),
    "static_anaguma": ("9i", {"G": ("7i", "7h"), "S": ("8h",), "L": ("9h",), "N": ("8i",), "P": ("9g", "8g", "7g")}),
    "ginkanmuri": ("8h", {"G": ("7h", "6h"), "S": ("8g",), "P": ("9g", "8f", "7g")}),
    "bonanza": ("7h", {"G": ("6i", "5h"), "S": ("6h",), "B": ("8h",), "P": ("7g", "8g", "9g")}),
    "mino": ("2h", {"G": ("4i", "5h"), "S": ("3h",), "P": ("1g", "2g", "3g", "4g"), "N": ("2i",), "L": ("1i",)}),
    "high_mino": ("2h", {"G": ("4g", "4i"), "S": ("3h",), "P": ("1g", "2g", "3f", "4f"), "N": ("2i",), "L": ("1i",)}),
    "silver_mino": ("2h", {"G": ("4i",), "S": ("3h", "4g"), "P": ("1g", "2g", "3g"), "N": ("2i",), "L": ("1i",)}),
    "diamond_mino": ("2h", {"G": ("4i",), "S": ("3h", "4h"), "P": ("1g", "2g", "3g", "4g")}),
    "ranging_anaguma": ("1i", {"G": ("3i", "3h"), "S": ("2h",), "L": ("1h",), "N": ("2i",), "P": ("1g", "2g", "3g")}),
    "kin_mino": ("2h", {"G": ("4i", "3h"), "P": ("1g", "2g", "3g", "4g"), "N": ("2i",), "L": ("1i",)}),
    "right_king": ("3h", {"G": ("4i", "5h"), "S": ("4h",), "P": ("1g", "2g", "3g", "4g")}),
    "central_house": ("5h", {"G": ("4h", "6h"), "S": ("4g", "6g"), "P": ("3g", "4f", "5g", "6f", "7g")}),
    "nakabisha_leftist": ("6h", {"G": ("7h", "5h"), "S": ("6g",), "P": ("6f", "7g", "5g")}),
}


def usi_square(name: str) -> int:
    """A USI square ("7g") as pgx's index in black's frame: file * 9 + rank."""
    return (int(name[0]) - 1) * 9 + "abcdefghi".index(name[1])


def _castle_tables() -> tuple[np.ndarray, np.ndarray]:
    """(king squares [C] int32, piece masks [C, 14, 81] float32) of ``CASTLES``."""
    kind = {"P": P, "L": L, "N": N, "S": S, "G": G, "B": B, "R": R}
    kings = np.array([usi_square(k) for k, _ in CASTLES.values()], np.int32)
    masks = np.zeros((len(CASTLES), 14, 81), np.float32)
    for c, (_, pieces) in enumerate(CASTLES.values()):
        for letter, squares in pieces.items():
            for sq in squares:
                masks[c, kind[letter], usi_square(sq)] = 1.0
    return kings, masks


def _distances() -> np.ndarray:
    """Euclidean distance between squares: [81, 81] float32."""
    f, r = np.divmod(np.arange(81), 9)
    return np.sqrt((f[:, None] - f[None]) ** 2 + (r[:, None] - r[None]) ** 2).astype(np.float32)


def root_frame(board: Array, hand: Array) -> tuple[Array, Array]:
    """A position turned to the other player's view: [..., 81], [..., 2, 7] (the board
    rotated by 180 degrees, the colours and hands swapped)."""
    flipped = jnp.where(board >= 0, (board + 14) % 28, -1)[..., ::-1]
    return flipped, hand[..., ::-1, :]


def _flow_gain(planes: Array, obs: Array) -> Array:
    """Bit-sliced [9, 9, W]: squares the opponent's sliders would reach if the root's
    pieces on safe squares were gone, and do not reach now. planes [28, 9, 9, W] (the
    root's pieces first), obs the observation planes [62, 9, 9, W]."""
    own = bitplanes.union(planes[:14], range(14))
    opp = bitplanes.union(planes[14:], range(14))
    empty = ~(own | opp)
    o1, o2, o3, e1, e2, e3 = (obs[i] for i in (28, 29, 30, 59, 60, 61))
    outnumbered = (e1 & ~o1) | (e2 & ~o2) | (e3 & ~o3)
    cleared = empty | (own & ~outnumbered & ~planes[K])
    now, then = jnp.zeros_like(own), jnp.zeros_like(own)
    for d in range(10):
        if bitplanes.SLIDERS[d]:
            sliders = bitplanes.union(planes[14:], bitplanes.SLIDERS[d])
            v = bitplanes.neg(bitplanes.MOVES[d])  # the opponent moves the other way
            now = now | bitplanes.ray(sliders, v, empty)
            then = then | bitplanes.ray(sliders, v, cleared)
    return then & ~now


def _planes(board: Array) -> Array:
    """[C, 81] -> [C, 63, 9, 9] bool: the observation's 62 planes (the root's 14 pieces,
    its attacks by kind (14), attacked >= 1, 2, 3 times; the same for the opponent),
    then the flow gain. The root's frame: [file, rank], rank 0 its far side."""
    batch = board.shape[0]
    planes = bitplanes.piece_planes(board)
    obs, _ = dense.observation_planes(planes)
    words = jnp.concatenate([obs, _flow_gain(planes, obs)[None]])  # [63, 9, 9, W]
    return bitplanes.unpack(words.reshape(63 * 81, -1), batch).reshape(batch, 63, 9, 9)


def _shift(x: Array, df: int, dr: int) -> Array:
    """[..., 9, 9] planes moved by ``df`` files and ``dr`` ranks: out[f, r] = x[f - df, r - dr];
    what leaves the board is lost."""
    pad = [(0, 0)] * (x.ndim - 2) + [(max(df, 0), max(-df, 0)), (max(dr, 0), max(-dr, 0))]
    x = jnp.pad(x, pad)
    return x[..., max(-df, 0):max(-df, 0) + 9, max(-dr, 0):max(-dr, 0) + 9]


def _zone(king: Array) -> Array:
    """A king's square and its up to 8 neighbours: [C, 9, 9] bool."""
    out = king
    for df in (-1, 0, 1):
        for dr in (-1, 0, 1):
            out = out | _shift(king, df, dr)
    return out


def _any(pieces: Array, kinds) -> Array:
    out = pieces[:, kinds[0]]
    for p in kinds[1:]:
        out = out | pieces[:, p]
    return out


_CASTLE_KINGS, _CASTLE_MASKS = _castle_tables()
_DISTANCES = _distances()


def _side_terms(mine: Array, theirs: Array, hand: Array) -> dict:
    """The terms counted for one side, all in that side's frame (rank 0 its far side).

    mine, theirs: that side's and the other side's 31 planes [C, 31, 9, 9] (pieces,
    attacks by kind, attacked >= 1, 2, 3); hand [C, 7] that side's hand.
    Returns {name: [C] float32} for every feature counted per side.
    """
    f32 = jnp.float32

    def n(x):
        return x.sum((-2, -1)).astype(f32)

    pieces, attacks = mine[:, :14], mine[:, 14:28]
    count = mine[:, 28:31].sum(1)  # attackers per square, up to 3
    their_pieces = theirs[:, :14]
    their_count = theirs[:, 28:31].sum(1)
    occupied = pieces.any(1)
    their_occupied = their_pieces.any(1)
    rank = jnp.arange(9)[None, None, :]
    king, their_king = pieces[:, K], their_pieces[:, K]
    neighbours = _zone(king) & ~king
    kinds = [n(pieces[:, p]) for p in range(14)]
    hand = hand.astype(f32)
    terms = {}
    for i, (letter, p) in enumerate(zip("PLNSBRG", (P, L, N, S, B, R, G))):
        terms[f"material_{letter}"] = kinds[p] + (kinds[p + 8] if p != G else 0) + hand[:, i]
        terms[f"in_hand_{letter}"] = hand[:, i]
        if p != G:
            terms[f"promoted_{letter}"] = kinds[p + 8]
    free = ~occupied & (their_count == 0)
    terms["bishop_mobility"] = n((attacks[:, B] | attacks[:, H]) & free)
    terms["rook_mobility"] = n((attacks[:, R] | attacks[:, D]) & free)
    terms["king_defenders"] = ((count * neighbours).sum((-2, -1)) - neighbours.sum((-2, -1))).clip(0).astype(f32)
    terms["escape_routes"] = n(neighbours & ~occupied & (their_count == 0))
    terms["home_camp_weakness"] = n((rank >= 6) & (their_count > count))
    terms["enemy_camp_control"] = n((rank <= 2) & (count > their_count))
    castle = jnp.einsum("cps,nps->cn", pieces.reshape(-1, 14, 81).astype(f32), _CASTLE_MASKS)
    terms["castle"] = (castle * king.reshape(-1, 81)[:, _CASTLE_KINGS]).max(-1)
    gold = _any(pieces, GOLD_MOVERS)
    silver, pawn, bishop, rook = pieces[:, S], pieces[:, P], pieces[:, B], pieces[:, R]
    rook_like = rook | pieces[:, D]
    terms["gold_ahead_of_silver"] = n(gold & _shift(silver, 0, -1))
    terms["gold_beside_rook"] = n(gold & (_shift(rook, 1, 0) | _shift(rook, -1, 0)))
    terms["boxed_in_bishop"] = sum(n(_shift(bishop, df, dr) & occupied) for df in (-1, 1) for dr in (-1, 1))
    terms["piece_ahead_of_pawn"] = n(occupied & ~pawn & _shift(pawn, 0, -1))
    terms["bishop_head_protected"] = n(_shift(bishop, 0, -1) & (count > 0))
    terms["reclining_silver"] = n(silver & (rank >= 3) & (rank <= 5) & (_shift(pawn, 1, 0) | _shift(pawn, -1, 0)))
    terms["claimed_files"] = n(pawn & (rank == 4) & (count > 0))
    terms["adjacent_silvers"] = (silver & _shift(silver, 1, 0)).any((-2, -1)).astype(f32)
    terms["adjacent_golds"] = (pieces[:, G] & _shift(pieces[:, G], 1, 0)).any((-2, -1)).astype(f32)
    terms["rook_in_enemy_camp"] = n(rook_like & (rank <= 2))
    king_file = their_king.any(-1)  # [C, 9]
    beside = _shift(king_file[:, :, None], 1, 0)[..., 0] | _shift(king_file[:, :, None], -1, 0)[..., 0]
    rooks_per_file = rook_like.sum(-1).astype(f32)  # [C, 9]
    terms["rook_on_king_file"] = (rooks_per_file * king_file).sum(-1)
    terms["rook_beside_king_file"] = (rooks_per_file * beside).sum(-1)
    edge = king_file[:, :2].any(-1) | king_file[:, 7:].any(-1)
    terms["rook_beside_edge_king_file"] = terms["rook_beside_king_file"] * edge
    alone = occupied.sum(-1) == 1  # the rook is the side's only piece on its file
    their_on_file = their_occupied.sum(-1)
    terms["rook_open_file"] = (rooks_per_file * (alone & (their_on_file == 0))).sum(-1)
    terms["rook_semi_open_file"] = (rooks_per_file * (alone & (their_on_file == 1))).sum(-1)
    advanced = (occupied & ~king) * (8 - rank)
    terms["aggression"] = advanced.sum((-2, -1)).astype(f32)
    terms["total_attacking"] = n(their_occupied & (count > 0))
    to_own = (king.reshape(-1, 81).astype(f32) @ _DISTANCES).reshape(-1, 1, 9, 9)
    to_their = (their_king.reshape(-1, 81).astype(f32) @ _DISTANCES).reshape(-1, 1, 9, 9)
    non_king = pieces[:, list(NON_KING)].astype(f32)  # [C, 13, 9, 9]
    own_d = (non_king * to_own).sum((-2, -1))
    their_d = (non_king * to_their).sum((-2, -1))
    for i, kind in enumerate(KINDS):
        terms[f"distance_own_king_{kind}"] = own_d[:, i]
        terms[f"distance_enemy_king_{kind}"] = their_d[:, i]
    terms["_king_zone_attacks"] = (count * _zone(their_king)).sum((-2, -1)).astype(f32)
    return terms


def _value(pieces: Array, where: Array) -> Array:
    """``greedy``'s value of the pieces [C, 14, 9, 9] standing on ``where`` [C, 9, 9]: [C]."""
    values = jnp.asarray(GREEDY_VALUES)[None, :, None, None]
    return (pieces * where[:, None] * values).sum((1, 2, 3)).astype(jnp.float32)


def _turn(x: Array) -> Array:
    """[..., 9, 9] planes rotated by 180 degrees: the other side's frame."""
    return x[..., ::-1, ::-1]


def features_batch(board: Array, hand: Array) -> Array:
    """The features of positions seen by the root (the player to move in this frame):
    board [C, 81] int, hand [C, 2, 7] int -> [C, 76] float32 (``NAMES``)."""
    planes = _planes(board)
    root, opp = planes[:, :31], planes[:, 31:62]
    batch = board.shape[0]
    both = _side_terms(jnp.concatenate([root, _turn(opp)]), jnp.concatenate([opp, _turn(root)]),
                       jnp.concatenate([hand[:, 0], hand[:, 1]]))  # one graph for both sides
    mine = {k: v[:batch] for k, v in both.items()}
    theirs = {k: v[batch:] for k, v in both.items()}
    out = []
    for name in NAMES:
        if name == "king_threats":
            out.append(-theirs["_king_zone_attacks"])
        elif name == "king_attacks":
            out.append(mine["_king_zone_attacks"])
        elif name == "bishop_head_attacked":
            their_heads = _shift(opp[:, B], 0, 1)  # the opponent's "ahead" is down in our frame
            out.append((their_heads & (root[:, 28] > 0)).sum((-2, -1)).astype(jnp.float32))
        elif name == "blocked_flow":
            out.append(planes[:, 62].sum((-2, -1)).astype(jnp.float32))
        elif name in ("hanging", "threatened"):
            root_count, opp_count = root[:, 28:31].sum(1), opp[:, 28:31].sum(1)
            if name == "hanging":
                out.append(-_value(root[:, :14], opp_count > root_count))
            else:
                out.append(_value(opp[:, :14], root_count > opp_count))
        else:
            out.append(mine[name] - theirs[name])
    return jnp.stack(out, axis=-1)


def features(board: Array, hand: Array) -> Array:
    """``features_batch`` over a batch in blocks on a CPU: [C, 81], [C, 2, 7] -> [C, 76]."""
    return bitplanes.in_blocks(features_batch, (board, hand), board.shape[0])


# Children of positions: what the GA's tables and the player's search evaluate. --------

GREEDY_VALUES = movegen.PIECE_VALUES  # P L N S B R G K +P..+R
BLOCK = 1024  # children per compiled call: one compile serves every caller


def has_legal_move(board: Array, hand: Array) -> Array:
    """[C, 81], [C, 2, 7] -> [C] bool: the mover has a legal move (the mask is OR-ed
    while still bit-sliced, never unpacked)."""
    mask, _ = dense.legal_planes(bitplanes.piece_planes(board), bitplanes.pack(hand[:, 0] > 0))
    any_move = jax.lax.reduce(bitplanes.any_square(mask), np.uint32(0), jax.lax.bitwise_or, (0,))  # [W]
    return bitplanes.unpack(any_move, board.shape[0])


@jax.jit
def _successors_block(board: Array, hand: Array, action: Array):
    child_board, child_hand = jax.vmap(movegen.successor)(board, hand, action)
    can_move = bitplanes.in_blocks(has_legal_move, (child_board, child_hand), board.shape[0])
    return child_board, child_hand, can_move


@jax.jit
def _features_block(board: Array, hand: Array):
    return features(board, hand), movegen.material(board, hand)


def block_arguments(name: str) -> tuple:
    """The abstract arguments [BLOCK, ...] int32 of the block program ``name``."""
    board, hand = jax.ShapeDtypeStruct((BLOCK, 81), jnp.int32), jax.ShapeDtypeStruct((BLOCK, 2, 7), jnp.int32)
    action = jax.ShapeDtypeStruct((BLOCK,), jnp.int32)
    return (board, hand, action) if name == "successors" else (board, hand)


def install_blocks(programs: dict) -> None:
    """Uses ``programs`` (name -> compiled program of ``block_arguments(name)``) for the
    blocks from now on, in place of the jits."""
    BLOCK_PROGRAMS.update(programs)


def _blocks(fn, arrays, total: int, progress=None):
    """``fn`` over host arrays [total, ...] in blocks of ``BLOCK`` (the last padded by
    repeating a real row): host arrays [total, ...]."""
    outs = []
    for start in range(0, total, BLOCK):
        idx = np.arange(start, min(start + BLOCK, total))
        idx = np.concatenate([idx, np.full(BLOCK - len(idx), idx[0])])
        out = fn(*(jnp.asarray(a[idx], jnp.int32) for a in arrays))
        outs.append([np.asarray(x)[:min(BLOCK, total - start)] for x in out])
        if progress:
            progress(min(start + BLOCK, total), total)
    return tuple(np.concatenate(parts) for parts in zip(*outs))


@jax.jit
def _legal_block(board: Array, hand: Array):
    return dense.analyze_batch(board, hand)[:1]


BLOCK_JITS = {"successors": _successors_block, "features": _features_block, "legal": _legal_block}
# The compiled block programs, by name: the jits, or the executables a process installed in
# their place (``install_blocks``: the USI engine's, kept serialized between starts).
BLOCK_PROGRAMS = dict(BLOCK_JITS)


def legal_masks(board: np.ndarray, hand: np.ndarray) -> np.ndarray:
    """Legal masks [C, 2187] bool of positions [C, 81], [C, 2, 7], in blocks of ``BLOCK``."""
    return _blocks(BLOCK_PROGRAMS["legal"], (board, hand), len(board))[0]


def feature_values(board: np.ndarray, hand: np.ndarray, progress=None) -> tuple[np.ndarray, np.ndarray]:
    """Features [C, F] and greedy material [C] of positions [C, 81], [C, 2, 7] seen by
    their mover, in compiled blocks of ``BLOCK`` (host arrays in and out)."""
    return _blocks(BLOCK_PROGRAMS["features"], (board, hand), len(board), progress)


def expand(board: np.ndarray, hand: np.ndarray, action: np.ndarray, *, flip: bool = True, progress=None):
    """The positions after ``action`` [C] from positions board [C, 81], hand [C, 2, 7]
    (host arrays), in compiled blocks of ``BLOCK``. Returns host arrays: features [C, F]
    and greedy material [C] seen from the side that moved (``flip``) or from the side to
    move after it; mated [C] (the side to move after it has no legal move); the child
    positions [C, 81], [C, 2, 7] (the new mover's frame)."""
    child_board, child_hand, can_move = _blocks(BLOCK_PROGRAMS["successors"], (board, hand, action), len(action))
    seen_board, seen_hand = child_board, child_hand
    if flip:  # root_frame on the host
        seen_board = np.where(child_board >= 0, (child_board + 14) % 28, -1)[:, ::-1]
        seen_hand = child_hand[:, ::-1]
    f, material = feature_values(seen_board, seen_hand, progress)
    return f, ~can_move, material, child_board, child_hand
