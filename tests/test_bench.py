"""Smoke test of bench/env_bench.py (--quick). It compiles seven programs, which takes
about a minute on a 2-core CPU (more when it is busy), hence slow."""

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
    pgx_sps = float(re.search(r"pgx\s+(\d+) steps/s", out).group(1))
    ours = re.search(r"ours\s+(\d+) steps/s\s+ours/pgx = ([\d.]+)x\s+\[(PASS|FAIL)", out)
    assert pgx_sps > 0 and float(ours.group(1)) > 0
    assert abs(float(ours.group(2)) - float(ours.group(1)) / pgx_sps) < 0.02
    assert re.search(r"ours\+observe\s+\d+ steps/s", out)
    for scheme in ("standard", "random_start(2)", "shogi816k", "book(openings)"):
        assert re.search(rf"reset {re.escape(scheme)}\s+[\d.]+ steps", out), scheme
    assert len(re.findall(r"\[(PASS|FAIL)", out)) == 4  # the step target and three resets


def test_env_bench__rejects_bad_flags():
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "env_bench.py"), "--batch-sizes", "64,x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2 and "--batch-sizes" in result.stderr
