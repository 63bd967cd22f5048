"""What each of the runner's children runs first, before it becomes ``python ARGS``:

    python -m az.reproduce.supervise RUNNER_PID LOCK ARGS...

SIGTERM when the runner dies, however it dies (Linux's PR_SET_PDEATHSIG survives exec),
so that training saves; then a lock on LOCK held for the child's life (the descriptor
survives exec), so that a rerun started while an old child still saves waits for it.
Set in the child itself: a fork hook in the runner would run in a process JAX may have
made multithreaded. Started by ``children.Children.spawn``; nothing imports this module.
"""

import ctypes
import fcntl
import os
import signal
import sys

_PR_SET_PDEATHSIG = 1


def die_with(runner_pid: int) -> bool:
    """Asks the kernel for SIGTERM when the parent dies; False when the runner
    ``runner_pid`` is gone already (it died before the request)."""
    try:
        ctypes.CDLL("libc.so.6", use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGTERM)
    except (OSError, AttributeError):
        pass
    return os.getppid() == runner_pid


def hold_lock(path: str) -> int:
    """An exclusive lock on ``path``, waited for when an earlier child holds it; the
    descriptor, inheritable, keeps it through exec."""
    lock = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(lock, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        print(f"waiting for an earlier process holding {path} to finish", flush=True)
        fcntl.flock(lock, fcntl.LOCK_EX)
    os.set_inheritable(lock, True)
    return lock


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print("usage: python -m az.reproduce.supervise RUNNER_PID LOCK ARGS... (started by reproduce.py)",
              file=sys.stderr)
        return 2
    runner_pid, lock_path, args = int(argv[0]), argv[1], argv[2:]
    if not die_with(runner_pid):
        return 1
    hold_lock(lock_path)
    os.execv(sys.executable, [sys.executable] + args)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
