"""Turning user input into prompt token ids: plain text, or chat messages through the model's template."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

from transformers import PreTrainedTokenizerBase

from core.errors import InvalidSettingError, ModelFormatError

Message = dict[str, str]


@dataclass(frozen=True)
class Prompt:
    """One prompt: chat `messages` or plain `text` (exactly one is set)."""

    messages: tuple[Message, ...] | None = None
    text: str | None = None


def render_chat(tokenizer: PreTrainedTokenizerBase, messages: list[Message]) -> str:
    """The model's own chat template, ending with the assistant's turn header."""
    if not getattr(tokenizer, "chat_template", None):
        raise ModelFormatError("this model has no chat template; use a plain --prompt without --chat")
    return tokenizer.apply_chat_template(list(messages), add_generation_prompt=True, tokenize=False)


def encode_prompt(tokenizer: PreTrainedTokenizerBase, prompt: Prompt, chat: bool = False) -> list[int]:
    """Token ids for a prompt. Messages always use the chat template; text uses it when `chat` is set."""
    if prompt.messages is not None:
        rendered = render_chat(tokenizer, list(prompt.messages))
        return tokenizer(rendered, add_special_tokens=False)["input_ids"]
    if chat:
        return encode_prompt(tokenizer, Prompt(messages=({"role": "user", "content": prompt.text},)))
    return tokenizer(prompt.text)["input_ids"]


def _check_messages(messages: object, where: str) -> tuple[Message, ...]:
    if not isinstance(messages, list) or not messages:
        raise InvalidSettingError(f"{where}: 'messages' must be a non-empty list")
    for message in messages:
        if not isinstance(message, dict) or not isinstance(message.get("role"), str) or not isinstance(message.get("content"), str):
            raise InvalidSettingError(f"{where}: each message needs string 'role' and 'content' fields")
    return tuple(messages)


def read_prompt_file(path: str | Path) -> list[Prompt]:
    """JSON Lines: each line has `messages` (chat) or `text` (plain)."""
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"prompt file not found: {path}")
    prompts = []
    for number, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        if not line.strip():
            continue
        where = f"{path}:{number}"
        try:
            record = json.loads(line)
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
    lines = [line for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]
    try:
        records = [json.loads(line) for line in lines]
    except json.JSONDecodeError as error:
        raise InvalidSettingError(f"{path}: not valid JSON Lines ({error.msg})") from error
    if records and isinstance(records[0], dict) and "messages" in records[0]:
        return Prompt(messages=_check_messages(records[0]["messages"], str(path)))
    return Prompt(messages=_check_messages(records, str(path)))
