"""Which format a model writes its tool calls in, read from its chat template (torch-free: the engine's
protocol, imported by the Qt app, names the formats).

Qwen2.5 / Qwen3 / Hermes write `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`; Llama 3.1 / 3.2 a bare
JSON object `{"name": ..., "parameters": {...}}`. core.text.tool_calls reads both (the API server and the chat's
tool loop).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from core.errors import ModelFormatError
from core.text.chat_template import within_template_time
from core.text.template_kwargs import template_source

if TYPE_CHECKING:
    from transformers import PreTrainedTokenizerBase

HERMES = "hermes"
LLAMA3_JSON = "llama3_json"

Tool = dict[str, Any]  # {"type": "function", "function": {"name", "description", "parameters"}}

_PROBE_TOOL: Tool = {
    "type": "function",
    "function": {
        "name": "specexec_probe_tool",
        "description": "probe",
        "parameters": {"type": "object", "properties": {}},
    },
}


def tool_call_format(tokenizer: PreTrainedTokenizerBase) -> str | None:
    """How the model's chat template asks it to write tool calls: HERMES, LLAMA3_JSON, or None when the
    template renders no tools (a probe tool's name does not reach the prompt) or asks for another format.

    Raises:
        ModelFormatError: the template never finished (core.text.chat_template.within_template_time): not a
            question of tools, and a chat with tools would otherwise be told the model has none.
    """
    source = template_source(tokenizer)
    if not source:
        return None
    try:
        rendered = within_template_time(
            lambda: tokenizer.apply_chat_template(
                [{"role": "user", "content": "hi"}], tools=[_PROBE_TOOL], add_generation_prompt=True, tokenize=False
            )
        )
    except ModelFormatError:
        raise
    except Exception:  # noqa: BLE001 - a template that fails on tools does not support them
        return None
    if _PROBE_TOOL["function"]["name"] not in rendered:
        return None
    if "<tool_call>" in source:
        return HERMES
    if "<|python_tag|>" in source or '"parameters"' in source:
        return LLAMA3_JSON
    return None
