"""Errors the engine raises for bad input.

Each class also inherits from the builtin that fits, so callers can catch either. Messages say what went
wrong and what to do about it; the CLI prints them without a traceback.
"""


class SpecExecError(Exception):
    """Base class for every error the engine reports to a user."""


class ModelNotFoundError(SpecExecError, FileNotFoundError):
    """A model path, file or repo id does not exist locally."""


class ModelFormatError(SpecExecError, ValueError):
    """A model folder or file exists but cannot be loaded (missing weights, bad config)."""


class UnsupportedArchitectureError(SpecExecError, ValueError):
    """The model's architecture (config.model_type) is not one the engine can run."""


class TokenizerMismatchError(SpecExecError, ValueError):
    """Draft and target tokenizers differ, so draft tokens mean nothing to the target."""


class ContextLengthError(SpecExecError, ValueError):
    """The prompt (plus the room needed to generate) does not fit in the model's context window."""


class InvalidSettingError(SpecExecError, ValueError):
    """A generation or search setting is out of range (budget < 1, top-p outside (0, 1], ...)."""


class InsufficientMemoryError(SpecExecError, MemoryError):
    """Not enough host RAM or GPU memory for what was asked; the message says which and what to change."""


class InsufficientHostMemoryError(InsufficientMemoryError):
    """The offloaded weights do not fit in free host RAM (checked before loading starts)."""


class InsufficientVRAMError(InsufficientMemoryError):
    """The GPU cannot hold the non-layer weights, the streaming slots and the activations for the tree budget."""


class EngineError(SpecExecError, RuntimeError):
    """The engine process could not be started, died, or answered a request with an error."""


class CatalogError(SpecExecError, ValueError):
    """The model catalog file is missing, malformed, or does not name the pair asked for."""


class DownloadError(SpecExecError, RuntimeError):
    """A model download stopped; `kind` names why, in the words of `specexec models download --json`'s error event
    ("gated", "disk", "network", "verify", "not_found", "cancelled"). Partial files are kept for a resume."""

    kind = "network"


class GatedModelError(DownloadError, PermissionError):
    """The hub refused the files (401/403): the repo is gated or private and needs a token with accepted terms."""

    kind = "gated"

    def __init__(self, message: str, licence_url: str) -> None:
        super().__init__(message)
        self.licence_url = licence_url


class DiskSpaceError(DownloadError):
    """Too little free disk for the bytes still missing (checked before the first byte is fetched)."""

    kind = "disk"


class DownloadVerifyError(DownloadError):
    """A file's sha256 differed from the hub's twice in a row."""

    kind = "verify"


class RemoteNotFoundError(DownloadError, FileNotFoundError):
    """The hub has no such repo, revision or file."""

    kind = "not_found"


class DownloadCancelledError(DownloadError):
    """The download was cancelled (Ctrl+C, SIGTERM, or the app's cancel button); partial files are kept."""

    kind = "cancelled"


class HardwareDescriptionError(SpecExecError, ValueError):
    """A hardware description file (a fixture given with --hw or SPECEXEC_HW_FIXTURE) is missing or malformed."""


class ServerError(SpecExecError, OSError):
    """The API server could not start: the port is taken, the address is not this machine's, or binding a
    non-loopback address was not allowed explicitly."""


class DoctorReportError(SpecExecError, ValueError):
    """A GPU check report (`specexec doctor`) or fixture is missing, unreadable, or not in the report's format."""
