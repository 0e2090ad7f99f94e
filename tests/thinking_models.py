"""A tiny model that thinks: a random Llama made to follow a fixed token script, with chat templates that open
the thinking block the way real models' templates do (written for the tests, not copies of the models' own).

How the script is followed: with every layer's output projections (o_proj, down_proj) zeroed, attention and
MLP add nothing to the residual stream, so the last hidden state is the (normed) embedding of the current
token alone. Embeddings are one-hot (hidden size = vocabulary size) and the head maps token a's direction to
the token that follows a in the script: whatever came before, the model continues the script from its last
token with probability ~1 (a logit of 32 against 0). Tokens outside the script get a flat distribution.

Templates:
- R1_TEMPLATE (DeepSeek-R1 distills): the generation prompt ends with `<think>`, so the answer starts inside
  the block; earlier answers' thinking is cut from the history (everything up to `</think>`).
- QWEN3_TEMPLATE: the model opens the block itself; `enable_thinking=False` pre-fills an empty one; an
  assistant message's `reasoning_content` is rendered back inside `<think>` tags.
"""

from __future__ import annotations

from pathlib import Path

VOCAB = 64
WORDS = {
    "<|end|>": 0,
    "<s>": 1,
    "<unk>": 2,
    "<|system|>": 3,
    "<|user|>": 4,
    "<|assistant|>": 5,
    "<think>": 6,
    "</think>": 7,
}
ASSISTANT, THINK, END_THINK, EOS = 5, 6, 7, 0
THOUGHT = [20, 21, 22]  # "w20 w21 w22"
ANSWER = [30, 31]  # "w30 w31"
# <|assistant|> <think> w20 w21 w22 </think> w30 w31 <|end|>
SCRIPT = [ASSISTANT, THINK, *THOUGHT, END_THINK, *ANSWER, EOS]
THOUGHT_TEXT = "w20 w21 w22"
ANSWER_TEXT = "w30 w31"

R1_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m.role == 'assistant' %}<|assistant|> {{ m.content.split('</think>')[-1] | trim }} <|end|> "
    "{% else %}<|{{ m.role }}|> {{ m.content }} <|end|> {% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|> <think>{% endif %}"
)
QWEN3_TEMPLATE = (
    "{% for m in messages %}"
    "{% if m.role == 'assistant' %}<|assistant|> "
    "{% if m.reasoning_content %}<think> {{ m.reasoning_content }} </think> {% endif %}{{ m.content }} <|end|> "
    "{% else %}<|{{ m.role }}|> {{ m.content }} <|end|> {% endif %}"
    "{% endfor %}{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is defined and enable_thinking is false %} <think> </think>{% endif %}{% endif %}"
)


def make_thinking_tokenizer(template: str):
    """Word-level: id i <-> one word (the markers are ordinary words, as `<think>` is an ordinary added token in
    the real models); `<|end|>` (id 0) is the EOS."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = dict(WORDS)
    vocab.update({f"w{i}": i for i in range(len(WORDS), VOCAB)})
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|end|>", unk_token="<unk>")
    tokenizer.chat_template = template
    return tokenizer


def make_scripted_llama(script: list[int] = SCRIPT, vocab: int = VOCAB, context: int = 512, loop_to: int | None = None):
    """A LlamaForCausalLM (float32) that continues `script` from any of its tokens (see the module docstring).
    The script's tokens must be distinct: each names the one that follows it. `loop_to`: a token of the
    script that follows its last one, so the model goes round from there for as long as it may write (a
    thought or an answer that never ends, for tests that act while it streams)."""
    import torch
    from transformers import LlamaConfig, LlamaForCausalLM

    assert len(set(script)) == len(script), "a script token may appear once"
    torch.manual_seed(0)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=vocab,
        intermediate_size=2 * vocab,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=context,
        bos_token_id=1,
        eos_token_id=EOS,
        tie_word_embeddings=False,
    )
    model = LlamaForCausalLM(config).eval()
    with torch.no_grad():
        model.model.embed_tokens.weight.copy_(torch.eye(vocab))
        for layer in model.model.layers:
            layer.self_attn.o_proj.weight.zero_()
            layer.mlp.down_proj.weight.zero_()
        model.lm_head.weight.zero_()
        following = list(script[1:]) + ([loop_to] if loop_to is not None else [])
        for current, after in zip(script, following):
            model.lm_head.weight[after, current] = 4.0  # normed one-hot is 8 e_a: a logit of 32
    return model


def save_thinking_pair(
    root: Path, template: str, script: list[int] = SCRIPT, loop_to: int | None = None, context: int = 512
) -> tuple[str, str]:
    """Target and draft folders (the same scripted model, so every draft token is accepted) with `template`."""
    folders = []
    for name in ("target", "draft"):
        folder = root / name
        make_scripted_llama(script, context=context, loop_to=loop_to).save_pretrained(folder)
        make_thinking_tokenizer(template).save_pretrained(folder)
        folders.append(str(folder))
    return folders[0], folders[1]


# ----------------------------------------------------------------------------------------------------------
# A byte-level tokenizer (one symbol per byte, as GPT-2's and Qwen's spell what they have no merge for), so the
# scripted model can write JSON and tool calls under a grammar; a few words are added tokens, as `<think>` is.

BYTE_WORDS = ("<|end|>", "<|system|>", "<|user|>", "<|assistant|>", "<think>", "</think>", "Because", " sky", "Blue")
BYTE_VOCAB = 272  # the words, the 256 byte symbols, padding to a multiple of 8 (the head size must divide it)
# Qwen3's way with the block (the model opens it) and Hermes tool calls (tools in a system turn, <tool_call> tags)
QWEN3_TOOLS_TEMPLATE = (
    "{% if tools %}<|system|> Tools:{% for tool in tools %} {{ tool | tojson }}{% endfor %} "
    'Call one as <tool_call>{"name": ..., "arguments": ...}</tool_call> <|end|>{% endif %}'
    "{% for m in messages %}<|{{ m.role }}|> {{ m.content }} <|end|>{% endfor %}"
    "{% if add_generation_prompt %}<|assistant|>"
    "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n{% endif %}{% endif %}"
)


def make_byte_tokenizer(template: str):
    """Byte-level BPE without merges plus BYTE_WORDS as added tokens (ids 0-8; `<|end|>`, id 0, is the EOS)."""
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    from tokenizers.pre_tokenizers import ByteLevel
    from transformers import PreTrainedTokenizerFast

    vocab = {word: i for i, word in enumerate(BYTE_WORDS)}
    for symbol in sorted(ByteLevel.alphabet()):
        vocab[symbol] = len(vocab)
    backend = Tokenizer(models.BPE(vocab=vocab, merges=[]))
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)
    backend.decoder = decoders.ByteLevel()
    backend.add_tokens([AddedToken(word, normalized=False) for word in BYTE_WORDS])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="<|end|>", unk_token=None)
    tokenizer.chat_template = template
    return tokenizer


def save_byte_thinking_pair(
    root: Path, answer: str, template: str = QWEN3_TOOLS_TEMPLATE, loop_from: str | None = None
) -> tuple[str, str]:
    """Target and draft folders of a scripted model that answers `answer` after its generation prompt
    (`<|assistant|>`), then ends; with `loop_from` (a piece of `answer`, ending it), it goes round from that
    piece's first token instead of ending: a thought that never closes."""
    tokenizer = make_byte_tokenizer(template)
    encode = lambda text: tokenizer(text, add_special_tokens=False)["input_ids"]  # noqa: E731
    script = [*encode("<|assistant|>"), *encode(answer)]
    loop_to = encode(loop_from)[0] if loop_from is not None else None
    if loop_to is None:
        script.append(EOS)
    folders = []
    for name in ("target", "draft"):
        folder = root / name
        make_scripted_llama(script, vocab=BYTE_VOCAB, context=2048, loop_to=loop_to).save_pretrained(folder)
        tokenizer.save_pretrained(folder)
        folders.append(str(folder))
    return folders[0], folders[1]
