"""Perft: leaf counts of the legal-move tree, with the vectorized move generator.

    python -m envs.perft --depth 4 [--sfen SFEN]

Breadth first: every position of one depth is expanded in fixed-size batches by
``jit(vmap(movegen.play))``; the last depth is counted from the legal masks.
From the standard start: 30, 900, 25470, 719731, 19861490.
"""

import argparse
import functools
import sys
import time

import jax
import jax.numpy as jnp
import numpy as np

from envs import movegen, notation

CHUNK = 2048  # positions per compiled call; the last chunk is padded


@functools.lru_cache(maxsize=None)
def _play_batch():
    return jax.jit(jax.vmap(movegen.play))


def perft(sfen: str = notation.STARTPOS_SFEN, depth: int = 3) -> list[int]:
    """Leaf counts for depths 1..depth."""
    return list(perft_levels(sfen, depth))


def perft_levels(sfen: str, depth: int):
    """Yields the leaf count of each depth 1..depth as soon as it is known."""
    state = notation.from_sfen(sfen)
    level = jax.tree.map(lambda a: np.asarray(a)[None], state.x)  # batch of one, on the host
    for d in range(1, depth + 1):
        masks = level.legal_action_mask
        yield int(masks.sum())
        if d == depth:
            break
        parents, actions = np.nonzero(masks)
        children = []
        for begin in range(0, len(actions), CHUNK):
            idx = parents[begin:begin + CHUNK]
            act = actions[begin:begin + CHUNK]
            n = len(idx)
            pad = CHUNK - n
            idx, act = np.pad(idx, (0, pad)), np.pad(act, (0, pad))
            batch = jax.tree.map(lambda a: jnp.asarray(a[idx]), level)
            out = _play_batch()(batch, jnp.asarray(act, jnp.int32))
            children.append(jax.tree.map(lambda a: np.asarray(a)[:n], out))
        level = jax.tree.map(lambda *parts: np.concatenate(parts), *children)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=3, help="deepest level to count (>= 1)")
    parser.add_argument("--sfen", default=notation.STARTPOS_SFEN, help="root position (default: the usual start)")
    args = parser.parse_args(argv)
    if args.depth < 1:
        parser.error(f"--depth must be >= 1, got {args.depth}")
    try:
        notation.parse_sfen(args.sfen)
    except ValueError as e:
        parser.error(str(e))
    start = time.time()
    for d, n in enumerate(perft_levels(args.sfen, args.depth), 1):
        print(f"perft({d}) = {n}  [{time.time() - start:.1f} s]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
