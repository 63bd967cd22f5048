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


def parse_go(args: list[str]) -> GoCommand:
    """The arguments of ``go``; ``ValueError`` names a malformed one."""
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
                raise ValueError(f"go {word}: {args[i + 1]!r} is not a number") from None
            if value < 0:
                raise ValueError(f"go {word}: {value} is negative")
            setattr(go, word, value)
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
            raise ValueError(f"go: unknown argument {word!r}")
    if go.nodes == 0:
        raise ValueError("go nodes must be >= 1")
    return go


def int_option(name: str, value: str, low: int, high: int) -> int:
    """A spin option's value; ``ValueError`` names the option."""
    try:
        n = int(value)
    except ValueError:
        raise ValueError(f"option {name}: {value!r} is not a number") from None
    if not low <= n <= high:
        raise ValueError(f"option {name}: {n} is outside [{low}, {high}]")
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


class Output:
    """Thread-safe, line-flushed writing to the GUI."""

    def __init__(self, stream):
        self.stream = stream
        self.lock = threading.Lock()

    def __call__(self, *lines: str):
        with self.lock:
            for line in lines:
                self.stream.write(line + "\n")
            self.stream.flush()


def version() -> str:
    try:
        from importlib.metadata import version as installed

        return installed("azshogi")
    except Exception:
        return "dev"
