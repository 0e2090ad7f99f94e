"""What `download NAME` means: a catalog pair id (its target and draft) or a hub repo id, turned into
download jobs with their file lists from the hub and their folders in the models folder."""

from __future__ import annotations

import re
from pathlib import Path

from core.errors import RemoteNotFoundError
from core.models.catalog import Catalog
from core.models.download import DownloadJob
from core.models.hub import fetch_listing
from core.system.locations import repo_folder_name

REPO_ID = re.compile(r"^[\w.-]+/[\w.-]+$")


def wanted_repos(name: str, revision: str | None, catalog: Catalog) -> dict[str, tuple[str, str]]:
    """Role ('target', 'draft' or 'model') -> (repo, revision). Empty for the built-in pair, which ships
    with the app.

    Raises:
        RemoteNotFoundError: NAME is neither a pair id nor a repo id, or --revision was given with a pair.
    """
    if catalog.has(name):
        if revision:
            raise RemoteNotFoundError("--revision applies to a repo id; a catalog pair names its own revisions")
        pair = catalog.pair(name)
        return {
            label: (model.repo, model.revision or "main")
            for label, model in (("target", pair.target), ("draft", pair.draft))
            if not model.is_builtin
        }
    if REPO_ID.match(name):
        return {"model": (name, revision or "main")}
    known = ", ".join(pair.id for pair in catalog.pairs)
    raise RemoteNotFoundError(f"'{name}' is neither a model pair (known: {known}) nor a hub repo id like 'owner/name'")


def download_jobs(wanted: dict[str, tuple[str, str]], root: Path, token: str | None) -> list[DownloadJob]:
    """One job per role, each listed on the hub at its revision (pinned to the commit the hub names now)
    and placed in `root/<repo_folder_name>`. Raises what `fetch_listing` raises."""
    return [
        DownloadJob(fetch_listing(repo, revision, token), root / repo_folder_name(repo, revision), label)
        for label, (repo, revision) in wanted.items()
    ]
