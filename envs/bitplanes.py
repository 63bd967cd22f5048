"""Bit-sliced board planes: the layout and algebra the dense core (``envs.dense``) is written in.

Layout: planes are ``[..., 9 files, 9 ranks, W]`` uint32 words, bit-sliced: bit ``i``
of word ``w`` is position ``32 * w + i`` of the batch, so one bitwise op handles 32
positions. Every move rule is a static shift of a plane (``shift``); sliding pieces use
an occluded (Kogge-Stone) fill that stops at the first blocker (``ray``). There are no
gathers, scatters or data-dependent indices.

Here: piece kinds, pgx's 10 move directions and which kinds step or slide each way;
shifts, rays and reductions; ``Side``, one side's planes in the mover's frame; packing
between per-position arrays [B, ...] and words [..., W]; and ``batched``, which turns a
function of a batch into a ``custom_vmap`` function of one position.

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


def neg(v):
    """The opposite displacement: (files, ranks) -> (-files, -ranks)."""
    return (-v[0], -v[1])


def ranks_below(n: int) -> Array:
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


def spread(word: Array) -> Array:
    """A per-position word [W] as a plane [1, 1, W]."""
    return word[None, None, :]


def union(planes, indices) -> Array:
    """OR of ``planes[i]`` over ``indices``: [K, ..., 9, 9, W] -> [..., 9, 9, W]."""
    out = jnp.zeros_like(planes[0])
    for i in indices:
        out = out | planes[i]
    return out


class Side:
    """One side's piece planes in the mover's frame; ``sign`` -1 for the opponent,
    whose pieces move the other way."""

    def __init__(self, planes, sign):
        self.planes = planes  # [14, 9, 9, W]
        self.sign = sign
        self.occupied = union(planes, range(14))

    def move(self, d):
        v = MOVES[d]
        return v if self.sign > 0 else neg(v)

    def steppers(self, d, exclude=()):
        return union(self.planes, [p for p in STEPPERS[d] if p not in exclude])

    def sliders(self, d):
        return union(self.planes, SLIDERS[d])

    def attacks(self, empty):
        """Every square this side attacks, blockers ``~empty``: [9, 9, W]."""
        out = jnp.zeros_like(self.occupied)
        for d in range(10):
            out = out | shift(self.steppers(d), self.move(d))
            if SLIDERS[d]:
                out = out | ray(self.sliders(d), self.move(d), empty)
        return out


# Packing between per-position arrays and bit-sliced words. ---------------------------


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


CPU_BLOCK = 256  # positions per pass on a CPU: a plane of 8 words keeps the working set in cache


def in_blocks(fn, args, batch: int):
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


def batched(fn):
    """One position in, one out; under ``vmap`` the batch is handled by ``fn`` at once."""

    @jax.custom_batching.custom_vmap
    def single(*args):
        out = fn(*[a[None] for a in args])
        return jax.tree.map(lambda o: o[0], out)

    @single.def_vmap
    def rule(axis_size, in_batched, *args):
        args = [a if is_batched else jnp.broadcast_to(a, (axis_size,) + a.shape)
                for a, is_batched in zip(args, in_batched)]
        out = in_blocks(fn, args, axis_size)
        return out, jax.tree.map(lambda _: True, out)

    return single
