"""Checks of a model's tokenizer once it is loaded, before any prompt reaches it.

A tokenizer comes from outside (tokenizer.json, tokenizer_config.json, a chat template, or the vocabulary in a
GGUF file), and what transformers and the `tokenizers` library accept when they read those files can still
fail on the first text: a post-processor naming a special token the vocabulary lacks fails every encode, a
`model_max_length` that is not a number fails every prompt. Found at load, such a model is refused in words
("download its tokenizer files again") instead of failing its first answer as the engine's own bug.

`tokenizers` is written in Rust: where its code panics, Python sees pyo3's PanicException, which derives from
BaseException so that `except Exception` lets it through, and a panic while loading or probing ended the
engine process. `is_library_fault` counts it with the ordinary exceptions.
"""

from __future__ import annotations

import json
from typing import Any

from core.errors import DamagedModelError, ModelFormatError, SpecExecError

# Text of the kinds people type: punctuation, digits, whitespace, accents, a dash, CJK, an emoji, markup.
PROBE_TEXT = "Hello, world! 42 + 7 = 49.\n\tCafé — naïve 你好 🙂 <b>bold</b>"


def is_rust_panic(error: BaseException) -> bool:
    """Whether `error` is a panic of a Rust library reaching Python through pyo3 (tokenizers, safetensors).
    Its class is made inside pyo3 and cannot be imported, hence the check by name."""
    kind = type(error)
    return kind.__name__ == "PanicException" and kind.__module__ == "pyo3_runtime"


def is_library_fault(error: BaseException) -> bool:
    """Whether `error` is a failure of the library called rather than a request to stop (KeyboardInterrupt,
    SystemExit): an ordinary exception, or a Rust library's panic."""
    return isinstance(error, Exception) or is_rust_panic(error)


def check_chat_template(name: str, tokenizer: Any) -> None:
    """Refuse a chat template that is not Jinja text (one, or several by name), and several templates none of
    which is named "default", the one transformers writes a chat with (a "tool_use" one serves only requests
    with tools): transformers loads any of these, and the first prompt then failed as the engine's own bug."""
    template = getattr(tokenizer, "chat_template", None)
    texts = template.values() if isinstance(template, dict) else [template]
    if template is not None and not all(isinstance(text, str) for text in texts):
        raise ModelFormatError(
            f"the chat template of {name} is not text (it is {json.dumps(template)[:80]}): download the model's "
            "tokenizer files (tokenizer_config.json, chat_template.jinja) again"
        )
    if isinstance(template, dict) and template and "default" not in template:
        names = ", ".join(repr(key) for key in list(template)[:5])
        raise ModelFormatError(
            f"the chat templates of {name} ({names}) include none named 'default', the one a chat is written "
            "with: download the model's tokenizer files (tokenizer_config.json) again"
        )


def check_tokenizer_runs(tokenizer: Any, where: str, remedy: str) -> None:
    """Encode PROBE_TEXT with and without the special tokens the tokenizer adds (a plain prompt and a chat
    prompt, core.text.prompts), and turn the ids back into text and into tokens as the engine's streaming
    does (core.text.detokenize). Raises DamagedModelError naming `where` (which tokenizer) and `remedy` (what
    to download again) when any of it fails."""
    try:
        for add_special_tokens in (True, False):
            ids = tokenizer(PROBE_TEXT, add_special_tokens=add_special_tokens)["input_ids"]
            tokenizer.decode(ids, skip_special_tokens=True, clean_up_tokenization_spaces=False)
            tokenizer.convert_ids_to_tokens(ids)
    except (SpecExecError, MemoryError):
        raise
    except BaseException as error:
        if not is_library_fault(error):
            raise
        fault = " ".join(f"{type(error).__name__}: {error}".split())[:300]
        raise DamagedModelError(
            f"{where} fails on ordinary text ({fault}): its files are damaged or were written for another "
            f"program. Download {remedy} again"
        ) from error
