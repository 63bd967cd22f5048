"""Perft: leaf counts of the legal-move tree, with the vectorized move generator.

    python -m envs.perft --depth 4 [--sfen SFEN]

Breadth first: every position of one depth is expanded in fixed-size batches by
``jit(vmap(movegen.play))``; the last depth is counted from the legal masks, on the
device, so perft(5) never holds its 719,731 depth-4 positions on the host.
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

CHUNK = 8192  # positions per compiled call; the last chunk is padded
_FIELDS = ("board", "hand", "color", "step_count")  # all that playing a move reads


@functools.lru_cache(maxsize=None)
def _expand(core: str, count_only: bool):
    """jit(vmap(play)) over a chunk; with ``count_only`` just the children's move counts."""

    def play(board, hand, color, step_count, action):
        x = movegen.GameState(board=board, hand=hand, color=color, step_count=step_count)
        return movegen.play(x, action, core)

    def expand(fields, actions, valid):
        children = jax.vmap(play)(*fields, actions)
        if count_only:
            return (children.legal_action_mask.sum(axis=1) * valid).sum()
        return children

    return jax.jit(expand)


def perft(sfen: str = notation.STARTPOS_SFEN, depth: int = 3, core: str = "dense") -> list[int]:
    """Leaf counts for depths 1..depth."""
    return list(perft_levels(sfen, depth, core))


def perft_levels(sfen: str, depth: int, core: str = "dense"):
    """Yields the leaf count of each depth 1..depth as soon as it is known.

    Levels up to depth - 2 are kept on the host; the last two are never stored:
    the children of level depth - 2 are played in chunks and only their legal moves
    counted, on the device.
    """
    state = notation.from_sfen(sfen)
    level = jax.tree.map(lambda a: np.asarray(a)[None], state.x)  # batch of one, on the host
    masks = level.legal_action_mask
    yield int(masks.sum())
    for d in range(2, depth + 1):
        parents, actions = np.nonzero(masks)
        last = d == depth
        count, children = 0, []
        for begin in range(0, len(actions), CHUNK):
            idx = parents[begin:begin + CHUNK]
            act = actions[begin:begin + CHUNK]
            n = len(idx)
            idx, act = np.pad(idx, (0, CHUNK - n)), np.pad(act, (0, CHUNK - n))
            batch = [jnp.asarray(getattr(level, f)[idx]) for f in _FIELDS]
            valid = jnp.arange(CHUNK) < n
            if last:
                count += int(_expand(core, True)(batch, jnp.asarray(act, jnp.int32), valid))
            else:
                out = _expand(core, False)(batch, jnp.asarray(act, jnp.int32), valid)
                children.append(jax.tree.map(lambda a: np.asarray(a)[:n], out))
        if last:
            yield count
            break
        level = jax.tree.map(lambda *parts: np.concatenate(parts), *children)
        masks = level.legal_action_mask
        yield int(masks.sum())


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--depth", type=int, default=3, help="deepest level to count (>= 1)")
    parser.add_argument("--sfen", default=notation.STARTPOS_SFEN, help="root position (default: the usual start)")
    parser.add_argument("--movegen", default="dense", choices=sorted(movegen.CORES), help="move generator (default: dense).")
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.depth < 1:
        parser.error(f"--depth must be >= 1, got {args.depth}")
    try:
        notation.parse_sfen(args.sfen)
    except ValueError as e:
        parser.error(str(e))
    start = time.time()
    for d, n in enumerate(perft_levels(args.sfen, args.depth, args.movegen), 1):
        print(f"perft({d}) = {n}  [{time.time() - start:.1f} s]", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
