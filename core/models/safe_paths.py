"""Which file paths from a hub listing the downloader may write: checked for the whole listing before any
file is deleted, created or even looked at, so a hostile or broken hub cannot reach outside the model folder.

A path is refused when it could leave the folder ('..', absolute, a backslash), when a disk on Windows or
macOS would read it as something else (a drive `C:x`, a stream `name:stream`, a reserved device name such
as `NUL.txt`, a trailing dot or space, characters Windows forbids), when a terminal or a file manager would
not show it as written (control characters, bidirectional overrides), when it names one of the downloader's
own files (the manifest, a `.incomplete` partial), when a name is longer than disks take, or when two paths
would land on one file on a case-insensitive disk. The rules are the same on every system, so a listing is
refused everywhere or nowhere.
"""

from __future__ import annotations


from core.errors import UnsafeListingError
from core.models.hub import RemoteRepo
from core.models.manifest import MANIFEST_NAME, MANIFEST_TEMP_NAME, PARTIAL_SUFFIX
from core.system.file_names import is_windows_device
from core.text.terminal import shown_on_terminal

WINDOWS_FORBIDDEN = set('<>:"|?*\\')
OWN_NAMES = {MANIFEST_NAME.casefold(), MANIFEST_TEMP_NAME.casefold()}
# the longest file or folder name the common file systems take (ext4 and APFS count UTF-8 bytes, NTFS UTF-16
# units, never more than the bytes): a longer one fails when its partial is created, after other files changed
NAME_BYTES = 255
SHOWN_CHARACTERS = 120  # a path quoted in a message is cut here (a hostile listing can send megabytes)


def path_problem(path: str) -> str | None:
    """Why `path` (slash-separated, relative to the model folder) must not be written, or None when it may."""
    if not path:
        return "it is empty"
    if path.startswith("/"):
        return "it is absolute"
    if shown_on_terminal(path) != path or "\t" in path or "\n" in path:  # "x\u202egpj.exe" shows as "xexe.jpg"
        return "it holds control characters (which a terminal obeys) or marks that reorder what is shown"
    for part in path.split("/"):
        if part in ("", ".", ".."):
            return "it leaves the model folder" if part == ".." else "it has an empty or '.' part"
        if forbidden := sorted(WINDOWS_FORBIDDEN & set(part)):
            return f"it holds {''.join(forbidden)!r} (a drive, stream or folder separator on Windows)"
        if part[-1] in ". ":
            return "a part ends with a dot or a space (Windows drops them, so it would be another file)"
        if is_windows_device(part):
            return f"{part!r} is a device name on Windows"
        if len(part.encode()) + len(PARTIAL_SUFFIX) > NAME_BYTES:
            return f"a name is longer than disks allow ({NAME_BYTES} bytes, with the download's {PARTIAL_SUFFIX!r})"
    name = path.rsplit("/", 1)[-1].casefold()
    if name in OWN_NAMES or name.endswith(PARTIAL_SUFFIX):
        return "it is a name the downloader keeps for its own files"
    return None


def check_listing(remote: RemoteRepo) -> None:
    """Refuse the whole repo when any listed path is unsafe, or when two would be one file on a disk that
    ignores case (or one is a file and a folder at once).

    Raises:
        UnsafeListingError: naming the first bad path and why.
    """
    files: dict[str, str] = {}
    for file in remote.files:
        if problem := path_problem(file.path):
            raise _refusal(remote, file.path, problem)
        key = file.path.casefold()
        if key in files:
            raise _refusal(remote, file.path, f"it is {_shown(files[key])} on a disk that ignores case")
        files[key] = file.path
    folders = {parent: path for key, path in files.items() for parent in _parents(key)}
    for key, path in files.items():
        if key in folders:
            raise _refusal(remote, path, f"it is a file, and a folder for {_shown(folders[key])}")


def _parents(key: str) -> list[str]:
    parts = key.split("/")
    return ["/".join(parts[:end]) for end in range(1, len(parts))]


def _refusal(remote: RemoteRepo, path: str, problem: str) -> UnsafeListingError:
    return UnsafeListingError(
        f"the hub listed a file '{remote.repo}' must not have: {_shown(path)} ({problem}). Nothing was written "
        "or deleted. The repo or the hub at HF_ENDPOINT is broken or hostile: check the repo's name and the hub."
    )


def _shown(path: str) -> str:
    """The path quoted with control and invisible characters escaped, cut to a readable length."""
    text = repr(path[:SHOWN_CHARACTERS])
    return text + " (cut)" if len(path) > SHOWN_CHARACTERS else text
