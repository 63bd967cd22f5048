"""The runner's child processes (trainers, the evaluator): started under
``az.reproduce.supervise``, so that they get SIGTERM however the runner dies, and stopped
with SIGTERM, on which training saves."""

import os
import signal
import subprocess
import sys

from az.reproduce.plan import REPO

STOP_SECONDS = 120  # how long a stopping child may take to save before it is killed


class Children:
    """Processes started by one runner; ``stopping`` once a signal asked the runner to stop."""

    def __init__(self):
        self.processes: list[subprocess.Popen] = []
        self.stopping = False

    def spawn(self, args: list[str], log_path: str, lock_path: str, env: dict | None = None) -> subprocess.Popen:
        """``python ARGS`` holding ``lock_path``, in a session of its own (a Ctrl-C reaches
        the runner, which stops the children in order), output appended to ``log_path``."""
        command = [sys.executable, "-m", "az.reproduce.supervise", str(os.getpid()), lock_path, *args]
        with open(log_path, "a", encoding="utf-8") as log:
            child = subprocess.Popen(command, cwd=REPO, stdout=log, stderr=subprocess.STDOUT, env=env,
                                     start_new_session=True)
        self.processes.append(child)
        return child

    def terminate(self) -> None:
        for child in self.processes:
            if child.poll() is None:
                child.send_signal(signal.SIGTERM)

    def on_signal(self, signum, frame) -> None:
        """The runner's SIGTERM and SIGINT handler: stop, children first."""
        self.stopping = True
        self.terminate()

    def stop(self) -> None:
        """SIGTERM to those still running, then waits for them (killed after ``STOP_SECONDS``)."""
        self.terminate()
        for child in self.processes:
            try:
                child.wait(timeout=STOP_SECONDS)
            except subprocess.TimeoutExpired:
                child.kill()


def tail(path: str, lines: int = 15) -> str:
    """The last ``lines`` of a child's log, for an error message."""
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            return "".join(f.readlines()[-lines:])
    except OSError:
        return ""


def exit_at_once(status: int) -> None:
    """Ends a child (the evaluator, the probe's games) once its results are on disk,
    without the interpreter's shutdown: there a daemon thread inside jaxlib that wakes to
    take the lock Python holds was seen to abort the whole process (SIGABRT, "exception
    not rethrown"), which the runner reads as a failed child."""
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)
