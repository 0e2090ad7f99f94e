"""What a hub repo holds at a revision: its commit, and every file's path, size and sha256, through
huggingface_hub's API (`GET {endpoint}/api/models/{repo}/revision/{rev}?blobs=true`), without downloading.

File bodies are not fetched here (core/models/download.py does that, resumably). HF_ENDPOINT is read at call
time, so a loopback server can stand in for the hub, and the token comes from core/models/token_store.py.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from urllib.parse import quote

from core.errors import DownloadError, GatedModelError, RemoteNotFoundError

DEFAULT_ENDPOINT = "https://huggingface.co"


@dataclass(frozen=True)
class RemoteFile:
    """One file of a repo: `sha256` is set for LFS files (the big ones), None for small git files."""

    path: str
    size: int
    sha256: str | None


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
    return (os.environ.get("HF_ENDPOINT") or DEFAULT_ENDPOINT).rstrip("/")


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
        raise DownloadError(f"the hub at {hub_endpoint()} answered an error for '{repo}': {error}") from error
    except hub_errors.HFValidationError as error:
        raise RemoteNotFoundError(f"'{repo}' is not a repo id (expected 'owner/name'): {error}") from error
    except (httpx2.TransportError, OSError) as error:  # connection refused, DNS, timeouts
        raise DownloadError(f"cannot reach the hub at {hub_endpoint()}: {error}") from error
    if not info.sha or info.siblings is None:
        raise DownloadError(f"the hub at {hub_endpoint()} sent no commit or file list for '{repo}'")
    files = []
    for sibling in info.siblings:
        if sibling.size is None:
            raise DownloadError(f"the hub at {hub_endpoint()} sent no size for '{sibling.rfilename}' of '{repo}'")
        sha256 = sibling.lfs.sha256 if sibling.lfs is not None else None
        files.append(RemoteFile(path=sibling.rfilename, size=int(sibling.size), sha256=sha256))
    return RemoteRepo(repo=repo, revision=revision or "main", commit=info.sha, files=tuple(files))
