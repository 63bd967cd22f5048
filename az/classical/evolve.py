"""The genetic algorithm that evolves the classical evaluation's weights, on the device.

A genome is a Gray-coded bit string: ``config.major_bits`` bits for each of the 26 major
weights (unsigned, 0 .. 2^bits - 1) and ``config.minor_bits`` for each of the 50 minor ones
(signed, -2^(bits-1) .. 2^(bits-1) - 1, so the GA picks their sign). Fitness is the
squared number of fitting positions where the one-ply choice of ``h(child, w)`` is the
teacher's move (ties shared: a move tied with k others counts 1/k, as if the tie were
broken at random). Roulette-wheel selection on that fitness, single-point crossover with
probability ``crossover_rate`` per pair, bit-flip mutation with ``mutation_rate`` per bit,
the best ``elitism`` genomes kept unchanged.

Every child of every fitting position is evaluated once into a ``ChildTable`` (features
do not depend on the weights), so a generation is one matrix product [C, F] x [F, I]
(F = ``features.NUM_FEATURES``)
and segment reductions over positions: one compiled call for the whole population.
"""

from typing import NamedTuple

import jax
import jax.numpy as jnp
import numpy as np
from jax import Array

from az.classical import features as feats

MATE_SCORE = 1e9  # a child that mates outranks any evaluation


class ChildTable(NamedTuple):
    """Every legal child of a set of positions.

    features [C, F] float32 of the child from the parent mover's side; parent [C] int32
    (sorted); action [C] int32; mate [C] bool (the child's mover has no legal move);
    material [C] float32 (``greedy``'s count); teacher [P] int32 index into C of the
    teacher's move (-1 when the position has none); legal [P] int32 children per position.
    """

    features: Array
    parent: Array
    action: Array
    mate: Array
    material: Array
    teacher: Array
    legal: Array


def build_children(board: np.ndarray, hand: np.ndarray, legal_mask: np.ndarray, teacher_action: np.ndarray | None = None,
                   *, progress=None) -> ChildTable:
    """Every legal child of positions board [P, 81], hand [P, 2, 7], legal mask [P, 2187],
    the teacher's action [P] (or None): a ``ChildTable`` in host memory.

    Children go through ``features.expand`` (one compiled function in fixed blocks), so
    any number of positions costs one compile.
    """
    parent, action = np.nonzero(np.asarray(legal_mask))
    parent, action = parent.astype(np.int32), action.astype(np.int32)
    board, hand = np.asarray(board), np.asarray(hand)
    f, mate, material, _, _ = feats.expand(board[parent], hand[parent], action, progress=progress)
    legal = np.bincount(parent, minlength=len(board)).astype(np.int32)
    teacher = np.full(len(board), -1, np.int32)
    if teacher_action is not None:
        first = np.concatenate([[0], np.cumsum(legal)[:-1]])
        for p in range(len(board)):
            hits = np.nonzero(action[first[p]:first[p] + legal[p]] == teacher_action[p])[0]
            teacher[p] = first[p] + hits[0] if len(hits) else -1
    return ChildTable(f, parent, action, mate, material, teacher, legal)


# Genomes. ---------------------------------------------------------------------------


# The genome holds the major weights' genes first, then the minor ones, each in feature order.
_GENE_ORDER = np.array(list(feats.MAJOR) + [i for i in range(feats.NUM_FEATURES) if i not in feats.MAJOR])


def genome_bits(major_bits: int, minor_bits: int) -> int:
    return feats.NUM_MAJOR * major_bits + (feats.NUM_FEATURES - feats.NUM_MAJOR) * minor_bits


def decode(genomes: Array, major_bits: int, minor_bits: int) -> Array:
    """Gray-coded genomes [I, bits] uint8 -> weights [I, F] float32."""

    def values(gray, width):  # [I, genes * width] -> [I, genes]
        gray = gray.reshape(gray.shape[0], -1, width).astype(jnp.int32)
        binary = jnp.cumsum(gray, axis=-1) % 2  # b_i = g_0 xor ... xor g_i
        powers = 2 ** jnp.arange(width - 1, -1, -1)
        return (binary * powers).sum(-1)

    split = feats.NUM_MAJOR * major_bits
    major = values(genomes[:, :split], major_bits)
    minor = values(genomes[:, split:], minor_bits) - 2 ** (minor_bits - 1)
    genes = jnp.concatenate([major, minor], axis=1).astype(jnp.float32)
    return genes[:, np.argsort(_GENE_ORDER)]  # back to feature order


def encode(weights: np.ndarray, major_bits: int, minor_bits: int) -> np.ndarray:
    """The inverse of ``decode`` for integer weights in range: [I, F] -> [I, bits] uint8."""
    weights = np.asarray(weights, np.int64)
    rows = []
    for w in weights:
        bits = []
        for i in _GENE_ORDER:
            major = i in feats.MAJOR
            width = major_bits if major else minor_bits
            value = w[i] if major else w[i] + 2 ** (minor_bits - 1)
            if not 0 <= value < 2 ** width:
                raise ValueError(f"weight {feats.NAMES[i]}={w[i]} does not fit {width} bits")
            gray = value ^ (value >> 1)
            bits += [(gray >> (width - 1 - k)) & 1 for k in range(width)]
        rows.append(bits)
    return np.array(rows, np.uint8)


# Agreement and fitness. ---------------------------------------------------------------


class Bucket(NamedTuple):
    """Positions with up to M children each, padded to M: the dense form the device
    scores (reductions over a fixed axis instead of scatters over segments).

    rows [n] int32 (the positions' indices in the table), features [n, M, F] float32,
    material [n, M] float32, mate [n, M] bool, valid [n, M] bool, teacher [n] int32 (the
    teacher's child in 0..M-1, -1 when missing).
    """

    rows: Array
    features: Array
    material: Array
    mate: Array
    valid: Array
    teacher: Array


BUCKET_SIZES = (32, 64, 96, 128, 192, 256)  # then multiples of 128: padding stays under ~1.5x


def bucketize(table: ChildTable) -> list[Bucket]:
    """The table's positions grouped by their number of children (host arrays)."""
    first = np.concatenate([[0], np.cumsum(table.legal)[:-1]]).astype(np.int64)
    size_of = [next((b for b in BUCKET_SIZES if b >= n), -(-int(n) // 128) * 128) for n in table.legal]
    buckets = []
    for size in sorted(set(size_of)):
        rows = np.array([p for p, s in enumerate(size_of) if s == size], np.int32)
        slot = np.arange(size)
        index = first[rows][:, None] + slot[None]  # [n, M]
        valid = slot[None] < table.legal[rows][:, None]
        index = np.where(valid, index, first[rows][:, None])
        teacher = np.where(table.teacher[rows] >= 0, table.teacher[rows] - first[rows], -1).astype(np.int32)
        buckets.append(Bucket(rows, table.features[index], table.material[index], table.mate[index] & valid, valid,
                              teacher))
    return buckets


def _max_and_ties(scores: Array) -> tuple[Array, Array]:
    """The maximum over the last axis and how many entries equal it, in one pass."""

    def combine(a, b):
        (va, ca), (vb, cb) = a, b
        return jnp.maximum(va, vb), jnp.where(va == vb, ca + cb, jnp.where(va > vb, ca, cb))

    return jax.lax.reduce((scores, jnp.ones_like(scores)), (-jnp.inf, 0.0), combine, (scores.ndim - 1,))


def _bucket_agreement(bucket: Bucket, scores: Array, teacher_scores: Array) -> Array:
    """scores [n, I, M] of every child, teacher_scores [n, I] of the teacher's child ->
    [n, I]: the chance that the best child (ties broken at random) is the teacher's.
    Children on the minor axis, so the one reduction runs along memory."""
    mate = bucket.mate[:, None, :]
    scores = jnp.where(mate, MATE_SCORE, jnp.where(bucket.valid[:, None, :], scores, -jnp.inf))
    best, ties = _max_and_ties(scores)
    teacher = jnp.maximum(bucket.teacher, 0)
    teacher_mates = jnp.take_along_axis(bucket.mate, teacher[:, None], axis=1)  # [n, 1]
    teacher_scores = jnp.where(teacher_mates, MATE_SCORE, teacher_scores)
    hit = (teacher_scores >= best) & (bucket.teacher >= 0)[:, None]
    return hit / jnp.maximum(ties, 1.0)


def agreement(buckets: list[Bucket], weights: Array) -> Array:
    """Per position (table order) and weight vector [I, F]: [P, I]."""
    total = sum(b.rows.shape[0] for b in buckets)
    out = jnp.zeros((total, weights.shape[0]), jnp.float32)
    for b in buckets:
        scores = jnp.einsum("if,nmf->nim", weights, b.features)
        teacher = jnp.take_along_axis(b.features, jnp.maximum(b.teacher, 0)[:, None, None], axis=1)[:, 0]  # [n, F]
        out = out.at[b.rows].set(_bucket_agreement(b, scores, teacher @ weights.T))
    return out


def greedy_agreement(buckets: list[Bucket]) -> Array:
    """``greedy``'s agreement (material after the move, mates first): [P]."""
    total = sum(b.rows.shape[0] for b in buckets)
    out = jnp.zeros((total,), jnp.float32)
    for b in buckets:
        teacher = jnp.take_along_axis(b.material, jnp.maximum(b.teacher, 0)[:, None], axis=1)  # [n, 1]
        out = out.at[b.rows].set(_bucket_agreement(b, b.material[:, None, :], teacher)[:, 0])
    return out


# One generation. -----------------------------------------------------------------------


class Population(NamedTuple):
    genomes: Array  # [I, bits] uint8
    key: Array  # PRNG key
    generation: Array  # [] int32


def init_population(key: Array, size: int, bits: int) -> Population:
    key, sub = jax.random.split(key)
    genomes = jax.random.bernoulli(sub, 0.5, (size, bits)).astype(jnp.uint8)
    return Population(genomes, key, jnp.int32(0))


def make_generation(table: ChildTable, config):
    """The compiled step: (population) -> (next population, fitness [I] of the evaluated
    one: agreeing positions, fractional with ties, and its best genome's weights [F])."""
    major, minor = config.major_bits, config.minor_bits
    elitism, crossover_rate, mutation_rate = config.elitism, config.crossover_rate, config.mutation_rate
    buckets = [Bucket(*(jnp.asarray(x) for x in b)) for b in bucketize(table)]

    @jax.jit
    def generation(pop: Population):
        size, bits = pop.genomes.shape
        weights = decode(pop.genomes, major, minor)
        agree = agreement(buckets, weights).sum(0)  # [I]
        fitness = agree ** 2
        order = jnp.argsort(-agree)
        key, k_select, k_point, k_cross, k_mutate = jax.random.split(pop.key, 5)
        children = size - elitism
        pairs = -(-children // 2)
        p = fitness / jnp.maximum(fitness.sum(), 1e-9)
        p = jnp.where(fitness.sum() > 0, p, jnp.full_like(p, 1.0 / size))
        parents = jax.random.choice(k_select, size, (pairs, 2), p=p)
        a, b = pop.genomes[parents[:, 0]], pop.genomes[parents[:, 1]]
        point = jax.random.randint(k_point, (pairs, 1), 1, bits)
        crossed = jax.random.bernoulli(k_cross, crossover_rate, (pairs, 1))
        head = (jnp.arange(bits)[None] < point) | ~crossed
        offspring = jnp.concatenate([jnp.where(head, a, b), jnp.where(head, b, a)])[:children]
        flips = jax.random.bernoulli(k_mutate, mutation_rate, offspring.shape).astype(jnp.uint8)
        genomes = jnp.concatenate([pop.genomes[order[:elitism]], offspring ^ flips])
        return Population(genomes, key, pop.generation + 1), agree, weights[order[0]]

    return generation


@jax.jit
def _agreement_of(buckets, weights):
    return agreement(buckets, weights)


def agreement_of(table: ChildTable, weights) -> np.ndarray:
    """Per-position agreement [P, I] of weight vectors [I, F] on a table."""
    return np.asarray(_agreement_of(bucketize(table), jnp.asarray(weights, jnp.float32)))


_greedy_agreement_jit = jax.jit(greedy_agreement)  # one trace per table shape, not per call


def greedy_agreement_of(table: ChildTable) -> np.ndarray:
    """``greedy``'s per-position agreement [P] on a table."""
    return np.asarray(_greedy_agreement_jit(bucketize(table)))
