"""How a download reports what it does, without Qt: a listener object with no-op methods (override what you
need), and a meter that turns bytes into throttled progress with speed and ETA over all files."""

from __future__ import annotations

import time
from collections import deque
from dataclasses import dataclass
from pathlib import Path

MIN_SPEED_WINDOW_S = 1.0


@dataclass(frozen=True)
class PlannedFile:
    """One file to have on disk; `path` is relative to the download root (the models folder)."""

    path: str
    size: int
    already_bytes: int


@dataclass(frozen=True)
class Progress:
    file: str
    done_bytes: int
    total_bytes: int
    bytes_per_second: float
    eta_seconds: float | None


class DownloadListener:
    """Callbacks of a download, called on the downloading thread. The defaults do nothing."""

    def plan(self, folders: dict[str, Path], files: list[PlannedFile], total_bytes: int, already_bytes: int) -> None:
        """Before the first byte: what will be on disk and how much of it already is."""

    def progress(self, progress: Progress) -> None:
        """At most every `DownloadSettings.progress_interval_s`, and when a file ends."""

    def verify(self, file: str, ok: bool) -> None:
        """A fetched file was checked against the hub's checksum (sha256 for LFS files, the git blob id for the
        rest); a False is fetched once more."""

    def check(self, file: str, ok: bool) -> None:
        """A file already in the folder, not known verified, was hashed before the plan: True keeps it, False
        means it differs from the hub's and is replaced."""

    def attach(self, folder: Path, pid: int | None) -> None:
        """Another process is downloading into `folder`: its progress follows (read from the disk), and this
        download goes on by itself if that one stops before the end."""

    def retry(self, file: str, attempt: int, reason: str) -> None:
        """The connection failed or stalled; the download waits and reconnects, keeping the bytes it has."""


class ProgressMeter:
    """Bytes done over all files; speed over the last `window_s` seconds of this session's transfer."""

    def __init__(
        self, listener: DownloadListener, total_bytes: int, done_bytes: int, interval_s: float, window_s: float = 5.0
    ) -> None:
        self.listener = listener
        self.total_bytes = total_bytes
        self.done_bytes = done_bytes
        self.interval_s = interval_s
        self.window_s = window_s
        self._samples: deque[tuple[float, int]] = deque([(time.monotonic(), done_bytes)])
        self._last_emit = 0.0

    def add(self, file: str, count: int, force: bool = False) -> None:
        """`count` bytes arrived (negative when a failed file's bytes are thrown away)."""
        self.done_bytes += count
        now = time.monotonic()
        if count > 0:
            self._samples.append((now, self.done_bytes))
            while len(self._samples) > 2 and now - self._samples[0][0] > self.window_s:
                self._samples.popleft()
        elif count < 0:  # bytes thrown away: restart the speed window so the speed never goes negative
            self._samples = deque([(now, self.done_bytes)])
        if force or now - self._last_emit >= self.interval_s:
            self._last_emit = now
            self.listener.progress(self.snapshot(file, now))

    def snapshot(self, file: str, now: float | None = None) -> Progress:
        now = time.monotonic() if now is None else now
        start_time, start_bytes = self._samples[0]
        elapsed = now - start_time
        # Under a second of transfer says nothing yet (a 2-byte config file is not a speed): report 0 / None.
        speed = (self.done_bytes - start_bytes) / elapsed if elapsed >= MIN_SPEED_WINDOW_S else 0.0
        remaining = max(self.total_bytes - self.done_bytes, 0)
        eta = remaining / speed if speed > 0 else (0.0 if remaining == 0 else None)
        return Progress(
            file=file, done_bytes=self.done_bytes, total_bytes=self.total_bytes, bytes_per_second=speed, eta_seconds=eta
        )
