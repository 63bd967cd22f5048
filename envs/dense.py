"""The dense shogi core: legal moves, check and observation as whole-board bit algebra.

A position is a stack of 9x9 piece planes; every move rule is a static shift of a
plane, and sliding pieces use an occluded (Kogge-Stone) fill that stops at the first
blocker. Computed once per position: the opponent's attack map with our king
removed, the checkers, the squares that block a check, the pinned pieces per axis;
then each of pgx's 10 move directions gives its legal destinations as one plane (in
the dlshogi encoding only the first piece behind a square can make a move in a
direction, so no source lookup is needed). Pawn-drop mate is tested exactly.

Layout: planes are ``[..., 9 files, 9 ranks, W]`` uint32 words, bit-sliced: bit ``i``
of word ``w`` is position ``32 * w + i`` of the batch, so one bitwise op handles 32
positions. There are no gathers, scatters or data-dependent indices. The entry points
(``analyze``, ``observe``) take one position and are ``custom_vmap`` functions: under
``jax.vmap`` the whole batch goes through the bit-sliced code in one call.

Frame and encoding are pgx's (see ``envs.movegen``): square ``file * 9 + rank``,
rank 0 the far side of the mover, pieces 0..13 the mover's, 14..27 the opponent's.
"""

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array, lax

P, L, N, S, B, R, G, K, PP, PL, PN, PS, H, D = range(14)
GOLD_LIKE = (G, PP, PL, PN, PS)

# pgx's 10 move directions as (file, rank) displacements of the moving piece, in the
# mover's frame: 0 up, 1 up-left, 2 up-right, 3 left, 4 right, 5 down, 6 down-left,
# 7 down-right, 8 knight-left, 9 knight-right ("up" is towards rank 0).
MOVES = ((0, -1), (1, -1), (-1, -1), (1, 0), (-1, 0), (0, 1), (1, 1), (-1, 1), (1, -2), (-1, -2))
AXIS = (0, 2, 3, 1, 1, 0, 3, 2, None, None)  # pin axis of each direction; knights have none

# Pieces (of the side that owns them, in its own frame) that step / slide each way.
STEPPERS = (
    (P, S, K, H) + GOLD_LIKE,
    (S, K, D) + GOLD_LIKE,
    (S, K, D) + GOLD_LIKE,
    (K, H) + GOLD_LIKE,
    (K, H) + GOLD_LIKE,
    (K, H) + GOLD_LIKE,
    (S, K, D),
    (S, K, D),
    (N,),
    (N,),
)
SLIDERS = ((L, R, D), (B, H), (B, H), (R, D), (R, D), (R, D), (B, H), (B, H), (), ())
PROMOTABLE = (P, L, N, S, B, R)

ONES = np.uint32(0xFFFFFFFF)
BOARD_BYTES = 81 * 8  # the observation's 62 board planes packed: 8 bytes a square


def _neg(v):
    return (-v[0], -v[1])


def _ranks_below(n: int) -> Array:
    """Ranks 0..n-1 as a plane of full words: [9, 9, 1].

    Built from an iota rather than a numpy constant: constants captured inside a
    ``custom_vmap`` function trip a JAX assertion under ``vmap`` of a loop.
    """
    rank = lax.broadcasted_iota(jnp.int32, (9, 9, 1), 1)
    return jnp.where(rank < n, ONES, np.uint32(0))


def shift(plane: Array, v) -> Array:
    """Moves every bit by ``v`` = (files, ranks); what leaves the board is lost."""
    df, dr = v
    zero = jnp.zeros((), plane.dtype)
    config = [(0, 0, 0)] * (plane.ndim - 3) + [(df, -df, 0), (dr, -dr, 0), (0, 0, 0)]
    return lax.pad(plane, zero, config)


def ray(sources: Array, v, empty: Array) -> Array:
    """Squares attacked by sliders at ``sources`` moving by ``v``: the empty squares
    on the way and the first blocker."""
    filled, passable = sources, empty
    for k in (1, 2, 4):  # doubling fill: reaches 7 empty squares, the board needs <= 7
        step = (v[0] * k, v[1] * k)
        filled = filled | (passable & shift(filled, step))
        passable = passable & shift(passable, step)
    return shift(filled, v)


def any_square(plane: Array) -> Array:
    """OR over the board: [..., 9, 9, W] -> [..., W]."""
    return lax.reduce(plane, np.uint32(0), lax.bitwise_or, (plane.ndim - 3, plane.ndim - 2))


def _spread(word: Array) -> Array:
    """A per-position word [W] as a plane [1, 1, W]."""
    return word[None, None, :]


def _union(planes, indices) -> Array:
    out = jnp.zeros_like(planes[0])
    for i in indices:
        out = out | planes[i]
    return out


class _Side:
    """One side's piece planes in the mover's frame; ``sign`` -1 for the opponent,
    whose pieces move the other way."""

    def __init__(self, planes, sign):
        self.planes = planes  # [14, 9, 9, W]
        self.sign = sign
        self.occupied = _union(planes, range(14))

    def move(self, d):
        v = MOVES[d]
        return v if self.sign > 0 else _neg(v)

    def steppers(self, d, exclude=()):
        return _union(self.planes, [p for p in STEPPERS[d] if p not in exclude])

    def sliders(self, d):
        return _union(self.planes, SLIDERS[d])

    def attacks(self, empty):
        """Every square this side attacks, blockers ``~empty``: [9, 9, W]."""
        out = jnp.zeros_like(self.occupied)
        for d in range(10):
            out = out | shift(self.steppers(d), self.move(d))
            if SLIDERS[d]:
                out = out | ray(self.sliders(d), self.move(d), empty)
        return out


def _count_to_two(words):
    """(at least one, at least two) of a list of per-position words."""
    one = jnp.zeros_like(words[0])
    two = jnp.zeros_like(words[0])
    for w in words:
        two = two | (one & w)
        one = one | w
    return one, two


def legal_planes(planes: Array, hand: Array) -> tuple[Array, Array]:
    """Legal actions and check, bit-sliced.

    Args:
      planes: [28, 9, 9, W] uint32, the mover's 14 piece kinds then the opponent's.
      hand: [7, W] uint32, bit set when the mover holds at least one P L N S B R G.

    Returns:
      (mask, checked): mask [27, 9, 9, W] (pgx's action order, direction-major),
      checked [W], the mover is in check.
    """
    own, opp = _Side(planes[:14], 1), _Side(planes[14:], -1)
    occupied = own.occupied | opp.occupied
    empty = ~occupied
    king = own.planes[K]

    # The opponent's attacks with our king taken off, so it cannot step back along a ray.
    danger = opp.attacks(empty | king)

    # Checkers, check-blocking squares and pins, looking out from our king.
    checks, between, pinned = [], jnp.zeros_like(king), [jnp.zeros_like(king) for _ in range(4)]
    for d in range(10):
        toward = _neg(opp.move(d))  # from our king towards an opponent piece moving in d
        hit = shift(king, toward) & opp.steppers(d)
        if SLIDERS[d]:
            line = ray(king, toward, empty)
            slide_hit = line & opp.sliders(d)
            hit = hit | slide_hit
            between = between | (line & empty & _spread(any_square(slide_hit)))
            pins = line & own.occupied & ray(opp.sliders(d), opp.move(d), empty)
            pinned[AXIS[d]] = pinned[AXIS[d]] | pins
        checks.append(hit)
    checkers = _union(checks, range(10))
    in_check, double_check = _count_to_two([any_square(c) for c in checks])
    evasion = ~_spread(in_check) | (_spread(~double_check) & (checkers | between))
    pinned_any = _union(pinned, range(4))

    target = ~own.occupied & evasion  # where a piece other than the king may go
    moves, promotions = [], []
    for d in range(10):
        v = MOVES[d]
        free = ~pinned_any if AXIS[d] is None else ~pinned_any | pinned[AXIS[d]]

        def reach(step_kinds, slide_kinds, from_zone=False):
            step_src = _union(own.planes, [p for p in step_kinds if p in STEPPERS[d]]) & free
            slide_src = _union(own.planes, [p for p in slide_kinds if p in SLIDERS[d]]) & free
            if from_zone:
                step_src, slide_src = step_src & _ranks_below(3), slide_src & _ranks_below(3)
            out = shift(step_src, v)
            if SLIDERS[d]:
                out = out | ray(slide_src, v, empty)
            return out & target

        promotable = reach(PROMOTABLE, PROMOTABLE)
        others = reach([p for p in STEPPERS[d] if p not in PROMOTABLE and p != K], [H, D])
        king_moves = shift(king, v) & ~own.occupied & ~danger if d < 8 else jnp.zeros_like(king)
        may_promote = promotable & _ranks_below(3)
        if v[1] > 0:  # moving away from the zone: a move out of it may promote too
            may_promote = may_promote | reach(PROMOTABLE, PROMOTABLE, from_zone=True)
        if d == 0:
            forced = reach((P,), (L,)) & _ranks_below(1)
        elif d >= 8:
            forced = promotable & _ranks_below(2)
        else:
            forced = jnp.zeros_like(king)
        moves.append((promotable & ~forced) | others | king_moves)
        promotions.append(may_promote)

    # Drops: P L N S B R G from the hand onto empty squares that also answer a check.
    drop_target = empty & evasion
    no_own_pawn = ~any_square(own.planes[P][:, :, None])[:, None, :]  # per file: [9, 1, W]
    drops = [drop_target & _spread(hand[k]) for k in range(7)]
    drops[P] = drops[P] & ~_ranks_below(1) & no_own_pawn
    drops[L] = drops[L] & ~_ranks_below(1)
    drops[N] = drops[N] & ~_ranks_below(2)
    drops[P] = drops[P] & ~_pawn_drop_mate(own, opp, occupied, drops[P])

    mask = jnp.stack(moves + promotions + drops)
    return mask, in_check


def _pawn_drop_mate(own: _Side, opp: _Side, occupied: Array, pawn_drops: Array) -> Array:
    """The square in front of the enemy king where a pawn drop would mate: [9, 9, W].

    Mate: the king has no safe square (our attacks recomputed with the pawn on the
    board and the king lifted off), and no other enemy piece can take the pawn
    without exposing its king (pins recomputed after the drop).
    """
    their_king = opp.planes[K]
    square = shift(their_king, _neg(MOVES[0])) & pawn_drops  # our pawn attacks MOVES[0]
    after = occupied | square
    empty = ~after
    own_after = _Side(jnp.concatenate([(own.planes[P] | square)[None], own.planes[P + 1:]]), 1)  # P == 0

    covered = own_after.attacks(empty | their_king)
    escapes = jnp.zeros_like(square)
    for v in MOVES[:8]:
        escapes = escapes | shift(their_king, v)
    escapes = escapes & ~opp.occupied & ~covered

    pinned = jnp.zeros_like(square)
    takers = jnp.zeros_like(square)
    for d in range(10):
        toward = _neg(opp.move(d))  # from the pawn towards an enemy piece that moves in d onto it
        takers = takers | (shift(square, toward) & opp.steppers(d, exclude=(K,)))
        if SLIDERS[d]:
            takers = takers | (ray(square, toward, empty) & opp.sliders(d))
            mine = own_after.move(d)
            pinned = pinned | (ray(own_after.sliders(d), mine, empty) & ray(their_king, _neg(mine), empty) & opp.occupied)
    takers = takers & ~pinned
    mates = ~any_square(escapes) & ~any_square(takers)
    return square & _spread(mates)


def checking_planes(planes: Array) -> Array:
    """The actions (legal or not) after which the opponent's king is in check:
    [27, 9, 9, W] in pgx's action order. AND it with the legal mask.

    Direct checks: the moved piece (promoted where the action promotes) or the dropped
    one attacks the king from its destination. A slider attacks from any square of the
    king's ray before and including the first blocker; the square the piece leaves
    cannot open such a ray for itself (only by moving straight away from the king,
    which would mean the king stood in check with us to move). Discovered checks: our
    piece that alone stands between one of our sliders and the king, moved off that
    line (any direction on another axis, a knight's jump, a king step).
    """
    own, opp = _Side(planes[:14], 1), _Side(planes[14:], -1)
    empty = ~(own.occupied | opp.occupied)
    king = opp.planes[K]
    zero = jnp.zeros_like(king)

    # Squares from which each kind of ours attacks their king.
    attacks_king = [zero] * 14
    for d in range(10):
        toward = _neg(MOVES[d])  # from the king back to a piece of ours that moves in d onto it
        for p in STEPPERS[d]:
            attacks_king[p] = attacks_king[p] | shift(king, toward)
        if SLIDERS[d]:
            line = ray(king, toward, empty)
            for p in SLIDERS[d]:
                attacks_king[p] = attacks_king[p] | line
    attacks_king[K] = zero  # a king never checks: it could not stand next to the other

    # Our pieces that alone block one of our sliders' rays to their king, per axis.
    discoverers = [zero] * 4
    for d in range(10):
        if SLIDERS[d]:
            blockers = ray(king, _neg(MOVES[d]), empty) & own.occupied
            discoverers[AXIS[d]] = discoverers[AXIS[d]] | (blockers & ray(own.sliders(d), MOVES[d], empty))

    moves, promotions = [], []
    for d in range(10):
        v = MOVES[d]
        kinds = [p for p in STEPPERS[d] + SLIDERS[d]]

        def reach(p, sources):
            return ray(sources, v, empty) if p in SLIDERS[d] else shift(sources, v)

        direct = zero
        promoted = zero
        for p in kinds:
            if p == K:
                continue
            destinations = reach(p, own.planes[p])
            direct = direct | (destinations & attacks_king[p])
            if p in PROMOTABLE:
                promoted = promoted | (destinations & attacks_king[p + 8])
        off_line = _union(discoverers, [a for a in range(4) if a != AXIS[d]])
        discovered = zero
        for p in kinds:
            discovered = discovered | reach(p, own.planes[p] & off_line)
        moves.append(direct | discovered)
        promotions.append(promoted | discovered)
    drops = [attacks_king[k] & empty for k in (P, L, N, S, B, R, G)]
    return jnp.stack(moves + promotions + drops)


def observation_planes(planes: Array) -> tuple[Array, Array]:
    """pgx's board-dependent observation planes, bit-sliced: ([62, 9, 9, W], checked [W]).

    For the mover, then the opponent: 14 piece planes, 14 attack planes (by the
    attacking kind), and attack counts >= 1, 2, 3 (each direction brings at most one
    attacker, so the count is the number of directions attacked from).
    """
    own, opp = _Side(planes[:14], 1), _Side(planes[14:], -1)
    empty = ~(own.occupied | opp.occupied)
    out = []
    for side in (own, opp):
        by_kind = [jnp.zeros_like(empty) for _ in range(14)]
        by_direction = []
        for d in range(10):
            v = side.move(d)
            arrived = jnp.zeros_like(empty)
            for p in STEPPERS[d]:
                a = shift(side.planes[p], v)
                by_kind[p] = by_kind[p] | a
                arrived = arrived | a
            for p in SLIDERS[d]:
                a = ray(side.planes[p], v, empty)
                by_kind[p] = by_kind[p] | a
                arrived = arrived | a
            by_direction.append(arrived)
        one = jnp.zeros_like(empty)
        two = jnp.zeros_like(empty)
        three = jnp.zeros_like(empty)
        for a in by_direction:
            three = three | (two & a)
            two = two | (one & a)
            one = one | a
        out += [side.planes[p] for p in range(14)] + by_kind + [one, two, three]
    checked = any_square(out[-3] & own.planes[K])  # the opponent attacks our king
    return jnp.stack(out), checked


# Packing between pgx's per-position arrays and bit-sliced words. ---------------------


def pack(bits: Array) -> Array:
    """[B, ...] bool -> [..., W] uint32 with W = ceil(B / 32); padding bits are 0."""
    batch = bits.shape[0]
    words = -(-batch // 32)
    bits = jnp.pad(bits, [(0, words * 32 - batch)] + [(0, 0)] * (bits.ndim - 1))
    bits = bits.reshape((words, 32) + bits.shape[1:]).astype(jnp.uint32)
    weights = (jnp.uint32(1) << jnp.arange(32, dtype=jnp.uint32)).reshape((1, 32) + (1,) * (bits.ndim - 2))
    packed = (bits * weights).sum(axis=1, dtype=jnp.uint32)  # distinct bits: sum == or
    return jnp.moveaxis(packed, 0, -1)


def unpack(words: Array, batch: int) -> Array:
    """[..., W] uint32 -> [B, ...] bool.

    The words move to the front first (W is 32x smaller than B), so the bits are then
    written in their final order without a transpose of the large result."""
    words = jnp.moveaxis(words, -1, 0)  # [W, ...]
    shifts = jnp.arange(32, dtype=jnp.uint32).reshape((1, 32) + (1,) * (words.ndim - 1))
    bits = (words[:, None] >> shifts) & 1  # [W, 32, ...]
    return bits.reshape((-1,) + words.shape[1:])[:batch].astype(jnp.bool_)


def piece_planes(board: Array) -> Array:
    """pgx boards [B, 81] int32 -> [28, 9, 9, W] piece planes."""
    onehot = board[:, None, :] == jnp.arange(28, dtype=board.dtype)[None, :, None]  # [B, 28, 81]
    return pack(onehot.reshape(board.shape[0], 28, 9, 9))


def analyze_batch(board: Array, hand: Array) -> tuple[Array, Array]:
    """[B, 81], [B, 2, 7] -> (legal mask [B, 2187] bool, in check [B] bool)."""
    batch = board.shape[0]
    mask, checked = legal_planes(piece_planes(board), pack(hand[:, 0] > 0))
    return unpack(mask.reshape(27 * 81, -1), batch), unpack(checked, batch)


def checks_batch(board: Array, hand: Array) -> tuple[Array, Array]:
    """[B, 81], [B, 2, 7] -> (legal actions [B, 2187], legal actions that give check [B, 2187])."""
    batch = board.shape[0]
    planes = piece_planes(board)
    mask, _ = legal_planes(planes, pack(hand[:, 0] > 0))
    checking = mask & checking_planes(planes)
    return unpack(mask.reshape(27 * 81, -1), batch), unpack(checking.reshape(27 * 81, -1), batch)


def _observation_words(board: Array, hand: Array) -> tuple[Array, Array]:
    """[B, 81], [B, 2, 7] -> (the 62 board planes as words [9, 9, 62, W] in pgx's picture
    orientation, the 57 flags [B, 57] bool: hands, then in check)."""
    batch = board.shape[0]
    planes, checked = observation_planes(piece_planes(board))
    # pgx's picture orientation (rot90 of the [file, rank] board), done on the packed words.
    planes = jnp.moveaxis(jnp.rot90(planes, k=3, axes=(1, 2)), 0, 2)  # [9, 9, 62, W]
    checked = unpack(checked, batch)
    counts = jnp.arange(1, 9)
    hand_planes = []
    for side in (0, 1):  # pgx's order: P (8), L N S G (4 each), B R (2 each)
        for kind, most in ((0, 8), (1, 4), (2, 4), (3, 4), (6, 4), (4, 2), (5, 2)):
            hand_planes.append(hand[:, side, kind, None] >= counts[None, :most])
    return planes, jnp.concatenate(hand_planes + [checked[:, None]], axis=1)


def observe_parts_batch(board: Array, hand: Array) -> tuple[Array, Array]:
    """[B, 81], [B, 2, 7] -> pgx's observation in the network's form: the 62 planes that
    vary over the board packed 8 to a byte [B, 648] uint8 (``BOARD_BYTES``: square-major
    in pgx's 9x9 picture, bit k of a square's byte j is plane 8j + k, planes 62 and 63
    zero), and the 57 that are constant on it (hands, check) as flags [B, 57] bool.

    Bytes, not [B, 9, 9, 62] bools: on a TPU the small 9, 9 and 62 axes pad to whole
    tiles, so writing (and later reading) the bools cost more memory traffic than the
    env step itself; the network's first layer unpacks them (``unpack_board_planes``).
    """
    batch = board.shape[0]
    words, flags = _observation_words(board, hand)
    words = jnp.pad(words, ((0, 0), (0, 0), (0, 2), (0, 0))).reshape(81, 8, 8, -1)  # [square, byte, bit, W]
    bits = (words[..., None] >> jnp.arange(32, dtype=jnp.uint32)) & 1  # [81, 8, 8, W, 32]: position 32w + i
    weights = (jnp.uint32(1) << jnp.arange(8, dtype=jnp.uint32))[None, None, :, None, None]
    packed = (bits * weights).sum(axis=2, dtype=jnp.uint32).astype(jnp.uint8)  # [81, 8, W, 32]
    return packed.reshape(BOARD_BYTES, -1)[:, :batch].T, flags


def unpack_board_planes(packed: Array) -> Array:
    """``observe_parts``'s board bytes [..., 648] uint8 -> planes [..., 9, 9, 62] bool."""
    bits = (packed.reshape(packed.shape[:-1] + (9, 9, 8, 1)) >> jnp.arange(8, dtype=jnp.uint8)) & 1
    return bits.reshape(packed.shape[:-1] + (9, 9, 64))[..., :62].astype(jnp.bool_)


def pack_board_planes(planes: Array) -> Array:
    """The inverse of ``unpack_board_planes``: [..., 9, 9, 62] bool -> [..., 648] uint8."""
    bits = jnp.pad(planes, [(0, 0)] * (planes.ndim - 1) + [(0, 2)]).astype(jnp.uint8)
    bits = bits.reshape(planes.shape[:-3] + (BOARD_BYTES, 8))
    return (bits << jnp.arange(8, dtype=jnp.uint8)).sum(axis=-1, dtype=jnp.uint8)


def observe_batch(board: Array, hand: Array) -> Array:
    """[B, 81], [B, 2, 7] -> pgx's observation [B, 9, 9, 119] bool."""
    words, flags = _observation_words(board, hand)
    board_planes = unpack(words, board.shape[0])  # [B, 9, 9, 62]
    flags = jnp.broadcast_to(flags[:, None, None, :], (board.shape[0], 9, 9, flags.shape[1]))
    return jnp.concatenate([board_planes, flags], axis=-1)


def source_batch(board: Array, to: Array, direction: Array) -> Array:
    """Where a move comes from: [B, 81], [B], [B] (0..9) -> [B, 81] bool.

    For a legal move in ``direction`` onto ``to`` it is the first occupied square
    behind the target (the adjacent one for a step, the knight's square for a jump).
    """
    batch = board.shape[0]
    occupied = pack((board >= 0).reshape(batch, 9, 9))
    target = pack((jnp.arange(81) == to[:, None]).reshape(batch, 9, 9))
    found = jnp.zeros_like(target)
    for d, v in enumerate(MOVES):
        back = _neg(v)
        first = ray(target, back, ~occupied) & occupied if d < 8 else shift(target, back)
        found = found | (first & _spread(pack(direction == d)))
    return unpack(found.reshape(81, -1), batch)


CPU_BLOCK = 256  # positions per pass on a CPU: a plane of 8 words keeps the working set in cache


def _in_blocks(fn, args, batch: int):
    """``fn`` over the batch in blocks of ``CPU_BLOCK`` positions when compiled for a CPU
    (one compiled body in a loop), over the whole batch at once for other platforms. The
    choice is made at lowering (``lax.platform_dependent``), so a CPU process compiling
    for a TPU (bench/tpu_plan.py) gets the TPU's form."""
    if batch <= CPU_BLOCK:
        return fn(*args)
    blocks = -(-batch // CPU_BLOCK)

    def blocked(*args):
        padded = [jnp.pad(a, [(0, blocks * CPU_BLOCK - batch)] + [(0, 0)] * (a.ndim - 1)) for a in args]
        out = lax.map(lambda chunk: fn(*chunk), [a.reshape((blocks, CPU_BLOCK) + a.shape[1:]) for a in padded])
        return jax.tree.map(lambda o: o.reshape((blocks * CPU_BLOCK,) + o.shape[2:])[:batch], out)

    return lax.platform_dependent(*args, cpu=blocked, default=fn)


def _batched(fn):
    """One position in, one out; under ``vmap`` the batch is handled by ``fn`` at once."""

    @jax.custom_batching.custom_vmap
    def single(*args):
        out = fn(*[a[None] for a in args])
        return jax.tree.map(lambda o: o[0], out)

    @single.def_vmap
    def rule(axis_size, in_batched, *args):
        args = [a if batched else jnp.broadcast_to(a, (axis_size,) + a.shape) for a, batched in zip(args, in_batched)]
        out = _in_blocks(fn, args, axis_size)
        return out, jax.tree.map(lambda _: True, out)

    return single


analyze = _batched(analyze_batch)
"""(board [81], hand [2, 7]) -> (legal mask [2187] bool, in check [] bool)."""

source = _batched(source_batch)
"""(board [81], to [], direction []) -> the moving piece's square [81] bool."""

observe = _batched(observe_batch)
"""(board [81], hand [2, 7]) -> observation [9, 9, 119] bool."""

observe_parts = _batched(observe_parts_batch)
"""(board [81], hand [2, 7]) -> (board planes packed [648] uint8, flags [57] bool)."""

checks = _batched(checks_batch)
"""(board [81], hand [2, 7]) -> (legal mask [2187] bool, legal checking moves [2187] bool)."""
