"""Turning user input into prompt token ids: plain text, or chat messages (and tools) through the model's
template (which tool-call format a template asks for: core.text.tool_format)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from transformers import PreTrainedTokenizerBase

from core.errors import InvalidSettingError, ModelFormatError
from core.system import json_text
from core.system.text_files import read_text_file
from core.text.chat_template import render_template
from core.text.continuation import answer_so_far, answer_to_continue, continued_format
from core.text.reasoning import ThinkingFormat, thinking_format
from core.text.template_kwargs import template_variables
from core.text.tool_format import Tool, tool_call_format

_LONE_SURROGATE = re.compile("[\ud800-\udfff]")  # in a str, a pair from JSON is already one code point
Message = dict[str, Any]  # role and content; an assistant's tool_calls, a tool's tool_call_id


@dataclass(frozen=True)
class Prompt:
    """One prompt: chat `messages` (with the `tools` the template renders, and `template_kwargs`: variables
    for the template such as Qwen3's enable_thinking) or plain `text` (exactly one of messages and text is
    set). `continue_final`: the messages end with an answer cut off, which the model goes on with
    (core.text.continuation) instead of starting a new one."""

    messages: tuple[Message, ...] | None = None
    text: str | None = None
    tools: tuple[Tool, ...] = ()
    template_kwargs: dict[str, Any] = field(default_factory=dict)
    continue_final: bool = False


def chat_variables(
    tokenizer: PreTrainedTokenizerBase, tools: tuple[Tool, ...] = (), template_kwargs: dict[str, Any] | None = None
) -> dict[str, Any]:
    """What the chat template reads besides the messages: the `template_kwargs` it knows, and the tools."""
    variables = template_variables(tokenizer, template_kwargs or {})
    if tools:
        variables["tools"] = list(tools)
    return variables


def render_chat(
    tokenizer: PreTrainedTokenizerBase,
    messages: list[Message],
    tools: tuple[Tool, ...] = (),
    template_kwargs: dict[str, Any] | None = None,
) -> str:
    """The model's own chat template (with `tools` when given, and the `template_kwargs` it reads),
    ending with the assistant's turn header.

    Raises:
        ModelFormatError: the model has no chat template, or a broken one.
        InvalidSettingError: tools were given but the template has no tool support, or the template refused
            the conversation (core.text.chat_template).
    """
    if not getattr(tokenizer, "chat_template", None):
        raise ModelFormatError("this model has no chat template; use a plain --prompt without --chat")
    if tools and tool_call_format(tokenizer) is None:
        raise InvalidSettingError(
            "this model's chat template has no tool support (tool calls need a model such as "
            "Qwen2.5 or Llama 3.1); send the request without tools"
        )
    return render_template(tokenizer, list(messages), **chat_variables(tokenizer, tools, template_kwargs))


def chat_prompt(prompt: Prompt) -> Prompt:
    """A plain-text prompt as a one-message chat (messages are kept as they are)."""
    if prompt.messages is not None:
        return prompt
    return Prompt(
        messages=({"role": "user", "content": prompt.text},), tools=prompt.tools, template_kwargs=prompt.template_kwargs
    )


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, chat: bool = False) -> list[int]:
    """Token ids for a prompt. Messages always use the chat template; text uses it when `chat` is set. An
    answer to continue follows the template's rendering of the messages before it, as the model wrote it
    (tokenized apart, as its tokens came after the prompt's)."""
    if prompt.messages is not None:
        messages = list(prompt.messages)
        answer = answer_to_continue(messages) if prompt.continue_final else None
        if answer is not None:
            messages = messages[:-1]
        rendered = render_chat(tokenizer, messages, prompt.tools, prompt.template_kwargs)
        ids = tokenizer(readable_text(rendered), add_special_tokens=False)["input_ids"]
        if answer is not None:
            fmt = _fresh_answer_format(tokenizer, messages, prompt)
            ids += tokenizer(readable_text(answer_so_far(answer, fmt)), add_special_tokens=False)["input_ids"]
        return ids
    if chat:
        return encode_prompt(tokenizer, chat_prompt(prompt))
    return tokenizer(readable_text(prompt.text))["input_ids"]


def answer_thinking(tokenizer: PreTrainedTokenizerBase, prompt: Prompt) -> ThinkingFormat | None:
    """The reasoning markers of the answer `prompt` asks for (core.text.reasoning; None for plain text or a
    model that does not think); for an answer to continue, those of the text that goes on from it."""
    if prompt.messages is None:
        return None
    messages = list(prompt.messages)
    if not prompt.continue_final:
        return _fresh_answer_format(tokenizer, messages, prompt)
    return continued_format(messages[-1], _fresh_answer_format(tokenizer, messages[:-1], prompt))


def _fresh_answer_format(
    tokenizer: PreTrainedTokenizerBase, messages: list[Message], prompt: Prompt
) -> ThinkingFormat | None:
    """The reasoning markers of a new answer to `messages`, with `prompt`'s tools and template variables."""
    return thinking_format(tokenizer, messages, **chat_variables(tokenizer, prompt.tools, prompt.template_kwargs))


def readable_text(text: str) -> str:
    """`text` with each lone surrogate as U+FFFD, the mark a decoder puts for what is not text. A command
    line's bytes that are not UTF-8 reach Python as lone surrogates, and so does a JSON escape such as
    "\\ud800" in a prompt file or a tool's result; no tokenizer reads one (a TypeError the engine took for its
    own bug). The API refuses them in words instead (core.server.requests.check_tree)."""
    return _LONE_SURROGATE.sub("\ufffd", text)


def _check_messages(messages: object, where: str) -> tuple[Message, ...]:
    if not isinstance(messages, list) or not messages:
        raise InvalidSettingError(f"{where}: 'messages' must be a non-empty list")
    for message in messages:
        if (
            not isinstance(message, dict)
            or not isinstance(message.get("role"), str)
            or not isinstance(message.get("content"), str)
        ):
            raise InvalidSettingError(f"{where}: each message needs string 'role' and 'content' fields")
    return tuple(messages)


def read_prompt_file(path: str | Path) -> list[Prompt]:
    """JSON Lines: each line has `messages` (chat) or `text` (plain)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"prompt file not found: {path}")
    prompts = []
    for number, line in enumerate(read_text_file(path).splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json_text.loads(line)
        except json.JSONDecodeError as error:
            raise InvalidSettingError(f"{where}: not valid JSON ({error.msg})") from error
        if isinstance(record, dict) and "messages" in record:
            prompts.append(Prompt(messages=_check_messages(record["messages"], where)))
        elif isinstance(record, dict) and isinstance(record.get("text"), str):
            prompts.append(Prompt(text=record["text"]))
        else:
            raise InvalidSettingError(f"{where}: each line needs 'messages' (chat) or 'text' (plain prompt)")
    if not prompts:
        raise InvalidSettingError(f"{path}: no prompts in file")
    return prompts


def read_messages_file(path: str | Path) -> Prompt:
    """A conversation for `generate --messages-file`: either one message object per line, or the first
    line of a prompt file (an object with `messages`)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"messages file not found: {path}")
    lines = [line for line in read_text_file(path).splitlines() if line.strip()]
    try:
        records = [json_text.loads(line) for line in lines]
    except json.JSONDecodeError as error:
        raise InvalidSettingError(f"{path}: not valid JSON Lines ({error.msg})") from error
    if records and isinstance(records[0], dict) and "messages" in records[0]:
        return Prompt(messages=_check_messages(records[0]["messages"], str(path)))
    return Prompt(messages=_check_messages(records, str(path)))
