"""How `specexec models download` shows a download: JSON lines (a contract the app's wizard parses) or words
for a person on a terminal."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import TextIO

from core.planning.sizes import format_bytes
from core.models.download_progress import DownloadListener, PlannedFile, Progress


def emit(event: str, stream: TextIO | None = None, **fields) -> None:
    """One JSON object per line, flushed at once so a reading process sees it now."""
    stream = stream or sys.stdout
    stream.write(json.dumps({"event": event, **fields}) + "\n")
    stream.flush()


def folders_field(folders: dict[str, Path]) -> dict:
    """`folder` for one model, `folders` {"target", "draft"} for a pair."""
    if set(folders) == {"model"}:
        return {"folder": str(folders["model"])}
    return {"folders": {label: str(path) for label, path in folders.items()}}


class JsonLinesListener(DownloadListener):
    """Events `plan`, `check`, `attach`, `progress`, `verify`, `retry` (the CLI adds `error` and `done`)."""

    def plan(self, folders: dict[str, Path], files: list[PlannedFile], total_bytes: int, already_bytes: int) -> None:
        emit(
            "plan",
            **folders_field(folders),
            files=[{"path": f.path, "size": f.size} for f in files],
            total_bytes=total_bytes,
            already_bytes=already_bytes,
        )

    def progress(self, progress: Progress) -> None:
        emit(
            "progress",
            file=progress.file,
            done_bytes=progress.done_bytes,
            total_bytes=progress.total_bytes,
            bytes_per_second=round(progress.bytes_per_second, 1),
            eta_seconds=None if progress.eta_seconds is None else round(progress.eta_seconds, 1),
        )

    def verify(self, file: str, ok: bool) -> None:
        emit("verify", file=file, ok=ok)

    def check(self, file: str, ok: bool) -> None:
        emit("check", file=file, ok=ok)

    def attach(self, folder: Path, pid: int | None) -> None:
        emit("attach", folder=str(folder), pid=pid)

    def retry(self, file: str, attempt: int, reason: str) -> None:
        emit("retry", file=file, attempt=attempt, reason=reason)


class HumanListener(DownloadListener):
    """One status line, rewritten in place on a terminal and printed every few seconds elsewhere."""

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.live = self.stream.isatty()
        self._last_line = 0.0

    def plan(self, folders: dict[str, Path], files: list[PlannedFile], total_bytes: int, already_bytes: int) -> None:
        where = ", ".join(str(path) for path in folders.values())
        already = f", {format_bytes(already_bytes)} already here" if already_bytes else ""
        count = f"{len(files)} file" + ("" if len(files) == 1 else "s")
        print(f"Downloading {count}, {format_bytes(total_bytes)}{already}, into {where}", file=self.stream)

    def progress(self, progress: Progress) -> None:
        now = time.monotonic()
        if not self.live and now - self._last_line < 5 and progress.done_bytes < progress.total_bytes:
            return
        self._last_line = now
        percent = 100 * progress.done_bytes / progress.total_bytes if progress.total_bytes else 100
        eta = "" if progress.eta_seconds is None else f", {format_duration(progress.eta_seconds)} left"
        line = (
            f"{percent:5.1f}%  {format_bytes(progress.done_bytes)} of {format_bytes(progress.total_bytes)}"
            f"  {format_bytes(progress.bytes_per_second)}/s{eta}"
        )
        print(f"\r{line:<72}" if self.live else line, end="" if self.live else "\n", file=self.stream, flush=True)

    def verify(self, file: str, ok: bool) -> None:
        if not ok:
            self._newline()
            print(f"{file} arrived corrupted: fetching it again", file=self.stream)

    def check(self, file: str, ok: bool) -> None:
        if not ok:
            print(f"{file} is here but differs from the hub's: replacing it", file=self.stream)

    def attach(self, folder: Path, pid: int | None) -> None:
        who = f"process {pid}" if pid is not None else "another process"
        print(f"Already downloading into {folder} in {who}: showing its progress", file=self.stream)

    def retry(self, file: str, attempt: int, reason: str) -> None:
        self._newline()
        print(f"{file}: {reason}; reconnecting (attempt {attempt})", file=self.stream)

    def finish(self) -> None:
        self._newline()

    def _newline(self) -> None:
        if self.live:
            print(file=self.stream)


def format_duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"
