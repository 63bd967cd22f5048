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
    deadline = time.time() + 900
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
    assert "estimate from" in rerun.stdout
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
