"""An answer carried on from where it was cut off (the app's Continue, the API's `continue_final_message`).

The conversation ends with the assistant's answer so far. Its prompt is the conversation before that answer,
written by the model's chat template with the answer's header (the generation prompt), followed by the answer
so far as the model wrote it: its thinking inside the template's markers, then its text. That is the text
the model had before it when it stopped, whatever the template does with earlier answers (DeepSeek-R1's
drops their thinking, Qwen3's keeps it only after the last question), so the model goes on mid-thought or
mid-sentence rather than starting again. transformers' own `continue_final_message` renders the answer
through the template instead, which loses the thinking of an answer cut off while it thought.

Plain Python (no torch): the engine and the API server both check a conversation with it.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from core.errors import InvalidSettingError
from core.text.reasoning import ThinkingFormat


def answer_to_continue(messages: list[dict[str, Any]]) -> dict[str, Any]:
    """The last message, checked to be an answer that can go on.

    Raises:
        InvalidSettingError: the conversation does not end with an assistant's answer holding text or thinking
            (a call of tools is answered by their results, not continued).
    """
    last = messages[-1] if messages else {}
    if last.get("role") != "assistant":
        raise InvalidSettingError(
            "to continue an answer, the conversation must end with the assistant's answer so far "
            f"(it ends with a '{last.get('role', 'nothing')}' message)"
        )
    if last.get("tool_calls"):
        raise InvalidSettingError("an answer that calls tools cannot be continued: send the tools' results instead")
    if not (last.get("content") or last.get("reasoning_content")):
        raise InvalidSettingError("the answer to continue is empty: ask for a new answer instead")
    if len(messages) < 2:
        raise InvalidSettingError("to continue an answer, the conversation needs the message it answers")
    return last


def answer_so_far(answer: dict[str, Any], fmt: ThinkingFormat | None) -> str:
    """The text the model wrote for `answer` (its `reasoning_content` and `content`), as it follows the
    generation prompt: the thinking between `fmt`'s markers (the opening one unless the prompt opened the
    block), the text after them. Whitespace the reading dropped around the markers comes back as the models
    named in core.text.reasoning write it (a newline inside the markers, a blank line after them)."""
    content, reasoning = answer.get("content") or "", answer.get("reasoning_content") or ""
    if fmt is None:
        return content
    if not reasoning:  # no thought: the answer only, after a closing marker if the prompt opened the block
        return f"{fmt.close}\n\n{content}" if fmt.starts_inside else content
    opened = "" if fmt.starts_inside else f"{fmt.open}\n"
    return f"{opened}{reasoning}\n{fmt.close}\n\n{content}" if content else opened + reasoning


def continued_format(answer: dict[str, Any], fmt: ThinkingFormat | None) -> ThinkingFormat | None:
    """The reasoning markers of the text that goes on from `answer` (`fmt`: the fresh answer's): inside the
    block when the answer was cut off while it thought, with its reasoning already begun; no block at all
    once it has text (what follows is text, a `<think>` in it included)."""
    if fmt is None or answer.get("content"):
        return None
    return replace(fmt, starts_inside=True, resumes=True)
