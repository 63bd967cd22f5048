"""Exploration-PUCT: PUCT search (Dirichlet alpha=0.15, epsilon=0.25); the first 30 plies
of each game sample moves in proportion to root visit counts, then play the most visited.

    python train.py --config configs/exploration_puct.py --workdir runs/exploration_puct
"""

from configs import default


def get_config(arg=None):
    c = default.get_config(arg)
    c.name = "exploration_puct"
    c.search.algorithm = "puct"
    # The small recipe's reserved drops and captures belong to Gumbel's considered set.
    c.search.considered_drops = 0
    c.search.considered_captures = 0
    c.selfplay.sample_visits_plies = 30
    return c
