"""Chat templates written for the tests in the two tool-call formats the server reads (not copies of the
models' own templates: the same conventions, a few lines each): Hermes / Qwen2.5 (tools listed in the system
turn, calls in <tool_call> tags, results as <tool_response>) and Llama 3.1 JSON tool calling (tools in the first
user turn, calls as a bare JSON object after <|python_tag|>, results in an ipython turn)."""

HERMES_TEMPLATE = (
    "{%- if tools %}<|im_start|>system\nYou may call one or more functions. Function signatures:\n<tools>"
    "{%- for tool in tools %}\n{{ tool | tojson }}{%- endfor %}\n</tools>\n"
    "For each call, return a JSON object with the function name and arguments within <tool_call></tool_call> "
    "tags.<|im_end|>\n{%- endif %}"
    "{%- for m in messages %}"
    "{%- if m.role == 'assistant' and m.tool_calls %}<|im_start|>assistant\n{{ m.content }}"
    '{%- for call in m.tool_calls %}\n<tool_call>\n{"name": "{{ call.function.name }}", "arguments": '
    "{{ call.function.arguments | tojson }}}\n</tool_call>{%- endfor %}<|im_end|>\n"
    "{%- elif m.role == 'tool' %}<|im_start|>user\n<tool_response>\n{{ m.content }}\n</tool_response><|im_end|>\n"
    "{%- else %}<|im_start|>{{ m.role }}\n{{ m.content }}<|im_end|>\n{%- endif %}"
    "{%- endfor %}{%- if add_generation_prompt %}<|im_start|>assistant\n{%- endif %}"
)

LLAMA31_TEMPLATE = (
    "<|begin_of_text|>"
    "{%- for m in messages %}"
    "{%- if m.role == 'user' and loop.first and tools %}<|start_header_id|>user<|end_header_id|>\n\n"
    "Given the following functions, respond with a JSON for a function call with its proper arguments that best "
    'answers the given prompt. Respond in the format {"name": function name, "parameters": dictionary of '
    "argument name and its value}. Do not use variables.\n\n{%- for tool in tools %}{{ tool | tojson }}\n\n"
    "{%- endfor %}{{ m.content }}<|eot_id|>"
    "{%- elif m.role == 'assistant' and m.tool_calls %}<|start_header_id|>assistant<|end_header_id|>\n\n"
    '<|python_tag|>{%- for call in m.tool_calls %}{"name": "{{ call.function.name }}", "parameters": '
    "{{ call.function.arguments | tojson }}}{%- endfor %}<|eom_id|>"
    "{%- elif m.role == 'tool' %}<|start_header_id|>ipython<|end_header_id|>\n\n{{ m.content }}<|eot_id|>"
    "{%- else %}<|start_header_id|>{{ m.role }}<|end_header_id|>\n\n{{ m.content }}<|eot_id|>{%- endif %}"
    "{%- endfor %}{%- if add_generation_prompt %}<|start_header_id|>assistant<|end_header_id|>\n\n{%- endif %}"
)
