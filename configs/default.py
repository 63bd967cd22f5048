"""Every field of a training run, with its meaning. Variants override only what differs.

    python train.py --config configs/base.py[:size=S,recipe=R] --workdir runs/NAME [--config.FIELD=VALUE ...]

A preset has two axes, which set disjoint fields, so any size goes with any recipe:

- size, how big (batch, simulations, network, budgets, replay): ``paper`` the paper's
  scale on an accelerator; ``gpu`` the paper's search and network on one GPU (twice the
  games in parallel, a budget for about a day); ``cpu`` the largest still useful on a
  2-core CPU (about an hour for a visible gain over the untrained network); ``smoke`` a
  tiny run that finishes a few iterations on a 2-core CPU in about two minutes;
  ``gpu_short`` minutes on one GPU at the small recipe's search and learner (with
  ``train.py --budget_minutes``), and ``cpu_short`` its proxy on a 2-core CPU.
- recipe, which algorithm: ``paper`` the paper's; ``small`` what gives a small run more
  strength per hour (docs/stall_study.md); ``exercise`` the paper's with the self-play
  switches on that the smoke tests exercise.

Both default to ``paper``. The one-word spellings stay as aliases (``ALIASES``):
``:paper``, ``:gpu``, ``:cpu`` (what ``make train`` runs) and ``:smoke``. Parts are
applied left to right, so ``:cpu,recipe=paper`` is the cpu size with the paper's recipe.
"""

import ml_collections

from az.train.config import ConfigError

ALIASES = {
    "paper": "size=paper,recipe=paper",
    "gpu": "size=gpu,recipe=paper",
    "cpu": "size=cpu,recipe=small",
    "smoke": "size=smoke,recipe=exercise",
}


def get_config(arg: str | None = None) -> ml_collections.ConfigDict:
    """The config of a preset ``arg`` (see the module's docstring; None: the paper's)."""
    preset = parse_preset(arg)
    c = _fields()
    SIZES[preset["size"]](c)
    RECIPES[preset["recipe"]](c)
    return c


def parse_preset(arg: str | None) -> dict[str, str]:
    """``"size=cpu,recipe=small"``, an alias such as ``"cpu"``, or both, comma-separated
    and applied left to right -> {"size": ..., "recipe": ...}. ConfigError names a bad part."""
    preset = {"size": "paper", "recipe": "paper"}
    for part in (arg or "").split(","):
        part = part.strip()
        if not part:
            continue
        if "=" not in part:
            if part not in ALIASES:
                raise ConfigError(f"unknown preset {part!r}; choose from {', '.join(ALIASES)} or size=S,recipe=R")
            preset.update(parse_preset(ALIASES[part]))
            continue
        key, value = (s.strip() for s in part.split("=", 1))
        axis = {"size": SIZES, "recipe": RECIPES}.get(key)
        if axis is None:
            raise ConfigError(f"preset {part!r}: unknown key {key!r}; keys: size, recipe")
        if value not in axis:
            raise ConfigError(f"preset {part!r}: unknown {key} {value!r}; choose from {'|'.join(axis)}")
        preset[key] = value
    return preset


def preset_help() -> str:
    """One line: the two axes and what each alias expands to."""
    aliases = "; ".join(f":{name} = {expansion}" for name, expansion in ALIASES.items())
    return f"sizes {'|'.join(SIZES)}, recipes {'|'.join(RECIPES)}, both default paper; aliases {aliases}"


def _fields() -> ml_collections.ConfigDict:
    """Every field, at the paper's size and recipe."""
    c = ml_collections.ConfigDict()
    c.name = "base"  # shown in logs
    c.seed = 0  # the whole run's randomness derives from it
    c.budget_games = 1_000_000  # self-play games to finish; the learning rate and start phases follow
    # games finished / budget_games, so it cannot change when a run resumes

    c.env = ml_collections.ConfigDict()
    c.env.start = "standard"  # start positions, see envs/starts.py (e.g. "shogi816k@0.6 > random_start(2)")
    c.env.max_length = 512  # plies; a longer game is a draw (truncated)
    c.env.declaration = True  # entering-king declaration (CSA 27 points) wins
    c.env.movegen = "dense"  # move generator: "dense" (envs/dense.py) or "pgx" (the reference)

    c.search = ml_collections.ConfigDict()
    c.search.algorithm = "gumbel"  # "gumbel" (Gumbel MuZero, sequential halving) or "puct"
    c.search.num_simulations = 64  # n
    c.search.max_num_considered_actions = 16  # m (gumbel only)
    # Gumbel: visits each considered root action gets before sequential halving drops any; 2 lets
    # every candidate see the opponent's reply (1: Gumbel MuZero's schedule)
    c.search.first_visits = 1
    # Drops the root always considers (gumbel only), the best by gumbel + logit: the prior
    # ranks every drop below the board moves, so without them no drop is ever searched.
    c.search.considered_drops = 0
    # Gumbel: the root also considers this many captures (the best by gumbel + logit),
    # however low their prior; within the m, as the drops.
    c.search.considered_captures = 0
    c.search.value_scale = 0.1  # c_scale: sigma(q) = (50 + max N) c_scale q, mctx's default (gumbel only)
    c.search.gumbel_scale = 1.0  # Gumbel noise at the root in self-play
    c.search.dirichlet_alpha = 0.15  # puct only, as AlphaZero for shogi; the noise covers legal moves only
    c.search.dirichlet_fraction = 0.25  # puct only: root prior = (1 - f) * prior + f * Dirichlet
    c.search.history_window = 16  # plies of repetition history inside the tree
    c.search.mate_in_one = False  # a root with a mate in one plays it without a search (dense core)
    c.search.mate_in_tree = False  # the tree scores a node whose mover has a mate in one as won
    c.search.always_promote = False  # pawns, bishops and rooks that may promote always do (as engines search)
    c.search.reduced_simulations = 8  # playout caps: simulations of the plies not searched in full
    # Playout caps, gumbel only: captures among the actions a reduced search visits. A
    # reduced search visits only its n best considered actions by gumbel + logit, so the
    # full search's reserved captures go unsearched there; when > 0 it considers
    # reduced_simulations actions, this many of them its best captures (no reserved drops).
    c.search.reduced_considered_captures = 0
    # Playout caps, gumbel only: the reduced searches' root noise; -1: search.gumbel_scale.
    # 0 plays their plies as strongly as n = reduced_simulations allows (KataGo's fast
    # searches carry no noise), so the games' outcomes rest on fewer random moves.
    c.search.reduced_gumbel_scale = -1.0
    c.search.material_utility = 0.0  # weight w of the material head's forecast in the search's
    # values: (value + w * material) / (1 + w) (KataGo's score utility; needs model.material_head)

    c.selfplay = ml_collections.ConfigDict()
    c.selfplay.num_games = 1024  # B, games played in parallel (divisible by the device count)
    c.selfplay.plies_per_iteration = 32  # T, plies per compiled iteration
    c.selfplay.sample_visits_plies = 0  # first plies of a game that sample moves by visit counts
    c.selfplay.full_search_fraction = 1.0  # playout caps (KataGo): share of plies searched with
    # num_simulations, the others with search.reduced_simulations and no policy target; 1: off
    c.selfplay.resign = False  # resign when the value stays below the threshold
    c.selfplay.resign_threshold = -0.9  # start value; moved on the device to keep false resignations rare
    c.selfplay.resign_plies = 2  # consecutive own moves below the threshold
    c.selfplay.no_resign_fraction = 0.1  # games that never resign and check the rule
    c.selfplay.false_resign_target = 0.05  # wanted share of would-resign positions not lost
    c.selfplay.avoid_mates_in_one = False  # a move after which the opponent mates in one is replaced
    # by the best of the search's first m moves that allows none, as the playing agent does (dense core)

    c.model = ml_collections.ConfigDict()
    c.model.num_blocks = 10  # residual blocks
    c.model.channels = 128
    c.model.value_hidden = 256
    # The value head also reads each trunk channel's mean and maximum over the board (KataGo's
    # global pooling) beside its 1x1 convolution's few planes: whole-board sums such as material.
    c.model.value_pool = False
    c.model.dtype = "bfloat16"  # compute dtype: "float32" or "bfloat16" (parameters stay float32)
    c.model.policy_bias = "plane"  # policy logits' bias: one per direction plane, or "action": one per action
    c.model.drop_logit_init = 0.0  # the drop actions' initial logit bias (a prior against drops when < 0)
    c.model.legality_head = False  # an auxiliary head trained to predict each action's legality
    c.model.material_head = False  # an auxiliary output of the value head: the material balance
    c.model.material_plies = 8  # ... this many plies later in the game (or at its end), the mover's view
    c.model.material_weight = 1.0  # ... its squared error's weight in the loss
    c.model.occupancy_head = False  # an auxiliary head on the trunk: each square's occupant (empty,
    # the mover's piece, the opponent's) occupancy_plies later (KataGo's ownership, for captures)
    c.model.occupancy_plies = 4  # ... this many plies later in the game (or at its end)
    c.model.occupancy_weight = 1.0  # ... its cross-entropy's weight in the loss (mean over squares)
    # Four input planes derived from the observation's attack counts (az/network.py,
    # threat_planes): each side's pieces attacked more often than defended, and attacked
    # by a cheaper kind; what a capture may win, which the value is slow to see.
    c.model.threat_planes = False
    # An auxiliary policy head: the opponent's search policy at the next ply, from the policy's
    # hidden planes turned half a turn into the opponent's frame (KataGo's opponent policy
    # target), so that the trunk learns what the opponent will do next, captures included.
    c.model.reply_head = False
    c.model.reply_weight = 0.15  # ... its cross-entropy's weight in the loss (KataGo's)

    c.replay = ml_collections.ConfigDict()
    c.replay.capacity = 1024 * 32 * 32  # positions; a multiple of num_games * plies_per_iteration
    c.replay.min_positions = 1024 * 32  # positions with a value target before learning starts
    c.replay.search_value_weight = 0.0  # value target = (1-w) * outcome + w * search Q (dlshogi: 1/3)
    # ... w for the plies the playout caps search with the reduced simulations (-1: the same w)
    c.replay.reduced_search_value_weight = -1.0
    # ... q read this many plies later in the same game, once exchanges under way are played out
    # (0: the position's own search; a game that ends sooner gives its outcome)
    c.replay.search_value_plies = 0
    # Playout caps: the policy target's weight at the plies searched with reduced_simulations
    # (0: none, as KataGo's fast searches). Gumbel's improved policy improves on the prior
    # at any simulation count, so those plies can teach the policy too.
    c.replay.reduced_policy_weight = 0.0
    c.replay.truncated_value = "zero"  # target of games cut at max_length: "zero" or "search"
    c.replay.mirror = False  # sample each position mirrored left to right half the time (shogi's files are alike)

    c.learner = ml_collections.ConfigDict()
    c.learner.batch_size = 1024  # positions per step (divisible by the device count)
    c.learner.replay_ratio = 1.0  # positions sampled per position generated (AlphaZero: about 1);
    # sets K, the learner steps per iteration: K = replay_ratio * num_games * plies_per_iteration / batch_size
    c.learner.optimizer = "sgd"  # "sgd" (Nesterov momentum) or "adamw"
    c.learner.learning_rate = 0.02
    c.learner.momentum = 0.9
    c.learner.ema_decay = 0.0  # > 0: an exponential moving average of the weights, per learner step,
    # kept in the state and the snapshots; evaluation and the USI engine play with it
    c.learner.weight_decay = 1e-4
    c.learner.warmup_steps = 500  # learner steps of linear warm-up
    c.learner.schedule = "cosine"  # over the game budget: "cosine" (to 0 at its end), "step" or "constant"
    c.learner.final_rate_fraction = 0.0  # "cosine": its rate at the budget's end, as a fraction of learning_rate
    # (0.2 was behind 0 at the CPU hour: docs/stall_study.md#the-learning-rate)
    c.learner.step_fractions = (0.5, 0.75)  # "step": where the rate drops, as fractions of the game budget
    c.learner.step_decay = 0.1  # "step": factor at each drop
    # Global gradient norm above which the gradient is scaled down (0: never). Measured at
    # paper scale: about 22 at initialisation, falling to about 3 within 20 steps, so 50
    # only stops a blow-up and never binds in normal training.
    c.learner.grad_clip = 50.0
    # The policy loss's softmax: over "all" 2,187 actions (AlphaZero's pseudocode; an illegal
    # action has target 0, so drops, and promotions with them, fade from the policy within
    # minutes) or the "legal" moves only (it promotes, but its :cpu runs were far weaker:
    # docs/stall_study.md, policy loss).
    c.learner.policy_over = "all"
    # KataGo's surprise weighting of the policy loss, the learner's own policy as the prior:
    # each full search's weight (1 - s) + s * KL / mean KL (az/train/learner.py); 0: off.
    c.learner.policy_surprise = 0.0
    # The value's squared error counts this much in the loss beside the policy's
    # cross-entropy (AlphaZero: 1); more of the trunk's gradient then serves the value.
    c.learner.value_weight = 1.0

    # Agreement with the teacher set's held-out positions (az/measure/agreement.py): measured, never
    # trained on; logged as teacher/* and drawn by `report curve`. May change on resume.
    c.teacher = ml_collections.ConfigDict()
    c.teacher.every_iterations = 10  # 0: never
    c.teacher.positions = 0  # the first N held-out positions (0: all 1,200)

    c.checkpoint = ml_collections.ConfigDict()
    c.checkpoint.every_iterations = 50
    c.checkpoint.keep = 3

    c.distributed = False  # call jax.distributed.initialize() (TPU pods, multi-host GPU)
    return c


# Sizes: how big. Each sets only batch, simulation, network, budget and replay fields.


def _paper_size(c: ml_collections.ConfigDict) -> None:
    """The paper's scale: the fields as defined above."""
    del c


def _gpu_size(c: ml_collections.ConfigDict) -> None:
    """The paper's search and network on one GPU, with a budget for about a day.

    One GPU runs more games at once than one chip of a pod: 2048 in parallel to keep it
    busy. Measured on an H100 (README): the whole state plus a learner step 13.6 GiB, a
    paper-size search 4.6 GiB per 1024 games; about 25 GiB in all, for 40-80 GiB GPUs."""
    c.budget_games = 200_000
    c.selfplay.num_games = 2048
    c.replay.capacity = 2048 * 32 * 16  # the paper's million positions
    c.replay.min_positions = 2048 * 32
    c.checkpoint.every_iterations = 25


def _cpu_size(c: ml_collections.ConfigDict) -> None:
    """The largest run still useful on a 2-core CPU in an hour."""
    # Without --budget_minutes; `make train` passes 55, which held 14,648-16,217 games on the
    # study's idle 2-core CPU (docs/stall_study.md, game budget). 7,000: 25-54 min on 2 cores.
    c.budget_games = 7000
    c.env.max_length = 256  # as the evaluation matches; more games end within an hour
    c.search.num_simulations = 16
    c.search.max_num_considered_actions = 8
    c.search.reduced_simulations = 4
    c.selfplay.num_games = 64
    c.selfplay.plies_per_iteration = 16
    c.model.num_blocks = 3
    c.model.channels = 48
    c.model.value_hidden = 64
    c.model.dtype = "float32"
    c.replay.capacity = 64 * 16 * 64
    c.replay.min_positions = 1024
    c.learner.batch_size = 256
    c.learner.warmup_steps = 50
    c.checkpoint.every_iterations = 10


def _gpu_short_size(c: ml_collections.ConfigDict) -> None:
    """Minutes on one GPU at the small recipe's scale (docs/results.md, the GPU recipe).
    Run it with ``train.py --budget_minutes=M``, which sets the game budget from the
    speed measured after compiling; ``cpu_short`` is its proxy on a 2-core CPU.

    The cpu size (where the small recipe was measured: docs/stall_study.md) with only
    what a GPU changes; against the gpu size (the paper's search and network):
    - the cpu size's search, n=16, m=8, 4 simulations where playout caps cut the search:
      Gumbel's sequential halving improves the policy from few simulations, and each ply
      costs about n + 1 network calls, so n=16 with caps plays several times the
      positions of n=64 (docs/stall_study.md, root width; playout caps);
    - 256-ply games, as the cpu size and the evaluation matches;
    - a 6x64 network in place of 10x128: the 10x128 forward is 2.1-2.6x slower
      (docs/benchmarks.md, on an NVIDIA H100), and minutes of self-play hold far fewer
      games than the paper's network is sized for;
    - the cpu size's learner: 256 positions a step at replay ratio 1, so K = 2048 x 16 /
      256 = 128 steps an iteration, as many steps per position as the recipe was measured
      with (docs/stall_study.md, replay ratio); warm-up 50 steps;
    - a replay of 512 rows (the paper's million positions): each iteration takes 32x the
      cpu size's learner steps, so half the cpu size's window in iterations, and still
      twice the ply limit, so every game's positions get their value target;
    - 2048 games in parallel and bfloat16, as the gpu size; checkpoints (the whole
      replay, 4-5 GiB, written synchronously) every 200 iterations, two kept."""
    c.budget_games = 100_000  # without --budget_minutes; five minutes on an H200 held 142,090
    c.env.max_length = 256
    c.search.num_simulations = 16
    c.search.max_num_considered_actions = 8
    c.search.reduced_simulations = 4
    c.selfplay.num_games = 2048
    c.selfplay.plies_per_iteration = 16
    c.model.num_blocks = 6
    c.model.channels = 64
    c.model.value_hidden = 64
    c.replay.capacity = 2048 * 16 * 32
    c.replay.min_positions = 2048 * 16
    c.learner.batch_size = 256
    c.learner.warmup_steps = 50
    c.checkpoint.every_iterations = 200
    c.checkpoint.keep = 2


def _cpu_short_size(c: ml_collections.ConfigDict) -> None:
    """``gpu_short``'s proxy on a 2-core CPU, about 20 minutes with ``--budget_minutes=20``:
    the same search, games, replay window (512 rows), learner (256 positions a step at
    replay ratio 1, so as many steps per position) and warm-up, with 64 games in parallel
    (K = 4) and the cpu size's 3x48 float32 network. Measured: docs/results.md, the GPU
    recipe."""
    _gpu_short_size(c)
    c.budget_games = 1000  # without --budget_minutes: about what 20 minutes held
    c.selfplay.num_games = 64
    c.model.num_blocks = 3
    c.model.channels = 48
    c.model.dtype = "float32"
    c.replay.capacity = 64 * 16 * 32
    c.replay.min_positions = 64 * 16
    c.checkpoint.every_iterations = 10
    c.checkpoint.keep = 3


def _smoke_size(c: ml_collections.ConfigDict) -> None:
    """A few iterations on a 2-core CPU in about two minutes."""
    c.budget_games = 64
    c.env.max_length = 48  # games end (truncated) within a few iterations, so learning starts
    c.search.num_simulations = 4
    c.search.max_num_considered_actions = 4
    c.search.reduced_simulations = 2
    c.selfplay.num_games = 8
    c.selfplay.plies_per_iteration = 8
    c.model.num_blocks = 1
    c.model.channels = 16
    c.model.value_hidden = 16
    c.model.dtype = "float32"
    c.replay.capacity = 8 * 8 * 8
    c.replay.min_positions = 1
    c.learner.batch_size = 32
    c.learner.warmup_steps = 2
    c.teacher.every_iterations = 2
    c.teacher.positions = 64
    c.checkpoint.every_iterations = 16  # a save costs about two smoke iterations


# Recipes: which algorithm. Each sets only search, self-play, loss and optimizer switches.


def _paper_recipe(c: ml_collections.ConfigDict) -> None:
    """The paper's algorithm: the fields as defined above."""
    del c


def _small_recipe(c: ml_collections.ConfigDict) -> None:
    """More strength per hour of a small run: each switch measured at equal wall time
    on the cpu size (docs/stall_study.md)."""
    # Mate in one at the root, playout caps, resignation and a weight average: together 2.2x
    # the games and 39% more useful positions/s, no worse in any match (docs/stall_study.md,
    # playout caps; mate checks).
    c.search.mate_in_one = True
    c.selfplay.full_search_fraction = 0.25
    c.selfplay.resign = True
    c.learner.ema_decay = 0.99
    # Nesterov SGD beat AdamW at 1e-3 at each of four seeds (docs/stall_study.md, optimizer).
    c.learner.optimizer = "sgd"
    c.learner.learning_rate = 0.02
    # Half of each value target from the search's Q: the value ranks the teacher's positions
    # far better than from the outcome alone (docs/stall_study.md, value targets).
    c.replay.search_value_weight = 0.5
    # The value also predicts the material balance 8 plies on: the search's teacher
    # agreement and its score against greedy rose (docs/stall_study.md, material head).
    c.model.material_head = True
    # Q weighed ten times mctx's default: the policy learns the value's choices
    # (docs/stall_study.md, value scale (c_scale)).
    c.search.value_scale = 1.0
    # The root always considers its two best drops, which the prior ranks below every
    # board move (docs/stall_study.md, reserved drops).
    c.search.considered_drops = 2
    # ... and its two best captures: a third of the captures that win a piece were never
    # searched (docs/stall_study.md, reserved captures).
    c.search.considered_captures = 2


def _exercise_recipe(c: ml_collections.ConfigDict) -> None:
    """The paper's algorithm with self-play switches on, so that a smoke run exercises
    them (playout caps, which compile a second search, only in a slow test:
    tests/test_trainer.py)."""
    c.search.mate_in_one = True
    c.selfplay.resign = True
    c.learner.ema_decay = 0.9  # a smoke run's few learner steps still move the average


SIZES = {"smoke": _smoke_size, "cpu": _cpu_size, "cpu_short": _cpu_short_size, "gpu": _gpu_size,
         "gpu_short": _gpu_short_size, "paper": _paper_size}
RECIPES = {"paper": _paper_recipe, "small": _small_recipe, "exercise": _exercise_recipe}
