"""What a hub repo holds at a revision: its commit, and every file's path, size and checksum, through
huggingface_hub's API (`GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true`), without downloading.

The checksum is the sha256 of the body for LFS files (the big ones) and git's blob id for the rest (the sha1
of `blob <size>\0` followed by the body), so every file can be verified. Whatever the hub sends is checked
here for type and form (sizes are counts, checksums are hex of the right length); the paths are checked by
core/models/safe_paths.py before the downloader touches the disk.

File bodies are not fetched here (core/models/download.py does that, resumably). HF_ENDPOINT is read at call
time, so a loopback server can stand in for the hub, and the token comes from core/models/token_store.py.
Transport errors are described by their type, never by their text, which can quote request headers.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from urllib.parse import quote, urlsplit

from core.errors import DownloadError, GatedModelError, RemoteNotFoundError, UnsafeListingError
from core.system import json_text

DEFAULT_ENDPOINT = "https://huggingface.co"
SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")
SHA1_HEX = re.compile(r"^[0-9a-f]{40}$")
# A pebibyte: no model file comes near it (the largest shards are tens of GB), and a listed size beyond it, up
# to one of 400 digits that no float holds, would only fail the sums and the progress made from it.
MAX_FILE_BYTES = 2**50


@dataclass(frozen=True)
class RemoteFile:
    """One file of a repo: `sha256` is set for LFS files (the big ones); the small git files carry their
    git `blob_id` instead."""

    path: str
    size: int
    sha256: str | None
    blob_id: str | None = None


@dataclass(frozen=True)
class RemoteRepo:
    repo: str
    revision: str
    commit: str
    files: tuple[RemoteFile, ...]

    @property
    def total_bytes(self) -> int:
        return sum(file.size for file in self.files)


def hub_endpoint() -> str:
    """The hub's address: HF_ENDPOINT (a mirror, as huggingface_hub reads it; people behind some networks set
    one) or huggingface.co.

    Raises:
        DownloadError: HF_ENDPOINT is not a web address (a bare host name, another scheme), which the HTTP
            client would only call an "UnsupportedProtocol".
    """
    value = os.environ.get("HF_ENDPOINT", "").strip()
    if not value:
        return DEFAULT_ENDPOINT
    parts = urlsplit(value)
    if parts.scheme.lower() not in ("http", "https") or not parts.hostname:
        raise DownloadError(
            f"HF_ENDPOINT is {value[:200]!r}, which is not a web address: set it to the hub's or a mirror's "
            f"(such as https://hf-mirror.com), or remove it to download from {DEFAULT_ENDPOINT}"
        )
    return value.rstrip("/")


def licence_page(repo: str) -> str:
    """Where a person reads and accepts a gated model's licence (on the real hub, whatever HF_ENDPOINT says)."""
    return f"{DEFAULT_ENDPOINT}/{repo}"


def gated_message(repo: str, token_sent: bool) -> str:
    why = "the token given was refused" if token_sent else "no Hugging Face token was given"
    return (
        f"'{repo}' is a gated model and {why}. Open {licence_page(repo)}, sign in and accept the licence, then "
        "create a read token at https://huggingface.co/settings/tokens and give it with "
        "`specexec models login` (or set HF_TOKEN), and run the download again."
    )


def file_url(repo: str, commit: str, path: str, endpoint: str | None = None) -> str:
    """The body of one file at a fixed commit (LFS files answer with a redirect to a CDN)."""
    return f"{endpoint or hub_endpoint()}/{repo}/resolve/{quote(commit, safe='')}/{quote(path)}"


def fetch_listing(repo: str, revision: str = "main", token: str | None = None) -> RemoteRepo:
    """The repo's commit and files at `revision` (a branch, tag or commit sha).

    Raises:
        GatedModelError: the hub answered 401/403 (gated or private repo, missing or refused token).
        RemoteNotFoundError: no such repo or revision.
        DownloadError: the hub could not be reached or answered something unreadable.
    """
    import httpx2  # huggingface_hub's HTTP client
    from huggingface_hub import HfApi
    from huggingface_hub import errors as hub_errors

    api = HfApi(endpoint=hub_endpoint(), token=token or False)
    try:
        info = api.model_info(repo, revision=revision or "main", files_metadata=True)
    except hub_errors.GatedRepoError as error:
        raise GatedModelError(gated_message(repo, bool(token)), licence_page(repo)) from error
    except hub_errors.RevisionNotFoundError as error:
        raise RemoteNotFoundError(f"'{repo}' has no revision '{revision}' on {hub_endpoint()}") from error
    except hub_errors.RepositoryNotFoundError as error:
        # The hub answers 401 for private and unknown repos alike.
        raise RemoteNotFoundError(
            f"no model '{repo}' on {hub_endpoint()} (or it is private: give a token with `specexec models login`)"
        ) from error
    except hub_errors.HfHubHTTPError as error:
        status = error.response.status_code if error.response is not None else None
        if status in (401, 403):
            raise GatedModelError(gated_message(repo, bool(token)), licence_page(repo)) from error
        raise DownloadError(
            f"the hub at {hub_endpoint()} answered HTTP {status} for '{repo}'; try again later"
        ) from error
    except hub_errors.HFValidationError as error:
        raise RemoteNotFoundError(f"'{repo}' is not a repo id (expected 'owner/name'): {error}") from error
    except httpx2.TimeoutException as error:
        raise DownloadError(f"the hub at {hub_endpoint()} did not answer in time; check the network") from error
    except (httpx2.TransportError, OSError) as error:  # connection refused, DNS, TLS; its text can quote headers
        raise DownloadError(
            f"cannot reach the hub at {hub_endpoint()} ({type(error).__name__}); check the network and HF_ENDPOINT"
        ) from error
    except (KeyError, TypeError, ValueError, AttributeError) as error:  # JSON without the fields a listing has
        raise DownloadError(f"the hub at {hub_endpoint()} sent a file list for '{repo}' that cannot be read") from error
    if not isinstance(info.sha, str) or not SHA1_HEX.match(info.sha) or not isinstance(info.siblings, list):
        raise DownloadError(f"the hub at {hub_endpoint()} sent no commit or file list for '{repo}'")
    files = tuple(_remote_file(repo, sibling) for sibling in info.siblings)
    return RemoteRepo(repo=repo, revision=revision or "main", commit=info.sha, files=files)


def _remote_file(repo: str, sibling) -> RemoteFile:
    """One listed file, its fields checked for type and form (a hub's JSON is not trusted).

    Raises:
        UnsafeListingError: a path that is not text, a size that is not a count up to MAX_FILE_BYTES, a missing
            or malformed checksum.
    """
    path, size = sibling.rfilename, sibling.size
    if not isinstance(path, str):
        raise UnsafeListingError(f"the hub at {hub_endpoint()} listed a file of '{repo}' whose name is not text")
    shown = repr(path[:120])
    if not json_text.is_whole(size) or not 0 <= size <= MAX_FILE_BYTES:
        raise UnsafeListingError(f"the hub at {hub_endpoint()} sent no usable size for {shown} of '{repo}'")
    if sibling.lfs is not None:
        sha256 = sibling.lfs.get("sha256") if isinstance(sibling.lfs, dict) else None
        if not isinstance(sha256, str) or not SHA256_HEX.match(sha256):
            raise UnsafeListingError(f"the hub at {hub_endpoint()} sent no usable sha256 for {shown} of '{repo}'")
        return RemoteFile(path=path, size=size, sha256=sha256)
    blob_id = sibling.blob_id
    if not isinstance(blob_id, str) or not SHA1_HEX.match(blob_id):
        raise UnsafeListingError(
            f"the hub at {hub_endpoint()} sent no git blob id for {shown} of '{repo}', so it cannot be verified"
        )
    return RemoteFile(path=path, size=size, sha256=None, blob_id=blob_id)
