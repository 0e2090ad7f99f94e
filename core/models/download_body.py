"""One file's body over plain HTTP: Range resumes, redirects followed by hand, reconnects with backoff, and the
hub's checksum computed while the bytes stream.

Each file grows in `<name>.incomplete` beside its final name; a rerun, even after a kill -9 or a reboot, asks
only for the missing bytes (`Range: bytes=N-`; a server that answers 200 instead of 206 makes it start the
file over). Every file is checked against the listing (sha256 for LFS files, git's blob id for the rest);
a mismatch deletes it and fetches it once more. core/models/download.py renames verified files into place.

A reconnect counts as a failure unless the attempt before it took the file further than it had ever been,
so a server that ignores Range and keeps breaking off is given up on after `max_attempts`, with words that
name what it does. Redirects are followed by hand so the token only ever goes to the hub's own host, never
to the CDN a large file redirects to. Failures are described in fixed words, never with a transport
exception's text, which can quote request headers (the token among them).
"""

from __future__ import annotations

import os
import queue
import threading
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urljoin, urlparse

from core.errors import DownloadCancelledError, DownloadError, DownloadVerifyError, GatedModelError, RemoteNotFoundError
from core.models.content_hash import ContentHash, hash_file
from core.models.download_progress import ProgressMeter
from core.models.hub import RemoteFile, file_url, gated_message, hub_endpoint, licence_page
from core.models.manifest import partial_path
from core.system.disk import SPARE_BYTES

MAX_REDIRECTS = 5
FSYNC_EVERY_BYTES = 256 << 20


@dataclass(frozen=True)
class DownloadSettings:
    stall_timeout_s: float = 30.0
    connect_timeout_s: float = 20.0
    max_attempts: int = 8  # failed connections in a row that took the file no further, per file
    backoff_s: float = 1.0  # first wait; doubles per failed attempt
    max_backoff_s: float = 60.0
    chunk_bytes: int = 1 << 20
    write_queue_chunks: int = 4  # chunks received but not yet written and hashed, at most
    progress_interval_s: float = 0.25
    free_margin_bytes: int = SPARE_BYTES  # room left on the disk after the download


@dataclass(frozen=True)
class BodyRequest:
    """Which file to fetch, from where, into where; `name` is how events call it."""

    repo: str
    commit: str
    file: RemoteFile
    final: Path
    name: str


class _Retryable(Exception):
    """A connection that failed in a way a reconnect can fix (5xx, early close, stall)."""


class _RangeNotSatisfiable(_Retryable):
    """HTTP 416: the partial file does not fit the server's file; the next attempt starts it over."""


def fetch_verified(
    session,
    request: BodyRequest,
    meter: ProgressMeter,
    cancel: threading.Event,
    token: str | None,
    settings: DownloadSettings,
) -> None:
    """Fetch one file into its partial file and check it; on a wrong checksum, delete it and fetch it once
    more. A verified body is left in the partial file: the caller flushes it and renames it into place.

    Raises:
        DownloadVerifyError: the file was wrong twice.
        and what `_fetch_body` raises.
    """
    partial = partial_path(request.final)
    request.final.parent.mkdir(parents=True, exist_ok=True)
    for round_number in (1, 2):
        content, size = _fetch_body(session, request, partial, meter, cancel, token, settings)
        ok = size == request.file.size and content.matches()
        meter.listener.verify(request.name, ok)
        if ok:
            meter.add(request.name, 0, force=True)
            return
        meter.add(request.name, -size)
        partial.unlink()
        if round_number == 2:
            raise DownloadVerifyError(
                f"{request.name} arrived corrupted twice (it does not match the hub's {content.expected_words()}); "
                "the file was deleted. Check the disk and the network (a proxy rewriting files?) and run the "
                "download again."
            )


class _Worker:
    """One thread applying `job` to each item of a bounded queue, in order. An exception stops the work
    (later items are skipped) and is raised in the caller's thread at its next `put` or `drain`."""

    def __init__(self, job, depth: int, name: str) -> None:
        self._job = job
        self._error: BaseException | None = None
        self._queue: queue.Queue = queue.Queue(depth)
        self._thread = threading.Thread(target=self._loop, name=name, daemon=True)
        self._thread.start()

    def put(self, item) -> None:
        if self._error is not None:
            self.drain()
        self._queue.put(item)

    def drain(self) -> None:
        self._queue.join()
        if self._error is not None:
            raise self._error

    def stop(self) -> None:
        """Finish the queued items, then end the thread (errors are left to `drain`)."""
        self._queue.put(None)
        self._thread.join()

    def _loop(self) -> None:
        while (item := self._queue.get()) is not None:
            try:
                if self._error is None:
                    self._job(item)
            except BaseException as error:  # noqa: BLE001 - handed to the downloading thread
                self._error = error
            finally:
                self._queue.task_done()
        self._queue.task_done()


class _PartialWriter:
    """The `.incomplete` file of one download. Each chunk is written on one thread and hashed on another
    (both let go of the GIL), so the socket is read again at once: with writing and hashing in line, a
    download ran at half the rate of a bare GET on loopback. At most `depth` chunks wait for each worker.
    `offset` counts the bytes handed over; `drain()` waits until they are written and hashed, and raises a
    write error (a full disk) in the caller's thread."""

    def __init__(self, path: Path, file: RemoteFile, depth: int) -> None:
        self.content = hash_file(path, file) if path.exists() else ContentHash(file)  # resume: hash what is kept
        self._handle = open(path, "ab")
        self.offset = self._handle.tell()
        self._since_fsync = 0
        self._disk = _Worker(self._write, depth, "download-write")
        self._hash = _Worker(self.content.update, depth, "download-hash")

    def __enter__(self) -> "_PartialWriter":
        return self

    def __exit__(self, *exc_info) -> None:
        """Write what was received (a cancel keeps it for the resume), then close the file."""
        self._disk.stop()
        self._hash.stop()
        self._handle.close()

    def append(self, chunk: bytes) -> None:
        self._disk.put(chunk)
        self._hash.put(chunk)
        self.offset += len(chunk)

    def drain(self) -> None:
        self._disk.drain()
        self._hash.drain()

    def restart(self) -> int:
        """Empty the file (the server cannot continue it); returns the bytes thrown away."""
        self.drain()
        dropped = self.offset
        self._handle.truncate(0)
        self.content.reset()
        self.offset = 0
        return dropped

    def _write(self, chunk: bytes) -> None:
        self._handle.write(chunk)
        self._since_fsync += len(chunk)
        if self._since_fsync >= FSYNC_EVERY_BYTES:  # bound what a power cut can lose
            self._handle.flush()
            os.fsync(self._handle.fileno())
            self._since_fsync = 0


def _fetch_body(
    session,
    request: BodyRequest,
    partial: Path,
    meter: ProgressMeter,
    cancel: threading.Event,
    token: str | None,
    settings: DownloadSettings,
) -> tuple[ContentHash, int]:
    """Append the missing bytes to `partial`, reconnecting as needed; returns its checksum and length."""
    import requests
    import urllib3

    url = file_url(request.repo, request.commit, request.file.path)
    size, name = request.file.size, request.name
    with _PartialWriter(partial, request.file, settings.write_queue_chunks) as body:
        furthest, failures, range_ignored = body.offset, 0, False
        while body.offset < size:
            try:
                _raise_if_cancelled(cancel, name, body.offset)
                with _open(session, url, body.offset, token, request.repo, settings) as response:
                    if body.offset > 0 and response.status_code == 200:  # the server ignored Range: start over
                        range_ignored = True
                        meter.add(name, -body.restart())
                    elif body.offset > 0 and not _content_range_starts_at(response, body.offset):
                        raise _Retryable(f"the server answered a range other than bytes {body.offset}-")
                    _copy_body(response, body, size, name, meter, cancel, settings.chunk_bytes)
                if body.offset < size:
                    raise _Retryable(f"the connection closed at {body.offset} of {size} bytes")
            except (requests.RequestException, urllib3.exceptions.HTTPError, _Retryable) as error:
                body.drain()
                if isinstance(error, _RangeNotSatisfiable):
                    meter.add(name, -body.restart())
                if body.offset > furthest:
                    furthest, failures = body.offset, 1
                else:
                    failures += 1
                if failures > settings.max_attempts:
                    words = _give_up_words(request, error, settings, furthest, body.offset, range_ignored)
                    raise DownloadError(words) from error
                meter.listener.retry(name, failures, _reason(error, settings))
                if cancel.wait(min(settings.backoff_s * 2 ** (failures - 1), settings.max_backoff_s)):
                    _raise_if_cancelled(cancel, name, body.offset)
        body.drain()
        return body.content, body.offset


def _copy_body(
    response,
    body: _PartialWriter,
    size: int,
    name: str,
    meter: ProgressMeter,
    cancel: threading.Event,
    chunk_bytes: int,
) -> None:
    """Append what the response sends, never past `size`. `read1` returns whatever has arrived (up to a
    chunk), so a connection that breaks off loses no byte it delivered."""
    while body.offset < size:
        chunk = response.raw.read1(min(chunk_bytes, size - body.offset))
        if not chunk:
            return
        body.append(chunk)
        meter.add(name, len(chunk))
        _raise_if_cancelled(cancel, name, body.offset)


def _give_up_words(
    request: BodyRequest, error: Exception, settings: DownloadSettings, furthest: int, kept: int, range_ignored: bool
) -> str:
    if range_ignored:
        return (
            f"the server sending {request.name} does not resume: it answers every request to continue with the "
            f"whole file from the start, and it broke the connection off {settings.max_attempts} times in a row "
            f"without getting past {furthest} of {request.file.size} bytes ({_reason(error, settings)}). "
            "Try again later or from another network; a mirror (HF_ENDPOINT) may behave better"
        )
    return (
        f"the network failed {settings.max_attempts} times in a row while fetching {request.name} "
        f"({_reason(error, settings)}); the {kept} bytes fetched are kept: run the download again to resume"
    )


def _raise_if_cancelled(cancel: threading.Event, name: str, offset: int) -> None:
    if cancel.is_set():
        raise DownloadCancelledError(f"download cancelled; {name} is kept at {offset} bytes for a resume")


def _open(session, url: str, offset: int, token: str | None, repo: str, settings: DownloadSettings):
    """GET `url` from `offset`, following redirects by hand; the token goes only to the hub's own host."""
    hub_host = urlparse(hub_endpoint()).netloc
    for _ in range(MAX_REDIRECTS + 1):
        headers = {"Accept-Encoding": "identity"}  # byte offsets must count the file's bytes, not gzip's
        if offset:
            headers["Range"] = f"bytes={offset}-"
        if token and urlparse(url).netloc == hub_host:
            headers["Authorization"] = f"Bearer {token}"
        response = session.get(
            url,
            headers=headers,
            stream=True,
            allow_redirects=False,
            timeout=(settings.connect_timeout_s, settings.stall_timeout_s),
        )
        status = response.status_code
        if status in (301, 302, 303, 307, 308) and "Location" in response.headers:
            response.close()
            url = urljoin(url, response.headers["Location"])
            if urlparse(url).scheme not in ("http", "https"):
                raise DownloadError(f"the hub sent {repo}'s file to a {urlparse(url).scheme!r} address; refusing it")
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
    """Why a connection failed, in fixed words (a transport error's own text can quote request headers)."""
    import requests
    from urllib3 import exceptions as transport

    if isinstance(error, _Retryable):
        return str(error)  # our own words
    if isinstance(error, requests.exceptions.ConnectTimeout):
        return f"could not connect within {settings.connect_timeout_s:g} s"
    if isinstance(error, (requests.Timeout, transport.ReadTimeoutError)):
        return f"no byte for {settings.stall_timeout_s:g} s"
    if isinstance(error, (requests.exceptions.ChunkedEncodingError, transport.ProtocolError)):
        return "the connection broke mid-file"
    if isinstance(error, requests.exceptions.SSLError):
        return "the secure connection failed (a certificate or a proxy in the way)"
    if isinstance(error, requests.exceptions.ProxyError):
        return "the proxy refused the connection"
    if isinstance(error, requests.ConnectionError):
        return "cannot connect, or the connection was cut"
    return f"the request failed ({type(error).__name__})"
