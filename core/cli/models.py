"""Loading the target/draft pair for a command, with the tokenizer check."""

from __future__ import annotations

import argparse
import sys

from core.loading import LoadedModel, check_same_tokenizer, load_model


def load_pair(args: argparse.Namespace, need_draft: bool = True) -> tuple[LoadedModel, LoadedModel | None]:
    """Load --target (and --draft when the method needs one); refuse pairs whose tokenizers differ."""
    progress = (lambda message: print(message, file=sys.stderr)) if not getattr(args, "json", False) else None
    target = load_model(args.target, dtype=args.dtype, device=args.device, progress=progress)
    if not need_draft:
        return target, None
    draft = load_model(args.draft, dtype=args.dtype, device=args.device, progress=progress)
    check_same_tokenizer(target.tokenizer, draft.tokenizer, args.target, args.draft)
    return target, draft
