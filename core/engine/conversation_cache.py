"""The conversations the engine keeps between requests, so a follow-up reads only its new tokens.

Clients of a chat API send the whole history with every request. The engine keeps the KV state of the last
few conversations and starts each request from the one that shares the longest prefix of token ids with its
prompt: a follow-up turn (history + the last answer + one new message) then prefills only the new message.

Where the kept conversations live (the decision): the live conversation uses the one KV cache per model
that the memory plan counted (core.planning.residency.kv_rows: the planned context plus one tree); the
others are copies of their rows in host RAM. Several caches on the GPU would not fit the plan (a 70B's
cache at 4,096 tokens is ~1.3 GB of VRAM, taken from resident layers), and a single cache shared by longest
common prefix keeps only one conversation. Switching conversations copies rows: the live one's out (device
to host) and the chosen one's prefix back in, ~50 ms for a full 70B context over PCIe 4, against seconds
to re-read it through offloaded layers. The host copies are bounded: at most MAX_SAVED conversations, and
all together at most HOST_BYTES_CAP or a quarter of the RAM still available, whichever is less.

Whose conversation it is matters when the store is full: the API server's conversations ("api") are
evicted before the app's chat ("chat"), least recently used first, so programs using the app's API never
push the conversation on screen out.

The cached rows a request starts from are exactly the rows a cold run would compute for that prefix, up to
floating-point rounding (a prefix is computed in other chunks and passes than in a cold run), so reusing
them changes no sampling rule: each token is still sampled from the target's distribution.
"""

from __future__ import annotations

from dataclasses import dataclass

import psutil
import torch

from core.modeling.causal_lm import CausalLM
from core.decoding.decode_state import DecodeState
from core.modeling.kv_cache import InPlaceKVCache

MAX_SAVED = 4
HOST_BYTES_CAP = 4 << 30
# A request that parts from the live conversation this few rows before its end (an answer that re-tokenises
# differently, an edited last message) does not save it: the copy would cost more than it could save.
MIN_ROWS_WORTH_SAVING = 64
OWNERS = ("api", "chat")  # eviction order: API conversations go first

Rows = list[tuple[torch.Tensor, torch.Tensor]]  # per decoder layer: keys, values [batch, kv_heads, n, head_dim]


def shared_prefix(a: list[int], b: list[int]) -> int:
    """The number of leading token ids `a` and `b` share."""
    count = 0
    for x, y in zip(a, b):
        if x != y:
            break
        count += 1
    return count


def copy_rows(cache: InPlaceKVCache | None, length: int, device: torch.device | str) -> Rows | None:
    """Copies of the first `length` rows of every layer of `cache` on `device` (None for no cache or rows)."""
    if cache is None or length == 0:
        return None
    return [
        (layer.keys[..., :length, :].to(device, copy=True), layer.values[..., :length, :].to(device, copy=True))
        for layer in cache.layers
    ]


def write_rows(cache: InPlaceKVCache, rows: Rows | None, length: int, device: torch.device) -> None:
    """Make `cache` (on `device`) hold the first `length` of `rows` and nothing else, through the cache's own
    update (which allocates the planned buffer on first use)."""
    cache.crop_to(0)
    if rows is None or length == 0:
        return
    for layer, (keys, values) in zip(cache.layers, rows):
        layer.update(keys[..., :length, :].to(device), values[..., :length, :].to(device))


def rows_bytes(rows: Rows | None) -> int:
    if rows is None:
        return 0
    return sum(k.numel() * k.element_size() + v.numel() * v.element_size() for k, v in rows)


@dataclass
class SavedConversation:
    """A conversation's tokens and host copies of its cached rows (target and draft)."""

    tokens: list[int]
    owner: str
    target_rows: Rows | None
    target_length: int
    draft_rows: Rows | None
    draft_length: int

    @property
    def nbytes(self) -> int:
        return rows_bytes(self.target_rows) + rows_bytes(self.draft_rows)

    def usable(self, prompt: list[int]) -> int:
        """Target rows this conversation can give `prompt` (at least its last token stays to be read)."""
        return min(self.target_length, shared_prefix(self.tokens, prompt), len(prompt) - 1)

    def covers(self, other: "SavedConversation") -> bool:
        """Whether this conversation holds every row `other` holds (then `other` is redundant)."""
        return (
            other.target_length <= self.target_length
            and other.draft_length <= self.draft_length
            and self.tokens[: other.target_length] == other.tokens[: other.target_length]
            and self.tokens[: other.draft_length] == other.tokens[: other.draft_length]
        )


def host_budget_bytes() -> int:
    """Host RAM the saved conversations may take together."""
    return min(HOST_BYTES_CAP, psutil.virtual_memory().available // 4)


class ConversationCache:
    """The live DecodeState on the models' devices plus a few saved conversations in host RAM."""

    def __init__(self, target: CausalLM, draft: CausalLM | None, max_saved: int = MAX_SAVED) -> None:
        self.target = target
        self.draft = draft
        self.max_saved = max_saved
        self.live: DecodeState | None = None
        self.live_owner = "chat"
        self.saved: list[SavedConversation] = []  # least recently used first

    def checkout(self, prompt_ids: list[int], owner: str, reuse: bool = True) -> DecodeState:
        """The live state, reset to `prompt_ids` and holding the cached rows of the longest prefix of it that a
        kept conversation shares (none when `reuse` is False). The live conversation is saved first when the
        request would overwrite rows of it."""
        live = self._live_state()
        live_rows = min(live.target_cache.length, shared_prefix(live.tokens, prompt_ids), len(prompt_ids) - 1)
        best = max(reversed(self.saved), key=lambda s: s.usable(prompt_ids), default=None) if reuse else None
        from_saved = best is not None and best.usable(prompt_ids) > live_rows
        keep_live = reuse and not from_saved
        if from_saved:
            self.saved.remove(best)  # out of the store while the live one is saved: it cannot be evicted now
        if live.target_cache.length - (live_rows if keep_live else 0) >= MIN_ROWS_WORTH_SAVING:
            self._save_live()
        if from_saved:
            self._restore(best, prompt_ids)
        elif not keep_live:
            live.target_cache.crop_to(0)
            if live.draft_cache is not None:
                live.draft_cache.crop_to(0)
        live.reset_tokens(prompt_ids)
        self.live_owner = owner
        return live

    def drop_live(self) -> None:
        """Forget the live conversation (its caches may be half-written after a failed pass); keep the rest."""
        self.live = None

    def _live_state(self) -> DecodeState:
        if self.live is None:
            self.live = DecodeState.fresh([], self.target, self.draft)
        elif self.draft is not None and self.live.draft_cache is None:
            self.live.draft_cache = self.draft.new_cache()
        return self.live

    def _save_live(self) -> None:
        live = self.live
        draft_length = live.draft_cache.length if live.draft_cache is not None else 0
        snapshot = SavedConversation(
            list(live.tokens),
            self.live_owner,
            copy_rows(live.target_cache, live.target_cache.length, "cpu"),
            live.target_cache.length,
            copy_rows(live.draft_cache, draft_length, "cpu"),
            draft_length,
        )
        if any(saved.covers(snapshot) for saved in self.saved):
            return
        self.saved = [saved for saved in self.saved if not snapshot.covers(saved)] + [snapshot]
        self._evict()

    def _evict(self) -> None:
        """Drop saved conversations until the store fits its count and its share of host RAM."""
        budget = host_budget_bytes()
        while self.saved and (len(self.saved) > self.max_saved or sum(s.nbytes for s in self.saved) > budget):
            self.saved.remove(self._eviction_victim())

    def _eviction_victim(self) -> SavedConversation:
        for owner in OWNERS:
            for saved in self.saved:  # least recently used first
                if saved.owner == owner:
                    return saved
        return self.saved[0]

    def _restore(self, saved: SavedConversation, prompt_ids: list[int]) -> None:
        """Copy `saved`'s rows for the prefix it shares with `prompt_ids` into the live caches."""
        live = self.live
        shared = shared_prefix(saved.tokens, prompt_ids)
        target_length = min(saved.target_length, shared, len(prompt_ids) - 1)
        write_rows(live.target_cache, saved.target_rows, target_length, self.target.device)
        if live.draft_cache is not None:
            write_rows(
                live.draft_cache,
                saved.draft_rows,
                min(saved.draft_length, shared, len(prompt_ids) - 1),
                self.draft.device,
            )
        live.tokens = list(saved.tokens[:shared])
        if target_length < saved.target_length:  # the request parts from it: keep it for a later return
            self.saved.append(saved)
            self._evict()
