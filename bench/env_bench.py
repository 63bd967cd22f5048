"""Environment throughput: raw pgx shogi vs ours, and the cost of each start scheme.

    python bench/env_bench.py [--batch-sizes 64,256,1024] [--repeats 5] [--steps 8] [--quick]

On whatever backend JAX picks, for each batch size:
  * steps/s of raw pgx (``pgx.make("shogi")``) and of ``envs.env.step`` with ``Rules()``
    (repetition tracking on), both playing uniformly random legal moves from the
    standard start inside one jitted ``lax.scan`` of ``--steps`` plies;
  * the cost of one batched reset (``make_start_fn``) per scheme, relative to one of
    our batched steps.
Everything is compiled first; pgx and ours are timed alternately, and each number is
the median over ``--repeats``. Targets (PASS/FAIL): ours >= 0.9x raw pgx per step;
every reset other than random_start(n) < 1 step.

pgx's step also computes the 119-plane observation, ours does not: "ours+observe"
(info only) adds it for a like-for-like comparison. The standard start is a constant,
so XLA folds its reset (legal mask included) at compile time: it costs ~0 steps.
"""

import argparse
import csv
import functools
import os
import statistics
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import pgx

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from envs import env, notation, starts  # noqa: E402

OPENINGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "openings.tsv")
STEP_TARGET = 0.9  # ours / pgx, steps per second
RESET_TARGET = 1.0  # reset / step, for every scheme but random_start(n)


def _random_action(key, mask):
    return jax.random.categorical(key, jnp.where(mask, 0.0, -jnp.inf)).astype(jnp.int32)


def make_pgx_run(steps: int):
    pgx_env = pgx.make("shogi")

    @jax.jit
    def run(state, key):
        def body(state, key):
            keys = jax.random.split(key, state.legal_action_mask.shape[0])
            actions = jax.vmap(_random_action)(keys, state.legal_action_mask)
            return jax.vmap(pgx_env.step)(state, actions), None

        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    init = jax.jit(jax.vmap(pgx_env.init))
    return init, run


def make_our_run(steps: int, rules: env.Rules, observe: bool = False):
    """Our batched step; with ``observe`` also the observation, as pgx's step computes it."""
    step = functools.partial(env.step, rules_=rules)

    @jax.jit
    def run(state, key):
        def body(carry, key):
            state, obs = carry
            keys = jax.random.split(key, state.legal_action_mask.shape[0])
            actions = jax.vmap(_random_action)(keys, state.legal_action_mask)
            state = jax.vmap(step)(state, actions)
            if observe:
                obs = obs ^ jax.vmap(env.observe)(state).any(axis=(1, 2, 3))
            return (state, obs), None

        obs = jnp.zeros(state.legal_action_mask.shape[:1], jnp.bool_)
        return jax.lax.scan(body, (state, obs), jax.random.split(key, steps))[0]

    return run


def make_reset_run(spec: str, rules: env.Rules, steps: int):
    """``steps`` batched resets in one scan (each depends on the last, so none is skipped)."""
    start = jax.vmap(starts.make_start_fn(spec, rules), in_axes=(0, None))

    @jax.jit
    def run(state, key):
        def body(state, key):
            key = jax.random.fold_in(key, state.x.step_count[0] + state.x.board[0, 0])
            return start(jax.random.split(key, state.x.board.shape[0]), jnp.float32(0.5)), None

        return jax.lax.scan(body, state, jax.random.split(key, steps))[0]

    return run


def _timed(fn, *args) -> float:
    t = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - t


def write_book(directory: str) -> str:
    """The openings' final SFENs as a book file."""
    path = os.path.join(directory, "openings.sfen")
    with open(OPENINGS, encoding="utf-8", newline="") as f, open(path, "w", encoding="utf-8") as out:
        for row in csv.DictReader(f, delimiter="\t"):
            out.write(row["final_sfen"] + "\n")
    return path


def bench(batch_sizes, repeats: int, steps: int, book: str) -> list[str]:
    rules = env.Rules()
    pgx_init, pgx_run = make_pgx_run(steps)
    our_run = make_our_run(steps, rules)
    our_obs_run = make_our_run(steps, rules, observe=True)
    schemes = ["standard", "random_start(2)", "shogi816k", f"book({book})"]
    resets = {spec: make_reset_run(spec, rules, steps) for spec in schemes}
    failures = []
    print(f"backend {jax.default_backend()} ({jax.devices()[0].device_kind}); {steps} plies per timed call, "
          f"median of {repeats}", flush=True)
    for batch in batch_sizes:
        key = jax.random.key(batch)
        pgx_state = pgx_init(jax.random.split(key, batch))
        our_state = jax.tree.map(
            lambda a: jnp.broadcast_to(a, (batch, *a.shape)), notation.from_sfen(notation.STARTPOS_SFEN, rules)
        )
        compile_s = _timed(pgx_run, pgx_state, key) + _timed(our_run, our_state, key)
        compile_s += _timed(our_obs_run, our_state, key)
        for run in resets.values():
            compile_s += _timed(run, our_state, key)
        pgx_times, our_times, our_obs_times = [], [], []
        reset_times = {spec: [] for spec in schemes}
        for r in range(repeats):  # interleaved, so load changes hit both alike
            k = jax.random.fold_in(key, r)
            pgx_times.append(_timed(pgx_run, pgx_state, k))
            our_times.append(_timed(our_run, our_state, k))
            our_obs_times.append(_timed(our_obs_run, our_state, k))
            for spec, run in resets.items():
                reset_times[spec].append(_timed(run, our_state, k))
        pgx_sps = batch * steps / statistics.median(pgx_times)
        our_sps = batch * steps / statistics.median(our_times)
        ratio = our_sps / pgx_sps
        verdict = "PASS" if ratio >= STEP_TARGET else "FAIL"
        print(f"\nbatch {batch} (compile {compile_s:.1f} s)")
        print(f"  {'pgx':12s} {pgx_sps:8.0f} steps/s")
        print(f"  {'ours':12s} {our_sps:8.0f} steps/s   ours/pgx = {ratio:.2f}x  [{verdict}: >= {STEP_TARGET}x]")
        if verdict == "FAIL":
            failures.append(f"batch {batch}: ours/pgx {ratio:.2f}x < {STEP_TARGET}x")
        obs_sps = batch * steps / statistics.median(our_obs_times)
        print(f"  {'ours+observe':12s} {obs_sps:8.0f} steps/s   ours+observe/pgx = {obs_sps / pgx_sps:.2f}x"
              "  [info: pgx's step computes the observation too]")
        our_step_s = statistics.median(our_times)
        for spec in schemes:
            cost = statistics.median(reset_times[spec]) / our_step_s
            name = "book(openings)" if spec.startswith("book(") else spec
            if spec.startswith("random_start("):
                print(f"  reset {name:16s} {cost:5.2f} steps  [info: plays {spec[13:-1]} plies]")
                continue
            verdict = "PASS" if cost < RESET_TARGET else "FAIL"
            print(f"  reset {name:16s} {cost:5.2f} steps  [{verdict}: < {RESET_TARGET} step]")
            if verdict == "FAIL":
                failures.append(f"batch {batch}: reset {name} costs {cost:.2f} steps")
    return failures


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="64,256,1024", help="comma-separated batch sizes")
    parser.add_argument("--repeats", type=int, default=5, help="timed repetitions per measurement (median)")
    parser.add_argument("--steps", type=int, default=8, help="plies (or resets) per timed call")
    parser.add_argument("--quick", action="store_true", help="smoke test: batch 64, 3 repeats, 2 plies")
    args = parser.parse_args(argv)
    try:
        batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    except ValueError:
        parser.error(f"--batch-sizes must be comma-separated integers, got {args.batch_sizes!r}")
    if args.quick:
        batch_sizes, args.repeats, args.steps = [64], 3, 2
    if any(b < 1 for b in batch_sizes) or args.repeats < 1 or args.steps < 1:
        parser.error("batch sizes, --repeats and --steps must be >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        failures = bench(batch_sizes, args.repeats, args.steps, write_book(tmp))
    print("\n" + ("all targets met" if not failures else "targets missed:\n  " + "\n  ".join(failures)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
