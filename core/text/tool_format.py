"""The tool-call formats a chat template can ask a model to write (torch-free, so the engine protocol that the Qt
app imports, the prompt renderer and the tool-call parser can all name them).

Qwen2.5 / Hermes write <tool_call>{"name": ..., "arguments": {...}}</tool_call>; Llama 3.1 / 3.2 a bare JSON
object {"name": ..., "parameters": {...}}. core.text.tool_calls reads both; core.text.prompts.tool_call_format
finds a model's (StatusReport.models["tool_call_format"]; None: no tool support).
"""

HERMES = "hermes"
LLAMA3_JSON = "llama3_json"
