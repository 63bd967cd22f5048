"""One ``go``: its computation in a thread, and the one answer it gives.

The answer is the first of: the finished result, ``stop``, ``ponderhit`` at the end of
the budget, or the watchdog's deadline (then the fallback: the policy network's move, or
the first legal move while that is not computed). The engine's ``arm`` sets the deadline
before the thread waits for the previous ``go``'s search to end. No JAX here: the search
itself is the engine's ``think``.
"""

import threading

from az.play.engine.protocol import Answer, GoCommand, one_line


POLICY_FALLBACK_NOTE = "info string search unfinished: the policy network's move"


class Job:
    """One ``go``: computes in a thread; answers once (result, stop, ponderhit or watchdog)."""

    def __init__(self, engine, go: GoCommand, received: float, position, position_error):
        self.engine = engine  # engine.Engine: its think(job) computes, its out(...) answers
        self.go = go
        self.position = position  # as at the go: a later position command does not change it
        self.position_error = position_error
        self.received = received
        self.lock = threading.Lock()
        self.wait_for_stop = go.infinite or go.ponder
        self.answer_requested = False
        self.answered = False
        self.fallback: Answer | None = None
        self.fallback_note = POLICY_FALLBACK_NOTE  # says which fallback answered
        self.result: Answer | None = None
        self.finished = threading.Event()
        self.timer: threading.Timer | None = None
        self.thread: threading.Thread | None = None
        # Answers go out in the order of the gos: this one waits for the one before it.
        self.previous: "Job | None" = None
        self.next: "Job | None" = None

    def start(self, previous: "Job | None"):
        if previous is not None and not previous.answered:
            self.previous, previous.next = previous, self
        self.thread = threading.Thread(target=self._run, args=(previous,), daemon=True, name="azshogi-go")
        self.thread.start()

    def _run(self, previous):
        try:
            self.engine.arm(self)
            if previous is not None and previous.thread is not None:
                previous.thread.join()
            self.engine.think(self)
        except Exception as e:  # never leave the GUI without a bestmove
            note = f"info string error: search failed ({one_line(e)})"
            with self.lock:
                if self.fallback is None:
                    self.fallback = Answer("resign", [note])
                else:
                    self.fallback.info.insert(0, note)
        finally:
            self.finished.set()
            with self.lock:
                if not self.wait_for_stop:
                    self.answer_requested = True
                if self.result is None and self.fallback is None:
                    self.fallback = Answer("resign", ["info string error: no move found"])
                self._try_emit()
            self._let_next_answer()

    def set_deadline(self, seconds_from_now: float):
        if self.timer is not None:
            self.timer.cancel()
        self.timer = threading.Timer(max(seconds_from_now, 0.0), self.request_answer)
        self.timer.daemon = True
        self.timer.start()

    def store(self, *, fallback: Answer | None = None, result: Answer | None = None,
              fallback_note: str = POLICY_FALLBACK_NOTE):
        with self.lock:
            if fallback is not None:
                self.fallback, self.fallback_note = fallback, fallback_note
            if result is not None:
                self.result = result
            self._try_emit()
        self._let_next_answer()

    def request_answer(self):
        with self.lock:
            self.answer_requested = True
            self._try_emit()
        self._let_next_answer()

    def cancel(self):
        with self.lock:
            self.answered = True
        if self.timer is not None:
            self.timer.cancel()
        self._let_next_answer()

    def _let_next_answer(self):
        """Once this one has answered, the next go's answer may go out (outside this lock)."""
        successor = self.next
        if self.answered and successor is not None:
            with successor.lock:
                successor._try_emit()
            successor._let_next_answer()

    def _try_emit(self):  # self.lock held
        if self.answered or not self.answer_requested:
            return
        if self.previous is not None and not self.previous.answered:
            return  # emitted when the previous go has answered
        best = self.result or self.fallback
        if best is None:
            return  # emitted as soon as the thread stores something
        if best is self.fallback and self.result is None and self.fallback.bestmove not in ("resign", "win"):
            best = Answer(best.bestmove, [self.fallback_note, *best.info])
        if self.timer is not None:
            self.timer.cancel()
        try:
            self.engine.out(*best.info, f"bestmove {best.bestmove}")
        finally:
            # Only now: the next go's answer and the engine's commands read `answered`
            # without this lock, so it must not be true before the line is out.
            self.answered = True

    @property
    def active(self) -> bool:
        return not self.answered or not self.finished.is_set()
