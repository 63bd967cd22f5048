"""bench/engine_start.py: engines started at once as a match runner starts them.

The fast test drives its game loop and report with the fake engine (no JAX); the slow
one runs ``--quick`` (a smoke snapshot, the network engine against the classical one on
cold caches, then warm ones)."""

import re
import subprocess
import sys

import pytest

from conftest import ROOT

FAKE = [sys.executable, str(ROOT / "tests" / "fake_usi_engine.py")]


@pytest.fixture
def engine_start(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))
    import engine_start

    return engine_start


def test_engine_start__two_games_at_once_are_timed_and_reported(engine_start):
    rows = engine_start.run_games({"network": FAKE, "classical": FAKE}, 2, plies=5, byoyomi_ms=1000, max_moves=320,
                                  handshake_s=30)
    assert [row["engine"] for row in rows] == ["network1", "classical1", "network2", "classical2"]
    for row in rows:
        assert 0 < row["readyok_s"] < 30
        assert len(row["moves_s"]) == (3 if row["engine"].startswith("network") else 2)  # black moves first
        assert all(0 < s < 5 for s in row["moves_s"])
        assert 0 < row["limit_change_s"] < 5
    rows[1]["readyok_s"], rows[1]["moves_s"], rows[1]["limit_change_s"] = None, [], None
    lines = engine_start.report("cold x2", rows, 1000, 120)
    slowest = max(rows[0]["moves_s"])
    assert lines[0] == (f"cold x2: network1   readyok {rows[0]['readyok_s']:6.1f} s, 3 moves, slowest "
                        f"{slowest:5.2f} s = {slowest:.2f} x byoyomi, new MaxMovesToDraw readyok "
                        f"{rows[0]['limit_change_s']:.2f} s")
    assert lines[1] == "cold x2: classical1 no readyok in 120 s (LOST)"


def test_engine_start__a_missed_handshake_plays_no_game(engine_start):
    silent = [sys.executable, "-c", "import time; time.sleep(30)"]
    rows = engine_start.run_games({"network": silent, "classical": FAKE}, 1, plies=2, byoyomi_ms=1000,
                                  max_moves=320, handshake_s=1)
    assert rows[0]["readyok_s"] is None and rows[0]["moves_s"] == []
    assert rows[1]["readyok_s"] is not None and rows[1]["moves_s"] == []
    assert rows[0]["limit_change_s"] is None and 0 < rows[1]["limit_change_s"] < 5


@pytest.mark.slow
def test_engine_start__quick(tmp_path):
    """One game on cold caches, then on the warm ones: both engines ready within the
    handshake, every move within the byoyomi and a margin, the warm starts sooner."""
    result = subprocess.run([sys.executable, str(ROOT / "bench" / "engine_start.py"), "--quick"], cwd=ROOT,
                            capture_output=True, text=True, timeout=1500)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    ready, slowest, changes = {}, {}, {}
    for line in result.stdout.splitlines():
        match = re.match(r"(cold|warm) x1: (\w+) +readyok +([\d.]+) s, \d+ moves, slowest +([\d.]+) s"
                         r".*, new MaxMovesToDraw readyok ([\d.]+) s$", line)
        assert match, line
        cache, engine, ready_s, slowest_s, change_s = match.groups()
        ready[cache, engine], slowest[cache, engine] = float(ready_s), float(slowest_s)
        changes[cache, engine] = float(change_s)
    assert set(ready) == {(c, e) for c in ("cold", "warm") for e in ("network1", "classical1")}
    assert all(s < 1.5 for s in slowest.values()), slowest
    assert all(s < 2.0 for s in changes.values()), changes  # a limit is a value: nothing compiles
    assert ready["warm", "network1"] < ready["cold", "network1"], ready
    assert ready["warm", "classical1"] < ready["cold", "classical1"], ready
