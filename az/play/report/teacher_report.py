"""Agreement of snapshots' policies and searches with the teacher set's moves, with 95%
intervals, by game phase, for drops and promotions and by the start scheme of the
position's game, beside the baselines."""

import functools
import math

import matplotlib.pyplot as plt
import numpy as np


def _in_batches(choose, games, size: int) -> np.ndarray:
    """``choose(first, games [size]) -> actions [size]`` over ``games`` [P] in batches of
    ``size`` (the last padded with the last position, so one compile serves all): [P]."""
    import jax

    count = jax.tree.leaves(games)[0].shape[0]
    parts = []
    for first in range(0, count, size):
        index = np.minimum(np.arange(first, first + size), count - 1)
        parts.append(np.asarray(choose(first, jax.tree.map(lambda a: a[index], games)))[: min(size, count - first)])
    return np.concatenate(parts)


def teacher_agreement(checkpoints: list[str], simulations: list[int], *, split: str = "heldout", positions: int = 0,
                      batch: int = 64, teacher_path: str | None = None, one_ply: bool = False) -> dict:
    """Agreement of each snapshot's policy (0 simulations) and search (Gumbel, no noise, as
    evaluation plays) with the teacher's moves, and with ``one_ply`` of its value alone over
    every legal move (``agreement.one_ply_choice``, "value 1 ply"): checkpoint ->
    "policy"/"search N"/"value 1 ply" -> breakdown;
    and how often each plays a drop ("drops": checkpoint -> label -> share with its interval;
    "teacher_drops": the teacher's share) and promotes when its move could go either way
    ("promotions", "teacher_promotions": the same shares over such moves)."""
    from az.measure import agreement, teacher as teacher_lib
    from az.play import agent as agent_lib
    from az.play import programs as programs_lib
    from envs import movegen

    teacher_set = teacher_lib.load(teacher_path) if teacher_path else teacher_lib.load()
    chosen = teacher_set if split == "all" else teacher_set.select(getattr(teacher_set, split))
    if positions > 0:
        chosen = chosen.select(np.arange(min(positions, chosen.size)))
    results, drop_shares, promotion_shares, probes, policies = {}, {}, {}, {}, {}
    programs = programs_lib.Programs()  # the snapshots of one config share their compiled searches
    for spec in checkpoints:
        agent = agent_lib.load_agent(spec, programs)
        if agent.rules not in probes:
            probes[agent.rules] = agreement.make_probe(chosen, agent.rules, split="all")
        probe = probes[agent.rules]
        best = np.asarray(probe.best)
        rows, drops, promotions = {}, {}, {}
        legal = np.asarray(probe.games.legal_action_mask)
        teacher_promotions = agreement.promotion_choices(best, legal)
        for n in simulations + (["value 1 ply"] if one_ply else []):
            label, choices = _choices(agent, n, probe, legal, policies, batch)
            rows[label] = agreement.breakdown(choices == best, chosen)
            dropped = movegen.DROP_ACTIONS[choices]
            low, high = agreement.wilson_interval(int(dropped.sum()), len(dropped))
            drops[label] = {"share": float(dropped.mean()), "low": low, "high": high, "positions": len(dropped)}
            promoted, could = agreement.promotion_choices(choices, legal)
            low, high = agreement.wilson_interval(promoted, could)
            promotions[label] = {"share": promoted / could if could else math.nan, "low": low, "high": high,
                                 "positions": could}
            a = rows[label]["all"]
            print(f"{agent.name} {label}: {100 * a['agreement']:.1f}% [{100 * a['low']:.1f}, {100 * a['high']:.1f}] "
                  f"of {a['positions']}; plays a drop in {100 * dropped.mean():.1f}% "
                  f"(teacher {100 * chosen.drop.mean():.1f}%); promotes {promoted} of the {could} moves "
                  f"it could play either way (teacher {teacher_promotions[0]} of {teacher_promotions[1]})", flush=True)
        results[agent.name] = rows
        drop_shares[agent.name] = drops
        promotion_shares[agent.name] = promotions
    return {"split": split, "positions": chosen.size, "teacher_set": chosen.path,
            "baselines": agreement.baselines(teacher_set) if split == "heldout" and positions == 0 else {},
            "results": results, "drops": drop_shares, "teacher_drops": float(chosen.drop.mean()),
            "promotions": promotion_shares, "teacher_promotions": teacher_promotions[0] / max(teacher_promotions[1], 1)}


def _choices(agent, n, probe, legal: np.ndarray, policies: dict, batch: int) -> tuple[str, np.ndarray]:
    """(label, the moves [P] ``agent`` chooses over ``probe``'s positions): with ``n``
    simulations of its search, its policy alone (``n`` 0), or its value one ply ahead
    (``n`` "value 1 ply"). ``policies``: the jitted policies and 1-ply choosers so far, by
    network (one compile per network, whatever the snapshot)."""
    import jax

    from az.measure import agreement

    if n == "value 1 ply":
        width = -(-int(legal.sum(axis=1).max()) // 8) * 8
        key = ("1 ply", agent.config.to_json(), width)
        if key not in policies:
            policies[key] = jax.jit(functools.partial(
                agreement.one_ply_choice, agent.network.apply, rules=agent.rules, width=width))
        one_ply_fn = policies[key]
        # 8 positions a call (8 x width children).
        return n, _in_batches(lambda first, games: one_ply_fn(agent.params, games), probe.games, 8)
    if n == 0:
        key = agent.config.to_json()
        if key not in policies:
            policies[key] = jax.jit(functools.partial(
                agreement.per_position, agent.network.apply, rules=agent.rules,
                always_promote=True))  # as the agent plays
        _, choice, _ = policies[key](agent.params, probe)
        return "policy", np.asarray(choice)
    search = agent.search(n, batch=batch, history=agent.rules.history)
    return f"search {n}", _in_batches(
        lambda first, games: search(agent.params, jax.random.PRNGKey(first), games).action, probe.games, batch)


def plot_teacher(summary: dict, path: str) -> None:
    """Bars with 95% intervals: each snapshot's policy and searches, overall and by group."""
    results = summary["results"]
    groups = list(next(iter(next(iter(results.values())).values())))
    bars = [(name, label, rows[label]) for name, rows in results.items() for label in rows]
    fig, ax = plt.subplots(figsize=(max(7, 1.1 * len(groups) * max(len(bars), 1) / 2), 4.5))
    width = 0.8 / len(bars)
    for i, (name, label, table) in enumerate(bars):
        x = np.arange(len(groups)) + (i - (len(bars) - 1) / 2) * width
        y = np.asarray([100 * table[g]["agreement"] for g in groups])
        low = np.asarray([100 * table[g]["low"] for g in groups])
        high = np.asarray([100 * table[g]["high"] for g in groups])
        ax.bar(x, y, width, yerr=[y - low, high - y], capsize=2, label=f"{name} {label}")
    for (line, value), style in zip(summary.get("baselines", {}).items(), (":", "--", "-.")):
        ax.axhline(100 * value, color="gray", ls=style, lw=1, label=f"{line} (all, held-out)")
    counts = results[bars[0][0]][bars[0][1]]
    ax.set_xticks(np.arange(len(groups)), [f"{g.replace(' (', chr(10) + '(')}\n{counts[g]['positions']} positions"
                                           for g in groups], fontsize=7)
    ax.set_ylabel("top-1 agreement with the teacher (%)")
    ax.set_title(f"teacher agreement, {summary['split']} positions ({summary['positions']})", fontsize=9)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
