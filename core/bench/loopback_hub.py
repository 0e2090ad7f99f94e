"""A stand-in for the Hugging Face hub on loopback: the download benchmark's server and the tests' fixture
(tests/hub_server.py wraps it for pytest).

It serves what huggingface_hub's `model_info(files_metadata=True)` and our downloader ask for:
`GET /api/models/{repo}[/revision/{rev}]`, and `GET /{repo}/resolve/{rev}/{path}` with Range. LFS files
answer 302 to `/cdn/{sha256}` on another host name (`localhost` instead of `127.0.0.1`, the same socket),
like the hub's CDN, so a test can check the token never travels there. A gated repo answers 401 to file
requests without its token. Like the hub, the listing gives every file's git blob id (`blobId`: for an LFS
file, that of its pointer) and, for LFS files, the body's sha256; a repo can carry extra raw listing entries
(`HostedRepo.extra_siblings`) to play a hostile hub. Faults switch on per file and fire once (or n times):
stall, drop the connection, corrupt the bytes; a server can ignore Range; a rate limit slows every body. It
counts the body bytes it wrote, per file and in all.
"""

from __future__ import annotations

import hashlib
import json
import random
import re
import socket
import threading
import time
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import unquote, urlparse

WRITE_CHUNK = 256 << 10


def payload(size: int, seed: int = 0) -> bytes:
    """`size` deterministic pseudo-random bytes, different for each seed (a stand-in for weights; never
    periodic, so a resume at a wrong offset cannot go unnoticed)."""
    return random.Random(seed).randbytes(size)


def git_blob_id(data: bytes) -> str:
    """What git (and the hub's `blobId`) calls a file: the sha1 of `blob <size>\0` and the bytes."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


@dataclass
class HostedFile:
    path: str
    data: bytes
    lfs: bool
    sha256: str = field(init=False)  # hashed once: the server answers many requests per file

    def __post_init__(self) -> None:
        self.sha256 = hashlib.sha256(self.data).hexdigest()

    def sibling(self) -> dict:
        if not self.lfs:
            return {"rfilename": self.path, "size": len(self.data), "blobId": git_blob_id(self.data)}
        pointer = f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\nsize {len(self.data)}\n"
        return {
            "rfilename": self.path,
            "size": len(self.data),
            "blobId": git_blob_id(pointer.encode()),
            "lfs": {"size": len(self.data), "sha256": self.sha256, "pointerSize": len(pointer)},
        }


@dataclass
class HostedRepo:
    repo: str
    commit: str
    revisions: set[str]
    files: dict[str, HostedFile]
    gated: bool = False
    token: str | None = None
    extra_siblings: list[dict] = field(default_factory=list)  # raw listing entries served after the files


@dataclass
class _Faults:
    stall: dict[str, tuple[int, float]] = field(default_factory=dict)  # path -> (after bytes, seconds), once
    drop: dict[str, tuple[int, int]] = field(default_factory=dict)  # path -> (close after bytes, times left)
    corrupt: dict[str, int] = field(default_factory=dict)  # path -> serve flipped bytes this many more times
    ignore_range: bool = False  # answer 200 with the whole file to every Range request
    bytes_per_second: float | None = None  # rate limit per response


class LoopbackHub:
    """A threaded HTTP server on 127.0.0.1 with an ephemeral port. Use as a context manager or call close()."""

    def __init__(self, lfs_min_bytes: int = 1024) -> None:
        self.lfs_min_bytes = lfs_min_bytes
        self.repos: dict[str, HostedRepo] = {}
        self.faults = _Faults()
        self.bytes_by_path: dict[str, int] = {}
        self.cdn_authorization: list[str | None] = []  # the Authorization header of every CDN request
        self.requests: list[tuple[str, str | None]] = []  # (path, Range header) of every body request
        self._lock = threading.Lock()
        self._active_bodies = 0
        self._closing = threading.Event()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name="loopback-hub", daemon=True)
        self._thread.start()

    @property
    def port(self) -> int:
        return self._server.server_address[1]

    @property
    def url(self) -> str:
        """What HF_ENDPOINT should be set to."""
        return f"http://127.0.0.1:{self.port}"

    @property
    def cdn_url(self) -> str:
        return f"http://localhost:{self.port}"

    @property
    def bytes_served(self) -> int:
        with self._lock:
            return sum(self.bytes_by_path.values())

    def add_repo(
        self, repo: str, files: dict[str, bytes], revision: str = "main", gated: bool = False, token: str | None = None
    ) -> HostedRepo:
        """Host `files` (path -> bytes) as `repo` at `revision` (replacing what it held: a new commit on the
        branch); files of `lfs_min_bytes` or more are LFS files."""
        contents = sorted((path, hashlib.sha256(data).hexdigest()) for path, data in files.items())
        commit = hashlib.sha1(repr((repo, revision, contents)).encode()).hexdigest()  # new files, new commit
        hosted = HostedRepo(
            repo=repo,
            commit=commit,
            revisions={revision, commit},
            gated=gated,
            token=token,
            files={path: HostedFile(path, data, len(data) >= self.lfs_min_bytes) for path, data in files.items()},
        )
        with self._lock:
            self.repos[f"{repo}@{revision}"] = hosted
        return hosted

    def stall_once(self, path: str, after_bytes: int, seconds: float) -> None:
        with self._lock:
            self.faults.stall[path] = (after_bytes, seconds)

    def drop_once(self, path: str, after_bytes: int, times: int = 1) -> None:
        """Close the connection after `after_bytes` of the body, in the next `times` responses for `path`."""
        with self._lock:
            self.faults.drop[path] = (after_bytes, times)

    def corrupt(self, path: str, times: int = 1) -> None:
        """Flip the first 256 bytes of the next `times` responses for `path`."""
        with self._lock:
            self.faults.corrupt[path] = times

    def limit_rate(self, bytes_per_second: float | None) -> None:
        with self._lock:
            self.faults.bytes_per_second = bytes_per_second

    def ignore_range(self, ignore: bool = True) -> None:
        with self._lock:
            self.faults.ignore_range = ignore

    def wait_idle(self, timeout_s: float = 10.0) -> None:
        """Wait until no file body is being sent (a killed client's connection can linger a moment)."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            with self._lock:
                if self._active_bodies == 0:
                    return
            time.sleep(0.01)
        raise TimeoutError(f"the loopback hub still sends a body after {timeout_s} s")

    def reset_counters(self) -> None:
        with self._lock:
            self.bytes_by_path.clear()
            self.requests.clear()
            self.cdn_authorization.clear()

    def close(self) -> None:
        self._closing.set()
        self._server.shutdown()
        self._server.server_close()

    def __enter__(self) -> "LoopbackHub":
        return self

    def __exit__(self, *exc_info) -> None:
        self.close()

    # -- lookups used by the handler --

    def find(self, repo: str, revision: str) -> tuple[HostedRepo | None, bool]:
        """(the repo at this revision or commit, whether the repo exists at all)."""
        with self._lock:
            known = [hosted for hosted in self.repos.values() if hosted.repo == repo]
        for hosted in known:
            if revision in hosted.revisions:
                return hosted, True
        return None, bool(known)

    def file_by_sha(self, sha256: str) -> HostedFile | None:
        with self._lock:
            for hosted in self.repos.values():
                for file in hosted.files.values():
                    if file.lfs and file.sha256 == sha256:
                        return file
        return None

    def take_faults(self, path: str) -> tuple[tuple[int, float] | None, int | None, bool]:
        """The faults for the next response for `path` (counted down as they are taken)."""
        with self._lock:
            corrupt = self.faults.corrupt.get(path, 0) > 0
            if corrupt:
                self.faults.corrupt[path] -= 1
            drop = None
            if path in self.faults.drop:
                drop, times = self.faults.drop.pop(path)
                if times > 1:
                    self.faults.drop[path] = (drop, times - 1)
            return self.faults.stall.pop(path, None), drop, corrupt

    def count(self, path: str, count: int) -> None:
        with self._lock:
            self.bytes_by_path[path] = self.bytes_by_path.get(path, 0) + count


_API = re.compile(r"^/api/models/([^/]+/[^/]+)(?:/revision/([^/?]+))?$")
_RESOLVE = re.compile(r"^/([^/]+/[^/]+)/resolve/([^/]+)/(.+)$")
_CDN = re.compile(r"^/cdn/([0-9a-f]{64})$")
_RANGE = re.compile(r"^bytes=(\d+)-(\d*)$")


def _handler_for(hub: LoopbackHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args) -> None:  # quiet: tests read the counters instead
            pass

        def do_GET(self) -> None:  # noqa: N802 (the http.server API)
            path = unquote(urlparse(self.path).path)
            if match := _API.match(path):
                self._model_info(match.group(1), unquote(match.group(2) or "main"))
            elif match := _RESOLVE.match(path):
                self._resolve(match.group(1), match.group(2), match.group(3))
            elif match := _CDN.match(path):
                hub.cdn_authorization.append(self.headers.get("Authorization"))
                file = hub.file_by_sha(match.group(1))
                self._body(file) if file else self._error(404, "EntryNotFound")
            else:
                self._error(404, None)

        def do_HEAD(self) -> None:  # noqa: N802 (the http.server API)
            """What the hub says about a file without its body: 401 for a gated repo without its token."""
            match = _RESOLVE.match(unquote(urlparse(self.path).path))
            hosted = hub.find(match.group(1), match.group(2))[0] if match else None
            if hosted is None or match.group(3) not in hosted.files:
                status = 404
            elif hosted.gated and self.headers.get("Authorization") != f"Bearer {hosted.token}":
                status = 401
            else:
                status = 302 if hosted.files[match.group(3)].lfs else 200
            self.send_response(status)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _model_info(self, repo: str, revision: str) -> None:
            hosted, exists = hub.find(repo, revision)
            if hosted is None:
                return self._error(404, "RevisionNotFound" if exists else "RepoNotFound")
            payload = json.dumps(
                {
                    "id": hosted.repo,
                    "sha": hosted.commit,
                    "private": False,
                    "gated": "manual" if hosted.gated else False,
                    "siblings": [file.sibling() for file in hosted.files.values()] + hosted.extra_siblings,
                }
            ).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _resolve(self, repo: str, revision: str, file_path: str) -> None:
            hosted, _ = hub.find(repo, revision)
            if hosted is None or file_path not in hosted.files:
                return self._error(404, "EntryNotFound")
            if hosted.gated and self.headers.get("Authorization") != f"Bearer {hosted.token}":
                return self._error(401, "GatedRepo")
            file = hosted.files[file_path]
            if not file.lfs:
                return self._body(file)
            self.send_response(302)
            self.send_header("Location", f"{hub.cdn_url}/cdn/{file.sha256}")
            self.send_header("X-Linked-Etag", f'"{file.sha256}"')
            self.send_header("X-Linked-Size", str(len(file.data)))
            self.send_header("Content-Length", "0")
            self.end_headers()

        def _error(self, status: int, code: str | None) -> None:
            body = b'{"error": "not here"}'
            self.send_response(status)
            if code:
                self.send_header("X-Error-Code", code)
                self.send_header("X-Error-Message", code)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def _body(self, file: HostedFile) -> None:
            hub.requests.append((file.path, self.headers.get("Range")))
            size = len(file.data)
            start, end = 0, size - 1
            header = self.headers.get("Range")
            partial = header is not None and not hub.faults.ignore_range
            if partial:
                match = _RANGE.match(header)
                if not match or int(match.group(1)) >= size:
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{size}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                start = int(match.group(1))
                end = min(int(match.group(2)), size - 1) if match.group(2) else size - 1
            stall, drop, corrupt = hub.take_faults(file.path)
            data = bytes(b ^ 0xFF for b in file.data[:256]) + file.data[256:] if corrupt else file.data
            self.send_response(206 if partial else 200)
            if partial:
                self.send_header("Content-Range", f"bytes {start}-{end}/{size}")
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", f'"{file.sha256}"')
            self.send_header("Content-Length", str(end - start + 1))
            self.end_headers()
            self._send(file.path, data, start, end + 1, stall, drop)

        def _send(self, path: str, data: bytes, start: int, stop: int, stall, drop) -> None:
            sent = 0
            paced = (hub.faults.bytes_per_second, time.monotonic(), 0)  # the limit, since when, bytes sent then
            with hub._lock:
                hub._active_bodies += 1
            try:
                for position in range(start, stop, WRITE_CHUNK):
                    chunk = data[position : min(position + WRITE_CHUNK, stop)]
                    if stall and sent >= stall[0]:
                        hub._closing.wait(stall[1])  # say nothing for a while, then give up on this client
                        return self._hang_up()
                    if drop is not None and sent + len(chunk) > drop:
                        chunk = chunk[: max(drop - sent, 0)]
                        self.wfile.write(chunk)
                        hub.count(path, len(chunk))
                        return self._hang_up()
                    self.wfile.write(chunk)
                    sent += len(chunk)
                    hub.count(path, len(chunk))
                    while True:  # in steps: a new limit (or none) applies at once, counted from when it came
                        rate, since, base = paced
                        if hub.faults.bytes_per_second != rate:
                            paced = (hub.faults.bytes_per_second, time.monotonic(), sent)
                            continue
                        ahead = (sent - base) / rate - (time.monotonic() - since) if rate else 0
                        if ahead <= 0:
                            break
                        time.sleep(min(ahead, 0.05))
            except (BrokenPipeError, ConnectionResetError):  # the client went away (killed, cancelled, reconnected)
                self.close_connection = True
            finally:
                with hub._lock:
                    hub._active_bodies -= 1

        def _hang_up(self) -> None:
            self.close_connection = True
            try:
                self.wfile.flush()
                self.connection.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    return Handler
