"""Loading a target and its draft: the one way the engine process and the command line both load a pair.

The draft loads first, so that an offloaded target's default VRAM budget is measured with the draft already
on the card (and with the draft's KV cache and graphs reserved: OffloadSettings.with_draft). Both models are
looked for before either loads, so a missing target is said at once, not after a minute spent on the draft.
A pair whose tokenizers differ is refused: the draft's guesses would be other tokens than the target's; so is a
draft that scores more tokens than its target (`check_draft_rows`).
The pair has one context, the shorter model's: the draft's KV cache is not planned for rows the target
cannot keep.
"""

from __future__ import annotations

from collections.abc import Callable

from core.errors import TokenizerMismatchError
from core.loading.load import LoadedModel, check_model_exists, check_same_tokenizer, load_model
from core.loading.offload_settings import OffloadSettings
from core.modeling.model_files import Progress, WeightProgress

# (role, spec) -> the progress callbacks for that model's load: a sentence per step, and bytes of weights read
ProgressFor = Callable[[str, str], tuple[Progress | None, WeightProgress | None]]


def load_pair(
    target: str,
    draft: str | None,
    *,
    offload: OffloadSettings,
    dtype: str = "auto",
    device: str = "auto",
    context_length: int | None = None,
    tree_budget: int | None = None,
    progress_for: ProgressFor | None = None,
    fit_context: bool = False,
) -> tuple[LoadedModel, LoadedModel | None]:
    """Load `draft` (when given) and then `target`, both planned for `context_length` and `tree_budget`
    (load_model's meaning, `fit_context` too); `offload` is the target's offloading settings. Both end up
    planned for one context, the shorter model's.

    Raises what load_model raises, ModelNotFoundError before anything loads, and TokenizerMismatchError for a
    pair whose tokenizers differ or whose draft scores more tokens than its target.
    """
    check_model_exists(target)
    if draft is not None:
        check_model_exists(draft)

    def load(role: str, spec: str, settings: OffloadSettings | None, context: int | None, fit: bool) -> LoadedModel:
        progress, weight_progress = progress_for(role, spec) if progress_for is not None else (None, None)
        return load_model(
            spec,
            dtype=dtype,
            device=device,
            progress=progress,
            weight_progress=weight_progress,
            offload=settings,
            context_length=context,
            tree_budget=tree_budget,
            role=role,
            fit_context=fit,
        )

    if draft is None:
        return load("target", target, offload.with_draft(None), context_length, fit_context), None
    draft_model = load("draft", draft, None, context_length, fit_context)
    # the target is planned for the draft's context (an explicit one the draft refused is not reached), and
    # where it keeps less the draft's follows: caches are made when a conversation starts, not here
    fit = fit_context or context_length is None
    target_model = load("target", target, offload.with_draft(draft_model.lm), draft_model.lm.max_context, fit)
    check_same_tokenizer(target_model.tokenizer, draft_model.tokenizer, target, draft)
    check_draft_rows(target_model, draft_model, target, draft)
    draft_model.lm.max_context = min(draft_model.lm.max_context, target_model.lm.max_context)
    return target_model, draft_model


def check_draft_rows(target: LoadedModel, draft: LoadedModel, target_spec: str, draft_spec: str) -> None:
    """Raise TokenizerMismatchError for a draft that scores more tokens than its target: with the same
    tokenizer the extra rows are padding, but the draft could still propose one, and the target would index
    past its embedding (a device-side assert on a GPU). A draft with fewer rows works (Qwen2.5's 0.5B-3B
    models drafting its 7B-72B: 151,936 against 152,064; DecodeState.prefill_pending)."""
    if draft.lm.vocab_size > target.lm.vocab_size:
        raise TokenizerMismatchError(
            f"the draft model {draft_spec} scores {draft.lm.vocab_size:,} tokens and the target {target_spec} only "
            f"{target.lm.vocab_size:,}: the draft could propose tokens the target has no row for. Pick a draft "
            "that scores no more tokens than the target (the same family's smaller models do)"
        )
