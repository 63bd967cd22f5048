"""What the mate-in-one check costs per root, in env steps, at B = 256 and 1024.

    python bench/mate_bench.py [--batch-sizes 256,1024] [--plies 60] [--repeats 5] [--quick]

Positions: B games from the standard start after ``--plies`` uniformly random legal
plies (games that ended stay at their end), so roots have a realistic mix of checks.
Timed after compiling, the median of ``--repeats`` calls: ``envs.mate.mate_in_one`` on
the batch, and one ``envs.env.step`` (with its legal mask) on the same batch. Self-play
with ``search.mate_in_one`` pays the check once per root, against n + 1 network calls and
about n env steps of the search. ``--quick`` (B = 8, 4 plies, one repeat) is a smoke
test (tests/test_bench.py).
"""

import argparse
import sys

import jax
import jax.numpy as jnp

from env_bench import _random_action  # bench/, beside this file
from timing import compile_and_time
from envs import env, mate, starts


def positions(batch: int, plies: int, rules: env.Rules):
    start = jax.vmap(starts.make_start_fn("standard", rules), in_axes=(0, None))
    games = start(jax.random.split(jax.random.key(0), batch), jnp.float32(0.0))

    @jax.jit
    def play(games, key):
        def body(games, key):
            actions = jax.vmap(_random_action)(jax.random.split(key, batch), games.legal_action_mask)
            return jax.vmap(lambda s, a: env.step(s, a, rules))(games, actions), None

        return jax.lax.scan(body, games, jax.random.split(key, plies))[0]

    return play(games, jax.random.key(1))


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="256,1024")
    parser.add_argument("--plies", type=int, default=60)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--quick", action="store_true", help="tiny sizes: --batch-sizes 8 --plies 4 --repeats 1")
    args = parser.parse_args(argv)
    if args.quick:
        args.batch_sizes, args.plies, args.repeats = "8", 4, 1
    try:
        batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    except ValueError:
        parser.error(f"--batch-sizes {args.batch_sizes!r}: expected integers separated by commas")
    rules = env.Rules()
    step = jax.jit(jax.vmap(lambda s, a: env.step(s, a, rules)))
    find = jax.jit(mate.mate_in_one)
    for batch in batch_sizes:
        games = positions(batch, args.plies, rules)
        actions = jax.vmap(_random_action)(jax.random.split(jax.random.key(2), batch), games.legal_action_mask)
        step_s = compile_and_time(step, (games, actions), args.repeats).seconds
        mate_s = compile_and_time(find, (games,), args.repeats).seconds
        found = int(find(games)[0].sum())
        print(f"batch {batch:5d}: env step {step_s / batch * 1e6:7.2f} us/root, mate in one "
              f"{mate_s / batch * 1e6:7.2f} us/root = {mate_s / step_s:.2f} env steps "
              f"({found} of {batch} roots have a mate in one)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
