"""The agent's compiled programs kept as serialized executables across processes."""

import json
import os
import pathlib
import subprocess
import sys
import textwrap

import numpy as np
import pytest

import helpers

ROOT = pathlib.Path(__file__).resolve().parents[1]

# One process: the program of shape ("probe",) for the source digest argv[2] (repeated),
# compiled or loaded by ``Programs.compile`` with JAX's cache in argv[1]; it prints
# whether it was loaded, whether it is serialized now and whether it computes right.
PROCESS = textwrap.dedent("""
    import json, os, sys
    import jax, jax.numpy as jnp, numpy as np
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    jax.config.update("jax_persistent_cache_min_compile_time_secs", 0)  # the tiny program is cached too
    jax.config.update("jax_persistent_cache_min_entry_size_bytes", 0)
    from az.play import programs as programs_lib
    programs = programs_lib.Programs(digest=sys.argv[2] * 64)
    x = jax.ShapeDtypeStruct((16, 16), jnp.float32)
    path = programs.executable_path(("probe",))
    loaded = os.path.exists(path)
    program = programs.compile(("probe",), lambda a: jnp.sin(a) @ a, (x,), jax.tree.structure(x))
    a = np.linspace(-1, 1, 256, dtype=np.float32).reshape(16, 16)
    right = bool(np.allclose(np.asarray(program(a)), np.sin(a) @ a, atol=1e-5))
    print(json.dumps({"loaded": loaded, "serialized": os.path.exists(path), "right": right}))
""")


def _process(cache: str, digest: str) -> dict:
    done = subprocess.run([sys.executable, "-c", PROCESS, cache, digest], cwd=ROOT, capture_output=True, text=True,
                          timeout=120, env=dict(os.environ, JAX_PLATFORMS="cpu"))
    assert done.returncode == 0, done.stderr[-2000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


def test_programs_load_in_a_later_process_and_an_upgrade_serializes_its_own(tmp_path):
    cache = str(tmp_path / "jax_cache")
    first = _process(cache, "a")
    assert first == {"loaded": False, "serialized": True, "right": True}
    again = _process(cache, "a")
    assert again == {"loaded": True, "serialized": True, "right": True}
    # Other source, the same program: JAX's cache holds it, yet the new version must
    # serialize its own executable, or every later start reads JAX's cache (slower).
    upgraded = _process(cache, "b")
    assert upgraded == {"loaded": False, "serialized": True, "right": True}
    assert _process(cache, "b")["loaded"]


def test_programs__a_compile_another_process_runs_is_waited_for_with_a_timeout(tmp_path, monkeypatch):
    """One holder at a time per program; another waits for it (then loads what it left),
    and gives up waiting after ``COMPILE_WAIT_S`` (compiling its own)."""
    import threading
    import time

    from az.play import programs as programs_lib

    path = str(tmp_path / "azshogi_executables" / "probe.bin")
    monkeypatch.setattr(programs_lib, "COMPILE_WAIT_S", 0.5)
    with programs_lib._CompileLock(path) as first:
        assert not first.waited
        start = time.monotonic()
        with programs_lib._CompileLock(path) as impatient:  # the holder never lets go: it goes on alone
            assert impatient.waited and 0.5 <= time.monotonic() - start < 2.0
        release = threading.Timer(0.2, first.__exit__)
        release.start()
        with programs_lib._CompileLock(path) as patient:  # the holder finishes: it gets the lock
            assert patient.waited and time.monotonic() - start < 2.5
        release.join()
    with programs_lib._CompileLock(None) as uncached:
        assert not uncached.waited


PARSER = textwrap.dedent("""
    import json, os, sys
    import jax
    jax.config.update("jax_compilation_cache_dir", sys.argv[1])
    from az.play import programs as programs_lib
    from envs import env, notation
    rules = env.Rules(max_length=64, history=8)
    programs = programs_lib.Programs()
    paths = [programs.executable_path((kind, rules)) for kind in ("setup", "move")]
    loaded = all(os.path.exists(path) for path in paths)
    state = programs.position_parser(rules).from_position("startpos moves 7g7f 3c3d 8h2b+")
    print(json.dumps({"loaded": loaded, "serialized": all(os.path.exists(path) for path in paths),
                      "sfen": notation.to_sfen(state), "ply": int(state.ply)}))
""")


def test_the_parser_programs_load_in_a_later_process(tmp_path):
    """The engine's position set-up and move programs: serialized by the first process,
    loaded by the next, and either way the position comes out as cshogi plays it."""
    cache = str(tmp_path / "jax_cache")
    expected = "lnsgkgsnl/1r5+B1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/7R1/LNSGKGSNL w B 4"
    runs = []
    for _ in range(2):
        done = subprocess.run([sys.executable, "-c", PARSER, cache], cwd=ROOT, capture_output=True, text=True,
                              timeout=300, env=dict(os.environ, JAX_PLATFORMS="cpu"))
        assert done.returncode == 0, done.stderr[-2000:]
        runs.append(json.loads(done.stdout.strip().splitlines()[-1]))
    assert runs[0] == {"loaded": False, "serialized": True, "sfen": expected, "ply": 3}
    assert runs[1] == {"loaded": True, "serialized": True, "sfen": expected, "ply": 3}


@pytest.mark.parametrize("field, value", [("search.considered_drops", 2), ("search.material_utility", 1.0),
                                          ("search.max_num_considered_actions", 8), ("search.value_scale", 1.0)])
def test_agent__a_playing_setting_of_its_own_gets_a_program_of_its_own(field, value):
    """Agents that share ``Programs`` (a ladder, a head-to-head match) share a compiled
    search only when every setting it is built from agrees; training-only fields do not count."""
    from az.play import agent as agent_lib
    from configs import default

    def program(**changes):
        config = default.get_config("smoke")
        config.model.material_head = True
        for name, v in changes.items():
            section, leaf = name.split(".")
            config[section][leaf] = v
        return agent_lib.Agent(config=config, params={}, step=0, name="probe").program

    assert program(**{field: value}) != program()
    assert program(**{"selfplay.num_games": 4, "learner.learning_rate": 0.5}) == program()


def test_load_agent__search_settings_replace_the_snapshot_s_and_name_the_agent(tmp_path):
    """``eval.py --search``: a snapshot's agent with other playing-search settings gets
    them (parsed as each field's type), a program and a name of its own; a field the
    playing search is not built from, a value of the wrong type or one no search can use
    is one error naming it, and the snapshot's own config is left as it was."""
    import jax

    from az import network as network_lib
    from az import workdir as workdir_lib
    from az.play import agent as agent_lib
    from az.play import players
    from configs import default

    config = default.get_config("smoke")
    params = network_lib.init_params(network_lib.make_network(config.model), jax.random.PRNGKey(0))
    workdir_lib.save_snapshot(str(tmp_path), 3, params, config)
    plain = agent_lib.load_agent(str(tmp_path))
    changed = agent_lib.load_agent(str(tmp_path), search={"value_scale": "0.5", "max_num_considered_actions": "2"})
    assert changed.config.search.value_scale == 0.5 and changed.config.search.max_num_considered_actions == 2
    assert isinstance(changed.config.search.max_num_considered_actions, int)
    assert changed.name == f"{tmp_path}@3 value_scale=0.5 max_num_considered_actions=2"
    assert changed.program != plain.program
    assert plain.config.search.value_scale == config.search.value_scale
    assert agent_lib.load_agent(str(tmp_path)).config.search.value_scale == config.search.value_scale
    player = players.parse_player(f"checkpoint:{tmp_path}", num_simulations=4, search={"value_scale": "2"})
    assert player.agent.config.search.value_scale == 2.0 and player.name.endswith("value_scale=2.0 n=4")
    cases = [({"gumbel_scale": "1"}, "'gumbel_scale': the playing search is built from"),
             ({"max_num_considered_actions": "two"}, "max_num_considered_actions='two': not an int"),
             ({"value_scale": "0"}, "value_scale=0.0: must be > 0"),
             ({"material_utility": "1"}, "material_utility=1.0: needs model.material_head = True")]
    for search, needle in cases:
        with pytest.raises(players.PlayerError, match=needle.replace("(", r"\(")):
            players.parse_player(f"checkpoint:{tmp_path}", search=search)


@pytest.fixture(scope="module")
def guarded_agent():
    """An untrained smoke-size agent, its search of the six positions (0 simulations) and
    the step and mate programs that search compiled (in the agent's ``programs``)."""
    import jax

    from az import network as network_lib
    from az.play import agent as agent_lib
    from az.play import programs as programs_lib
    from configs import default
    from envs import env, notation

    config = default.get_config("smoke")
    params = network_lib.init_params(network_lib.make_network(config.model), jax.random.PRNGKey(0))
    agent = agent_lib.Agent(config=config, params=params, step=0, name="untrained")
    rules = env.Rules(history=8)
    sfens = helpers.MIXED_THREATS + [helpers.ALL_THREATS]
    states = [notation.from_sfen(s, rules) for s in sfens]
    games = agent_lib.stack_states(states)
    search = agent.search(0, batch=len(sfens), history=rules.history)
    result = search(params, jax.random.PRNGKey(1), games)
    playing_rules = programs_lib.limit_free(agent._playing_rules(rules.history))
    limited_step = agent.programs.get(("step", playing_rules, len(sfens)))
    limit = programs_lib.limit_value(agent_lib.MATCH_MAX_LENGTH)

    def step_all(games, actions):
        return limited_step(games, actions, limit)

    find_mates = agent.programs.get(("mate", len(sfens), rules.history))
    return sfens, states, games, result, step_all, find_mates, agent.programs


def test_agent__a_changed_ply_limit_compiles_nothing(guarded_agent):
    """The game's ply limit is a value of the compiled programs: searches under other limits
    (a match's 256, a GUI's 320, none) reuse the fixture's programs, and nothing compiles
    (JAX reports no compile while they run), whereas a new simulation count would."""
    import jax

    from az import network as network_lib
    from az.play import agent as agent_lib
    from az.play import programs as programs_lib
    from configs import default

    _, _, games, result, _, _, programs = guarded_agent
    config = default.get_config("smoke")
    params = network_lib.init_params(network_lib.make_network(config.model), jax.random.PRNGKey(0))
    agent = agent_lib.Agent(config=config, params=params, step=0, name="untrained", programs=programs)
    key = jax.random.PRNGKey(1)
    keys = set(programs.keys())
    compiles = []

    def listen(event, duration, **kwargs):
        if event == "/jax/core/compile/backend_compile_duration":
            compiles.append(event)

    batch, history = games.x.board.shape[0], games.history.shape[1]
    jax.monitoring.register_event_duration_secs_listener(listen)
    try:
        for limit in (agent_lib.MATCH_MAX_LENGTH, 320, 1, programs_lib.LIMIT_AS_ARGUMENT):
            out = agent.search(0, batch=batch, history=history, max_length=limit)(params, key, games)
            assert out.action.shape == result.action.shape
    finally:
        jax.monitoring.unregister_event_duration_listener(listen)
    assert set(programs.keys()) == keys and compiles == []


def test_the_agent_never_plays_into_a_mate_in_one_it_can_avoid(guarded_agent):
    from envs import notation

    sfens, states, _, result, _, _, _ = guarded_agent
    for sfen, state, action in zip(sfens, states, np.asarray(result.action)):
        refuted = helpers.mate_in_one_after(sfen)
        assert 0 < sum(refuted.values()) <= len(refuted), sfen  # the positions are what they claim
        move = notation.action_to_usi(state, int(action))
        if not all(refuted.values()):
            assert not refuted[move], f"{sfen}: {move} lets the opponent mate in one"


def test_a_refuted_move_gives_way_to_the_best_ranked_safe_one(guarded_agent):
    """Each row plays a move the opponent mates after (else a safe one), with a random
    ranking of the legal moves: the safest-best is the first unrefuted move in the ranking,
    reached through several batches of candidates; a safe move and a position where every
    move is refuted stay as they are."""
    import jax.numpy as jnp

    from az.play import agent as agent_lib
    from envs import notation

    sfens, states, games, result, step_all, find_mates, _ = guarded_agent
    rng = np.random.default_rng(3)
    legal = np.asarray(games.legal_action_mask)
    policy = np.where(legal, rng.random(legal.shape), 0.0).astype(np.float32)
    actions, expected = [], []
    for row, (sfen, state) in enumerate(zip(sfens, states)):
        refuted = {notation.usi_to_action(state, m): r for m, r in helpers.mate_in_one_after(sfen).items()}
        ranked = sorted(refuted, key=lambda a: -policy[row, a])
        safe = [a for a in ranked if not refuted[a]]
        if row == 0:  # a safe move stays
            actions.append(safe[-1])
            expected.append(safe[-1])
        else:
            played = [a for a in ranked if refuted[a]][-1]
            actions.append(played)
            expected.append(safe[0] if safe else played)
    # Candidates go B at a time: some row's safe move must lie past the first batch.
    depth = [sorted((a for a in np.flatnonzero(legal[r]) if a != actions[r]), key=lambda a: -policy[r, a])
             .index(expected[r]) for r in range(1, len(sfens) - 1)]
    assert max(depth) >= len(sfens), depth
    forced = result.replace(action=jnp.asarray(actions, jnp.int32), policy=jnp.asarray(policy))
    guarded = agent_lib.replace_refuted_moves(forced, games, step_all, find_mates)
    assert np.asarray(guarded.action).tolist() == expected
    changed = np.asarray(guarded.action) != np.asarray(actions)
    assert changed.tolist() == [False] + [True] * (len(sfens) - 2) + [False]
    assert (np.asarray(guarded.pv)[changed, 0] == np.asarray(guarded.action)[changed]).all()


def test_the_agent_plays_a_pawn_bishop_or_rook_promoted_where_its_network_prefers_it_plain(guarded_agent):
    """A network whose prior puts the bishop exchange 8h2b far above all else, 8h2b+ lowest
    of all: the network alone plays it plain, the agent promoted (the plain move's prior
    goes to its twin)."""
    import jax

    from az import network as network_lib
    from az import search as search_lib
    from az.play import agent as agent_lib
    from configs import default
    from envs import env, notation

    sfens, programs = guarded_agent[0], guarded_agent[-1]
    config = default.get_config("smoke")
    config.model.policy_bias = "action"
    network = network_lib.make_network(config.model)
    params = network_lib.init_params(network, jax.random.PRNGKey(0))
    rules = env.Rules(history=8)
    state = notation.from_sfen("lnsgkgsnl/1r5b1/pppppp1pp/6p2/9/2P6/PP1PPPPPP/1B5R1/LNSGKGSNL b - 3", rules)
    plain, promoted = notation.usi_to_action(state, "8h2b"), notation.usi_to_action(state, "8h2b+")
    bias = params["params"]["policy_bias"]
    params["params"]["policy_bias"] = bias.at[plain].set(50.0).at[promoted].set(-50.0)
    games = agent_lib.stack_states([state] * len(sfens))  # the guard's step and mate programs' batch
    logits, _ = search_lib.network_forward(network.apply, params, games, rules)
    assert int(np.argmax(np.asarray(logits)[0])) == plain
    agent = agent_lib.Agent(config=config, params=params, step=0, name="plain-minded", programs=programs)
    result = agent.search(0, batch=len(sfens), history=rules.history)(params, jax.random.PRNGKey(1), games)
    assert np.asarray(result.action).tolist() == [promoted] * len(sfens)


# A drawn game's position (docs/data/stall_study/round24/0011_aigakari_37kei_w.kif, move 116):
# white mates in three with R*8f, and has no mate in one.
MATE_IN_THREE = "1+P1+P3+P1/2+L6/5p2l/S8/9/K1+p5p/4kPG1+b/5R1P1/1NS1GS3 w GSNrbg2n2l10p 116"


def test_the_agent_plays_a_mate_in_three_without_a_search(guarded_agent):
    import jax

    from az import network as network_lib
    from az.play import agent as agent_lib
    from configs import default
    from envs import env, notation

    sfens, states, _, _, _, _, programs = guarded_agent
    assert helpers.mates_in_three(MATE_IN_THREE) == {"R*8f": 2}  # the position is what it claims
    rules = env.Rules(history=8)
    config = default.get_config("smoke")
    params = network_lib.init_params(network_lib.make_network(config.model), jax.random.PRNGKey(0))
    agent = agent_lib.Agent(config=config, params=params, step=0, name="untrained", programs=programs)
    mate_state = notation.from_sfen(MATE_IN_THREE, rules)
    games = agent_lib.stack_states([mate_state] + states[1:])  # the fixture's batch: its compiled programs
    result = agent.search(0, batch=len(sfens), history=rules.history)(params, jax.random.PRNGKey(1), games)
    assert notation.action_to_usi(mate_state, int(result.action[0])) == "R*8f"
    assert bool(result.mate[0]) and float(result.search_value[0]) == 1.0
    for sfen, mate in zip(sfens[1:], np.asarray(result.mate)[1:]):
        assert bool(mate) == bool(helpers.mates_in_three(sfen)), sfen
