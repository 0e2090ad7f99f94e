"""What a GGUF file says of itself (its metadata and tensor list, no tensor data), read as hostile input.

A GGUF file comes from outside (a download, a file someone imports), and its header is mostly lengths and
counts saying how much follows. Each one is checked against the bytes left in the file before it is used, and
what is not kept is skipped by seeking, so a damaged or hostile header is an error in words: never an
allocation of what it claims, never a walk of billions of values, never a recursion as deep as its arrays nest.

gguf's own GGUFReader would also map every tensor and turn each metadata array into numpy arrays (seconds for a
150k-token vocabulary); this walks the keys once and keeps what the checks before a load read: three names,
the numbers that size the model, and the tensors those numbers must agree with (core.modeling.gguf_shapes).
"""

from __future__ import annotations

import math
import os
import re
import struct
from dataclasses import dataclass, field
from pathlib import Path
from typing import BinaryIO

from core.errors import DamagedModelError, ModelFormatError
from core.system import json_text

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
KEPT = ("general.file_type", "general.architecture", "general.name")  # the metadata gguf_header keeps
VERSIONS = (2, 3)  # those gguf's reader loads (version 1, of 2023, had 32-bit lengths and is read by nothing now)

MAX_KEY_BYTES = 65_535  # the GGUF specification's limit on a key's length
MAX_KEPT_STRING_BYTES = 65_536  # an architecture's or a model's name; a longer value is not one, and is skipped
MAX_NESTING = 8  # arrays of arrays: llama.cpp writes none, so a header nesting deeper is damaged
MAX_DIMENSIONS = 4  # ggml's GGML_MAX_DIMS: no GGUF tensor has more
# Metadata entries, tensors and the items of arrays of strings or arrays, walked one by one: the largest
# vocabularies and merge lists hold ~300k each, a 70B model ~700 tensors. Past this the file is damaged (a
# count read from the wrong place), and walking on would hold the app for minutes.
MAX_WALKED = 1 << 22
# The metadata that sizes the model transformers builds, as "<architecture>.<suffix>" (llama.cpp's names)
SIZE_KEYS = (
    "block_count",
    "context_length",
    "embedding_length",
    "feed_forward_length",
    "expert_count",
    "expert_feed_forward_length",
    "vocab_size",
    "attention.head_count",
    "attention.head_count_kv",
    "attention.key_length",
)
MAX_SIZE_NUMBERS = 64  # kept of them at most (a model has one of each; a hostile header may repeat them)
# The tensors whose shapes those numbers must agree with: the embedding and the first layer's
SHAPED_TENSORS = (
    "token_embd.weight",
    "blk.0.attn_q.weight",
    "blk.0.attn_k.weight",
    "blk.0.ffn_up.weight",
    "blk.0.ffn_up_exps.weight",
)
MAX_TENSOR_NAME_BYTES = 256  # ggml's names are at most 64 bytes; a longer one is skipped, not read
MAX_LAYERS = 1 << 16  # a layer numbered past this is counted, not kept (the largest models have ~130)
_LAYER = re.compile(r"blk\.([0-9]{1,9})\.")


@dataclass(frozen=True)
class GgufHeader:
    """What a GGUF file says of itself before its tensor data (`gguf_header`): how many tensors it lists and
    their parameter count, llama.cpp's file type (general.file_type, None when absent), its architecture
    (general.architecture: "llama", "qwen3moe", ...; None when absent) and its name (general.name, "" when
    absent); `sizes`: the whole-number metadata of SIZE_KEYS by full key; `shapes`: the dimensions of
    SHAPED_TENSORS it lists, in ggml's order (a row's length first); `layers`: the layer numbers its tensors
    name (blk.N.*) below MAX_LAYERS, and `past_layers` how many tensors name a layer past it."""

    tensors: int
    parameters: int
    file_type: int | None
    architecture: str | None
    name: str
    sizes: dict[str, int] = field(default_factory=dict)
    shapes: dict[str, tuple[int, ...]] = field(default_factory=dict)
    layers: frozenset[int] = frozenset()
    past_layers: int = 0


def gguf_header(path: Path) -> GgufHeader:
    """Read a GGUF file's metadata and tensor list (no tensor data), every length checked against what the file
    holds.

    Raises: ModelFormatError for a file that is not GGUF, of a version or byte order gguf's reader does not
    load, that cannot be read or that holds a value type GGUF does not have; DamagedModelError for one cut
    short, whose lengths run past its end, or whose counts or nesting no real GGUF file has."""
    try:
        with open(path, "rb") as handle:
            if handle.read(4) != b"GGUF":
                raise ModelFormatError(f"{path} is not a GGUF file (it does not start with 'GGUF')")
            return _HeaderWalk(path, handle, path.stat().st_size).header()
    except OSError as error:
        raise ModelFormatError(f"{path} cannot be read: {error}") from error


def _version_words(version: int) -> str:
    """What a GGUF version outside VERSIONS is, and what to do."""
    if version and not version & 0xFFFF:  # a small version number read in the other byte order
        return "a big-endian GGUF file (made for IBM mainframes): download the usual little-endian one"
    if version < VERSIONS[0]:
        return (
            f"GGUF version {version}, which nothing loads now: download the model again (today's files are version 3)"
        )
    return f"GGUF version {version}; this program reads versions {VERSIONS[0]} and {VERSIONS[1]}"


class _HeaderWalk:
    """One pass over a GGUF header after its magic, every length checked against the bytes left in the file."""

    def __init__(self, path: Path, handle: BinaryIO, size: int) -> None:
        self.path, self.handle, self.size = path, handle, size
        self.walked = 0

    def header(self) -> GgufHeader:
        version = self.number("<I")
        if version not in VERSIONS:
            raise ModelFormatError(f"{self.path} is {_version_words(version)}")
        tensors, entries = self.number("<Q"), self.number("<Q")
        said: dict[str, object] = {}
        sizes: dict[str, int] = {}
        for _ in range(self.items(entries, 12)):  # a key's length, the key, its type
            length = self.number("<Q")
            if MAX_KEY_BYTES < length <= self.left():  # a length past the end is a file cut short (take)
                raise self.damaged(f"has a metadata key of {length:,} bytes (GGUF allows {MAX_KEY_BYTES:,})")
            key = self.take(length).decode("utf-8", "replace")
            found = self.value(self.number("<I"), keep=key in KEPT)
            if key in KEPT:
                said[key] = found
            elif json_text.is_whole(found) and key.partition(".")[2] in SIZE_KEYS and len(sizes) < MAX_SIZE_NUMBERS:
                sizes[key] = found
        parameters, past_layers = 0, 0
        shapes: dict[str, tuple[int, ...]] = {}
        layers: set[int] = set()
        for _ in range(self.items(tensors, 24)):  # a name's length, dimensions, type, offset
            length = self.number("<Q")
            if length <= MAX_TENSOR_NAME_BYTES:
                tensor_name = self.take(length).decode("utf-8", "replace")
            else:
                tensor_name = ""
                self.skip(length)
            dimensions = self.number("<I")
            if dimensions > MAX_DIMENSIONS:
                raise self.damaged(f"lists a tensor of {dimensions:,} dimensions (GGUF allows {MAX_DIMENSIONS})")
            shape = tuple(self.number("<Q") for _ in range(dimensions))
            self.number("<I"), self.number("<Q")  # type, offset
            parameters += math.prod(shape)
            layer = _LAYER.match(tensor_name)
            if layer is not None and int(layer[1]) < MAX_LAYERS:
                layers.add(int(layer[1]))
            elif layer is not None:
                past_layers += 1
            if tensor_name in SHAPED_TENSORS:
                shapes[tensor_name] = shape
        file_type, architecture, name = (said.get(key) for key in KEPT)
        return GgufHeader(
            tensors=tensors,
            parameters=parameters,
            file_type=file_type if isinstance(file_type, int) else None,
            architecture=architecture.decode("utf-8", "replace") if isinstance(architecture, bytes) else None,
            name=name.decode("utf-8", "replace") if isinstance(name, bytes) else "",
            sizes=sizes,
            shapes=shapes,
            layers=frozenset(layers),
            past_layers=past_layers,
        )

    def value(self, kind: int, keep: bool = False, depth: int = 0) -> object:
        """One value of GGUF type `kind`: a number, a string's bytes where `keep` (None when longer than a name
        can be), None for an array or a string not kept (skipped)."""
        if kind == _STRING:
            length = self.number("<Q")
            if keep and length <= MAX_KEPT_STRING_BYTES:
                return self.take(length)
            self.skip(length)
            return None
        if kind == _ARRAY:
            if depth == MAX_NESTING:
                raise self.damaged(f"nests metadata arrays more than {MAX_NESTING} deep")
            item, count = self.number("<I"), self.number("<Q")
            if item in _SCALARS:
                self.skip(count * struct.calcsize(_SCALARS[item]))
                return None
            for _ in range(self.items(count, 8)):  # strings or arrays: a length of 8 bytes at least
                self.value(item, depth=depth + 1)
            return None
        if kind not in _SCALARS:
            raise ModelFormatError(f"{self.path} has an unknown GGUF value type {kind}")
        return self.number(_SCALARS[kind])

    def items(self, count: int, smallest: int) -> int:
        """`count` items of at least `smallest` bytes each, when the rest of the file can hold them and the walk
        stays under MAX_WALKED."""
        if count * smallest > self.left():
            raise self.damaged()
        self.walked += count
        if self.walked > MAX_WALKED:
            raise self.damaged(f"counts more than {MAX_WALKED:,} entries in its header, which no model has")
        return count

    def number(self, fmt: str) -> int | float | bool:
        return struct.unpack(fmt, self.take(struct.calcsize(fmt)))[0]

    def take(self, count: int) -> bytes:
        if count > self.left():
            raise self.damaged()
        return self.handle.read(count)

    def skip(self, count: int) -> None:
        if count > self.left():
            raise self.damaged()
        self.handle.seek(count, os.SEEK_CUR)

    def left(self) -> int:
        return self.size - self.handle.tell()

    def damaged(self, why: str = "is cut short inside its header") -> DamagedModelError:
        return DamagedModelError(f"{self.path} {why}: download it again")
