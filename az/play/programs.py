"""The compiled programs of the playing agent, each built once, and kept on disk.

A ``Programs`` holds what one process compiled: the agent's searches (keyed by
``Agent.search``'s shape) and the small programs around them, keyed by rules and batch
B: the root's mate in one (``("mate", B, H)``), mate in three (``("mate3", rules, B)``),
one batched ``env.step`` (``("step", rules, B)``) and the position parser (``("setup",
rules)``, ``("move", rules)``). Agents handed the same ``Programs`` share them: a match
between two snapshots of one run, a curve over a run's snapshots, the engine's reloads.

The game's ply limit is a value, not a shape: the searches, the mate in three and the
step take it as their last argument (int32 []; ``limit_free`` is the rules they are
keyed by), so a changed limit (the engine's ``MaxMovesToDraw``) compiles nothing.

Where JAX's persistent compilation cache is on (training and the engine point it at the
workdir's ``jax_cache``), each program is also kept there as a serialized executable,
keyed by its shape, the backend and a digest of this package's source: a later process
(the engine's next start) loads it without tracing or compiling. Processes that start
together (a match runner's engines) compile each program once: one holds a lock on it
(``_CompileLock``) while the others wait for its executable, up to ``COMPILE_WAIT_S``,
then compile their own.
"""

import dataclasses
import functools
import hashlib
import os
import threading
import time

import jax
import jax.numpy as jnp

from envs import env, mate, movegen, notation

# XLA's CPU options for the programs that run once per move or per position (the root's
# mate check, the position parser): LLVM -O0 with the older fusion emitters compiles them
# 4-6x faster (one core: mate 84 -> 20 s, set-up and move 30 -> 5-7 s) and they still take
# 1-2.5 ms a call (against 0.5-2.2 ms), nothing beside a search. A search compiled so
# (``quick``) takes 19 s instead of 77 s but runs 3.5x slower: the engine's first start
# plays with it while the -O2 search compiles aside.
QUICK_CPU_COMPILE = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}

# A process waits this long for another one's compile of the same program, then compiles
# its own (a -O2 search takes 77 s on one core, a quick one 19 s).
COMPILE_WAIT_S = 300.0
# The ply limit in the rules programs are keyed by (``limit_free``); the real one is an argument.
LIMIT_AS_ARGUMENT = 2**30

MATE_TREE = jax.tree.structure((0, 0))  # mate.mate_in_one's output: (found, action)
STATE_TREE = jax.tree.structure(env.State(movegen.GameState(), *[0] * (len(env.State._fields) - 1)))


@functools.lru_cache(maxsize=1)
def source_digest() -> str:
    """A digest of the Python source of ``az`` and ``envs``: an executable compiled by
    other code is never loaded."""
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    digest = hashlib.sha256()
    for package in ("az", "envs"):
        for directory, _, files in sorted(os.walk(os.path.join(root, package))):
            for name in sorted(files):
                if name.endswith(".py"):
                    with open(os.path.join(directory, name), "rb") as f:
                        digest.update(name.encode() + f.read())
    return digest.hexdigest()


class Programs:
    """One process's compiled programs, each built once (also between threads).

    ``digest``: the source digest that names serialized executables (default: this
    source's, ``source_digest()``)."""

    def __init__(self, digest: str | None = None):
        self._digest = digest
        self._built: dict = {}  # shape -> compiled program
        self._key_locks: dict = {}  # shape -> the lock its builder holds
        self._lock = threading.Lock()
        self._cache_hits_here = threading.local()  # per thread: a hit beside a compile is not its own
        self._listening = False

    @property
    def digest(self) -> str:
        return self._digest if self._digest is not None else source_digest()

    def once(self, key: tuple, build):
        """The program of ``key``, made by ``build()`` the first time it is asked for."""
        with self._lock:
            lock = self._key_locks.setdefault(key, threading.Lock())
        with lock:
            if key not in self._built:
                self._built[key] = build()
        return self._built[key]

    def get(self, key: tuple):
        """The program of ``key`` built so far, or None."""
        return self._built.get(key)

    def keys(self) -> list[tuple]:
        """The shapes built so far."""
        return list(self._built)

    def executable_path(self, shape: tuple) -> str | None:
        """Where the program of ``shape`` is serialized, or None without a compilation cache."""
        directory = jax.config.jax_compilation_cache_dir
        if not directory:
            return None
        device = jax.devices()[0]
        key = repr((shape, jax.__version__, device.platform, device.device_kind, self.digest))
        name = hashlib.sha256(key.encode()).hexdigest()[:32]
        return os.path.join(directory, "azshogi_executables", f"{name}.bin")

    def loadable(self, shape: tuple) -> bool:
        """An earlier process serialized the program of ``shape``."""
        path = self.executable_path(shape)
        return path is not None and os.path.exists(path)

    def _count_cache_hits(self, event: str, **kwargs):
        # JAX records the event in the thread that asked for the compile.
        if event == "/jax/compilation_cache/cache_hits":
            self._cache_hits_here.count = getattr(self._cache_hits_here, "count", 0) + 1

    def _cache_hits(self) -> int:
        """How many of this thread's compiles JAX's persistent cache has answered since this
        started listening (another thread's hits, e.g. the engine's background compiles,
        must not keep this thread's compile from being serialized)."""
        with self._lock:
            if not self._listening:
                jax.monitoring.register_event_listener(self._count_cache_hits)
                self._listening = True
        return getattr(self._cache_hits_here, "count", 0)

    def compile(self, shape: tuple, fn, args: tuple, out_tree, *, quick: bool = False):
        """``jax.jit(fn)`` compiled for ``args`` (abstract values), or loaded where an earlier
        process serialized the program of ``shape``. ``quick``: on a CPU, compiled with
        ``QUICK_CPU_COMPILE`` (for programs whose run time is negligible)."""
        # A shape is always compiled one way on a backend, so the executable's key needs no option.
        options = QUICK_CPU_COMPILE if quick and jax.default_backend() == "cpu" else None
        path = self.executable_path(shape)
        trees = (jax.tree.structure((args, {})), out_tree)
        compiled = _load_executable(path, *trees)
        if compiled is not None:
            return compiled
        with _CompileLock(path) as lock:
            if lock.waited:  # another process compiled it meanwhile
                compiled = _load_executable(path, *trees)
            if compiled is None:
                compiled = self._compile_here(path, fn, args, trees, options)
        return compiled

    def _compile_here(self, path: str | None, fn, args: tuple, trees: tuple, options):
        # Named after the source: JAX's cache key begins with the program's name, so code
        # that changed (an upgrade) compiles here instead of reading an entry that an
        # earlier version left in JAX's cache, which could not be serialized again.
        def program(*arguments):
            return fn(*arguments)

        program.__name__ = program.__qualname__ = f"azshogi_{self.digest[:16]}"
        hits = self._cache_hits()
        compiled = jax.jit(program).lower(*args).compile(options)
        if self._cache_hits() == hits:  # compiled here: one read back from JAX's cache does not serialize whole
            _save_executable(path, compiled, *trees)
        return compiled

    def position_parser(self, rules: env.Rules) -> notation.Parser:
        """``envs.notation``'s parser of ``rules`` (set-up and move programs) loaded where an
        earlier process serialized them, else compiled and serialized: a later start skips
        their tracing and JAX's cache (about 2 s each on a CPU). Once per rules, whichever
        thread asks first."""
        return self.once(("parser", rules), lambda: self._build_parser(rules))

    def _build_parser(self, rules: env.Rules) -> notation.Parser:
        x, move_number = notation.setup_arguments(notation.STARTPOS_SFEN)
        init = self.compile(("setup", rules), notation.init_program(rules), (x, move_number), STATE_TREE, quick=True)
        state = init(x, move_number)
        step = self.compile(("move", rules), notation.step_program(rules), (state, jnp.int32(0)), STATE_TREE,
                            quick=True)
        return notation.Parser(rules, init, step)

    def mate_program(self, games: env.State):
        """``mate.mate_in_one`` over a batch of the shape of ``games`` (abstract) [B, ...],
        compiled quick: ``(found [B], action [B])``."""
        key = ("mate", games.x.board.shape[0], games.history.shape[1])
        return self.once(key, lambda: self.compile(key, mate.mate_in_one, (games,), MATE_TREE, quick=True))

    def root_mate_program(self, rules: env.Rules, games: env.State):
        """``mate.mate_in_three`` under ``rules`` (their ply limit aside) over a batch of
        the shape of ``games`` (abstract), compiled -O2: ``(games [B], limit []) -> (found
        [B], action [B])``. It runs at every move (about 30 ms a root on one core at B = 1,
        against 50-70 ms compiled quick)."""
        key = ("mate3", limit_free(rules), games.x.board.shape[0])

        def find(games, limit):
            return mate.mate_in_three(games, rules=with_limit(rules, limit))

        return self.once(key, lambda: self.compile(key, find, (games, LIMIT_SHAPE), MATE_TREE))

    def step_program(self, rules: env.Rules, games: env.State):
        """``env.step`` under ``rules`` (their ply limit aside) over a batch of the shape of
        ``games`` (abstract): ``step(games [B], actions [B], limit []) -> games [B]``,
        compiled quick."""
        batch = games.x.board.shape[0]
        key = ("step", limit_free(rules), batch)
        actions = jax.ShapeDtypeStruct((batch,), jnp.int32)

        def step(games, actions, limit):
            return jax.vmap(notation.step_program(with_limit(rules, limit)))(games, actions)

        return self.once(key, lambda: self.compile(key, step, (games, actions, LIMIT_SHAPE), STATE_TREE, quick=True))


LIMIT_SHAPE = jax.ShapeDtypeStruct((), jnp.int32)  # the ply limit, an argument of the programs that judge it


def limit_free(rules: env.Rules) -> env.Rules:
    """``rules`` as a program that takes the ply limit as an argument is keyed by."""
    fields = {f.name: getattr(rules, f.name) for f in dataclasses.fields(rules)}
    return env.Rules(**{**fields, "max_length": LIMIT_AS_ARGUMENT})


def limit_value(max_length: int):
    """The ply limit argument of those programs: int32 [] (int32's range holds any limit)."""
    return jnp.int32(min(max_length, LIMIT_AS_ARGUMENT))


class _LimitAsValue(env.Rules):
    """``env.Rules`` whose ``max_length`` is a traced int32 inside a program being compiled
    (``env.step`` only compares the ply with it); the other fields are checked as usual."""

    def __post_init__(self):
        limit_free(self)  # validates every field but the limit


def with_limit(rules: env.Rules, limit) -> env.Rules:
    """``rules`` with the ply limit ``limit``, a traced int32 [] (inside a compiled program)."""
    fields = {f.name: getattr(rules, f.name) for f in dataclasses.fields(rules)}
    return _LimitAsValue(**{**fields, "max_length": limit})


class _CompileLock:
    """Held while this process compiles the program serialized at ``path``: another process
    wanting the same program waits for it (``waited``), up to ``COMPILE_WAIT_S``, then goes
    on without it. An advisory ``flock``, released by the kernel if its holder dies; where
    there is none (Windows) or the cache cannot be written, no lock."""

    def __init__(self, path: str | None):
        self.path = None if path is None else f"{path}.lock"
        self.waited = False
        self._file = None

    def __enter__(self) -> "_CompileLock":
        try:
            import fcntl
        except ImportError:
            return self
        if self.path is None:  # no cache: nothing to share
            return self
        try:
            os.makedirs(os.path.dirname(self.path), exist_ok=True)
            self._file = open(self.path, "a")
        except OSError:  # a read-only cache
            return self
        deadline = time.monotonic() + COMPILE_WAIT_S
        while True:
            try:
                fcntl.flock(self._file, fcntl.LOCK_EX | fcntl.LOCK_NB)
                return self
            except OSError:
                self.waited = True
            if time.monotonic() > deadline:  # compile without it rather than wait on
                self._file.close()
                self._file = None
                return self
            time.sleep(0.1)

    def __exit__(self, *exc):
        if self._file is not None:
            self._file.close()  # releases the lock


def _load_executable(path: str | None, in_tree, out_tree):
    """The executable serialized at ``path`` (bytes only: its trees are rebuilt here, so the
    file is never unpickled), or None."""
    if path is None or not os.path.exists(path):
        return None
    from jax.experimental import serialize_executable

    try:
        with open(path, "rb") as f:
            payload = f.read()
        return serialize_executable.deserialize_and_load(payload, in_tree, out_tree)
    except Exception:  # unreadable or from another jaxlib: compile instead (and overwrite it)
        return None


def _save_executable(path: str | None, compiled, in_tree, out_tree) -> None:
    if path is None:
        return
    from jax.experimental import serialize_executable

    try:
        payload, saved_in, saved_out = serialize_executable.serialize(compiled)
        if (saved_in, saved_out) != (in_tree, out_tree):  # loading could not rebuild them
            return
        os.makedirs(os.path.dirname(path), exist_ok=True)
        temporary = f"{path}.{os.getpid()}.{threading.get_ident()}.tmp"
        with open(temporary, "wb") as f:
            f.write(payload)
        os.replace(temporary, path)  # atomic: a concurrent reader sees all of it or nothing
    except Exception:  # a backend that cannot serialize, a read-only cache: only slower starts
        pass
