"""Perft: leaf counts of the legal-move tree, against known values and cshogi."""

import os
import subprocess
import sys

import cshogi
import pytest

from conftest import ROOT
from envs import notation
from envs.perft import perft


def _cshogi_perft(sfen: str, depth: int) -> list[int]:
    board = cshogi.Board(sfen)
    counts = [0] * depth

    def walk(d):
        moves = list(board.legal_moves)
        counts[d] += len(moves)
        if d + 1 < depth:
            for move in moves:
                board.push(move)
                walk(d + 1)
                board.pop()

    walk(0)
    return counts


@pytest.mark.slow  # perft(5) and the lockstep/dense tests cover it; ~50 s
def test_perft__standard_start_to_depth_3():
    assert perft(notation.STARTPOS_SFEN, 3) == [30, 900, 25470]


@pytest.mark.slow
def test_perft__standard_start_to_depth_5():
    assert perft(notation.STARTPOS_SFEN, 5) == [30, 900, 25470, 719731, 19861490]


@pytest.mark.slow
def test_perft__pgx_reference_core_agrees_to_depth_3():
    assert perft(notation.STARTPOS_SFEN, 3, core="pgx") == [30, 900, 25470]


@pytest.mark.parametrize(
    "sfen",
    [
        "ln1gk1snl/2s3gb1/2pppppp1/pr6p/9/P6RP/1PPPPPP2/1BG3S2/LNS1KG1NL b Pp 23",  # book line, pawns in hand
        "l6nl/5+P1gk/2np1S3/p1p4Pp/3P2Sp1/1PPb2P1P/P5GS1/R8/LN4bKL w RGgsn5p 1",  # drops everywhere
        "6R2/8k/9/6NG1/9/9/9/9/K8 b P 1",  # pawn-drop mate at the edge
    ],
)
def test_perft__matches_cshogi_to_depth_2(sfen):
    assert perft(sfen, 2) == _cshogi_perft(sfen, 2)


def _run_cli(*args, timeout=300):
    env = dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu"))
    return subprocess.run(
        [sys.executable, "-m", "envs.perft", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=timeout
    )


@pytest.mark.slow
def test_perft_cli__prints_counts():
    result = _run_cli("--depth", "2")
    assert result.returncode == 0, result.stderr
    assert "perft(1) = 30" in result.stdout and "perft(2) = 900" in result.stdout
    result = _run_cli("--depth", "0")
    assert result.returncode == 2 and "--depth must be >= 1" in result.stderr


def test_perft_cli__rejects_a_malformed_sfen():
    """Rejected by argparse (exit 2) and never handed to cshogi (which would abort)."""
    result = _run_cli("--depth", "1", "--sfen", "lnsgkgsnl/9 b - 1")
    assert result.returncode == 2 and "9 ranks" in result.stderr
