"""The small JSON file each downloaded model folder carries (`specexec-download.json`): which repo, revision
and commit it holds, every file with its size and checksum, which files the downloader has verified, and
whether the download finished.

It is what lets `specexec models list` show an unfinished download with its progress, and the app offer to
resume one after a reboot. Written atomically (temp file + rename), so a kill never leaves half a manifest.

A verified file is recorded with the stamp it had then (size, modification time, inode): a later run that
finds the same stamp, for the same listed checksum, trusts the file without reading 40 GB again; any other
file of the right size (copied in, imported, changed, or verified under another checksum) is hashed first.
"""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

from core.models.hub import RemoteFile, RemoteRepo
from core.system import json_text
from core.system.disk import replace_file

MANIFEST_NAME = "specexec-download.json"
MANIFEST_TEMP_NAME = MANIFEST_NAME + ".tmp"
PARTIAL_SUFFIX = ".incomplete"
SCHEMA_VERSION = 2  # 2 added `verified`; a version 1 manifest reads with none verified


@dataclass(frozen=True)
class FileStamp:
    """What `stat` says about a file: a file with the same stamp has not been rewritten since."""

    size: int
    mtime_ns: int
    inode: int

    @classmethod
    def of(cls, path: Path) -> "FileStamp":
        status = path.stat()
        return cls(status.st_size, status.st_mtime_ns, status.st_ino)


@dataclass(frozen=True)
class Manifest(RemoteRepo):
    """What a folder was downloaded from (the remote listing at a commit), whether it finished, and the
    stamps of the files verified against that listing."""

    complete: bool
    verified: dict[str, FileStamp] = field(default_factory=dict)

    def is_verified(self, file: RemoteFile, path: Path) -> bool:
        """Whether `path` is the file this manifest verified as `file` (same checksum, untouched since)."""
        stamp = self.verified.get(file.path)
        if stamp is None or file not in self.files:
            return False
        try:
            return FileStamp.of(path) == stamp
        except OSError:
            return False


def partial_path(final: Path) -> Path:
    """Where the body of `final` grows until it is verified: `<name>.incomplete` beside it."""
    return final.with_name(final.name + PARTIAL_SUFFIX)


def write_manifest(
    folder: Path, remote: RemoteRepo, complete: bool, verified: dict[str, FileStamp] | None = None
) -> None:
    data = {
        "schema_version": SCHEMA_VERSION,
        "repo": remote.repo,
        "revision": remote.revision,
        "commit": remote.commit,
        "complete": complete,
        "total_bytes": remote.total_bytes,
        "files": [asdict(file) for file in remote.files],
        "verified": {path: asdict(stamp) for path, stamp in (verified or {}).items()},
    }
    target = folder / MANIFEST_NAME
    temporary = folder / MANIFEST_TEMP_NAME
    temporary.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    replace_file(temporary, target)


def read_manifest(folder: Path) -> Manifest | None:
    """The folder's manifest, or None when it has none or an unreadable one (then it is not our download)."""
    try:
        data = json_text.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
        files = tuple(
            RemoteFile(path=str(f["path"]), size=int(f["size"]), sha256=f.get("sha256"), blob_id=f.get("blob_id"))
            for f in data["files"]
        )
        verified = {
            str(path): FileStamp(int(s["size"]), int(s["mtime_ns"]), int(s["inode"]))
            for path, s in data.get("verified", {}).items()
        }
        return Manifest(
            repo=str(data["repo"]),
            revision=str(data["revision"]),
            commit=str(data["commit"]),
            files=files,
            complete=bool(data["complete"]),
            verified=verified,
        )
    except (OSError, ValueError, KeyError, TypeError, AttributeError, OverflowError):
        return None


def bytes_present(folder: Path, file: RemoteFile) -> int:
    """Bytes of `file` already on disk: its size when the final file is there (only verified files are
    renamed into place), else the length of its partial, capped at the size."""
    final = folder / file.path
    try:
        if final.stat().st_size == file.size:
            return file.size
    except OSError:
        pass
    try:
        return min(partial_path(final).stat().st_size, file.size)
    except OSError:
        return 0
