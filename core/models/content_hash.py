"""The checksum the hub lists for a file, computed over bytes as they stream or from a file on disk.

LFS files (the weights) are listed with the sha256 of their body; small git files (config.json, the
tokenizer) with their git blob id, the sha1 of `blob <size>\\0` followed by the body. Both are fed
incrementally, so a download hashes while it streams and a resume hashes only what is already on disk.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from core.models.hub import RemoteFile

READ_BLOCK = 4 << 20


class ContentHash:
    """A running hash of one file's body in the form its listing gives (sha256 or git blob sha1)."""

    def __init__(self, file: RemoteFile) -> None:
        self.file = file
        self.reset()

    def reset(self) -> None:
        """Start over (also when the partial file was emptied)."""
        self._hash = hashlib.sha256() if self.file.sha256 else hashlib.sha1(b"blob %d\0" % self.file.size)

    def update(self, data: bytes | memoryview) -> None:
        self._hash.update(data)

    def matches(self) -> bool:
        """Whether the bytes fed so far are the listed file (the size is part of a blob id, not of a sha256:
        callers check the length too)."""
        return self._hash.hexdigest() == (self.file.sha256 or self.file.blob_id)

    def expected_words(self) -> str:
        return f"sha256 {self.file.sha256}" if self.file.sha256 else f"git blob id {self.file.blob_id}"


def hash_file(path: Path, file: RemoteFile) -> ContentHash:
    """The running hash of what `path` holds now, ready to take more bytes."""
    content = ContentHash(file)
    with open(path, "rb") as handle:
        while block := handle.read(READ_BLOCK):
            content.update(block)
    return content


def file_matches(path: Path, file: RemoteFile) -> bool:
    """Whether `path` holds exactly the listed file (its size, then its checksum)."""
    return path.stat().st_size == file.size and hash_file(path, file).matches()
