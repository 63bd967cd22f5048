"""The one timing rule of the benchmarks in bench/."""

import statistics
import time

import jax


def median_seconds(fn, repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn()``, each waited for on the device
    (``fn`` compiled and warm beforehand)."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        jax.block_until_ready(fn())
        times.append(time.perf_counter() - start)
    return statistics.median(times)
