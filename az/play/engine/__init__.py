"""A USI engine for a trained run: ``python -m az.play.engine --checkpoint WORKDIR[@STEP]``,
or for the classical baseline: ``python -m az.play.engine --heuristic [WEIGHTS] [--depth D]``.

For shogi GUIs (ShogiGUI, Shogidokoro, electron-shogi) and match runners (cshogi);
``scripts/azshogi-usi`` starts it without arguments (checkpoint from
``$AZSHOGI_CHECKPOINT`` or its first argument). It plays the agent's greedy Gumbel
search (sequential halving, no noise) from the run's snapshots, as ``az.play.agent``
evaluates it.

The package splits along the protocol's seams: ``protocol`` (the text of commands and
answers), ``clock`` (how many simulations a clock allows), ``job`` (one ``go``'s thread
and its single answer), ``moves`` (how a ``go`` is answered: watchdog, fallbacks, the
search size) and ``engine`` (the command loop) import no JAX; the command loop
imports ``model`` (JAX, the environment, the network) only through ``_model()``, on the
first ``position``, ``isready`` or ``go``. So ``usi`` is answered at once.

Protocol
  ``isready`` loads the snapshot, compiles the search for ``Simulations``, measures its
  speed on the start position and answers ``readyok`` (with ``info string`` progress
  lines meanwhile, a keep-alive for GUIs with a timeout). On a CPU's first start the
  programs are compiled quick (LLVM -O0) and the -O2 ones follow in a thread, measured
  and used from the move after they are ready, and serialized for the next start.
  Options: ``Simulations`` (spin, 800), ``Checkpoint`` (string, WORKDIR[@STEP]),
  ``CheckpointStep`` (string, ``latest`` or a step; reloads on the next ``isready``),
  ``NetworkDelay`` (spin, ms kept back from every time budget, 120), ``MaxMovesToDraw``
  (spin, 0 = no limit; ``Draw_Ply`` is its alias, as some runners name it): the game's
  ply limit, a draw in the search tree and the horizon of the clock; a value passed to
  the compiled programs, so changing it compiles nothing (effective at the next ``go``). ``Threads`` (one
  search thread drives the device; the value is ignored), ``USI_Hash`` and
  ``USI_Ponder`` are accepted and ignored.
  ``position startpos|sfen ... [moves ...]``: the moves are played through the
  environment, so repetition history counts; a position extending the previous one only
  plays the new moves. A malformed position, bad SFEN or illegal move gets ``info string
  error: ...`` and leaves no position: the next ``go`` answers ``bestmove resign``
  (playing on from a stale position would send the GUI an illegal move).
  ``go``: ``nodes N`` (N simulations), ``byoyomi``, ``btime``/``wtime``,
  ``binc``/``winc``, ``movetime``, ``infinite``, ``ponder`` (then ``ponderhit``);
  ``stop`` answers at once with the best finished result; ``go mate`` answers
  ``checkmate notimplemented``. ``gameover`` drops any pending answer; ``quit`` (or the
  end of stdin) exits with status 0. Unknown or malformed commands get an ``info string``
  naming the problem; the engine never stops on them. Output is flushed per line.

Moves
  ``bestmove resign`` when the side to move has no legal move, ``bestmove win`` when the
  entering-king declaration (CSA 27-point rule) holds for the side to move, otherwise
  the search's move. Before it, ``info depth D nodes N nps .. time .. score cp X pv ...``:
  N simulations; the PV is the chosen move followed by the most visited child at each
  node of the search tree (D = its length). The score is ``protocol.value_to_cp`` of the
  chosen move's Q, or ``mate 1`` / ``mate 3`` for a mate the root's mate search found
  (the PV is then the mating move alone).

Time (``clock``, ``moves``)
  It never compiles against the clock: when one of the sizes ``Simulations,
  Simulations/2, ...`` (``clock.simulation_sizes``) would fit but is not compiled yet, it
  is compiled in a background thread for the next moves (so set ``Simulations`` to what
  the time control allows to play full strength from the first move). A watchdog answers
  with the policy move at the end of the budget should the search still run; it is set
  before anything that may wait (the previous ``go``'s search still running, a busy
  CPU), with the first legal move as the answer until the policy's is computed. Every
  program a move runs is compiled under ``isready``. ``go`` without a clock (plain,
  ``nodes``, ``infinite``) compiles what it needs.

Errors
  A snapshot that cannot be loaded is reported on ``isready`` as ``info string error:
  ...`` followed by ``readyok`` (GUIs hang on a missing ``readyok``); every ``go`` then
  answers ``info string error: ...`` and ``bestmove resign``. At start-up a checkpoint
  without snapshots is also reported as one line on stderr. A relative WORKDIR that is
  not in the working directory (GUIs choose it) is looked up in the repository
  (``runs/x``). ``--compilation_cache`` (default: the workdir's ``jax_cache``, shared
  with training) makes later starts load what the first compiled. Engines that start
  together on one cache (a runner's games side by side) compile each program once: the
  others wait for it (``az.play.programs``: a lock per program, at most 5 minutes) and
  load it.

Heuristic mode
  ``--heuristic [WEIGHTS] [--depth D]`` plays the classical player instead
  (``az.classical.heuristic``, as the ``heuristic`` player of matches): the evolved linear
  evaluation with a full-width search of depth 1 or 2 (default 1); WEIGHTS is a weights
  file or a GA workdir (its ``weights.json``), by default the shipped
  ``data/heuristic_weights.json`` (a relative path is looked up in the repository too).
  No checkpoint and no network: ``id name`` says ``azshogi heuristic dD``; ``isready``
  loads the weights and compiles the evaluation's three block programs, serialized into
  the compilation cache (default: the user's ``~/.cache/azshogi/jax_cache``), so a later
  start loads them. A bad weights
  file is reported like a bad snapshot (``info string error: ...``, ``readyok``, then
  ``bestmove resign`` to every ``go``; a missing one is found before JAX loads and also
  reported on stderr at start-up). ``go`` runs one search whatever its limits (nodes and
  clock are ignored; ``infinite``/``ponder`` answers still wait for ``stop``/``ponderhit``;
  no watchdog, no fallback move) and answers ``info depth D nodes M nps .. time .. score
  .. pv MOVE`` (M: the legal moves evaluated; the score in centipawns of the weights'
  pawn, ``mate 1`` for a mating move, ``mate -2`` when every move allows a mate: see
  ``model.HeuristicModel``), then ``bestmove``; resignation and the declaration are as
  above. Equal best moves are chosen by a generator seeded at load: the engine is
  deterministic. The options Simulations, Checkpoint, CheckpointStep and NetworkDelay are
  listed but ignored.
"""
