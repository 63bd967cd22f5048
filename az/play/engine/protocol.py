"""The text of the USI protocol: ``go`` arguments, options, scores, answers, output.

Nothing here imports JAX: the engine answers ``usi`` and ``setoption`` with this alone.

Score: the search's value v in [-1, 1] (side to move's view) is shown as
``cp = 1200 * atanh(v) = 600 * ln(p / (1 - p))`` with win probability ``p = (1 + v) / 2``
(the logistic win-rate scale with coefficient 600 of Ponanza/dlshogi-style engines);
|v| is clipped to 0.9999, so |cp| <= 5942.
"""

import dataclasses
import math
import threading

ENGINE_NAME = "azshogi"
ENGINE_AUTHOR = "azshogi authors"
DEFAULT_SIMULATIONS = 800
MAX_SIMULATIONS = 1_000_000
DEFAULT_NETWORK_DELAY_MS = 120
MAX_CLOCK_MS = 2**31 - 1  # a go's times beyond ~24.8 days count as that (timers overflow past ~292 years)
SHOWN_CHARS = 40  # of a malformed value quoted in an error line
SCORE_SCALE = 1200.0  # cp = SCORE_SCALE * atanh(v)
VALUE_CLIP = 0.9999


def value_to_cp(v: float) -> int:
    """USI centipawns of a value in [-1, 1] (side to move's view)."""
    v = float(v)
    if math.isnan(v):
        return 0
    v = max(-VALUE_CLIP, min(VALUE_CLIP, v))
    return int(round(SCORE_SCALE * math.atanh(v)))


@dataclasses.dataclass
class GoCommand:
    btime: int | None = None
    wtime: int | None = None
    byoyomi: int | None = None
    binc: int | None = None
    winc: int | None = None
    nodes: int | None = None
    movetime: int | None = None
    infinite: bool = False
    ponder: bool = False
    mate: bool = False

    @property
    def timed(self) -> bool:
        return any(
            v is not None for v in (self.btime, self.wtime, self.byoyomi, self.binc, self.winc, self.movetime)
        )


_GO_NUMBERS = ("btime", "wtime", "byoyomi", "binc", "winc", "nodes", "movetime")


def shown(text: str) -> str:
    """``text`` quoted for an error line, cut to ``SHOWN_CHARS`` (a client may send megabytes)."""
    return repr(text) if len(text) <= SHOWN_CHARS else repr(text[:SHOWN_CHARS]) + f"... ({len(text)} chars)"


def _number(n: int) -> str:
    text = str(n)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}... ({len(text)} digits)"


def parse_go(args: list[str]) -> GoCommand:
    """The arguments of ``go``; ``ValueError`` names a malformed one. ``nodes`` is at most
    ``MAX_SIMULATIONS`` (a search of that size is compiled); times are capped at
    ``MAX_CLOCK_MS``."""
    go = GoCommand()
    i = 0
    while i < len(args):
        word = args[i]
        if word in _GO_NUMBERS:
            if i + 1 >= len(args):
                raise ValueError(f"go {word} needs a number")
            try:
                value = int(args[i + 1])
            except ValueError:
                raise ValueError(f"go {word}: {shown(args[i + 1])} is not a number") from None
            if value < 0:
                raise ValueError(f"go {word}: {_number(value)} is negative")
            if word == "nodes" and value > MAX_SIMULATIONS:
                raise ValueError(f"go nodes: {_number(value)} is above {MAX_SIMULATIONS}")
            setattr(go, word, min(value, MAX_CLOCK_MS))
            i += 2
        elif word in ("infinite", "ponder"):
            setattr(go, word, True)
            i += 1
        elif word == "mate":
            go.mate = True
            i = len(args)  # "mate <ms>" or "mate infinite"
        elif word in ("depth", "searchmoves", "movestogo"):  # UCI words a GUI may send: ignored
            i += 2 if word != "searchmoves" else len(args)
        else:
            raise ValueError(f"go: unknown argument {shown(word)}")
    if go.nodes == 0:
        raise ValueError("go nodes must be >= 1")
    return go


def int_option(name: str, value: str, low: int, high: int) -> int:
    """A spin option's value; ``ValueError`` names the option."""
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"option {name}: {shown(value)} is not a number") from None
    if not low <= n <= high:
        raise ValueError(f"option {name}: {_number(n)} is outside [{low}, {high}]")
    return n


def one_line(error: BaseException) -> str:
    """An exception as one line for an ``info string``."""
    text = str(error).strip().splitlines()
    message = text[0] if text else ""
    if isinstance(error, ValueError) and message:
        return message
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


@dataclasses.dataclass
class Answer:
    bestmove: str
    info: list  # lines printed before bestmove


def single_line(text: str) -> str:
    """``text`` with every line break (``str.splitlines``': also ``\\v``, ``\\f``, ``\\x1c``-``\\x1e``,
    ``\\x85``, ``\\u2028``, ``\\u2029``, which an echoed command may hold) turned into a space: one
    output line stays one line for any client."""
    parts = text.splitlines()
    return parts[0] if len(parts) == 1 else " ".join(parts)


class Output:
    """Thread-safe, line-flushed writing to the GUI; each line written as one line."""

    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, *lines: str):
        with self.lock:
            for line in lines:
                self.stream.write(single_line(line) + "\n")
            self.stream.flush()


def version() -> str:
    try:
        from importlib.metadata import version as installed

        return installed("azshogi")
    except Exception:
        return "dev"
