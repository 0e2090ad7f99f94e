"""A conversation rendered with the model's own chat template, its failures said in words.

A chat template is the model's own code (Jinja, run in transformers' sandbox), and like any file of a model
folder it can be broken (a damaged or hand-edited chat_template.jinja or tokenizer_config.json) or refuse a
conversation it was not written for: `raise_exception("Conversation roles must alternate ...")`, or a field
the conversation lacks. Either reached callers as a jinja2 traceback, which the engine reported as its own bug.

Plain Python (jinja2 is imported when a template fails): the app's process uses core.text.reasoning, which
renders through this module.
"""

from __future__ import annotations

from typing import Any

from core.errors import InvalidSettingError, ModelFormatError


def render_template(
    tokenizer: Any, messages: list[dict[str, Any]], add_generation_prompt: bool = True, **variables: Any
) -> str:
    """`messages` as the model's chat template writes them (text, not ids), with the answer's header when
    `add_generation_prompt`; `variables`: what the template reads besides (tools, enable_thinking, ...).

    Raises:
        ModelFormatError: the template is not valid Jinja (the model's files are damaged).
        InvalidSettingError: the template refused this conversation, in its own words where it gave some.
    """
    try:
        return tokenizer.apply_chat_template(
            messages, add_generation_prompt=add_generation_prompt, tokenize=False, **variables
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
