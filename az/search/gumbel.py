"""Gumbel MuZero on a compact tree: K children per node instead of all A actions.

The loop of ``az.search``'s Gumbel search. It knows no game: it takes the root's prior
logits [B, A], value [B], embedding [B, ...] and ``invalid_actions`` [B, A], and a
``recurrent_fn`` (mctx's contract) that steps an embedding and evaluates the child.

Gumbel MuZero visits few children of any node, in an order known in advance:
- the root only visits its ``max_num_considered_actions`` (m) best actions by
  gumbel + logit (sequential halving never leaves them);
- an interior node scores an unvisited child by its prior alone (every unvisited
  child shares the completed Q), so the children it visits are a prefix of its
  actions sorted by prior.
A node visited v times has at most v - 1 distinct children. A root child gets every
simulation when the root has one legal move, so v <= n and K = min(A, max(m, n - 1))
children per node hold every tree this search can build: [B, N, K] arrays where
mctx's tree has [B, N, A] (n = 64, m = 16: K = 63 instead of 2187).

What an edge knows (visits, value, reward, discount) lives on the child node it leads
to: an edge keeps its action, its prior probability and the child's index. The prior
mass outside a node's K slots is kept per node, for the normaliser of the improved
policy. The root's sequential halving is one [B, m] selection per simulation, outside
the descent; the descent is one batched loop over depth that selects among K slots
per level; the backward pass is one associative scan over the path and one scatter,
with no loop.

The search is mctx's (``mctx.gumbel_muzero_policy``, and
``az.search.reference.full_tree_gumbel_muzero`` on the full tree) with the same random
keys: tests/test_search_loops.py compares action, visits and policy. Sums over the
visited children run over K slots instead of A actions, and the improved policy's
normaliser is summed per slot, so values agree to float rounding; a different choice
needs two scores within rounding of each other.

Shapes: B roots, A actions, N = num_simulations + 1 nodes (node i is expanded by
simulation i; node 0 is the root), K slots per node, M = min(m, A) root slots.
"""

from typing import Any, NamedTuple, Sequence

import jax
import jax.numpy as jnp
import mctx
from jax import Array

from az.search.halving import considered_visits_table

VALUE_SCALE = 0.1  # c_scale of the completed Q: mctx.qtransform_completed_by_mix_value's default
UNVISITED = -1  # children_index of a slot whose child is not expanded
NO_PARENT = -1
MAXVISIT_INIT, RESCALE_EPSILON = 50.0, 1e-8  # mctx.qtransform_completed_by_mix_value's defaults


class CompactTree(NamedTuple):
    """A batch of Gumbel search trees. Node fields [B, N], slot fields [B, N, K]."""

    node_visits: Array  # [B, N] int32
    raw_values: Array  # [B, N], the model's value of the node
    node_values: Array  # [B, N], the mean backed-up value
    parents: Array  # [B, N] int32, NO_PARENT at the root and at unused nodes
    rewards: Array  # [B, N], reward of the transition into the node (the parent's mover's view)
    discounts: Array  # [B, N], discount of that transition
    other_prior: Array  # [B, N], prior probability of the actions outside the node's slots
    children_index: Array  # [B, N, K] int16 (int32 past 32,767 nodes), the child of each slot or UNVISITED
    children_actions: Array  # [B, N, K] int16, the action of each slot
    children_priors: Array  # [B, N, K], softmax of the node's prior logits over A, at the slot's action
    root_scores: Array  # [B, M], gumbel + logit of each root slot (the sequential-halving score less Q)
    root_valid: Array  # [B, M] bool, the root slot holds a valid action
    root_invalid_actions: Array  # [B, A] bool
    embeddings: Any  # [B, N, ...]

    @property
    def num_slots(self) -> int:
        return self.children_index.shape[-1]


def num_slots(num_actions: int, num_simulations: int, max_num_considered_actions: int) -> int:
    """K: the most distinct children any node of a Gumbel search can have."""
    return max(1, min(num_actions, max(max_num_considered_actions, num_simulations - 1)))


def mask_invalid(logits: Array, invalid_actions: Array) -> Array:
    """[B, A]: shifted to a maximum of 0, invalid actions the lowest finite logit (a
    root with no valid action still has a softmax)."""
    logits = logits - jnp.max(logits, axis=-1, keepdims=True)
    return jnp.where(invalid_actions, jnp.finfo(logits.dtype).min, logits)


def gumbel_muzero(
    params: Any,
    rng_key: Array,
    root: mctx.RootFnOutput,
    recurrent_fn: mctx.RecurrentFn,
    *,
    num_simulations: int,
    invalid_actions: Array,
    max_num_considered_actions: int = 16,
    gumbel_scale: float = 1.0,
    value_scale: float = VALUE_SCALE,
    reserved: Sequence[tuple[Array, int]] = (),
    first_visits: int = 1,
) -> mctx.PolicyOutput:
    """Gumbel MuZero: ``mctx.gumbel_muzero_policy`` on a compact tree.

    root: prior logits [B, A], value [B], embedding [B, ...]; ``invalid_actions`` [B, A].
    ``value_scale``: c_scale of the completed Q's transform, sigma(q) = (50 + max N) c_scale q
    (``mctx.qtransform_completed_by_mix_value``'s ``value_scale``).
    ``reserved``: classes of actions, each (mask [A] or [B, A] bool, count): the count best
    valid actions of each class by gumbel + logit are among the root's considered actions
    however low their prior (shogi's drops, which the prior learns to rank below every
    board move; captures); sequential halving then judges them by gumbel + logit + Q as
    any other. (): mctx's search.
    ``first_visits``: the visits each considered action gets before sequential halving
    drops any (``halving.considered_visits``; 1: mctx's schedule).
    Returns action [B] int32, action_weights [B, A] (the improved policy) and the
    ``CompactTree`` as ``search_tree``.
    """
    if num_simulations < 1:
        raise ValueError(f"num_simulations must be >= 1, got {num_simulations}")
    prior_logits = mask_invalid(root.prior_logits, invalid_actions)
    batch, num_actions = prior_logits.shape
    rows = jnp.arange(batch)
    rng_key, gumbel_key = jax.random.split(rng_key)
    gumbel = gumbel_scale * jax.random.gumbel(gumbel_key, prior_logits.shape, prior_logits.dtype)
    k = num_slots(num_actions, num_simulations, max_num_considered_actions)
    lifts = [_reserved_lift(gumbel + prior_logits, invalid_actions, mask, count) for mask, count in reserved if count]
    lift = sum(lifts) if lifts else None
    tree = _new_tree(root.replace(prior_logits=prior_logits), gumbel, invalid_actions, num_simulations, k,
                     min(max_num_considered_actions, num_actions), lift)
    table = jnp.asarray(considered_visits_table(max_num_considered_actions, num_simulations, first_visits))
    num_valid = jnp.sum(~invalid_actions, axis=-1)
    considered = table[jnp.minimum(max_num_considered_actions, num_valid)]  # [B, n]

    def simulation(index, carry):
        rng_key, tree = carry
        rng_key, _, expand_key = jax.random.split(rng_key, 3)  # the full tree's split: descent, expansion
        slot = _select_root(tree, considered[:, index], value_scale)
        path, depth, parent, slot = _descend(tree, slot, max_depth=num_simulations, value_scale=value_scale)
        child = tree.children_index[rows, parent, slot].astype(jnp.int32)
        child = jnp.where(child == UNVISITED, index + 1, child)  # a new node, or a revisit at max depth
        tree = _expand(params, expand_key, tree, recurrent_fn, parent, slot, child)
        return rng_key, _backward(tree, path.at[rows, depth].set(child), depth)

    tree = jax.lax.fori_loop(0, num_simulations, simulation, (rng_key, tree))[1]

    # The final choice of sequential halving: among the most visited actions, the best
    # gumbel + logit + completed Q.
    summary = summarize(tree)
    completed_q = _completed_q_over_actions(tree, value_scale)
    most_visited = summary.visit_counts == jnp.max(summary.visit_counts, axis=-1, keepdims=True)
    score = jnp.maximum(-1e9, gumbel + prior_logits + completed_q) + jnp.where(most_visited, 0.0, -jnp.inf)
    action = jnp.argmax(jnp.where(invalid_actions, -jnp.inf, score), axis=-1).astype(jnp.int32)
    weights = jax.nn.softmax(mask_invalid(prior_logits + completed_q, invalid_actions))
    return mctx.PolicyOutput(action=action, action_weights=weights, search_tree=tree)


class RootSummary(NamedTuple):
    """What ``mctx.Tree.summary`` says of the root."""

    visit_counts: Array  # [B, A] int32
    qvalues: Array  # [B, A], 0 where unvisited
    value: Array  # [B], the root's backed-up value


def summarize(tree: CompactTree) -> RootSummary:
    """The root's visits and Q over all A actions, and its value."""
    visits, q = _children(tree, jnp.zeros(tree.node_visits.shape[:1], jnp.int32))
    actions = tree.children_actions[:, 0]
    visit_counts = _scatter_slots(actions, visits, tree.root_invalid_actions.shape[-1])
    return RootSummary(
        visit_counts=visit_counts,
        value=tree.node_values[:, 0],
        qvalues=_scatter_slots(actions, q, tree.root_invalid_actions.shape[-1]),
    )


def principal_variation(tree: CompactTree, action: Array, length: int) -> Array:
    """[B, length]: ``action``, then the most visited child at each node (the lowest
    action among equals, as an argmax over actions); -1 once a node is unexpanded or
    its game has ended (the transition into it has discount 0, the recurrent fn's
    mark of a finished game)."""
    rows = jnp.arange(action.shape[0])
    num_actions = tree.root_invalid_actions.shape[-1]
    at_root = tree.children_actions[:, 0] == action[:, None]
    child = jnp.max(jnp.where(at_root, tree.children_index[:, 0], UNVISITED), axis=-1).astype(jnp.int32)
    actions = [action]
    for _ in range(length - 1):
        ok = (child >= 0) & (tree.discounts[rows, jnp.maximum(child, 0)] != 0)
        node = jnp.maximum(child, 0)
        visits, _ = _children(tree, node)
        top = visits == jnp.max(visits, axis=-1, keepdims=True)
        best = jnp.argmin(jnp.where(top, tree.children_actions[rows, node], num_actions), axis=-1)
        ok &= visits[rows, best] > 0
        actions.append(jnp.where(ok, tree.children_actions[rows, node, best], -1).astype(action.dtype))
        child = jnp.where(ok, tree.children_index[rows, node, best], -1).astype(jnp.int32)
    return jnp.stack(actions, axis=1)


def _scatter_slots(actions: Array, values: Array, num_actions: int) -> Array:
    """[B, K] values at [B, K] distinct actions -> [B, A], 0 elsewhere."""
    rows = jnp.arange(actions.shape[0])[:, None]
    return jnp.zeros((actions.shape[0], num_actions), values.dtype).at[rows, actions].set(values, mode="drop")


def _children(tree: CompactTree, node: Array) -> tuple[Array, Array]:
    """Visits [B, K] int32 and Q [B, K] (reward + discount x value; 0 where
    unvisited) of the slots of ``node`` [B]."""
    rows = jnp.arange(node.shape[0])
    index = tree.children_index[rows, node].astype(jnp.int32)
    expanded = index != UNVISITED
    child = (rows[:, None], jnp.maximum(index, 0))
    visits = jnp.where(expanded, tree.node_visits[child], 0)
    q = jnp.where(expanded, tree.rewards[child] + tree.discounts[child] * tree.node_values[child], 0.0)
    return visits, q


class _CompletedQ(NamedTuple):
    visits: Array  # [B, K] int32
    priors: Array  # [B, K]
    completed_q: Array  # [B, K], transformed
    unvisited_q: Array  # [B], the transformed completed Q of every unvisited action


def _completed_q(tree: CompactTree, node: Array, value_scale: float) -> _CompletedQ:
    """``mctx.qtransform_completed_by_mix_value`` at ``node`` [B], over its K slots
    (every action outside them is unvisited)."""
    rows = jnp.arange(node.shape[0])
    visits, q = _children(tree, node)
    priors = tree.children_priors[rows, node]
    visited = visits > 0
    total = jnp.sum(visits, axis=-1)
    probs = jnp.maximum(jnp.finfo(priors.dtype).tiny, priors)
    sum_probs = jnp.sum(jnp.where(visited, probs, 0.0), axis=-1, keepdims=True)
    weighted_q = jnp.sum(jnp.where(visited, probs * q / jnp.where(visited, sum_probs, 1.0), 0.0), axis=-1)
    mixed = (tree.raw_values[rows, node] + total * weighted_q) / (total + 1)
    completed = jnp.where(visited, q, mixed[:, None])
    low, high = jnp.min(completed, axis=-1), jnp.max(completed, axis=-1)
    if tree.num_slots < tree.root_invalid_actions.shape[-1]:  # some action is outside the slots, unvisited
        low, high = jnp.minimum(low, mixed), jnp.maximum(high, mixed)
    spread = jnp.maximum(high - low, RESCALE_EPSILON)[:, None]
    scale = ((MAXVISIT_INIT + jnp.max(visits, axis=-1)) * value_scale)[:, None]
    rescaled = (jnp.concatenate([completed, mixed[:, None]], axis=-1) - low[:, None]) / spread
    transformed = scale * rescaled
    return _CompletedQ(visits, priors, transformed[:, :-1], transformed[:, -1])


def _completed_q_over_actions(tree: CompactTree, value_scale: float) -> Array:
    """The root's transformed completed Q over all actions [B, A]."""
    root = _completed_q(tree, jnp.zeros(tree.node_visits.shape[:1], jnp.int32), value_scale)
    batch, num_actions = tree.root_invalid_actions.shape
    rows = jnp.arange(batch)[:, None]
    full = jnp.broadcast_to(root.unvisited_q[:, None], (batch, num_actions))
    return full.at[rows, tree.children_actions[:, 0]].set(root.completed_q, mode="drop")


def _select_root(tree: CompactTree, considered_visit: Array, value_scale: float) -> Array:
    """Sequential halving at the root: among the slots whose visits equal
    ``considered_visit`` [B], the best gumbel + logit + completed Q. Returns the slot [B]."""
    root_slots = tree.root_scores.shape[-1]
    root = _completed_q(tree, jnp.zeros(considered_visit.shape, jnp.int32), value_scale)
    visits = root.visits[:, :root_slots]
    score = jnp.maximum(-1e9, tree.root_scores + root.completed_q[:, :root_slots])
    score += jnp.where(visits == considered_visit[:, None], 0.0, -jnp.inf)
    return jnp.argmax(jnp.where(tree.root_valid, score, -jnp.inf), axis=-1).astype(jnp.int32)


def _select_interior(tree: CompactTree, node: Array, value_scale: float) -> Array:
    """mctx's Gumbel interior selection at ``node`` [B]: the slot [B] whose improved
    probability most exceeds its share of the visits. The improved policy is
    softmax(logits + completed Q) over A = prior x exp(completed Q), normalised over
    the slots and the prior mass outside them (whose Q is the unvisited one)."""
    rows = jnp.arange(node.shape[0])
    c = _completed_q(tree, node, value_scale)
    top = jnp.maximum(jnp.max(c.completed_q, axis=-1), c.unvisited_q)[:, None]
    weights = c.priors * jnp.exp(c.completed_q - top)
    outside = tree.other_prior[rows, node] * jnp.exp(c.unvisited_q - top[:, 0])
    probs = weights / (jnp.sum(weights, axis=-1) + outside)[:, None]
    share = c.visits / (1 + jnp.sum(c.visits, axis=-1, keepdims=True))
    return jnp.argmax(probs - share, axis=-1).astype(jnp.int32)


class _Descent(NamedTuple):
    """All B walks, one level per loop step."""

    path: Array  # [B, D] int32, node at each depth (0: the root)
    depth: Array  # [B] int32, depth of the child that ``slot`` of ``parent`` leads to
    parent: Array  # [B] int32
    slot: Array  # [B] int32
    going_on: Array  # [B] bool


def _descend(tree: CompactTree, root_slot: Array, *, max_depth: int,
             value_scale: float) -> tuple[Array, Array, Array, Array]:
    """From each root's chosen slot [B] down to an unexpanded slot (or ``max_depth``).
    Returns the path [B, max_depth + 1] (root first, the leaf's column not yet written),
    the leaf's depth [B] and the (parent, slot) [B] that leads to it."""
    batch = root_slot.shape[0]
    rows = jnp.arange(batch)

    def going_on(walk: _Descent) -> Array:
        return (tree.children_index[rows, walk.parent, walk.slot] != UNVISITED) & (walk.depth < max_depth)

    def level(walk: _Descent) -> _Descent:
        node = jnp.where(walk.going_on, tree.children_index[rows, walk.parent, walk.slot].astype(jnp.int32),
                         walk.parent)
        slot = jnp.where(walk.going_on, _select_interior(tree, node, value_scale), walk.slot)
        path = walk.path.at[rows, jnp.where(walk.going_on, walk.depth, max_depth + 1)].set(node, mode="drop")
        depth = walk.depth + walk.going_on
        walk = _Descent(path, depth, node, slot, walk.going_on)
        return walk._replace(going_on=walk.going_on & going_on(walk))

    start = _Descent(
        path=jnp.zeros((batch, max_depth + 1), jnp.int32),  # column 0 is the root, node 0
        depth=jnp.ones((batch,), jnp.int32),
        parent=jnp.zeros((batch,), jnp.int32),
        slot=root_slot,
        going_on=jnp.ones((batch,), jnp.bool_),
    )
    start = start._replace(going_on=going_on(start))
    end = jax.lax.while_loop(lambda walk: jnp.any(walk.going_on), level, start)
    return end.path, end.depth, end.parent, end.slot


def _write_node(tree: CompactTree, node: Array, actions: Array, prior_logits: Array, value: Array,
                embedding: Any) -> CompactTree:
    """Node ``node`` [B] gets its value [B], a visit, its embedding and its slots'
    ``actions`` [B, K] (A where a slot is unused) with their priors from
    ``prior_logits`` [B, A]."""
    rows = jnp.arange(node.shape[0])
    priors = jax.nn.softmax(prior_logits, axis=-1)
    slot_priors = jnp.take_along_axis(priors, actions, axis=-1, mode="fill", fill_value=0)
    other = jnp.maximum(jnp.sum(priors, axis=-1) - jnp.sum(slot_priors, axis=-1), 0.0)
    return tree._replace(
        raw_values=tree.raw_values.at[rows, node].set(value),
        node_values=tree.node_values.at[rows, node].set(value),
        node_visits=tree.node_visits.at[rows, node].add(1),
        other_prior=tree.other_prior.at[rows, node].set(other),
        children_actions=tree.children_actions.at[rows, node].set(actions.astype(tree.children_actions.dtype)),
        children_priors=tree.children_priors.at[rows, node].set(slot_priors),
        embeddings=jax.tree.map(lambda all_, one: all_.at[rows, node].set(one), tree.embeddings, embedding),
    )


def _best_by_prior(prior_logits: Array, k: int) -> Array:
    """An interior node's slots: its K actions of highest prior [B, K] int32 (the lowest
    action among equals, the order in which Gumbel's interior selection visits them)."""
    return jax.lax.top_k(prior_logits, k)[1].astype(jnp.int32)


def _expand(params, rng_key, tree: CompactTree, recurrent_fn, parent: Array, slot: Array, child: Array) -> CompactTree:
    """Evaluate ``slot`` [B] of ``parent`` [B] with the model and store it as node ``child`` [B]."""
    rows = jnp.arange(parent.shape[0])
    embedding = jax.tree.map(lambda x: x[rows, parent], tree.embeddings)
    action = tree.children_actions[rows, parent, slot].astype(jnp.int32)
    step, embedding = recurrent_fn(params, rng_key, action, embedding)
    actions = _best_by_prior(step.prior_logits, tree.num_slots)
    tree = _write_node(tree, child, actions, step.prior_logits, step.value, embedding)
    return tree._replace(
        children_index=tree.children_index.at[rows, parent, slot].set(child.astype(tree.children_index.dtype)),
        parents=tree.parents.at[rows, child].set(parent),
        rewards=tree.rewards.at[rows, child].set(step.reward),
        discounts=tree.discounts.at[rows, child].set(step.discount),
    )


def _backward(tree: CompactTree, path: Array, depth: Array) -> CompactTree:
    """Back the leaf's value up its path ([B, D] nodes, the leaf at column ``depth`` [B])
    in one step: the value each node receives is an affine function of the leaf's
    (reward + discount x value, composed down the path), found by an associative scan;
    then each node on the path gets a visit and its new mean in one scatter."""
    batch, width = path.shape
    rows = jnp.arange(batch)[:, None]
    columns = jnp.arange(width)
    on_path = columns[None, :] < depth[:, None]  # the nodes above the leaf
    below = jnp.concatenate([path[:, 1:], path[:, :1]], axis=1)  # the node each one's value comes from
    # f_j(g) = reward + discount * g for the edge below node j; identity past the leaf.
    offset = jnp.where(on_path, tree.rewards[rows, below], 0.0)
    slope = jnp.where(on_path, tree.discounts[rows, below], 1.0)

    def compose(deep, shallow):  # shallow(deep(g)); a reversed scan passes the deeper part first
        return shallow[0] + shallow[1] * deep[0], shallow[1] * deep[1]

    offset, slope = jax.lax.associative_scan(compose, (offset, slope), reverse=True, axis=1)
    leaf_value = tree.node_values[rows[:, 0], path[rows[:, 0], depth]]
    value_up = offset + slope * leaf_value[:, None]  # [B, D]: what node j's mean takes in
    visits = tree.node_visits[rows, path]
    mean = (tree.node_values[rows, path] * visits + value_up) / (visits + 1.0)
    write = jnp.where(on_path, path, tree.node_visits.shape[1])  # past the end: dropped
    return tree._replace(
        node_values=tree.node_values.at[rows, write].set(mean, mode="drop"),
        node_visits=tree.node_visits.at[rows, write].set(visits + 1, mode="drop"),
    )


RESERVED_LIFT = 1e6  # above any gumbel + logit: lifted actions are picked first


def _reserved_lift(scores: Array, invalid_actions: Array, reserved_actions: Array, num_reserved: int) -> Array:
    """[B, A]: RESERVED_LIFT on the ``num_reserved`` best valid actions of each root among
    ``reserved_actions`` ([A] or [B, A] bool) by ``scores`` (gumbel + logit), 0 elsewhere.
    A root with fewer valid reserved actions lifts those it has."""
    if reserved_actions is None or not 0 < num_reserved <= reserved_actions.shape[-1]:
        raise ValueError(f"num_reserved {num_reserved} needs reserved_actions [A] or [B, A] with at least that many actions")
    eligible = jnp.where(jnp.asarray(reserved_actions) & ~invalid_actions, jnp.maximum(-1e9, scores), -jnp.inf)
    best_scores, best = jax.lax.top_k(eligible, num_reserved)
    rows = jnp.arange(scores.shape[0])[:, None]
    return jnp.zeros_like(scores).at[rows, best].set(jnp.where(best_scores > -jnp.inf, RESERVED_LIFT, 0.0))


def _new_tree(root: mctx.RootFnOutput, gumbel: Array, invalid_actions: Array, num_simulations: int, k: int,
              root_slots: int, lift: Array | None = None) -> CompactTree:
    """An empty tree with the root written in; the root's slots are its ``root_slots``
    best valid actions by gumbel + logit (mctx's first sequential-halving scores), those
    with ``lift`` [B, A] (``_reserved_lift``) first. The slots keep gumbel + logit."""
    batch, num_actions = root.prior_logits.shape
    nodes = (batch, num_simulations + 1)
    dtype = root.value.dtype
    scores = jnp.where(invalid_actions, -jnp.inf, jnp.maximum(-1e9, gumbel + root.prior_logits))
    _, root_actions = jax.lax.top_k(scores if lift is None else scores + lift, root_slots)
    root_valid = jnp.take_along_axis(scores, root_actions, axis=-1) > -jnp.inf
    tree = CompactTree(
        node_visits=jnp.zeros(nodes, jnp.int32),
        raw_values=jnp.zeros(nodes, dtype),
        node_values=jnp.zeros(nodes, dtype),
        parents=jnp.full(nodes, NO_PARENT, jnp.int32),
        rewards=jnp.zeros(nodes, dtype),
        discounts=jnp.zeros(nodes, dtype),
        other_prior=jnp.zeros(nodes, root.prior_logits.dtype),
        children_index=jnp.full(nodes + (k,), UNVISITED, jnp.int16 if nodes[1] < 2**15 else jnp.int32),
        children_actions=jnp.zeros(nodes + (k,), jnp.int16),  # A = 2187
        children_priors=jnp.zeros(nodes + (k,), root.prior_logits.dtype),
        root_scores=jnp.take_along_axis(gumbel + root.prior_logits, root_actions, axis=-1),
        root_valid=root_valid,
        root_invalid_actions=invalid_actions,
        embeddings=jax.tree.map(lambda x: jnp.zeros(nodes + x.shape[1:], x.dtype), root.embedding),
    )
    # The root's slots are its considered actions; the unused ones point past the actions.
    actions = jnp.pad(root_actions.astype(jnp.int32), ((0, 0), (0, k - root_slots)), constant_values=num_actions)
    return _write_node(tree, jnp.zeros((batch,), jnp.int32), actions, root.prior_logits, root.value, root.embedding)
