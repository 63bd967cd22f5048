"""The classical baseline: its features (``az.classical.features``) against a slow
reference written here from the module's docstring.

The reference reads each SFEN with cshogi and counts every feature square by square in
plain Python: each side in its own frame (rank 0 its far side), attacks by each piece's
movement rule (sliders stop at the first piece, which they attack; pins and checks are
ignored; the king attacks too). "Attackers per square, up to 3" is min(3, number of
attacking pieces). The module counts the directions a square is attacked from; the two
agree on every position: a piece attacks a square from one direction (its displacement),
and two pieces cannot attack from the same direction, as a stepper stands on the first
square of that direction and so blocks every slider behind it.
"""

import functools
import math
import random

import cshogi
import jax.numpy as jnp
import numpy as np
import pytest

from az.classical import features as F
from envs import notation
from helpers import random_scattered_sfen

# Reference --------------------------------------------------------------------------

# cshogi piece types 1..14 (colour bit 16 for white) as our kind names.
CSHOGI_KIND = {1: "P", 2: "L", 3: "N", 4: "S", 5: "B", 6: "R", 7: "G", 8: "K",
               9: "+P", 10: "+L", 11: "+N", 12: "+S", 13: "+B", 14: "+R"}
CSHOGI_HAND = "PLNSGBR"  # cshogi's hand order
GOLD_MOVERS = ("G", "+P", "+L", "+N", "+S")
ROOK_LIKE = ("R", "+R")
NON_KING = ("P", "L", "N", "S", "B", "R", "G", "+P", "+L", "+N", "+S", "+B", "+R")
ORTHO = ((0, -1), (0, 1), (1, 0), (-1, 0))
DIAG = ((1, -1), (-1, -1), (1, 1), (-1, 1))
# Movement in the owner's own frame as (files, ranks); rank -1 is forward.
STEPS = {
    "P": ((0, -1),),
    "N": ((1, -2), (-1, -2)),
    "S": ((0, -1),) + DIAG,
    "G": ((0, -1), (1, -1), (-1, -1), (1, 0), (-1, 0), (0, 1)),
    "K": ORTHO + DIAG,
    "+B": ORTHO,
    "+R": DIAG,
}
for _k in GOLD_MOVERS:
    STEPS[_k] = STEPS["G"]
SLIDES = {"L": ((0, -1),), "B": DIAG, "R": ORTHO, "+B": DIAG, "+R": ORTHO}


def _on(f, r):
    return 0 <= f <= 8 and 0 <= r <= 8


def _side_to_move_grid(sfen):
    """The position seen by the side to move: (grid {(file, rank): (owner, kind)} with
    owner 0 the side to move, rank 0 its far side; hands [2][kind letter -> n])."""
    board = cshogi.Board(sfen)
    turn = board.turn
    grid = {}
    for sq, piece in enumerate(board.pieces):
        if piece == 0:
            continue
        colour = 1 if piece >= 16 else 0
        f, r = divmod(sq, 9)  # cshogi: file 0 = USI file 1, rank 0 = 'a', black's frame
        if turn == 1:
            f, r = 8 - f, 8 - r
        grid[(f, r)] = (0 if colour == turn else 1, CSHOGI_KIND[piece & 15])
    hands = [dict(zip(CSHOGI_HAND, board.pieces_in_hand[c])) for c in (turn, 1 - turn)]
    return grid, hands


def _turned(grid):
    """The same grid in the other side's frame, owners swapped."""
    return {(8 - f, 8 - r): (1 - o, k) for (f, r), (o, k) in grid.items()}


def _attacked_squares(grid, f, r):
    """Squares the piece on (f, r) attacks."""
    owner, kind = grid[(f, r)]
    sign = 1 if owner == 0 else -1  # owner 1 moves the other way in this frame
    out = set()
    for df, dr in STEPS.get(kind, ()):
        t = (f + sign * df, r + sign * dr)
        if _on(*t):
            out.add(t)
    for df, dr in SLIDES.get(kind, ()):
        t = (f + sign * df, r + sign * dr)
        while _on(*t):
            out.add(t)
            if t in grid:
                break
            t = (t[0] + sign * df, t[1] + sign * dr)
    return out


def _attackers(grid, owner):
    """{square: number of ``owner``'s pieces attacking it} (uncapped)."""
    n = {}
    for sq, (o, k) in grid.items():
        if o != owner:
            continue
        for t in _attacked_squares(grid, *sq):
            n[t] = n.get(t, 0) + 1
    return n


def _count(attackers, sq):
    return min(3, attackers.get(sq, 0))


def _neighbours(f, r):
    return [(f + df, r + dr) for df, dr in ORTHO + DIAG if _on(f + df, r + dr)]


def _zone(f, r):
    return [(f, r)] + _neighbours(f, r)


def _castle_score(grid):
    """Pieces in place of the best castle whose king square holds the king (the king is
    the condition and is not counted itself); 0 when the king is on no castle's square."""
    best = 0
    letters = {"P", "L", "N", "S", "G", "B", "R"}
    for king_name, pieces in F.CASTLES.values():
        if grid.get(divmod(F.usi_square(king_name), 9)) != (0, "K"):
            continue
        score = 0
        for letter, squares in pieces.items():
            assert letter in letters
            score += sum(grid.get(divmod(F.usi_square(s), 9)) == (0, letter) for s in squares)
        best = max(best, score)
    return best


def _side_terms(grid, hand):
    """Every per-side feature of owner 0 in ``grid`` (that side's own frame)."""
    mine = {sq: k for sq, (o, k) in grid.items() if o == 0}
    theirs = {sq: k for sq, (o, k) in grid.items() if o == 1}
    my_att, their_att = _attackers(grid, 0), _attackers(grid, 1)
    king = next(sq for sq, k in mine.items() if k == "K")
    their_king = next(sq for sq, k in theirs.items() if k == "K")
    squares = [(f, r) for f in range(9) for r in range(9)]
    t = {}

    def n_kind(kind):
        return sum(k == kind for k in mine.values())

    for letter in "PLNSBRG":
        promoted = n_kind("+" + letter) if letter != "G" else 0
        t[f"material_{letter}"] = n_kind(letter) + promoted + hand[letter]
        t[f"in_hand_{letter}"] = hand[letter]
        if letter != "G":
            t[f"promoted_{letter}"] = promoted

    def mobility(kinds):
        reach = set()
        for sq, k in mine.items():
            if k in kinds:
                reach |= _attacked_squares(grid, *sq)
        return sum(1 for s in reach if s not in mine and their_att.get(s, 0) == 0)

    t["bishop_mobility"] = mobility(("B", "+B"))
    t["rook_mobility"] = mobility(("R", "+R"))
    t["_king_zone_attacks"] = sum(_count(my_att, s) for s in _zone(*their_king))
    # attackers counted up to 3 with the king, less the king's own attack
    t["king_defenders"] = sum(_count(my_att, s) - 1 for s in _neighbours(*king))
    t["escape_routes"] = sum(1 for s in _neighbours(*king) if s not in mine and their_att.get(s, 0) == 0)
    t["home_camp_weakness"] = sum(1 for s in squares if s[1] >= 6 and _count(their_att, s) > _count(my_att, s))
    t["enemy_camp_control"] = sum(1 for s in squares if s[1] <= 2 and _count(my_att, s) > _count(their_att, s))
    t["castle"] = _castle_score(grid)
    t["gold_ahead_of_silver"] = sum(1 for (f, r), k in mine.items() if k in GOLD_MOVERS and mine.get((f, r + 1)) == "S")
    t["gold_beside_rook"] = sum(
        1 for (f, r), k in mine.items() if k in GOLD_MOVERS and "R" in (mine.get((f - 1, r)), mine.get((f + 1, r))))
    t["boxed_in_bishop"] = sum(
        1 for (f, r), k in mine.items() if k == "B" for df, dr in DIAG if (f + df, r + dr) in mine)
    t["piece_ahead_of_pawn"] = sum(1 for (f, r), k in mine.items() if k == "P" and (f, r - 1) in mine)
    t["bishop_head_protected"] = sum(
        1 for (f, r), k in mine.items() if k == "B" and r >= 1 and my_att.get((f, r - 1), 0) > 0)
    t["reclining_silver"] = sum(
        1 for (f, r), k in mine.items() if k == "S" and 3 <= r <= 5 and "P" in (mine.get((f - 1, r)), mine.get((f + 1, r))))
    t["claimed_files"] = sum(1 for (f, r), k in mine.items() if k == "P" and r == 4 and my_att.get((f, r), 0) > 0)
    t["adjacent_silvers"] = int(any(k == "S" and mine.get((f + 1, r)) == "S" for (f, r), k in mine.items()))
    t["adjacent_golds"] = int(any(k == "G" and mine.get((f + 1, r)) == "G" for (f, r), k in mine.items()))
    rooks = [sq for sq, k in mine.items() if k in ROOK_LIKE]
    kf = their_king[0]
    t["rook_in_enemy_camp"] = sum(1 for f, r in rooks if r <= 2)
    t["rook_on_king_file"] = sum(1 for f, r in rooks if f == kf)
    t["rook_beside_king_file"] = sum(1 for f, r in rooks if abs(f - kf) == 1)
    t["rook_beside_edge_king_file"] = t["rook_beside_king_file"] if kf in (0, 1, 7, 8) else 0
    open_, semi = 0, 0
    for f, r in rooks:
        others = [grid[(f, rr)][0] for rr in range(9) if rr != r and (f, rr) in grid]
        open_ += not others
        semi += others == [1]
    t["rook_open_file"], t["rook_semi_open_file"] = open_, semi
    t["aggression"] = sum(8 - r for (f, r), k in mine.items() if k != "K")
    t["total_attacking"] = sum(1 for s in theirs if my_att.get(s, 0) > 0)
    for kind in NON_KING:
        own = their = 0.0
        for (f, r), k in mine.items():
            if k == kind:
                own += math.hypot(f - king[0], r - king[1])
                their += math.hypot(f - their_king[0], r - their_king[1])
        t[f"distance_own_king_{kind}"] = own
        t[f"distance_enemy_king_{kind}"] = their
    return t


def _blocked_flow(grid):
    """Squares the opponent's sliders reach only once the root's pieces on safe squares
    are gone, in the root's frame."""
    root_att, opp_att = _attackers(grid, 0), _attackers(grid, 1)
    cleared = {sq for sq, (o, k) in grid.items()
               if o == 0 and _count(opp_att, sq) <= _count(root_att, sq) and k != "K"}

    def reach(blocking):
        out = set()
        for (f, r), (o, k) in grid.items():
            if o != 1:
                continue
            for df, dr in SLIDES.get(k, ()):
                t = (f - df, r - dr)  # the opponent moves the other way in the root's frame
                while _on(*t):
                    out.add(t)
                    if t in blocking:
                        break
                    t = (t[0] - df, t[1] - dr)
        return out

    blockers = set(grid)
    return len(reach(blockers - cleared) - reach(blockers))


def reference_features(sfen):
    """The features (``F.NAMES``) of an SFEN for its side to move, counted from the
    module's docstring."""
    grid, hands = _side_to_move_grid(sfen)
    mine = _side_terms(grid, hands[0])
    theirs = _side_terms(_turned(grid), hands[1])
    root_att = _attackers(grid, 0)
    out = []
    for name in F.NAMES:
        if name == "king_threats":
            out.append(-theirs["_king_zone_attacks"])
        elif name == "king_attacks":
            out.append(mine["_king_zone_attacks"])
        elif name == "bishop_head_attacked":  # the opponent's head square is a rank down here
            out.append(sum(1 for (f, r), (o, k) in grid.items()
                           if o == 1 and k == "B" and r <= 7 and root_att.get((f, r + 1), 0) > 0))
        elif name == "blocked_flow":
            out.append(_blocked_flow(grid))
        elif name in ("hanging", "threatened"):
            opp_att = _attackers(grid, 1)
            owner, sign, more, fewer = (0, -1, opp_att, root_att) if name == "hanging" else (1, 1, root_att, opp_att)
            out.append(sign * sum(GREEDY_VALUE[k] for sq, (o, k) in grid.items()
                                  if o == owner and _count(more, sq) > _count(fewer, sq)))
        else:
            out.append(mine[name] - theirs[name])
    return np.array(out, np.float64)


GREEDY_VALUE = {"P": 1, "L": 3, "N": 4, "S": 5, "B": 8, "R": 10, "G": 6, "K": 0,
                "+P": 6, "+L": 6, "+N": 6, "+S": 6, "+B": 10, "+R": 12}


# Positions --------------------------------------------------------------------------

STARTPOS = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"

# name: (SFEN, what it exercises). Every position passes notation.parse_sfen.
HAND_MADE = {
    "start": (STARTPOS, "the symmetric start: every difference is 0"),
    "start_white": (STARTPOS.replace(" b ", " w "), "white to move at the start"),
    "mino_vs_yagura": (
        "ln4bnl/1rs3gk1/p1pppgsp1/1p3pp2/9/3P5/PPP1PPPPP/1BSRG1SK1/LN3G1NL b P 1",
        "black's full Mino (king and 9 pieces) against white's Yagura short of a pawn (in "
        "black's hand); gold beside a ranging rook; white's boxed-in bishop",
    ),
    "mino_vs_yagura_white": (
        "ln4bnl/1rs3gk1/p1pppgsp1/1p3pp2/9/3P5/PPP1PPPPP/1BSRG1SK1/LN3G1NL w P 1",
        "the same with white to move",
    ),
    "yagura_vs_reclining_silver": (
        "ln1gkgsnl/1r5b1/ppp1p1ppp/3psp3/9/2PP3P1/PPSGPPP1P/1KG2S1R1/LNB4NL w - 1",
        "white to move: black's full Yagura (king 8h matches three castles), white's "
        "reclining silver on its 5f between two pawns",
    ),
    "promoted_and_hands": (
        "3gks3/7+R1/p3+Pp3/1p5p1/2+B5+l/1+S7/P1P+n2P1P/1+r1G1S3/4KG3 b BS2N2L5Pgnl4p 1",
        "promoted pieces of every kind (+R +B +P +S black, +R +N +L white), large hands, a "
        "dragon and a horse in the enemy camp",
    ),
    "king_in_the_middle": (
        "b3r1l1k/7gs/ppP1P2p1/3SG1L2/+b3KG2+r/9/P7P/9/9 b S2NL6Pgs2nl5p 1",
        "black king on 5e between a rook, bishop, horse, dragon and lance, each stopped by "
        "black pieces (some safe, one outnumbered): blocked flow, king threats, escapes",
    ),
    "rooks_and_edge_king": (
        "3ss1g1k/9/2pp1p+R1p/9/9/1N7/PP2P4/K1GG3R1/L1S6 b BSNL5Pbg2n2l6p 1",
        "white king on the edge file 1: black rook on the open file 2 beside it, dragon in "
        "the enemy camp on a semi-open file; adjacent golds and silvers, gold ahead of "
        "silver, piece ahead of pawn",
    ),
    "white_dragon_open_file": (
        "5ggk1/6s2/4p1ppp/5p3/8R/9/P+rPPP4/2S6/K2G1G3 w BS2N2L4Pbs2n2l5p 1",
        "white to move: white dragon on an open file in black's camp beside black's edge "
        "king, black rook on a semi-open file beside white's edge king; white's adjacent golds",
    ),
    "bishop_heads_and_claimed_file": (
        "lnsgkgsnl/1r5b1/pppppp1pp/6pP1/4P4/3PSP3/PPP3P1P/1BG4R1/LNS1KG1NL b - 1",
        "black: boxed-in bishop (4 neighbours), protected bishop head, reclining silver on "
        "5f, claimed 5th-rank pawn; white's bishop head attacked by black's pawn",
    ),
}


def _random_game_sfens(seed=7, plies=(24, 49, 72, 97, 120), max_plies=200):
    """Positions of one seeded random legal game played with cshogi."""
    rng = random.Random(seed)
    board = cshogi.Board()
    out = []
    for ply in range(1, max_plies + 1):
        moves = list(board.legal_moves)
        if not moves or board.is_game_over():
            break
        board.push(rng.choice(moves))
        if ply in plies:
            out.append((f"game_ply{ply}", board.sfen()))
    return out


def _positions():
    out = [(name, sfen) for name, (sfen, _) in HAND_MADE.items()]
    out += _random_game_sfens(seed=7)
    out += _random_game_sfens(seed=11, plies=(61, 110))
    rng = np.random.default_rng(3)
    out += [(f"scattered{i}", random_scattered_sfen(rng)) for i in range(8)]
    out += [(f"crowded{i}", random_scattered_sfen(rng, crowd_enemy_king=True)) for i in range(2)]
    return out


POSITIONS = _positions()
BATCH = 64  # one compiled shape; two 32-position words of the bit-sliced core


def _mover_frame(sfen):
    """(board [81], hand [2, 7]) in the mover's frame, as ``notation.from_sfen`` builds
    its state (without compiling the environment's init)."""
    board, hand, color, _ = notation.parse_sfen(sfen)
    board, hand = notation.to_mover_frame(board, hand, color)
    return np.asarray(board, np.int32), np.asarray(hand, np.int32)


def _run(boards, hands):
    """``F.feature_values``'s features (the compiled block every caller shares)."""
    out, _ = F.feature_values(np.stack(boards), np.stack(hands))
    return out.astype(np.float64)


@functools.cache
def _computed():
    """(features [P, F], features of the positions turned around [P, F]) in one call."""
    boards, hands = zip(*(_mover_frame(sfen) for _, sfen in POSITIONS))
    turned_b, turned_h = F.root_frame(jnp.asarray(np.stack(boards)), jnp.asarray(np.stack(hands)))
    allb = list(boards) + list(np.asarray(turned_b))
    allh = list(hands) + list(np.asarray(turned_h))
    out = _run(allb, allh)
    return out[:len(POSITIONS)], out[len(POSITIONS):]


@functools.cache
def _expected():
    return np.stack([reference_features(sfen) for _, sfen in POSITIONS])


# Features whose code reads the docstring differently: name -> the disagreement. Their
# comparison with the docstring's reading is an expected failure (strict: it flags the
# day the code changes), and they are checked against the code's reading below.
DIFFERENCE = [i for i, n in enumerate(F.NAMES)
              if n not in ("king_threats", "king_attacks", "bishop_head_attacked", "blocked_flow", "hanging",
                           "threatened")]


def _feature_param(index, name):
    return pytest.param(index, id=name)


# Tests ------------------------------------------------------------------------------


def test_positions_are_distinct_and_fit_one_batch():
    assert 2 * len(POSITIONS) <= BATCH
    assert len({sfen.rsplit(" ", 1)[0] for _, sfen in POSITIONS}) == len(POSITIONS)


@pytest.mark.parametrize("index", [_feature_param(i, n) for i, n in enumerate(F.NAMES)])
def test_feature_matches_reference(index):
    got, _ = _computed()
    expected = _expected()
    bad = [f"position {name}: expected {expected[p, index]:g}, got {got[p, index]:g} ({sfen})"
           for p, (name, sfen) in enumerate(POSITIONS)
           if not np.isclose(got[p, index], expected[p, index], rtol=0, atol=1e-4)]
    np.testing.assert_allclose(got[:, index], expected[:, index], rtol=0, atol=1e-4,
                               err_msg=f"feature {F.NAMES[index]} differs on\n" + "\n".join(bad))


def test_hand_made_positions_exercise_their_families():
    """The hand-made positions are not all zeros where they are meant to bite."""
    expected = dict(zip([n for n, _ in POSITIONS], _expected()))
    f = {name: dict(zip(F.NAMES, expected[name])) for name in HAND_MADE}
    assert not np.any(expected["start"][DIFFERENCE])
    assert f["mino_vs_yagura"]["castle"] == 1  # 9 pieces in place against 8 (kings not counted)
    assert f["mino_vs_yagura"]["gold_beside_rook"] == 1
    assert f["yagura_vs_reclining_silver"]["reclining_silver"] == 1  # white's, white to move
    assert f["yagura_vs_reclining_silver"]["castle"] == -9  # white has none, black (not to move) a full Yagura
    assert f["promoted_and_hands"]["promoted_R"] == 0 and f["promoted_and_hands"]["in_hand_P"] == 1
    assert f["king_in_the_middle"]["blocked_flow"] > 0
    assert f["rooks_and_edge_king"]["rook_beside_edge_king_file"] == 1
    assert f["rooks_and_edge_king"]["rook_open_file"] == 1 and f["rooks_and_edge_king"]["rook_semi_open_file"] == 1
    w = f["white_dragon_open_file"]
    assert (w["rook_open_file"], w["rook_semi_open_file"], w["rook_in_enemy_camp"], w["adjacent_golds"]) == (1, -1, 1, 1)
    assert f["bishop_heads_and_claimed_file"]["bishop_head_attacked"] == 1
    assert f["bishop_heads_and_claimed_file"]["claimed_files"] == 1


def test_turning_the_position_around_negates_the_differences():
    """``root_frame`` gives the opponent's view: every difference feature changes sign,
    and the root's king threats are the opponent's king attacks, negated."""
    direct, turned = _computed()
    threats, attacks = F.NAMES.index("king_threats"), F.NAMES.index("king_attacks")
    for p, (name, _) in enumerate(POSITIONS):
        np.testing.assert_allclose(turned[p, DIFFERENCE], -direct[p, DIFFERENCE], rtol=0, atol=1e-4,
                                   err_msg=f"position {name} turned around")
        assert turned[p, threats] == -direct[p, attacks] and turned[p, attacks] == -direct[p, threats], name


def test_batch_equals_positions_one_by_one():
    """A batch of different positions equals each position alone (repeated to the
    compiled batch size)."""
    together, _ = _computed()
    for p in range(0, len(POSITIONS), 3):
        board, hand = _mover_frame(POSITIONS[p][1])
        alone = _run([board] * BATCH, [hand] * BATCH)
        np.testing.assert_array_equal(alone, np.broadcast_to(together[p], alone.shape),
                                      err_msg=f"position {POSITIONS[p][0]}")


# The GA, its tables and the heuristic player. -----------------------------------------

import json  # noqa: E402
import os  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402

import jax  # noqa: E402

from az.classical import evolve, heuristic, run as ga_run  # noqa: E402
from az.play import players as players_lib  # noqa: E402
from az.measure.teacher import COLUMNS  # noqa: E402
from configs import ga_baseline  # noqa: E402

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
MATE_IN_ONE = "4k4/9/4P4/9/9/9/9/9/4K4 b G 1"  # G*5b mates: the pawn on 5c guards it


def _random_game_positions(count, seed):
    """SFENs along seeded random games (positions with a legal move, not over)."""
    rng = random.Random(seed)
    out = []
    while len(out) < count:
        board = cshogi.Board()
        for _ in range(rng.randint(20, 120)):
            moves = list(board.legal_moves)
            if not moves or board.is_draw():
                break
            board.push(rng.choice(moves))
        if list(board.legal_moves):
            out.append(board.sfen())
    return out


def _greedy_choices(sfen):
    """Host greedy (az.play.players.material, a mate worth 10,000): the tied best moves."""
    board = cshogi.Board(sfen)
    me, scores = board.turn, {}
    for move in board.legal_moves:
        board.push(move)
        scores[cshogi.move_to_usi(move)] = 10_000 if board.is_game_over() else players_lib.material(board, me)
        board.pop()
    best = max(scores.values())
    return [m for m, s in scores.items() if s == best], scores


def _write_tsv(path, sfens, moves, splits):
    with open(path, "w", encoding="utf-8") as f:
        f.write("\t".join(COLUMNS) + "\n")
        for i, (sfen, move, split) in enumerate(zip(sfens, moves, splits)):
            board = cshogi.Board(sfen)
            drop = int("*" in move)
            promo = int(move.endswith("+"))
            ply = int(sfen.split()[-1]) - 1
            f.write("\t".join(map(str, [sfen, move, 0, "", ply, len(list(board.legal_moves)), drop, promo,
                                        "standard", "random-random", i, split])) + "\n")


@functools.cache
def _positions_and_table():
    """Random-game positions and the mate-in-one, with their child table; the teacher
    move is greedy's first choice."""
    sfens = _random_game_positions(12, seed=3) + [MATE_IN_ONE]
    teacher = [_greedy_choices(s)[0][0] for s in sfens]
    ts_like = type("T", (), {"sfens": sfens, "best_moves": teacher, "path": "test"})
    board, hand, mask, action = ga_run.positions(ts_like)
    return sfens, teacher, evolve.build_children(board, hand, mask, action)


def test_children_table_matches_cshogi():
    """Children, mates and greedy's material of every child, and the teacher index,
    against cshogi move by move."""
    sfens, teacher, table = _positions_and_table()
    first = np.concatenate([[0], np.cumsum(table.legal)[:-1]])
    for p, sfen in enumerate(sfens):
        _, scores = _greedy_choices(sfen)
        assert table.legal[p] == len(scores), sfen
        board = cshogi.Board(sfen)
        state_board, state_hand = _mover_frame(sfen)
        color = 0 if board.turn == cshogi.BLACK else 1
        for c in range(first[p], first[p] + table.legal[p]):
            usi = notation.board_action_to_usi(state_board, color, int(table.action[c]))
            expected_mate = scores[usi] == 10_000
            assert bool(table.mate[c]) == expected_mate, (sfen, usi)
            if not expected_mate:
                assert table.material[c] == scores[usi], (sfen, usi)
        assert notation.board_action_to_usi(state_board, color, int(table.action[table.teacher[p]])) == teacher[p]
    mate_row = len(sfens) - 1
    assert table.mate[first[mate_row]:first[mate_row] + table.legal[mate_row]].sum() == 1


def test_greedy_agreement_shares_ties_like_the_host_player():
    """On-device greedy agreement = 1 / (number of tied best moves) when the teacher is
    among them (the teacher here is one of them by construction)."""
    sfens, _, table = _positions_and_table()
    got = evolve.greedy_agreement_of(table)
    expected = [1.0 / len(_greedy_choices(s)[0]) for s in sfens]
    np.testing.assert_allclose(got, expected, rtol=1e-6)


def test_agreement_against_brute_force():
    rng = np.random.default_rng(0)
    legal = rng.integers(1, 6, 40).astype(np.int32)
    parent = np.repeat(np.arange(40), legal).astype(np.int32)
    first = np.concatenate([[0], np.cumsum(legal)[:-1]])
    teacher = (first + rng.integers(0, legal)).astype(np.int32)
    teacher[5] = -1  # a position whose move is missing never agrees
    features = rng.integers(-2, 3, (len(parent), F.NUM_FEATURES)).astype(np.float32)  # small integers: many ties
    table = evolve.ChildTable(features, parent, np.zeros_like(parent), np.zeros(len(parent), bool),
                              np.zeros(len(parent), np.float32), teacher, legal)
    weights = rng.integers(-2, 3, (3, F.NUM_FEATURES)).astype(np.float32)
    got = evolve.agreement_of(table, weights)
    for i in range(3):
        scores = features @ weights[i]
        for p in range(40):
            s = scores[first[p]:first[p] + legal[p]]
            tied = np.flatnonzero(s == s.max()) + first[p]
            expected = 1.0 / len(tied) if teacher[p] in tied else 0.0
            assert got[p, i] == pytest.approx(expected), (p, i)


def test_gray_code_round_trip_and_ranges():
    rng = np.random.default_rng(1)
    major = np.isin(np.arange(F.NUM_FEATURES), F.MAJOR)
    weights = np.where(major, rng.integers(0, 1024, (5, F.NUM_FEATURES)), rng.integers(-32, 32, (5, F.NUM_FEATURES)))
    genomes = evolve.encode(weights, 10, 6)
    assert genomes.shape == (5, 26 * 10 + 50 * 6) == (5, evolve.genome_bits(10, 6))
    np.testing.assert_array_equal(np.asarray(evolve.decode(jnp.asarray(genomes), 10, 6)), weights)
    # Gray code: neighbouring values differ in one bit
    a, b = (evolve.encode(np.r_[[v], [0] * (F.NUM_FEATURES - 1)][None], 10, 6) for v in (511, 512))
    assert (a != b).sum() == 1
    with pytest.raises(ValueError, match="material_P"):
        evolve.encode(np.r_[[1024], [0] * (F.NUM_FEATURES - 1)][None], 10, 6)


def _synthetic_table():
    rng = np.random.default_rng(2)
    legal = np.full(30, 4, np.int32)
    parent = np.repeat(np.arange(30), 4).astype(np.int32)
    return evolve.ChildTable(rng.normal(size=(120, F.NUM_FEATURES)).astype(np.float32), parent, np.zeros(120, np.int32),
                             np.zeros(120, bool), np.zeros(120, np.float32), (np.arange(30) * 4).astype(np.int32),
                             legal)


def test_generation_elitism_selection_and_operators():
    table = _synthetic_table()
    config = ga_baseline.get_config("smoke")
    config.crossover_rate, config.mutation_rate, config.elitism = 0.0, 0.0, 2
    pop = evolve.init_population(jax.random.key(0), 12, evolve.genome_bits(10, 6))
    nxt, agree, best = evolve.make_generation(table, config)(pop)
    agree = np.asarray(agree)
    old = np.asarray(pop.genomes)
    new = np.asarray(nxt.genomes)
    order = np.argsort(-agree, kind="stable")
    np.testing.assert_array_equal(new[0], old[order[0]])  # the elite, best first
    assert agree[order[0]] >= agree[order[1]]
    assert all(any((g == o).all() for o in old) for g in new)  # no crossover, no mutation: copies
    np.testing.assert_array_equal(np.asarray(best), np.asarray(evolve.decode(jnp.asarray(old[order[0]][None]), 10, 6))[0])
    assert int(nxt.generation) == 1
    config.mutation_rate = 1.0
    flipped, _, _ = evolve.make_generation(table, config)(pop)
    flipped = np.asarray(flipped.genomes)[2:]
    assert all(any((g == 1 - o).all() for o in old) for g in flipped)  # every bit of an offspring flips


def test_ga_run_resumes_to_the_same_result(tmp_path):
    """A smoke run of 4 generations equals one stopped after 2 and resumed; it writes
    weights.json (agreements, greedy's, weights by name), metrics and the plot."""
    sfens = _random_game_positions(24, seed=5)
    moves = [_greedy_choices(s)[0][-1] for s in sfens]
    tsv = tmp_path / "teacher.tsv"
    _write_tsv(tsv, sfens, moves, ["fit"] * 16 + ["heldout"] * 8)
    config = ga_baseline.get_config("smoke")
    config.teacher_set, config.generations, config.fit_positions = str(tsv), 4, 0
    straight = ga_run.run(config, str(tmp_path / "straight"), log=lambda _: None)
    config.generations = 2
    ga_run.run(config, str(tmp_path / "resumed"), log=lambda _: None)
    config.generations = 4
    resumed = ga_run.run(config, str(tmp_path / "resumed"), log=lambda _: None)
    assert straight["weights"] == resumed["weights"]
    assert straight["fit"] == resumed["fit"] and straight["heldout"]["positions"] == 8
    rows = [json.loads(line) for line in open(tmp_path / "resumed" / "metrics.jsonl")]
    assert [r["generation"] for r in rows] == [0, 1, 2, 3]
    assert (tmp_path / "resumed" / "fitness.png").stat().st_size > 10_000
    saved = json.load(open(tmp_path / "resumed" / "weights.json"))
    assert set(saved["weights"]) == set(F.NAMES)
    assert saved["greedy_heldout"]["all"] > 0.2  # the teacher is one of greedy's tied choices
    np.testing.assert_array_equal(heuristic.load_weights(str(tmp_path / "resumed")),
                                  [saved["weights"][n] for n in F.NAMES])


def test_evolve_cli_names_a_bad_config_value(tmp_path):
    result = subprocess.run([sys.executable, os.path.join(ROOT, "evolve.py"), "--config", "ga_baseline.py:smoke",
                             "--workdir", str(tmp_path), "--config.population=1"],
                            capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert result.returncode == 1
    assert result.stderr.strip().splitlines()[-1] == "error: config.population=1: must be at least 2"


def test_heuristic_plays_mate_in_one_at_both_depths():
    board, hand = _mover_frame(MATE_IN_ONE)
    state = notation.from_sfen(MATE_IN_ONE)
    weights = np.zeros(F.NUM_FEATURES, np.float32)
    weights[:7] = [1, 3, 4, 5, 8, 10, 6]
    for depth in (1, 2):
        action = heuristic.choose(board, hand, np.asarray(state.legal_action_mask), weights, depth,
                                  np.random.default_rng(0))
        assert notation.action_to_usi(state, action) == "G*5b", depth


def test_depth_two_is_the_minimum_over_replies():
    """Depth-2 values against grandchildren made by cshogi and evaluated one by one: the
    evaluation scores a position for the side that just moved, so a reply is scored from
    the opponent's side and negated."""
    sfen = _random_game_positions(1, seed=11)[0]
    board, hand = _mover_frame(sfen)
    state = notation.from_sfen(sfen)
    rng = np.random.default_rng(4)
    weights = rng.integers(-20, 20, F.NUM_FEATURES).astype(np.float32)
    actions, values = heuristic.move_values(board, hand, np.asarray(state.legal_action_mask), weights, depth=2)
    color = 0 if cshogi.Board(sfen).turn == cshogi.BLACK else 1
    grand, owner = [], []
    for i, action in enumerate(actions):
        b = cshogi.Board(sfen)
        b.push_usi(notation.board_action_to_usi(board, color, int(action)))
        for reply in b.legal_moves:
            b.push(reply)
            grand.append(b.sfen())
            owner.append(i)
            b.pop()
    frames = [_mover_frame(s) for s in grand]  # we are to move in each
    turned_b, turned_h = F.root_frame(np.stack([x[0] for x in frames]), np.stack([x[1] for x in frames]))
    f, _ = F.feature_values(np.asarray(turned_b), np.asarray(turned_h))  # seen by the opponent, who just moved
    mated = np.array([not list(cshogi.Board(s).legal_moves) for s in grand])
    expected = np.full(len(actions), np.inf)
    np.minimum.at(expected, np.array(owner), np.where(mated, -heuristic.MATE, -(f @ weights)))
    np.testing.assert_allclose(values, expected, rtol=1e-5)


def test_heuristic_player_specs():
    with pytest.raises(players_lib.PlayerError, match="depth must be 1 or 2"):
        players_lib.parse_player("heuristic?depth=3")
    with pytest.raises(players_lib.PlayerError, match="no such file"):
        players_lib.parse_player("heuristic:/nonexistent/weights.json")
    with pytest.raises(players_lib.PlayerError, match="unknown option"):
        players_lib.parse_player("heuristic?nodes=5")
    player = players_lib.parse_player("heuristic?depth=1")
    assert player.depth == 1 and player.weights.shape == (F.NUM_FEATURES,)
    state = notation.from_sfen("lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1")
    move = player.session().move(players_lib.MatchPosition("startpos", (), state))
    assert np.asarray(state.legal_action_mask)[move]
