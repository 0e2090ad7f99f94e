"""Resumable, verified downloads of a repo's files, that a broken or hostile hub cannot turn against the user.

huggingface_hub gives the file list (core/models/hub.py) but its own downloader deletes partial files on
any failure and cannot resume after the process dies, which a 35 GB model cannot afford; the bodies come
through core/models/download_body.py instead. In order, so that each refusal comes before the disk is touched:
1. every listed path is checked (core/models/safe_paths.py): one bad path refuses the whole repo;
2. each model folder's lock is taken (core/models/folder_lock.py): one download per folder, whoever runs it;
3. the folder is surveyed (core/models/download_plan.py) and files present but not known verified are hashed;
4. a gated repo is asked about, and the free disk space is checked against the missing bytes;
5. only then are stale files deleted, the manifest written and the missing bytes fetched.
Every failure leaves as a DownloadError whose `kind` says why (core/errors.py).
"""

from __future__ import annotations

import os
import threading
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from core.errors import (
    DiskSpaceError,
    DownloadBusyError,
    DownloadCancelledError,
    DownloadError,
    DownloadIOError,
    GatedModelError,
)
from core.models.download_body import BodyRequest, DownloadSettings, fetch_verified
from core.models.download_plan import (
    DownloadJob,
    FileState,
    check_present_files,
    discard_leftovers,
    survey,
)
from core.models.download_progress import DownloadListener, ProgressMeter
from core.models.folder_lock import folder_locks, is_downloading
from core.models.hub import RemoteFile, file_url, gated_message, licence_page
from core.models.manifest import FileStamp, bytes_present, partial_path, write_manifest
from core.models.safe_paths import check_listing
from core.system.disk import existing_parent, free_bytes, is_disk_full, is_write_refused, replace_file
from core.system.env import FREE_BYTES_OVERRIDE_ENV
from core.planning.sizes import format_bytes

__all__ = ["DownloadJob", "DownloadSettings", "check_free_space", "download", "format_bytes"]

# Tests only: pretend the download disk has this many bytes free (a real full disk cannot be made here).
FOLLOW_POLL_S = 0.5


def download(
    jobs: list[DownloadJob],
    root: Path,
    listener: DownloadListener | None = None,
    cancel: threading.Event | None = None,
    token: str | None = None,
    settings: DownloadSettings = DownloadSettings(),
    follow_running: bool = False,
) -> None:
    """Bring every file of every job onto disk, verified, resuming whatever earlier runs left.

    `root` is the folder the event paths are relative to (the models folder). Cancelling (the event, or
    KeyboardInterrupt) keeps partial files for the next run; the event is seen at the next chunk or retry
    wait, so a stalled connection can hold it for up to `stall_timeout_s` (the CLI sets it on SIGINT and
    SIGTERM and waits a few seconds at most: core.cli.models_download). With `follow_running`, a download already running into
    one of the folders is followed (`listener.attach`, then its progress) and continued if it stops unfinished.

    Raises:
        UnsafeListingError: a listed path must not be written (nothing on disk was touched).
        DownloadBusyError: another process downloads into one of the folders (unless `follow_running`).
        DiskSpaceError: before the first byte, when the missing bytes plus a margin exceed the free space,
            or when the disk fills up.
        GatedModelError: the hub refused a file (401/403).
        RemoteNotFoundError: a file is gone (404).
        DownloadVerifyError: a file's checksum was wrong twice.
        DownloadCancelledError: `cancel` was set.
        DownloadIOError: the folder could not be read or written.
        DownloadError: the network failed `settings.max_attempts` times in a row.
    """
    listener = listener or DownloadListener()
    cancel = cancel or threading.Event()
    for job in jobs:
        check_listing(job.remote)
    try:
        while True:
            try:
                with folder_locks([job.folder for job in jobs]):
                    return _download_locked(jobs, root, listener, cancel, token, settings)
            except DownloadBusyError as busy:
                if not follow_running:
                    raise
                _follow(jobs, root, listener, cancel, busy)
    except DownloadError:
        raise
    except OSError as error:
        raise _disk_error(error, root) from error


def _download_locked(
    jobs: list[DownloadJob],
    root: Path,
    listener: DownloadListener,
    cancel: threading.Event,
    token: str | None,
    settings: DownloadSettings,
) -> None:
    import requests

    states = survey(jobs, root)
    check_present_files(states, listener)
    total = sum(state.file.size for state in states)
    missing = sum(state.missing_bytes for state in states)
    with requests.Session() as session:
        for job in jobs:  # a gated repo says so now, before anything is deleted or a folder is made
            wanted = [state for state in states if state.job is job and not state.verified]
            if wanted:
                _check_access(session, job, wanted[0], token, settings)
        check_free_space(root, missing, settings.free_margin_bytes)
        discard_leftovers(states)
        for job in jobs:
            job.folder.mkdir(parents=True, exist_ok=True)
            write_manifest(job.folder, job.remote, complete=False, verified=_stamps(states, job))
        listener.plan(
            {job.label: job.folder for job in jobs}, [state.planned() for state in states], total, total - missing
        )
        meter = ProgressMeter(listener, total, total - missing, settings.progress_interval_s)
        # The finisher flushes and renames each verified file while the next one streams; leaving the
        # `with` waits for it, whatever happened meanwhile (a cancel keeps the files finished so far).
        with ThreadPoolExecutor(1, thread_name_prefix="download-finish") as finisher:
            for job in jobs:
                finishing = []
                for state in [state for state in states if state.job is job and not state.verified]:
                    request = BodyRequest(job.remote.repo, job.remote.commit, state.file, state.final, state.name)
                    fetch_verified(session, request, meter, cancel, token, settings)
                    finishing.append(finisher.submit(_make_final, state, states))
                for future in finishing:
                    future.result()
                write_manifest(job.folder, job.remote, complete=True, verified=_stamps(states, job))


def _make_final(state: FileState, states: list[FileState]) -> None:
    """Flush a verified body to the device, rename it into place and record its stamp (so a power cut never
    leaves a final name on bytes that were not written yet)."""
    partial = partial_path(state.final)
    with open(partial, "rb+") as handle:
        os.fsync(handle.fileno())
    replace_file(partial, state.final)
    state.verified = FileStamp.of(state.final)
    write_manifest(state.job.folder, state.job.remote, complete=False, verified=_stamps(states, state.job))


def _stamps(states: list[FileState], job: DownloadJob) -> dict[str, FileStamp]:
    return {state.file.path: state.verified for state in states if state.job is job and state.verified}


def _follow(
    jobs: list[DownloadJob], root: Path, listener: DownloadListener, cancel: threading.Event, busy: DownloadBusyError
) -> None:
    """Report the running download's progress from what it writes to disk, until it lets go of its folder."""
    files = [
        (job, file, (job.folder / file.path).relative_to(root).as_posix()) for job in jobs for file in job.remote.files
    ]
    listener.attach(busy.folder, busy.pid)
    present = _bytes_on_disk(files)
    meter = ProgressMeter(listener, sum(file.size for _, file, _ in files), sum(present.values()), 0.0)
    while is_downloading(busy.folder):
        if cancel.wait(FOLLOW_POLL_S):
            raise DownloadCancelledError("stopped following the other download; it goes on by itself")
        now = _bytes_on_disk(files)
        grown = [name for name in now if now[name] != present[name]]
        if grown:
            meter.add(grown[-1], sum(now.values()) - meter.done_bytes)
            present = now


def _bytes_on_disk(files: list[tuple[DownloadJob, RemoteFile, str]]) -> dict[str, int]:
    return {name: bytes_present(job.folder, file) for job, file, name in files}


def _check_access(session, job: DownloadJob, state: FileState, token: str | None, settings: DownloadSettings) -> None:
    """A HEAD of one file, redirect not followed: the hub answers 401/403 for a gated repo without a token
    with accepted terms. Network trouble here is left to the download's own retries."""
    import requests

    url = file_url(job.remote.repo, job.remote.commit, state.file.path)
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    try:
        response = session.head(
            url, headers=headers, allow_redirects=False, timeout=(settings.connect_timeout_s, settings.stall_timeout_s)
        )
    except requests.RequestException:
        return
    if response.status_code in (401, 403):
        raise GatedModelError(gated_message(job.remote.repo, bool(token)), licence_page(job.remote.repo))


def _disk_error(error: OSError, root: Path) -> DownloadError:
    """An unexpected OSError from the models folder, in plain words."""
    where = f" ({error.filename})" if error.filename else ""
    if is_disk_full(error):
        return DiskSpaceError(
            f"the disk holding {root} filled up; free some space and run the download again "
            "to resume (the bytes fetched are kept)"
        )
    if is_write_refused(error):
        return DownloadIOError(
            f"no permission to write in {root}{where}; choose another models folder with --dir or in the app's settings"
        )
    return DownloadIOError(
        f"reading or writing the model files in {root} failed: "
        f"{error.strerror or type(error).__name__}{where}. Check the drive and run the "
        "download again"
    )


def check_free_space(folder: Path, missing_bytes: int, margin_bytes: int) -> None:
    """Refuse, in plain words, when `missing_bytes` plus a margin do not fit on the disk holding `folder`."""
    override = os.environ.get(FREE_BYTES_OVERRIDE_ENV)
    free = int(override) if override else free_bytes(folder)
    if missing_bytes > 0 and missing_bytes + margin_bytes > free:
        raise DiskSpaceError(
            f"not enough disk space: the download needs {format_bytes(missing_bytes + margin_bytes)} free on "
            f"{existing_parent(folder)}, has {format_bytes(free)}. Free some space or choose another folder with --dir."
        )
