"""scripts/stall_study/endings.py, how a run's self-play games end over training: the bins
on recorded rows, the table, the plot and one line for a bad run (all fast)."""

import importlib.util
import json
import subprocess
import sys

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "stall_study" / "endings.py"


def _module():
    spec = importlib.util.spec_from_file_location("endings", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _row(games, finished, plies, mate=0, repetition=0, max_length=0, late=0, learned=True, rate=0.01):
    draws = repetition + max_length
    return {"games_finished": games, "learned": learned, "learner/learning_rate": rate,
            "selfplay/finished": finished, "selfplay/length_sum": plies, "selfplay/draws": draws,
            "selfplay/end/mate": mate, "selfplay/end/repetition": repetition, "selfplay/end/max_length": max_length,
            "selfplay/end/resignation": 0, "selfplay/end/declaration": 0, "selfplay/end/perpetual_check": 0,
            "selfplay/scheme/random_start(2)/draw": min(late, draws),
            "selfplay/scheme/random_start(2)/black_win": late - min(late, draws),
            "selfplay/scheme/random_start(2)/white_win": 0}


def test_endings__bins_shares_by_finished_games():
    rows = [
        {"games_finished": 0, "teacher/top1": 0.1},  # a teacher-only row is skipped
        _row(0, 0, 0, learned=False),  # no game finished yet: no bin of its own
        _row(40, 4, 400, mate=4, learned=False),
        _row(90, 6, 900, mate=4, max_length=2, rate=0.02),
        _row(120, 10, 2000, mate=5, repetition=3, max_length=2, late=10, rate=0.004),
    ]
    table = _module().binned_endings(rows, 100)
    assert [t["games"] for t in table] == [0, 100]
    first, second = table
    assert first["finished"] == 10 and first["plies"] == pytest.approx(130)
    assert first["mate"] == pytest.approx(0.8) and first["max_length"] == pytest.approx(0.2) and first["draw"] == pytest.approx(0.2)
    assert first["late_scheme"] == 0 and first["learning_rate"] == pytest.approx(0.02)
    assert second["repetition"] == pytest.approx(0.3) and second["draw"] == pytest.approx(0.5)
    assert second["late_scheme"] == pytest.approx(1.0) and second["plies"] == pytest.approx(200)


def test_endings__prints_the_table_and_draws_the_plot(tmp_path):
    run = tmp_path / "arm_s1"
    run.mkdir()
    rows = [_row(g, 8, 8 * 120, mate=6, repetition=1, max_length=1) for g in range(0, 400, 8)]
    (run / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    out = tmp_path / "endings.png"
    result = subprocess.run([sys.executable, str(SCRIPT), str(run), "--bin", "100", "--out", str(out)],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert "| 100 | 120 | 75.0% | 12.5% | 12.5% | 0.0% | 25.0% |" in result.stdout
    assert out.stat().st_size > 10_000
    assert [t["games"] for t in json.loads((tmp_path / "endings.json").read_text())["arm_s1"]] == [0, 100, 200, 300]


@pytest.mark.parametrize("make, culprit", [
    (lambda d: None, "no such folder"),
    (lambda d: d.mkdir(), "no metrics.jsonl"),
    (lambda d: (d.mkdir(), (d / "metrics.jsonl").write_text('{"games_finished": 0, "teacher/top1": 0.1}\n')), "no selfplay/finished"),
])
def test_endings__a_bad_run_is_one_line(tmp_path, make, culprit):
    run = tmp_path / "run"
    make(run)
    result = subprocess.run([sys.executable, str(SCRIPT), str(run), "--out", str(tmp_path / "x.png")],
                            capture_output=True, text=True, timeout=60)
    assert result.returncode == 1
    assert result.stderr.count("\n") == 1 and culprit in result.stderr
