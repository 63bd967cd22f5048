"""One call on a lent accelerator: env, self-play and learner speed, memory, compile times,
a short training run and a match; a JSON and a markdown table in OUTDIR.

    python bench/device_bench.py OUTDIR [--quick] [--budget-s 480]

Measured, each after its compile, the median of a few timed calls:
  * env step + legal mask + observation of ``envs`` at B = 1024 / 4096 / 16384, and
    pgx's ``env.step`` at B = 1024 (uniformly random legal moves, 16 plies a call);
  * self-play positions/s at the paper's settings (B = 1024, n = 64, m = 16) with a 6x64
    and a 10x128 bfloat16 network, and each network's forward alone at that batch;
  * learner steps/s of the ``:gpu`` preset (10x128, 1024 positions a step);
  * peak device memory (where the backend reports it) and every compile time;
  * ``train.py --config configs/shogi816k.py:gpu`` for three minutes (stopped by SIGTERM,
    as a preemption would), then 8 games of its last snapshot against ``greedy``.
Each part runs in its own process (one part's memory or crash cannot spoil the next), in
the order self-play, env, learner, training, match; the report is rewritten after each, so
a run cut off keeps what it measured. ``--parts`` picks some. ``--quick`` runs the same at
CPU sizes in a few minutes (tests/test_bench.py). Parts that would overrun ``--budget-s``
are skipped and say so; the training run shortens to fit. ``bench/device.sh`` wraps this
for the device machine.
"""

import argparse
import collections
import glob
import json
import os
import platform
import shutil
import signal
import subprocess
import sys
import tempfile
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
        # The network alone at the search's batch: a ply makes sims + 1 such calls, so this
        # against the ply's time says how much of the search is the network.
        observation = jax.jit(jax.vmap(lambda s: env.observe_parts(s, rules)))(state)
        forward = jax.jit(net.apply)
        compile_s = _compiled(forward, params, observation)
        seconds = _median(lambda: forward(params, observation), p["repeats"] + 7)
        rows.append({"what": f"forward {blocks}x{channels} {p['dtype']}", "batch": games, "per_s": games / seconds,
                     "compile_s": compile_s})
    return rows


def bench_learner(p: dict) -> dict:
    from configs import shogi816k

    config = shogi816k.get_config(p["preset"])
    trainer = trainer_lib.make_trainer(config, trainer_lib.make_mesh())
    state = trainer.init()
    key = jax.random.PRNGKey(1)
    # A step's cost does not depend on what the positions are: empty boards (all-zero plies,
    # each played and searched in full) spare a compile and a run of the whole self-play.
    shapes = jax.eval_shape(trainer.selfplay, state.params, state.games, state.resign, key, state.games_finished)[3]
    plies = jax.tree.map(lambda s: jnp.zeros(s.shape, s.dtype), shapes)
    plies = plies._replace(played=jnp.ones_like(plies.played), full_search=jnp.ones_like(plies.full_search))
    replay = jax.jit(trainer.relabel)(train_bench._with_targets(state.replay, plies))
    step = jax.jit(trainer.learner_step)

    def one():
        return step(state.params, state.opt_state, jnp.int32(0), replay, jnp.float32(0.1), key)

    compile_s = _compiled(one)
    seconds = _median(one, p["repeats"] + 2)
    return {"what": f"learner step :{p['preset']}", "batch": config.learner.batch_size, "per_s": 1 / seconds,
            "compile_s": compile_s, "peak_bytes": peak_memory()}


def run_training(p: dict, workdir: str, out: str) -> dict:
    """train.py at the preset for ``train_s`` seconds (SIGTERM), or 2 iterations when 0; its
    metrics.jsonl is copied to ``out`` as train_metrics.jsonl."""
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
    shutil.copyfile(os.path.join(workdir, "metrics.jsonl"), os.path.join(out, "train_metrics.jsonl"))
    timed = lines[1:] or lines  # the first iteration includes the compile
    return {"what": f"train :{p['preset']}", "seconds": seconds, "iterations": len(lines),
            "games": lines[-1]["games_finished"], "positions": lines[-1]["positions"],
            "per_s": sum(r["positions_per_second"] for r in timed) / len(timed), "loss": lines[-1]["loss"],
            "compile_s": lines[0]["seconds"] - (lines[1]["seconds"] if len(lines) > 1 else 0.0)}


def run_match(p: dict, workdir: str, match_dir: str, out: str) -> dict:
    """A few games of the run's last snapshot against greedy; the first game's KIF is copied to ``out``."""
    command = [sys.executable, os.path.join(ROOT, "eval.py"), "--checkpoint", workdir, "--opponent", "greedy",
               "--games", str(p["match_games"]), "--simulations", str(p["match_simulations"]), "--concurrency",
               str(p["match_games"]), "--out", match_dir]
    start = time.perf_counter()
    result = subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=900)
    if result.returncode != 0:
        raise RuntimeError(f"eval.py exited {result.returncode}: {result.stderr[-500:]}")
    with open(os.path.join(match_dir, "summary.json"), encoding="utf-8") as f:
        s = json.load(f)
    records = sorted(glob.glob(os.path.join(match_dir, "games", "*.kif")))
    if records:
        shutil.copyfile(records[0], os.path.join(out, "match_game.kif"))
    return {"what": "match vs greedy", "seconds": time.perf_counter() - start, "games": s["games"],
            "wins": s["wins"], "draws": s["draws"], "losses": s["losses"], "score": s["score"]}


def markdown(report: dict) -> str:
    lines = [f"device: {report.get('device')} ({report.get('backend')}), jax {report.get('jax')}, {report['date']}", "",
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


PARTS = ("self-play", "env", "learner", "training", "match")  # the most wanted number first
NEEDS_S = {"self-play": 150, "env": 60, "learner": 60, "training": 120, "match": 60}  # rough, with compiles


def run_part(name: str, p: dict, scratch: str, out: str, seconds: float) -> list[dict]:
    """One part, in this process (``--part``): each runs in a fresh process with the device to itself."""
    device = jax.devices()[0]
    rows = {"self-play": lambda: bench_selfplay(p), "env": lambda: bench_env(p), "learner": lambda: [bench_learner(p)],
            "training": lambda: [run_training(dict(p, train_s=seconds if p["train_s"] else 0),
                                              os.path.join(scratch, "run"), out)],
            "match": lambda: [run_match(p, os.path.join(scratch, "run"), os.path.join(scratch, "match"), out)]}[name]()
    for row in rows:
        row.update(device=device.device_kind, backend=jax.default_backend(), jax=jax.__version__)
    return rows


def write_report(out: str, report: dict) -> str:
    with open(os.path.join(out, "device.json"), "w", encoding="utf-8") as f:
        json.dump(report, f, indent=1)
    table = markdown(report)
    with open(os.path.join(out, "device.md"), "w", encoding="utf-8") as f:
        f.write(table)
    return table


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", help="directory for device.json and device.md (and the run's metrics, a game)")
    parser.add_argument("--quick", action="store_true", help="CPU sizes: a smoke test of the benchmark")
    parser.add_argument("--budget-s", type=float, default=480.0, help="parts that would overrun it are skipped")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {','.join(PARTS)}")
    parser.add_argument("--part", choices=PARTS, help=argparse.SUPPRESS)  # a child: one part, rows to --rows
    parser.add_argument("--rows", help=argparse.SUPPRESS)
    parser.add_argument("--seconds", type=float, default=0.0, help=argparse.SUPPRESS)
    parser.add_argument("--scratch", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    p = QUICK if args.quick else FULL
    os.makedirs(args.out, exist_ok=True)
    if args.part:
        rows = run_part(args.part, p, args.scratch, args.out, args.seconds)
        with open(args.rows, "w", encoding="utf-8") as f:
            json.dump(rows, f)
        return 0

    parts = [name.strip() for name in args.parts.split(",") if name.strip()]
    unknown = [name for name in parts if name not in PARTS]
    if unknown:
        parser.error(f"--parts: unknown {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    # No JAX here: each part gets a fresh process, so one part's allocations (or a crash)
    # cannot starve the next, and train.py gets the whole device.
    scratch = tempfile.mkdtemp(prefix="azshogi-device-")
    report = {"python": platform.python_version(), "date": time.strftime("%Y-%m-%d"), "quick": args.quick,
              "rows": []}
    started = time.perf_counter()
    for name in parts:
        left = args.budget_s - (time.perf_counter() - started)
        seconds = 0.0
        if name == "training":  # three minutes when there is time, less rather than nothing
            later = sum(NEEDS_S[n] for n in parts[parts.index(name) + 1:])
            seconds = min(p["train_s"], left - later - 30)
        if not args.quick and (left < NEEDS_S[name] or (name == "training" and seconds < 60)):
            report["rows"].append({"what": name, "skipped": f"{left:.0f} s left of --budget-s, needs about "
                                                            f"{NEEDS_S[name] + (p['train_s'] if name == 'training' else 0)}"})
            continue
        rows_file = os.path.join(scratch, f"{name}.json")
        command = [sys.executable, os.path.abspath(__file__), args.out, "--part", name, "--rows", rows_file,
                   "--scratch", scratch, "--seconds", str(seconds)] + (["--quick"] if args.quick else [])
        part_start = time.perf_counter()
        last_lines = collections.deque(maxlen=3)
        with subprocess.Popen(command, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as child:
            for line in child.stdout:  # passed on as it comes: a log of a run cut off still shows where
                sys.stdout.write(line)
                sys.stdout.flush()
                if line.strip():
                    last_lines.append(line.strip())
        returncode = child.returncode
        if returncode == 0:
            with open(rows_file, encoding="utf-8") as f:
                report["rows"] += json.load(f)
        else:  # recorded; the other parts still run
            tail = " | ".join(last_lines)
            report["rows"].append({"what": name, "skipped": f"failed (exit {returncode}): {tail[-400:]}"})
        for key in ("device", "backend", "jax"):
            report.setdefault(key, next((row[key] for row in report["rows"] if key in row), None))
        report["seconds"] = time.perf_counter() - started
        write_report(args.out, report)  # after every part: a cut-off run keeps what it measured
        print(f"{name}: done in {time.perf_counter() - part_start:.0f} s, "
              f"{time.perf_counter() - started:.0f} s in all", flush=True)
    table = write_report(args.out, report)
    print(table)
    return 0 if not any("failed" in row.get("skipped", "") for row in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
