"""Whole training iterations of a preset, with learning on and off, and where their time goes.

    python bench/train_bench.py [--config configs/shogi816k.py:cpu] [--config.FIELD=VALUE ...] [--repeats 3] [--quick]

Builds the preset's trainer (any ``--config.FIELD=VALUE`` override as train.py takes
it) and times, after everything is compiled, the median of ``--repeats`` calls of:
  * the fused ``iteration`` with learning on (a replay whose positions all have value
    targets) and off (an empty replay, so the learner's ``cond`` skips): positions/s;
  * each piece alone, jitted separately on the same inputs: self-play (T plies), adding
    and labelling the replay, and one learner step (sample + gradient step), times K.
It prints fused / sum of the parts (target: at most 1.2: the fused loop costs no more
than its pieces) and exits with status 1 when that target is missed. ``--quick`` is a
smoke test (tests/test_bench.py): one repeat, the ``:smoke`` preset unless ``--config``
names one, and no target judged (at smoke sizes fixed costs decide the ratio).

It runs on the devices train.py would: one per CPU core (``az.cli.use_cpu_cores``);
``JAX_NUM_CPU_DEVICES=1`` times one CPU device.

``--fused-only`` times only the fused iteration, learning on (every replay row counted
as a position with a target: ``az.train.budget.learning_state``) beside learning off
(self-play alone: the learner's ``cond`` skips), and compiles nothing else; with
``--compilation-cache WORKDIR/jax_cache`` it reuses the iteration a training run of the
same preset compiled (bench/gpu_training.sh). ``--json PATH`` writes the figures.
"""

import argparse
import json
import os
import statistics
import sys
import time

from az import cli

if __name__ == "__main__":  # the devices train.py runs on, set before JAX is imported
    cli.use_cpu_cores()

import jax  # noqa: E402
import jax.numpy as jnp  # noqa: E402
from ml_collections import config_flags  # noqa: E402

from timing import median_seconds  # bench/, beside this file  # noqa: E402
from az import workdir as workdir_lib  # noqa: E402
from az.train import budget as budget_lib  # noqa: E402
from az.train import replay as replay_lib  # noqa: E402
from az.train import trainer as trainer_lib  # noqa: E402

TARGET = 1.2
CONFIG = os.path.join(os.path.dirname(os.path.dirname(os.path.abspath(__file__))), "configs", "shogi816k.py")



def _with_targets(replay: replay_lib.Replay, plies: replay_lib.Plies) -> replay_lib.Replay:
    """The replay filled with ``plies`` in every row, each position its own finished game:
    labelling gives every one a target, so the learner runs (shapes and costs as in a run)."""
    rows = replay.filled.shape[0] // plies.color.shape[0]
    for _ in range(rows):
        replay = replay_lib.add(replay, plies._replace(starts_game=plies.played, ends_game=plies.played))
    return replay


def _chained(trainer: trainer_lib.Trainer, state: trainer_lib.TrainState, *, learned: bool,
             repeats: int) -> tuple[float, float]:
    """(compile + first call, median call) of iterations chained as in a run (each
    donates its input to the next). With learning off, each call starts from the first
    state's replay again (copied outside the timing): self-play fills a replay, and after
    a few calls the learner would run."""
    empty = None if learned else jax.tree.map(jnp.copy, state.replay)
    start = time.perf_counter()
    state, metrics = jax.block_until_ready(trainer.iteration(state))
    first = time.perf_counter() - start
    times = []
    for _ in range(repeats):
        assert bool(metrics["learned"]) == learned
        if empty is not None:
            state = jax.block_until_ready(state._replace(replay=jax.tree.map(jnp.copy, empty)))
        start = time.perf_counter()
        state, metrics = jax.block_until_ready(trainer.iteration(state))
        times.append(time.perf_counter() - start)
    assert bool(metrics["learned"]) == learned
    return first, statistics.median(times)


def _parts(trainer: trainer_lib.Trainer, repeats: int) -> tuple[dict, trainer_lib.TrainState]:
    """Each piece of an iteration jitted and timed alone, and a state whose replay holds
    self-play's positions in every row, each with a target (for the fused timing)."""
    k = trainer.learner_steps_per_iteration
    state = trainer.init()
    key = jax.random.PRNGKey(1)
    selfplay = jax.jit(trainer.selfplay)
    games, resign, finished, plies, _ = selfplay(state.params, state.games, state.resign, key, state.games_finished)
    full = _with_targets(state.replay, plies)
    add_label = jax.jit(lambda replay, plies: trainer.relabel(replay_lib.add(replay, plies)))
    labelled = add_label(full, plies)
    assert int(labelled.value_known.sum()) > 0
    step = jax.jit(trainer.learner_step)
    progress = jnp.float32(0.1)

    def learn():
        return step(state.params, state.opt_state, jnp.int32(0), labelled, progress, key)

    jax.block_until_ready(learn())  # compiled and warm, as self-play and labelling are by now
    parts = {
        "self-play": median_seconds(lambda: selfplay(state.params, games, resign, key, finished), repeats + 1),
        "add + label": median_seconds(lambda: add_label(full, plies), repeats + 1),
        f"learner step x {k}": k * median_seconds(learn, repeats + 1),
    }
    return parts, jax.tree.map(jnp.copy, state._replace(replay=full))


def main(argv) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--quick", action="store_true", help="one repeat of :smoke, no target (a smoke test)")
    parser.add_argument("--fused-only", action="store_true",
                        help="only the fused iteration, learning on and off; compiles nothing else")
    parser.add_argument("--compilation-cache", help="JAX's persistent cache to use, e.g. a training run's jax_cache")
    parser.add_argument("--json", help="also write the figures to this file")
    args, rest = parser.parse_known_args(argv[1:])
    flags = config_flags.DEFINE_config_file("config", CONFIG + (":smoke" if args.quick else ":cpu"))
    from absl import flags as absl_flags

    absl_flags.FLAGS([argv[0], *rest])
    if args.compilation_cache and not workdir_lib.enable_compilation_cache(args.compilation_cache):
        print(f"error: --compilation-cache {args.compilation_cache}: cannot be written", file=sys.stderr)
        return 2
    config = flags.value
    repeats = 1 if args.quick else args.repeats
    trainer = trainer_lib.make_trainer(config, trainer_lib.make_mesh(config))
    k = trainer.learner_steps_per_iteration
    b, t = config.selfplay.num_games, config.selfplay.plies_per_iteration
    print(f"{config.name}: {b} games x {t} plies, n={config.search.num_simulations}, "
          f"{config.model.num_blocks}x{config.model.channels} {config.model.dtype}, K={k} learner steps of "
          f"{config.learner.batch_size}; {len(jax.devices())} {jax.default_backend()} device(s), median of {repeats}", flush=True)

    if args.fused_only:
        parts, learning = {}, budget_lib.learning_state(trainer)
    else:
        parts, learning = _parts(trainer, repeats)
    compile_s, learn_s = _chained(trainer, learning, learned=True, repeats=repeats)
    _, play_only_s = _chained(trainer, trainer.init(), learned=False, repeats=repeats)
    positions = b * t
    print(f"iteration compile {compile_s:.1f} s")
    print(f"iteration, learning on : {learn_s:7.2f} s  {positions / learn_s:8.1f} positions/s")
    print(f"iteration, learning off: {play_only_s:7.2f} s  {positions / play_only_s:8.1f} positions/s")
    print(f"learning's share of an iteration: {1 - play_only_s / learn_s:.0%}")
    if args.json:
        with open(args.json, "w", encoding="utf-8") as f:
            json.dump({"config": config.name, "device": jax.devices()[0].device_kind, "games": b, "plies": t,
                       "learner_steps": k, "batch_size": config.learner.batch_size, "compile_s": compile_s,
                       "learning_on_s": learn_s, "learning_off_s": play_only_s,
                       "learning_on_positions_per_s": positions / learn_s,
                       "learning_off_positions_per_s": positions / play_only_s}, f, indent=2)
    if not parts:
        return 0
    total = sum(parts.values())
    ratio = learn_s / total
    for name, seconds in parts.items():
        print(f"  {name:18s} {seconds:7.2f} s  {seconds / total:5.0%}")
    if args.quick:
        print(f"fused / sum of parts = {ratio:.2f}  (not judged at --quick)")
        return 0
    print(f"fused / sum of parts = {ratio:.2f}  [{'PASS' if ratio <= TARGET else 'FAIL'}: <= {TARGET}]")
    return 0 if ratio <= TARGET else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
