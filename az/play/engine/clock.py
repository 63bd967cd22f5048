"""How many simulations a clock allows. No JAX here.

Under ``isready`` the engine measures the network's time per evaluation and the
search's time per simulation (``Speed``, updated after every timed search). A ``go``
with a clock gets the budget ``remaining / min(40, own moves before MaxMovesToDraw) +
increment + byoyomi`` (never more than ``remaining + byoyomi``; ``movetime`` is taken as given) minus ``NetworkDelay``, and
searches with the most simulations whose estimated time (x1.25) fits, among the sizes
``Simulations, Simulations/2, ...`` (``simulation_sizes``) already compiled; none fits:
the policy network's move.
"""

import dataclasses

from az.play.engine.protocol import GoCommand

TIME_SAFETY = 1.25  # estimated search time is multiplied by this
MOVES_TO_GO = 40  # a clock's remaining time is spent as if this many moves remain


def time_budget_ms(go: GoCommand, color: int, moves_left: int | None = None) -> float | None:
    """Milliseconds this move may take by the clock (None: no limit), before NetworkDelay.
    ``moves_left``: the mover's moves before the game's ply limit (None: no limit)."""
    if go.infinite or not go.timed:
        return None
    if go.movetime is not None:
        return float(go.movetime)
    remaining = (go.btime if color == 0 else go.wtime) or 0
    increment = (go.binc if color == 0 else go.winc) or 0
    byoyomi = go.byoyomi or 0
    moves_to_go = MOVES_TO_GO if moves_left is None else max(1, min(MOVES_TO_GO, moves_left))
    budget = remaining / moves_to_go + increment + byoyomi
    return float(min(budget, remaining + byoyomi))


@dataclasses.dataclass
class Speed:
    """Measured under isready: seconds of one network evaluation, of one simulation,
    of compiling a search, and of the host work around a move."""

    policy_s: float
    simulation_s: float
    compile_s: float
    host_s: float

    def estimate(self, n: int) -> float:
        """Seconds to play a move with ``n`` compiled simulations (0: the policy move),
        with the safety factor."""
        if n == 0:
            return TIME_SAFETY * (self.policy_s + self.host_s)
        return TIME_SAFETY * (2 * self.policy_s + n * self.simulation_s + self.host_s)

    def observe(self, n: int, seconds: float):
        """Updates the time per simulation from a finished ``n``-simulation search."""
        if n > 0:
            measured = max(seconds - self.policy_s, 1e-6) / n
            self.simulation_s = 0.5 * self.simulation_s + 0.5 * measured


def simulation_sizes(limit: int) -> set[int]:
    """The search sizes a clock may ask for: ``limit`` halved down to 1."""
    sizes = set()
    while limit >= 1:
        sizes.add(limit)
        limit //= 2
    return sizes


def most_simulations(candidates, seconds: float, speed: Speed) -> int:
    """The largest size in ``candidates`` whose move fits in ``seconds``; 0 (the policy
    move) if none does."""
    return max((n for n in candidates if speed.estimate(n) <= seconds), default=0)
