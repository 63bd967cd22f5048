"""bench/gpu_training.sh, the one device call that trains a preset for a wall-time budget
and measures it: its plan (fast), its bad arguments (fast), and its CPU rehearsal
``--quick`` (slow: a smoke run, its matches and its speed, minutes on 2 cores)."""

import json
import os
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "bench" / "gpu_training.sh"


def _script(*args, timeout=60):
    return subprocess.run(["bash", str(SCRIPT), *map(str, args)], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_gpu_training__plan_trains_the_preset_for_its_minutes_then_measures_it(tmp_path):
    preset = "configs/shogi816k_randomstart2.py:size=gpu_short,recipe=small"
    result = _script(tmp_path, preset, "--minutes", "6", "--plan")
    assert result.returncode == 0, result.stderr
    lines = result.stdout.splitlines()
    train, teacher, greedy, heuristic, speed = lines
    assert f"train.py --config {preset} --workdir runs/gpu_training --budget_minutes 6" in train
    assert train.startswith("timeout -s TERM")
    split = "test" if (ROOT / "data" / "teacher_test.tsv").exists() else "heldout"
    assert "-m az.play.report teacher runs/gpu_training --simulations 0,16" in teacher and f"--split {split}" in teacher
    openings = "data/openings_test.tsv" if (ROOT / "data" / "openings_test.tsv").exists() else "data/openings.tsv"
    for line, opponent in ((greedy, "greedy"), (heuristic, "heuristic?depth=1")):
        assert f"eval.py --checkpoint runs/gpu_training --opponent {opponent} --simulations 16" in line
        assert f"--openings {openings}" in line
        assert int(line.split("--games ")[1].split()[0]) >= 100
    assert f"bench/train_bench.py --config {preset} --fused-only" in speed
    assert "--compilation-cache runs/gpu_training/jax_cache" in speed


def test_gpu_training__default_preset_is_the_gpu_recipe(tmp_path):
    result = _script(tmp_path, "--plan")
    assert result.returncode == 0, result.stderr
    assert "--config configs/shogi816k_randomstart2.py:size=gpu_short,recipe=small " in result.stdout
    # Five minutes plus the guard's 45 s, the evaluation and the speed fit a 10-minute device call.
    assert "--budget_minutes 5" in result.stdout and result.stdout.startswith("timeout -s TERM --kill-after=60 345 ")


@pytest.mark.parametrize("args, culprit", [
    ([], "no OUTDIR"),
    (["OUT", "configs/nope.py:cpu"], "no config file configs/nope.py"),
    (["OUT", "--minutes", "six"], "--minutes six"),
    (["OUT", "--games", "0"], "--games 0"),
    (["OUT", "--fast"], "unknown option --fast"),
])
def test_gpu_training__bad_arguments_are_one_line(args, culprit):
    result = _script(*args, "--plan")
    assert result.returncode == 2
    assert len(result.stderr.splitlines()) == 1 and culprit in result.stderr, result.stderr


@pytest.mark.slow
def test_gpu_training__quick_rehearses_every_step_on_the_cpu(tmp_path):
    """The whole script at smoke size: training fits its budget, the three evaluations and
    the speed measurement write the files the device call brings back."""
    env = dict(os.environ, JAX_PLATFORMS="cpu")
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path), "--quick"], cwd=ROOT, capture_output=True,
                            text=True, timeout=1800, env=env)
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    names = sorted(os.listdir(tmp_path))
    assert names == sorted(["train.log", "metrics.jsonl", "budget.json", "speed.json", "teacher.json",
                            "vs_greedy.json", "vs_heuristic.json", "timings.txt"]), names
    budget = json.loads((tmp_path / "budget.json").read_text())
    assert budget["budget_minutes"] == 1.5 and budget["budget_games"] >= 1
    speed = json.loads((tmp_path / "speed.json").read_text())
    assert speed["learning_on_positions_per_s"] > 0 and speed["learning_off_positions_per_s"] > 0
    for name in ("vs_greedy", "vs_heuristic"):
        assert json.loads((tmp_path / f"{name}.json").read_text())["games"] == 4
    assert [line.split()[0] for line in (tmp_path / "timings.txt").read_text().splitlines()
            if line.split()[-1] == "s"][:2] == ["trained", "evaluated"]


def _train_bench(*args, timeout=900, cache=True):
    """bench/train_bench.py ARGS on the CPU; without ``cache``, JAX_COMPILATION_CACHE_DIR
    (the test session's cache, which takes precedence over --compilation-cache) unset."""
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    if not cache:
        env.pop("JAX_COMPILATION_CACHE_DIR", None)
    return subprocess.run([sys.executable, str(ROOT / "bench" / "train_bench.py"), *args], cwd=ROOT,
                          capture_output=True, text=True, timeout=timeout, env=env)


def test_train_bench__unwritable_compilation_cache_is_one_line(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    result = _train_bench("--fused-only", "--compilation-cache", str(blocker / "cache"), timeout=60, cache=False)
    assert result.returncode == 2
    assert result.stderr.strip().splitlines() == [f"error: --compilation-cache {blocker / 'cache'}: cannot be written"]


@pytest.mark.slow
def test_train_bench__fused_only_times_learning_beside_selfplay_alone(tmp_path):
    """``--quick --fused-only``: one compile (the iteration), learning on and off, as JSON."""
    result = _train_bench("--quick", "--fused-only", "--json", str(tmp_path / "speed.json"),
                          "--config.search.mate_in_one=False")
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    speed = json.loads((tmp_path / "speed.json").read_text())
    positions = speed["games"] * speed["plies"]
    for mode in ("on", "off"):
        assert speed[f"learning_{mode}_positions_per_s"] == pytest.approx(positions / speed[f"learning_{mode}_s"])
    assert "learning's share of an iteration" in result.stdout and "fused / sum" not in result.stdout
