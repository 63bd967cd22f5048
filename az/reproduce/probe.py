"""The probe before training: a few iterations of each variant still to train and a few
evaluation games, measured in scratch folders under ``WORKDIR/probe/`` (removed once
read; the logs stay), never in the variants' workdirs, so the run and its resume are
the same with or without it. Their compiles land in the workdir's shared compilation
cache, from which the trainings and the evaluator then read them: the probe moves the
compile earlier rather than doing it twice.
"""

import json
import os
import re
import shutil
import time

from az import workdir as workdir_lib
from az.reproduce import durations, estimate, progress
from az.reproduce.children import tail
from az.reproduce.plan import BALANCE_STARTS, ReproductionError
from az.reproduce.training import spawn_train

PROBE_ITERATIONS = 4  # the first holds the compile; the median of the other three is the speed
PROBE_GAME_SECONDS = 60.0  # of evaluation games after the compile; games still running then are extrapolated


def probe_root(workdir: str) -> str:
    return os.path.join(workdir, "probe")


def _fresh(path: str) -> str:
    """``path``, emptied: a scratch folder this probe made on an earlier start."""
    shutil.rmtree(path, ignore_errors=True)
    os.makedirs(path)
    return path


def _failed(what: str, child, log: str) -> ReproductionError:
    return ReproductionError(f"the probe of {what} failed (exit {child.returncode}); the end of {log}:\n{tail(log)}")


def probe_training(runner, variant: str, share: str | None) -> tuple[estimate.TrainingProbe, str] | None:
    """(the variant's measures, the backend) from ``PROBE_ITERATIONS`` iterations of its
    config in ``probe/VARIANT``; None when a signal stopped the runner."""
    scratch = _fresh(os.path.join(probe_root(runner.workdir), variant))
    started = time.time()
    child = spawn_train(runner, variant, scratch, share, f"--max_iterations={PROBE_ITERATIONS}",
                        extra_env={"JAX_LOG_COMPILES": "1"})  # XLA's compile times, which the cache saves
    child.wait()
    wall = time.time() - started
    log = os.path.join(scratch, "train.log")
    if runner.children.stopping:
        return None
    rows = workdir_lib.metrics_rows(scratch)
    if child.returncode != 0 or len(rows) < 2:
        raise _failed(variant, child, log)
    seconds = [r["seconds"] for r in rows]
    teacher = [r["teacher/seconds"] for r in rows if "teacher/seconds" in r]
    config = runner.configs[variant]
    every = config.teacher.every_iterations
    iteration = estimate.steady(seconds[1:]) + (teacher[-1] / every if teacher and every > 0 else 0.0)
    own = workdir_lib.metrics_rows(runner.run_dir(variant))  # a resumed run's own measure of game lengths
    # A real start reads XLA's compiles from the cache the probe filled, but traces and
    # lowers its programs again: all of the probe but those compiles and the steady iterations.
    compiled = xla_compile_seconds(log)
    measured = estimate.TrainingProbe(
        variant=variant, startup_seconds=max(0.0, wall - compiled - (len(rows) - 1) * iteration),
        compile_seconds=compiled, iteration_seconds=iteration,
        iterations_needed=durations.iterations_needed(config, own or rows),
        iterations_done=own[-1]["iteration"] if own else 0, probe_seconds=wall)
    return measured, _backend(log)


def xla_compile_seconds(log: str) -> float:
    """XLA's compile seconds in a log of a process run with ``JAX_LOG_COMPILES=1``."""
    with open(log, encoding="utf-8", errors="replace") as f:
        return sum(float(m.group(1)) for m in re.finditer(r"Finished XLA compilation of .* in ([0-9.]+) sec", f.read()))


def _backend(log: str) -> str:
    """The platform train.py reports ("devices: 1 x cpu (1 process(es))")."""
    with open(log, encoding="utf-8", errors="replace") as f:
        for line in f:
            if line.startswith("devices: "):
                return line.split()[3]
    return "unknown"


def probe_evaluation(runner, snapshot: str) -> estimate.EvaluationProbe | None:
    """The evaluator's measures from a few games of ``snapshot`` (``RUN_DIR@STEP``) and a
    few of Table 2's positions, in a process set up as the evaluator; None when stopped."""
    plan = runner.plan
    scratch = _fresh(os.path.join(probe_root(runner.workdir), "eval"))
    balance_due = plan.opponent.startswith("usi:") and not os.path.exists(os.path.join(runner.workdir, "balance.json"))
    request = {"snapshot": snapshot, "opponent": plan.opponent, "simulations": plan.simulations,
               "concurrency": plan.concurrency, "games": min(plan.games, max(2, plan.concurrency)),
               "seconds": PROBE_GAME_SECONDS, "balance_positions": plan.balance_positions if balance_due else 0,
               "out_dir": os.path.join(scratch, "match"), "cache": os.path.join(runner.workdir, "jax_cache"),
               "result": os.path.join(scratch, "result.json")}
    with open(os.path.join(scratch, "request.json"), "w", encoding="utf-8") as f:
        json.dump(request, f)
    log = os.path.join(probe_root(runner.workdir), "eval.log")
    started = time.time()
    child = runner.children.spawn(["-m", "az.reproduce.match_probe", os.path.join(scratch, "request.json")], log,
                                  os.path.join(scratch, "probe.lock"),
                                  dict(runner.evaluator_env(), JAX_LOG_COMPILES="1"))
    child.wait()
    wall = time.time() - started
    if runner.children.stopping:
        return None
    try:
        with open(request["result"], encoding="utf-8") as f:
            measured = json.load(f)
    except (OSError, ValueError):
        raise _failed("the evaluation", child, log) from None
    finished = measured["finished_plies"]
    plies_per_game = sum(finished) / len(finished) if finished else durations.PLANNING_PLIES
    balance_seconds = measured["balance_wave_seconds"] * len(BALANCE_STARTS) * estimate.waves(
        plan.balance_positions, plan.concurrency)
    compiled = xla_compile_seconds(log)
    tracing = max(0.0, measured["compile_seconds"] - compiled)  # before the first move, paid by every start
    return estimate.EvaluationProbe(
        startup_seconds=max(0.0, wall - measured["seconds"]) + measured["load_seconds"] + tracing,
        compile_seconds=compiled, plies_per_second=measured["plies"] / measured["play_seconds"],
        plies_per_game=plies_per_game, games_finished=len(finished),
        match_overhead_seconds=measured["load_seconds"], balance_seconds=balance_seconds, probe_seconds=wall)


def matches_done(runner) -> dict:
    """Matches finished per variant, as the evaluator would find them."""
    done = {}
    for variant in runner.plan.variants:
        run_dir, config = runner.run_dir(variant), runner.configs[variant]
        trained = progress.is_trained(run_dir, config.budget_games)
        steps = progress.run_steps(run_dir, config.budget_games, runner.plan.points, trained)
        done[variant] = sum(progress.match_summary(progress.match_dir(run_dir, runner.opponent, s),
                                                   progress.match_games(runner.plan, steps, s, trained)) is not None
                            for s in steps)
    return done


def remove_scratch(workdir: str) -> None:
    """The probe's scratch folders (checkpoints, snapshots, games); its logs and metrics
    stay, as ``probe/VARIANT.log`` and ``probe/VARIANT.metrics.jsonl``."""
    root = probe_root(workdir)
    for name in os.listdir(root) if os.path.isdir(root) else []:
        path = os.path.join(root, name)
        if os.path.isdir(path) and not os.path.islink(path):
            for kept, suffix in (("train.log", ".log"), ("metrics.jsonl", ".metrics.jsonl")):
                if os.path.exists(os.path.join(path, kept)):
                    os.replace(os.path.join(path, kept), path + suffix)
            shutil.rmtree(path)


def estimate_run(runner) -> bool:
    """Probes what is left to do, prints the estimate and keeps it in estimate.json;
    False when a signal stopped the runner."""
    plan, started = runner.plan, time.time()
    to_train = [v for v in plan.variants if not runner.trained(v)]
    trainings, backend = [], "unknown"
    for number, variant in enumerate(to_train, start=1):
        print(f"probe {number}/{len(to_train)}: {variant}, {PROBE_ITERATIONS} iterations in "
              f"{os.path.join(probe_root(runner.workdir), variant)}", flush=True)
        probed = probe_training(runner, variant, runner.shares[0])
        if probed is None:
            print("stopped during the probe: nothing was trained; run the same command again", flush=True)
            return False
        measured, backend = probed
        trainings.append(measured)
        print(f"  compile {measured.compile_seconds:.0f} s, {measured.iteration_seconds:.2f} s an iteration, "
              f"{measured.iterations_needed - measured.iterations_done} iterations to go "
              f"[{measured.probe_seconds:.0f} s]", flush=True)
    matches = estimate.pending_matches(plan.variants, points=plan.points, games=plan.games,
                                       final_games=plan.final_games, done=matches_done(runner))
    evaluation = None
    if matches:
        run_dir = os.path.join(probe_root(runner.workdir), to_train[0]) if to_train else runner.run_dir(
            matches[0].variant)
        print(f"probe: evaluation games against {runner.opponent} at {plan.simulations} simulations", flush=True)
        evaluation = probe_evaluation(runner, f"{run_dir}@0")
        if evaluation is None:
            return False
    remove_scratch(runner.workdir)
    side_by_side = 1 if backend == "cpu" else runner.parallel  # trainings sharing the CPU run no faster at once
    forecast = estimate.forecast(trainings, evaluation, matches, points=plan.points, parallel=side_by_side)
    path, probe_seconds = os.path.join(runner.workdir, "estimate.json"), time.time() - started
    print("\n".join(estimate.summary_lines(forecast, trainings, evaluation, parallel=runner.parallel,
                                            backend=backend, probe_seconds=probe_seconds, path=path)), flush=True)
    estimate.save(path, forecast, trainings, evaluation, parallel=runner.parallel, backend=backend,
                  probe_seconds=probe_seconds, made_at=time.time())
    return True
