"""Environment throughput: pgx's shogi against our dense core, and the cost of resets.

    python bench/env_bench.py [--batch-sizes 64,256,1024] [--repeats 3] [--steps 16] [--quick]

On whatever backend JAX picks, for each batch size, timed alternately (median of
``--repeats``) after everything is compiled:
  * step: pgx's ``env.step`` (board update, legal mask, observation) against ours,
    ``envs.env.step`` with ``Rules()`` (repetition, perpetual check, declaration,
    max length) plus ``env.observe``; both play uniformly random legal moves from the
    standard start in one jitted ``lax.scan`` of ``--steps`` plies.
    Target: ours >= 20x pgx per state at batch >= 256.
  * mask: the legal-action mask alone, pgx's ``_legal_action_mask`` against
    ``envs.dense``, on positions after 24 random plies. Target: >= 50x at batch >= 256.
  * compile: seconds to compile each batched step, and the gather / scatter ops in
    its optimized HLO (ours: target 0).
  * reset: one batched reset (``make_start_fn``) per start scheme, in our steps.
Then perft(5) from the standard start with the dense core, compiled first
(target < 30 s, exact count). Exits with status 1 when a target is missed.
"""

import argparse
import csv
import os
import re
import statistics
import sys
import tempfile
import time

import jax
import jax.numpy as jnp
import pgx
from pgx._src.games import shogi as pgx_shogi

from envs import env, movegen, notation, perft, starts

OPENINGS = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "data", "openings.tsv")
STEP_TARGET = 20.0  # ours / pgx, steps per second, at batch >= TARGET_BATCH
MASK_TARGET = 50.0  # ours / pgx, masks per second, at batch >= TARGET_BATCH
TARGET_BATCH = 256
PERFT_TARGET_S = 30.0
PERFT5 = 19861490
RESET_TARGET = 1.0  # reset / step, for every scheme but random_start(n)


def _random_action(key, mask):
    """A random legal action: the legal one with the highest hashed priority.

    ``jax.random.categorical`` over 2187 logits (or a cumsum) costs more than our
    whole step on a CPU; a multiply-xorshift hash of (action, key) is enough here.
    """
    seed = jax.random.bits(key, (), jnp.uint32)
    h = (jnp.arange(mask.shape[-1], dtype=jnp.uint32) ^ seed) * jnp.uint32(0x9E3779B1)
    h = (h ^ (h >> 15)) * jnp.uint32(0x85EBCA77)
    h = h ^ (h >> 13)
    return jnp.argmax(jnp.where(mask, h, 0)).astype(jnp.int32)


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


def our_step(rules: env.Rules):
    """Our step as pgx's: the next position and its observation."""

    def step(state, action):
        state = env.step(state, action, rules)
        return state, env.observe(state, rules)

    return jax.vmap(step)


def make_our_run(steps: int, rules: env.Rules):
    step = our_step(rules)

    @jax.jit
    def run(state, key):
        def body(carry, key):
            state, obs = carry
            keys = jax.random.split(key, state.legal_action_mask.shape[0])
            actions = jax.vmap(_random_action)(keys, state.legal_action_mask)
            state, observation = step(state, actions)
            return (state, obs ^ observation.any(axis=(1, 2, 3))), None

        obs = jnp.zeros(state.legal_action_mask.shape[:1], jnp.bool_)
        return jax.lax.scan(body, (state, obs), jax.random.split(key, steps))[0]

    return run


def compiled_step_stats(fn, *args) -> tuple[float, int, int]:
    """(compile seconds, gather ops, scatter ops) of ``jit(fn)`` on these arguments."""
    start = time.perf_counter()
    hlo = jax.jit(fn).lower(*args).compile().as_text()
    seconds = time.perf_counter() - start
    return seconds, len(re.findall(r"\bgather\(", hlo)), len(re.findall(r"\bscatter\(", hlo))


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


def _verdict(ratio: float, target: float, batch: int, what: str, failures: list) -> str:
    if batch < TARGET_BATCH:
        return f"[info: target applies at batch >= {TARGET_BATCH}]"
    if ratio >= target:
        return f"[PASS: >= {target:g}x]"
    failures.append(f"batch {batch}: {what} {ratio:.1f}x < {target:g}x")
    return f"[FAIL: >= {target:g}x]"


def bench(batch_sizes, repeats: int, steps: int, book: str) -> list[str]:
    rules = env.Rules()
    pgx_env = pgx.make("shogi")
    pgx_init, pgx_run = make_pgx_run(steps)
    our_run = make_our_run(steps, rules)
    pgx_mask = jax.jit(jax.vmap(pgx_shogi._legal_action_mask))
    our_mask = jax.jit(jax.vmap(movegen.legal_action_mask))
    scramble = make_our_run(24, rules)
    schemes = ["standard", "random_start(2)", "shogi816k", f"book({book})"]
    resets = {spec: make_reset_run(spec, rules, steps) for spec in schemes}
    failures = []
    print(f"backend {jax.default_backend()} ({jax.devices()[0].device_kind}); {steps} plies per timed step call, "
          f"median of {repeats}", flush=True)
    for batch in batch_sizes:
        key = jax.random.key(batch)
        pgx_state = pgx_init(jax.random.split(key, batch))
        our_state = jax.tree.map(
            lambda a: jnp.broadcast_to(a, (batch, *a.shape)), notation.from_sfen(notation.STARTPOS_SFEN, rules)
        )
        actions = jnp.zeros((batch,), jnp.int32) + 2 * 81 + 60  # any legal-looking action, for lowering
        pgx_compile, pgx_gathers, pgx_scatters = compiled_step_stats(jax.vmap(pgx_env.step), pgx_state, actions)
        our_compile, our_gathers, our_scatters = compiled_step_stats(our_step(rules), our_state, actions)
        positions = scramble(our_state, key)[0].x  # mid-game positions for the mask alone
        for fn, args in [(pgx_run, (pgx_state, key)), (our_run, (our_state, key)), (pgx_mask, (positions,)),
                         (our_mask, (positions,))] + [(run, (our_state, key)) for run in resets.values()]:
            _timed(fn, *args)  # compile
        times = {name: [] for name in ("pgx", "ours", "pgx mask", "our mask", *schemes)}
        for r in range(repeats):  # interleaved, so load changes hit both alike
            k = jax.random.fold_in(key, r)
            times["pgx"].append(_timed(pgx_run, pgx_state, k))
            times["ours"].append(_timed(our_run, our_state, k))
            times["pgx mask"].append(_timed(pgx_mask, positions))
            times["our mask"].append(_timed(our_mask, positions))
            for spec, run in resets.items():
                times[spec].append(_timed(run, our_state, k))
        median = {name: statistics.median(t) for name, t in times.items()}
        pgx_sps, our_sps = batch * steps / median["pgx"], batch * steps / median["ours"]
        pgx_mps, our_mps = batch / median["pgx mask"], batch / median["our mask"]
        step_ratio, mask_ratio = our_sps / pgx_sps, our_mps / pgx_mps
        print(f"\nbatch {batch}")
        print(f"  step  pgx  {pgx_sps:9.0f} /s  {1e6 / pgx_sps:7.1f} us/state")
        print(f"  step  ours {our_sps:9.0f} /s  {1e6 / our_sps:7.1f} us/state   ours/pgx = {step_ratio:.1f}x  "
              + _verdict(step_ratio, STEP_TARGET, batch, "step", failures))
        print(f"  mask  pgx  {pgx_mps:9.0f} /s  {1e6 / pgx_mps:7.1f} us/state")
        print(f"  mask  ours {our_mps:9.0f} /s  {1e6 / our_mps:7.1f} us/state   ours/pgx = {mask_ratio:.1f}x  "
              + _verdict(mask_ratio, MASK_TARGET, batch, "mask", failures))
        print(f"  compile pgx  {pgx_compile:5.1f} s, {pgx_gathers} gathers, {pgx_scatters} scatters")
        verdict = "PASS" if our_gathers + our_scatters == 0 else "FAIL"
        print(f"  compile ours {our_compile:5.1f} s, {our_gathers} gathers, {our_scatters} scatters  [{verdict}: 0]")
        if verdict == "FAIL":
            failures.append(f"batch {batch}: our step has {our_gathers} gathers and {our_scatters} scatters")
        for spec in schemes:
            cost = median[spec] / median["ours"]
            name = "book(openings)" if spec.startswith("book(") else spec
            if spec.startswith("random_start("):
                print(f"  reset {name:16s} {cost:5.2f} steps  [info: plays {spec[13:-1]} plies]")
                continue
            verdict = "PASS" if cost < RESET_TARGET else "FAIL"
            print(f"  reset {name:16s} {cost:5.2f} steps  [{verdict}: < {RESET_TARGET} step]")
            if verdict == "FAIL":
                failures.append(f"batch {batch}: reset {name} costs {cost:.2f} steps")
    return failures


def bench_perft(depth: int) -> list[str]:
    """Times perft(depth) with the dense core, after a warm-up run compiles it."""
    list(perft.perft_levels(notation.STARTPOS_SFEN, min(depth, 2)))  # compiles both expanders
    start = time.perf_counter()
    counts = perft.perft(notation.STARTPOS_SFEN, depth)
    seconds = time.perf_counter() - start
    print(f"\nperft({depth}) = {counts[-1]} in {seconds:.1f} s", end="  ")
    if depth != 5:
        print("[info]")
        return []
    ok = counts[-1] == PERFT5 and seconds < PERFT_TARGET_S
    print(f"[{'PASS' if ok else 'FAIL'}: = {PERFT5} in < {PERFT_TARGET_S:g} s]")
    return [] if ok else [f"perft(5) = {counts[-1]} in {seconds:.1f} s"]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch-sizes", default="64,256,1024", help="comma-separated batch sizes")
    parser.add_argument("--repeats", type=int, default=3, help="timed repetitions per measurement (median)")
    parser.add_argument("--steps", type=int, default=16, help="plies (or resets) per timed call")
    parser.add_argument("--perft-depth", type=int, default=5, help="perft depth to time (0: skip)")
    parser.add_argument("--quick", action="store_true", help="smoke test: batch 64, 2 repeats, 2 plies, perft(3)")
    args = parser.parse_args(argv)
    try:
        batch_sizes = [int(b) for b in args.batch_sizes.split(",")]
    except ValueError:
        parser.error(f"--batch-sizes must be comma-separated integers, got {args.batch_sizes!r}")
    if args.quick:
        batch_sizes, args.repeats, args.steps, args.perft_depth = [64], 2, 2, 3
    if any(b < 1 for b in batch_sizes) or args.repeats < 1 or args.steps < 1:
        parser.error("batch sizes, --repeats and --steps must be >= 1")
    if args.perft_depth < 0:
        parser.error(f"--perft-depth must be >= 0, got {args.perft_depth}")
    with tempfile.TemporaryDirectory() as tmp:
        failures = bench(batch_sizes, args.repeats, args.steps, write_book(tmp))
    if args.perft_depth:
        failures += bench_perft(args.perft_depth)
    print("\n" + ("all targets met" if not failures else "targets missed:\n  " + "\n  ".join(failures)))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
