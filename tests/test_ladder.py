"""The rating ladder: the joint Elo fit (known answers, anchoring, intervals), recorded
matches read back, the plot and table written, the climbing schedule, and the opponent
spellings of its rungs."""

import json
import math

import numpy as np
import pytest

from az.play import elo
from az.play import players as players_lib
from az.play.report import ladder as ladder_lib

TRUE = {"random": 0.0, "greedy": 700.0, "heuristic d1": 1100.0, "heuristic d2": 1400.0, "runs/x@10 n=16": 1250.0}


def _expected(a: str, b: str) -> float:
    return 1.0 / (1.0 + 10 ** ((TRUE[b] - TRUE[a]) / 400))


def _results(games: int, *, sampled: bool, seed: int = 0) -> list[elo.PairResult]:
    """Every pair of TRUE plays ``games`` games: the expected points, or binomial draws of them."""
    rng, names, results = np.random.default_rng(seed), list(TRUE), []
    for i, a in enumerate(names):
        for b in names[i + 1:]:
            p = _expected(a, b)
            results.append(elo.PairResult(a, b, games, float(rng.binomial(games, p)) if sampled else games * p))
    return results


def test_fit__recovers_known_ratings_from_their_expected_results():
    ratings = elo.fit_ratings(_results(100_000, sampled=False))
    for name, value in TRUE.items():
        assert ratings[name].elo == pytest.approx(value, abs=2.0), name
    assert ratings["greedy"].games == 4 * 100_000


def test_fit__sampled_results_land_within_their_intervals():
    ratings = elo.fit_ratings(_results(400, sampled=True, seed=3))
    for name, value in TRUE.items():
        r = ratings[name]
        assert r.low - 1e-9 <= value <= r.high + 1e-9, (name, r)
        assert abs(r.elo - value) < 150, (name, r)


def test_fit__is_anchored_at_random_whatever_the_scale():
    ratings = elo.fit_ratings(_results(1000, sampled=False))
    assert ratings["random"] == elo.Rating(0.0, 0.0, 0.0, 4000)
    shifted = elo.fit_ratings([r._replace(first=r.first.upper(), second=r.second.upper()) for r in
                               _results(1000, sampled=False)], anchor="GREEDY")
    assert shifted["GREEDY"].elo == 0.0
    assert shifted["RANDOM"].elo == pytest.approx(-ratings["greedy"].elo, abs=1e-6)


def _width(rating: elo.Rating) -> float:
    return rating.high - rating.low


def test_fit__intervals_shrink_as_the_games_grow():
    exact_few, exact_many = (elo.fit_ratings(_results(n, sampled=False), prior_games=0) for n in (100, 1600))
    few, many = (elo.fit_ratings(_results(n, sampled=False)) for n in (100, 1600))
    for name in set(TRUE) - {"random"}:
        assert _width(exact_many[name]) == pytest.approx(_width(exact_few[name]) / 4, rel=1e-6), name  # 1 / sqrt(16)
        assert _width(many[name]) < _width(few[name]) / 3, name  # the virtual draws weigh less as games grow


def test_fit__a_clean_sweep_stays_finite_and_a_broken_chain_is_named():
    swept = elo.fit_ratings([elo.PairResult("greedy", "random", 40, 40.0)])
    assert 500 < swept["greedy"].elo < 1500 and math.isfinite(swept["greedy"].high)
    with pytest.raises(ValueError, match="no games of 'random'"):
        elo.fit_ratings([elo.PairResult("greedy", "heuristic d1", 10, 2.0)])
    with pytest.raises(ValueError, match="no chain of games links 'heuristic d1', 'heuristic d2' to 'random'"):
        elo.fit_ratings([elo.PairResult("greedy", "random", 10, 8.0),
                         elo.PairResult("heuristic d1", "heuristic d2", 10, 5.0)])


def _record(folder, first: str, second: str, outcomes: str) -> None:
    """A match folder as eval.py leaves it (results.json), ``outcomes`` one of w/d/l a game."""
    folder.mkdir(parents=True)
    games = [{"game": i, "result": {"w": "win", "d": "draw", "l": "loss"}[o]} for i, o in enumerate(outcomes)]
    (folder / "results.json").write_text(json.dumps({"first": first, "second": second, "games": games}))


def test_ladder__fits_recorded_matches_and_writes_the_plot_table_and_json(tmp_path, capsys):
    run = tmp_path / "runs" / "x"
    run.mkdir(parents=True)
    (run / "metrics.jsonl").write_text("\n".join(json.dumps({"iteration": s, "games_finished": 64 * s})
                                                 for s in (10, 20)) + "\n")
    recorded = tmp_path / "eval"
    _record(recorded / "a", "greedy", "random", "w" * 18 + "dl")
    _record(recorded / "b", "heuristic d1", "greedy", "w" * 15 + "l" * 5)
    _record(recorded / "nested" / "c", f"{run}@10 n=16", "greedy", "w" * 6 + "d" * 2 + "l" * 12)
    _record(recorded / "nested" / "d", f"{run}@20 n=16", "heuristic d1", "w" * 9 + "d" * 2 + "l" * 9)
    settings = ladder_lib.LadderSettings(str(tmp_path / "none_played"), None, None, 16)
    out = tmp_path / "new_folder" / "ladder.png"
    summary = ladder_lib.ladder([], list(ladder_lib.DEFAULT_RUNGS), settings, recorded=[str(recorded)], play=False,
                                path=str(out))
    assert out.stat().st_size > 5000
    saved = json.loads((tmp_path / "new_folder" / "ladder.json").read_text())
    assert saved["ratings"] == json.loads(json.dumps(summary["ratings"]))
    ratings = summary["ratings"]
    assert ratings["random"]["elo"] == 0.0
    assert ratings[f"{run}@10 n=16"]["elo"] < ratings["greedy"]["elo"] < ratings["heuristic d1"]["elo"]
    assert ratings[f"{run}@20 n=16"]["elo"] == pytest.approx(ratings["heuristic d1"]["elo"], abs=1)
    assert ladder_lib.training_games(str(run), 20) == 1280 and ladder_lib.training_games(str(run), 0) == 0
    assert ladder_lib.training_games(str(run), 15) is None
    table = capsys.readouterr().out
    assert table.splitlines()[0] == "| player | Elo | 95% interval | games |"
    assert table.index("heuristic d1") < table.index("| greedy") < table.index("| random")


def test_ladder__bad_match_folders_are_named(tmp_path):
    with pytest.raises(ValueError, match="match folder .*absent: no such file"):
        ladder_lib.read_matches([str(tmp_path / "absent")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(ValueError, match="no results.json in it"):
        ladder_lib.read_matches([str(tmp_path / "empty")])
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "results.json").write_text('{"first": "a"}')
    with pytest.raises(ValueError, match="not a match eval.py wrote"):
        ladder_lib.read_matches([str(tmp_path / "bad")])


def test_ladder__cli_says_one_line_for_bad_input(tmp_path, capsys):
    from az.play import report

    code = report.main(["ladder", "--no-play", "--matches", str(tmp_path / "absent"), "--out", str(tmp_path / "l.png")])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "absent: no such file" in err
    code = report.main(["ladder", str(tmp_path / "no_run@5"), "--out", str(tmp_path / "l.png")])
    err = capsys.readouterr().err.strip()
    assert code == 1 and len(err.splitlines()) == 1 and "no snapshots" in err


def test_climb__stops_between_a_rung_it_beats_and_one_that_beats_it():
    strength = {"r0": 0, "r1": 1, "r2": 2, "r3": 3, "r4": 4}
    played = []

    def score(snapshot, rung):
        played.append(rung)
        return 1.0 if snapshot > strength[rung] else 0.0

    rungs = list(strength)
    assert ladder_lib.climb(score, 2.5, rungs, 0) == {0: 1.0, 1: 1.0, 2: 1.0, 3: 0.0}
    played.clear()
    assert ladder_lib.climb(score, 0.5, rungs, 3) == {3: 0.0, 2: 0.0, 1: 0.0, 0: 1.0}
    assert ladder_lib.climb(score, 9, rungs, 4) == {4: 1.0}  # above the top rung: nothing higher to play
    assert ladder_lib.climb(lambda s, r: 0.5, 0, rungs, 2) == {2: 0.5}


@pytest.mark.parametrize("spec, name", [("random", "random"), ("greedy", "greedy"),
                                        ("heuristic?depth=2", "heuristic d2"), ("heuristic", "heuristic d1")])
def test_rungs__named_as_their_players_record_them(spec, name):
    assert ladder_lib.rung_name(spec) == name == players_lib.parse_player(spec).name


def test_spellings__reference_engines_by_short_name(fairy_stockfish, gpsusi):
    fs = players_lib.parse_player("fairy-stockfish?nodes=1000")
    assert (fs.name, fs.path, fs.go_command) == ("fairy-stockfish?nodes=1000", fairy_stockfish, "go nodes 1000")
    gps = players_lib.parse_player("gpsusi?depth=5")
    assert (gps.name, gps.path, gps.options) == ("gpsusi?depth=5", gpsusi, {"LimitDepth": "5"})
    assert gps.go_command == "go btime 0 wtime 0 byoyomi 60000"
    assert players_lib.parse_player(f"usi:{fairy_stockfish}?nodes=10").go_command == "go nodes 10"  # the long form


@pytest.mark.parametrize("spec, complaint", [
    ("gpsusi?depth=2", "gpsusi?depth=D, D an integer from 4 to 10"),
    ("gpsusi?nodes=100", "gpsusi?depth=D"),
    ("fairy-stockfish", "fairy-stockfish?nodes=N, N an integer >= 1"),
    ("fairy-stockfish?nodes=0", "fairy-stockfish?nodes=N"),
    ("fairy-stockfish?nodes=10&Hash=64", "and no other option"),
    ("stockfish?nodes=10", "expected checkpoint:WORKDIR"),
])
def test_spellings__a_bad_one_is_named_in_one_line(spec, complaint):
    with pytest.raises(players_lib.PlayerError) as caught:
        players_lib.parse_player(spec)
    message = str(caught.value)
    assert complaint in message and repr(spec) in message and "\n" not in message


def test_spellings__eval_reports_a_bad_opponent_in_one_line(capsys):
    import importlib.util
    import os

    spec = importlib.util.spec_from_file_location("eval_cli", os.path.join(os.path.dirname(__file__), "..", "eval.py"))
    eval_cli = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(eval_cli)
    assert eval_cli.main(["--player", "random", "--opponent", "gpsusi?depth=99"]) == 1
    err = capsys.readouterr().err.strip()
    assert err.startswith("error: player 'gpsusi?depth=99'") and len(err.splitlines()) == 1
