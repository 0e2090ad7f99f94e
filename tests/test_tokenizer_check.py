"""A model's tokenizer files read as hostile input: whatever transformers and the `tokenizers` library make of
them, the load either gives a tokenizer that encodes and decodes ordinary text or refuses the model in words
(core.modeling.tokenizer_check). A Rust panic in `tokenizers` is a BaseException that `except Exception` let
through, out of the load and out of the engine process."""

from __future__ import annotations

import contextlib
import json
import random
import shutil
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
from transformers import PreTrainedTokenizerFast

from core.errors import DamagedModelError, InvalidSettingError, ModelFormatError
from core.modeling.model_files import load_tokenizer
from core.modeling.tokenizer_check import PROBE_TEXT, is_library_fault
from core.text.prompts import Prompt, encode_prompt
from json_mutation import mutated_json
from test_model_format import read_or_refused

TEMPLATE = "{% for m in messages %}<|start|>{{ m['role'] }}\n{{ m['content'] }}<|end|>{% endfor %}<|start|>assistant\n"


@pytest.fixture(scope="module")
def bpe_folder(tmp_path_factory) -> Path:
    """A byte-level BPE tokenizer built as Llama 3's is (a byte-level pre-tokenizer and decoder, a
    post-processor that puts the begin-of-text token first, special tokens, a chat template), trained on a few
    sentences: the tokenizer files of a real model, in small (the template in tokenizer_config.json, as
    Llama 3's are)."""
    backend = Tokenizer(models.BPE())
    backend.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    backend.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=400,
        special_tokens=["<|begin|>", "<|start|>", "<|end|>"],
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
    )
    backend.train_from_iterator(["the quick brown fox jumps over the lazy dog", PROBE_TEXT] * 20, trainer)
    begin = ("<|begin|>", backend.token_to_id("<|begin|>"))
    backend.post_processor = processors.TemplateProcessing(single="<|begin|> $A", special_tokens=[begin])
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, bos_token="<|begin|>", eos_token="<|end|>")
    folder = tmp_path_factory.mktemp("bpe") / "tokenizer"
    tokenizer.save_pretrained(folder)
    # the template in tokenizer_config.json (transformers 5 writes chat_template.jinja, which would stand before it)
    settings = json.loads((folder / "tokenizer_config.json").read_text(encoding="utf-8"))
    (folder / "tokenizer_config.json").write_text(json.dumps({**settings, "chat_template": TEMPLATE}))
    return folder


def load_and_use(folder: Path) -> None:
    """Load the tokenizer as the engine does, then encode a plain prompt and a chat prompt as it would. The
    chat template may refuse the conversation in words (InvalidSettingError), as a real one may."""
    tokenizer = load_tokenizer("mutated", folder)
    assert encode_prompt(tokenizer, Prompt(text="the quick fox"))
    with contextlib.suppress(InvalidSettingError):
        encode_prompt(tokenizer, Prompt(messages=({"role": "user", "content": "the lazy dog"},)))


def test_the_unmutated_tokenizer_loads_and_reads_text(bpe_folder):
    tokenizer = load_tokenizer("bpe", bpe_folder)
    ids = tokenizer(PROBE_TEXT)["input_ids"]
    assert ids[0] == tokenizer.convert_tokens_to_ids("<|begin|>")
    assert tokenizer.decode(ids, skip_special_tokens=True) == PROBE_TEXT


def test_a_rust_panic_while_reading_the_tokenizer_is_refused_in_words(bpe_folder, tmp_path):
    """A BPE model whose continuing-subword prefix is longer than its tokens: `tokenizers` panics while
    building it, and the panic went through the load's `except Exception` (and ended the engine)."""
    folder = Path(shutil.copytree(bpe_folder, tmp_path / "panics"))
    data = json.loads((folder / "tokenizer.json").read_text(encoding="utf-8"))
    data["model"]["continuing_subword_prefix"] = "#" * 1000
    (folder / "tokenizer.json").write_text(json.dumps(data), encoding="utf-8")
    with pytest.raises(ModelFormatError, match=r"could not load the tokenizer of p from .*PanicException"):
        load_tokenizer("p", folder)


def test_a_request_to_stop_is_not_taken_for_a_library_s_fault():
    """The load lets KeyboardInterrupt and SystemExit through: only a library's failures become words."""
    assert is_library_fault(ValueError("x"))
    assert not is_library_fault(KeyboardInterrupt())
    assert not is_library_fault(SystemExit(1))


@pytest.mark.parametrize("file", ["tokenizer.json", "tokenizer_config.json"])
def test_seeded_mutations_of_the_tokenizer_files_are_read_or_refused_in_words(bpe_folder, tmp_path, file):
    """400 mutations of each tokenizer file (values replaced by every JSON type and hostile ones, keys
    deleted or added): each loads and encodes prompts, or is refused with a ModelFormatError. Found this way:
    a post-processor naming a special token the vocabulary lacks (a Rust panic at the first encode), a prefix
    longer than the tokens (a panic at load), a `model_max_length` that is not a number (a TypeError at every
    prompt), chat templates none of which is the default (a ValueError at every chat)."""
    folder = Path(shutil.copytree(bpe_folder, tmp_path / "mutated"))
    original = json.loads((bpe_folder / file).read_text(encoding="utf-8"))
    chosen = random.Random(file)
    outcomes = {"read": 0, "refused": 0}
    for _ in range(400):
        mutated = mutated_json(original, chosen, ["type", "special_tokens", "chat_template", "w"])
        (folder / file).write_text(json.dumps(mutated), encoding="utf-8")
        outcomes[read_or_refused(lambda: load_and_use(folder))] += 1
    assert outcomes["read"] > 0 and outcomes["refused"] > 0, outcomes


def test_a_gguf_file_s_vocabulary_passes_the_check(tmp_path):
    """A GGUF file's vocabulary goes through the same check; the tiny one has no byte tokens, so most of the
    probe text is unknown to it: the check refuses a tokenizer that fails, not one that does not know a
    character."""
    from test_loading import write_tiny_gguf

    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    tokenizer = load_tokenizer("tiny", tmp_path, gguf_file=path)
    assert tokenizer.decode(tokenizer("abc", add_special_tokens=False)["input_ids"]) == "abc"


def refused_at_load(folder: Path, file: str, change: Callable[[Any], Any]) -> ModelFormatError:
    """The error loading the tokenizer of `folder` raises once `change` (a function of the file's JSON) is
    applied to `file`."""
    path = folder / file
    path.write_text(json.dumps(change(json.loads(path.read_text(encoding="utf-8")))), encoding="utf-8")
    with pytest.raises(ModelFormatError) as info:
        load_tokenizer("bpe", folder)
    return info.value


def test_a_post_processor_naming_a_token_it_does_not_list_is_refused_at_load(bpe_folder, tmp_path):
    """`tokenizers` reads such a file, then panics at every encode that adds special tokens (a plain prompt):
    the panic ended the engine process at the first prompt."""
    folder = Path(shutil.copytree(bpe_folder, tmp_path / "post"))
    error = refused_at_load(
        folder,
        "tokenizer.json",
        lambda data: {**data, "post_processor": {**data["post_processor"], "special_tokens": {}}},
    )
    said = str(error)
    assert isinstance(error, DamagedModelError)
    assert said.startswith(f"the tokenizer of bpe in {folder} fails on ordinary text (PanicException: no entry")
    assert said.endswith("Download the model's tokenizer files (tokenizer.json, tokenizer_config.json) again")


def test_a_model_max_length_that_is_not_a_number_is_refused_at_load(bpe_folder, tmp_path):
    """transformers reads it, and every encode compared a length with it: a TypeError at the first prompt,
    reported as the engine's own bug."""
    folder = Path(shutil.copytree(bpe_folder, tmp_path / "length"))
    error = refused_at_load(folder, "tokenizer_config.json", lambda data: {**data, "model_max_length": "lots"})
    assert isinstance(error, DamagedModelError)
    assert str(error).startswith(f"the tokenizer of bpe in {folder} fails on ordinary text (TypeError: ")


def test_chat_templates_none_of_which_is_the_default_are_refused_at_load(bpe_folder, tmp_path):
    """Named templates (the list form of tokenizer_config.json) without a "default": transformers refused every
    chat prompt with a ValueError, which the engine reported as its own bug."""
    folder = Path(shutil.copytree(bpe_folder, tmp_path / "named"))
    named = [{"name": "tool_use", "template": TEMPLATE}, {"name": "rag", "template": TEMPLATE}]
    error = refused_at_load(folder, "tokenizer_config.json", lambda data: {**data, "chat_template": named})
    assert str(error) == (
        "the chat templates of bpe ('tool_use', 'rag') include none named 'default', the one a chat is written "
        "with: download the model's tokenizer files (tokenizer_config.json) again"
    )
