"""A trained (or untrained) agent: a snapshot's parameters and the search it plays with.

``load_agent("runs/x@120")`` reads snapshot 120 of a training workdir (the latest
without ``@STEP``; ``@0`` is the untrained network) and the config it was trained
with (their moving average where the run kept one). It plays Gumbel search with
sequential halving and no Gumbel noise, greedily, as in the paper's evaluation; it plays
a mate in one or three (``envs.mate.mate_in_three``: every reply to the check allows a
mate; a ``quick`` search, mates in one only) without a search, and never a move after
which the opponent mates in one where another move avoids it; its pawns, bishops and
rooks promote wherever they may (``search.searched_moves``), as engines play. Searches
are compiled ahead of time, once per (config, simulations, batch, ply limit, PV length),
and shared by every agent whose config gives the same program (network, rules,
considered actions, repetition window: the variants of the paper share one): matches,
reports and the USI engine take them from here.

Where JAX's persistent compilation cache is on (training and the engine point it at the
workdir's ``jax_cache``), each compiled search is also kept there as a serialized
executable, keyed by its shape, the backend and a digest of this package's source: a
later process (the engine's next start) loads it without tracing or compiling. So are
the engine's position set-up and move programs (``install_parser``).
"""

import dataclasses
import functools
import hashlib
import json
import os
import threading

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax import Array

from az import network as network_lib
from az import search as search_lib
from az import workdir as workdir_lib
from envs import env, mate, movegen, notation

MATCH_MAX_LENGTH = 256  # floodgate's ply limit, which matches use


class AgentError(ValueError):
    """A checkpoint that cannot be loaded; the message names it."""


@dataclasses.dataclass(eq=False)
class Agent:
    config: ml_collections.ConfigDict
    params: dict
    step: int  # training iteration of the parameters (0: untrained)
    name: str

    @functools.cached_property
    def network(self) -> network_lib.AZNet:
        return network_lib.make_network(self.config)

    @functools.cached_property
    def rules(self) -> env.Rules:
        return search_lib.rules_from_config(self.config)

    @functools.cached_property
    def program(self) -> str:
        """The config fields the playing search is built from (``_compile``), as JSON:
        agents of runs that differ only in how they trained share their compiled searches."""
        c = self.config
        return json.dumps({"model": c.model.to_dict(), "declaration": c.env.declaration, "movegen": c.env.movegen,
                           "considered": c.search.max_num_considered_actions,
                           "value_scale": c.search.value_scale,
                           "history_window": c.search.history_window}, sort_keys=True)

    def search(self, num_simulations: int, *, batch: int, history: int, max_length: int = MATCH_MAX_LENGTH,
               pv_length: int = 1, quick: bool = False):
        """The compiled ``search(params, rng_key, games [batch]) -> SearchResult``.

        ``history``: the repetition history H of the games searched (their
        ``Rules.history``). ``max_length``: the game's ply limit as the tree sees it (a
        match's 256, or unlimited for a GUI's game), not the training run's.
        ``num_simulations`` 0 is the policy network's move. ``quick``: on a CPU, compiled
        with ``QUICK_CPU_COMPILE`` (4x sooner, 3.5x slower to run): a program of its own."""
        key = (self.program, num_simulations, batch, history, max_length, pv_length, quick)
        return _compiled_once(key, lambda: self._compile(num_simulations, batch, history, max_length, pv_length,
                                                         quick))

    def serialized(self, num_simulations: int, *, batch: int, history: int, max_length: int = MATCH_MAX_LENGTH,
                   pv_length: int = 1, quick: bool = False) -> bool:
        """An earlier process left this search's programs serialized: ``search`` loads
        rather than compiles them."""
        shapes = [(self.program, num_simulations, batch, history, max_length, pv_length, quick)]
        if self.rules.movegen == "dense":
            rules = self._playing_rules(history, max_length)
            shapes += [("mate", batch, history), ("step", rules, batch)]
            shapes += [] if quick else [("mate3", rules, batch)]
        return all(_loadable(shape) for shape in shapes)

    def compiled_simulations(self, *, batch: int, history: int, max_length: int = MATCH_MAX_LENGTH,
                             pv_length: int = 1, quick: bool = False) -> set[int]:
        """The simulation counts whose search of this shape is compiled already."""
        shape = (self.program, batch, history, max_length, pv_length, quick)
        return {key[1] for key in list(_COMPILED) if (key[0], *key[2:]) == shape}

    def _playing_rules(self, history: int, max_length: int) -> env.Rules:
        return dataclasses.replace(self.rules, max_length=max_length, history=history)

    def _compile(self, num_simulations: int, batch: int, history: int, max_length: int, pv_length: int,
                 quick: bool):
        # Gumbel without noise, and pawns, bishops and rooks promoted wherever they may,
        # whatever the run trained with: every setting not fixed here is in ``program``.
        # The root's mate in one is a program of its own, compiled once for every
        # simulation count (it is most of a small search's compile).
        tree = search_lib.search_from_config(
            self.config,
            rules=self._playing_rules(history, max_length),
            algorithm="gumbel",
            num_simulations=num_simulations,
            gumbel_scale=0.0,
            dirichlet_alpha=0.0,
            dirichlet_fraction=0.0,
            pv_length=pv_length,
            mate_in_one=False,
            mate_in_tree=False,
            always_promote=True,
        )
        games = jax.eval_shape(lambda: stack_states([example_state(history)] * batch))
        key = jax.eval_shape(lambda: jax.random.PRNGKey(0))
        tree_shape = (self.program, num_simulations, batch, history, max_length, pv_length, quick)
        if self.rules.movegen != "dense":  # the mate detector needs the dense core
            return _compiled_program(tree_shape, tree, (self.params, key, games), _RESULT_TREE, quick=quick)
        mate_key = ("mate", batch, history)

        def mate_program():
            return _compiled_once(mate_key, lambda: _compiled_program(mate_key, mate.mate_in_one, (games,),
                                                                      _MATE_TREE, quick=True))

        # Serialized programs load side by side (2.5-3 s each on a CPU); compiles do not
        # overlap well, so they stay one after the other.
        # A quick search (the engine's first start) looks for mates in one only: the mate
        # in three compiles with the -O2 programs that replace it (minutes on one core).
        rules = self._playing_rules(history, max_length)
        root_mate_program = None if quick else functools.partial(_root_mate_program, rules, games)
        beside = []
        if _loadable(tree_shape) and _loadable(mate_key):
            beside.append(threading.Thread(target=_quietly, args=(mate_program,), daemon=True, name="azshogi-mate"))
            if root_mate_program is not None and _loadable(("mate3", rules, batch)):
                beside.append(threading.Thread(target=_quietly, args=(root_mate_program,), daemon=True,
                                               name="azshogi-mate3"))
        for thread in beside:
            thread.start()
        tree = _compiled_program(tree_shape, tree, (self.params, key, games), _RESULT_TREE, quick=quick)
        for thread in beside:
            thread.join()
        find_mates = mate_program()  # made by the thread, or here (raising where it failed)
        with_mate = _with_mate(num_simulations)
        step_all = _step_program(rules, games)
        find_root_mates = find_mates if root_mate_program is None else root_mate_program()

        def search(params, rng_key: Array, games: env.State) -> search_lib.SearchResult:
            """A root with a mate in one or three plays it without a search
            (``search.with_mate``); a move that lets the opponent mate in one is replaced
            where another does not."""
            found, action = find_root_mates(games)
            result = with_mate(tree(params, rng_key, games), found, action)
            return avoid_mates_in_one(result, games, step_all, find_mates)

        return search

    def choose_actions(self, states: list[env.State], *, num_simulations: int, rng_key: Array, pad_to: int) -> list[int]:
        """The moves (actions) of one batched search over match ``states``, padded to
        ``pad_to`` so that one compile serves every batch; only the actions leave the device."""
        if not states:
            return []
        batch = list(states) + [states[0]] * (pad_to - len(states))
        history = states[0].history.shape[0]
        search = self.search(num_simulations, batch=pad_to, history=history)
        result = search(self.params, rng_key, stack_states(batch))
        return [int(a) for a in np.asarray(result.action)[: len(states)]]


@functools.lru_cache(maxsize=1)
def _source_digest() -> str:
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


def _loadable(shape: tuple) -> bool:
    """An earlier process serialized the program of ``shape``."""
    path = _executable_path(shape)
    return path is not None and os.path.exists(path)


def _executable_path(shape: tuple) -> str | None:
    """Where a compiled search of ``shape`` is kept, or None without a compilation cache."""
    directory = jax.config.jax_compilation_cache_dir
    if not directory:
        return None
    device = jax.devices()[0]
    key = repr((shape, jax.__version__, device.platform, device.device_kind, _source_digest()))
    name = hashlib.sha256(key.encode()).hexdigest()[:32]
    return os.path.join(directory, "azshogi_executables", f"{name}.bin")


_cache_hit_count = 0
_listening = False


def _count_cache_hits(event: str, **kwargs):
    global _cache_hit_count
    if event == "/jax/compilation_cache/cache_hits":
        _cache_hit_count += 1


def _cache_hits() -> int:
    """How many compiles JAX's persistent cache has answered in this process so far."""
    global _listening
    if not _listening:
        jax.monitoring.register_event_listener(_count_cache_hits)
        _listening = True
    return _cache_hit_count


# The structure of every search's output (all of SearchResult's fields are arrays).
_RESULT_TREE = jax.tree.structure(search_lib.SearchResult(**{f.name: 0 for f in dataclasses.fields(search_lib.SearchResult)}))
_MATE_TREE = jax.tree.structure((0, 0))  # mate.mate_in_one: (found, action)


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


# XLA's CPU options for the programs that run once per move or per position (the root's
# mate check, the position parser): LLVM -O0 with the older fusion emitters compiles them
# 4-6x faster (one core: mate 84 -> 20 s, set-up and move 30 -> 5-7 s) and they still take
# 1-2.5 ms a call (against 0.5-2.2 ms), nothing beside a search. A search compiled so
# (``quick``) takes 19 s instead of 77 s but runs 3.5x slower: the engine's first start
# plays with it while the -O2 search compiles aside.
QUICK_CPU_COMPILE = {"xla_backend_optimization_level": 0, "xla_cpu_use_fusion_emitters": False}


def _compiled_program(shape: tuple, fn, args: tuple, out_tree, *, quick: bool = False):
    """``jax.jit(fn)`` compiled for ``args`` (abstract values), or loaded where an earlier
    process serialized the program of ``shape``. ``quick``: on a CPU, compiled with
    ``QUICK_CPU_COMPILE`` (for programs whose run time is negligible)."""
    # A shape is always compiled one way on a backend, so the executable's key needs no option.
    options = QUICK_CPU_COMPILE if quick and jax.default_backend() == "cpu" else None
    path = _executable_path(shape)
    trees = (jax.tree.structure((args, {})), out_tree)
    compiled = _load_executable(path, *trees)
    if compiled is None:
        # Named after the source: JAX's cache key begins with the program's name, so code
        # that changed (an upgrade) compiles here instead of reading an entry that an
        # earlier version left in JAX's cache, which could not be serialized again.
        def program(*arguments):
            return fn(*arguments)

        program.__name__ = program.__qualname__ = f"azshogi_{_source_digest()[:16]}"
        hits = _cache_hits()
        compiled = jax.jit(program).lower(*args).compile(options)
        if _cache_hits() == hits:  # compiled here: one read back from JAX's cache does not serialize whole
            _save_executable(path, compiled, *trees)
    return compiled


_STATE_TREE = jax.tree.structure(env.State(movegen.GameState(), *[0] * (len(env.State._fields) - 1)))


def install_parser(rules: env.Rules) -> None:
    """``envs.notation``'s set-up and move programs for ``rules`` (``from_sfen``,
    ``play_moves``), loaded where an earlier process serialized them, else compiled and
    serialized: a later start skips their tracing and JAX's cache (about 2 s each on a CPU)."""
    x, move_number = notation.setup_arguments(notation.STARTPOS_SFEN)
    init = _compiled_program(("setup", rules), notation.init_program(rules), (x, move_number), _STATE_TREE,
                             quick=True)
    state = init(x, move_number)
    step = _compiled_program(("move", rules), notation.step_program(rules), (state, jnp.int32(0)), _STATE_TREE,
                             quick=True)
    notation.install_programs(rules, init=init, step=step)


def _compiled_once(key: tuple, build):
    """``_COMPILED[key]``, made by ``build()`` once per process, also between threads."""
    with _LOCK:
        lock = _KEY_LOCKS.setdefault(key, threading.Lock())
    with lock:
        if key not in _COMPILED:
            _COMPILED[key] = build()
    return _COMPILED[key]


def _step_program(rules: env.Rules, games: env.State):
    """``env.step`` over a batch of the shape of ``games`` (abstract), compiled quick."""
    batch = games.x.board.shape[0]
    key = ("step", rules, batch)
    actions = jax.ShapeDtypeStruct((batch,), jnp.int32)
    return _compiled_once(key, lambda: _compiled_program(key, jax.vmap(notation.step_program(rules)),
                                                         (games, actions), _STATE_TREE, quick=True))


def _quietly(work) -> None:
    """``work()`` in a thread whose failure the caller's own call repeats and raises."""
    try:
        work()
    except Exception:
        pass


def _root_mate_program(rules: env.Rules, games: env.State):
    """``mate.mate_in_three`` under ``rules`` over a batch of the shape of ``games``
    (abstract), compiled -O2: it runs at every move (about 30 ms a root on one core at
    B = 1, against 50-70 ms compiled quick)."""
    key = ("mate3", rules, games.x.board.shape[0])
    return _compiled_once(key, lambda: _compiled_program(key, functools.partial(mate.mate_in_three, rules=rules),
                                                         (games,), _MATE_TREE))


def avoid_mates_in_one(result: search_lib.SearchResult, games: env.State, step_all, find_mates
                       ) -> search_lib.SearchResult:
    """``result`` with each move after which the opponent has a mate in one replaced by the
    legal move the search ranks highest (its improved policy) after which it has none;
    kept where every move allows one. ``step_all(games [B], actions [B])`` and
    ``find_mates(games [B])`` are compiled for ``games``'s batch B.

    One step and one mate check of the chosen moves per search; only where a move is
    refuted, its alternatives are checked, B at a time, on the host's orders. Nearly every
    game the stall study's 16-simulation snapshots lost to greedy was lost so
    (docs/stall_study.md, round 14)."""
    refuted = np.asarray(find_mates(step_all(games, result.action))[0])
    if not refuted.any():
        return result
    batch = refuted.shape[0]
    actions = np.asarray(result.action).copy()
    legal = np.asarray(games.legal_action_mask)
    preference = np.asarray(result.policy)
    for row in np.flatnonzero(refuted):
        order = [a for a in np.argsort(-preference[row], kind="stable") if legal[row, a] and a != actions[row]]
        same_game = jax.tree.map(lambda a: jnp.broadcast_to(a[row], a.shape), games)
        for first in range(0, len(order), batch):
            candidates = order[first:first + batch]
            padded = np.asarray(candidates + candidates[:1] * (batch - len(candidates)), np.int32)
            mated = np.asarray(find_mates(step_all(same_game, padded))[0])[: len(candidates)]
            if not mated.all():
                actions[row] = candidates[int(np.argmin(mated))]
                break
    return _with_actions(result, jnp.asarray(actions))


@jax.jit
def _with_actions(result: search_lib.SearchResult, action: Array) -> search_lib.SearchResult:
    """``result`` playing ``action`` [B]: its Q where the search visited it, its PV that move."""
    changed = action != result.action
    rows = jnp.arange(action.shape[0])
    visited = result.visit_counts[rows, action] > 0
    chosen_q = jnp.where(visited, result.q[rows, action], result.search_value)
    pv = jnp.full_like(result.pv, -1).at[:, 0].set(action)
    return result.replace(
        action=action,
        chosen_q=jnp.where(changed, chosen_q, result.chosen_q),
        pv=jnp.where(changed[:, None], pv, result.pv),
    )


@functools.lru_cache(maxsize=None)
def _with_mate(num_simulations: int):
    return jax.jit(functools.partial(search_lib.with_mate, num_simulations=num_simulations))


_COMPILED: dict = {}
_KEY_LOCKS: dict = {}
_LOCK = threading.Lock()


@functools.lru_cache(maxsize=None)
def example_state(history: int) -> env.State:
    """The standard start with ``history`` hashes: the shape a compiled search is traced with."""
    return notation.from_sfen(notation.STARTPOS_SFEN, env.Rules(history=history))


def load_agent(spec: str) -> Agent:
    """The agent of a training workdir's snapshot, ``WORKDIR[@STEP]`` (default: latest)."""
    try:
        config, params, step = workdir_lib.load_snapshot(spec)
    except workdir_lib.SnapshotError as e:
        raise AgentError(str(e)) from None
    workdir, _ = workdir_lib.parse_spec(spec)
    return Agent(config=config, params=params, step=step, name=f"{workdir}@{step}")


def stack_states(states: list[env.State]) -> env.State:
    """Host states (unbatched) -> one batch [B]."""
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *states)
