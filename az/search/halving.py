"""Sequential halving's visit schedule: which visit count the root's next simulation
goes to, in Gumbel MuZero (Danihelka et al. 2022, "Policy improvement by planning with
Gumbel", section 3.2; Karnin et al. 2013 for the bandit algorithm).

The root considers m actions; each phase gives every action still considered the same
number of visits, round by round, then keeps the better half (never fewer than two),
until the n simulations are spent. Since every considered action has the same count
within a round, simulation i's place in the schedule is one number: the count that the
action it visits has before the visit. The root then picks, among the actions with
that count, the best by gumbel + logit + completed Q.

Shapes: m = max_num_considered_actions, n = num_simulations.
"""

import numpy as np


def considered_visits(num_considered: int, num_simulations: int, first_visits: int = 1) -> tuple[int, ...]:
    """The schedule [n] at a root with ``num_considered`` actions: a phase at width w
    (w actions considered) has max(1, n // (ceil(log2 m) x w)) rounds, each visiting
    the w actions once; the first phase has at least ``first_visits`` rounds, so that
    every considered action is judged on that many visits, its opponent's replies
    among them, before any is dropped (1: Gumbel MuZero's schedule). With one action
    or none, that action takes every visit."""
    if num_considered <= 1:
        return tuple(range(num_simulations))
    phases = (num_considered - 1).bit_length()  # ceil(log2 m), exactly
    schedule, visits, width = [], 0, num_considered
    rounds = max(first_visits, num_simulations // (phases * width))
    while len(schedule) < num_simulations:
        for _ in range(rounds):
            schedule += [visits] * width
            visits += 1
        width = max(2, width // 2)
        rounds = max(1, num_simulations // (phases * width))
    return tuple(schedule[:num_simulations])


def considered_visits_table(max_num_considered_actions: int, num_simulations: int,
                            first_visits: int = 1) -> np.ndarray:
    """[m + 1, n] int32: ``considered_visits`` for 0..m considered actions (a root
    considers the fewer of m and its valid actions)."""
    rows = [considered_visits(m, num_simulations, first_visits) for m in range(max_num_considered_actions + 1)]
    return np.array(rows, np.int32).reshape(max_num_considered_actions + 1, num_simulations)
