"""How the engine answers one ``go`` (``Engine.arm`` and ``Engine.think`` call these).

Nothing that may wait comes before the deadline: ``arm`` runs first in the ``go``'s
thread, before it waits for the previous search to end, and with no JAX call. It sets
the watchdog at the end of the clock's budget and stores a fallback computed on the host,
the first legal move. ``think`` then stores the policy network's move as the fallback,
and the search's result. Whatever compiles meanwhile (a search size in the background,
the -O2 programs after a quick start), the answer comes at the deadline at the latest.
The compiled programs are never waited for: a move uses the sizes compiled already.
"""

import time

from az.play.engine import clock
from az.play.engine.protocol import Answer

POLICY_GRACE_S = 0.25  # the watchdog waits at least this long for the policy's move
HOST_FALLBACK_NOTE = "info string search unfinished: the first legal move (no program ready)"


def budget_ms(engine, job) -> float | None:
    """Milliseconds the clock gives this move before NetworkDelay (None: no limit)."""
    state = job.position.state
    moves_left = None
    if engine.max_moves:  # own moves before the game's ply limit
        moves_left = max(1, (engine.max_moves - int(state.ply) + 1) // 2)
    return clock.time_budget_ms(job.go, int(state.current_player), moves_left=moves_left)


def seconds_left(engine, job) -> float | None:
    """Seconds from now to the move's deadline (None: no clock, or it waits for stop)."""
    budget = budget_ms(engine, job)
    if budget is None or job.wait_for_stop:
        return None
    return (budget - engine.network_delay_ms) / 1000.0 - (time.monotonic() - job.received)


def arm(engine, job, model_module) -> None:
    """The watchdog and a host fallback for a timed move of the network's model; nothing
    for the heuristic (one fixed search), a missing model or position, or an untimed go.
    ``model_module()``: the engine's heavy half, imported only when needed."""
    model = engine.model
    if model is None or model.fixed_size or job.position is None:
        return
    seconds = seconds_left(engine, job)
    if seconds is None:
        return
    # Time for the policy's move at least: with no time left (byoyomi 0) it still answers.
    policy_s = 2 * model.speed.estimate(0) if model.speed is not None else 0.0
    job.set_deadline(max(seconds, policy_s, POLICY_GRACE_S))
    fallback = model_module().first_legal_answer(job.position.state)
    if fallback is not None:
        job.store(fallback=fallback, fallback_note=HOST_FALLBACK_NOTE)


def think(engine, job, model_module) -> None:
    """Runs in the job's thread: stores the policy's move as the fallback, then the result."""
    model = engine.model
    if model is None:
        reason = engine.load_error or "not loaded (send isready first)"
        job.store(result=Answer("resign", [f"info string error: no model: {reason}"]))
        return
    if job.position is None:
        job.store(result=Answer("resign", [f"info string error: no valid position ({job.position_error})"]))
        return
    state = job.position.state
    if not model_module.has_legal_move(state):
        job.store(result=Answer("resign", ["info string no legal move: resign"]))
        return
    if model_module.can_declare(state):
        job.store(result=Answer("win", ["info string entering-king declaration (27-point rule) holds"]))
        return
    if model.fixed_size:  # the heuristic: one fixed-depth search, whatever the limits
        out = model.analyse(0, state)
        job.store(result=model.answer(out, state, time.monotonic() - job.received))
        return
    fallback = model.answer(model.analyse(0, state), state, time.monotonic() - job.received)
    job.store(fallback=fallback)  # the answer to an early stop or the watchdog
    n = _simulations(engine, job, model)
    if n == 0:
        fallback.info.insert(0, "info string no time to search: the policy network's move")
        job.store(result=fallback)
        return
    compiled = n in model.compiled_sizes()
    start = time.monotonic()
    out = model.analyse(n, state)
    if compiled:
        model.speed.observe(n, time.monotonic() - start)
    job.store(result=model.answer(out, state, time.monotonic() - job.received))


def _simulations(engine, job, model) -> int:
    """The search size: the go's nodes or Simulations without a clock (compiled now if need
    be); with one, the largest compiled size that fits (the right one compiles aside)."""
    limit = job.go.nodes if job.go.nodes is not None else engine.simulations
    seconds = seconds_left(engine, job)
    if seconds is None:
        return limit
    wanted = clock.most_simulations(clock.simulation_sizes(limit), seconds, model.speed)
    if wanted and wanted not in model.compiled_sizes():
        model.compile_in_background(wanted)
    return clock.most_simulations({s for s in model.compiled_sizes() if s <= limit}, seconds, model.speed)
