"""What a download must do for each listed file, judged from what the model folder holds, before any byte is
fetched: which files are already right, which partial bodies can be resumed, which leftovers must go.

A final file counts as done only when it is known right: verified by this downloader against the same
checksum and untouched since (its stamp in the manifest), or hashed now and found equal to the listing. A
partial body is resumed only when the manifest says it was growing toward the same checksum and it is no
longer than the file; anything else (an older commit's body, an oversized one, one without a manifest) is
discarded. Surveying only reads; nothing is deleted until `discard_leftovers`, after every refusal that
can come (gated, disk space) has had its chance.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from core.models.content_hash import file_matches
from core.models.download_progress import DownloadListener, PlannedFile
from core.models.hub import RemoteFile, RemoteRepo
from core.models.manifest import FileStamp, Manifest, partial_path, read_manifest


@dataclass(frozen=True)
class DownloadJob:
    """One repo at a fixed commit into one folder; `label` names it in events ('target', 'draft' or 'model')."""

    remote: RemoteRepo
    folder: Path
    label: str = "model"


@dataclass
class FileState:
    """One listed file of a job and what is on disk for it."""

    job: DownloadJob
    file: RemoteFile
    name: str  # the path relative to the models folder, as events name it
    verified: FileStamp | None = None  # set when the final file is known right
    unchecked: bool = False  # a final file of the right size, to hash before it counts
    resume_bytes: int = 0  # the length of a partial body worth continuing
    leftovers: list[Path] = field(default_factory=list)  # stale final or partial files to delete

    @property
    def final(self) -> Path:
        return self.job.folder / self.file.path

    @property
    def missing_bytes(self) -> int:
        return 0 if self.verified else self.file.size - self.resume_bytes

    def planned(self) -> PlannedFile:
        return PlannedFile(self.name, self.file.size, self.file.size - self.missing_bytes)


def survey(jobs: list[DownloadJob], root: Path) -> list[FileState]:
    """Every listed file's state, from `stat` and the manifests alone (no file is read or changed)."""
    states = []
    for job in jobs:
        manifest = read_manifest(job.folder)
        for file in job.remote.files:
            state = FileState(job, file, (job.folder / file.path).relative_to(root).as_posix())
            _survey_final(state, manifest)
            _survey_partial(state, manifest)
            states.append(state)
    return states


def _survey_final(state: FileState, manifest: Manifest | None) -> None:
    final = state.final
    if not final.is_file():
        return
    if manifest is not None and manifest.is_verified(state.file, final):
        state.verified = FileStamp.of(final)
    elif final.stat().st_size == state.file.size:
        state.unchecked = True
    else:
        state.leftovers.append(final)


def _survey_partial(state: FileState, manifest: Manifest | None) -> None:
    partial = partial_path(state.final)
    if not partial.is_file():
        return
    size = partial.stat().st_size
    same_body = manifest is not None and state.file in manifest.files  # it was growing toward this checksum
    if state.verified or not same_body or size > state.file.size:
        state.leftovers.append(partial)
    else:
        state.resume_bytes = size


def check_present_files(states: list[FileState], listener: DownloadListener) -> None:
    """Hash every unchecked final file: a match counts as done (its partial, if any, goes); a mismatch is a
    leftover, replaced by the download. `listener.check` says which."""
    for state in states:
        if not state.unchecked:
            continue
        state.unchecked = False
        ok = file_matches(state.final, state.file)
        listener.check(state.name, ok)
        if ok:
            state.verified = FileStamp.of(state.final)
            state.leftovers.append(partial_path(state.final))  # a partial beside it is not needed any more
            state.resume_bytes = 0
        else:
            state.leftovers.append(state.final)


def discard_leftovers(states: list[FileState]) -> None:
    """Delete what the survey and the checks found stale (paths from a listing already checked as safe)."""
    for state in states:
        for path in state.leftovers:
            path.unlink(missing_ok=True)
        state.leftovers.clear()
