"""A GA run: the teacher set's children evaluated once, then generations until
``config.generations``, resumable from its workdir.

Writes into the workdir: ``metrics.jsonl`` (a line per generation: best and mean
agreement on the fitting part, the best genome's held-out agreement every
``eval_every``), ``population.npz`` (genomes, PRNG key, generation; atomic), and at the
end ``weights.json`` (the best genome's weights by feature name with its agreements,
greedy's on the same positions) and ``fitness.png``.
"""

import json
import os
import signal
import time

import jax
import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402

from az.measure import teacher as teacher_lib  # noqa: E402
from az.classical import evolve  # noqa: E402
from az.classical import features as feats  # noqa: E402
from envs import notation  # noqa: E402


def validate(config) -> None:
    """One-line ValueError naming the first config field that cannot be run."""
    checks = [
        ("population", config.population >= 2, "at least 2"),
        ("generations", config.generations >= 1, "at least 1"),
        ("crossover_rate", 0.0 <= config.crossover_rate <= 1.0, "in [0, 1]"),
        ("mutation_rate", 0.0 <= config.mutation_rate <= 1.0, "in [0, 1]"),
        ("elitism", 0 <= config.elitism < config.population, "in [0, population)"),
        ("major_bits", 2 <= config.major_bits <= 20, "in [2, 20]"),
        ("minor_bits", 2 <= config.minor_bits <= 20, "in [2, 20]"),
        ("fit_positions", config.fit_positions >= 0, "0 (all) or more"),
        ("eval_every", config.eval_every >= 1, "at least 1"),
        ("save_every", config.save_every >= 1, "at least 1"),
    ]
    for field, ok, what in checks:
        if not ok:
            raise ValueError(f"config.{field}={config[field]!r}: must be {what}")


def positions(ts: teacher_lib.TeacherSet):
    """A teacher set's positions in the mover's frame with their legal masks and the
    teacher's actions: board [P, 81], hand [P, 2, 7], mask [P, 2187], action [P].
    ValueError names a position whose move is not legal."""
    boards, hands, colors = [], [], []
    for sfen in ts.sfens:
        board, hand, color, _ = notation.parse_sfen(sfen)
        board, hand = notation.to_mover_frame(board, hand, color)
        boards.append(board), hands.append(hand), colors.append(color)
    board, hand = np.stack(boards).astype(np.int32), np.stack(hands).astype(np.int32)
    mask = feats.legal_masks(board, hand)
    action = np.empty(len(board), np.int32)
    for i, move in enumerate(ts.best_moves):
        by_usi = {notation.board_action_to_usi(board[i], colors[i], a): a for a in np.flatnonzero(mask[i])}
        if move not in by_usi:
            raise ValueError(f"teacher set {ts.path}: {move} is not legal in {ts.sfens[i]}")
        action[i] = by_usi[move]
    return board, hand, mask, action


def tables(config, progress=None) -> tuple[evolve.ChildTable, evolve.ChildTable, dict]:
    """The fitting and held-out parts of the teacher set as child tables, and their
    positions' descriptions (drop / promotion of the teacher's move)."""
    ts = teacher_lib.load(config.teacher_set or teacher_lib.DEFAULT_PATH)
    parts = {}
    for split, which in (("fit", ts.fit), ("heldout", ts.heldout)):
        rows = np.flatnonzero(which)
        if split == "fit" and config.fit_positions:
            rows = rows[:config.fit_positions]
        part = ts.select(rows)
        board, hand, mask, action = positions(part)
        table = evolve.build_children(board, hand, mask, action, progress=progress)
        parts[split] = (table, {"drop": part.drop, "promotion": part.promotion})
    return parts["fit"][0], parts["heldout"][0], {"fit": parts["fit"][1], "heldout": parts["heldout"][1]}


def _save(workdir: str, pop: evolve.Population) -> None:
    path = os.path.join(workdir, "population.npz")
    tmp = path + ".tmp.npz"
    np.savez(tmp, genomes=np.asarray(pop.genomes), key=np.asarray(jax.random.key_data(pop.key)),
             generation=int(pop.generation))
    os.replace(tmp, path)


def _load(workdir: str) -> evolve.Population | None:
    path = os.path.join(workdir, "population.npz")
    if not os.path.exists(path):
        return None
    with np.load(path) as z:
        return evolve.Population(jax.numpy.asarray(z["genomes"]), jax.random.wrap_key_data(z["key"]),
                                 jax.numpy.int32(z["generation"]))


def _read_metrics(workdir: str, before: int) -> list[dict]:
    path = os.path.join(workdir, "metrics.jsonl")
    if not os.path.exists(path):
        return []
    with open(path) as f:
        rows = [json.loads(line) for line in f if line.strip()]
    return [r for r in rows if r["generation"] < before]


def plot(rows: list[dict], path: str, *, greedy: float | None = None, positions: int = 0) -> None:
    """Agreement per generation (best, mean; held-out of the best) with greedy's line."""
    fig, ax = plt.subplots(figsize=(7, 4))
    g = [r["generation"] for r in rows]
    ax.plot(g, [100 * r["best"] for r in rows], label="best genome, fitting part")
    ax.plot(g, [100 * r["mean"] for r in rows], label="population mean, fitting part")
    held = [(r["generation"], 100 * r["heldout"]) for r in rows if "heldout" in r]
    if held:
        ax.plot(*zip(*held), "o-", label="best genome, held-out part")
    if greedy is not None:
        ax.axhline(100 * greedy, color="gray", ls="--", label="greedy (one-ply material), held-out")
    ax.set_xlabel("generation")
    ax.set_ylabel("top-1 agreement with the teacher (%)")
    ax.set_title(f"GA classical evaluation{f', {positions} fitting positions' if positions else ''}")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def _breakdown(agree: np.ndarray, info: dict) -> dict:
    """Agreement overall and for drops, promotions and other moves of the teacher."""
    drop, promo = np.asarray(info["drop"], bool), np.asarray(info["promotion"], bool)
    out = {"all": float(agree.mean()), "positions": int(len(agree))}
    for name, sel in (("drops", drop), ("promotions", promo), ("no_drop", ~drop)):
        out[name] = float(agree[sel].mean()) if sel.any() else None
        out[f"{name}_positions"] = int(sel.sum())
    return out


def run(config, workdir: str, log=print) -> dict:
    """Evolves (or resumes) to ``config.generations``; returns the final summary."""
    validate(config)
    os.makedirs(workdir, exist_ok=True)
    started = time.perf_counter()
    stop = {"now": False}
    previous = signal.signal(signal.SIGTERM, lambda *_: stop.update(now=True))
    try:
        fit, held, info = tables(config, progress=lambda done, total: None)
        features_s = time.perf_counter() - started
        log(f"teacher set: {len(fit.legal)} fitting positions ({len(fit.parent)} children), "
            f"{len(held.legal)} held-out ({len(held.parent)}); features in {features_s:.1f} s")
        bits = evolve.genome_bits(config.major_bits, config.minor_bits)
        pop = _load(workdir)
        if pop is None or pop.genomes.shape != (config.population, bits):
            pop = evolve.init_population(jax.random.key(config.seed), config.population, bits)
        rows = _read_metrics(workdir, int(pop.generation))
        generation = evolve.make_generation(fit, config)
        positions = len(fit.legal)
        evolve_started = time.perf_counter()
        first = int(pop.generation)
        with open(os.path.join(workdir, "metrics.jsonl"), "w") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
        while int(pop.generation) < config.generations and not stop["now"]:
            g = int(pop.generation)
            pop, agree, best_w = generation(pop)
            agree = np.asarray(agree)
            row = {"generation": g, "best": float(agree.max() / positions), "mean": float(agree.mean() / positions),
                   "elapsed_s": round(time.perf_counter() - started, 2)}
            last = g + 1 == config.generations
            if g % config.eval_every == 0 or last:
                row["heldout"] = float(evolve.agreement_of(held, np.asarray(best_w)[None]).mean())
            rows.append(row)
            with open(os.path.join(workdir, "metrics.jsonl"), "a") as f:
                f.write(json.dumps(row) + "\n")
            done = g + 1 - first
            rate = done / (time.perf_counter() - evolve_started)
            eta = (config.generations - g - 1) / rate
            held_text = f", held-out {100 * row['heldout']:.2f}%" if "heldout" in row else ""
            log(f"generation {g + 1}/{config.generations}: best {100 * row['best']:.2f}% "
                f"mean {100 * row['mean']:.2f}%{held_text}; {rate * config.population * positions:,.0f} "
                f"positions/s, ETA {eta:.0f} s")
            if (g + 1) % config.save_every == 0 or last:
                _save(workdir, pop)
        if stop["now"]:
            _save(workdir, pop)
            log(f"stopped by SIGTERM at generation {int(pop.generation)}; saved, rerun to resume")
            return {"stopped": True, "generation": int(pop.generation)}
        return finish(config, workdir, pop, fit, held, info, rows, features_s, time.perf_counter() - started, log)
    finally:
        signal.signal(signal.SIGTERM, previous)


def finish(config, workdir, pop, fit, held, info, rows, features_s, total_s, log) -> dict:
    """The final population's best genome: weights.json and fitness.png."""
    weights = np.asarray(evolve.decode(pop.genomes, config.major_bits, config.minor_bits))
    fit_agree = evolve.agreement_of(fit, weights)  # [P, I]
    best = int(fit_agree.sum(0).argmax())
    held_agree = evolve.agreement_of(held, weights[best][None])[:, 0]
    greedy = evolve.greedy_agreement_of(held)
    greedy_fit = evolve.greedy_agreement_of(fit)
    summary = {
        "config": config.to_dict(),
        "generations": int(pop.generation),
        "fit": _breakdown(fit_agree[:, best], info["fit"]),
        "heldout": _breakdown(held_agree, info["heldout"]),
        "greedy_fit": _breakdown(greedy_fit, info["fit"]),
        "greedy_heldout": _breakdown(greedy, info["heldout"]),
        "features_s": round(features_s, 1),
        "total_s": round(total_s, 1),
        "weights": {name: float(w) for name, w in zip(feats.NAMES, weights[best])},
    }
    tmp = os.path.join(workdir, "weights.json.tmp")
    with open(tmp, "w") as f:
        json.dump(summary, f, indent=1)
    os.replace(tmp, os.path.join(workdir, "weights.json"))
    plot(rows, os.path.join(workdir, "fitness.png"), greedy=summary["greedy_heldout"]["all"], positions=len(fit.legal))
    log(f"best genome: fitting {100 * summary['fit']['all']:.2f}%, held-out {100 * summary['heldout']['all']:.2f}% "
        f"(greedy {100 * summary['greedy_heldout']['all']:.2f}%, ratio "
        f"{summary['heldout']['all'] / max(summary['greedy_heldout']['all'], 1e-9):.2f}x) in {total_s:.0f} s; "
        f"{os.path.join(workdir, 'weights.json')}")
    return summary
