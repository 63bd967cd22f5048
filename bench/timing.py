"""The one timing rule of the benchmarks in bench/."""

import statistics
import time
from typing import Any, NamedTuple

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


class Compiled(NamedTuple):
    seconds: float  # the median call, compiled and warm
    compile_s: float  # lowering, compile and the first call
    memory_bytes: int  # XLA's temporaries + outputs of the compiled program
    output: Any  # of the first call


def compile_and_time(fn, args: tuple, repeats: int) -> Compiled:
    """``fn`` (jitted) compiled ahead of time for ``args``: its memory, then its median
    call (one compile serves both)."""
    start = time.perf_counter()
    compiled = fn.lower(*args).compile()
    output = jax.block_until_ready(compiled(*args))
    compile_s = time.perf_counter() - start
    memory = compiled.memory_analysis()
    return Compiled(median_seconds(lambda: compiled(*args), repeats), compile_s,
                    memory.temp_size_in_bytes + memory.output_size_in_bytes, output)
