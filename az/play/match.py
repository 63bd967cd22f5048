"""Matches between two players from a set of openings, robust to engines that fail.

Each opening is played twice with colours swapped. Games follow the environment's
rules (repetition, perpetual check, declaration checked by us, a maximum length);
an illegal move, a bad declaration, a crash or a hang loses that game and the match
goes on. Every finished game is written as KIF and CSA and ``results.json`` is
rewritten after each one, so an interrupted match resumes with ``resume=True``.
"""

import concurrent.futures
import csv
import dataclasses
import json
import os
import re
import threading

import jax.numpy as jnp
from tqdm import tqdm

from az.play import elo as elo_lib
from az.play.agent import MATCH_MAX_LENGTH
from az.play.players import EngineFailure, MatchPosition, Player
from envs import endings, env, notation, records

MATCH_RULES = env.Rules(max_length=MATCH_MAX_LENGTH, history=MATCH_MAX_LENGTH + 1)  # floodgate's 256 plies


@dataclasses.dataclass(frozen=True)
class Opening:
    name: str  # e.g. "Yagura"
    line: str  # e.g. "yagura_24te"
    start_sfen: str  # position the moves start from
    moves: tuple  # USI moves of the opening, played before the match moves


def load_openings(path: str | None) -> list[Opening]:
    """Openings from a TSV with a ``usi_moves`` column (data/openings.tsv) or from lines of
    SFEN / ``startpos moves ...``; None gives the standard start. Errors name file and line."""
    if path is None:
        return [Opening("startpos", "startpos", notation.STARTPOS_SFEN, ())]
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise ValueError(f"openings {path}: cannot read it ({e.strerror})") from None
    lines = text.splitlines()
    openings = []
    if lines and "usi_moves" in lines[0].split("\t"):
        reader = csv.DictReader(lines, delimiter="\t")
        for lineno, row in enumerate(reader, 2):
            try:
                moves = tuple((row.get("usi_moves") or "").split())
                name = row.get("opening_name") or f"line {lineno}"
                line = row.get("line_id") or str(lineno)
                _check_line(notation.STARTPOS_SFEN, moves)
            except ValueError as e:
                raise ValueError(f"openings {path} line {lineno}: {e}") from None
            openings.append(Opening(name, line, notation.STARTPOS_SFEN, moves))
    else:
        for lineno, raw in enumerate(lines, 1):
            text = raw.strip()
            if not text or text.startswith("#"):
                continue
            try:
                sfen, moves = notation.split_position(text)
                _check_line(sfen, moves)
            except ValueError as e:
                raise ValueError(f"openings {path} line {lineno}: {e}") from None
            openings.append(Opening(f"line {lineno}", str(lineno), sfen, tuple(moves)))
    if not openings:
        raise ValueError(f"openings {path}: no openings in it")
    return openings


def _check_line(sfen: str, moves):
    board, _ = notation.play_line(sfen, moves)
    if board.is_game_over():
        raise ValueError("the opening ends the game")


def _play_through(opening: Opening) -> env.State:
    return notation.play_moves(notation.from_sfen(opening.start_sfen, MATCH_RULES), opening.moves, MATCH_RULES)


@dataclasses.dataclass
class GameResult:
    game: int  # index in the schedule
    opening: str
    line: str
    player_color: str  # "black" | "white", the first player's colour
    result: str  # "win" | "loss" | "draw", from the first player's view
    reason: str
    plies: int  # match plies after the opening
    kif: str
    csa: str
    moves: list


def schedule(openings: list[Opening], games: int | None) -> list[tuple[Opening, int]]:
    """(opening, first player's colour 0/1) for each game: every opening twice, colours swapped."""
    pairs = [(o, c) for o in openings for c in (0, 1)]
    total = len(pairs) if games is None else games
    return [pairs[i % len(pairs)] for i in range(total)]


def play_game(black, white, opening: Opening) -> tuple[str, str, list]:
    """Plays one game; returns (result for black: win/loss/draw, reason, match moves)."""
    state = _play_through(opening)
    step = notation.jitted_step(MATCH_RULES)
    moves: list = []
    sessions = (black, white)
    all_moves = list(opening.moves)
    while not bool(state.terminated | state.truncated):
        mover = int(state.current_player)
        session = sessions[mover]
        lose = "loss" if mover == 0 else "win"
        side = "black" if mover == 0 else "white"
        try:
            move = session.move(MatchPosition(opening.start_sfen, tuple(all_moves), state))
        except EngineFailure as e:
            return lose, f"{side} failed: {e}", moves
        if move == "resign":
            return lose, f"{side} resigned", moves
        if move == "win":
            if bool(endings.can_declare(state.x, state.checked)):
                return ("win" if mover == 0 else "loss"), f"{side} declared (valid)", moves
            return lose, f"{side} declared without the right (loses)", moves
        try:
            if isinstance(move, str):
                action = notation.usi_to_action(state, move)
            else:
                action, move = move, notation.action_to_usi(state, move)
        except ValueError:
            return lose, f"{side} played an illegal move {move!r}", moves
        state = step(state, jnp.int32(action))
        moves.append(move)
        all_moves.append(move)
    reason = env.END_REASONS[int(state.end_reason)]
    black_reward = float(state.rewards[0])
    result = "win" if black_reward > 0 else "loss" if black_reward < 0 else "draw"
    return result, reason, moves


def _record_end(reason: str) -> str:
    for key, end in (("resigned", "resign"), ("declared (valid)", "declaration"), ("illegal", "illegal"),
                     ("failed", "illegal"), ("without the right", "illegal")):
        if key in reason:
            return end
    return reason if reason in env.END_REASONS else ""


class Match:
    """Runs a scheduled match into ``out_dir`` (games/, results.json)."""

    def __init__(self, first: Player, second: Player, openings: list[Opening], out_dir: str, *,
                 games: int | None = None, concurrency: int = 1, resume: bool = False, progress: bool = True):
        self.first, self.second = first, second
        self.openings = openings
        self.plan = schedule(openings, games)
        self.out_dir = out_dir
        self.concurrency = max(1, concurrency)
        self.progress = progress
        os.makedirs(os.path.join(out_dir, "games"), exist_ok=True)
        self.results_path = os.path.join(out_dir, "results.json")
        self.results: dict[int, GameResult] = {}
        if os.path.exists(self.results_path):
            if not resume:
                raise ValueError(f"{self.results_path} exists: pass --resume to finish that match or use another --out")
            with open(self.results_path, encoding="utf-8") as f:
                saved = json.load(f)
            if saved.get("first") != first.name or saved.get("second") != second.name:
                raise ValueError(f"{self.results_path} is a match of {saved.get('first')} vs {saved.get('second')}")
            for g in saved.get("games", []):
                self.results[g["game"]] = GameResult(**g)
        self.lock = threading.Lock()

    def _write(self):
        summary = summarize(list(self.results.values()), self.plan_size)
        data = {
            "first": self.first.name,
            "second": self.second.name,
            "planned_games": self.plan_size,
            "summary": summary,
            "games": [dataclasses.asdict(r) for r in sorted(self.results.values(), key=lambda r: r.game)],
        }
        tmp = self.results_path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(data, f, indent=1)
        os.replace(tmp, self.results_path)

    @property
    def plan_size(self) -> int:
        return len(self.plan)

    def _play(self, index: int, sessions) -> GameResult:
        opening, first_color = self.plan[index]
        first_session, second_session = sessions
        black, white = (first_session, second_session) if first_color == 0 else (second_session, first_session)
        for s in (black, white):
            try:
                s.new_game()
            except EngineFailure:
                pass  # the failure shows when the session is asked to move
        result_black, reason, moves = play_game(black, white, opening)
        for s, result in ((black, result_black), (white, {"win": "loss", "loss": "win"}.get(result_black, "draw"))):
            s.game_over({"win": "win", "loss": "lose", "draw": "draw"}[result])
        first_result = result_black if first_color == 0 else {"win": "loss", "loss": "win"}.get(result_black, "draw")
        names = (self.first.name, self.second.name) if first_color == 0 else (self.second.name, self.first.name)
        base = os.path.join(self.out_dir, "games", f"{index:04d}_{opening.line}_{'bw'[first_color]}")
        all_moves = list(opening.moves) + moves
        end = _record_end(reason)
        with open(base + ".kif", "w", encoding="cp932", errors="replace") as f:  # GUIs read .kif as Shift-JIS
            f.write(records.to_kif(opening.start_sfen, all_moves, end=end, names=names))
        with open(base + ".csa", "w", encoding="utf-8") as f:
            f.write(records.to_csa(opening.start_sfen, all_moves, end=end, names=names))
        return GameResult(index, opening.name, opening.line, ("black", "white")[first_color], first_result,
                          reason, len(moves), os.path.basename(base) + ".kif", os.path.basename(base) + ".csa",
                          all_moves)

    def run(self) -> dict:
        todo = [i for i in range(self.plan_size) if i not in self.results]
        bar = tqdm(total=self.plan_size, initial=self.plan_size - len(todo), unit="game", disable=not self.progress)
        slots = [(self.first.session(), self.second.session()) for _ in range(self.concurrency)]
        free = list(range(self.concurrency))
        slot_lock = threading.Lock()

        def worker(index):
            with slot_lock:
                slot = free.pop()
            try:
                result = self._play(index, slots[slot])
            finally:
                with slot_lock:
                    free.append(slot)
            with self.lock:
                self.results[index] = result
                self._write()
                s = summarize(list(self.results.values()), self.plan_size)
                bar.update(1)
                bar.set_postfix(W=s["wins"], D=s["draws"], L=s["losses"], elo=f"{s['elo']:+.0f}", refresh=False)
            return result

        try:
            with concurrent.futures.ThreadPoolExecutor(self.concurrency) as pool:
                for future in [pool.submit(worker, i) for i in todo]:
                    future.result()
            self._write()
        finally:
            bar.close()
            for pair in slots:
                for s in pair:
                    s.close()
        return summarize(list(self.results.values()), self.plan_size)


def summarize(results: list[GameResult], planned: int | None = None) -> dict:
    """Totals, per colour, Elo with a 95% interval (paired openings) and per-opening scores."""
    points = {"win": 1.0, "draw": 0.5, "loss": 0.0}
    out = {"games": len(results), "planned": planned}
    for key, outcome in (("wins", "win"), ("draws", "draw"), ("losses", "loss")):
        out[key] = sum(r.result == outcome for r in results)
    for color in ("black", "white"):
        mine = [r for r in results if r.player_color == color]
        out[color] = {k: sum(r.result == o for r in mine) for k, o in (("wins", "win"), ("draws", "draw"), ("losses", "loss"))}
    by_pair: dict = {}
    for r in results:
        by_pair.setdefault((r.line, r.game // 2), []).append(points[r.result])
    pairs = [sum(v) for v in by_pair.values() if len(v) == 2]
    singles = [v[0] for v in by_pair.values() if len(v) == 1]
    estimate = elo_lib.estimate(pairs, singles)
    out.update(score=estimate.score, elo=estimate.elo, elo_low=estimate.low, elo_high=estimate.high)
    openings: dict = {}
    for r in results:
        o = openings.setdefault(r.opening, {"games": 0, "points": 0.0, "wins": 0, "draws": 0, "losses": 0})
        o["games"] += 1
        o["points"] += points[r.result]
        o[{"win": "wins", "draw": "draws", "loss": "losses"}[r.result]] += 1
    for o in openings.values():
        o["score"] = o["points"] / o["games"]
    out["openings"] = openings
    out["reasons"] = {}
    for r in results:
        out["reasons"][r.reason] = out["reasons"].get(r.reason, 0) + 1
    return out


def format_summary(first: str, second: str, summary: dict) -> str:
    """The match result and the per-opening table as text."""
    s = summary
    lines = [
        f"{first} vs {second}: {s['games']} games, +{s['wins']} ={s['draws']} -{s['losses']} "
        f"(score {s['score']:.3f})",
        f"  as black +{s['black']['wins']} ={s['black']['draws']} -{s['black']['losses']}, "
        f"as white +{s['white']['wins']} ={s['white']['draws']} -{s['white']['losses']}",
        f"  Elo difference {s['elo']:+.0f} (95% interval {s['elo_low']:+.0f} .. {s['elo_high']:+.0f})",
        "",
        f"  {'opening':<14} {'games':>5} {'W':>4} {'D':>4} {'L':>4} {'score':>6}",
    ]
    for name, o in s["openings"].items():
        lines.append(f"  {name:<14} {o['games']:>5} {o['wins']:>4} {o['draws']:>4} {o['losses']:>4} {o['score']:>6.3f}")
    return "\n".join(lines)


def slug(text: str) -> str:
    """``text`` (a player's name) as a directory name: matches are kept in ``eval/<slug>``."""
    return re.sub(r"[^A-Za-z0-9_.-]+", "_", text).strip("_")[:60]
