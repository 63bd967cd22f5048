"""What a mate search at the root would give: the agent, but a mate in 1 or 3 that cshogi's
solver finds at its turn (not in check) is played first (docs/stall_study.md#mate-checks). A study
probe, not a player of the project (the solver ignores repetition, and it runs on the host).

    python scripts/stall_study/mate3_match.py WORKDIR OUT   # 108 games against greedy, n=16
"""
import json
import sys

import cshogi

from az.play import match as match_lib
from az.play import players
from envs import notation


class _MateFirstSession(players.Session):
    def __init__(self, inner: players.Session):
        self.inner = inner

    def move(self, position: players.MatchPosition) -> players.Move:
        board = cshogi.Board(notation.to_sfen(position.state))
        # The solvers assume the side to move is not in check (in check they answer nonsense).
        mate = 0 if board.is_check() else board.mate_move_in_1ply() or board.mate_move(3)
        return cshogi.move_to_usi(mate) if mate and board.is_legal(mate) else self.inner.move(position)

    def new_game(self):
        self.inner.new_game()

    def game_over(self, result: str):
        self.inner.game_over(result)

    def close(self):
        self.inner.close()


class MateFirstPlayer(players.Player):
    def __init__(self, agent: players.Player):
        self.agent = agent
        self.name = agent.name + " +mate3"

    def session(self) -> players.Session:
        return _MateFirstSession(self.agent.session())

    def close(self):
        self.agent.close()


def main(workdir: str, out: str):
    first = MateFirstPlayer(players.parse_player("checkpoint:" + workdir, num_simulations=16))
    second = players.parse_player("greedy", num_simulations=16, seed=1)
    match = match_lib.Match(first, second, match_lib.load_openings("data/openings.tsv"), out, games=108)
    try:
        summary = match.run()
    finally:
        first.close()
        second.close()
    print(match_lib.format_summary(first.name, second.name, summary))
    with open(f"{out}/summary.json", "w", encoding="utf-8") as f:
        json.dump(summary, f, indent=1)


if __name__ == "__main__":
    main(*sys.argv[1:])
