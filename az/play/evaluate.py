"""``eval.py``'s work: build the players, run the match, write the summary and the plot."""

import json
import os

from az.play import match as match_lib
from az.play import players as players_lib
from az.play import programs as programs_lib


class EvalError(ValueError):
    """Bad input for an evaluation (player spec, openings file, output directory)."""


def parse_search_settings(items: list[str]) -> dict[str, str]:
    """``--search FIELD=VALUE`` flags -> {field: value}; EvalError names a malformed one."""
    settings = {}
    for item in items:
        field, equals, value = item.partition("=")
        if not equals or not field.strip() or not value.strip():
            raise EvalError(f"--search {item!r}: expected FIELD=VALUE, e.g. value_scale=0.5")
        settings[field.strip()] = value.strip()
    return settings


def run_match(args) -> dict:
    """Plays eval.py's match (``args``: its flags); writes and returns the summary."""
    programs = programs_lib.Programs()  # two snapshots of one config play one compiled search
    try:
        openings = match_lib.load_openings(args.openings)
        slots = args.concurrency
        search = parse_search_settings(getattr(args, "search", None) or [])
        second = players_lib.parse_player(args.opponent, num_simulations=args.simulations, slots=slots,
                                          seed=args.seed + 1, programs=programs, search=search)
        spec = args.player if getattr(args, "player", None) else "checkpoint:" + args.checkpoint
        first = players_lib.parse_player(spec, num_simulations=args.simulations, slots=slots, seed=args.seed,
                                         programs=programs, search=search)
    except (ValueError, players_lib.EngineFailure) as e:
        raise EvalError(str(e)) from None
    out = args.out or os.path.join("eval", f"{match_lib.slug(first.name)}_vs_{match_lib.slug(second.name)}")
    try:
        match = match_lib.Match(first, second, openings, out, games=args.games, concurrency=args.concurrency,
                                resume=args.resume)
    except ValueError as e:
        raise EvalError(str(e)) from None
    print(f"{first.name} vs {second.name}: {match.plan_size} games from {len(openings)} opening(s) -> {out}",
          flush=True)
    try:
        summary = match.run()
    finally:
        first.close()
        second.close()
    text = match_lib.format_summary(first.name, second.name, summary)
    print(text, flush=True)
    with open(os.path.join(out, "summary.txt"), "w", encoding="utf-8") as f:
        f.write(text + "\n")
    from az.play import report

    report.plot_openings(summary, os.path.join(out, "openings.png"), title=f"{first.name} vs {second.name}")
    with open(os.path.join(out, "summary.json"), "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)
    return summary
