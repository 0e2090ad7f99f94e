"""A tiny model that calls a tool: the scripted Llama of tests/thinking_models.py (it continues a token script
from its last token) with a word-level vocabulary whose words spell a Hermes tool call, and a chat template
written for the tests in the Hermes convention (tools listed, calls in <tool_call> tags).

Two scripts share the model: after `<|assistant|>` it writes
    <tool_call> {"name": "add", "arguments": {"a": 2, "b": 3}} </tool_call> <|end|>
and after `w40` it writes the final answer `w30 w31 <|end|>`. TOOL_TEMPLATE ends the prompt with
`<|assistant|> w40` when the last message is a tool's result (so the model answers once it has one), and with
`<|assistant|>` otherwise (so a question gets a call); LOOPING_TEMPLATE always ends with `<|assistant|>`, so the
model calls the tool in every round (the round cap's test).
"""

from __future__ import annotations

import itertools
from pathlib import Path

from thinking_models import EOS, WORDS, make_scripted_llama

VOCAB = 64
CALL_WORDS = ["<tool_call>", '{"name":', '"add",', '"arguments":', '{"a":', "2,", '"b":', "3}}", "</tool_call>"]
FIRST_CALL_ID = 40  # ids 40.. spell the call; after the thinking tokenizer's words and w8..w39
ASSISTANT = WORDS["<|assistant|>"]
RESUME = 60  # "w60": the prefill after a tool's result
ANSWER = [30, 31]
ANSWER_TEXT = "w30 w31"
CALL_TEXT = '<tool_call> {"name": "add", "arguments": {"a": 2, "b": 3}} </tool_call>'

_TEMPLATE = (
    "{% if tools %}<|system|> tools: {% for tool in tools %}{{ tool.function.name }} {% endfor %}"
    "call with <tool_call> </tool_call> <|end|> {% endif %}"
    "{% for m in messages %}"
    "{% if m.role == 'assistant' and m.tool_calls %}<|assistant|> {{ m.content }} "
    "{% for call in m.tool_calls %}<tool_call> {{ call.function.name }} {{ call.function.arguments | tojson }} "
    "</tool_call> {% endfor %}<|end|> "
    "{% elif m.role == 'tool' %}<|tool|> {{ m.content }} <|end|> "
    "{% else %}<|{{ m.role }}|> {{ m.content }} <|end|> {% endif %}"
    "{% endfor %}"
)
TOOL_TEMPLATE = _TEMPLATE + (
    "{% if add_generation_prompt %}<|assistant|>{% if messages[-1].role == 'tool' %} w60{% endif %}{% endif %}"
)
LOOPING_TEMPLATE = _TEMPLATE + "{% if add_generation_prompt %}<|assistant|>{% endif %}"


def make_tool_tokenizer(template: str):
    """Word-level, like the thinking tokenizer, with the call's words at ids 40..48 and `<|tool|>` at 49."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = dict(WORDS)
    vocab.update({f"w{i}": i for i in range(len(WORDS), VOCAB)})
    for offset, word in enumerate(CALL_WORDS):
        del vocab[f"w{FIRST_CALL_ID + offset}"]
        vocab[word] = FIRST_CALL_ID + offset
    del vocab["w49"]
    vocab["<|tool|>"] = 49
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|end|>", unk_token="<unk>")
    tokenizer.chat_template = template
    return tokenizer


def make_tool_llama(context: int = 2048):
    """The scripted Llama with both scripts (module docstring)."""
    import torch

    call = [ASSISTANT, *range(FIRST_CALL_ID, FIRST_CALL_ID + len(CALL_WORDS)), EOS]
    model = make_scripted_llama(call, vocab=VOCAB, context=context)
    answer = [RESUME, *ANSWER, EOS]
    with torch.no_grad():
        for current, after in itertools.pairwise(answer):
            model.lm_head.weight[after, current] = 4.0  # as make_scripted_llama writes a script
    return model


def save_tool_pair(root: Path, template: str = TOOL_TEMPLATE) -> tuple[str, str]:
    """Target and draft folders (the same scripted model) with `template`."""
    folders = []
    for name in ("target", "draft"):
        folder = root / name
        make_tool_llama().save_pretrained(folder)
        make_tool_tokenizer(template).save_pretrained(folder)
        folders.append(str(folder))
    return folders[0], folders[1]
