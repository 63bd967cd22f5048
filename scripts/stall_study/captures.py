"""What a snapshot's network makes of the captures that won its opponent material in a match
(docs/stall_study.md#reserved-captures).

    python scripts/stall_study/captures.py SNAPSHOT MATCH_DIR [--considered 8] [--reserved 2]

MATCH_DIR is an ``eval.py --out`` directory whose first player is SNAPSHOT's agent
(``WORKDIR[@STEP]``). Its positions: each of the opponent's turns, after the opening, where
the opponent captured and was 3 pawns or more ahead of where it stood two plies on (after the
agent's reply; greedy's count). There, with the opponent to move, the network's view:
- the policy's rank of the capture among the legal moves;
- how often the Gumbel root (256 draws of its noise) considers the capture among its
  ``--considered`` actions, and how often with ``--reserved`` captures kept among them (the
  best by gumbel + logit, as ``search.considered_captures``);
- the value of the side about to win the material (> 0: it sees itself ahead).
And the agent's material 40 and 60 plies after the opening, the drain those captures make.
"""
import argparse
import json

import cshogi
import jax
import numpy as np

from az.play import agent as agent_lib
from az.play.players import material  # greedy's own count
from az.search import shogi as search_shogi
from envs import movegen, notation

GAIN = 3  # pawns
DRAWS = 256


def winning_captures(match_dir: str) -> tuple[list[tuple[list[str], str]], dict[int, list[int]]]:
    """([(the moves before the capture, the capture)], {40: [...], 60: [...]} the agent's
    material that many plies after the opening)."""
    with open(f"{match_dir}/results.json", encoding="utf-8") as f:
        games = json.load(f)["games"]
    found, drain = [], {40: [], 60: []}
    for g in games:
        agent = cshogi.BLACK if g["player_color"] == "black" else cshogi.WHITE
        moves = g["moves"]
        start = len(moves) - g["plies"]
        board = cshogi.Board()
        for ply, usi in enumerate(moves):
            if ply - start in drain:
                drain[ply - start].append(material(board, agent))
            move = board.move_from_usi(usi)
            if ply >= start and board.turn != agent and not cshogi.move_is_drop(move) \
                    and board.piece(cshogi.move_to(move)) != cshogi.NONE and ply + 2 <= len(moves):
                later = cshogi.Board(board.sfen())
                for reply in moves[ply:ply + 2]:
                    later.push_usi(reply)
                if material(later, board.turn) - material(board, board.turn) >= GAIN:
                    found.append((moves[:ply], usi))
            board.push(move)
    return found, drain


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("snapshot")
    p.add_argument("match_dir")
    p.add_argument("--considered", type=int, default=8)
    p.add_argument("--reserved", type=int, default=2)
    args = p.parse_args()
    agent = agent_lib.load_agent(args.snapshot)
    found, drain = winning_captures(args.match_dir)
    if not found:
        raise SystemExit(f"{args.match_dir}: no captures that won {GAIN} pawns")
    rules = agent.rules
    states = [notation.from_position("startpos moves " + " ".join(before) if before else "startpos", rules)
              for before, _ in found]
    actions = np.array([notation.usi_to_action(s, capture) for s, (_, capture) in zip(states, found)])
    games = agent_lib.stack_states(states)
    forward = jax.jit(lambda params, g: search_shogi.network_forward(agent.network.apply, params, g, rules))
    logits, value = (np.asarray(x) for x in forward(agent.params, games))
    legal = np.asarray(games.legal_action_mask)
    captures = np.asarray(jax.vmap(lambda s: movegen.capture_actions(s.x.board))(games)) & legal
    scores = np.where(legal, logits, -np.inf)
    rank = (scores > scores[np.arange(len(found)), actions][:, None]).sum(-1)
    rows = np.arange(len(found))
    plain = kept = 0.0
    for draw in range(DRAWS):
        noisy = scores + np.asarray(jax.random.gumbel(jax.random.key(draw), logits.shape))
        beaten_by = (noisy > noisy[rows, actions][:, None]).sum(-1)
        noisy_captures = np.where(captures, noisy, -np.inf)
        capture_rank = (noisy_captures > noisy_captures[rows, actions][:, None]).sum(-1)
        plain += np.mean(beaten_by < args.considered) / DRAWS
        kept += np.mean((beaten_by < args.considered) | (capture_rank < args.reserved)) / DRAWS
    print(f"{args.match_dir}: {len(found)} captures that won >= {GAIN} pawns; the network ({args.snapshot}), "
          f"the capturer to move:")
    print(f"  policy rank of the capture: first {np.mean(rank == 0):.2f}, top 3 {np.mean(rank < 3):.2f}, "
          f"top {args.considered} {np.mean(rank < args.considered):.2f}, median {int(np.median(rank))}")
    print(f"  considered by the Gumbel root (m = {args.considered}): {plain:.2f}; "
          f"with {args.reserved} reserved captures: {kept:.2f}")
    print(f"  value of the capturer: mean {value.mean():+.2f}, above 0 in {np.mean(value > 0):.2f}")
    for ply, values in drain.items():
        print(f"  the agent's material {ply} plies after the opening: mean {np.mean(values):+.1f} over "
              f"{len(values)} games, 5 pawns or more behind in {np.mean(np.array(values) <= -5):.2f}")


if __name__ == "__main__":
    main()
