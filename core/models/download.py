"""Resumable, verified downloads of a repo's files over plain HTTP Range requests.

huggingface_hub gives the file list (core/models/hub.py) but its own downloader deletes partial files on
any failure and cannot resume after the process dies, which a 35 GB model cannot afford. Here each file
grows in `<name>.incomplete` beside its final name; a rerun, even after a kill -9 or a reboot, asks only for
the missing bytes (`Range: bytes=N-`; a server that answers 200 instead of 206 makes it start the file
over). LFS files are checked against the hub's sha256 (hashed while they stream, so no second pass) and only
then renamed into place; a mismatch deletes the file and fetches it once more. Failed or stalled
connections (no byte for `stall_timeout_s`) reconnect with exponential backoff. Redirects are followed by
hand so the token only ever goes to the hub's own host, never to the CDN a large file redirects to.
"""

from __future__ import annotations

import errno
import hashlib
import os
import shutil
import threading
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from urllib.parse import urljoin, urlparse

from core.errors import (
    DiskSpaceError, DownloadCancelledError, DownloadError, DownloadVerifyError, GatedModelError, RemoteNotFoundError,
)
from core.models.download_progress import DownloadListener, PlannedFile, ProgressMeter
from core.models.hub import RemoteFile, RemoteRepo, file_url, gated_message, hub_endpoint, licence_page
from core.models.manifest import bytes_present, partial_path, read_manifest, write_manifest

# Tests only: pretend the download disk has this many bytes free (a real full disk cannot be made here).
FREE_BYTES_OVERRIDE_ENV = "SPECEXEC_DOWNLOAD_FREE_BYTES"
MAX_REDIRECTS = 5
FSYNC_EVERY_BYTES = 256 << 20


@dataclass(frozen=True)
class DownloadSettings:
    stall_timeout_s: float = 30.0
    connect_timeout_s: float = 20.0
    max_attempts: int = 8  # failed connections in a row that delivered no byte, per file
    backoff_s: float = 1.0  # first wait; doubles per failed attempt
    max_backoff_s: float = 60.0
    chunk_bytes: int = 1 << 20
    progress_interval_s: float = 0.25
    free_margin_bytes: int = 512 << 20  # room left on the disk after the download


@dataclass(frozen=True)
class DownloadJob:
    """One repo at a fixed commit into one folder; `label` names it in events ('target', 'draft' or 'model')."""

    remote: RemoteRepo
    folder: Path
    label: str = "model"


class _Retryable(Exception):
    """A connection that failed in a way a reconnect can fix (5xx, early close, stall)."""


class _RangeNotSatisfiable(_Retryable):
    """HTTP 416: the partial file does not fit the server's file; the next attempt starts it over."""


def download(jobs: list[DownloadJob], root: Path, listener: DownloadListener | None = None,
             cancel: threading.Event | None = None, token: str | None = None,
             settings: DownloadSettings = DownloadSettings()) -> None:
    """Bring every file of every job onto disk, verified, resuming whatever earlier runs left.

    `root` is the folder the event paths are relative to (the models folder). Cancelling (the event, or
    KeyboardInterrupt) keeps partial files for the next run; the event is seen at the next chunk or retry
    wait, so a stalled connection can hold it for up to `stall_timeout_s` (the CLI turns SIGINT and SIGTERM
    into an immediate KeyboardInterrupt instead).

    Raises:
        DiskSpaceError: before the first byte, when the missing bytes plus a margin exceed the free space.
        GatedModelError: the hub refused a file (401/403).
        RemoteNotFoundError: a file is gone (404).
        DownloadVerifyError: a file's sha256 was wrong twice.
        DownloadCancelledError: `cancel` was set.
        DownloadError: the network failed `settings.max_attempts` times in a row.
    """
    import requests

    listener = listener or DownloadListener()
    cancel = cancel or threading.Event()
    planned: list[tuple[DownloadJob, RemoteFile, PlannedFile]] = []
    for job in jobs:
        _forget_changed_files(job)
        for file in job.remote.files:
            _check_safe_path(file.path)
            relative = (job.folder / file.path).relative_to(root).as_posix()
            planned.append((job, file, PlannedFile(relative, file.size, bytes_present(job.folder, file))))
    total = sum(item.size for _, _, item in planned)
    already = sum(item.already_bytes for _, _, item in planned)
    with requests.Session() as session:
        for job in jobs:  # a gated repo says so now, before any folder is made
            missing = [file for j, file, item in planned if j is job and item.already_bytes < file.size]
            if missing:
                _check_access(session, job, missing[0], token, settings)
        check_free_space(root, total - already, settings.free_margin_bytes)
        for job in jobs:  # only now: a refused download leaves nothing behind
            job.folder.mkdir(parents=True, exist_ok=True)
            write_manifest(job.folder, job.remote, complete=False)
        listener.plan({job.label: job.folder for job in jobs}, [item for _, _, item in planned], total, already)
        meter = ProgressMeter(listener, total, already, settings.progress_interval_s)
        for job in jobs:
            for file, item in ((file, item) for j, file, item in planned if j is job):
                if item.already_bytes == file.size and (job.folder / file.path).is_file():
                    continue
                _fetch_verified(session, job, file, item.path, meter, cancel, token, settings)
            write_manifest(job.folder, job.remote, complete=True)


def _check_access(session, job: DownloadJob, file: RemoteFile, token: str | None, settings: DownloadSettings) -> None:
    """A HEAD of one file, redirect not followed: the hub answers 401/403 for a gated repo without a token
    with accepted terms. Network trouble here is left to the download's own retries."""
    import requests

    url = file_url(job.remote.repo, job.remote.commit, file.path)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = session.head(url, headers=headers, allow_redirects=False,
                                timeout=(settings.connect_timeout_s, settings.stall_timeout_s))
    except requests.RequestException:
        return
    if response.status_code in (401, 403):
        raise GatedModelError(gated_message(job.remote.repo, bool(token)), licence_page(job.remote.repo))


def check_free_space(folder: Path, missing_bytes: int, margin_bytes: int) -> None:
    """Refuse, in plain words, when `missing_bytes` plus a margin do not fit on the disk holding `folder`."""
    override = os.environ.get(FREE_BYTES_OVERRIDE_ENV)
    free = int(override) if override else shutil.disk_usage(_existing_parent(folder)).free
    if missing_bytes > 0 and missing_bytes + margin_bytes > free:
        raise DiskSpaceError(
            f"not enough disk space: the download needs {format_bytes(missing_bytes + margin_bytes)} free on "
            f"{_existing_parent(folder)}, has {format_bytes(free)}. Free some space or choose another folder with --dir."
        )


def format_bytes(count: float) -> str:
    """1234567890 -> '1.2 GB' (decimal units, as disks are sold)."""
    for unit in ("B", "kB", "MB", "GB"):
        if abs(count) < 1000:
            return f"{count:.0f} {unit}" if unit == "B" else f"{count:.1f} {unit}"
        count /= 1000
    return f"{count:.1f} TB"


def _existing_parent(path: Path) -> Path:
    while not path.exists() and path != path.parent:
        path = path.parent
    return path


def _check_safe_path(path: str) -> None:
    """A hub file path must stay inside the model folder (never absolute, never '..')."""
    parts = PurePosixPath(path).parts
    if not parts or PurePosixPath(path).is_absolute() or ".." in parts or "\\" in path:
        raise DownloadError(f"the hub listed a file with an unsafe path {path!r}; refusing to write it")


def _forget_changed_files(job: DownloadJob) -> None:
    """A folder downloaded at another commit keeps the files that did not change; the others are deleted so
    an old body is never resumed or kept under a new file's name."""
    old = read_manifest(job.folder)
    if old is None or old.commit == job.remote.commit:
        return
    before = {file.path: file for file in old.files}
    for file in job.remote.files:
        if before.get(file.path) != file:
            for stale in (job.folder / file.path, partial_path(job.folder / file.path)):
                stale.unlink(missing_ok=True)


def _fetch_verified(session, job: DownloadJob, file: RemoteFile, label: str, meter: ProgressMeter,
                    cancel: threading.Event, token: str | None, settings: DownloadSettings) -> None:
    """Fetch one file, check it, rename it into place; on a wrong checksum, delete it and fetch it once more."""
    final = job.folder / file.path
    partial = partial_path(final)
    final.parent.mkdir(parents=True, exist_ok=True)
    for round_number in (1, 2):
        digest = _fetch_body(session, job, file, partial, label, meter, cancel, token, settings)
        ok = partial.stat().st_size == file.size and (file.sha256 is None or digest == file.sha256)
        meter.listener.verify(label, ok)
        if ok:
            with open(partial, "rb+") as handle:
                os.fsync(handle.fileno())
            os.replace(partial, final)
            meter.add(label, 0, force=True)
            return
        meter.add(label, -partial.stat().st_size)
        partial.unlink()
        if round_number == 2:
            raise DownloadVerifyError(
                f"{label} arrived corrupted twice (its sha256 differs from the hub's {file.sha256}); the file was "
                "deleted. Check the disk and the network (a proxy rewriting files?) and run the download again."
            )


class _PartialFile:
    """The `.incomplete` file of one download with the running sha256 of its bytes; `offset` is its length."""

    def __init__(self, handle, chunk_bytes: int) -> None:
        self.handle = handle
        self.hasher = hashlib.sha256()
        handle.seek(0)
        while block := handle.read(chunk_bytes):  # resume: hash what an earlier run left
            self.hasher.update(block)
        self.offset = handle.tell()
        self._since_fsync = 0

    def append(self, chunk: bytes) -> None:
        self.handle.write(chunk)
        self.hasher.update(chunk)
        self.offset += len(chunk)
        self._since_fsync += len(chunk)
        if self._since_fsync >= FSYNC_EVERY_BYTES:  # bound what a power cut can lose
            self.handle.flush()
            os.fsync(self.handle.fileno())
            self._since_fsync = 0

    def restart(self) -> int:
        """Empty the file (the server cannot continue it); returns the bytes thrown away."""
        dropped = self.offset
        self.handle.truncate(0)
        self.handle.seek(0)
        self.hasher, self.offset = hashlib.sha256(), 0
        return dropped


def _fetch_body(session, job: DownloadJob, file: RemoteFile, partial: Path, label: str, meter: ProgressMeter,
                cancel: threading.Event, token: str | None, settings: DownloadSettings) -> str:
    """Append the missing bytes of `file` to `partial`, reconnecting as needed; returns the sha256 of it all."""
    import requests

    url = file_url(job.remote.repo, job.remote.commit, file.path)
    with open(partial, "ab+") as handle:
        body = _PartialFile(handle, settings.chunk_bytes)
        failures = 0
        while body.offset < file.size:
            received = 0
            try:
                _raise_if_cancelled(cancel, label, body.offset)
                with _open(session, url, body.offset, token, job.remote.repo, settings) as response:
                    if body.offset > 0 and response.status_code == 200:  # the server ignored Range: start over
                        meter.add(label, -body.restart())
                    elif body.offset > 0 and not _content_range_starts_at(response, body.offset):
                        raise _Retryable(f"the server answered a range other than bytes {body.offset}-")
                    for chunk in response.iter_content(settings.chunk_bytes):
                        _raise_if_cancelled(cancel, label, body.offset)
                        body.append(chunk)
                        received += len(chunk)
                        meter.add(label, len(chunk))
                if body.offset < file.size:
                    raise _Retryable(f"the connection closed at {body.offset} of {file.size} bytes")
            except (requests.RequestException, _Retryable) as error:
                if isinstance(error, _RangeNotSatisfiable):
                    meter.add(label, -body.restart())
                failures = 1 if received else failures + 1
                if failures > settings.max_attempts:
                    raise DownloadError(
                        f"the network failed {settings.max_attempts} times in a row while fetching {label} "
                        f"({_reason(error, settings)}); the {body.offset} bytes fetched are kept: run the download "
                        "again to resume"
                    ) from error
                meter.listener.retry(label, failures, _reason(error, settings))
                if cancel.wait(min(settings.backoff_s * 2 ** (failures - 1), settings.max_backoff_s)):
                    _raise_if_cancelled(cancel, label, body.offset)
            except OSError as error:
                if error.errno == errno.ENOSPC:
                    raise DiskSpaceError(f"the disk filled up while writing {label}; free some space and resume") from error
                raise
        handle.flush()
        return body.hasher.hexdigest()


def _raise_if_cancelled(cancel: threading.Event, label: str, offset: int) -> None:
    if cancel.is_set():
        raise DownloadCancelledError(f"download cancelled; {label} is kept at {offset} bytes for a resume")


def _open(session, url: str, offset: int, token: str | None, repo: str, settings: DownloadSettings):
    """GET `url` from `offset`, following redirects by hand; the token goes only to the hub's own host."""
    hub_host = urlparse(hub_endpoint()).netloc
    for _ in range(MAX_REDIRECTS + 1):
        headers = {"Accept-Encoding": "identity"}  # byte offsets must count the file's bytes, not gzip's
        if offset:
            headers["Range"] = f"bytes={offset}-"
        if token and urlparse(url).netloc == hub_host:
            headers["Authorization"] = f"Bearer {token}"
        response = session.get(url, headers=headers, stream=True, allow_redirects=False,
                               timeout=(settings.connect_timeout_s, settings.stall_timeout_s))
        status = response.status_code
        if status in (301, 302, 303, 307, 308) and "Location" in response.headers:
            response.close()
            url = urljoin(url, response.headers["Location"])
            continue
        if status in (200, 206):
            return response
        response.close()
        if status in (401, 403):
            raise GatedModelError(gated_message(repo, bool(token)), licence_page(repo))
        if status == 404:
            raise RemoteNotFoundError(f"the hub has no file at {url}: the repo changed; run the download again")
        if status == 416:
            raise _RangeNotSatisfiable(f"the server refused the range bytes={offset}- (HTTP 416)")
        if status == 429 or status >= 500:
            raise _Retryable(f"the server answered HTTP {status}")
        raise DownloadError(f"the server answered HTTP {status} for {url}")
    raise DownloadError(f"more than {MAX_REDIRECTS} redirects for {url}")


def _content_range_starts_at(response, offset: int) -> bool:
    """A 206's `Content-Range: bytes START-END/SIZE` must start where the partial file ends."""
    value = response.headers.get("Content-Range", "")
    try:
        return response.status_code == 206 and int(value.split()[1].split("-")[0]) == offset
    except (IndexError, ValueError):
        return False


def _reason(error: Exception, settings: DownloadSettings) -> str:
    """Why a connection failed, in words for the retry event."""
    import requests

    text = str(error)
    if isinstance(error, requests.Timeout) or "timed out" in text.lower():
        return f"no byte for {settings.stall_timeout_s:g} s"
    if isinstance(error, requests.exceptions.ChunkedEncodingError) or "IncompleteRead" in text:
        return "the connection broke mid-file"
    if isinstance(error, requests.ConnectionError):
        return f"cannot connect: {text}"
    return text or type(error).__name__
