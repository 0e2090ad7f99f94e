"""SpecExec: a deterministic best-first draft tree, verified by sampling from the target itself.

One pass, as the host issues it: the draft search (a fixed number of forwards, no host reads), the target's
forward over the tree, the verification walk, and then the pass's one read: the walk together with what the
stats, the draft-cache commit and adaptive depth need, in one tensor. The KV commits that follow use index
tensors on the device. Nothing waits for the whole device: an offloaded target's prefetch of the next
pass's first layers, issued at the end of its forward on the copy stream, runs on under the next search.

With the overlap on (`TreeSettings.overlap`), the host, once it has issued the target's pass and the walk,
issues a shadow search on the draft's own stream (core.decoding.draft_lane): the search the tree was cut from
grows on past the budget, best first, while the target's layers stream and run; it writes only draft-cache
rows past the tree's and its own node tables, never what the target reads. Then the emitted tokens are
walked down what it grew, on the device, and the count of grown nodes under the emitted token comes back with
the pass's one read (which so waits for the shadow as well); after the read those nodes are kept
(core.decoding.subtree_keep), as a seed of exactly their number, and the next search starts from it. Only
the draft's work moves: the emitted tokens are the target's samples, as without it. On a CPU the shadow runs
after the target, in sequence, with the same code.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import torch

from core.decoding.autotune.depth import DepthPolicy
from core.modeling.causal_lm import CausalLM
from core.decoding.decode_state import DecodeState
from core.decoding.device_io import to_device
from core.decoding.draft_lane import DraftLane
from core.decoding.draft_search import DEFAULT_MAX_FORWARDS, DraftTree, SearchConfig, SearchSeed, build_draft_tree
from core.decoding.subtree_keep import KeptNodes, find_kept, keep_subtree
from core.planning.graph_plan import overlap_pool, pool_forwards, search_width
from core.decoding.methods.step import OutputControls, PassStats, Step, TokenLogprob
from core.decoding.settings import SamplingParams, TreeSettings
from core.decoding.methods.tree_forward import commit_draft_path, commit_target_path, score_tree
from core.decoding.sampling import context_mask
from core.decoding.timing import ForwardTimer, PassClock
from core.decoding.verification import Verdict, Walk, read_verdict, walk_tree


def shadow_cap(budget: int, width: int) -> int:
    """The most shadow forwards a pass makes: enough to expand the whole pool once (core.planning.graph_plan
    overlap_pool), at most the search's cap."""
    return min(DEFAULT_MAX_FORWARDS, pool_forwards(budget, width))


def shadow_forwards(tree: "TreeSettings", width: int, last: tuple[float, float] | None, forwards: int) -> int:
    """Forwards of this pass's shadow search: TreeSettings.shadow_forwards, or as many as the last target pass
    took at the last search's seconds per forward (`last`: those two; None before the first pass: `forwards`)."""
    cap = shadow_cap(tree.budget, width)
    if tree.shadow_forwards is not None:
        return min(tree.shadow_forwards, cap)
    if last is None or last[1] <= 0:
        return min(forwards, cap)
    return min(cap, int(last[0] / last[1]))


def draft_temperature(params: SamplingParams) -> float:
    """Draft logits use the target's temperature; greedy targets rank the tree at temperature 1."""
    return params.temperature if params.temperature > 0 else 1.0


@dataclass(frozen=True)
class _PassRead:
    """What the pass's one host read brings back (see `_read_pass`)."""

    verdict: Verdict
    path_births: list[int]  # birth forward of each accepted node (root excluded)
    expanded: int  # leading path nodes (root included) whose KV the draft cache holds
    tree_size: int  # real draft nodes (root and padding excluded)
    tree_depth: int
    logprobs: list[TokenLogprob] | None  # per emitted token, when asked for
    seed_nodes: int  # nodes of the kept subtree the search started from (0: it started from the root alone)
    kept: int  # grown nodes under the emitted token, the next search's seed (0 without the overlap)


def _read_pass(tree: DraftTree, walk: Walk, kept: KeptNodes | None) -> _PassRead:
    """The pass's one host read: the walk (path, tokens: long [S]) with the births and draft-cache rows of
    its nodes, the tree's real size and depth, the count of grown nodes kept for the next search, and the
    walk's log-probabilities when it has them (their float64 bits ride along as int64), in one tensor."""
    path, tokens = walk.path, walk.tokens
    steps = path.shape[0]
    nodes = path.clamp_min(0)
    zero = torch.zeros(1, dtype=torch.long, device=path.device)
    seeded = tree.seed_nodes if tree.seed_nodes is not None else zero
    parts = [
        path,
        tokens,
        tree.births[nodes],
        (tree.cache_rows[nodes] >= 0).long(),
        tree.valid.sum().reshape(1),
        tree.depths.max().reshape(1),
        seeded.reshape(1),
        kept.count if kept is not None else zero,
    ]
    if walk.logprobs is not None:
        parts += [
            walk.logprobs.view(torch.int64),
            walk.top_values.reshape(-1).view(torch.int64),
            walk.top_ids.reshape(-1),
        ]
    values = torch.cat(parts).tolist()  # host sync, deliberate: the pass's one read
    verdict = read_verdict(values[:steps], values[steps : 2 * steps])
    accepted = len(verdict.path)
    expanded_flags = values[3 * steps : 3 * steps + accepted]
    expanded = next((i for i, flag in enumerate(expanded_flags) if not flag), accepted)
    logprobs = None
    if walk.logprobs is not None:
        logprobs = _logprobs(values[4 * steps + 4 :], steps, walk.top_ids.shape[1], len(verdict.emitted))
    return _PassRead(
        verdict,
        values[2 * steps + 1 : 2 * steps + accepted],
        expanded,
        values[4 * steps] - 1,
        values[4 * steps + 1],
        logprobs,
        values[4 * steps + 2],
        values[4 * steps + 3],
    )


def _logprobs(values: list[int], steps: int, top: int, emitted: int) -> list[TokenLogprob]:
    """The walk's log-probabilities from their int64 bit patterns: [S] chosen, [S * top] values, [S * top] ids."""
    floats = torch.tensor(values[: steps * (1 + top)], dtype=torch.int64).view(torch.float64).tolist()
    ids = values[steps * (1 + top) :]
    return [
        TokenLogprob(
            floats[i], tuple(zip(ids[i * top : (i + 1) * top], floats[steps + i * top : steps + (i + 1) * top]))
        )
        for i in range(emitted)
    ]


def specexec_steps(
    state: DecodeState,
    target: CausalLM,
    draft: CausalLM,
    params: SamplingParams,
    tree: TreeSettings,
    max_new_tokens: int,
    depth: DepthPolicy | None = None,
    controls: OutputControls | None = None,
) -> Iterator[Step]:
    """One Step per target pass, never more than max_new_tokens tokens in all. `depth` chooses the draft
    forwards of each pass when tree.adaptive_depth is on (None: the search's cap). `controls`: a grammar masks
    the draft's proposals and every tree node's target row (core.decoding.constraints: a read of the tree and one per
    draft forward more), and log-probabilities ride along in the pass's one read."""
    controls = controls or OutputControls()
    grammar = controls.grammar
    emitted = 0
    width = search_width(tree.budget, tree.expand)
    overlap = tree.overlap and grammar is None  # a grammar's masks read the tree on the host: no shadow then
    lane = DraftLane(draft.device) if overlap else None
    pool = overlap_pool(tree.budget) if overlap else tree.budget
    seed: SearchSeed | None = None
    last: tuple[float, float] | None = None  # the last pass's target seconds and seconds per draft forward
    while emitted < max_new_tokens:
        remaining = max_new_tokens - emitted
        search = SearchConfig(
            budget=tree.budget,
            max_depth=min(tree.max_depth, remaining - 1),
            expand=tree.expand,
            temperature=draft_temperature(params),
            top_p=params.top_p if tree.draft_top_p and not params.greedy else None,
            child_mask=grammar.child_allowed if grammar is not None and controls.mask_draft else None,
        )
        forwards = DEFAULT_MAX_FORWARDS
        if depth is not None and tree.adaptive_depth:
            forwards = depth.forwards(
                tree.budget, width, DEFAULT_MAX_FORWARDS, len(state.tokens) - state.draft_cache.length
            )
        shadow_planned = shadow_forwards(tree, width, last, forwards) if overlap else 0
        clock = PassClock(target.device)
        draft_tree = build_draft_tree(
            draft,
            state.draft_cache,
            state.prefill_pending(draft, state.draft_cache),
            search,
            forwards,
            seed,
            pool,
            shadow_planned,
        )
        if lane is not None:
            lane.mark()  # the shadow starts after the search, not after the target's pass issued next
        clock.mark()

        pending = state.prefill_pending(target, state.target_cache)
        chain_end = state.target_cache.length + pending.shape[0]
        logits = score_tree(target, state.target_cache, pending, draft_tree.tokens, draft_tree.depths, draft_tree.reach)
        penalized = None
        if params.repetition_penalty != 1.0:
            penalized = context_mask(to_device(state.tokens, target.device), target.vocab_size)
        counts = state.answer_counts(target.vocab_size, target.device) if params.occurrence_penalties else None
        steps = min(draft_tree.max_depth, remaining - 1) + 1
        allowed = (
            None if grammar is None else grammar.tree_allowed(draft_tree.tokens, draft_tree.parents, draft_tree.valid)
        )
        walk = walk_tree(
            draft_tree.tokens,
            draft_tree.parents,
            draft_tree.valid,
            logits,
            params,
            chain_end - 1,
            penalized,
            steps,
            allowed,
            controls.top_logprobs,
            counts,
        )
        clock.mark()
        grown = draft_tree.search if overlap else None
        shadow_made = 0
        kept = None
        if grown is not None:
            if shadow_planned:
                grown.timer = ForwardTimer(draft.device)  # the shadow's forwards are off the pass's critical path
                with lane.run():  # on the draft's stream while the target's pass runs on its own
                    shadow_made = grown.grow(grown.pool, shadow_planned)
                lane.join()  # the nodes kept are found in what the shadow grew
            kept = find_kept(grown, walk.tokens, (walk.path >= 0).sum())  # their count comes with the pass's read
        clock.mark()
        result = _read_pass(draft_tree, walk, kept)

        verdict = result.verdict
        commit_target_path(state.target_cache, chain_end, walk.path[: len(verdict.path)])
        seed = None
        if grown is not None:
            with lane.run():
                commit_draft_path(
                    state.draft_cache, draft_tree.root_row, draft_tree.cache_rows[walk.path[: result.expanded]]
                )
                seed = keep_subtree(
                    grown, kept, result.kept, len(verdict.accepted_tokens), state.draft_cache, tree.budget
                )
            if seed is not None:
                lane.join(*(value for value in vars(seed).values() if isinstance(value, torch.Tensor)))
        else:
            commit_draft_path(
                state.draft_cache, draft_tree.root_row, draft_tree.cache_rows[walk.path[: result.expanded]]
            )
        state.tokens.extend(verdict.emitted)
        if grammar is not None:
            grammar.advance(verdict.emitted)
        if depth is not None and tree.adaptive_depth and search.max_depth > 0:
            depth.observe(tree.budget, width, forwards, result.path_births)
        draft_seconds, target_seconds, _shadow_seconds = clock.intervals()
        forward_seconds = draft_tree.timer.seconds()
        if draft_tree.draft_forwards:
            last = (target_seconds, forward_seconds / draft_tree.draft_forwards)
        emitted += len(verdict.emitted)
        yield Step(
            token_ids=verdict.emitted,
            stats=PassStats(
                tokens=len(verdict.emitted),
                tree_size=result.tree_size,
                tree_depth=result.tree_depth,
                draft_seconds=draft_seconds,
                draft_forward_seconds=forward_seconds,
                target_seconds=target_seconds,
                draft_forwards=draft_tree.draft_forwards,
                shadow_forwards=shadow_made,
                kept_nodes=result.seed_nodes,
            ),
            logprobs=result.logprobs,
        )
