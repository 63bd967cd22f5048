"""Session-wide fixtures: each jitted function is compiled once and shared.

JAX compiles are the slow part of these tests on a CPU, so tests take their compiled
functions from here (or from ``envs.notation._compiled``, which caches per ``Rules``).
"""

import csv
import functools
import os
import pathlib

import jax
import pytest

from envs import env

ROOT = pathlib.Path(__file__).resolve().parents[1]
OPENINGS = ROOT / "data" / "openings.tsv"

# Rules with every switch away from the default, shared by the rule tests (one compile).
VARIANT_RULES = env.Rules(max_length=12, declaration=False, perpetual_check_loses=False)


@pytest.fixture(scope="session")
def rules():
    return env.Rules()


@pytest.fixture(scope="session")
def batched_step():
    """``jit(vmap(step))`` with the default rules; compiled once per batch size."""
    return jax.jit(jax.vmap(functools.partial(env.step, rules_=env.Rules())))


@pytest.fixture(scope="session")
def observe_fn():
    return jax.jit(env.observe)


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


def pytest_report_header(config):
    return f"jax {jax.__version__} on {jax.default_backend()}; {os.cpu_count()} CPUs"
