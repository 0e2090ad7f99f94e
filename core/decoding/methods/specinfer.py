"""SpecInfer, the baseline SpecExec is compared against: sampled draft chains, multi-round rejection.

Each pass samples `w` independent chains of `L` tokens from the draft (at the target's own temperature,
top-k and top-p), merges them into a trie of unique prefixes, scores the trie with one target forward and
walks it with multi-round speculative sampling (Miao et al., 2023). At a node with target distribution p,
draft distribution q and sampled children x_1..x_k (i.i.d. from q, with repeats):

    for i in 1..k:  accept x_i with probability min(1, p(x_i) / q(x_i)); on accept descend to x_i's node
                    on reject p := normalize(max(0, p - q))
    all rejected:   emit a sample from the residual p and stop

Each round is one step of ordinary speculative sampling against the current residual, so the emitted token
is an exact sample of the target's p whatever the draft does. Below an accepted child the chains through
it are still i.i.d. draft samples given their prefix (they are independent of this node's decisions), so
the argument repeats at every depth. Unlike SpecExec, the tokens differ from sequential sampling with the
same seed: only their distribution is the same.

Randomness is keyed (core/decoding/keyed_random.py), so a run is reproducible on any device: chain c's token at
absolute position t by (seed, t, the draft stream, c), the acceptance tests and residual samples by (seed,
absolute position of the token being chosen, their stream, the round).
"""

from __future__ import annotations

import math
import time
from collections.abc import Iterator
from dataclasses import dataclass

import torch

from core.modeling.causal_lm import CausalLM, RowLogits
from core.decoding.decode_state import DecodeState
from core.decoding.device_io import to_device
from core.decoding.keyed_random import (
    STREAM_SPECINFER_ACCEPT,
    STREAM_SPECINFER_DRAFT,
    STREAM_SPECINFER_RESIDUAL,
    keyed_gumbels,
)
from core.modeling.kv_cache import InPlaceKVCache
from core.decoding.settings import SamplingParams, TreeSettings
from core.decoding.methods.step import PassStats, Step
from core.decoding.methods.tree_forward import commit_draft_path, commit_target_path, score_tree
from core.decoding.sampling import (
    draw_slots,
    gumbel_pick,
    sample_from_probs,
    sample_token,
    target_probs,
    uniform_draw,
)
from core.decoding.timing import ForwardTimer
from core.modeling.tree_mask import additive_mask, ancestor_matrix, causal_visibility
from core.decoding.verification import Verdict


# SpecInfer's best chain shapes (docs/benchmarks.md): the width grows to about this many chains, then the
# chains grow longer; below that, chains of this length (or a square, for small budgets).
_MAX_CHAINS = 32
_CHAIN_LENGTH = 8


def chain_shape(budget: int, max_depth: int) -> tuple[int, int]:
    """(width w, length L) of the chains for a draft budget: the shape SpecInfer does best with.

    w = min(32, max(round(sqrt(budget)), budget // 8)), L = min(max_depth, budget // w), then w = budget // L,
    so w * L <= budget: 16 -> 4x4, 64 -> 8x8, 256 -> 32x8, 1024 -> 32x32, 2048 -> 64x32 (depth cap 32).
    Measured on the built-in pair (t=0.6, top-p 0.9, 8 MT-Bench prompts, tokens per pass): 16: 4x4 3.15,
    2x8 3.12, 1x16 2.84, 8x2 2.49; 64: 8x8 4.09, 4x16 3.46, 16x4 3.37; 256: 32x8 4.99, 16x16 4.47, 8x32 4.41,
    64x4 3.59; 1024: 32x32 5.54, 64x16 4.68, 128x8 4.68. More chains raise the chance that one of the
    candidates at a node is accepted, but past ~32 they mostly repeat each other; longer chains pay off once
    the shallow levels are covered. max_depth <= 0 (no room for draft tokens) gives (0, 0): a plain target step.
    """
    if max_depth <= 0 or budget <= 0:
        return 0, 0
    width = max(1, min(_MAX_CHAINS, max(round(math.sqrt(budget)), budget // _CHAIN_LENGTH)))
    length = min(max_depth, max(1, budget // width))
    return budget // length, length


@dataclass(frozen=True)
class DraftChains:
    """Chains sampled from the draft on top of its cache.

    tokens: long [w, L]; probs: L tensors [w, V], probs[d][c] = the draft distribution q after the root and
    chain c's first d tokens (the distribution its token d + 1 was drawn from); root_row: the root's row in
    the draft cache (= its absolute position), -1 when the draft did not run. The chain tips at depth d
    (1 <= d < L) sit at draft cache rows root_row + 1 + (d - 1) * w + c; depth-L tips were never forwarded.
    """

    tokens: torch.Tensor
    probs: list[torch.Tensor]
    root_row: int
    forwards: int
    timer: ForwardTimer

    @property
    def width(self) -> int:
        return int(self.tokens.shape[0])

    @property
    def length(self) -> int:
        return int(self.tokens.shape[1])


def no_chains(device: torch.device | str) -> DraftChains:
    """The empty draft of a pass with no room for draft tokens (the draft cache is left untouched)."""
    return DraftChains(torch.empty((0, 0), dtype=torch.long, device=device), [], -1, 0, ForwardTimer(device))


def _draw(probs: torch.Tensor, seed: int, position: int) -> torch.Tensor:
    """Chain c's token at absolute `position` from row c of probs [w, V], by its keyed draw (draw index c)
    -> long [w]."""
    chains = torch.arange(probs.shape[0], device=probs.device)
    noise = keyed_gumbels(
        seed, torch.full_like(chains, position), STREAM_SPECINFER_DRAFT, draw_slots(probs.shape[-1]), chains
    )
    return gumbel_pick(probs.double().log(), noise)


def sample_chains(
    draft: CausalLM,
    cache: InPlaceKVCache,
    pending: torch.Tensor,
    params: SamplingParams,
    width: int,
    length: int,
) -> DraftChains:
    """Sample `width` chains of `length` tokens, all chains advanced together by one draft forward per depth.

    `pending`: long [P] on the draft's device, tokens the draft cache does not hold yet, the root last. The first forward runs them
    (prefill or catch-up) and gives q at the root; forward d runs the w tips at depth d, each seeing the
    committed prefix, the root and its own chain only. q uses the target's sampling settings without the
    repetition penalty (any q is correct as long as it is the distribution the tokens were drawn from).
    """
    device = draft.device
    root_row = cache.length + pending.shape[0] - 1
    timer = ForwardTimer(device)
    visible = causal_visibility(cache.length, pending.shape[0], device)
    positions = torch.arange(cache.length, cache.length + pending.shape[0], device=device)
    with timer:
        logits = draft.forward(
            pending, positions, additive_mask(visible, draft.dtype), cache, logit_rows=slice(-1, None)
        )
    # q: [1, V] at the root, shared by every chain
    q = target_probs(logits, params).expand(width, -1)
    probs, tips = [q], [_draw(q, params.seed, root_row + 1)]
    own_chain = torch.eye(width, dtype=torch.bool, device=device)
    for depth in range(1, length):
        # visible: [w, cache.length + w]; tree columns are depth blocks of w, a tip sees its own column in each
        visible = torch.zeros((width, cache.length + width), dtype=torch.bool, device=device)
        visible[:, : root_row + 1] = True
        visible[:, root_row + 1 :] = own_chain.repeat(1, depth)
        positions = torch.full((width,), root_row + depth, dtype=torch.long, device=device)
        with timer:
            logits = draft.forward(tips[-1], positions, additive_mask(visible, draft.dtype), cache)
        # q: [w, V], row c = distribution after chain c's first `depth` tokens
        q = target_probs(logits, params)
        probs.append(q)
        tips.append(_draw(q, params.seed, root_row + depth + 1))
    return DraftChains(tokens=torch.stack(tips, dim=1), probs=probs, root_row=root_row, forwards=length, timer=timer)


@dataclass(frozen=True)
class ChainTrie:
    """The chains merged into unique prefixes, in topological (breadth-first) order; node 0 is the root.

    tokens, parents (-1 for the root), depths, cache_rows (draft cache row of a forwarded chain position with
    this prefix, -1 for depth-L tips and for a root the draft did not run on): long [N].
    children[u]: the sampled next tokens of every chain through u, in chain order, repeats kept (each one is
    an independent draft sample, and each gets its own acceptance round). child_node[u]: token -> node.
    q_source[u]: (depth, chain) indexing DraftChains.probs for the draft distribution at u.
    """

    tokens: torch.Tensor
    parents: torch.Tensor
    depths: torch.Tensor
    cache_rows: torch.Tensor
    children: list[list[int]]
    child_node: list[dict[int, int]]
    q_source: list[tuple[int, int]]

    @property
    def size(self) -> int:
        return len(self.children)


def merge_chains(root_token: int, chains: list[list[int]], root_row: int) -> ChainTrie:
    """Merge w chains of L tokens (a list of lists, chain order) into a trie of unique prefixes.

    A Python loop over the w * L sampled tokens: fine for a baseline whose budget is at most a few thousand.
    """
    width = len(chains)
    length = len(chains[0]) if width else 0
    tokens, parents, depths = [root_token], [-1], [0]
    cache_rows = [root_row]
    children: list[list[int]] = [[]]
    child_node: list[dict[int, int]] = [{}]
    q_source = [(0, 0)]
    at = [0] * width  # trie node each chain has reached
    for depth in range(1, length + 1):  # depth-major: every parent exists before its children
        for chain, sequence in enumerate(chains):
            parent, token = at[chain], sequence[depth - 1]
            children[parent].append(token)
            node = child_node[parent].get(token)
            if node is None:
                node = len(tokens)
                child_node[parent][token] = node
                tokens.append(token)
                parents.append(parent)
                depths.append(depth)
                forwarded = depth < length
                cache_rows.append(root_row + 1 + (depth - 1) * width + chain if forwarded else -1)
                children.append([])
                child_node.append({})
                q_source.append((depth, chain))
            at[chain] = node
    return ChainTrie(_long(tokens), _long(parents), _long(depths), _long(cache_rows), children, child_node, q_source)


def _long(values: list[int]) -> torch.Tensor:
    return torch.tensor(values, dtype=torch.long)


def residual_distribution(p: torch.Tensor, q: torch.Tensor) -> torch.Tensor:
    """normalize(max(0, p - q)): what is left of p after a rejected draft sample from q.

    When nothing is left (p == q up to rounding: a rejection then has probability ~0) p is kept as it is.
    """
    left = (p - q).clamp_min(0)
    total = left.sum()
    return torch.where(total > 0, left / total.clamp_min(torch.finfo(left.dtype).tiny), p)


def choose_among_candidates(
    p: torch.Tensor, q: torch.Tensor, candidates: list[int], seed: int, position: int
) -> tuple[int, bool]:
    """Multi-round speculative sampling at one node: (token, True) for an accepted candidate, (token, False)
    for a sample from the final residual. p, q: [V] float64; candidates: i.i.d. samples from q."""
    for index, token in enumerate(candidates):
        u = uniform_draw(seed, position, STREAM_SPECINFER_ACCEPT, index)
        p_x, q_x = torch.stack([p[token], q[token]]).tolist()  # host sync: one acceptance test per round
        if u * q_x < p_x:  # u < min(1, p(x) / q(x)), without dividing
            return token, True
        p = residual_distribution(p, q)
    return sample_from_probs(p, seed, position, STREAM_SPECINFER_RESIDUAL), False


def verify_chains(
    trie: ChainTrie,
    draft_probs: list[torch.Tensor],
    target_logits: torch.Tensor | RowLogits,
    params: SamplingParams,
    root_position: int,
    context_ids: torch.Tensor,
    max_tokens: int,
) -> Verdict:
    """Pure function of (trie, draft and target distributions, sampler) -> accepted path and next token.

    target_logits: [N, V] or RowLogits, row u = target logits after trie node u; draft_probs: DraftChains.probs;
    root_position: absolute position of the root; context_ids: long [T], the sequence up to the root (for
    the repetition penalty); max_tokens: emit at most this many tokens.
    """
    device = target_logits.device
    context = context_ids.to(device)
    node, path, accepted = 0, [0], []
    while True:
        position = root_position + len(path)  # absolute position of the token chosen now
        candidates = trie.children[node]
        if not candidates or len(accepted) + 1 >= max_tokens:
            return Verdict(path, accepted, sample_token(target_logits[node], params, position, context))
        p = target_probs(target_logits[node], params, context).double()
        depth, chain = trie.q_source[node]
        q = draft_probs[depth][chain].to(device=device, dtype=torch.float64)
        # A draft with fewer (padding) rows than its target gives the target's extra tokens probability 0.
        q = torch.nn.functional.pad(q, (0, p.shape[-1] - q.shape[-1]))
        token, hit = choose_among_candidates(p, q, candidates, params.seed, position)
        if not hit:
            return Verdict(path, accepted, token)
        node = trie.child_node[node][token]
        path.append(node)
        accepted.append(token)
        context = torch.cat([context, context.new_tensor([token])])


def specinfer_steps(
    state: DecodeState,
    target: CausalLM,
    draft: CausalLM,
    params: SamplingParams,
    tree: TreeSettings,
    max_new_tokens: int,
) -> Iterator[Step]:
    """One Step per target pass, never more than max_new_tokens tokens in all.

    tree.budget: draft tokens sampled per pass (w * L <= budget, see chain_shape); tree.max_depth caps L,
    and so does the room left (L <= remaining - 1: the pass emits at most L + 1 tokens). tree.expand and
    tree.draft_top_p are unused: the chains advance together, and the draft always samples with the
    target's settings (SpecInfer's acceptance needs the exact q the tokens were drawn from, not a ranking).
    """
    emitted = 0
    while emitted < max_new_tokens:
        remaining = max_new_tokens - emitted
        width, length = chain_shape(tree.budget, min(tree.max_depth, remaining - 1))
        started = time.perf_counter()
        if length == 0:
            chains = no_chains(draft.device)
        else:
            pending_draft = state.prefill_pending(draft, state.draft_cache)
            chains = sample_chains(draft, state.draft_cache, pending_draft, params, width, length)
        # host sync: the trie is built in Python from the sampled token ids
        trie = merge_chains(state.tokens[-1], chains.tokens.tolist(), chains.root_row)
        drafted = time.perf_counter()

        device = target.device
        pending = state.prefill_pending(target, state.target_cache)
        chain_end = state.target_cache.length + pending.shape[0]
        reach = ancestor_matrix(to_device(trie.parents, device))
        logits = score_tree(
            target, state.target_cache, pending, to_device(trie.tokens, device), to_device(trie.depths, device), reach
        )
        verdict = verify_chains(
            trie, chains.probs, logits, params, chain_end - 1, to_device(state.tokens, device), remaining
        )
        commit_target_path(state.target_cache, chain_end, to_device(verdict.path, device))
        rows = trie.cache_rows[verdict.path].tolist()
        expanded = next((i for i, row in enumerate(rows) if row < 0), len(rows))
        commit_draft_path(state.draft_cache, chains.root_row, to_device(rows[:expanded], draft.device))
        state.tokens.extend(verdict.emitted)
        finished = time.perf_counter()

        emitted += len(verdict.emitted)
        yield Step(
            token_ids=verdict.emitted,
            stats=PassStats(
                tokens=len(verdict.emitted),
                tree_size=trie.size - 1,
                tree_depth=int(trie.depths.max()),
                draft_seconds=drafted - started,
                draft_forward_seconds=chains.timer.seconds(),
                target_seconds=finished - drafted,
                draft_forwards=chains.forwards,
            ),
        )
