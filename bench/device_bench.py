"""One call on a lent accelerator: self-play, search, env and learner speed, memory, compile
times, a short training run and a match; a JSON and a markdown table in OUTDIR.

    python bench/device_bench.py OUTDIR [--quick] [--budget-s 400] [--parts self-play,search,...]

Measured, each after its compile, the median of a few timed calls (bench/device_parts.py):
  * self-play, the project's own (``az.search.make_search``), at the paper's settings
    (n = 64, m = 16, a 6x64 bfloat16 network) at B = 1024, 2048 and 4096, with the 6x64
    and 10x128 forward alone at each B; each self-play row gives its fraction of the
    network-only bound (the 6x64 forward's positions/s at that B over the n + 1 network
    calls of a ply), XLA's memory per game and the peak device memory;
  * one such search at B = 1024 with each of three loops, same card, same run: mctx's,
    the full tree's (``az.search.reference``) and the compact tree's (``az.search.gumbel``)
    (bench/search_bench.py):
    seconds, the loop's own time (search minus model), seconds with a network that costs
    nothing, the mean deepest path per simulation, XLA's temporaries + outputs per game;
  * env step + legal mask + observation of ``envs`` at B = 1024 / 4096 / 16384, and
    pgx's ``env.step`` at B = 1024 (uniformly random legal moves, 16 plies a call);
  * learner steps/s of the ``:gpu`` preset (10x128, 1024 positions a step);
  * ``train.py --config configs/shogi816k.py:gpu`` for up to three minutes (stopped by
    SIGTERM, as a preemption would), then 8 games of its last snapshot against ``greedy``.
Each part runs in its own process (one part's memory or crash cannot spoil the next), in
that order; the report is rewritten after each, so a run cut off keeps what it measured.
``--parts`` picks some. A part that would not fit in what is left of ``--budget-s`` is
skipped, one that overruns it is stopped (keeping the rows it wrote), and the training
run shortens to fit: at the default 400 s the first parts fit, the training and match
usually do not. ``--quick`` runs every part at CPU sizes in minutes (tests/test_bench.py).
``bench/device.sh`` wraps this for the device machine.
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
import threading
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FULL = dict(preset="gpu", train_s=180, match_games=8, match_simulations=64)
QUICK = dict(preset="smoke", train_s=0, match_games=2, match_simulations=4)
PARTS = ("self-play", "search", "env", "learner", "training", "match")  # the most wanted number first
NEEDS_S = {"self-play": 150, "search": 150, "env": 60, "learner": 60, "training": 120, "match": 60}  # with compiles


def run_training(p: dict, workdir: str, out: str) -> dict:
    """train.py at the preset for ``train_s`` seconds (SIGTERM), or 2 iterations when 0; its
    metrics.jsonl is copied to ``out`` as train_metrics.jsonl."""
    command = [sys.executable, os.path.join(ROOT, "train.py"), "--config", f"configs/shogi816k.py:{p['preset']}",
               "--workdir", workdir]
    if not p["train_s"]:
        command.append("--max_iterations=2")
    start = time.perf_counter()
    log_path = os.path.join(out, "train_log.txt")
    with open(log_path, "w", encoding="utf-8") as log, subprocess.Popen(
            command, cwd=ROOT, stdout=log, stderr=subprocess.STDOUT) as proc:
        try:
            proc.wait(timeout=p["train_s"] or None)
        except subprocess.TimeoutExpired:
            proc.send_signal(signal.SIGTERM)  # saves and exits, as on a preemption
            proc.wait(timeout=600)
    seconds = time.perf_counter() - start
    metrics = os.path.join(workdir, "metrics.jsonl")
    lines = []
    if os.path.exists(metrics):
        with open(metrics, encoding="utf-8") as f:
            lines = [json.loads(line) for line in f]
    if proc.returncode != 0 or not lines:
        with open(log_path, encoding="utf-8") as f:
            raise RuntimeError(f"train.py exited {proc.returncode} after {len(lines)} iterations: {f.read()[-500:]}")
    shutil.copyfile(os.path.join(workdir, "metrics.jsonl"), os.path.join(out, "train_metrics.jsonl"))
    row = {"what": f"train :{p['preset']}", "seconds": seconds, "iterations": len(lines),
           "games": lines[-1]["games_finished"], "positions": lines[-1]["positions"], "loss": lines[-1]["loss"],
           "first_iteration_s": lines[0]["seconds"],
           "peak_bytes": lines[-1]["device/peak_gib"] * 2**30 if "device/peak_gib" in lines[-1] else None}
    if len(lines) > 1:  # the first iteration includes the compile: speed from the others
        row["per_s"] = sum(r["positions_per_second"] for r in lines[1:]) / (len(lines) - 1)
        row["compile_s"] = lines[0]["seconds"] - lines[1]["seconds"]
    return row


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


def _notes(row: dict) -> str:
    """What a row says besides its rate, for the table."""
    if "score" in row:
        return f"+{row['wins']} ={row['draws']} -{row['losses']} (score {row['score']:.2f})"
    if "iterations" in row:
        return (f"{row['iterations']} iterations, {row['games']} games in {row['seconds']:.0f} s "
                f"(the first, with its compile, {row['first_iteration_s']:.0f} s)")
    notes = []
    if "own_s" in row:
        notes += [f"loop's own {row['own_s'] * 1e3:,.0f} ms a search (model {row['model_s'] * 1e3:,.0f} ms)",
                  f"{row['free_s'] * 1e3:,.0f} ms with a free network", f"deepest path {row['deepest_path']:.1f}"]
    if "of_bound" in row:
        notes.append(f"{row['of_bound']:.0%} of the network-only bound, {row['bound_per_s']:,.0f}/s")
    if "bytes_per_game" in row:
        notes.append(f"{row['bytes_per_game'] / 2**10:,.0f} KiB a game")
    return "; ".join(notes)


def markdown(report: dict) -> str:
    lines = [f"device: {report.get('device')} ({report.get('backend')}), jax {report.get('jax')}, {report['date']}", "",
             "| measurement | batch | per second | notes | compile s | peak memory |", "|---|---|---|---|---|---|"]
    for row in report["rows"]:
        if "skipped" in row:
            lines.append(f"| {row['what']} | | | skipped: {row['skipped']} | | |")
            continue
        peak = row.get("peak_bytes")
        per_s = f"{row['per_s']:,.1f}" if "per_s" in row else ""
        compile_s = f"{row['compile_s']:.1f}" if "compile_s" in row else ""
        lines.append(f"| {row['what']} | {row.get('batch', '')} | {per_s} | {_notes(row)} | "
                     f"{compile_s} | {f'{peak / 2**30:.2f} GiB' if peak else 'n/a'} |")
    return "\n".join(lines) + "\n"


def run_part(name: str, p: dict, scratch: str, out: str, seconds: float, quick: bool) -> list[dict]:
    """One part's rows, in at most ``seconds`` (0: no limit). The first four run
    bench/device_parts.py in a process of their own (JAX takes most of a GPU when it
    starts, so this process never imports it), stopped when ``seconds`` run out."""
    if name == "training":
        return [run_training(dict(p, train_s=seconds if p["train_s"] else 0), os.path.join(scratch, "run"), out)]
    if name == "match":
        return [run_match(p, os.path.join(scratch, "run"), os.path.join(scratch, "match"), out)]
    rows_file = os.path.join(scratch, f"{name}.json")
    command = [sys.executable, os.path.join(ROOT, "bench", "device_parts.py"), name, rows_file]
    last_lines = collections.deque(maxlen=3)
    stopped = threading.Event()
    with subprocess.Popen(command + (["--quick"] if quick else []), cwd=ROOT, stdout=subprocess.PIPE,
                          stderr=subprocess.STDOUT, text=True) as child:

        def stop():
            stopped.set()
            child.kill()

        timer = threading.Timer(seconds, stop)
        if seconds:
            timer.start()
        for line in child.stdout:  # passed on as it comes: a log of a run cut off still shows where
            sys.stdout.write(line)
            sys.stdout.flush()
            if line.strip():
                last_lines.append(line.strip())
        timer.cancel()
    rows = []
    if os.path.exists(rows_file):  # what it measured before any failure
        with open(rows_file, encoding="utf-8") as f:
            rows = json.load(f)
    if stopped.is_set():
        rows.append({"what": name, "skipped": f"stopped after {seconds:.0f} s, at the end of --budget-s"})
    elif child.returncode != 0:
        rows.append({"what": name, "skipped": f"failed (exit {child.returncode}): {' | '.join(last_lines)[-400:]}"})
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
    parser.add_argument("out", help="directory for device.json, device.md, the run's metrics and log, a game")
    parser.add_argument("--quick", action="store_true", help="CPU sizes: a smoke test of the benchmark")
    parser.add_argument("--budget-s", type=float, default=400.0,
                        help="seconds in all: parts that would not fit are skipped, one that overruns is stopped")
    parser.add_argument("--parts", default=",".join(PARTS), help=f"comma-separated, of {','.join(PARTS)}")
    args = parser.parse_args(argv)
    p = QUICK if args.quick else FULL
    parts = [name.strip() for name in args.parts.split(",") if name.strip()]
    unknown = [name for name in parts if name not in PARTS]
    if unknown:
        parser.error(f"--parts: unknown {', '.join(unknown)}; choose from {', '.join(PARTS)}")
    if "match" in parts and "training" not in parts:
        parser.error("--parts: match plays the training run's snapshot; name training too")
    os.makedirs(args.out, exist_ok=True)
    scratch = tempfile.mkdtemp(prefix="azshogi-device-")  # the run's checkpoints and games stay out of OUTDIR
    report = {"python": platform.python_version(), "date": time.strftime("%Y-%m-%d"), "quick": args.quick,
              "rows": []}
    started = time.perf_counter()
    for name in parts:
        left = args.budget_s - (time.perf_counter() - started)
        seconds = 0.0 if args.quick else left
        if name == "training":  # three minutes when there is time, less rather than nothing
            later = sum(NEEDS_S[n] for n in parts[parts.index(name) + 1:])
            seconds = min(p["train_s"], left - later - 30)
        if not args.quick and (left < NEEDS_S[name] or (name == "training" and seconds < 60)):
            report["rows"].append({"what": name, "skipped": f"{max(left, 0):.0f} s left of --budget-s"})
            continue
        part_start = time.perf_counter()
        try:
            report["rows"] += run_part(name, p, scratch, args.out, seconds, args.quick)
        except Exception as e:  # recorded; the other parts still run
            report["rows"].append({"what": name, "skipped": f"failed: {type(e).__name__}: {str(e)[-400:]}"})
        for key in ("device", "backend", "jax"):
            report[key] = report.get(key) or next((row[key] for row in report["rows"] if key in row), None)
        report["seconds"] = time.perf_counter() - started
        write_report(args.out, report)  # after every part: a cut-off run keeps what it measured
        print(f"{name}: done in {time.perf_counter() - part_start:.0f} s, "
              f"{time.perf_counter() - started:.0f} s in all", flush=True)
    print(write_report(args.out, report))
    return 0 if not any("failed" in row.get("skipped", "") for row in report["rows"]) else 1


if __name__ == "__main__":
    sys.exit(main())
