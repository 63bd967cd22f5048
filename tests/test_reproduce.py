"""The six-variant reproduction runner (az/reproduce.py, reproduce.py)."""

import json
import os
import signal
import subprocess
import sys
import time

import pytest

from az import reproduce, workdir as workdir_lib

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

FAIRY = "/usr/games/fairy-stockfish"


def test_plan_presets_and_bad_values():
    plan = reproduce.make_plan("smoke")
    assert plan.variants == reproduce.VARIANTS and plan.points >= 2 and plan.final_games >= plan.games
    assert reproduce.make_plan("gpu").simulations == 800  # the paper's evaluation
    assert reproduce.make_plan("cpu", variants="base, shogi816k", games=10).variants == ("base", "shogi816k")
    for kwargs, culprit in [({"variants": "base,chess960"}, "--variants"), ({"variants": "base,base"}, "--variants"),
                            ({"games": 0}, "--games"), ({"points": 1}, "--points"),
                            ({"final_games": -3}, "--final-games"), ({"balance_positions": -1}, "--balance-positions")]:
        with pytest.raises(reproduce.ReproductionError, match=culprit):
            reproduce.make_plan("smoke", **kwargs)
    with pytest.raises(reproduce.ReproductionError, match="--preset 'tpu'"):
        reproduce.make_plan("tpu")
    # Every preset of the plan is one train.py takes, for every variant.
    for preset in reproduce.EVALUATION:
        for variant in reproduce.VARIANTS:
            assert reproduce.variant_config(variant, preset).name == variant


def test_side_by_side_shares(monkeypatch):
    assert reproduce.device_shares(1) == [None]
    with pytest.raises(reproduce.ReproductionError, match="--parallel must be >= 1, got 0"):
        reproduce.Runner("/tmp/unused", reproduce.make_plan("smoke", opponent="greedy"), parallel=0)
    assert reproduce.Runner("/tmp/unused", reproduce.make_plan("smoke", opponent="greedy")).parallel == 1


def test_a_relative_workdir_reaches_the_children(tmp_path, monkeypatch):
    """The children (trainers, evaluator) run in the repository: the runner hands them its
    workdir resolved against the caller's folder, wherever reproduce.py was started."""
    monkeypatch.chdir(tmp_path)
    runner = reproduce.Runner("runs/paper", reproduce.make_plan("smoke", opponent="greedy"))
    assert runner.workdir == str(tmp_path / "runs" / "paper")


def test_a_rerun_must_ask_for_the_same(tmp_path):
    plan = reproduce.make_plan("smoke", variants="base")
    reproduce.load_or_save_plan(str(tmp_path), plan)
    assert reproduce.read_plan(str(tmp_path)) == plan
    reproduce.load_or_save_plan(str(tmp_path), plan)  # the same: resumes
    with pytest.raises(reproduce.ReproductionError, match="games: 2 there, 6 now"):
        reproduce.load_or_save_plan(str(tmp_path), reproduce.make_plan("smoke", variants="base", games=6))


def _write_run(run_dir, games_per_iteration: list[int], saved: list[int]):
    os.makedirs(os.path.join(run_dir, "snapshots"), exist_ok=True)
    for step in saved:
        os.makedirs(os.path.join(run_dir, "snapshots", str(step)))
    total = 0
    with open(os.path.join(run_dir, "metrics.jsonl"), "w", encoding="utf-8") as f:
        for i, g in enumerate(games_per_iteration, start=1):
            total += g
            f.write(json.dumps({"iteration": i, "games_finished": total, "selfplay/length_sum": 40.0 * g}) + "\n")
        f.write('{"iteration": 3, "games_fin')  # a line cut by a kill is skipped


def test_which_snapshots_are_evaluated(tmp_path):
    run = str(tmp_path / "base")
    _write_run(run, [0, 8, 8, 8, 8, 8, 8, 8, 8, 8], saved=[0, 2, 4, 6, 8, 10])  # 72 games by iteration 10
    rows = workdir_lib.metrics_rows(run)
    assert [r["iteration"] for r in rows] == list(range(1, 11))
    saved = [0, 2, 4, 6, 8, 10]
    # 64 games, 4 points: 0, the first snapshots at >= 21.3 and >= 42.7 games (24 games at
    # iteration 4, 56 at 8), the last.
    assert reproduce.evaluation_steps(rows, saved, 64, 4, trained=True) == [0, 4, 8, 10]
    assert reproduce.evaluation_steps(rows, saved, 64, 4, trained=False) == [0, 4, 8]
    assert reproduce.evaluation_steps(rows, saved, 64, 2, trained=True) == [0, 10]
    assert reproduce.evaluation_steps(rows[:2], [0, 2], 64, 4, trained=False) == [0]  # nothing far enough yet
    assert reproduce.is_trained(run, 64) and not reproduce.is_trained(run, 100)
    os.rmdir(os.path.join(run, "snapshots", "10"))
    assert not reproduce.is_trained(run, 64)  # the last iteration's snapshot is not saved yet


def test_iterations_from_the_planning_length_then_the_measured_one():
    config = reproduce.variant_config("base", "smoke")  # 64 games, 8 x 8 positions per iteration, 48-ply cap
    assert reproduce.iterations_needed(config, []) == 64 * 48 // 64
    rows = [{"iteration": 1, "games_finished": 8, "selfplay/length_sum": 8 * 24.0}]
    assert reproduce.iterations_needed(config, rows) == 64 * 24 // 64
    assert reproduce.format_duration(3725.4) == "1:02:05"


def test_match_summary_needs_enough_games(tmp_path):
    out = tmp_path / "step_4"
    out.mkdir()
    (out / "results.json").write_text(json.dumps({"summary": {"games": 2, "score": 0.5}}))
    assert reproduce.match_summary(str(out), 2)["score"] == 0.5
    assert reproduce.match_summary(str(out), 4) is None  # the final match plays on from there
    assert reproduce.match_summary(str(tmp_path / "missing"), 1) is None


def test_bad_opponent_is_one_line_before_anything_starts(tmp_path):
    workdir = tmp_path / "paper"
    run = subprocess.run([sys.executable, "reproduce.py", "--preset", "smoke", "--workdir", str(workdir),
                          "--opponent", "usi:/nonexistent/engine"], cwd=REPO, capture_output=True, text=True,
                         timeout=120)
    assert run.returncode == 1
    assert run.stderr.strip().splitlines() == ["error: --opponent 'usi:/nonexistent/engine': engine binary "
                                               "'/nonexistent/engine' not found or not executable"]
    assert not (workdir / "plan.json").exists()


def test_results_table_and_fig3(tmp_path):
    final = {"games": 4, "wins": 1, "draws": 1, "losses": 2, "score": 0.375, "elo": -88.7, "elo_low": -400.0,
             "elo_high": 200.0, "openings": {"Yagura": {"score": 0.5, "wins": 1, "draws": 0, "losses": 1},
                                                        "Ranging Rook": {"score": 0.25, "wins": 0, "draws": 1, "losses": 1}}}
    results = {"plan": {"preset": "smoke", "simulations": 2, "final_games": 4}, "opponent": "fairy-stockfish?nodes=100",
               "table2": {"random_start(2)": {"positions": 6, "mean": 80.0, "std": 30.5}},
               "variants": {"base": {"iterations": 48, "games": 64, "training_seconds": 125.0, "final": final,
                                     "teacher_top1": 0.042, "curve": []}}}
    text = reproduce.results_markdown(results, teacher=True)
    assert "| base | 48 | 64 | 0:02:05 | +1 =1 -2 | 0.375 | -89 [-400, +200] | 4.2% |" in text
    assert "| `random_start(2)` | 6 | +80.0 | 30.5 |" in text
    reproduce.plot_openings_by_variant({"base": final, "shogi816k": final}, str(tmp_path / "fig3.png"),
                                   opponent="fairy-stockfish?nodes=100")
    assert (tmp_path / "fig3.png").stat().st_size > 1000


@pytest.mark.slow
@pytest.mark.promise
@pytest.mark.skipif(not os.path.exists(FAIRY), reason="needs fairy-stockfish (make engines)")
def test_smoke_reproduction_end_to_end_after_a_kill(tmp_path):
    """The whole pipeline at smoke size on two variants, killed (SIGKILL) during the first
    variant's training and run again: training resumes where it saved, the figures and
    the table come out."""
    workdir = tmp_path / "paper"
    command = [sys.executable, "reproduce.py", "--preset", "smoke", "--workdir", str(workdir),
               "--variants", "base,shogi816k_randomstart2"]
    first = subprocess.Popen(command, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    deadline = time.time() + 1500  # the probe comes first
    while time.time() < deadline and len(workdir_lib.metrics_rows(str(workdir / "base"))) < 6:
        time.sleep(1)
    first.send_signal(signal.SIGKILL)
    first.wait()
    killed_at = len(workdir_lib.metrics_rows(str(workdir / "base")))
    assert killed_at >= 6
    time.sleep(20)  # the trainer, sent SIGTERM by the kernel as its parent died, saves and exits
    saved = workdir_lib.metrics_rows(str(workdir / "base"))[-1]["iteration"]
    assert saved in workdir_lib.snapshot_steps(str(workdir / "base"))

    rerun = subprocess.run(command, cwd=REPO, capture_output=True, text=True, timeout=1800)
    assert rerun.returncode == 0, rerun.stdout[-3000:] + rerun.stderr[-3000:]
    assert "estimate before training" in rerun.stdout and "estimate from" in rerun.stdout
    # The probe ran base's real config in a scratch folder: its iterations are base's first
    # ones, number for number, and it left nothing in base's workdir but what training wrote.
    with open(workdir / "probe" / "base.metrics.jsonl", encoding="utf-8") as f:
        probed = [json.loads(line) for line in f]
    trained = workdir_lib.metrics_rows(str(workdir / "base"))
    fields = ("iteration", "games_finished", "selfplay/length_sum", "loss")
    assert [[r.get(k) for k in fields] for r in probed] == [[r.get(k) for k in fields] for r in trained[:len(probed)]]
    assert sorted(p.name for p in (workdir / "probe").iterdir()) == [
        "base.log", "base.metrics.jsonl", "eval.log", "shogi816k_randomstart2.log",
        "shogi816k_randomstart2.metrics.jsonl"]
    assert json.loads((workdir / "estimate.json").read_text())["total_seconds"] > 0
    log = (workdir / "base" / "train.log").read_text()
    assert "resumed from" in log and f"at iteration {saved}" in log
    for name in ("fig2_elo.png", "fig2_teacher.png", "fig3_openings.png", "fig4_balance.png", "heatmaps.png"):
        assert (workdir / "figures" / name).stat().st_size > 1000, name
    results = json.loads((workdir / "results.json").read_text())
    plan = reproduce.read_plan(str(workdir))
    for variant in plan.variants:
        r = results["variants"][variant]
        assert r["games"] >= 64 and r["final"]["games"] == plan.final_games
        assert [p[-1] for p in r["curve"]][0] == 0 and len(r["curve"]) == plan.points
    assert set(results["table2"]) == set(reproduce.BALANCE_STARTS)
    assert "| base |" in (workdir / "results.md").read_text()


def test_variants_reach_the_shared_cache_by_one_path(tmp_path, monkeypatch):
    """JAX writes the cache's path into each program's compile options (its cache key):
    a variant's ``jax_cache`` link must resolve to the shared folder, or no entry is shared."""
    import jax

    shared = tmp_path / "jax_cache"
    shared.mkdir()
    for variant in ("base", "shogi816k"):
        (tmp_path / variant).mkdir()
        os.symlink(os.path.join("..", "jax_cache"), tmp_path / variant / "jax_cache")
    monkeypatch.delenv("JAX_COMPILATION_CACHE_DIR", raising=False)
    saved = jax.config.jax_compilation_cache_dir
    try:
        seen = set()
        for variant in ("base", "shogi816k"):
            assert workdir_lib.enable_compilation_cache(str(tmp_path / variant / "jax_cache"))
            seen.add(jax.config.jax_compilation_cache_dir)
        assert seen == {os.path.realpath(shared)}
    finally:
        jax.config.update("jax_compilation_cache_dir", saved)


def _probe(variant: str, iterations: int, *, done: int = 0) -> "reproduce.estimate.TrainingProbe":
    return reproduce.estimate.TrainingProbe(variant=variant, startup_seconds=10.0, compile_seconds=50.0,
                                            iteration_seconds=1.0, iterations_needed=iterations,
                                            iterations_done=done, probe_seconds=70.0)


def test_estimate__timeline_of_trainings_side_by_side_and_the_evaluator_beside():
    """Two variants of 100 s (10 s to start, 90 iterations of 1 s); the evaluator needs
    25 s to start (its compile, which the probe paid, is not counted), then 5 s a game
    (50 plies at 10 plies/s); 2 points of 2 games, the final of 4."""
    estimate = reproduce.estimate
    evaluation = estimate.EvaluationProbe(startup_seconds=25.0, compile_seconds=20.0, plies_per_second=10.0,
                                          plies_per_game=50.0, games_finished=1, match_overhead_seconds=0.0,
                                          balance_seconds=0.0, probe_seconds=30.0)
    trainings = [_probe("base", 90), _probe("shogi816k", 90)]
    matches = estimate.pending_matches(["base", "shogi816k"], points=2, games=2, final_games=4, done={})
    assert [(m.variant, m.point, m.games) for m in matches] == [("base", 0, 2), ("base", 1, 4),
                                                                ("shogi816k", 0, 2), ("shogi816k", 1, 4)]
    # One at a time: base 0-100, shogi816k 100-200. The evaluator plays base@0 at 25-35,
    # base's final at 100-120, shogi816k@0 (saved at 110) at 120-130, its final at 200-220.
    one = estimate.forecast(trainings, evaluation, matches, points=2, parallel=1)  # the compiles not counted
    assert one.spans == {"base": (0.0, 100.0), "shogi816k": (100.0, 200.0)}
    assert (one.training_seconds, one.evaluation_seconds, one.total_seconds) == (200.0, 85.0, 220.0)
    assert (one.matches, one.games) == (4, 12)
    # Two at once: both 0-100; the finals at 100-120 and 120-140, in the plan's order.
    two = estimate.forecast(trainings, evaluation, matches, points=2, parallel=2)
    assert (two.training_seconds, two.evaluation_seconds, two.total_seconds) == (100.0, 85.0, 140.0)
    # Resumed: base trained and evaluated, shogi816k at iteration 45 with its first match played.
    left = estimate.pending_matches(["base", "shogi816k"], points=2, games=2, final_games=4,
                                    done={"base": 2, "shogi816k": 1})
    resumed = estimate.forecast([_probe("shogi816k", 90, done=45)], evaluation, left, points=2, parallel=1)
    assert (resumed.training_seconds, resumed.total_seconds) == (55.0, 75.0)
    lines = estimate.summary_lines(two, trainings, evaluation, parallel=2, backend="gpu", probe_seconds=140.0,
                                   path="runs/paper/estimate.json")
    assert lines[0].startswith("estimate before training (0:02:20 of probing")
    assert [line.split()[0] for line in lines if not line.startswith("    ")][1:] == ["training", "evaluation", "total"]
    assert "0:01:40  2 variant(s) to train, 2 at a time, on gpu" in lines[1]
    assert "total       0:02:20" in lines[-1]


def test_estimate__steady_speed_is_the_median():
    assert reproduce.estimate.steady([1.0, 9.0, 1.2]) == 1.2
    assert reproduce.estimate.steady([1.0, 2.0]) == 1.5
    assert reproduce.estimate.waves(7, 2) == 4


# A stand-in for train.py in the runner's bookkeeping test: spends the smoke budget (64
# games) in 4 iterations of 0.4 s, saving snapshots 0 and 4, and notes when it ran.
_FAKE_TRAINER = """
import json, os, sys, time
run_dir = sys.argv[1]
started = time.time()
os.makedirs(os.path.join(run_dir, "snapshots", "0"), exist_ok=True)
for i in range(1, 5):
    time.sleep(0.4)
    with open(os.path.join(run_dir, "metrics.jsonl"), "a") as f:
        f.write(json.dumps({"iteration": i, "games_finished": 16 * i, "selfplay/length_sum": 640.0,
                            "positions_per_second": 100.0, "learned": False}) + "\\n")
os.makedirs(os.path.join(run_dir, "snapshots", "4"))
with open(os.path.join(run_dir, "ran.json"), "w") as f:
    json.dump([started, time.time(), sys.argv[2]], f)
"""


def test_runner__two_variants_side_by_side_bookkeeping(tmp_path, monkeypatch):
    """``--parallel 2`` on three variants, each train.py a stand-in: two start at once on
    shares of their own, the third takes the first freed share, each one's time is kept
    and all are trained."""
    from az.reproduce import training

    def fake_spawn(runner, variant, run_dir, share, *extra_args):
        os.makedirs(run_dir, exist_ok=True)
        return runner.children.spawn(["-c", _FAKE_TRAINER, run_dir, share], os.path.join(run_dir, "train.log"),
                                     os.path.join(run_dir, "train.lock"))

    monkeypatch.setattr(training, "spawn_train", fake_spawn)
    plan = reproduce.make_plan("smoke", opponent="greedy", variants="base,randomstart2,shogi816k")
    runner = reproduce.Runner(str(tmp_path), plan, parallel=2, progress_seconds=0.5)
    runner.shares = ["0", "1"]  # two GPUs' worth of shares, without asking JAX
    evaluator = subprocess.Popen([sys.executable, "-c", "pass"])
    evaluator.wait()
    assert runner._train_all(evaluator)
    ran = {v: json.loads((tmp_path / v / "ran.json").read_text()) for v in plan.variants}
    assert all(runner.trained(v) for v in plan.variants)
    assert ran["randomstart2"][0] < ran["base"][1] and ran["base"][0] < ran["randomstart2"][1]  # at once
    assert {ran["base"][2], ran["randomstart2"][2]} == {"0", "1"}  # each on a share of its own
    freed_by = next(v for v in ("base", "randomstart2") if ran[v][2] == ran["shogi816k"][2])
    assert ran["shogi816k"][0] >= ran[freed_by][1]  # on a share only once the one before it there had ended
    assert set(runner.timings.seconds) == set(plan.variants)
    assert all(1.6 <= runner.timings.get(v) < 60 for v in plan.variants)
    assert json.loads((tmp_path / "timings.json").read_text()) == runner.timings.seconds


@pytest.mark.slow
@pytest.mark.skipif(not os.path.exists(FAIRY), reason="needs fairy-stockfish (make engines)")
def test_smoke_reproduction_two_variants_at_once(tmp_path):
    """``--parallel 2`` at smoke size: the estimate says so, both variants train at the
    same time, both finish, their matches, the figures and the table come out, and the
    runner keeps each one's training time."""
    workdir = tmp_path / "paper"
    run = subprocess.run([sys.executable, "reproduce.py", "--preset", "smoke", "--workdir", str(workdir),
                          "--variants", "base,exploration_sh", "--parallel", "2"],
                         cwd=REPO, capture_output=True, text=True, timeout=2400)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "2 variant(s) to train, 2 at a time sharing the CPU's cores" in run.stdout
    estimate = json.loads((workdir / "estimate.json").read_text())
    assert estimate["parallel"] == 2 and set(estimate["spans"]) == {"base", "exploration_sh"}
    # Side by side: each started (wrote its config) before the other's last iteration.
    started = {v: (workdir / v / "config.json").stat().st_mtime for v in ("base", "exploration_sh")}
    ended = {v: (workdir / v / "metrics.jsonl").stat().st_mtime for v in ("base", "exploration_sh")}
    assert started["base"] < ended["exploration_sh"] and started["exploration_sh"] < ended["base"]
    timings = json.loads((workdir / "timings.json").read_text())
    results = json.loads((workdir / "results.json").read_text())
    plan = reproduce.read_plan(str(workdir))
    for variant in ("base", "exploration_sh"):
        assert reproduce.is_trained(str(workdir / variant), 64)
        assert f"{variant}: trained in" in run.stdout
        r = results["variants"][variant]
        assert r["training_seconds"] == timings[variant] > 0
        assert r["final"]["games"] == plan.final_games and len(r["curve"]) == plan.points
    for name in ("fig2_elo.png", "fig2_teacher.png", "fig3_openings.png", "fig4_balance.png", "heatmaps.png"):
        assert (workdir / "figures" / name).stat().st_size > 1000, name
    assert "| exploration_sh |" in (workdir / "results.md").read_text()


def test_probe__reads_xla_compile_seconds_from_its_log(tmp_path):
    """The probe runs with JAX_LOG_COMPILES=1: XLA's compiles (which the cache saves) are
    summed apart from tracing (which every start pays again)."""
    from az.reproduce import probe

    log = tmp_path / "train.log"
    log.write_text("devices: 1 x cpu (1 process(es))\n"
                   "W1202 dispatch.py:1] Finished tracing iteration for jit in 9.000000000 sec\n"
                   "W1202 pxla.py:1] Finished XLA compilation of jit(iteration) in 51.250000000 sec\n"
                   "W1202 pxla.py:1] Finished XLA compilation of jit(init) in 2.500000000 sec\n")
    assert probe.xla_compile_seconds(str(log)) == 53.75


def test_a_child_exits_at_once_with_its_status_and_its_output_flushed():
    """The evaluator's and the probe's last step: buffered output reaches the log, the
    status the runner, and a daemon thread still running does not hold the exit up."""
    code = ("import threading, time\n"
            "from az.reproduce import children\n"
            "threading.Thread(target=time.sleep, args=(60,), daemon=True).start()\n"
            "print('results written', end='')\n"
            "children.exit_at_once(3)\n")
    start = time.monotonic()
    result = subprocess.run([sys.executable, "-c", code], cwd=REPO, capture_output=True, text=True, timeout=60)
    assert (result.returncode, result.stdout) == (3, "results written"), result.stderr[-2000:]
    assert time.monotonic() - start < 30
