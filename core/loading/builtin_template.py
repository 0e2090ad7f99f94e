"""The built-in pair's chat template: SmolLM2's own ChatML template, plus tool calls in the Hermes format.

SmolLM2-135M-Instruct ships a ChatML template without tools, so every request with `tools` was refused and
agents (pydantic-ai's and instructor's structured output use a forced tool call) could not be tried before
a download. ChatML is the format Qwen2.5 and Hermes models extend with tools, so this template does the same
(written here, in their conventions): the functions listed in the system turn inside <tools></tools>, calls
written as `<tool_call>{"name": ..., "arguments": {...}}</tool_call>`, results sent back as a user turn inside
<tool_response></tool_response>. Without tools it renders exactly what SmolLM2's own template renders. A
135M model seldom decides to call a tool by itself; a forced call (tool_choice "required" or a named
function) is written under a grammar, so it always is one.
"""

from __future__ import annotations

DEFAULT_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"

BUILTIN_CHAT_TEMPLATE = (
    "{%- set default_system = '" + DEFAULT_SYSTEM + "' %}"
    "{%- if messages and messages[0]['role'] == 'system' %}"
    "{%- set system = messages[0]['content'] %}{%- set rest = messages[1:] %}"
    "{%- else %}{%- set system = default_system %}{%- set rest = messages %}{%- endif %}"
    "{{- '<|im_start|>system\\n' + system }}"
    "{%- if tools %}"
    "{{- '\\n\\n# Tools\\n\\nYou may call one or more functions to help with the user\\'s request.\\n\\n'"
    " + 'The functions you can call are listed in <tools></tools> tags:\\n<tools>' }}"
    "{%- for tool in tools %}{{- '\\n' + (tool | tojson) }}{%- endfor %}"
    "{{- '\\n</tools>\\n\\nTo call a function, write its name and arguments as a JSON object inside '"
    ' + \'<tool_call></tool_call> tags:\\n<tool_call>\\n{"name": <function name>, "arguments": \''
    " + '<arguments as a JSON object>}\\n</tool_call>' }}"
    "{%- endif %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- for message in rest %}"
    "{%- if message['role'] == 'assistant' and message.get('tool_calls') %}"
    "{{- '<|im_start|>assistant\\n' + (message['content'] or '') }}"
    "{%- for call in message['tool_calls'] %}"
    "{%- set function = call.get('function', call) %}"
    "{%- if (loop.first and message['content']) or not loop.first %}{{- '\\n' }}{%- endif %}"
    "{{- '<tool_call>\\n{\"name\": \"' + function['name'] + '\", \"arguments\": ' }}"
    "{%- if function['arguments'] is string %}{{- function['arguments'] }}"
    "{%- else %}{{- function['arguments'] | tojson }}{%- endif %}"
    "{{- '}\\n</tool_call>' }}"
    "{%- endfor %}"
    "{{- '<|im_end|>\\n' }}"
    "{%- elif message['role'] == 'tool' %}"
    "{%- if loop.first or rest[loop.index0 - 1]['role'] != 'tool' %}{{- '<|im_start|>user' }}{%- endif %}"
    "{{- '\\n<tool_response>\\n' + message['content'] + '\\n</tool_response>' }}"
    "{%- if loop.last or rest[loop.index0 + 1]['role'] != 'tool' %}{{- '<|im_end|>\\n' }}{%- endif %}"
    "{%- else %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{%- endif %}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
