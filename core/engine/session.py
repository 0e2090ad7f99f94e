"""Chat turns inside the engine: chat-template rendering, KV-cache reuse across turns, the context policy and
the out-of-memory retry.

The conversations are kept between turns by a ConversationCache (core.engine.conversation_cache): a new turn
starts from the kept conversation that shares the longest prefix with its prompt. When the prompt starts with
a previous turn's prompt + answer (the usual case: the client appends the answer and the next user message),
both models prefill only the new tokens.

Accounting: the target never caches the last token of the sequence (it is the root of the next draft tree),
so after a turn the target cache holds prompt + answer - 1 tokens, and a turn-2 prompt that extends the
conversation reuses exactly those: reused_prefix_tokens = len(turn-1 prompt) + len(answer) - 1 when the answer
re-tokenises to the generated ids.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import torch
from transformers import PreTrainedTokenizerBase

from core.decoding.autotune.chooser import AutoTuner
from core.modeling.causal_lm import CausalLM
from core.decoding.decode_state import DecodeState
from core.text.detokenize import IncrementalDetokenizer
from core.engine.conversation_cache import ConversationCache
from core.errors import ContextLengthError, InvalidSettingError
from core.decoding.generation import GenerationChunk, split_reasoning, stream_generate
from core.decoding.settings import DecodingSettings, SamplingParams
from core.modeling import families
from core.modeling.kv_cache import InPlaceKVCache
from core.planning.residency import config_kv_bytes
from core.decoding.methods.step import OutputControls
from core.text.prompts import Message, Prompt, Tool, answer_thinking, encode_prompt
from core.text.counts import token_count
from core.text.reasoning import ReasoningSplitter, ThinkingFormat


@dataclass(frozen=True)
class PreparedPrompt:
    """The prompt ids of a conversation after the context policy, how many messages it left out, and the
    reasoning markers of the answer (a thinking model's chat; None otherwise)."""

    prompt_ids: list[int]
    dropped_messages: int
    thinking: ThinkingFormat | None = None


@dataclass(frozen=True)
class BudgetCut:
    """Yielded by Turn when an out-of-memory error made it halve the tree budget and retry the pass."""

    old_budget: int
    new_budget: int


def out_of_memory_errors() -> tuple[type[BaseException], ...]:
    """The exceptions that mean 'the device ran out of memory during a pass'."""
    return (torch.cuda.OutOfMemoryError,)


def fit_conversation(
    tokenizer: PreTrainedTokenizerBase,
    messages: list[Message],
    context_limit: int,
    max_new_tokens: int,
    trim: bool = True,
    tools: tuple[Tool, ...] = (),
    template_kwargs: dict | None = None,
    continue_final: bool = False,
) -> PreparedPrompt:
    """Render `messages` (and `tools`, and the `template_kwargs` the template reads); while prompt +
    max_new_tokens exceeds the context, drop the oldest turn. `continue_final`: the last message is an answer
    cut off, to go on with (core.text.continuation).

    System messages at the start are always kept, and so is the last message (the one being answered; with
    an answer to continue, the message it answers too). A turn is a user message plus the replies up to the
    next user message, so the kept conversation still starts with a user message. If even the shortest
    conversation leaves no room for max_new_tokens, it is used anyway (generation then stops at the context
    limit); if it leaves no room at all, ContextLengthError. With `trim` False nothing is dropped: a
    conversation that leaves no room at all is a ContextLengthError.
    """
    messages = list(messages)
    system = 0
    while system < len(messages) and messages[system].get("role") == "system":
        system += 1
    head, body = messages[:system], messages[system:]
    kept = 2 if continue_final else 1  # the messages never left out
    dropped = 0

    def rendered(part: list[Message]) -> tuple[Prompt, list[int]]:
        prompt = Prompt(
            messages=tuple(head + part),
            tools=tools,
            template_kwargs=template_kwargs or {},
            continue_final=continue_final,
        )
        return prompt, encode_prompt(tokenizer, prompt)

    prompt, ids = rendered(body)
    while True:
        if len(ids) + max_new_tokens <= context_limit or len(body) <= kept or not trim:
            break
        if not dropped:
            # the shortest conversation first: where even it is too long (a huge document), one render says
            # so instead of one per turn of a long chat (the app counts a message each time the typing pauses)
            shortest, shortest_ids = rendered(body[-kept:])
            if len(shortest_ids) >= context_limit:
                prompt, ids, dropped, body = shortest, shortest_ids, len(body) - kept, body[-kept:]
                break
        cut = 1  # drop the oldest message and the replies after it, up to the next user message
        while cut < len(body) - kept and body[cut].get("role") != "user":
            cut += 1
        body = body[cut:]
        dropped += cut
        prompt, ids = rendered(body)
    if len(ids) >= context_limit:
        left_out = "after leaving out the older turns, " if trim and dropped else ""
        parts = _prompt_parts(tokenizer, prompt, len(head), len(ids))
        raise ContextLengthError(
            f"{left_out}the prompt is {token_count(len(ids))} with the chat template{f' ({parts})' if parts else ''}, "
            f"but the model's context window is {token_count(context_limit)}",  # what to do: the error's hint
            prompt_tokens=len(ids),
        )
    return PreparedPrompt(ids, dropped, answer_thinking(tokenizer, prompt))


def _prompt_parts(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, system_messages: int, total: int) -> str:
    """Where a prompt's tokens go, largest first ("the tools' definitions about 3,900, the messages 120"), so a
    prompt too long for the context names what to cut: the tools, the system messages (a Responses request's
    `instructions`, the first `system_messages` of the prompt's), or the conversation; "" where the
    conversation is all there is (nothing to tell apart). Only for the error: it renders the prompt twice more."""
    messages = list(prompt.messages or ())
    head, body, tools = messages[:system_messages], messages[system_messages:], prompt.tools

    def length(messages: list[Message], with_tools: bool) -> int:
        part = dataclasses.replace(prompt, messages=tuple(messages), tools=tools if with_tools else ())
        return len(encode_prompt(tokenizer, part))

    try:
        without_tools = length(head + body, False) if tools else total
        parts = {"the tools' definitions": total - without_tools}
        if head:
            parts["the system messages"] = without_tools - length(body, False)
    except Exception:  # noqa: BLE001 - a template that cannot render a part alone: the error goes on without it
        return "its parts could not be counted apart"
    if prompt.continue_final and len(body) == 2:
        last = "the last message and the answer so far"
    else:
        last = "the last message" if len(body) == 1 else "the conversation"
    parts[last] = total - sum(parts.values())
    named = sorted(((tokens, name) for name, tokens in parts.items() if tokens > 0), reverse=True)
    return ", ".join(f"{name} about {tokens:,}" for tokens, name in named) if len(named) > 1 else ""


def fit_text(tokenizer: PreTrainedTokenizerBase, text: str, context_limit: int) -> PreparedPrompt:
    """Token ids of a plain-text prompt (no chat template); ContextLengthError when it fills the context."""
    ids = encode_prompt(tokenizer, Prompt(text=text))
    if len(ids) >= context_limit:
        raise ContextLengthError(
            f"the prompt is {token_count(len(ids))}, but the model's context window is {token_count(context_limit)}",
            prompt_tokens=len(ids),
        )
    return PreparedPrompt(ids, 0)


def _crop_consistent(cache: InPlaceKVCache | None, length: int) -> None:
    """Crop every layer to `length` rows or fewer, the same for all layers (a pass that failed part-way
    through the decoder stack leaves the early layers longer than the later ones)."""
    if cache is None:
        return
    cache.crop_to(min([length] + [layer.length for layer in cache.layers]))


class ChatSession:
    """The models of a loaded engine plus the conversations kept from earlier turns."""

    def __init__(self, target: CausalLM, draft: CausalLM | None, tokenizer: PreTrainedTokenizerBase) -> None:
        self.target = target
        self.draft = draft
        self.tokenizer = tokenizer
        self.conversations = ConversationCache(target, draft)
        self.tuner: AutoTuner | None = None  # learns across turns; built by tuner_for on first need

    def tuner_for(self, max_depth: int) -> AutoTuner:
        """The pair's AutoTuner (its cost model measured on first use, then read from the cache)."""
        if self.tuner is None:
            from core.decoding.autotune.setup import tuner_for_pair

            self.tuner = tuner_for_pair(self.target, self.draft, max_depth)
        return self.tuner

    @property
    def context_limit(self) -> int:
        return min(m.max_context for m in self.models)

    @property
    def models(self) -> list[CausalLM]:
        return [m for m in (self.target, self.draft) if m is not None]

    @property
    def model_context(self) -> int:
        """The longest context both models keep as themselves (their configs' limit): how far a Load's
        context_length can take them, where context_limit is how far this load took them."""
        return min(families.context_limit(m.config) for m in self.models)

    @property
    def context_bytes_per_token(self) -> int:
        """The memory one token of planned context sets aside in the two models' KV caches (each is made with
        rows for the whole planned context when a conversation starts: core.planning.residency.kv_rows)."""
        return sum(config_kv_bytes(m.config, 1, m.dtype.itemsize) for m in self.models)

    @property
    def state(self) -> DecodeState | None:
        """The live conversation: the last turn's tokens and both models' KV caches."""
        return self.conversations.live

    def reset(self) -> None:
        """Forget the live conversation (its caches may be half-written); the saved ones stay."""
        self.conversations.drop_live()

    def prepare(
        self,
        messages: list[Message],
        max_new_tokens: int,
        trim: bool = True,
        tools: tuple[Tool, ...] = (),
        template_kwargs: dict | None = None,
        continue_final: bool = False,
    ) -> PreparedPrompt:
        return fit_conversation(
            self.tokenizer, messages, self.context_limit, max_new_tokens, trim, tools, template_kwargs, continue_final
        )

    def prepare_text(self, text: str) -> PreparedPrompt:
        return fit_text(self.tokenizer, text, self.context_limit)

    def turn(
        self,
        prompt_ids: list[int],
        params: SamplingParams,
        settings: DecodingSettings,
        reuse_cache: bool = True,
        fault_hook: Callable[[], None] | None = None,
        cache_owner: str = "chat",
        controls: OutputControls | None = None,
        thinking: ThinkingFormat | None = None,
    ) -> "Turn":
        """Start a turn: the live state is set to `prompt_ids` now (from the kept conversation sharing the
        longest prefix, unless `reuse_cache` is False), so the reuse counts are known up front. `controls`: a
        grammar and log-probabilities (core.decoding.methods.step.OutputControls); `thinking`: the answer's reasoning
        markers (PreparedPrompt.thinking), which part its chunks' reasoning from their text."""
        if settings.method not in ("sequential", "auto") and self.draft is None:
            raise InvalidSettingError(f"method '{settings.method}' needs a draft model; load one or use 'sequential'")
        self.conversations.checkout(prompt_ids, cache_owner, reuse_cache)
        return Turn(self, prompt_ids, params, settings, fault_hook, controls, thinking)


class Turn:
    """One answer being generated. Iterate for GenerationChunk (one per target pass) and BudgetCut items;
    `close()` (or breaking off the iteration) stops it and leaves the state holding prompt + tokens so far."""

    def __init__(
        self,
        session: ChatSession,
        prompt_ids: list[int],
        params: SamplingParams,
        settings: DecodingSettings,
        fault_hook: Callable[[], None] | None,
        controls: OutputControls | None = None,
        thinking: ThinkingFormat | None = None,
    ) -> None:
        self.session = session
        self.controls = controls
        # one splitter for the whole answer, across out-of-memory retries (each retry is a new stream)
        self.splitter = ReasoningSplitter(thinking) if thinking is not None else None
        self.state = session.state
        self.prompt_ids = list(prompt_ids)
        self.params = params
        self.settings = settings
        self.fault_hook = fault_hook
        self.reused_prefix_tokens = self.state.target_cache.length
        self.draft_reused_prefix_tokens = self.state.draft_cache.length if self.state.draft_cache is not None else 0
        self.token_ids: list[int] = []
        self.finish_reason: str | None = None
        self._iterator = self._run()

    def __iter__(self) -> Iterator[GenerationChunk | BudgetCut]:
        return self._iterator

    def close(self) -> None:
        self._iterator.close()

    def _run(self) -> Iterator[GenerationChunk | BudgetCut]:
        handle = self._install_fault_seam() if self.fault_hook is not None else None
        try:
            yield from self._passes()
        finally:
            if handle is not None:
                handle.remove()

    def _passes(self) -> Iterator[GenerationChunk | BudgetCut]:
        settings = self.settings
        state = self.state
        released: list[str] = []
        carry = ""  # text the failed stream had held back (see _held_back_text)
        while True:
            # cache lengths at the last pass boundary: rows below them are committed and valid
            committed = (state.target_cache.length, state.draft_cache.length if state.draft_cache is not None else 0)
            stream = stream_generate(
                self.session.target,
                self.session.draft,
                self.session.tokenizer,
                self.prompt_ids + self.token_ids,
                self.params,
                dataclasses.replace(settings, max_new_tokens=settings.max_new_tokens - len(self.token_ids)),
                state=state,
                tuner=self.session.tuner_for(settings.tree.max_depth) if settings.tuned else None,
                controls=self.controls,
                answer_start=len(self.prompt_ids),
            )
            try:
                for chunk in stream:
                    if carry:
                        chunk, carry = dataclasses.replace(chunk, text=carry + chunk.text), ""
                    self.token_ids.extend(chunk.token_ids)
                    released.append(chunk.text)
                    if self.splitter is not None:
                        chunk = split_reasoning(chunk, self.splitter)
                    if chunk.finish_reason is not None:
                        self.finish_reason = chunk.finish_reason
                    yield chunk
                    committed = (
                        state.target_cache.length,
                        state.draft_cache.length if state.draft_cache is not None else 0,
                    )
                return
            except out_of_memory_errors():
                # stream_generate's cleanup cut the tokens back to prompt + emitted; make both caches consistent
                _crop_consistent(state.target_cache, committed[0])
                _crop_consistent(state.draft_cache, committed[1])
                old = settings.tree.budget
                choice = self.session.tuner.current if settings.tuned and self.session.tuner else None
                if choice is not None and choice.config.budget:
                    old = min(old, choice.config.budget)  # the tree that ran out, below the tuner's cap
                if settings.method == "sequential" or old <= 1:
                    raise
                if torch.cuda.is_available():
                    torch.cuda.empty_cache()
                settings = dataclasses.replace(
                    settings, tree=dataclasses.replace(settings.tree, budget=max(1, old // 2))
                )
                self.settings = settings
                carry += self._held_back_text("".join(released) + carry)
                yield BudgetCut(old, settings.tree.budget)
            finally:
                stream.close()

    def _held_back_text(self, released: str) -> str:
        """Text of the tokens so far that the failed stream had not released yet (held back because a stop
        string might have begun there). The retried stream starts a new stop-string filter, so a stop string
        that straddles the out-of-memory retry is not recognised (a rare case, documented)."""
        detok = IncrementalDetokenizer(self.session.tokenizer, self.prompt_ids)
        full = "".join(detok.push(token) for token in self.token_ids)
        return full[len(released) :] if full.startswith(released) else ""

    def _install_fault_seam(self):
        """Test seam: call `fault_hook` before the middle decoder layer of every target forward, so an
        exception it raises (an injected torch.cuda.OutOfMemoryError) leaves the cache half-written, like a
        real one. Returns the hook handle."""
        hook = self.fault_hook
        layers = self.session.target.decoder_layers
        return layers[len(layers) // 2].register_forward_pre_hook(lambda _module, _args: hook())
