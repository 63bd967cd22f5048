"""Evaluation: Elo maths, matches against real and misbehaving engines, resume, records, errors."""

import json
import math
import os
import subprocess
import sys

import cshogi
import cshogi.CSA
import cshogi.KIF
import numpy as np
import pytest

import helpers
from az.measure import diversity
from az.play import elo, match, players

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
FAKE = os.path.join(ROOT, "tests", "fake_usi_engine.py")
OPENINGS = os.path.join(ROOT, "data", "openings.tsv")


def test_elo__known_cases():
    assert elo.elo_from_score(0.5) == 0
    assert elo.elo_from_score(0.75) == pytest.approx(190.85, abs=0.01)
    assert elo.elo_from_score(0.25) == pytest.approx(-190.85, abs=0.01)
    assert elo.elo_from_score(1.0) == math.inf and elo.elo_from_score(0.0) == -math.inf
    even = elo.estimate([1.0, 1.0, 2.0, 0.0])  # pairs: 1 + 1 + 2 + 0 points of 8
    assert even.score == 0.5 and even.elo == 0 and even.games == 8
    assert even.low < 0 < even.high
    assert even.low == pytest.approx(-even.high)
    strong = elo.estimate([2.0, 1.5, 2.0, 1.5, 2.0, 1.0])
    assert strong.score == pytest.approx(10 / 12)
    assert strong.low < strong.elo < strong.high
    # More games at the same score narrow the interval.
    wider, narrower = elo.estimate([2.0, 1.0] * 3), elo.estimate([2.0, 1.0] * 30)
    assert narrower.high - narrower.low < wider.high - wider.low


def _reference_interval(x: float, n: float, samples: int = 2_000_000) -> tuple[float, float]:
    """The Jeffreys interval's score bounds by sampling Beta(x + 1/2, n - x + 1/2) with numpy."""
    draws = np.random.default_rng(0).beta(x + 0.5, n - x + 0.5, size=samples)
    return float(np.quantile(draws, 0.025)), float(np.quantile(draws, 0.975))


def _score(elo_difference: float) -> float:
    return 1.0 / (1.0 + 10.0 ** (-elo_difference / 400.0))


@pytest.mark.parametrize("pairs, singles, x, n", [
    ([], [0.0] * 24, 0.0, 24.0),  # 0-24: the plain Jeffreys interval, 24 games
    ([2.0] * 12, [], 12.0, 12.0),  # 24-0 as 12 won pairs
    # Mixed: pair scores 1, .5, .75, .75 (mean .75, variance .03125 per pair) against a
    # coin's .1875: design effect 1/6, so 4 pairs count as 24 units with x = 18.
    ([2.0, 1.0, 1.5, 1.5], [], 18.0, 24.0),
])
def test_elo__interval_is_finite_at_the_edges_and_matches_a_reference(pairs, singles, x, n):
    estimate = elo.estimate(pairs, singles)
    assert all(math.isfinite(v) for v in (estimate.elo, estimate.low, estimate.high))
    assert estimate.low < estimate.elo < estimate.high
    low, high = _reference_interval(x, n)
    assert _score(estimate.low) == pytest.approx(low, abs=1e-3)
    assert _score(estimate.high) == pytest.approx(high, abs=1e-3)


def _results(out_dir):
    with open(os.path.join(out_dir, "results.json")) as f:
        return json.load(f)


def test_openings__shipped_file_has_nine_openings_of_three_lines():
    openings = match.load_openings(OPENINGS)
    assert len(openings) == 27
    assert len({o.name for o in openings}) == 9


def test_openings__bad_line_names_its_number(tmp_path):
    bad = tmp_path / "openings.txt"
    bad.write_text("startpos moves 7g7f 3c3d\n# a comment\nstartpos moves 7g7f 7g7e\n")
    with pytest.raises(ValueError, match=r"openings .*openings.txt line 3: illegal move \(move 2\): '7g7e'"):
        match.load_openings(str(bad))
    bad.write_text("sfen lnsgkgsnl/9/ppppppppp b - 1\n")
    with pytest.raises(ValueError, match=r"line 1: SFEN board needs 9 ranks"):
        match.load_openings(str(bad))


def test_match__against_fairy_stockfish_writes_records_that_parse_back(tmp_path, fairy_stockfish):
    first = players.parse_player("greedy")
    second = players.parse_player(f"usi:{fairy_stockfish}?nodes=1")
    openings = match.load_openings(OPENINGS)[:1]
    m = match.Match(first, second, openings, str(tmp_path), progress=False)
    summary = m.run()
    assert summary["games"] == 2 and summary["wins"] + summary["draws"] + summary["losses"] == 2
    assert summary["black"]["wins"] + summary["black"]["draws"] + summary["black"]["losses"] == 1
    data = _results(tmp_path)
    assert {g["player_color"] for g in data["games"]} == {"black", "white"}
    for game in data["games"]:
        csa = cshogi.CSA.Parser.parse_file(str(tmp_path / "games" / game["csa"]))[0]
        kif = cshogi.KIF.Parser.parse_file(str(tmp_path / "games" / game["kif"]))
        assert [cshogi.move_to_usi(mv) for mv in csa.moves] == game["moves"]
        assert [cshogi.move_to_usi(mv) for mv in kif.moves] == game["moves"]
        assert game["plies"] == len(game["moves"]) - len(openings[0].moves)


@pytest.fixture(scope="module")
def fake_engine(tmp_path_factory):
    """The fake engine as an executable that runs under this interpreter (with cshogi)."""
    path = tmp_path_factory.mktemp("engine") / "fake-engine"
    path.write_text(f"#!/bin/sh\nexec {sys.executable} {FAKE} \"$@\"\n")
    path.chmod(0o755)
    return str(path)


def _fake(engine, mode, monkeypatch, moves=3, timeout=None):
    monkeypatch.setenv("FAKE_ENGINE_MODE", mode)
    monkeypatch.setenv("FAKE_ENGINE_MOVES", str(moves))
    return players.parse_player(f"usi:{engine}?nodes=1" + (f"&timeout={timeout}" if timeout else ""))


@pytest.mark.parametrize("mode, reason", [("exit", "exited"), ("hang", "did not answer"), ("illegal", "illegal move")])
def test_match__survives_an_engine_that_fails_mid_game(tmp_path, monkeypatch, fake_engine, mode, reason):
    engine = _fake(fake_engine, mode, monkeypatch, moves=2, timeout=2)
    m = match.Match(players.parse_player("random"), engine, match.load_openings(None), str(tmp_path), games=2,
                    progress=False)
    summary = m.run()
    assert summary["games"] == 2
    assert summary["wins"] == 2  # the failing engine loses both games, the match goes on
    games = _results(tmp_path)["games"]
    assert all(reason in g["reason"] for g in games), [g["reason"] for g in games]
    assert all(os.path.exists(tmp_path / "games" / g["kif"]) for g in games)


def test_match__resume_plays_only_the_missing_games(tmp_path, monkeypatch):
    monkeypatch.setenv("FAKE_ENGINE_MODE", "ok")
    openings = match.load_openings(None)
    first = players.parse_player("random")
    m = match.Match(first, players.parse_player("greedy"), openings, str(tmp_path), games=4, progress=False)
    m.run()
    data = _results(tmp_path)
    kept = data["games"][:2]
    data["games"] = kept  # as if interrupted after two games
    with open(tmp_path / "results.json", "w") as f:
        json.dump(data, f)
    with pytest.raises(ValueError, match="--resume"):
        match.Match(first, players.parse_player("greedy"), openings, str(tmp_path), games=4, progress=False)
    resumed = match.Match(first, players.parse_player("greedy"), openings, str(tmp_path), games=4, resume=True,
                          progress=False)
    played = []
    original = resumed._play
    resumed._play = lambda index, sessions: played.append(index) or original(index, sessions)
    summary = resumed.run()
    assert sorted(played) == [2, 3]
    assert summary["games"] == 4
    assert _results(tmp_path)["games"][:2] == kept


def test_players__missing_engine_binary_is_one_clear_error():
    with pytest.raises(players.PlayerError, match=r"engine binary '/no/such/engine' not found"):
        players.parse_player("usi:/no/such/engine?nodes=1")
    with pytest.raises(players.PlayerError, match="expected checkpoint:"):
        players.parse_player("stockfish")


def _eval_cli(*args):
    return subprocess.run([sys.executable, os.path.join(ROOT, "eval.py"), *args], capture_output=True, text=True,
                          timeout=300, cwd=ROOT)


def test_eval_cli__errors_are_one_line(tmp_path):
    bad = tmp_path / "openings.txt"
    bad.write_text("startpos\nstartpos moves 1a1b\n")
    cases = [
        (["--checkpoint", str(tmp_path / "nowhere"), "--opponent", "random"], "no snapshots in"),
        (["--checkpoint", str(tmp_path), "--opponent", "usi:/no/such/engine"], "'/no/such/engine' not found"),
        (["--checkpoint", str(tmp_path), "--opponent", "random", "--openings", str(bad)], "openings.txt line 2"),
        (["--checkpoint", str(tmp_path), "--opponent", "random", "--search", "value_scale"], "expected FIELD=VALUE"),
    ]
    for args, needle in cases:
        result = _eval_cli(*args)
        lines = [line for line in result.stderr.splitlines() if line.strip()]
        assert result.returncode != 0
        assert len(lines) == 1 and lines[0].startswith("error:"), result.stderr
        assert needle in lines[0], lines[0]


def test_diversity__board_grid_draws_files_9_to_1_and_ranks_a_to_i():
    counts = [0] * 81
    counts[0] = 5  # square 1a: file 1, rank a -> top right
    counts[8 * 9 + 8] = 7  # square 9i -> bottom left
    grid = diversity.board_grid(counts)
    assert grid[0, 8] == 5 and grid[8, 0] == 7 and grid.sum() == 12
    assert diversity.entropy_bits([1, 1, 1, 1]) == pytest.approx(2.0)
    assert diversity.entropy_bits([0, 3, 0]) == 0.0
    assert math.isnan(diversity.entropy_bits([0, 0]))


def _png_size(path) -> tuple[int, int]:
    import matplotlib.image

    image = matplotlib.image.imread(str(path))
    assert image[..., :3].std() > 0.01, f"{path} is blank"
    return image.shape[1], image.shape[0]


def test_report__heatmaps_sum_parts_of_the_run_and_plot_them(tmp_path):
    from az.play import report

    workdir = tmp_path / "run"
    workdir.mkdir()
    with open(workdir / "metrics.jsonl", "w") as f:
        for i in range(1, 7):
            squares = [[[0] * 81 for _ in range(2)] for _ in range(2)]
            squares[0][0][4 * 9 + 8] = i  # black king on 5i
            squares[0][0][5 * 9 + 8] = 1  # and once on 6i
            squares[1][1][1 * 9 + 1] = 2  # white rook on 2b
            f.write(json.dumps({"iteration": i, "games_finished": 10 * i, "diversity/squares": squares}) + "\n")
    rows = report.read_metrics(str(workdir))
    parts = report.heatmap_parts(rows, points=2)
    assert [games for games, _ in parts] == [30, 60]
    assert [int(total[0, 0, 4 * 9 + 8]) for _, total in parts] == [1 + 2 + 3, 4 + 5 + 6]
    assert [int(total[0, 0].sum()) for _, total in parts] == [6 + 3, 15 + 3]
    assert [int(total[1, 1, 10]) for _, total in parts] == [6, 6]
    window, bits = report.pooled_entropy(rows, 1, 1)
    assert window == 1 and bits == [0.0] * 6  # always the same square
    _, bits = report.pooled_entropy(rows, 0, 0)
    assert bits[0] == pytest.approx(1.0)  # 1 and 1 of 2 games: one bit
    report.plot_heatmaps([str(workdir)], str(tmp_path / "heat.png"), points=2)
    assert _png_size(tmp_path / "heat.png") == (1100, 792)  # 10 x 7.2 inches at 110 dpi


def test_report__elo_curve_plot(tmp_path):
    from az.play import report

    report.plot_elo_curve({"run vs greedy": [(0, -math.inf, -math.inf, -100.0, 0.0), (60, 50.0, -20.0, 120.0, 0.57)]},
                          str(tmp_path / "curve.png"))
    assert _png_size(tmp_path / "curve.png") == (1320, 480)  # 11 x 4 inches at 120 dpi


def test_report__curves_over_training_minutes(tmp_path, capsys):
    """``--over minutes``: x is the sum of the iterations' logged seconds (a resumed run's
    repeated iteration counted once); an old curve's points, without minutes, are one line."""
    from az.play import report
    from az.play.report import curves

    workdir = tmp_path / "run"
    workdir.mkdir()
    rows = [{"iteration": 1, "games_finished": 0, "seconds": 120.0},
            {"iteration": 2, "games_finished": 8, "seconds": 30.0, "teacher/top1": 0.05},
            {"iteration": 2, "games_finished": 8, "seconds": 60.0, "teacher/top1": 0.05},  # resumed: its last row
            {"iteration": 3, "games_finished": 20, "seconds": 60.0, "teacher/top1": 0.1}]
    with open(workdir / "metrics.jsonl", "w") as f:
        for row in rows:
            row.update({"teacher/top3": 0.2, "teacher/value_sign_accuracy": 0.6, "teacher/value_rank_correlation": 0.3}
                       if "teacher/top1" in row else {})
            f.write(json.dumps(row) + "\n")
    logged = report.read_metrics(str(workdir))
    assert curves.progress_by_iteration(logged, "minutes") == {1: 2.0, 2: 3.0, 3: 4.0}
    assert curves.progress_by_iteration(logged, "games") == {1: 0, 2: 8, 3: 20}
    out = tmp_path / "minutes.png"
    assert report.main(["curve", "--workdir", str(workdir), "--over", "minutes", "--out", str(out)]) == 0
    assert _png_size(out) == (1320, 480)
    with_minutes = {"run vs greedy": [(8, 10.0, -50.0, 70.0, 0.51, 2, 3.0), (20, 60.0, 0.0, 120.0, 0.58, 3, 4.0)]}
    report.plot_elo_curve(with_minutes, str(tmp_path / "elo.png"), over="minutes")
    assert _png_size(tmp_path / "elo.png") == (1320, 480)
    old = {"run vs greedy": [(8, 10.0, -50.0, 70.0, 0.51, 2)]}
    with pytest.raises(ValueError, match="no training minutes"):
        report.plot_elo_curve(with_minutes, str(tmp_path / "elo.png"), baseline=old, over="minutes")


def test_report__balance_scores_black_by_engine(tmp_path, fairy_stockfish):
    from az.play import report

    sfens = report.start_positions("random_start(2)", 0)
    assert len(sfens) == 900 and len(set(sfens)) == 900
    scores = report.engine_scores(sfens[:3] + ["lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"],
                                  f"usi:{fairy_stockfish}?nodes=1000")
    assert len(scores) == 4 and all(abs(s) < 1000 for s in scores)
    table = report.plot_balance({"random_start(2)": scores[:3]}, str(tmp_path / "balance.png"), unit="cp")
    assert table["random_start(2)"]["positions"] == 3
    assert (tmp_path / "balance.png").exists()


def test_report__balance_reusing_a_gpsusi_process_scores_as_fresh_ones(gpsusi):
    """gpsusi at a fixed depth scores a position the same after other positions in the
    same process (``--reuse-engine``) as in a fresh one, in both colours."""
    from az.play import report

    sfens = report.start_positions("random_start(2)", 0)[::300] + [
        "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL w - 1"]
    engine = f"usi:{gpsusi}?LimitDepth=4&byoyomi=60000"
    fresh = report.engine_scores(sfens, engine)
    reused = report.engine_scores(sfens, engine, reuse=True)
    assert fresh == reused and len(fresh) == 4 and all(abs(s) < 1000 for s in fresh)


def test_report__curve_without_opponents_draws_the_logged_teacher_agreement(tmp_path, capsys):
    from az.play import report

    workdir = tmp_path / "run"
    workdir.mkdir()
    with open(workdir / "metrics.jsonl", "w") as f:
        for i in range(1, 5):
            row = {"iteration": i, "games_finished": 10 * i}
            if i % 2 == 0:
                row.update({"teacher/top1": 0.05 * i, "teacher/top3": 0.1 * i, "teacher/value_sign_accuracy": 0.6,
                            "teacher/value_rank_correlation": 0.2})
            f.write(json.dumps(row) + "\n")
    out = tmp_path / "teacher_curve.png"
    assert report.main(["curve", "--workdir", str(workdir), "--out", str(out)]) == 0
    assert _png_size(out) == (1320, 480)
    bare = tmp_path / "bare"
    bare.mkdir()
    (bare / "metrics.jsonl").write_text(json.dumps({"iteration": 1, "games_finished": 3}) + "\n")
    assert report.main(["curve", "--workdir", str(bare), "--out", str(tmp_path / "x.png")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: no teacher metrics in"), err


def test_report__engine_that_crashes_after_starting_is_one_line(tmp_path, monkeypatch, fake_engine, capsys):
    """``report balance`` with an engine that starts, then dies on its first search."""
    from az.play import report

    monkeypatch.setenv("FAKE_ENGINE_MODE", "exit")
    monkeypatch.setenv("FAKE_ENGINE_MOVES", "0")
    code = report.main(["balance", "--start", "standard", "--engine", f"usi:{fake_engine}?nodes=1",
                        "--positions", "2", "--out", str(tmp_path / "b.png")])
    assert code == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("error: ") and "exited" in err[0], err


def _mating_reply(board: cshogi.Board):
    """A USI move that mates on ``board``, or None."""
    for move in list(board.legal_moves):
        board.push(move)
        over = board.is_game_over()
        board.pop()
        if over:
            return cshogi.move_to_usi(move)
    return None


def test_report__loss_causes_tell_avoidable_mates_in_one_from_forced_ones():
    from az.play import report

    seen = set()
    for sfen in helpers.MIXED_THREATS:
        refuted = helpers.mate_in_one_after(sfen)
        blunder = next(m for m, r in refuted.items() if r)
        safe = next(m for m, r in refuted.items() if not r)
        board = cshogi.Board(sfen)
        board.push_usi(blunder)
        mate = _mating_reply(board)
        expected = "avoidable_drop_mate" if "*" in mate else "avoidable_mate"
        assert report.loss_cause(sfen, [blunder, mate], "mate") == expected, sfen
        seen.add(expected)
        board = cshogi.Board(sfen)
        board.push_usi(safe)
        reply = cshogi.move_to_usi(next(iter(board.legal_moves)))
        assert report.loss_cause(sfen, [safe, reply], "mate") == "deeper_mate", sfen
        assert report.loss_cause(sfen, [safe, reply], "max_length") == "max_length"
    assert seen == {"avoidable_drop_mate", "avoidable_mate"}  # the positions cover both
    board = cshogi.Board(helpers.ALL_THREATS)
    move = cshogi.move_to_usi(next(iter(board.legal_moves)))
    board.push_usi(move)
    assert report.loss_cause(helpers.ALL_THREATS, [move, _mating_reply(board)], "mate") == "forced_mate"


def test_report__material_balance_after_the_opening_line(tmp_path):
    """The first player's balance counts a capture on the board and in the captor's hand:
    a bishop trade swings +18 then back to 0; a bishop left to a capture stays at -18.
    The match table averages the games ply by ply, holding each ended game's last balance."""
    import dataclasses

    from az.play import report
    from envs import records

    opening = ["7g7f", "3c3d"]
    trade = opening + ["8h2b+", "3a2b"]
    hung = opening + ["1g1f", "2b8h+", "9g9f"]
    start = cshogi.STARTING_SFEN
    assert report.balance_after_opening(start, trade, 2, "black", horizon=3) == [0, 18, 0, 0]
    assert report.balance_after_opening(start, trade, 2, "white", horizon=3) == [0, -18, 0, 0]
    assert report.balance_after_opening(start, hung, 2, "black", horizon=4) == [0, 0, -18, -18, -18]
    # a game lost on an illegal move (recorded last) holds the balance before it
    assert report.balance_after_opening(start, hung + ["2c2g+"], 2, "black", horizon=5) == [0, 0, -18, -18, -18, -18]

    games = []
    (tmp_path / "m" / "games").mkdir(parents=True)
    for moves, result, reason in ((trade, "draw", "max_length"), (hung, "loss", "resign")):
        name = f"{len(games):04d}.csa"
        (tmp_path / "m" / "games" / name).write_text(records.to_csa(start, moves, end=reason))
        games.append(dataclasses.asdict(match.GameResult(len(games), "o", "1", "black", result, reason,
                                                           len(moves) - len(opening), "x.kif", name, moves)))
    (tmp_path / "m" / "results.json").write_text(json.dumps({"first": "a", "second": "b", "games": games}))
    table = report.match_losses(str(tmp_path / "m"))
    assert table["players"] == "a vs b" and table["causes"] == {"resign": 1}
    assert table["balance"][:4] == [0, 9, -9, -9] and table["balance"][-1] == -9
    assert table["behind"] == 0.5  # the hung bishop's game is 18 down ten plies on
    report.plot_balance_after_opening({"m": table}, str(tmp_path / "balance.png"))
    assert (tmp_path / "balance.png").stat().st_size > 0


def test_report__losses_of_a_match_dir_count_each_lost_game(tmp_path, capsys):
    """A match directory as ``Match`` writes it (results.json, games/*.csa): the first
    player's losses from the threat positions, one game it won and one drawn."""
    import dataclasses

    from az.play import report
    from envs import records

    games, expected = [], {}

    def add(sfen, moves, result, reason, cause=None):
        name = f"{len(games):04d}.csa"
        (tmp_path / "m" / "games").mkdir(parents=True, exist_ok=True)
        (tmp_path / "m" / "games" / name).write_text(records.to_csa(sfen, moves, end=reason))
        games.append(dataclasses.asdict(match.GameResult(len(games), "o", "1", "black", result, reason, len(moves),
                                                           name.replace(".csa", ".kif"), name, moves)))
        if cause:
            expected[cause] = expected.get(cause, 0) + 1

    for sfen in helpers.MIXED_THREATS:
        refuted = helpers.mate_in_one_after(sfen)
        blunder = next(m for m, r in refuted.items() if r)
        board = cshogi.Board(sfen)
        board.push_usi(blunder)
        mate = _mating_reply(board)
        add(sfen, [blunder, mate], "loss", "mate", "avoidable_drop_mate" if "*" in mate else "avoidable_mate")
    board = cshogi.Board(helpers.ALL_THREATS)
    move = cshogi.move_to_usi(next(iter(board.legal_moves)))
    board.push_usi(move)
    add(helpers.ALL_THREATS, [move, _mating_reply(board)], "loss", "mate", "forced_mate")
    add(helpers.ALL_THREATS, [move, _mating_reply(board)], "win", "mate")  # the first player's wins are not judged
    add(helpers.ALL_THREATS, [move], "draw", "max_length")
    (tmp_path / "m" / "results.json").write_text(json.dumps({"games": games}))

    assert report.main(["losses", str(tmp_path / "m"), "--out", str(tmp_path / "losses.json")]) == 0
    table = json.loads((tmp_path / "losses.json").read_text())[str(tmp_path / "m")]
    assert {k: table[k] for k in ("games", "losses", "causes")} == {"games": 8, "losses": 6, "causes": expected}
    assert len(table["balance"]) == report.matches.BALANCE_PLIES + 1 and (tmp_path / "losses.png").stat().st_size > 0
    capsys.readouterr()
    assert report.main(["losses", str(tmp_path / "nowhere")]) == 1
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "nowhere" in err[0] and "results.json" in err[0], err
