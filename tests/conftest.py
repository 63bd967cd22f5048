"""Session-wide fixtures: each jitted function is compiled once and shared.

JAX compiles are the slow part of these tests on a CPU, so tests take their compiled
functions from here (or from ``envs.notation.jitted_step``, which caches per ``Rules``).
"""

import csv
import os
import pathlib
import shutil
import tempfile

import jax
import pytest

from envs import env

ROOT = pathlib.Path(__file__).resolve().parents[1]
OPENINGS = ROOT / "data" / "openings.tsv"

# Rules with every switch away from the default, shared by the rule tests (one compile).
VARIANT_RULES = env.Rules(max_length=12, declaration=False, perpetual_check_loses=False)


def _installed(path: str) -> str:
    """``path`` if that program is installed; else a skip, or a failure under
    ``AZSHOGI_STRICT_DEPS`` (CI: a missing dependency must not pass as a skip)."""
    if os.access(path, os.X_OK):
        return path
    message = f"{path} is not installed (make engines)"
    if os.environ.get("AZSHOGI_STRICT_DEPS"):
        pytest.fail(message + "; AZSHOGI_STRICT_DEPS requires it")
    pytest.skip(message)


@pytest.fixture(scope="session")
def fairy_stockfish() -> str:
    return _installed("/usr/games/fairy-stockfish")


@pytest.fixture(scope="session")
def gpsusi() -> str:
    return _installed("/usr/games/gpsusi")


@pytest.fixture(scope="session")
def rules():
    return env.Rules()


@pytest.fixture(scope="session")
def batched_step():
    """``jit(vmap(step))`` with the default rules; compiled once per batch size."""
    rules = env.Rules()
    return jax.jit(jax.vmap(lambda s, a: env.step(s, a, rules)))


@pytest.fixture(scope="session")
def observe_fn():
    rules = env.Rules()
    return jax.jit(lambda s: env.observe(s, rules))


@pytest.fixture(scope="session")
def openings():
    """Rows of data/openings.tsv as dicts."""
    with open(OPENINGS, encoding="utf-8", newline="") as f:
        return list(csv.DictReader(f, delimiter="\t"))


@pytest.fixture(scope="session")
def book_file(tmp_path_factory, openings):
    """A book of the openings' final SFENs, one a line."""
    path = tmp_path_factory.mktemp("book") / "openings.sfen"
    path.write_text("".join(row["final_sfen"] + "\n" for row in openings), encoding="utf-8")
    return str(path)


def pytest_configure(config):
    """One JAX compilation cache for the session, fresh for each run: the xdist workers
    (spawned after this, with this environment) share what either compiled, as many
    files compile the same step, search and features. A run never reuses an earlier
    run's cache, so its time is what a clean machine takes."""
    if hasattr(config, "workerinput") or os.environ.get("JAX_COMPILATION_CACHE_DIR"):
        return
    directory = tempfile.mkdtemp(prefix="azshogi-test-jax-cache-")
    config._azshogi_cache = directory
    os.environ["JAX_COMPILATION_CACHE_DIR"] = directory
    os.environ["JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS"] = "1"
    os.environ["JAX_PERSISTENT_CACHE_MIN_ENTRY_SIZE_BYTES"] = "0"
    jax.config.update("jax_compilation_cache_dir", directory)
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 1.0)
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)


def pytest_unconfigure(config):
    directory = getattr(config, "_azshogi_cache", None)
    if directory:
        shutil.rmtree(directory, ignore_errors=True)


def pytest_report_header(config):
    return f"jax {jax.__version__} on {jax.default_backend()}; {os.cpu_count()} CPUs"


# The files with the longest single setups, started first: `make test` runs two workers
# that each take whole files (`--dist loadfile`), and a long file started last (test_usi
# sorts last by name) would leave one worker alone for minutes at the end.
HEAVY_FIRST = ("test_usi.py", "test_trainer.py", "test_scaleout.py", "test_search.py", "test_mate.py")


# Fixtures that compile the whole playing agent (its search with the mate searches) or the
# mate in three on its own, a minute or more each on a 2-core CPU: a test that uses one is
# marked ``heavy``, which `make test` leaves to `make test-heavy` (CI runs both).
HEAVY_FIXTURES = ("engine", "guarded_agent", "mate_in_three_cases")


def pytest_collection_modifyitems(config, items):
    for item in items:
        if any(name in HEAVY_FIXTURES for name in getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.heavy)
    rank = {name: i for i, name in enumerate(HEAVY_FIRST)}
    items.sort(key=lambda item: rank.get(item.path.name, len(HEAVY_FIRST)))  # stable: file order kept otherwise
