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
into the agent's ``programs`` (``az.play.programs``): agents handed the same one share
every search whose config gives the same program (network, rules, considered actions,
repetition window: the variants of the paper share one). Matches, reports and the USI
engine hand one to the agents they load; where JAX's persistent compilation cache is
on, the programs are also serialized there for the next process.
"""

import dataclasses
import functools
import json
import threading

import jax
import jax.numpy as jnp
import ml_collections
import numpy as np
from jax import Array

from az import network as network_lib
from az import search as search_lib
from az import workdir as workdir_lib
from az.play import programs as programs_lib
from envs import env, notation

MATCH_MAX_LENGTH = 256  # floodgate's ply limit, which matches use


class AgentError(ValueError):
    """A checkpoint that cannot be loaded; the message names it."""


@dataclasses.dataclass(eq=False)
class Agent:
    config: ml_collections.ConfigDict
    params: dict
    step: int  # training iteration of the parameters (0: untrained)
    name: str
    # Where its searches are compiled: agents handed one ``Programs`` share them.
    programs: programs_lib.Programs = dataclasses.field(default_factory=programs_lib.Programs)

    @functools.cached_property
    def network(self) -> network_lib.AZNet:
        return network_lib.make_network(self.config.model)

    @functools.cached_property
    def rules(self) -> env.Rules:
        return search_lib.rules_from_config(self.config.env)

    @functools.cached_property
    def program(self) -> str:
        """The config fields the playing search is built from (``_compile``), as JSON:
        agents of runs that differ only in how they trained share their compiled searches."""
        c = self.config
        return json.dumps({"model": c.model.to_dict(), "declaration": c.env.declaration, "movegen": c.env.movegen,
                           "search": {field: c.search[field] for field in search_lib.PLAYING_FIELDS}},
                          sort_keys=True)

    def search(self, num_simulations: int, *, batch: int, history: int, max_length: int = MATCH_MAX_LENGTH,
               pv_length: int = 1, quick: bool = False):
        """The compiled ``search(params, rng_key, games [batch]) -> SearchResult``.

        ``history``: the repetition history H of the games searched (their
        ``Rules.history``). ``max_length``: the game's ply limit as the tree sees it (a
        match's 256, or unlimited for a GUI's game), not the training run's: a value
        passed to the program, so every limit shares one compile.
        ``num_simulations`` 0 is the policy network's move. ``quick``: on a CPU, compiled
        with ``QUICK_CPU_COMPILE`` (4x sooner, 3.5x slower to run): a program of its own."""
        key = (self.program, num_simulations, batch, history, pv_length, quick)
        program = self.programs.once(key, lambda: self._compile(num_simulations, batch, history, pv_length, quick))
        limit = programs_lib.limit_value(max_length)
        return lambda params, rng_key, games: program(params, rng_key, games, limit)

    def serialized(self, num_simulations: int, *, batch: int, history: int, pv_length: int = 1,
                   quick: bool = False) -> bool:
        """An earlier process left this search's programs serialized: ``search`` loads
        rather than compiles them (whatever its ply limit)."""
        shapes = [(self.program, num_simulations, batch, history, pv_length, quick)]
        if self.rules.movegen == "dense":
            rules = programs_lib.limit_free(self._playing_rules(history))
            shapes += [("mate", batch, history), ("step", rules, batch)]
            shapes += [] if quick else [("mate3", rules, batch)]
        return all(self.programs.loadable(shape) for shape in shapes)

    def compiled_simulations(self, *, batch: int, history: int, pv_length: int = 1, quick: bool = False) -> set[int]:
        """The simulation counts whose search of this shape is compiled already (for
        every ply limit)."""
        shape = (self.program, batch, history, pv_length, quick)
        return {key[1] for key in self.programs.keys() if (key[0], *key[2:]) == shape}

    def _playing_rules(self, history: int, max_length: int = programs_lib.LIMIT_AS_ARGUMENT) -> env.Rules:
        if isinstance(max_length, int):
            return dataclasses.replace(self.rules, max_length=max_length, history=history)
        return programs_lib.with_limit(dataclasses.replace(self.rules, history=history), max_length)

    def _tree_search(self, num_simulations: int, history: int, pv_length: int):
        """The search as evaluation plays it: Gumbel without noise, and pawns, bishops and
        rooks promoted wherever they may, whatever the run trained with (every setting not
        fixed here is in ``program``): ``(params, rng_key, games, limit, found, action) ->
        SearchResult``, the game's ply limit (int32 []) a value; a root with a mate (found
        [B], action [B]: the root's mate search) plays it (``search.with_mate``). That
        search is a program of its own, compiled once for every simulation count (it is
        most of a small search's compile)."""

        def tree(params, rng_key: Array, games: env.State, limit: Array, found: Array, action: Array
                 ) -> search_lib.SearchResult:
            search = search_lib.search_from_config(
                self.config.search,
                self.network.apply,
                self._playing_rules(history, limit),
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
            result = search(params, rng_key, games)
            return search_lib.with_mate(result, found, action, num_simulations=num_simulations)

        return tree

    def _compile(self, num_simulations: int, batch: int, history: int, pv_length: int, quick: bool):
        tree = self._tree_search(num_simulations, history, pv_length)
        games = jax.eval_shape(lambda: stack_states([example_state(history)] * batch))
        key = jax.eval_shape(lambda: jax.random.PRNGKey(0))
        found, action = jax.ShapeDtypeStruct((batch,), jnp.bool_), jax.ShapeDtypeStruct((batch,), jnp.int32)
        arguments = (self.params, key, games, programs_lib.LIMIT_SHAPE, found, action)
        tree_shape = (self.program, num_simulations, batch, history, pv_length, quick)
        if self.rules.movegen != "dense":  # the mate detector needs the dense core
            tree = self.programs.compile(tree_shape, tree, arguments, _RESULT_TREE, quick=quick)
            no_mate = (np.zeros(batch, bool), np.zeros(batch, np.int32))
            return lambda params, rng_key, games, limit: tree(params, rng_key, games, limit, *no_mate)
        programs = self.programs
        mate_program = functools.partial(programs.mate_program, games)
        # Serialized programs load side by side (2.5-3 s each on a CPU); compiles do not
        # overlap well, so they stay one after the other.
        # A quick search (the engine's first start) looks for mates in one only: the mate
        # in three compiles with the -O2 programs that replace it (minutes on one core).
        rules = self._playing_rules(history)
        root_mate_program = None if quick else functools.partial(programs.root_mate_program, rules, games)
        beside = []
        if programs.loadable(tree_shape) and programs.loadable(("mate", batch, history)):
            beside.append(threading.Thread(target=_quietly, args=(mate_program,), daemon=True, name="azshogi-mate"))
            if root_mate_program is not None and programs.loadable(("mate3", programs_lib.limit_free(rules), batch)):
                beside.append(threading.Thread(target=_quietly, args=(root_mate_program,), daemon=True,
                                               name="azshogi-mate3"))
        for thread in beside:
            thread.start()
        tree = programs.compile(tree_shape, tree, arguments, _RESULT_TREE, quick=quick)
        for thread in beside:
            thread.join()
        find_mates = mate_program()  # made by the thread, or here (raising where it failed)
        step_all = programs.step_program(rules, games)
        find_root_mates = (lambda games, limit: find_mates(games)) if root_mate_program is None else root_mate_program()

        def search(params, rng_key: Array, games: env.State, limit: Array) -> search_lib.SearchResult:
            """A root with a mate in one or three plays it without a search
            (``search.with_mate``); a move that lets the opponent mate in one is replaced
            where another does not. ``limit``: the game's ply limit, int32 []."""
            found, action = find_root_mates(games, limit)
            result = tree(params, rng_key, games, limit, found, action)
            return replace_refuted_moves(result, games, functools.partial(_step_within, step_all, limit), find_mates)

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


# The structure of every search's output (all of SearchResult's fields are arrays).
_RESULT_TREE = jax.tree.structure(search_lib.SearchResult(**{f.name: 0 for f in dataclasses.fields(search_lib.SearchResult)}))


def _quietly(work) -> None:
    """``work()`` in a thread whose failure the caller's own call repeats and raises."""
    try:
        work()
    except Exception:
        pass


def _step_within(step_all, limit: Array, games: env.State, actions) -> env.State:
    """``step_all(games, actions, limit)``: a step program with the game's ply limit bound."""
    return step_all(games, actions, limit)


def replace_refuted_moves(result: search_lib.SearchResult, games: env.State, step_all, find_mates
                          ) -> search_lib.SearchResult:
    """``result`` with each move after which the opponent has a mate in one replaced by the
    legal move the search ranks highest (its improved policy) after which it has none;
    kept where every move allows one. ``step_all(games [B], actions [B])`` and
    ``find_mates(games [B])`` are compiled for ``games``'s batch B.

    One step and one mate check of the chosen moves per search; only where a move is
    refuted, its alternatives are checked, B at a time, on the host's orders. Nearly every
    game the stall study's 16-simulation snapshots lost to greedy was lost so
    (docs/stall_study.md, mate checks). Everything else is host arrays: no program is
    compiled on a move (the engine's clock cannot wait for one)."""
    refuted = np.asarray(find_mates(step_all(games, result.action))[0])
    if not refuted.any():
        return result
    batch = refuted.shape[0]
    actions = np.asarray(result.action).copy()
    legal = np.asarray(games.legal_action_mask)
    preference = np.asarray(result.policy)
    host_games = jax.device_get(games)
    for row in np.flatnonzero(refuted):
        order = [a for a in np.argsort(-preference[row], kind="stable") if legal[row, a] and a != actions[row]]
        same_game = jax.tree.map(lambda a: np.broadcast_to(a[row], a.shape), host_games)
        for first in range(0, len(order), batch):
            candidates = order[first:first + batch]
            padded = np.asarray(candidates + candidates[:1] * (batch - len(candidates)), np.int32)
            mated = np.asarray(find_mates(step_all(same_game, padded))[0])[: len(candidates)]
            if not mated.all():
                actions[row] = candidates[int(np.argmin(mated))]
                break
    return _with_actions(result, actions)


def _with_actions(result: search_lib.SearchResult, action: np.ndarray) -> search_lib.SearchResult:
    """``result`` playing ``action`` [B] (host): its Q where the search visited it, its PV
    that move. On the host (small arrays): no compile on a move."""
    old_action, visits, q, value, chosen_q, old_pv = jax.device_get(
        (result.action, result.visit_counts, result.q, result.search_value, result.chosen_q, result.pv))
    changed = action != old_action
    rows = np.arange(action.shape[0])
    visited = visits[rows, action] > 0
    new_q = np.where(visited, q[rows, action], value)
    pv = np.full_like(old_pv, -1)
    pv[:, 0] = action
    return result.replace(
        action=jnp.asarray(action.astype(old_action.dtype)),
        chosen_q=jnp.asarray(np.where(changed, new_q, chosen_q).astype(chosen_q.dtype)),
        pv=jnp.asarray(np.where(changed[:, None], pv, old_pv)),
    )


@functools.lru_cache(maxsize=None)
def example_state(history: int) -> env.State:
    """The standard start with ``history`` hashes: the shape a compiled search is traced with."""
    return notation.from_sfen(notation.STARTPOS_SFEN, env.Rules(history=history))


def load_agent(spec: str, programs: programs_lib.Programs | None = None,
               search: dict[str, str] | None = None) -> Agent:
    """The agent of a training workdir's snapshot, ``WORKDIR[@STEP]`` (default: latest),
    compiling its searches into ``programs`` (default: programs of its own). ``search``:
    {field: value as text} replacing fields of the snapshot's ``config.search`` that the
    playing search is built from (``az.search.PLAYING_FIELDS``); they join its name."""
    try:
        config, params, step = workdir_lib.load_snapshot(spec)
    except workdir_lib.SnapshotError as e:
        raise AgentError(str(e)) from None
    workdir, _ = workdir_lib.parse_spec(spec)
    name = f"{workdir}@{step}"
    if search:
        config = with_search_settings(config, search)
        name += " " + " ".join(f"{field}={config.search[field]}" for field in search)
    return Agent(config=config, params=params, step=step, name=name, programs=programs or programs_lib.Programs())


def with_search_settings(config: ml_collections.ConfigDict, settings: dict[str, str]) -> ml_collections.ConfigDict:
    """A copy of ``config`` with ``settings`` ({field: text}) in its ``search``, each
    parsed as the field's type; AgentError names an unknown field or a value no search
    can use."""
    config = ml_collections.ConfigDict(config.to_dict())
    for field, text in settings.items():
        if field not in search_lib.PLAYING_FIELDS:
            raise AgentError(f"search setting {field!r}: the playing search is built from "
                             f"{', '.join(search_lib.PLAYING_FIELDS)} only")
        kind = type(config.search[field])
        try:
            config.search[field] = kind(text)
        except ValueError:
            raise AgentError(f"search setting {field}={text!r}: not a{'n' if kind is int else ''} "
                             f"{kind.__name__}") from None
    problem = search_lib.playing_field_problem(config.search, config.model.material_head)
    if problem is not None:
        field, why = problem
        raise AgentError(f"search setting {field}={config.search[field]!r}: {why}")
    return config


def stack_states(states: list[env.State]) -> env.State:
    """Host states (unbatched) -> one batch [B]."""
    return jax.tree.map(lambda *xs: jnp.stack([jnp.asarray(x) for x in xs]), *states)
