"""A USI engine as a subprocess: start-up, options, and lines read with timeouts.

``UsiClient(path, options)`` starts the engine, reads its options after ``usi``, sets
every advertised option explicitly (gpsshogi saves options across processes) with
``ENGINE_DEFAULTS`` where the caller gave none, and waits for ``readyok``. A reader
thread feeds a queue, so every wait (``until``) has a timeout: a crashed or hung engine
raises ``EngineFailure`` instead of blocking the caller.
"""

import os
import queue
import subprocess
import threading
import time


class EngineFailure(RuntimeError):
    """An engine crashed, hung or broke the protocol; the message names it."""


class EngineOptionError(ValueError):
    """An option the engine does not have."""


# Set unless the spec says otherwise, when the engine has the option: one thread, a small
# hash, no contempt (fairy-stockfish skews scores by 24 cp), no opening book (gpsshogi).
ENGINE_DEFAULTS = {"Threads": "1", "Thread": "1", "Hash": "16", "USI_Hash": "16", "Contempt": "0", "BookDepth": "0"}


class UsiClient:
    """A USI engine process with a reader thread, so every wait has a timeout."""

    def __init__(self, path: str, options: dict, *, start_timeout: float = 60.0):
        self.path = path
        try:
            self.proc = subprocess.Popen(
                [path], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL,
                cwd=os.path.dirname(path) or None, text=True, encoding="utf-8", errors="replace", bufsize=1,
            )
        except OSError as e:
            raise EngineFailure(f"cannot start {path}: {e.strerror}") from None
        self.lines: queue.Queue = queue.Queue()
        threading.Thread(target=self._read, daemon=True).start()
        self.send("usi")
        advertised = {}
        for line in self.until(lambda s: s == "usiok", start_timeout):
            if line.startswith("option name "):
                name = line[len("option name "):].split(" type ")[0]
                default = line.split(" default ", 1)[1].split(" ")[0] if " default " in line else None
                advertised[name] = default
        for name, value in ENGINE_DEFAULTS.items():
            if name in advertised and name not in options:
                options = {**options, name: value}
        for name, default in advertised.items():  # every option explicitly (gpsshogi remembers them)
            value = options.get(name, default)
            if value is not None and default is not None or name in options:
                self.send(f"setoption name {name} value {value}")
        unknown = [name for name in options if name not in advertised]
        if unknown:
            self.close()
            raise EngineOptionError(f"engine {path} has no option {unknown[0]!r}")
        self.send("isready")
        list(self.until(lambda s: s == "readyok", start_timeout))

    def _read(self):
        for line in self.proc.stdout:
            self.lines.put(line.rstrip("\r\n"))
        self.lines.put(None)  # EOF

    def send(self, command: str):
        try:
            self.proc.stdin.write(command + "\n")
            self.proc.stdin.flush()
        except (BrokenPipeError, OSError, ValueError):
            raise EngineFailure(f"{self.path} exited (exit code {self.proc.poll()})") from None

    def until(self, done, timeout: float):
        """Lines up to and including the first for which ``done(line)``; EngineFailure on EOF/timeout."""
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise EngineFailure(f"{self.path} did not answer within {timeout:.0f} s")
            try:
                line = self.lines.get(timeout=remaining)
            except queue.Empty:
                continue
            if line is None:
                raise EngineFailure(f"{self.path} exited (exit code {self.proc.wait()})")
            yield line
            if done(line):
                return

    def close(self):
        if self.proc.poll() is None:
            try:
                self.send("quit")
                self.proc.wait(timeout=2)
            except (EngineFailure, subprocess.TimeoutExpired):
                self.proc.kill()
                self.proc.wait()

    def think(self, position: str, go: str, timeout: float) -> list[str]:
        """Sends a ``position`` and a ``go`` command; the lines up to and including ``bestmove``."""
        self.send(position)
        self.send(go)
        return list(self.until(lambda s: s.startswith("bestmove"), timeout))
