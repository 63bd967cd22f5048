"""Black's advantage over a start scheme's positions (the paper's Fig. 4, Table 2): by a
USI engine's score at fixed nodes, or by a network's value."""

import math

import matplotlib.pyplot as plt
import numpy as np


def start_positions(start: str, count: int, seed: int = 0) -> list[str]:
    """SFENs of a start scheme: all 900 for random_start(2), else ``count`` samples."""
    import jax

    from envs import env, notation, starts

    spec = starts.parse_start(start)
    if len(spec.leaves) == 1 and isinstance(spec.leaves[0], starts.RandomStart) and spec.leaves[0].plies == 2:
        import cshogi

        board, sfens = cshogi.Board(), []
        for m1 in list(board.legal_moves):
            board.push(m1)
            for m2 in list(board.legal_moves):
                board.push(m2)
                sfens.append(board.sfen())
                board.pop()
            board.pop()
        return sfens
    fn = jax.jit(jax.vmap(starts.make_start_fn(spec, env.Rules()), in_axes=(0, None)))
    states = fn(jax.random.split(jax.random.PRNGKey(seed), count), 0.0)
    return [notation.to_sfen(jax.tree.map(lambda a: a[i], states)) for i in range(count)]


def engine_scores(sfens: list[str], engine: str, *, jobs: int = 1, reuse: bool = False) -> list[float]:
    """Black's score in centipawns by a USI engine, ``jobs`` processes at a time.

    By default a fresh process per position (fairy-stockfish's fixed-node evaluation
    depends on earlier searches in a process); ``reuse`` keeps one process per job with
    ``usinewgame`` between positions, for engines slow to start (gpsusi: 1.5 s)."""
    import concurrent.futures
    import threading

    from az.play import players as players_lib
    from az.play.usi_client import UsiClient

    player = players_lib.parse_player(engine)
    local, opened = threading.local(), []

    def score_of(sfen: str) -> float:
        process = getattr(local, "process", None) if reuse else None
        if process is None:
            process = UsiClient(player.path, player.options)
            if reuse:
                local.process = process
                opened.append(process)
        try:
            process.send("usinewgame")
            score = None
            for line in process.think(f"position sfen {sfen}", player.go_command, player.move_timeout):
                if line.startswith("info") and " score " in line and " multipv " not in line.replace(" multipv 1 ", " "):
                    parts = line.split()
                    kind, value = parts[parts.index("score") + 1], parts[parts.index("score") + 2]
                    score = float(value) if kind == "cp" else math.copysign(30000, float(value.replace("+", "") or 1))
        finally:
            if not reuse:
                process.close()
        if score is None:
            raise ValueError(f"{engine} gave no score for {sfen}")
        return score if sfen.split()[1] == "b" else -score

    try:
        with concurrent.futures.ThreadPoolExecutor(max(1, jobs)) as pool:
            return list(pool.map(score_of, sfens))
    finally:
        for process in opened:
            process.close()


def network_values(sfens: list[str], checkpoint: str) -> list[float]:
    """Black's value in [-1, 1] by a trained network."""
    import jax

    from az.play import agent as agent_lib
    from envs import notation

    agent = agent_lib.load_agent(checkpoint)
    states = [notation.from_sfen(s, agent.rules) for s in sfens]
    policy = agent.search(0, batch=len(states), history=agent.rules.history)
    value = np.asarray(policy(agent.params, jax.random.PRNGKey(0), agent_lib.stack_states(states)).root_value)
    color = np.asarray([int(s.current_player) for s in states])
    return list(np.where(color == 0, value, -value).astype(float))


def plot_balance(values: dict, path: str, *, unit: str) -> dict:
    """Histograms of black's advantage per start scheme; returns mean/std per scheme."""
    fig, ax = plt.subplots(figsize=(7, 4))
    table = {}
    # Shared bins, so that the sets' widths compare; the rare blunder positions beyond
    # the clip are counted in the edge bins and named in the legend.
    clip = 1000.0 if unit == "cp" else 1.0
    widest = max(float(np.abs(np.asarray(v, np.float64)).max()) for v in values.values())
    bins = np.linspace(-min(widest, clip), min(widest, clip), 61)
    for name, v in values.items():
        v = np.asarray(v, np.float64)
        table[name] = {"positions": int(v.size), "mean": float(v.mean()), "std": float(v.std())}
        beyond = int((np.abs(v) > bins[-1]).sum())
        label = f"{name}: mean {v.mean():+.1f}, std {v.std():.1f}" + (f" ({beyond} beyond ±{bins[-1]:g})" if beyond else "")
        ax.hist(np.clip(v, bins[0], bins[-1]), bins=bins, alpha=0.45, label=label)
    ax.set_xlabel(f"black's advantage ({unit})")
    ax.set_ylabel("positions")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return table
