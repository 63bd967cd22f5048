"""How a match's games end, from the agent's side: material and mates it did not play
(docs/stall_study.md#mate-checks).

    python scripts/stall_study/draws.py MATCH_DIR...

MATCH_DIR is an ``eval.py --out`` directory whose first player is the agent. For the games
ended by mate and at the ply limit: the agent's material lead at the end (board and hands,
as greedy counts it) and 128 plies into the match; for the games drawn at the limit, the
agent's turns where cshogi's solver finds a mate in 1 or in 3 (how many of those begin with
a drop, and how many checks and evasions a mate-in-3 search would meet there), and the first
such turn of each game (its KIF file and the number of the move the agent played there),
to open in a GUI.
"""
import json
import sys

import cshogi

from az.play.players import material  # greedy's own count


def check_shape(board: cshogi.Board) -> tuple[int, int, int]:
    """(checking moves, most evasions after one of them, evasions over all of them)."""
    checks = most = total = 0
    for move in list(board.legal_moves):
        board.push(move)
        if board.is_check():
            evasions = len(list(board.legal_moves))
            checks, most, total = checks + 1, max(most, evasions), total + evasions
        board.pop()
    return checks, most, total


def spread(values) -> str:
    return f"{min(values)}/{median(values)}/{max(values)}"


def median(values):
    return sorted(values)[len(values) // 2] if values else None


def main(match_dirs):
    for match_dir in match_dirs:
        with open(f"{match_dir}/results.json", encoding="utf-8") as f:
            games = json.load(f)["games"]
        print(match_dir)
        for reason in ("max_length", "mate"):
            chosen = [g for g in games if g["reason"] == reason]
            if not chosen:
                continue
            at_end, at_128, mate1, mate3, agent_turns, firsts = [], [], 0, 0, 0, []
            drop_first, shapes = 0, []
            for g in chosen:
                board = cshogi.Board()
                color = cshogi.BLACK if g["player_color"] == "black" else cshogi.WHITE
                start = len(g["moves"]) - g["plies"]  # the opening's moves come first
                first = None
                for ply, usi in enumerate(g["moves"]):
                    if ply >= start and board.turn == color:
                        agent_turns += 1
                        # The solvers assume the side to move is not in check.
                        if reason == "max_length" and not board.is_check():
                            found = bool(board.mate_move_in_1ply())
                            mate1 += found
                            mate = 0 if found else board.mate_move(3)
                            if mate:
                                mate3 += 1
                                found = True
                                drop_first += cshogi.move_is_drop(mate)
                                shapes.append(check_shape(board))
                            if found and first is None:
                                first = ply + 1
                    if ply == start + 128:
                        at_128.append(material(board, color))
                    board.push_usi(usi)
                at_end.append(material(board, color))
                if first is not None:
                    firsts.append(f"{g['kif']} move {first}")
            print(f"  {reason}: {len(chosen)} games; the agent's material at the end: median {median(at_end):+d}, "
                  f"ahead by 10 or more in {sum(m >= 10 for m in at_end)}, behind in {sum(m < 0 for m in at_end)}; "
                  f"128 plies in: median {median(at_128) if at_128 else 'n/a'}")
            if reason == "max_length":
                print(f"  agent to move with a mate in 1: {mate1}, in 3 (not 1): {mate3}, of {agent_turns} turns; "
                      f"in {len(firsts)} of the {len(chosen)} games")
                if shapes:
                    checks, most, total = zip(*shapes)
                    print(f"  of the mates in 3, {drop_first} begin with a drop; checking moves there "
                          f"{spread(checks)}, most evasions after one check {spread(most)}, "
                          f"evasions over all checks {spread(total)} (min/median/max)")
                for line in firsts:
                    print("   ", line)


if __name__ == "__main__":
    main(sys.argv[1:])
