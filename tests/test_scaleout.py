"""Resumption after SIGKILL and SIGTERM, 4 devices beside 1, two processes joined by
jax.distributed, and where the replay is sampled: each runs in subprocesses (fresh JAX
backends, forced CPU devices), a minute or more each on a 2-core CPU, so the whole-run
ones are slow (``make test-all``)."""

import json
import os
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
WORKER = os.path.join(ROOT, "tests", "scaleout_worker.py")


def _env(devices: int = 1) -> dict:
    env = dict(os.environ, JAX_PLATFORMS="cpu", PYTHONUNBUFFERED="1")
    env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    return env


def _run_worker(out, workdir, iterations, devices=1, timeout=600):
    subprocess.run(
        [sys.executable, WORKER, str(out), str(workdir), str(iterations)],
        env=_env(devices), check=True, timeout=timeout, capture_output=True,
    )
    return dict(np.load(out))


def _params(d):
    return {k: v for k, v in d.items() if k not in ("iteration", "games_finished") and not k.startswith("replay/")}


def _replay(d):
    return {k: v for k, v in d.items() if k.startswith("replay/")}


def _train_cmd(workdir, iterations, every=1):
    return [
        sys.executable, os.path.join(ROOT, "train.py"), "--config", "base.py:smoke", "--workdir", str(workdir),
        f"--max_iterations={iterations}", "--config.env.max_length=8", "--config.replay.capacity=256",
        f"--config.checkpoint.every_iterations={every}",
    ]


def _wait_for(path, proc, timeout=300, nonempty=False):
    start = time.time()
    while not os.path.exists(path) or (nonempty and not os.path.getsize(path)):
        assert proc.poll() is None, f"training exited early: {proc.stdout.read()}"
        assert time.time() - start < timeout, f"{path} did not appear"
        time.sleep(0.2)


@pytest.fixture(scope="module")
def uninterrupted(tmp_path_factory):
    """Four iterations in one go, the reference for the resumed runs."""
    tmp = tmp_path_factory.mktemp("uninterrupted")
    return _run_worker(tmp / "params.npz", tmp / "work", 4)


@pytest.mark.slow
def test_resume__after_sigkill_equals_uninterrupted_run(tmp_path, uninterrupted):
    workdir = tmp_path / "work"
    proc = subprocess.Popen(_train_cmd(workdir, 100), env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    _wait_for(workdir / "checkpoints" / "2", proc)
    proc.send_signal(signal.SIGKILL)
    proc.wait(timeout=60)
    resumed = _run_worker(tmp_path / "params.npz", workdir, 4)
    assert int(resumed["iteration"]) == 4
    reference = _params(uninterrupted)
    for name, value in _params(resumed).items():
        np.testing.assert_array_equal(value, reference[name], err_msg=name)


@pytest.mark.slow
def test_resume__sigterm_saves_and_exits_cleanly(tmp_path):
    """As a preemption: a real process, its exit status (tests/test_trainer.py covers the
    same in-process in the normal suite)."""
    workdir = tmp_path / "work"
    # The smoke preset's self-play switches off: a plain iteration compiles in half the time.
    plain = ["--config.search.mate_in_one=False", "--config.selfplay.full_search_fraction=1.0",
             "--config.selfplay.resign=False", "--config.learner.ema_decay=0.0"]
    proc = subprocess.Popen(
        _train_cmd(workdir, 10_000, every=1000) + plain, env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
        text=True,
    )
    _wait_for(workdir / "metrics.jsonl", proc, nonempty=True)  # compiled, in the middle of a run
    proc.send_signal(signal.SIGTERM)
    output, _ = proc.communicate(timeout=300)
    assert proc.returncode == 0, output
    assert "SIGTERM: saved iteration" in output
    saved = int(output.split("SIGTERM: saved iteration ")[1].split()[0])
    assert (workdir / "checkpoints" / str(saved)).is_dir()
    with open(workdir / "metrics.jsonl") as f:
        assert sum(1 for _ in f) == saved


@pytest.mark.slow
def test_sharding__each_of_four_devices_plays_its_own_games(tmp_path):
    """Each device plays the games it holds with its own random draws, and the game
    count is summed over the devices: after one iteration every device's replay columns
    hold played positions, no device's columns copy another's, and the count is the
    whole batch's (the same config on one device finishes about as many games)."""
    one = _run_worker(tmp_path / "one.npz", tmp_path / "one", 1, devices=1)
    four = _run_worker(tmp_path / "four.npz", tmp_path / "four", 1, devices=4)
    filled, boards = four["replay/filled"], four["replay/board"]  # [R, B], [R, B, 81]
    columns = np.split(np.arange(filled.shape[1]), 4)
    assert all(filled[:, c].any() for c in columns)
    shards = [boards[:, c] for c in columns]
    assert all(not np.array_equal(shards[i], shards[j]) for i in range(4) for j in range(i + 1, 4))
    assert 0.75 * int(one["games_finished"]) <= int(four["games_finished"]) <= 1.25 * int(one["games_finished"])
    for name, value in _params(four).items():
        assert np.isfinite(value).all(), name
        assert value.shape == one[name].shape


@pytest.mark.slow
def test_distributed__two_processes_hold_identical_parameters(tmp_path):
    port = 20000 + os.getpid() % 20000
    procs = [
        subprocess.Popen(
            [sys.executable, WORKER, str(tmp_path / f"p{i}.npz"), str(tmp_path / "work"), "1", f"127.0.0.1:{port}", "2", str(i)],
            env=_env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        )
        for i in range(2)
    ]
    outputs = [p.communicate(timeout=600)[0] for p in procs]
    for p, output in zip(procs, outputs):
        assert p.returncode == 0, output
    first, second = (_params(dict(np.load(tmp_path / f"p{i}.npz"))) for i in range(2))
    assert first.keys() == second.keys() and first
    for name in first:
        np.testing.assert_array_equal(first[name], second[name], err_msg=name)


SMALL = 1 << 20  # bytes: gradients and parameters of the smoke network, never the buffer


def _sharding_report(what: str) -> dict:
    result = subprocess.run([sys.executable, os.path.join(ROOT, "tests", "sharding_worker.py"), what], env=_env(4),
                            capture_output=True, text=True, timeout=900)
    assert result.returncode == 0, result.stderr[-3000:]
    return json.loads(result.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("what", ["step", pytest.param("iteration", marks=pytest.mark.slow)])
def test_sharding__each_device_samples_the_replay_columns_it_holds(what):
    """Compiled for 4 devices: no collective moves anything buffer-sized, and per-device
    replay memory falls to a quarter (the learner step alone, or the whole iteration)."""
    report = _sharding_report(what)
    buffer, one, four = report["buffer_bytes"], report["1"], report["4"]
    assert buffer > 50 * SMALL
    gathered = [c for c in four["collectives"] if c[0] in ("all-gather", "all-to-all", "collective-permute")]
    assert all(size < SMALL for _, size, _ in gathered), gathered
    if what == "iteration":  # self-play runs on each device's own games: nothing is gathered
        assert not gathered, gathered
    assert max((size for _, size, _ in four["collectives"]), default=0) < SMALL
    assert four["arguments"] <= one["arguments"] - 0.74 * buffer  # the state's buffer, sharded 4 ways
    assert four["temporaries"] <= one["temporaries"]
