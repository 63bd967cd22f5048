"""Smoke test of bench/env_bench.py (--quick). It compiles a dozen programs, which takes
minutes on a 2-core CPU, hence slow."""

import os
import re
import subprocess
import sys

import pytest

from conftest import ROOT


@pytest.mark.slow
def test_env_bench__quick_run_reports_every_measurement():
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "env_bench.py"), "--quick"],
        cwd=ROOT,
        env=dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu")),
        capture_output=True,
        text=True,
        timeout=900,
    )
    assert result.returncode == 0, result.stderr[-3000:]
    out = result.stdout
    assert "batch 64" in out and "batch 256" not in out
    for what in ("step", "mask"):
        pgx_rate = float(re.search(rf"{what}  pgx\s+(\d+) /s", out).group(1))
        ours = re.search(rf"{what}  ours\s+(\d+) /s.*ours/pgx = ([\d.]+)x", out)
        assert pgx_rate > 0 and float(ours.group(1)) > 0
        assert abs(float(ours.group(2)) - float(ours.group(1)) / pgx_rate) < 0.06 * float(ours.group(2)) + 0.06
    assert re.search(r"compile pgx\s+[\d.]+ s, \d+ gathers, \d+ scatters", out)
    assert re.search(r"compile ours\s+[\d.]+ s, 0 gathers, 0 scatters  \[PASS", out)
    for scheme in ("standard", "random_start(2)", "shogi816k", "book(openings)"):
        assert re.search(rf"reset {re.escape(scheme)}\s+[\d.]+ steps", out), scheme
    assert "perft(3) = 25470" in out
    assert len(re.findall(r"\[(PASS|FAIL)", out)) == 4  # no gathers, and three resets


def test_env_bench__rejects_bad_flags():
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "env_bench.py"), "--batch-sizes", "64,x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2 and "--batch-sizes" in result.stderr
