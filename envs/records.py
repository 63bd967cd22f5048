"""Game records: a game (start SFEN and USI moves) as a USI ``position`` command, a KIF
or a CSA record. Host-side text, one game at a time; cshogi writes KIF and CSA.
"""

import io

import cshogi
import cshogi.CSA
import cshogi.KIF

from envs.notation import STARTPOS_SFEN, format_sfen, normalize_sfen, parse_sfen, play_line

_CSA_END = {
    "mate": "%TORYO",
    "repetition": "%SENNICHITE",
    "perpetual_check": "%ILLEGAL_ACTION",
    "declaration": "%KACHI",
    "max_length": "%MAX_MOVES",
    "resign": "%TORYO",
    "illegal": "%ILLEGAL_MOVE",
}
_KIF_END = {
    "mate": "resign",
    "resign": "resign",
    "repetition": "sennichite",
    "perpetual_check": "illegal_win",
    "declaration": "win",
    "max_length": "draw",
    "illegal": "illegal_win",
}


def to_usi_position(start_sfen: str, moves: list[str]) -> str:
    """A USI ``position`` command for a game (``startpos`` when it is the usual start)."""
    sfen = normalize_sfen(start_sfen)
    head = "startpos" if sfen == STARTPOS_SFEN else f"sfen {sfen}"
    return f"position {head}" + (" moves " + " ".join(moves) if moves else "")


def to_kif(start_sfen: str, moves: list[str], *, end: str = "", names=("sente", "gote")) -> str:
    """A KIF record (the format of most shogi GUIs) of a game from ``start_sfen``.

    ``end`` is a reason from ``END_REASONS`` (or ``resign``/``illegal``); empty if
    the game is unfinished.
    """
    start = cshogi.Board(format_sfen(*parse_sfen(start_sfen)))
    _, played = play_line(start_sfen, moves)
    exporter = cshogi.KIF.Exporter()
    exporter.kifu = io.StringIO()
    exporter.prev_move, exporter.move_number = None, 1
    handicap = None if start.sfen() == STARTPOS_SFEN else start
    exporter.header(list(names), handicap=handicap)
    for move in played:
        exporter.move(move)
    if end in _KIF_END:
        exporter.end(_KIF_END[end])
    return exporter.kifu.getvalue()


def to_csa(start_sfen: str, moves: list[str], *, end: str = "", names=("sente", "gote")) -> str:
    """A CSA record of a game from ``start_sfen``; ``end`` as in ``to_kif``."""
    start = cshogi.Board(format_sfen(*parse_sfen(start_sfen)))
    _, played = play_line(start_sfen, moves)
    exporter = cshogi.CSA.Exporter()
    exporter.f = io.StringIO()
    exporter.info(start, names=list(names), version="V2.2")
    for move in played:
        exporter.move(move)
    if end in _CSA_END:
        exporter.endgame(_CSA_END[end])
    return exporter.f.getvalue()
