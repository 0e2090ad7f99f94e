"""The small JSON file each downloaded model folder carries (`specexec-download.json`): which repo, revision
and commit it holds, every file with its size and sha256, and whether the download finished.

It is what lets `specexec models list` show an unfinished download with its progress, and the app offer to
resume one after a reboot. Written atomically (temp file + rename), so a kill never leaves half a manifest.
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from core.models.hub import RemoteFile, RemoteRepo

MANIFEST_NAME = "specexec-download.json"
PARTIAL_SUFFIX = ".incomplete"
SCHEMA_VERSION = 1


@dataclass(frozen=True)
class Manifest(RemoteRepo):
    """What a folder was downloaded from (the remote listing at a commit), and whether it finished."""

    complete: bool


def partial_path(final: Path) -> Path:
    """Where the body of `final` grows until it is verified: `<name>.incomplete` beside it."""
    return final.with_name(final.name + PARTIAL_SUFFIX)


def write_manifest(folder: Path, remote: RemoteRepo, complete: bool) -> None:
    data = {
        "schema_version": SCHEMA_VERSION, "repo": remote.repo, "revision": remote.revision,
        "commit": remote.commit, "complete": complete, "total_bytes": remote.total_bytes,
        "files": [asdict(file) for file in remote.files],
    }
    target = folder / MANIFEST_NAME
    temporary = folder / (MANIFEST_NAME + ".tmp")
    temporary.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
    os.replace(temporary, target)


def read_manifest(folder: Path) -> Manifest | None:
    """The folder's manifest, or None when it has none or an unreadable one (then it is not our download)."""
    try:
        data = json.loads((folder / MANIFEST_NAME).read_text(encoding="utf-8"))
        files = tuple(RemoteFile(path=str(f["path"]), size=int(f["size"]), sha256=f.get("sha256")) for f in data["files"])
        return Manifest(
            repo=str(data["repo"]), revision=str(data["revision"]), commit=str(data["commit"]), files=files,
            complete=bool(data["complete"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
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
