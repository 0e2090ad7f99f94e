"""A conversation rendered with the model's own chat template, its failures said in words.

A chat template is the model's own code (Jinja, run in transformers' sandbox), and like any file of a model
folder it can be broken (a damaged or hand-edited chat_template.jinja or tokenizer_config.json) or refuse a
conversation it was not written for: `raise_exception("Conversation roles must alternate ...")`, or a field
the conversation lacks. Either reached callers as a jinja2 traceback, which the engine reported as its own bug.

Plain Python (jinja2 is imported when a template fails): the app's process uses core.text.reasoning, which
renders through this module.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from core.errors import InvalidSettingError, ModelFormatError
from core.system.time_limit import call_within

# A template writes a conversation in milliseconds; one still running after this long never ends (a loop in a
# loop over range(100000): hours), and would hold the engine where a Stop cannot reach it.
TEMPLATE_SECONDS = 10.0
T = TypeVar("T")


def within_template_time(render: Callable[[], T]) -> T:
    """`render()`, a call of the model's chat template, stopped after TEMPLATE_SECONDS.

    Raises:
        ModelFormatError: the template ran longer.
    """
    try:
        return call_within(TEMPLATE_SECONDS, render)
    except TimeoutError:
        raise ModelFormatError(
            f"the model's chat template did not finish writing the conversation in {TEMPLATE_SECONDS:g} seconds, "
            "so it was stopped: its tokenizer files (tokenizer_config.json, chat_template.jinja) are damaged or "
            "were made to hang; download them again or choose another model"
        ) from None


def render_template(
    tokenizer: Any, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **variables: Any
) -> str:
    """`messages` as the model's chat template writes them (text, not ids), with the answer's header when
    `add_generation_prompt`; `variables`: what the template reads besides (tools, enable_thinking, ...).

    Raises:
        ModelFormatError: the template is not valid Jinja (the model's files are damaged), or it ran for
            TEMPLATE_SECONDS without finishing.
        InvalidSettingError: the template refused this conversation, in its own words where it gave some.
    """
    try:
        return within_template_time(
            lambda: tokenizer.apply_chat_template(
                messages, add_generation_prompt=add_generation_prompt, tokenize=False, **variables
            )
        )
    except Exception as error:
        import jinja2

        if isinstance(error, jinja2.TemplateSyntaxError):
            raise ModelFormatError(
                f"the model's chat template is broken (line {error.lineno}: {error.message}): download the "
                "model's tokenizer files (tokenizer_config.json, chat_template.jinja) again"
            ) from error
        if isinstance(error, jinja2.TemplateError):
            raise InvalidSettingError(f"the model's chat template cannot write this conversation: {error}") from error
        raise
