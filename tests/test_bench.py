"""The benchmarks in bench/: each runs with ``--quick`` (tiny sizes) in a subprocess and
its report is parsed and checked. Each compiles a dozen or so programs, minutes on a
2-core CPU, hence slow; the fast test traces the programs the benchmarks build
themselves (no compile), so a change of the APIs they call fails ``make test``."""

import json
import os
import re
import subprocess
import sys

import jax
import numpy as np
import pytest

from conftest import ROOT


def _run_quick(script: str, *args: str, timeout: int = 900) -> str:
    """``bench/SCRIPT --quick ARGS`` on the CPU; its stdout, after checking it exited 0."""
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / script), "--quick", *args],
        cwd=ROOT,
        env=dict(os.environ, JAX_PLATFORMS=os.environ.get("JAX_PLATFORMS", "cpu")),
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    return result.stdout


def _number(text: str) -> float:
    return float(text.replace(",", ""))


def _assert_ratio(printed: float, numerator: float, denominator: float):
    """``printed`` (2 decimals) is numerator / denominator, each printed to 3-4 digits."""
    assert numerator > 0 and denominator > 0
    assert abs(printed - numerator / denominator) <= 0.01 + 0.02 * printed, (printed, numerator, denominator)


@pytest.fixture
def bench_modules(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "bench"))  # the scripts import their siblings
    import mate_bench
    import search_bench
    import selfplay_bench

    return search_bench, selfplay_bench, mate_bench


def test_benchmarks__trace_what_they_build(bench_modules, rules):
    """Each loop of search_bench, selfplay_bench's pgx + mctx reference and mate_bench's
    positions trace at tiny sizes, with the shapes their reports read."""
    search_bench, selfplay_bench, mate_bench = bench_modules
    from az import network as network_lib
    from envs import starts

    batch, sims = 2, 3
    net = network_lib.AZNet(num_blocks=1, channels=8)
    params = jax.eval_shape(lambda: network_lib.init_params(net, jax.random.key(0)))
    start = jax.vmap(starts.make_start_fn("shogi816k", rules), in_axes=(0, None))
    games = jax.eval_shape(lambda: start(jax.random.split(jax.random.key(1), batch), 0.0))
    searches = [(policy, net.apply) for policy in search_bench.policies().values()]
    searches.append((search_bench.policies()["compact"], search_bench.free_network))
    for policy, apply_fn in searches:
        search = search_bench.make_search(policy, apply_fn, rules, simulations=sims, considered=2)
        out = jax.eval_shape(search, params, jax.random.key(2), games)
        assert out.action.shape == (batch,) and out.search_tree.parents.shape == (batch, sims + 1), policy

    reference, _, state = selfplay_bench.reference_loop(net, params, batch, sims, 2)
    assert jax.eval_shape(reference, params, jax.random.key(3), state).action.shape == (batch,)
    assert jax.eval_shape(lambda: mate_bench.positions(batch, 2, rules)).legal_action_mask.shape == (batch, 2187)


def test_search_bench__mean_deepest_path(bench_modules):
    # Depths [0, 1, 2, 1, 0] (node 4 never expanded) and [0, 1, 1, 2, 3]: per simulation
    # the deeper of the two is 1, 2, 2, 3.
    parents = np.array([[-1, 0, 1, 0, -1], [-1, 0, 0, 2, 3]])
    assert bench_modules[0].mean_deepest_path(parents) == 2.0


@pytest.mark.slow
def test_env_bench__quick_run_reports_every_measurement():
    out = _run_quick("env_bench.py")
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


@pytest.mark.slow
def test_search_bench__quick_run_times_three_loops():
    out = _run_quick("search_bench.py")
    rows = dict(re.findall(r"^(mctx loop|full tree|compact tree) +(\d.*)$", out, re.M))
    assert list(rows) == ["mctx loop", "full tree", "compact tree"], out
    seconds = {}
    for label, row in rows.items():
        fields = re.fullmatch(r"([\d.]+) s +([\d.]+) s +([\d.]+) s +[\d.]+ s +([\d.]+) +([\d.,]+)", row.strip())
        assert fields, row
        search_s, own_s, free_s, deepest, kib = (_number(f) for f in fields.groups())
        assert search_s > 0 and own_s > 0 and free_s > 0 and kib > 0
        assert 1 <= deepest <= 4  # n = 4: each simulation expands a node 1 to 4 plies deep
        seconds[label] = search_s, own_s, free_s
    pairs = re.findall(r"^(full tree|compact tree) vs (mctx loop|full tree): search ([\d.]+)x, own ([\d.]+)x, "
                       r"free net ([\d.]+)x faster$", out, re.M)
    assert [pair[:2] for pair in pairs] == [("full tree", "mctx loop"), ("compact tree", "mctx loop"),
                                            ("compact tree", "full tree")]
    for name, base, *ratios in pairs:
        for ratio, base_s, name_s in zip(ratios, seconds[base], seconds[name]):
            _assert_ratio(float(ratio), base_s, name_s)
    assert "target not judged at --quick sizes" in out


@pytest.mark.slow
def test_selfplay_bench__quick_run_against_pgx_and_mctx():
    out = _run_quick("selfplay_bench.py")
    rates = re.search(r"positions/s: ours ([\d.,]+), reference ([\d.,]+), ratio ([\d.]+)x \[(PASS|FAIL)", out)
    assert rates, out
    _assert_ratio(float(rates.group(3)), _number(rates.group(1)), _number(rates.group(2)))
    trees = re.search(r"positions/s: compact tree ([\d.,]+), full tree ([\d.,]+), ratio ([\d.]+)x \[(PASS|FAIL)", out)
    assert trees, out
    _assert_ratio(float(trees.group(3)), _number(trees.group(1)), _number(trees.group(2)))
    assert _number(trees.group(1)) == _number(rates.group(1))  # the compact tree is what we run
    shares = re.search(r"env (\d+)%, network (\d+)%, search bookkeeping and the rest (-?\d+)%", out)
    assert shares and abs(sum(int(s) for s in shares.groups()) - 100) <= 2
    memory = re.search(r"ours ([\d.,]+) kB, reference ([\d.,]+) kB", out)
    assert memory and _number(memory.group(1)) > 0 and _number(memory.group(2)) > 0


@pytest.mark.slow
def test_mate_bench__quick_run_costs_in_env_steps():
    out = _run_quick("mate_bench.py")
    line = re.search(r"batch +8: env step +([\d.]+) us/root, mate in one +([\d.]+) us/root = ([\d.]+) env steps "
                     r"\((\d+) of 8 roots", out)
    assert line, out
    _assert_ratio(float(line.group(3)), float(line.group(2)), float(line.group(1)))
    assert 0 <= int(line.group(4)) <= 8


@pytest.mark.slow
def test_train_bench__quick_run_times_iterations_and_parts():
    # The mate-in-one check off: a shorter compile, the same pieces timed.
    out = _run_quick("train_bench.py", "--config.search.mate_in_one=False")
    games, plies = (int(n) for n in re.search(r"(\d+) games x (\d+) plies", out).groups())
    iterations = re.findall(r"iteration, learning (on |off): +([\d.]+) s +([\d.]+) positions/s", out)
    assert [on for on, *_ in iterations] == ["on ", "off"], out
    for _, seconds, rate in iterations:  # seconds printed to 0.01
        assert float(rate) > 0 and abs(float(seconds) * float(rate) - games * plies) <= 0.0051 * float(rate)
    parts = re.findall(r"^  (self-play|add \+ label|learner step x \d+) +([\d.]+) s +(\d+)%$", out, re.M)
    assert [name for name, *_ in parts][:2] == ["self-play", "add + label"] and len(parts) == 3, out
    assert abs(sum(int(share) for *_, share in parts) - 100) <= 2
    assert re.search(r"fused / sum of parts = [\d.]+  \(not judged at --quick\)", out)


def test_env_bench__rejects_bad_flags():
    result = subprocess.run(
        [sys.executable, str(ROOT / "bench" / "env_bench.py"), "--batch-sizes", "64,x"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 2 and "--batch-sizes" in result.stderr


def _tpu_python() -> str:
    """``.venv-tpu``'s interpreter (libtpu), built by ``make tpu-venv``."""
    path = ROOT / ".venv-tpu" / "bin" / "python"
    if path.exists():
        return str(path)
    message = f"{path} is missing (make tpu-venv)"
    if os.environ.get("AZSHOGI_STRICT_DEPS"):
        pytest.fail(message + "; AZSHOGI_STRICT_DEPS requires it")
    pytest.skip(message)


@pytest.mark.tpu_plan
def test_tpu_plan__smoke_config_on_four_v5e_chips():
    """Compiled for a v5e:2x2 topology on this CPU: memory per chip, the cost model of each
    piece and the collectives, none of them buffer-sized."""
    result = subprocess.run(
        [_tpu_python(), str(ROOT / "bench" / "tpu_plan.py"), "--config", str(ROOT / "configs" / "base.py") + ":smoke",
         "--topology", "v5e:2x2", "--config.replay.capacity=16384", "--config.search.mate_in_one=False",
         "--config.selfplay.full_search_fraction=1.0", "--config.selfplay.resign=False"],  # a quicker compile
        cwd=ROOT, capture_output=True, text=True, timeout=900,
    )
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-3000:]
    out = result.stdout
    assert "4 chips of TPU v5" in out
    # At smoke sizes fixed overheads dominate, so only the report of the ratio is checked
    # (the paper preset's is 0.32: README).
    assert re.search(r"iteration\s+temporaries\s+[\d.]+\s+[\d.]+", out)
    assert re.search(r"iteration temporaries per chip, 4 chips / 1 chip: [\d.]+", out)
    assert re.search(r"iteration\s+total\s+[\d.]+\s+fits\s+[\d.]+\s+fits", out)
    for piece in ("env step + mask (B=8)", "observation (B=8)", "network forward (B=8)", "learner step (N=32)"):
        row = re.search(rf"{re.escape(piece)}\s+([\d.]+) MiB\s+([\d.]+)", out)
        assert row and float(row.group(1)) > 0, piece
    largest = float(re.search(r"largest collective operand: ([\d.]+) MiB", out).group(1))
    assert largest < 1.0  # gradients of the smoke network; the 16k-position replay never moves


@pytest.mark.tpu_plan
def test_tpu_plan__unknown_topology_is_one_line():
    result = subprocess.run(
        [_tpu_python(), str(ROOT / "bench" / "tpu_plan.py"), "--config", str(ROOT / "configs" / "base.py") + ":smoke",
         "--topology", "v9x:2x2"],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode != 0
    assert result.stderr.strip().splitlines() == [result.stderr.strip()] and "v9x:2x2" in result.stderr


@pytest.mark.slow
def test_device_bench__quick_run_writes_every_row(tmp_path):
    """``bench/device.sh OUT --quick``: the accelerator script, every part at CPU sizes."""
    result = subprocess.run(
        ["bash", str(ROOT / "bench" / "device.sh"), str(tmp_path), "--quick"],
        cwd=ROOT, env=dict(os.environ, JAX_PLATFORMS="cpu"), capture_output=True, text=True, timeout=1800,
    )
    assert result.returncode == 0, result.stdout[-3000:] + result.stderr[-3000:]
    rows = json.loads((tmp_path / "device.json").read_text())["rows"]
    whats = [row["what"] for row in rows]
    assert not [row for row in rows if "skipped" in row], rows
    for prefix in ("env", "pgx", "self-play", "forward", "search", "learner step", "train", "match vs greedy"):
        assert any(w.startswith(prefix) for w in whats), (prefix, whats)
    assert all(row["per_s"] > 0 for row in rows if "per_s" in row)
    # Self-play against the bound of its own network's forward at the same batch (n = 4).
    selfplay = next(row for row in rows if row["what"].startswith("self-play"))
    forward = next(row for row in rows if row["what"] == "forward 1x8 float32" and row["batch"] == selfplay["batch"])
    assert selfplay["bound_per_s"] == pytest.approx(forward["per_s"] / 5)
    assert selfplay["of_bound"] == pytest.approx(selfplay["per_s"] / selfplay["bound_per_s"])
    searches = [row for row in rows if row["what"].startswith("search")]
    assert [row["what"] for row in searches] == ["search 1x8, mctx loop", "search 1x8, full tree",
                                                 "search 1x8, compact tree"]
    for row in searches:
        assert row["free_s"] > 0 and row["bytes_per_game"] > 0 and 1 <= row["deepest_path"] <= 4
    table = (tmp_path / "device.md").read_text()
    assert "| measurement |" in table and "of the network-only bound" in table and "deepest path" in table


@pytest.mark.slow
def test_ply_bench__quick_run_splits_a_ply():
    out = _run_quick("ply_bench.py")
    forward = re.search(r"network forward +([\d.]+) ms +([\d.]+) GFLOP +([\d.]+) GFLOP/s", out)
    dot = re.search(r"matrix product +([\d.]+) ms .* ([\d.]+) GFLOP/s", out)
    assert forward and dot, out
    assert float(forward.group(2)) > 0 and float(dot.group(2)) > 0
    searches = re.findall(r"(full|reduced) search \(n=(\d+)\) +([\d.]+) ms +its own work +([\d.]+) ms", out)
    assert searches and searches[0][0] == "full", out
    assert all(float(own) > 0 and float(total) > 0 for *_, total, own in searches)
    shares = re.search(r"a ply: [\d.]+ ms; the network (-?\d+)%, the searches' own work (-?\d+)%, "
                       r"env step and starts (\d+)%", out)
    assert shares and abs(sum(int(x) for x in shares.groups()) - 100) <= 2, out
    roofline = re.search(r"forward / matrix product GFLOP/s = ([\d.]+)  \(not judged at --quick\)", out)
    assert roofline, out
    _assert_ratio(float(roofline.group(1)), float(forward.group(3)), float(dot.group(2)))
