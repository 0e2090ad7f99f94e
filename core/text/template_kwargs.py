"""Variables for a model's chat template that come from outside (an API request's `chat_template_kwargs`,
e.g. {"enable_thinking": false} for Qwen3): checked before they reach the template, and narrowed to the
ones the template reads. Plain Python: the API server checks requests with it without loading transformers.
"""

from __future__ import annotations

import json
import re
from typing import Any

from core.errors import InvalidSettingError

# Names a request's template variables may not take: apply_chat_template's own arguments and what it hands
# the template itself (the special tokens, the messages); a client must not replace them.
RESERVED_TEMPLATE_NAMES = frozenset(
    {
        "messages",
        "conversation",
        "tools",
        "documents",
        "chat_template",
        "add_generation_prompt",
        "continue_final_message",
        "tokenize",
        "padding",
        "truncation",
        "max_length",
        "return_tensors",
        "return_dict",
        "return_assistant_tokens_mask",
        "tokenizer_kwargs",
        "raise_exception",
        "strftime_now",
        "bos_token",
        "eos_token",
        "unk_token",
        "pad_token",
        "sep_token",
        "cls_token",
        "mask_token",
        "additional_special_tokens",
    }
)
_TEMPLATE_NAME = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,63}")


def check_template_kwargs(kwargs: object) -> dict[str, Any]:
    """Template variables from outside (an API request's chat_template_kwargs), checked: an object of at
    most 16 names that are identifiers and not RESERVED_TEMPLATE_NAMES, with JSON values.

    Raises:
        InvalidSettingError: saying which name or value is refused.
    """
    if kwargs is None:
        return {}
    if not isinstance(kwargs, dict) or len(kwargs) > 16:
        raise InvalidSettingError("chat_template_kwargs must be an object of at most 16 template variables")
    for name, value in kwargs.items():
        if not isinstance(name, str) or not _TEMPLATE_NAME.fullmatch(name):
            raise InvalidSettingError(f"chat_template_kwargs: {name!r} is not a template variable name")
        if name in RESERVED_TEMPLATE_NAMES:
            raise InvalidSettingError(f"chat_template_kwargs: {name!r} is set by the server, not by a request")
        try:
            json.dumps(value)
        except (TypeError, ValueError) as error:
            raise InvalidSettingError(f"chat_template_kwargs: the value of {name!r} is not JSON") from error
    return dict(kwargs)


def template_variables(tokenizer: Any, kwargs: dict[str, Any]) -> dict[str, Any]:
    """The variables of `kwargs` the model's template reads (as vLLM does, the others are left out: clients
    send enable_thinking to every model, and a template that never mentions it cannot use it)."""
    source = template_source(tokenizer)
    return {name: value for name, value in kwargs.items() if re.search(rf"\b{re.escape(name)}\b", source)}


def template_source(tokenizer: Any) -> str:
    """The text of a tokenizer's chat template(s) ("" when it has none)."""
    template = getattr(tokenizer, "chat_template", None) or ""
    return "\n".join(template.values()) if isinstance(template, dict) else str(template)
