"""A random model pair of the built-in pair's shape, built in memory: what the GPU check runs where the real
weights cannot travel (a lent machine has no network and takes a 64 MiB working tree; the GGUF is 98 MB).

The target is a LlamaForCausalLM with SmolLM2-135M's config and random weights, its LM head scaled so that its
distributions are peaked like a real model's (a random head gives near-uniform ones: no tree would be
accepted); the draft is its 4-bit round-to-nearest copy, made as the built-in draft is made
(core.loading.rtn_quant). Timings depend on shapes, not on values, so they stand for the real pair's; the
tokens accepted per pass do not. `small=True` gives a tiny model of the same family for a CPU smoke run.
"""

from __future__ import annotations

import copy
from dataclasses import dataclass

import torch
from transformers import LlamaConfig, LlamaForCausalLM

from core.loading.rtn_quant import quantize_decoder_linears
from core.modeling.causal_lm import CausalLM
from core.modeling.model_files import LoadedModel

# SmolLM2-135M-Instruct (the built-in target): hidden 576, 30 layers, 9 heads, 3 KV heads, MLP 1536.
BUILTIN_SHAPE = dict(
    hidden_size=576,
    num_hidden_layers=30,
    num_attention_heads=9,
    num_key_value_heads=3,
    intermediate_size=1536,
    vocab_size=49152,
    head_dim=64,
)
SMALL_SHAPE = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    num_key_value_heads=2,
    intermediate_size=128,
    vocab_size=512,
    head_dim=16,
)
# How much the random LM head is scaled: peaked distributions, so that trees get accepted.
HEAD_SCALE = 8.0


@dataclass(frozen=True)
class IdText:
    """A stand-in tokenizer for token ids only: the decoding loop decodes its tokens to text for streaming and
    stop strings; here a token's text is its id, so the loop runs with no tokenizer file."""

    def decode(self, ids, skip_special_tokens: bool = True, clean_up_tokenization_spaces: bool = False) -> str:
        return "".join(f" {int(i)}" for i in ids)


def random_config(small: bool) -> LlamaConfig:
    config = LlamaConfig(
        **(SMALL_SHAPE if small else BUILTIN_SHAPE),
        max_position_embeddings=8192,
        rms_norm_eps=1e-5,
        tie_word_embeddings=True,
        bos_token_id=1,
        eos_token_id=2,
    )
    config._attn_implementation = "sdpa"
    return config


def random_target(
    device: torch.device, dtype: torch.dtype, small: bool = False, seed: int = 0, max_context: int = 2048
) -> LoadedModel:
    """The random target in `dtype` on `device` (float32 weights drawn on the CPU, so every dtype and device
    gets the same values rounded). No EOS: an answer always runs to its token limit."""
    generator_state = torch.random.get_rng_state()
    torch.manual_seed(seed)
    try:
        model = LlamaForCausalLM(random_config(small)).eval()
    finally:
        torch.random.set_rng_state(generator_state)
    with torch.no_grad():
        model.lm_head.weight.mul_(HEAD_SCALE)  # tied: the embedding scales with it, harmless for timing
    model = model.to(device=device, dtype=dtype)
    lm = CausalLM(model=model, name="random-builtin-shape", eos_token_ids=(), max_context=max_context)
    return LoadedModel(lm=lm, tokenizer=IdText())


def rtn_draft(target: LoadedModel, bits: int = 4, group_size: int = 64) -> LoadedModel:
    """The target's 4-bit round-to-nearest copy (as the built-in draft is made), same device and dtype."""
    model = copy.deepcopy(target.lm.model)
    quantize_decoder_linears(model, bits=bits, group_size=group_size)
    lm = CausalLM(model=model, name="random-builtin-shape-draft", eos_token_ids=(), max_context=target.lm.max_context)
    return LoadedModel(lm=lm, tokenizer=target.tokenizer)


def random_prompt(length: int, vocab: int, seed: int = 0) -> list[int]:
    """`length` random token ids (above the first few, which real vocabularies keep for special tokens)."""
    generator = torch.Generator().manual_seed(seed)
    return torch.randint(3, vocab, (length,), generator=generator).tolist()
