"""The generation stream: one chunk per target pass, with text deltas, stats and a finish reason.

Three layers (as in mlx-lm): the method step generators in core/decoding/methods yield tokens per pass; this module
turns them into a stream of typed chunks (stop conditions, detokenisation, never more than
max_new_tokens); `generate` is the blocking convenience call.
"""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from transformers import PreTrainedTokenizerBase

from core.decoding.autotune.chooser import AutoTuner, Choice, candidate_configs
from core.modeling.causal_lm import CausalLM
from core.decoding.decode_state import DecodeState
from core.decoding.defaults import Method
from core.text.detokenize import IncrementalDetokenizer
from core.errors import ContextLengthError, InvalidSettingError
from core.decoding.methods.auto import auto_steps
from core.decoding.methods.sequential import sequential_steps
from core.decoding.methods.specexec import specexec_steps
from core.decoding.settings import DecodingSettings, SamplingParams
from core.decoding.methods.specinfer import specinfer_steps
from core.decoding.methods.step import OutputControls, PassStats, Step, TokenLogprob
from core.text.reasoning import ReasoningSplitter, ThinkingFormat
from core.text.counts import token_count

FinishReason = Literal["eos", "stop", "length"]


@dataclass(frozen=True)
class GenerationChunk:
    """What one target pass delivered: new token ids, the text they complete, stats, and the finish
    reason on the last chunk (None before).

    With a thinking model's markers given (stream_generate's `thinking`), the text is cut in two:
    `reasoning` is the model's thinking (its `<think>` block, markers left out) and `text` the answer
    proper; without, `reasoning` stays empty and `text` is everything. Either may be empty in a chunk."""

    token_ids: list[int]
    text: str
    stats: PassStats
    finish_reason: FinishReason | None = None
    choice: Choice | None = None  # the tuner's choice this pass ran with (tuned settings only)
    logprobs: list[TokenLogprob] | None = None  # one per token in token_ids, when asked for (OutputControls)
    reasoning: str = ""


@dataclass(frozen=True)
class GenerationResult:
    text: str
    token_ids: list[int]
    finish_reason: FinishReason
    target_passes: int
    seconds: float
    reasoning: str = ""

    @property
    def tokens_per_pass(self) -> float:
        return len(self.token_ids) / max(self.target_passes, 1)


class _StopStringFilter:
    """Releases text only when no stop string can still begin in it; finds the first stop string."""

    def __init__(self, stops: tuple[str, ...]) -> None:
        self._stops = stops
        self.text = ""
        self._released = 0

    def add(self, delta: str) -> bool:
        """Append text; return True when a stop string is complete (text is then cut before it)."""
        self.text += delta
        hits = [i for i in (self.text.find(s, self._released) for s in self._stops) if i >= 0]
        if hits:
            self.text = self.text[: min(hits)]
            return True
        return False

    def release(self, final: bool) -> str:
        """Text safe to show now (all of it when `final`)."""
        end = len(self.text)
        if not final:
            for stop in self._stops:
                for size in range(min(len(stop) - 1, end - self._released), 0, -1):
                    if self.text.endswith(stop[:size]):
                        end = min(end, len(self.text) - size)
                        break
        out = self.text[self._released : end]
        self._released = end
        return out


def _method_steps(
    method: Method,
    state: DecodeState,
    target: CausalLM,
    draft: CausalLM | None,
    params: SamplingParams,
    settings: DecodingSettings,
    max_new_tokens: int,
    tuner: AutoTuner | None,
    controls: OutputControls | None = None,
) -> Iterator[Step]:
    """The step generator for the method; `tuner` (set exactly when the settings are tuned) picks per pass.
    SpecExec passes take their draft forwards from the pair's adaptive-depth policy when the setting is on.
    `controls` (a grammar, log-probabilities) work with plain decoding and SpecExec, not SpecInfer."""
    if controls is not None and controls.active and method == "specinfer":
        raise InvalidSettingError(
            "structured output and log-probabilities need SpecExec or plain decoding, "
            "not SpecInfer: choose another method"
        )
    if params.occurrence_penalties and method == "specinfer":
        raise InvalidSettingError(
            "presence and frequency penalties need SpecExec or plain decoding, not SpecInfer: choose another method"
        )
    depth = None
    if draft is not None and settings.tree.adaptive_depth and method in ("specexec", "auto"):
        from core.decoding.autotune.setup import depth_policy_for

        depth = depth_policy_for(target, draft)
    if tuner is not None:
        tuner.begin(
            candidate_configs(
                settings.method,
                None if settings.auto_budget else settings.tree.budget,
                settings.tree.expand,
                settings.tree.budget,
                draft is not None,
            )
        )
        return auto_steps(state, target, draft, params, settings.tree, tuner, max_new_tokens, depth, controls)
    if method == "sequential":
        return sequential_steps(state, target, params, max_new_tokens, controls)
    if draft is None:
        raise InvalidSettingError(f"method '{method}' needs a draft model")
    if method == "specexec":
        return specexec_steps(state, target, draft, params, settings.tree, max_new_tokens, depth, controls)
    return specinfer_steps(state, target, draft, params, settings.tree, max_new_tokens)


def split_reasoning(chunk: GenerationChunk, splitter: ReasoningSplitter) -> GenerationChunk:
    """The chunk with its text cut into reasoning and answer text by `splitter` (which holds back what may
    be the start of a marker, and lets it go with the last chunk)."""
    split = splitter.push(chunk.text)
    if chunk.finish_reason is not None:
        last = splitter.finish()
        split = dataclasses.replace(
            split, reasoning=split.reasoning + last.reasoning, content=split.content + last.content
        )
    return dataclasses.replace(chunk, text=split.content, reasoning=chunk.reasoning + split.reasoning)


def fit_tree_to_target(settings: DecodingSettings, target: CausalLM, draft: CausalLM | None = None) -> DecodingSettings:
    """Cap the tree budget at the tree rows both models' KV caches were planned with (`CausalLM.tree_rows`:
    the planned tree budget, lowered by an offloaded target that is short of VRAM for bigger trees)."""
    cap = min(model.tree_rows for model in (target, draft) if model is not None)
    if settings.tree.budget <= cap:
        return settings
    return dataclasses.replace(settings, tree=dataclasses.replace(settings.tree, budget=cap))


def check_context(prompt_len: int, models: list[CausalLM]) -> int:
    """Raise ContextLengthError if the prompt leaves no room to generate; return the room left."""
    limit = min(m.max_context for m in models)
    if prompt_len >= limit:
        raise ContextLengthError(
            f"the prompt is {token_count(prompt_len)} but the model's context window is {token_count(limit)}; "
            "shorten the prompt or start a new conversation",
            prompt_tokens=prompt_len,
        )
    return limit - prompt_len


def check_token_ids(prompt_ids: list[int], target: CausalLM, tokenizer: PreTrainedTokenizerBase) -> None:
    """Raise InvalidSettingError, in words, for a prompt token the target's weights have no row for: a
    tokenizer can know more tokens than its model (one from another model, or a token added without resizing
    the embedding, as some fine-tunes' "<pad>"), and such an id indexed past the embedding (a traceback on a
    CPU, a device-side assert that ends the process on a GPU). A draft with fewer rows takes such a token as
    its last row (DecodeState.prefill_pending)."""
    rows = target.vocab_size
    outside = next((token for token in prompt_ids if not 0 <= token < rows), None)
    if outside is not None:
        raise InvalidSettingError(
            f"the prompt holds token {outside} ({tokenizer.convert_ids_to_tokens(outside)!r}), past the "
            f"{rows:,} tokens this model's weights have rows for: its tokenizer knows tokens its weights do not "
            "(it belongs to another model, or had tokens added). Leave that text out of the prompt, or download "
            "the model again"
        )


def stream_generate(
    target: CausalLM,
    draft: CausalLM | None,
    tokenizer: PreTrainedTokenizerBase,
    prompt_ids: list[int],
    params: SamplingParams,
    settings: DecodingSettings,
    state: DecodeState | None = None,
    tuner: AutoTuner | None = None,
    controls: OutputControls | None = None,
    thinking: ThinkingFormat | None = None,
    answer_start: int | None = None,
) -> Iterator[GenerationChunk]:
    """Yield one chunk per target pass until EOS, a stop string, or exactly max_new_tokens tokens.

    `state` lets a chat session reuse KV caches: it is reset to `prompt_ids` (keeping the shared prefix)
    and left holding prompt + emitted tokens at the end. `tuner` drives tuned settings (see
    DecodingSettings.tuned) and keeps what it learned for the next call; None builds one for the pair.
    `controls`: a grammar the answer must match and log-probabilities to report (core.decoding.methods.step).
    `thinking`: a thinking model's markers (core.text.reasoning.thinking_format): each chunk's reasoning and
    answer text come apart (GenerationChunk.reasoning); stop strings apply to both, as they are generated.
    `answer_start`: where the answer begins in `prompt_ids` for the presence and frequency penalties (None:
    after the prompt; a retried answer's prompt holds its first tokens).
    """
    if not prompt_ids:
        raise InvalidSettingError("the prompt is empty")
    room = check_context(len(prompt_ids), [target] + ([draft] if draft is not None else []))
    check_token_ids(prompt_ids, target, tokenizer)
    settings = fit_tree_to_target(settings, target, draft if settings.method != "sequential" else None)
    max_new = min(settings.max_new_tokens, room)
    if state is None:
        state = DecodeState.fresh(prompt_ids, target, draft if settings.method != "sequential" else None)
    else:
        state.reset_tokens(prompt_ids)
        if draft is not None and settings.method != "sequential" and state.draft_cache is None:
            state.draft_cache = draft.new_cache()
    state.answer_start = len(prompt_ids) if answer_start is None else answer_start
    eos = set(target.eos_token_ids)
    detok = IncrementalDetokenizer(tokenizer, prompt_ids)
    stops = _StopStringFilter(settings.stop)
    emitted: list[int] = []
    if not settings.tuned:
        tuner = None
    elif tuner is None:
        from core.decoding.autotune.setup import tuner_for_pair

        tuner = tuner_for_pair(target, draft, settings.tree.max_depth)
    steps = _method_steps(settings.method, state, target, draft, params, settings, max_new, tuner, controls)
    splitter = ReasoningSplitter(thinking) if thinking is not None else None
    try:
        for step in steps:
            chunk_ids: list[int] = []
            finish: FinishReason | None = None
            for token in step.token_ids:
                chunk_ids.append(token)
                emitted.append(token)
                if token in eos:
                    finish = "eos"
                elif stops.add(detok.push(token)):
                    finish = "stop"
                elif len(emitted) >= max_new:
                    finish = "length"
                if finish:
                    break
            stats = step.stats
            if len(chunk_ids) < stats.tokens:  # cut at EOS / stop / length: count what is delivered, not accepted
                stats = dataclasses.replace(stats, tokens=len(chunk_ids))
            choice = tuner.current if tuner is not None else None
            logprobs = None if step.logprobs is None else step.logprobs[: len(chunk_ids)]
            chunk = GenerationChunk(chunk_ids, stops.release(final=finish is not None), stats, finish, choice, logprobs)
            yield chunk if splitter is None else split_reasoning(chunk, splitter)
            if finish:
                return
    finally:
        steps.close()
        state.truncate(len(prompt_ids) + len(emitted))


def generate(*args, **kwargs) -> GenerationResult:
    """Blocking convenience call over stream_generate (same arguments)."""
    started = time.perf_counter()
    text, reasoning, ids, passes, finish = [], [], [], 0, "length"
    for chunk in stream_generate(*args, **kwargs):
        text.append(chunk.text)
        reasoning.append(chunk.reasoning)
        ids.extend(chunk.token_ids)
        passes += 1
        finish = chunk.finish_reason or finish
    return GenerationResult("".join(text), ids, finish, passes, time.perf_counter() - started, "".join(reasoning))
