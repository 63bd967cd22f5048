"""The dense shogi core: legal moves, check and observation as whole-board bit algebra.

Written in ``envs.bitplanes``'s bit-sliced planes ([..., 9, 9, W] uint32 words, 32
positions a word). Computed once per position: the opponent's attack map with our king
removed, the checkers, the squares that block a check, the pinned pieces per axis;
then each of pgx's 10 move directions gives its legal destinations as one plane (in
the dlshogi encoding only the first piece behind a square can make a move in a
direction, so no source lookup is needed). Pawn-drop mate is tested exactly.

The entry points (``analyze``, ``observe``, ``observe_parts``, ``source``, ``checks``)
take one position and are ``custom_vmap`` functions: under ``jax.vmap`` the whole batch
goes through the bit-sliced code in one call. B is the batch of positions.
"""

import jax.numpy as jnp
from jax import Array

from envs.bitplanes import (
    AXIS, B, D, G, H, K, L, MOVES, N, P, PROMOTABLE, R, S, SLIDERS, STEPPERS, Side, any_square, batched, neg,
    pack, piece_planes, ranks_below, ray, shift, spread, union, unpack,
)

BOARD_BYTES = 81 * 8  # the observation's 62 board planes packed: 8 bytes a square


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
    own, opp = Side(planes[:14], 1), Side(planes[14:], -1)
    occupied = own.occupied | opp.occupied
    empty = ~occupied
    king = own.planes[K]

    # The opponent's attacks with our king taken off, so it cannot step back along a ray.
    danger = opp.attacks(empty | king)

    # Checkers, check-blocking squares and pins, looking out from our king.
    checks, between, pinned = [], jnp.zeros_like(king), [jnp.zeros_like(king) for _ in range(4)]
    for d in range(10):
        toward = neg(opp.move(d))  # from our king towards an opponent piece moving in d
        hit = shift(king, toward) & opp.steppers(d)
        if SLIDERS[d]:
            line = ray(king, toward, empty)
            slide_hit = line & opp.sliders(d)
            hit = hit | slide_hit
            between = between | (line & empty & spread(any_square(slide_hit)))
            pins = line & own.occupied & ray(opp.sliders(d), opp.move(d), empty)
            pinned[AXIS[d]] = pinned[AXIS[d]] | pins
        checks.append(hit)
    checkers = union(checks, range(10))
    in_check, double_check = _count_to_two([any_square(c) for c in checks])
    evasion = ~spread(in_check) | (spread(~double_check) & (checkers | between))
    pinned_any = union(pinned, range(4))

    target = ~own.occupied & evasion  # where a piece other than the king may go
    moves, promotions = [], []
    for d in range(10):
        v = MOVES[d]
        free = ~pinned_any if AXIS[d] is None else ~pinned_any | pinned[AXIS[d]]

        def reach(step_kinds, slide_kinds, from_zone=False):
            step_src = union(own.planes, [p for p in step_kinds if p in STEPPERS[d]]) & free
            slide_src = union(own.planes, [p for p in slide_kinds if p in SLIDERS[d]]) & free
            if from_zone:
                step_src, slide_src = step_src & ranks_below(3), slide_src & ranks_below(3)
            out = shift(step_src, v)
            if SLIDERS[d]:
                out = out | ray(slide_src, v, empty)
            return out & target

        promotable = reach(PROMOTABLE, PROMOTABLE)
        others = reach([p for p in STEPPERS[d] if p not in PROMOTABLE and p != K], [H, D])
        king_moves = shift(king, v) & ~own.occupied & ~danger if d < 8 else jnp.zeros_like(king)
        may_promote = promotable & ranks_below(3)
        if v[1] > 0:  # moving away from the zone: a move out of it may promote too
            may_promote = may_promote | reach(PROMOTABLE, PROMOTABLE, from_zone=True)
        if d == 0:
            forced = reach((P,), (L,)) & ranks_below(1)
        elif d >= 8:
            forced = promotable & ranks_below(2)
        else:
            forced = jnp.zeros_like(king)
        moves.append((promotable & ~forced) | others | king_moves)
        promotions.append(may_promote)

    # Drops: P L N S B R G from the hand onto empty squares that also answer a check.
    drop_target = empty & evasion
    no_own_pawn = ~any_square(own.planes[P][:, :, None])[:, None, :]  # per file: [9, 1, W]
    drops = [drop_target & spread(hand[k]) for k in range(7)]
    drops[P] = drops[P] & ~ranks_below(1) & no_own_pawn
    drops[L] = drops[L] & ~ranks_below(1)
    drops[N] = drops[N] & ~ranks_below(2)
    drops[P] = drops[P] & ~_pawn_drop_mate(own, opp, occupied, drops[P])

    mask = jnp.stack(moves + promotions + drops)
    return mask, in_check


def _pawn_drop_mate(own: Side, opp: Side, occupied: Array, pawn_drops: Array) -> Array:
    """The square in front of the enemy king where a pawn drop would mate: [9, 9, W].

    Mate: the king has no safe square (our attacks recomputed with the pawn on the
    board and the king lifted off), and no other enemy piece can take the pawn
    without exposing its king (pins recomputed after the drop).
    """
    their_king = opp.planes[K]
    square = shift(their_king, neg(MOVES[0])) & pawn_drops  # our pawn attacks MOVES[0]
    after = occupied | square
    empty = ~after
    own_after = Side(jnp.concatenate([(own.planes[P] | square)[None], own.planes[P + 1:]]), 1)  # P == 0

    covered = own_after.attacks(empty | their_king)
    escapes = jnp.zeros_like(square)
    for v in MOVES[:8]:
        escapes = escapes | shift(their_king, v)
    escapes = escapes & ~opp.occupied & ~covered

    pinned = jnp.zeros_like(square)
    takers = jnp.zeros_like(square)
    for d in range(10):
        toward = neg(opp.move(d))  # from the pawn towards an enemy piece that moves in d onto it
        takers = takers | (shift(square, toward) & opp.steppers(d, exclude=(K,)))
        if SLIDERS[d]:
            takers = takers | (ray(square, toward, empty) & opp.sliders(d))
            mine = own_after.move(d)
            pinned = pinned | (ray(own_after.sliders(d), mine, empty) & ray(their_king, neg(mine), empty) & opp.occupied)
    takers = takers & ~pinned
    mates = ~any_square(escapes) & ~any_square(takers)
    return square & spread(mates)


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
    own, opp = Side(planes[:14], 1), Side(planes[14:], -1)
    empty = ~(own.occupied | opp.occupied)
    king = opp.planes[K]
    zero = jnp.zeros_like(king)

    # Squares from which each kind of ours attacks their king.
    attacks_king = [zero] * 14
    for d in range(10):
        toward = neg(MOVES[d])  # from the king back to a piece of ours that moves in d onto it
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
            blockers = ray(king, neg(MOVES[d]), empty) & own.occupied
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
        off_line = union(discoverers, [a for a in range(4) if a != AXIS[d]])
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
    own, opp = Side(planes[:14], 1), Side(planes[14:], -1)
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
        back = neg(v)
        first = ray(target, back, ~occupied) & occupied if d < 8 else shift(target, back)
        found = found | (first & spread(pack(direction == d)))
    return unpack(found.reshape(81, -1), batch)


analyze = batched(analyze_batch)
"""(board [81], hand [2, 7]) -> (legal mask [2187] bool, in check [] bool)."""

source = batched(source_batch)
"""(board [81], to [], direction []) -> the moving piece's square [81] bool."""

observe = batched(observe_batch)
"""(board [81], hand [2, 7]) -> observation [9, 9, 119] bool."""

observe_parts = batched(observe_parts_batch)
"""(board [81], hand [2, 7]) -> (board planes packed [648] uint8, flags [57] bool)."""

checks = batched(checks_batch)
"""(board [81], hand [2, 7]) -> (legal mask [2187] bool, legal checking moves [2187] bool)."""
