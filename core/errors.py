"""Errors the engine raises for bad input.

Each class also inherits from the builtin that fits, so callers can catch either. Messages say what went
wrong and what to do about it; the CLI prints them without a traceback.
"""

from pathlib import Path


class SpecExecError(Exception):
    """Base class for every error the engine reports to a user. `caches_intact`: the request failed before it
    could leave the engine's caches half-written (bad input), so they are kept for the next one."""

    caches_intact = True


class ModelNotFoundError(SpecExecError, FileNotFoundError):
    """A model path, file or repo id does not exist locally."""


class ModelFormatError(SpecExecError, ValueError):
    """A model folder or file exists but cannot be loaded (missing weights, bad config)."""


class UnsupportedFormatError(ModelFormatError):
    """The model's weights are stored in a format the engine does not read (FP8, MXFP4, bitsandbytes, EXL2, a
    big GGUF, ...): refused before any weight is read, in words that name the format, say what the app reads
    and which download to pick instead. The files themselves are fine."""


class DamagedModelError(ModelFormatError):
    """The model's files are damaged or incomplete: a truncated safetensors file, a shard the index names but
    the folder lacks. Downloading them again is the remedy."""


class UnsupportedArchitectureError(SpecExecError, ValueError):
    """The model's architecture (config.model_type) is not one the engine can run."""


class TokenizerMismatchError(SpecExecError, ValueError):
    """Draft and target tokenizers differ, so draft tokens mean nothing to the target."""


class ContextLengthError(SpecExecError, ValueError):
    """The prompt (plus the room needed to generate) does not fit in the model's context window.
    `prompt_tokens`: the prompt's length in tokens where it was counted (0: not known), so that a client can
    ask for a context that holds it (the app's "Make room")."""

    def __init__(self, message: str, prompt_tokens: int = 0) -> None:
        super().__init__(message)
        self.prompt_tokens = prompt_tokens


class InvalidSettingError(SpecExecError, ValueError):
    """A generation or search setting is out of range (budget < 1, top-p outside (0, 1], ...)."""


class TextEncodingError(InvalidSettingError):
    """A file a person wrote (a conversation, a schema, a settings file) holds bytes that are not text in the
    encodings read (UTF-8, UTF-8 or UTF-16 with a byte-order mark); the message says where and what to do."""


class DocumentError(SpecExecError, ValueError):
    """A file given to a message (a text file, a PDF) that cannot be added: not a regular file, not text, no
    text in it (a scan), locked by a password, or past the limits; the message says which and what to do."""


class GrammarError(InvalidSettingError):
    """A grammar for structured output (a JSON schema, a tool's parameters) that the grammar engine cannot
    use: a reference that points nowhere, a schema feature it does not read."""


class InsufficientMemoryError(SpecExecError, MemoryError):
    """Not enough host RAM or GPU memory for what was asked; the message says which and what to change."""


class InsufficientHostMemoryError(InsufficientMemoryError):
    """The offloaded weights do not fit in free host RAM (checked before loading starts)."""


class InsufficientVRAMError(InsufficientMemoryError):
    """The GPU cannot hold the non-layer weights, the streaming slots and the activations for the tree budget."""


class NumericalError(SpecExecError, ArithmeticError):
    """The target's next-token scores came out as NaN or infinity: its arithmetic overflowed (16 bits too narrow
    for the model's numbers) or its weights are damaged. Never a token: a draw from such scores is meaningless.
    The caches the pass wrote may hold the same values, so the engine resets them (`caches_intact`)."""

    caches_intact = False


class DiskWriteError(SpecExecError, OSError):
    """A file the program writes for itself (the built-in model's converted copy, an imported model's copy, the
    GPU check's report) could not be written: the drive is full, or the folder may not be written. The message
    names the folder and what to do; nothing half-written is left behind."""


class ModelDeleteError(SpecExecError, OSError):
    """A model could not be deleted: the drive is read-only, there is no permission, or another program holds
    one of its files open (Windows refuses to delete those). What was already removed stays removed; the
    message names the folder and what to do."""


class EngineError(SpecExecError, RuntimeError):
    """The engine process could not be started, died, or answered a request with an error."""


class LoadDiedError(EngineError):
    """The engine process died while it loaded the models (most often: the system ran out of memory and
    killed it). A second try can work once memory is freed; a smaller model is the sure way."""


class CatalogError(SpecExecError, ValueError):
    """The model catalog file is missing, malformed, or does not name the pair asked for."""


class DownloadError(SpecExecError, RuntimeError):
    """A model download stopped; `kind` names why, in the words of `specexec models download --json`'s error event
    ("gated", "disk", "network", "verify", "not_found", "cancelled", "unsafe", "io", "busy"). Partial files are
    kept for a resume."""

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


class UnsafeListingError(DownloadError, ValueError):
    """The hub listed a file the downloader must not write: a path leaving the model folder, a drive, stream
    or reserved name, one of the downloader's own names, or a size or checksum that makes no sense. Refused
    before anything on disk is touched."""

    kind = "unsafe"


class DownloadIOError(DownloadError, OSError):
    """Reading or writing the model folder failed for a reason other than a full disk (no permission, a
    read-only or vanished drive)."""

    kind = "io"


class DownloadBusyError(DownloadError):
    """Another process is downloading into the same model folder (it holds the folder's lock)."""

    kind = "busy"

    def __init__(self, message: str, folder: Path, pid: int | None) -> None:
        super().__init__(message)
        self.folder = folder
        self.pid = pid


class InvalidTokenError(DownloadError, ValueError):
    """A Hugging Face token holds whitespace or control characters (a paste gone wrong): refused when saved
    and when read, before it could reach an HTTP header. The remedy is a new token, as for a gated model."""

    kind = "gated"


class HardwareDescriptionError(SpecExecError, ValueError):
    """A hardware description file (a fixture given with --hw or SPECEXEC_HW_FIXTURE) is missing or malformed."""


class ServerError(SpecExecError, OSError):
    """The API server could not start: the port is taken, the address is not this machine's, or binding a
    non-loopback address was not allowed explicitly."""


class RemoteError(SpecExecError, ConnectionError):
    """An OpenAI-compatible server (a remote endpoint) could not be used. `kind` is the engine protocol's
    Error.kind for it; `hint` says what to do, in plain words; `details` keeps the technical reason (the
    exception or the start of the server's reply) for a Details button or a log."""

    kind = "remote_server"

    def __init__(self, message: str, hint: str = "", details: str = "") -> None:
        super().__init__(message)
        self.hint = hint
        self.details = details


class RemoteUnreachableError(RemoteError):
    """Nothing answered at the address: wrong host or port, the server is not running, a firewall, no network."""

    kind = "remote_unreachable"


class RemoteAuthError(RemoteError, PermissionError):
    """The server refused the API key (401/403), or wants one and none was given."""

    kind = "remote_auth"


class RemoteNotOpenAIError(RemoteError):
    """Something answered, but not as an OpenAI-compatible server does (an HTML page, no /v1/models, bad JSON)."""

    kind = "remote_not_openai"


class RemoteTLSError(RemoteError):
    """The secure connection failed: an untrusted or expired certificate, a name mismatch, or https to a server
    that speaks plain http (or the other way round)."""

    kind = "remote_tls"


class RemoteRejectedError(RemoteError, ValueError):
    """The server refused the request itself (4xx): an unknown model, a setting it does not accept. A prompt
    that does not fit the server's context window is this error with kind "context_length"."""

    kind = "remote_rejected"


class RemoteContextLengthError(RemoteRejectedError, ContextLengthError):
    """The server says the conversation does not fit its context window."""

    kind = "context_length"


class RemoteDroppedError(RemoteError):
    """The connection was lost in the middle of an answer (the server stopped, the network dropped, or no word
    came for too long); what arrived before is kept."""

    kind = "remote_dropped"


class DoctorReportError(SpecExecError, ValueError):
    """A GPU check report (`specexec doctor`) or fixture is missing, unreadable, or not in the report's format."""


class ToolServerError(SpecExecError, ConnectionError):
    """An MCP server (core.tools) would not start, did not answer in time, or broke off. The message names the
    server and says what happened in plain words; `details` keeps the last lines it wrote to stderr."""

    def __init__(self, message: str, details: str = "") -> None:
        super().__init__(message)
        self.details = details
