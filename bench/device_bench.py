"""One call on a lent accelerator: env, self-play and learner speed, memory, compile times,
a short training run and a match; a JSON and a markdown table in OUTDIR.

    python bench/device_bench.py OUTDIR [--quick] [--budget-s 480]

Measured, each after its compile, the median of a few timed calls:
  * env step + legal mask + observation of ``envs`` at B = 1024 / 4096 / 16384, and
    pgx's ``env.step`` at B = 1024 (uniformly random legal moves, 16 plies a call);
  * self-play positions/s at the paper's settings (B = 1024, n = 64, m = 16) with a 6x64
    and a 10x128 bfloat16 network;
  * learner steps/s of the ``:gpu`` preset (10x128, 1024 positions a step);
  * peak device memory (where the backend reports it) and every compile time;
  * ``train.py --config configs/shogi816k.py:gpu`` for three minutes (stopped by SIGTERM,
    as a preemption would), then 8 games of its last snapshot against ``greedy``.
``--quick`` runs the same at CPU sizes in a few minutes (tests/test_bench.py). Parts that
would overrun ``--budget-s`` are skipped and say so. ``bench/device.sh`` wraps this for
the device machine.
"""

import argparse
import json
import os
import platform
import signal
import subprocess
import sys
import time

import jax
import jax.numpy as jnp

import env_bench  # bench/, beside this file
import train_bench
from az import network as network_lib
from az import search as search_lib
from az.network import AZNet
from az.train import selfplay as selfplay_lib
from az.train import trainer as trainer_lib
from envs import env, notation, starts

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FULL = dict(env_batches=(1024, 4096, 16384), pgx_batch=1024, env_plies=16, selfplay=(1024, 64, 16, 8),
            nets=((6, 64), (10, 128)), dtype="bfloat16", preset="gpu", train_s=180, match_games=8,
            match_simulations=64, repeats=3)
QUICK = dict(env_batches=(64,), pgx_batch=64, env_plies=2, selfplay=(8, 4, 4, 2), nets=((1, 8), (1, 16)),
             dtype="float32", preset="smoke", train_s=0, match_games=2, match_simulations=4, repeats=1)


_median = train_bench._median_seconds  # one timing rule for all benchmarks


def _compiled(fn, *args):
    start = time.perf_counter()
    jax.block_until_ready(fn(*args))
    return time.perf_counter() - start


def peak_memory() -> int | None:
    stats = jax.devices()[0].memory_stats() or {}
    return stats.get("peak_bytes_in_use")


def bench_env(p: dict) -> list[dict]:
    rules = env.Rules()
    rows = []
    for batch in p["env_batches"]:
        run = env_bench.make_our_run(p["env_plies"], rules)
        state = jax.tree.map(lambda a: jnp.broadcast_to(a, (batch, *a.shape)),
                             notation.from_sfen(notation.STARTPOS_SFEN, rules))
        key = jax.random.key(batch)
        compile_s = _compiled(run, state, key)
        seconds = _median(lambda: run(state, key), p["repeats"])
        rows.append({"what": "env step+mask+obs", "batch": batch, "per_s": batch * p["env_plies"] / seconds,
                     "compile_s": compile_s})
    init, run = env_bench.make_pgx_run(p["env_plies"])
    batch = p["pgx_batch"]
    state = init(jax.random.split(jax.random.key(0), batch))
    key = jax.random.key(1)
    compile_s = _compiled(run, state, key)
    seconds = _median(lambda: run(state, key), p["repeats"])
    rows.append({"what": "pgx env.step", "batch": batch, "per_s": batch * p["env_plies"] / seconds,
                 "compile_s": compile_s})
    return rows


def bench_selfplay(p: dict) -> list[dict]:
    games, sims, considered, plies = p["selfplay"]
    rules = env.Rules()
    start = starts.make_start_fn("shogi816k", rules)
    rows = []
    for blocks, channels in p["nets"]:
        net = AZNet(num_blocks=blocks, channels=channels, dtype=jnp.dtype(p["dtype"]))
        params = network_lib.init_params(net, jax.random.key(0))
        search = search_lib.make_search(net.apply, rules, num_simulations=sims, max_num_considered_actions=considered)
        selfplay = jax.jit(selfplay_lib.make_selfplay(search, start, rules, sample_visits_plies=0, num_plies=plies,
                                                      game_budget=10**9, num_schemes=1))
        state = jax.jit(jax.vmap(start, in_axes=(0, None)))(jax.random.split(jax.random.key(1), games), 0.0)
        key = jax.random.key(2)
        track = selfplay_lib.init_resign(key, games, threshold=-0.9, no_resign_fraction=0.1)
        compile_s = _compiled(selfplay, params, state, track, key, jnp.int32(0))
        seconds = _median(lambda: selfplay(params, state, track, key, jnp.int32(0)), p["repeats"])
        rows.append({"what": f"self-play {blocks}x{channels} {p['dtype']}", "batch": games, "simulations": sims,
                     "per_s": games * plies / seconds, "compile_s": compile_s, "peak_bytes": peak_memory()})
    return rows


def bench_learner(p: dict) -> dict:
    from configs import shogi816k

    config = shogi816k.get_config(p["preset"])
    trainer = trainer_lib.make_trainer(config, trainer_lib.make_mesh())
    state = trainer.init()
    key = jax.random.PRNGKey(1)
    _, _, _, plies, _ = jax.jit(trainer.selfplay)(state.params, state.games, state.resign, key, state.games_finished)
    replay = jax.jit(trainer.relabel)(train_bench._with_targets(state.replay, plies))
    step = jax.jit(trainer.learner_step)

    def one():
        return step(state.params, state.opt_state, jnp.int32(0), replay, jnp.float32(0.1), key)

    compile_s = _compiled(one)
    seconds = _median(one, p["repeats"] + 2)
    return {"what": f"learner step :{p['preset']}", "batch": config.learner.batch_size, "per_s": 1 / seconds,
            "compile_s": compile_s, "peak_bytes": peak_memory()}


def run_training(p: dict, workdir: str) -> dict:
    """train.py at the preset for ``train_s`` seconds (SIGTERM), or 2 iterations when 0."""
    command = [sys.executable, os.path.join(ROOT, "train.py"), "--config", f"configs/shogi816k.py:{p['preset']}",
               "--workdir", workdir]
    if not p["train_s"]:
        command.append("--max_iterations=2")
    start = time.perf_counter()
    proc = subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    try:
        output, _ = proc.communicate(timeout=p["train_s"] or None)
    except subprocess.TimeoutExpired:
        proc.send_signal(signal.SIGTERM)  # saves and exits, as on a preemption
        output, _ = proc.communicate(timeout=600)
    seconds = time.perf_counter() - start
    with open(os.path.join(workdir, "metrics.jsonl"), encoding="utf-8") as f:
        lines = [json.loads(line) for line in f]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"train.py exited {proc.returncode}: {output[-500:]}")
    timed = lines[1:] or lines  # the first iteration includes the compile
    return {"what": f"train :{p['preset']}", "seconds": seconds, "iterations": len(lines),
            "games": lines[-1]["games_finished"], "positions": lines[-1]["positions"],
            "per_s": sum(r["positions_per_second"] for r in timed) / len(timed), "loss": lines[-1]["loss"],
            "compile_s": lines[0]["seconds"] - (lines[1]["seconds"] if len(lines) > 1 else 0.0)}


def run_match(p: dict, workdir: str, out: str) -> dict:
    command = [sys.executable, os.path.join(ROOT, "eval.py"), "--checkpoint", workdir, "--opponent", "greedy",
               "--games", str(p["match_games"]), "--simulations", str(p["match_simulations"]), "--concurrency",
               str(p["match_games"]), "--out", out]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"eval.py exited {result.returncode}: {result.stderr[-500:]}")
    with open(os.path.join(out, "summary.json"), encoding="utf-8") as f:
        s = json.load(f)
    return {"what": "match vs greedy", "seconds": time.perf_counter() - start, "games": s["games"],
            "wins": s["wins"], "draws": s["draws"], "losses": s["losses"], "score": s["score"]}


def markdown(report: dict) -> str:
    lines = [f"device: {report['device']} ({report['backend']}), jax {report['jax']}, {report['date']}", "",
             "| measurement | batch | per second | compile s | peak memory |", "|---|---|---|---|---|"]
    for row in report["rows"]:
        if "skipped" in row:
            lines.append(f"| {row['what']} | | skipped: {row['skipped']} | | |")
            continue
        peak = row.get("peak_bytes")
        extra = ""
        if "games" in row and "score" in row:
            extra = f"+{row['wins']} ={row['draws']} -{row['losses']} (score {row['score']:.2f})"
        elif "iterations" in row:
            extra = f"{row['iterations']} iterations, {row['games']} games in {row['seconds']:.0f} s; "
        per_s = f"{extra}{row['per_s']:,.1f}" if "per_s" in row else extra
        lines.append(f"| {row['what']} | {row.get('batch', '')} | {per_s} | "
                     f"{row.get('compile_s', 0):.1f} | {f'{peak / 2**30:.2f} GiB' if peak else 'n/a'} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="directory for device.json and device.md")
    parser.add_argument("--quick", action="store_true", help="CPU sizes: a smoke test of the benchmark")
    parser.add_argument("--budget-s", type=float, default=480.0, help="parts that would overrun it are skipped")
    args = parser.parse_args(argv)
    p = QUICK if args.quick else FULL
    os.makedirs(args.out, exist_ok=True)
    device = jax.devices()[0]
    report = {"device": device.device_kind, "backend": jax.default_backend(), "jax": jax.__version__,
              "python": platform.python_version(), "date": time.strftime("%Y-%m-%d"), "quick": args.quick,
              "rows": []}
    started = time.perf_counter()
    workdir = os.path.join(args.out, "run")
    parts = [("env", 60, lambda: bench_env(p)), ("self-play", 120, lambda: bench_selfplay(p)),
             ("learner", 40, lambda: [bench_learner(p)]), ("training", p["train_s"] + 60,
                                                          lambda: [run_training(p, workdir)]),
             ("match", 60, lambda: [run_match(p, workdir, os.path.join(args.out, "match"))])]
    for name, needs_s, part in parts:
        left = args.budget_s - (time.perf_counter() - started)
        if left < needs_s and not args.quick:
            report["rows"].append({"what": name, "skipped": f"{left:.0f} s left of --budget-s, needs about {needs_s}"})
            continue
        try:
            report["rows"] += part()
        except Exception as e:  # recorded; the other parts still run
            report["rows"].append({"what": name, "skipped": f"failed: {type(e).__name__}: {str(e)[:300]}"})
        print(f"{name}: done at {time.perf_counter() - started:.0f} s", flush=True)
    report["seconds"] = time.perf_counter() - started
    with open(os.path.join(args.out, "device.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    table = markdown(report)
    with open(os.path.join(args.out, "device.md"), "w", encoding="utf-8") as f:
        f.write(table)
    print(table)
    return 0 if not any("failed" in row.get("skipped", "") for row in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
