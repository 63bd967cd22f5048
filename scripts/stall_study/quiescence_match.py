"""What a capture quiescence at the root would give at play (docs/stall_study.md#a-capture-quiescence-at-play):
the agent, but each of its searched roots' best ``--candidates`` moves (by the improved policy)
is also scored by a two-ply capture search with the network's value at the leaves, and the move
with the best score is played where it beats the search's choice by more than ``--margin``.

A move's score: the lower of the search's Q (where it was visited) and its quiet value, the
worst for us over the opponent's reply passing or taking with one of its ``--captures`` best
captures (by the network's policy), where after a capture we pass or retake with one of our
``--recaptures`` best. A study probe, not a player of the project: a match shows whether the
agent's losses to the heuristic are pieces a one- or two-ply look would keep.

    python scripts/stall_study/quiescence_match.py WORKDIR OUT [--candidates 4] [--margin 0]
"""
import argparse
import dataclasses
import functools
import json

import jax
import jax.numpy as jnp
import numpy as np

from az.play import agent as agent_lib
from az.play import match as match_lib
from az.play import players
from az.play import programs as programs_lib
from az.search.shogi import network_forward
from envs import env, movegen


def _repeat(games: env.State, n: int) -> env.State:
    return jax.tree.map(lambda a: jnp.repeat(a, n, axis=0), games)


def _best_captures(games: env.State, logits, k: int):
    """The ``k`` legal captures with the highest logits: (actions [B, k], real [B, k])."""
    captures = jax.vmap(lambda s: movegen.capture_actions(s.x.board))(games) & games.legal_action_mask
    best, actions = jax.lax.top_k(jnp.where(captures, logits, -jnp.inf), k)
    return actions.astype(jnp.int32), jnp.isfinite(best) & ~games.done[:, None]


def quiet_values(apply_fn, rules: env.Rules, captures: int, recaptures: int):
    """``quiet(params, games [B], moves [B, M]) -> (quiet [B, M], passed [B, M])``: the
    mover's value after each move, its opponent passing (``passed``) or the worst of its
    best captures followed by our best of passing and retaking (``quiet`` <= ``passed``)."""
    step = jax.vmap(lambda s, a: env.step(s, a, rules))

    def played(params, games, actions):
        """The mover's value of each position after ``actions`` [B] (the reward where it ended)."""
        mover = games.current_player
        after = step(games, actions)
        logits, value = network_forward(apply_fn, params, after, rules, always_promote=True)
        reward = jnp.take_along_axis(after.rewards, mover[:, None], axis=1)[:, 0]
        return after, logits, jnp.where(after.done, reward, -value)

    def quiet(params, games, moves):
        batch, m = moves.shape
        after, logits, passed = played(params, _repeat(games, m), moves.reshape(-1))
        taken, real_take = _best_captures(after, logits, captures)
        after_take, logits_take, theirs = played(params, _repeat(after, captures), taken.reshape(-1))
        retaken, real_retake = _best_captures(after_take, logits_take, recaptures)
        _, _, ours = played(params, _repeat(after_take, recaptures), retaken.reshape(-1))
        best_retake = jnp.max(jnp.where(real_retake, ours.reshape(-1, recaptures), -jnp.inf), axis=1)
        after_exchange = jnp.maximum(-theirs, best_retake).reshape(-1, captures)
        worst = jnp.min(jnp.where(real_take, after_exchange, jnp.inf), axis=1)
        return jnp.minimum(passed, worst).reshape(batch, m), passed.reshape(batch, m)

    return quiet


class QuiescenceAgent(agent_lib.Agent):
    """An agent whose searches are followed by the capture quiescence of their best moves."""

    candidates: int = 4
    captures: int = 4
    recaptures: int = 4
    margin: float = 0.0
    switched: int = 0  # roots whose move the quiescence changed
    roots: int = 0

    def search(self, num_simulations: int, *, batch: int, history: int,
               max_length: int = agent_lib.MATCH_MAX_LENGTH, **kwargs):
        inner = super().search(num_simulations, batch=batch, history=history, max_length=max_length, **kwargs)
        choose, guard = self._programs(batch, history, max_length)

        def search(params, rng_key, games):
            result = inner(params, rng_key, games)
            if num_simulations == 0:
                return result
            action, switch = (np.asarray(x) for x in choose(params, games, result))
            self.roots += batch
            self.switched += int(switch.sum())
            return guard(agent_lib._with_actions(result, action), games) if switch.any() else result

        return search

    @functools.lru_cache(maxsize=None)
    def _programs(self, batch: int, history: int, max_length: int):
        rules = dataclasses.replace(self.rules, history=history, max_length=max_length)
        quiet = quiet_values(self.network.apply, rules, self.captures, self.recaptures)

        @jax.jit
        def choose(params, games, result):
            weights, moves = jax.lax.top_k(result.policy, self.candidates)
            moves = moves.astype(jnp.int32)
            quiet_value, _ = quiet(params, games, moves)
            visited = jnp.take_along_axis(result.visit_counts, moves, axis=1) > 0
            q = jnp.take_along_axis(result.q, moves, axis=1)
            score = jnp.where(weights > 0, jnp.where(visited, jnp.minimum(q, quiet_value), quiet_value), -jnp.inf)
            is_chosen = moves == result.action[:, None]
            chosen_score = jnp.max(jnp.where(is_chosen, score, -jnp.inf), axis=1)
            best = jnp.argmax(score, axis=1)
            switch = (jnp.max(score, axis=1) > chosen_score + self.margin) & ~result.mate
            return jnp.where(switch, jnp.take_along_axis(moves, best[:, None], axis=1)[:, 0], result.action), switch

        # The agent's guard against a mate in one, run again on the moves changed here.
        shape = jax.eval_shape(lambda: agent_lib.stack_states([agent_lib.example_state(history)] * batch))
        find_mates = self.programs.mate_program(shape)
        step_all = self.programs.step_program(self._playing_rules(history), shape)
        limit = programs_lib.limit_value(max_length)
        step_within = functools.partial(agent_lib._step_within, step_all, limit)
        return choose, lambda result, games: agent_lib.replace_refuted_moves(result, games, step_within, find_mates)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("workdir")
    p.add_argument("out")
    p.add_argument("--opponent", default="heuristic?depth=1")
    p.add_argument("--openings", default="data/openings.tsv")
    p.add_argument("--games", type=int, default=60)
    p.add_argument("--candidates", type=int, default=4)
    p.add_argument("--margin", type=float, default=0.0)
    args = p.parse_args()
    first = players.parse_player("checkpoint:" + args.workdir, num_simulations=16)
    loaded = first.agent
    first.agent = QuiescenceAgent(**{f.name: getattr(loaded, f.name) for f in dataclasses.fields(agent_lib.Agent)})
    first.agent.candidates, first.agent.margin = args.candidates, args.margin
    first.name += f" +quiescence({args.candidates}, {args.margin:g})"
    second = players.parse_player(args.opponent, num_simulations=16, seed=1)
    match = match_lib.Match(first, second, match_lib.load_openings(args.openings), args.out, games=args.games)
    try:
        summary = match.run()
    finally:
        first.close()
        second.close()
    summary["quiescence"] = {"roots": first.agent.roots, "switched": first.agent.switched}
    print(match_lib.format_summary(first.name, second.name, summary))
    print(f"the quiescence changed {first.agent.switched} of {first.agent.roots} searched roots' moves")
    with open(f"{args.out}/summary.json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main()
