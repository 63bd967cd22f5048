"""Host-side conversions: SFEN and USI moves, between text and environment states.

These run outside jit, one position at a time, for evaluation, the USI engine and
tests. SFEN is validated here before cshogi sees it (cshogi aborts the process on a
malformed SFEN); cshogi formats SFEN. Game records (KIF, CSA, USI position) are
``envs.records``.
"""

import functools
import re
from typing import Callable, NamedTuple

import cshogi
import jax
import jax.numpy as jnp
import numpy as np

from envs import movegen
from envs import env

STARTPOS_SFEN = "lnsgkgsnl/1r5b1/ppppppppp/9/9/9/PPPPPPPPP/1B5R1/LNSGKGSNL b - 1"

# pgx piece ids 0..13 <-> SFEN letters (black upper case).
_PIECE_LETTERS = ["P", "L", "N", "S", "B", "R", "G", "K", "+P", "+L", "+N", "+S", "+B", "+R"]
_PIECE_OF_LETTER = {letter: i for i, letter in enumerate(_PIECE_LETTERS)}
_HAND_LETTERS = "PLNSBRG"  # pgx hand order
_MAX_COUNT = {"P": 18, "L": 4, "N": 4, "S": 4, "B": 2, "R": 2, "G": 4, "K": 2}
_UNPROMOTED = ["P", "L", "N", "S", "B", "R", "G", "K", "P", "L", "N", "S", "B", "R"]

# pgx direction -> (d_file_index, d_rank_index) from destination to source, mover's frame.
_DIRECTION_STEPS = [(0, 1), (-1, 1), (1, 1), (-1, 0), (1, 0), (0, -1), (-1, -1), (1, -1), (-1, 2), (1, 2)]


USI_MOVE = re.compile(r"[1-9][a-i][1-9][a-i]\+?|[PLNSGBR]\*[1-9][a-i]")  # board move or drop


def is_usi_move(text: str) -> bool:
    """Is ``text`` shaped like a USI move (``7g7f``, ``8h2b+``, ``P*5e``)? Legality aside."""
    return USI_MOVE.fullmatch(text) is not None


def split_position(text: str) -> tuple[str, list[str]]:
    """``[position] startpos|sfen SFEN|SFEN [moves m1 m2 ...]`` -> (SFEN, moves).

    The one parser of USI ``position`` text (engine commands, books, opening files).
    The SFEN is returned as written; ``parse_sfen`` validates it.
    """
    words = text.split()
    if words[:1] == ["position"]:
        words = words[1:]
    if "moves" in words:
        index = words.index("moves")
        head, moves = words[:index], words[index + 1:]
    else:
        head, moves = words, []
    if head == ["startpos"]:
        return STARTPOS_SFEN, moves
    if head[:1] == ["sfen"] and len(head) > 1:
        return " ".join(head[1:]), moves
    if head and "/" in head[0]:
        return " ".join(head), moves  # a bare SFEN (book and opening lines)
    _fail(text, "position must be 'startpos' or 'sfen ...' before 'moves'")


def play_line(start_sfen: str, moves) -> tuple[cshogi.Board, list[int]]:
    """(the cshogi board after the USI ``moves`` from ``start_sfen``, cshogi's moves);
    ``ValueError`` names the first malformed or illegal move."""
    board = cshogi.Board(normalize_sfen(start_sfen))
    played = []
    for ply, move in enumerate(moves, 1):
        parsed = board.move_from_usi(move) if is_usi_move(move) else 0
        if parsed == 0 or not board.is_legal(parsed):
            _fail(move, f"illegal move (move {ply})")
        played.append(parsed)
        board.push(parsed)
    return board, played


def _square_name(sq: int) -> str:
    return f"{sq // 9 + 1}{'abcdefghi'[sq % 9]}"


def _fail(culprit: str, what: str):
    raise ValueError(f"{what}: {culprit!r}")


def parse_sfen(sfen: str) -> tuple[np.ndarray, np.ndarray, int, int]:
    """Validates an SFEN and returns (board [81], hands [2, 7], color, move_number).

    ``board`` holds pgx ids in black's frame (black 0..13, white 14..27, -1 empty);
    ``hands`` is [black, white] x P L N S B R G. Raises ``ValueError`` naming what is wrong.
    """
    text = sfen.strip()
    if text.startswith("sfen "):
        text = text[5:].strip()
    fields = text.split()
    if len(fields) not in (3, 4):
        _fail(sfen, "SFEN needs 3 or 4 fields (board, side, hand[, move number])")
    rows = fields[0].split("/")
    if len(rows) != 9:
        _fail(sfen, f"SFEN board needs 9 ranks separated by '/', got {len(rows)}")
    board = -np.ones(81, np.int32)
    for rank, row in enumerate(rows):
        tokens = re.findall(r"\+?[A-Za-z]|[1-9]|.", row)
        file_index = 8  # SFEN ranks run from file 9 to file 1
        for token in tokens:
            if token.isdigit():
                file_index -= int(token)
                continue
            letter = token.upper()
            if letter not in _PIECE_OF_LETTER:
                _fail(sfen, f"SFEN rank {rank + 1} has an unknown piece {token!r}")
            if file_index < 0:
                _fail(sfen, f"SFEN rank {rank + 1} is longer than 9 squares")
            piece = _PIECE_OF_LETTER[letter] + (0 if token[-1].isupper() else 14)
            board[file_index * 9 + rank] = piece
            file_index -= 1
        if file_index != -1:
            _fail(sfen, f"SFEN rank {rank + 1} does not cover exactly 9 squares")
    if fields[1] not in ("b", "w"):
        _fail(sfen, f"SFEN side to move must be 'b' or 'w', got {fields[1]!r}")
    color = 0 if fields[1] == "b" else 1
    hands = np.zeros((2, 7), np.int32)
    if fields[2] != "-":
        matched = re.fullmatch(r"(?:\d*[PLNSGBRplnsgbr])+", fields[2])
        if not matched:
            _fail(sfen, f"SFEN hand {fields[2]!r} is malformed")
        for count, letter in re.findall(r"(\d*)([PLNSGBRplnsgbr])", fields[2]):
            n = int(count) if count else 1
            if n < 1:
                _fail(sfen, f"SFEN hand count must be >= 1 in {fields[2]!r}")
            hands[0 if letter.isupper() else 1, _HAND_LETTERS.index(letter.upper())] += n
    move_number = 1
    if len(fields) == 4:
        if not fields[3].isdigit() or int(fields[3]) < 1:
            _fail(sfen, f"SFEN move number must be a positive integer, got {fields[3]!r}")
        move_number = int(fields[3])
    _check_position(sfen, board, hands, color)
    return board, hands, color, move_number


def normalize_sfen(sfen: str) -> str:
    """A validated SFEN in cshogi's canonical form (move number included)."""
    return cshogi.Board(format_sfen(*parse_sfen(sfen))).sfen()


def _check_position(sfen, board, hands, color):
    """Rejects positions no legal game reaches in a way the engine cannot handle."""
    counts = {letter: 0 for letter in _MAX_COUNT}
    for piece in board[board >= 0]:
        counts[_UNPROMOTED[piece % 14]] += 1
    for side in range(2):
        for i, letter in enumerate(_HAND_LETTERS):
            counts[letter] += hands[side, i]
    for letter, n in counts.items():
        if n > _MAX_COUNT[letter]:
            _fail(sfen, f"SFEN has {n} {letter} (at most {_MAX_COUNT[letter]})")
    for side, king in ((0, 7), (1, 21)):
        if (board == king).sum() != 1:
            _fail(sfen, f"SFEN needs exactly one {'black' if side == 0 else 'white'} king")
    for sq in range(81):
        piece, rank = board[sq], sq % 9
        if piece < 0:
            continue
        own_rank = rank if piece < 14 else 8 - rank  # distance from the far edge
        kind = piece % 14
        if (kind in (0, 1) and own_rank == 0) or (kind == 2 and own_rank < 2):
            _fail(sfen, f"SFEN has a piece that can never move on {_square_name(sq)}")
    for pawn in (0, 14):
        files = (board.reshape(9, 9) == pawn).sum(axis=1)
        if (files > 1).any():
            _fail(sfen, f"SFEN has two unpromoted pawns of one side on file {int(np.argmax(files > 1)) + 1}")
    (black_file, black_rank), (white_file, white_rank) = (divmod(int(np.argmax(board == k)), 9) for k in (7, 21))
    if max(abs(black_file - white_file), abs(black_rank - white_rank)) == 1:
        _fail(sfen, "SFEN has the two kings on adjacent squares")  # cshogi's is_check misses this
    waiting = cshogi.Board(format_sfen(board, hands, 1 - color, 1))
    if waiting.is_check():
        _fail(sfen, "SFEN leaves the side not to move in check")


def format_sfen(board, hands, color, move_number) -> str:
    """SFEN text from black-frame arrays (cshogi normalises it afterwards)."""
    rows = []
    for rank in range(9):
        row, empty = "", 0
        for file_index in range(8, -1, -1):
            piece = board[file_index * 9 + rank]
            if piece < 0:
                empty += 1
                continue
            if empty:
                row, empty = row + str(empty), 0
            letter = _PIECE_LETTERS[piece % 14]
            row += letter if piece < 14 else letter.lower()
        rows.append(row + (str(empty) if empty else ""))
    hand = ""
    for side in range(2):
        for i in (5, 4, 6, 3, 2, 1, 0):  # R B G S N L P, the usual order
            n = int(hands[side, i])
            if n:
                letter = _HAND_LETTERS[i] if side == 0 else _HAND_LETTERS[i].lower()
                hand += (str(n) if n > 1 else "") + letter
    return f"{'/'.join(rows)} {'bw'[color]} {hand or '-'} {move_number}"


def to_mover_frame(board, hands, color):
    if color == 0:
        return board, hands
    flipped = np.where(board >= 0, (board + 14) % 28, -1)[::-1]
    return flipped, hands[::-1]


def _black_frame(state: env.State) -> tuple[np.ndarray, np.ndarray, int]:
    x = jax.device_get(state.x)
    color = int(x.color)
    board, hands = np.asarray(x.board), np.asarray(x.hand)
    if color == 1:
        board, hands = to_mover_frame(board, hands, 1)  # the flip is its own inverse
    return board, hands, color


class Parser(NamedTuple):
    """Text to states under one ``rules``, through two programs: ``init(x, move_number)``
    (``init_program``) and ``step(state, action)`` (``step_program``). ``parser(rules)``
    jits them here; the USI engine builds one from programs it loads serialized."""

    rules: env.Rules
    init: Callable
    step: Callable

    def from_sfen(self, sfen: str) -> env.State:
        """A state for an SFEN position (with or without the leading ``sfen``)."""
        return self.init(*setup_arguments(sfen))

    def play_moves(self, state: env.State, moves, *, first_number: int = 1) -> env.State:
        """``state`` after the USI ``moves``; ``ValueError`` names the first bad one
        (counting moves from ``first_number``)."""
        for ply, move in enumerate(moves, first_number):
            if bool(state.terminated | state.truncated):
                _fail(move, f"move {ply} is played after the game ended")
            try:
                action = usi_to_action(state, move)
            except ValueError as e:
                raise ValueError(f"move {ply}: {e}") from None
            state = self.step(state, jnp.int32(action))
        return state

    def from_position(self, position: str) -> env.State:
        """A state for ``startpos [moves ...]`` or ``sfen <sfen> [moves ...]``.

        The moves are played through the environment, so repetition history counts.
        A leading ``position`` keyword (as in the USI command) is accepted.
        """
        sfen, moves = split_position(position)
        return self.play_moves(self.from_sfen(sfen), moves)


def init_program(rules: env.Rules):
    """A parser's set-up function: ``(x, move_number) -> State``."""
    return lambda x, move_number: env.init_from(x, rules, start_move_number=move_number)


def step_program(rules: env.Rules):
    """A parser's move function, one unbatched game: ``(state, action) -> State``."""
    return lambda state, action: env.step(state, action, rules)


@functools.lru_cache(maxsize=None)
def parser(rules: env.Rules) -> Parser:
    """The parser of ``rules`` with both programs jitted (compiled on first use)."""
    return Parser(rules, jax.jit(init_program(rules)), jax.jit(step_program(rules)))


def jitted_step(rules: env.Rules):
    """``jit(env.step)`` for ``rules`` (one unbatched game), compiled once per rules."""
    return parser(rules).step


def setup_arguments(sfen: str) -> tuple[movegen.GameState, jax.Array]:
    """The arguments of a parser's ``init`` for an SFEN: (x, move_number)."""
    board, hands, color, move_number = parse_sfen(sfen)
    board, hands = to_mover_frame(board, hands, color)
    x = movegen.GameState(
        color=jnp.int32(color), board=jnp.asarray(board, jnp.int32), hand=jnp.asarray(hands, jnp.int32)
    )
    return x, jnp.int32(move_number)


def from_sfen(sfen: str, rules: env.Rules = env.Rules()) -> env.State:
    """A state for an SFEN position (with or without the leading ``sfen``)."""
    return parser(rules).from_sfen(sfen)


def from_position(position: str, rules: env.Rules = env.Rules()) -> env.State:
    """A state for ``startpos [moves ...]`` or ``sfen <sfen> [moves ...]`` (``Parser.from_position``)."""
    return parser(rules).from_position(position)


def play_moves(state: env.State, moves, rules: env.Rules = env.Rules(), *, first_number: int = 1) -> env.State:
    """``state`` after the USI ``moves``; ``ValueError`` names the first bad one (counting
    moves from ``first_number``)."""
    return parser(rules).play_moves(state, moves, first_number=first_number)


def to_sfen(state: env.State) -> str:
    """The SFEN of a state, with its move number."""
    board, hands, color = _black_frame(state)
    move_number = int(state.start_move_number) + int(state.ply)
    return cshogi.Board(format_sfen(board, hands, color, move_number)).sfen()


def _decode(board: np.ndarray, action: int) -> tuple[int, int, bool, int]:
    """(from, to, promote, drop_piece) in the mover's frame; from = -1 for drops."""
    direction, to = divmod(int(action), 81)
    if direction >= 20:
        return -1, to, False, direction - 20
    d_file, d_rank = _DIRECTION_STEPS[direction % 10]
    file_index, rank = divmod(to, 9)
    while True:
        file_index, rank = file_index + d_file, rank + d_rank
        if not (0 <= file_index < 9 and 0 <= rank < 9):
            raise ValueError(f"action {action} has no piece to move")
        piece = board[file_index * 9 + rank]
        if 0 <= piece < 14:
            return file_index * 9 + rank, to, direction >= 10, -1
        if piece >= 0 or direction % 10 >= 8:  # blocked, or a knight's only square
            raise ValueError(f"action {action} has no piece to move")


def action_to_usi(state: env.State, action: int) -> str:
    """USI text of a legal action, e.g. ``7g7f``, ``8h2b+``, ``P*5e``."""
    mask = np.asarray(state.legal_action_mask)
    if not 0 <= int(action) < movegen.NUM_ACTIONS or not mask[int(action)]:
        raise ValueError(f"action {action} is not legal in {to_sfen(state)}")
    return board_action_to_usi(np.asarray(state.x.board), int(state.current_player), int(action))


def board_action_to_usi(board: np.ndarray, color: int, action: int) -> str:
    """USI text of an action on a board in the mover's frame (legality unchecked);
    ``ValueError`` when no piece can make it."""
    from_, to, promote, drop = _decode(board, action)

    def absolute(sq):
        return sq if color == 0 else 80 - sq

    if from_ < 0:
        return f"{_HAND_LETTERS[drop]}*{_square_name(absolute(to))}"
    return f"{_square_name(absolute(from_))}{_square_name(absolute(to))}{'+' if promote else ''}"


def line_to_usi(state: env.State, actions) -> list[str]:
    """USI text of a line of actions played from ``state`` (a principal variation);
    it stops at the first negative or illegal action."""
    board = cshogi.Board(to_sfen(state))
    line = []
    for action in actions:
        if action < 0:
            break
        squares, hands, color, _ = parse_sfen(board.sfen())
        mover_board, _ = to_mover_frame(squares, hands, color)
        try:
            usi = board_action_to_usi(mover_board, color, int(action))
        except ValueError:
            break
        move = board.move_from_usi(usi)
        if move == 0 or not board.is_legal(move):
            break
        line.append(usi)
        board.push(move)
    return line


def legal_actions(state: env.State) -> dict[str, int]:
    """USI text -> action for every legal action of ``state``."""
    board = np.asarray(state.x.board)
    color = int(state.current_player)
    actions = np.flatnonzero(np.asarray(state.legal_action_mask))
    return {board_action_to_usi(board, color, int(a)): int(a) for a in actions}


def legal_moves(state: env.State) -> list[str]:
    """The legal moves in USI notation (none once the game has ended)."""
    if bool(state.terminated | state.truncated):
        return []
    return sorted(legal_actions(state))


def usi_to_action(state: env.State, move: str) -> int:
    """The action of a USI move; ``ValueError`` if it is malformed or illegal."""
    if not is_usi_move(move):
        _fail(move, "malformed USI move")
    table = legal_actions(state)
    if move not in table:
        _fail(move, f"illegal move in {to_sfen(state)}")
    return table[move]
