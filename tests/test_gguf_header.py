"""The GGUF header reader (core/modeling/gguf_header.py) against gguf's own reader on a file gguf's own writer
made, and against hostile headers: lengths past the end, a string of hundreds of megabytes, arrays nested
thousands deep, counts no model has, and seeded mutations of a real header. Each must be read or refused with
a ModelFormatError (DamagedModelError where it is damaged) in words, in bounded memory; anything else would
reach the person importing the file as a crash. Seeded: a failure repeats."""

from __future__ import annotations

import random
import struct
import tracemalloc

import numpy as np
import pytest

from core.errors import DamagedModelError, ModelFormatError
from core.modeling.gguf_header import MAX_NESTING, SHAPED_TENSORS, SIZE_KEYS, GgufHeader, gguf_header
from core.modeling.gguf_shapes import check_gguf_shapes
from conftest import run_cli
from test_loading import VOCAB, write_tiny_gguf
from test_model_format import gguf_string, read_or_refused


def header_bytes(entries: list[bytes], tensors: list[bytes] = ()) -> bytes:
    return b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(entries)) + b"".join(entries) + b"".join(tensors)


def string_entry(key: str, value: str) -> bytes:
    return gguf_string(key) + struct.pack("<I", 8) + gguf_string(value)


def tensor_info(name: str, *shape: int) -> bytes:
    return gguf_string(name) + struct.pack("<I", len(shape)) + struct.pack(f"<{len(shape)}Q", *shape) + b"\0" * 12


def test_what_gguf_s_own_reader_reads(tmp_path):
    """A file written by gguf's GGUFWriter (arrays of strings, of numbers and of arrays among its metadata): the
    architecture, name, file type and parameter count are what gguf's GGUFReader reads."""
    import gguf

    path = tmp_path / "tiny.gguf"
    write_tiny_gguf(path)
    writer = gguf.GGUFWriter(str(tmp_path / "nested.gguf"), "qwen2")
    writer.add_file_type(gguf.LlamaFileType.MOSTLY_Q4_K_M)
    writer.add_array("test.nested", [[1, 2], [3]])
    writer.add_array("test.strings", ["a", "bc"])
    writer.add_tensor("w", np.zeros((3, 5), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    for file in (path, tmp_path / "nested.gguf"):
        theirs = gguf.GGUFReader(file)
        fields = theirs.fields
        sizes = {key: field.contents() for key, field in fields.items() if key.partition(".")[2] in SIZE_KEYS}
        assert gguf_header(file) == GgufHeader(
            tensors=len(theirs.tensors),
            parameters=sum(int(np.prod(tensor.shape)) for tensor in theirs.tensors),
            file_type=fields["general.file_type"].contents() if "general.file_type" in fields else None,
            architecture=fields["general.architecture"].contents(),
            name=fields["general.name"].contents() if "general.name" in fields else "",
            sizes=sizes,
            shapes={t.name: tuple(int(n) for n in t.shape) for t in theirs.tensors if t.name in SHAPED_TENSORS},
            layers=frozenset(int(t.name.split(".")[1]) for t in theirs.tensors if t.name.startswith("blk.")),
        )
    assert gguf_header(path).sizes["llama.block_count"] == 2  # the tiny model's, as its writer was told
    assert gguf_header(path).shapes["token_embd.weight"] == (32, VOCAB)  # a row's length first


@pytest.mark.parametrize(
    "claim",
    [
        b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + struct.pack("<Q", 2**62),  # a key of 2^62 bytes
        b"GGUF" + struct.pack("<IQQ", 3, 1, 2**62),  # 2^62 metadata entries
        b"GGUF" + struct.pack("<IQQ", 3, 2**62, 0),  # 2^62 tensors
        b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + gguf_string("k") + struct.pack("<IIQ", 9, 8, 2**62),  # array
        b"GGUF" + struct.pack("<IQQ", 3, 1, 1) + gguf_string("k") + struct.pack("<IIQ", 9, 6, 2**62),  # of floats
    ],
)
def test_a_gguf_header_that_claims_more_than_the_file_holds_is_damaged_not_allocated(tmp_path, claim):
    path = tmp_path / "hostile.gguf"
    path.write_bytes(claim + b"\0" * 64)
    with pytest.raises(DamagedModelError, match="cut short inside its header"):
        gguf_header(path)


def test_a_string_of_hundreds_of_megabytes_is_skipped_not_read(tmp_path):
    """A value's length is within the file (a damaged length in a big file, or a hostile one): what is not kept
    is skipped by seeking, so reading the header costs no memory for it; a kept value too long to be a name is
    skipped as well, the model then saying no architecture."""
    path = tmp_path / "long-string.gguf"
    length = 300_000_000
    with open(path, "wb") as handle:
        handle.write(header_bytes([gguf_string("general.architecture") + struct.pack("<IQ", 8, length)]))
        handle.truncate(handle.tell() + length)  # sparse: no disk taken
    tracemalloc.start()
    try:
        assert gguf_header(path) == GgufHeader(0, 0, None, None, "")
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1_000_000, peak


def test_arrays_nested_thousands_deep_are_damaged_not_a_crash(tmp_path, capsys, monkeypatch):
    """Python's recursion limit was the reader's: `specexec models import` of such a file ended in a
    RecursionError's traceback."""
    path = tmp_path / "nested.gguf"
    nesting = struct.pack("<IQ", 9, 1) * 5_000 + struct.pack("<IQ", 4, 0)
    path.write_bytes(header_bytes([gguf_string("k") + struct.pack("<I", 9) + nesting], [tensor_info("w", 2)]))
    with pytest.raises(DamagedModelError, match=f"nests metadata arrays more than {MAX_NESTING} deep"):
        gguf_header(path)
    monkeypatch.setenv("SPECEXEC_MODELS_DIR", str(tmp_path / "models"))
    monkeypatch.setenv("SPECEXEC_CONFIG_DIR", str(tmp_path / "config"))
    result = run_cli(capsys, "models", "import", str(path))
    assert result.returncode == 2 and "Traceback" not in result.stderr
    assert f"nests metadata arrays more than {MAX_NESTING} deep: download it again" in result.stderr
    assert not (tmp_path / "models").exists()


def test_an_old_version_and_a_file_of_no_tensors_are_refused_before_an_import(tmp_path):
    """Version 1 (32-bit lengths) was let in by the import and could never load (gguf's reader, which loads the
    file, reads versions 2 and 3); a big-endian file's version read as a huge number; a file that lists no
    tensors holds no model."""
    from core.models.importing import import_model

    old = tmp_path / "old.gguf"
    old.write_bytes(b"GGUF" + struct.pack("<IQQ", 1, 1, 1) + b"\0" * 64)
    with pytest.raises(ModelFormatError, match="is GGUF version 1, which nothing loads now: download the model"):
        import_model(old, tmp_path / "models")
    big_endian = tmp_path / "s390x.gguf"
    big_endian.write_bytes(b"GGUF" + struct.pack(">IQQ", 3, 1, 1) + b"\0" * 64)
    with pytest.raises(ModelFormatError, match="is a big-endian GGUF file .*download the usual little-endian one"):
        import_model(big_endian, tmp_path / "models")
    empty = tmp_path / "empty.gguf"
    empty.write_bytes(header_bytes([string_entry("general.architecture", "llama")]))
    with pytest.raises(ModelFormatError, match="is a GGUF file with no tensors: it holds no model"):
        import_model(empty, tmp_path / "models")
    assert not (tmp_path / "models").exists()


@pytest.mark.parametrize(
    "entries, tensors, room, said",
    [
        # a key longer than GGUF allows
        ([gguf_string("k" * 70_000) + struct.pack("<II", 4, 1)], [], 0, "metadata key of 70,000 bytes"),
        # a tensor of more dimensions than ggml has
        ([], [tensor_info("w", 1, 1, 1, 1, 1)], 0, "tensor of 5 dimensions"),
        # more strings than any vocabulary (empty ones, which the file has room for): refused before one is walked
        ([gguf_string("k") + struct.pack("<IIQ", 9, 8, 1 << 23)], [], 8 << 23, "counts more than"),
    ],
    ids=["long-key", "five-dimensions", "too-many-strings"],
)
def test_what_no_real_header_holds_is_damaged(tmp_path, entries, tensors, room, said):
    path = tmp_path / "odd.gguf"
    with open(path, "wb") as handle:
        handle.write(header_bytes(entries, tensors))
        handle.truncate(handle.tell() + room)  # sparse zeros
    with pytest.raises(DamagedModelError, match=said) as info:
        gguf_header(path)
    assert str(info.value).endswith(": download it again")


def test_seeded_mutations_of_a_real_header_are_read_or_refused_in_words(tmp_path):
    """2,000 mutations of the header and tensor list gguf's writer made (bytes flipped, lengths and counts replaced by small,
    huge and boundary values, the file cut short): each reads, its sizes agreeing with its tensors
    (core.modeling.gguf_shapes), or is a ModelFormatError."""
    import gguf

    source = tmp_path / "tiny.gguf"
    write_tiny_gguf(source)
    original = source.read_bytes()[: gguf.GGUFReader(source).data_offset]  # the tensor data is never read
    chosen = random.Random(37)
    path = tmp_path / "mutated.gguf"
    outcomes = {"read": 0, "refused": 0}
    for _ in range(2_000):
        data = bytearray(original)
        for _ in range(chosen.randint(1, 3)):
            at = chosen.randrange(4, len(data) - 8)
            kind = chosen.randrange(3)
            if kind == 0:
                data[at] ^= 1 << chosen.randrange(8)
            elif kind == 1:
                value = chosen.choice([0, 1, 2**31, 2**32 - 1, 2**63, 2**64 - 1, chosen.randrange(1 << 24)])
                data[at : at + 8] = struct.pack("<Q", value)
            else:
                del data[at:]
                break
        path.write_bytes(bytes(data))
        outcomes[read_or_refused(lambda: check_gguf_shapes(path, gguf_header(path)))] += 1
    assert outcomes["read"] > 0 and outcomes["refused"] > 0, outcomes  # the mutations reach both ends
