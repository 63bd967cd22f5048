"""scripts/stall_study/gpu_screen.sh, a screen of the stall study's arms at equal games on
one GPU, and screen_curves.py, which averages its runs' logged curves over the seeds:
bad arguments (fast), the curves on recorded metrics (fast), the CPU rehearsal ``--quick``
(slow: two smoke runs at once)."""

import gzip
import importlib.util
import json
import subprocess
import sys
import tarfile

import pytest

from conftest import ROOT

SCRIPT = ROOT / "scripts" / "stall_study" / "gpu_screen.sh"


def _curves_module():
    spec = importlib.util.spec_from_file_location("screen_curves", ROOT / "scripts" / "stall_study" / "screen_curves.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.mark.parametrize("args, culprit", [
    ([], "an OUTDIR and at least one arm"),
    (["out"], "an OUTDIR and at least one arm"),
    (["out", "--minutes", "x", "control="], "--minutes x"),
    (["out", "--bogus", "control="], "unknown option --bogus"),
])
def test_gpu_screen__bad_arguments_are_one_line(args, culprit):
    result = subprocess.run(["bash", str(SCRIPT), *args], cwd=ROOT, capture_output=True, text=True, timeout=30)
    assert result.returncode == 2
    assert result.stderr.count("\n") == 1 and culprit in result.stderr


def _write_run(folder, rows, compress):
    folder.mkdir(parents=True)
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if compress:
        with gzip.open(folder / "metrics.jsonl.gz", "wt") as f:
            f.write(text)
    else:
        (folder / "metrics.jsonl").write_text(text)


def test_screen_curves__means_over_seeds_up_to_the_games_every_seed_reached(tmp_path):
    def rows(games, top1, rho):
        return [{"games_finished": g, "teacher/top1": top1, "teacher/value_rank_correlation": rho} for g in games]

    # Seed 0 reaches 1,000 games, seed 1 only 600: the arm's bins stop at 500.
    _write_run(tmp_path / "runs" / "arm_s0", rows(range(50, 1001, 50), 0.10, 0.5), compress=False)
    _write_run(tmp_path / "runs" / "arm_s1", rows(range(50, 601, 50), 0.20, 0.7), compress=True)
    _write_run(tmp_path / "runs" / "other_s0", [{"games_finished": 10}] + rows([100, 300], 0.30, 0.9), compress=False)
    means = _curves_module().binned_means(str(tmp_path / "runs"), 250)
    assert means["arm"]["seeds"] == [0, 1]
    assert means["arm"]["games"] == [125, 375]
    assert means["arm"]["teacher/top1"] == pytest.approx([0.15, 0.15])
    assert means["arm"]["teacher/value_rank_correlation"] == pytest.approx([0.6, 0.6])
    assert means["other"]["games"] == [125] and means["other"]["teacher/top1"] == pytest.approx([0.30])


def test_screen_curves__draws_the_plot_and_writes_its_numbers(tmp_path):
    rows = [{"games_finished": g, "teacher/top1": g / 10_000, "teacher/value_rank_correlation": 0.5} for g in range(50, 801, 50)]
    _write_run(tmp_path / "runs" / "control_s0", rows, compress=False)
    out = tmp_path / "curves.png"
    result = subprocess.run([sys.executable, str(ROOT / "scripts" / "stall_study" / "screen_curves.py"), str(tmp_path / "runs"),
                             "--out", str(out)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    assert out.stat().st_size > 10_000
    assert json.loads((tmp_path / "curves.json").read_text())["control"]["games"] == [125, 375, 625]


@pytest.mark.slow
def test_gpu_screen__quick_rehearses_two_arms_and_packs_what_the_device_returns(tmp_path):
    result = subprocess.run(["bash", str(SCRIPT), str(tmp_path), "--quick", "--seeds", "0", "--minutes", "3",
                             "control=", "b16=--config.learner.batch_size=16"],
                            cwd=ROOT, capture_output=True, text=True, timeout=400)
    assert result.returncode == 0, result.stderr[-2000:]
    for arm in ("control", "b16"):
        with tarfile.open(tmp_path / f"snapshots_{arm}.tar") as tar:
            assert any(n.startswith(f"runs/screen/{arm}_s0/snapshots/") for n in tar.getnames())
    with tarfile.open(tmp_path / "runs.tar") as tar:
        names = tar.getnames()
    assert "runs/screen/b16_s0/metrics.jsonl.gz" in names and "runs/screen/control_s0/config.json" in names
    assert "started 2 runs" in (tmp_path / "timings.txt").read_text()
