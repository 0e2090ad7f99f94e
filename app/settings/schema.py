"""Typed settings: app-wide (settings.json in the config dir) and per conversation (stored with it).

One schema, defaults in one place (the dataclass field defaults below). On disk: JSON with a
`schema_version`; enums are written as their string values, which never change meaning once released
(add new values, never rename). Reading is forgiving: an unknown key is dropped, a value of the wrong type or
an unknown enum string falls back to the default (logged), a file of an older schema goes through
`_MIGRATIONS`, a broken file is set aside as settings.json.broken and defaults are used.
"""

from __future__ import annotations

import dataclasses
import json
import logging
import math
import os
import reprlib
import typing
from dataclasses import dataclass, field
from enum import StrEnum
from pathlib import Path
from typing import Any, Callable

from core.engine import protocol as P
from core.system import json_text
from core.system.secret_store import write_private_file
from core.system.text_files import read_text_file
from core.system.threads import resolve_thread_count

log = logging.getLogger(__name__)

SETTINGS_SCHEMA_VERSION = 3
# The context lengths Settings offers (AppSettings.context_length), and the steps Make room takes (app.chat.context_room)
CONTEXT_LENGTHS = (2048, 4096, 8192, 16384, 32768, 65536, 131072)
# The text sizes Settings and Ctrl+= / Ctrl+- step through (AppSettings.text_size), in percent of the system's
TEXT_SIZES = (90, 100, 115, 130, 150)
DEFAULT_TEXT_SIZE = 100


class Offload(StrEnum):
    """Whether to stream weights from host RAM (values serialized to disk: do not change)."""

    AUTO = "auto"
    ON = "on"
    OFF = "off"


class Theme(StrEnum):
    SYSTEM = "system"
    LIGHT = "light"
    DARK = "dark"


class Method(StrEnum):
    """How answers are decoded (values serialized to disk: do not change)."""

    AUTO = "auto"  # with a draft: plain decoding or SpecExec, whichever is faster here (core/decoding/autotune)
    SPECEXEC = "specexec"
    SPECINFER = "specinfer"
    SEQUENTIAL = "sequential"


class BudgetMode(StrEnum):
    AUTO = "auto"  # the engine's budget (from the Load, reduced after out-of-memory)
    MANUAL = "manual"


@dataclass
class ConversationSettings:
    """Per conversation: what the model is told and how it samples."""

    system_prompt: str = ""
    temperature: float = 0.7
    top_p: float = 0.9
    max_tokens: int = 512
    budget_mode: BudgetMode = BudgetMode.AUTO
    budget: int = 128
    top_k: int = 0  # 0 = off
    repetition_penalty: float = 1.0  # 1 = off
    seed: int = -1  # -1 = a new random seed for every answer; a fixed seed repeats an answer exactly
    method: Method = Method.AUTO
    # Whether a model that can answer without thinking first (its template reads `enable_thinking`, as Qwen3's
    # does) thinks before it answers; models that always think, and models that never do, ignore it.
    thinking: bool = True
    # MCP servers (by name) whose tools this chat may not use; every other enabled server's tools are offered, so
    # a server added later is on in every chat until switched off there.
    tool_servers_off: list[str] = field(default_factory=list)

    def validated(self) -> "ConversationSettings":
        """A copy with every number clamped into its valid range."""
        return dataclasses.replace(
            self,
            temperature=min(max(float(self.temperature), 0.0), 2.0),
            top_p=min(max(float(self.top_p), 0.01), 1.0),
            max_tokens=min(max(int(self.max_tokens), 1), 32768),
            budget=min(max(int(self.budget), 1), 4096),
            top_k=min(max(int(self.top_k), 0), 1000),
            repetition_penalty=min(max(float(self.repetition_penalty), 1.0), 2.0),
            seed=min(max(int(self.seed), -1), 2**31 - 1),
            tool_servers_off=sorted({str(name) for name in self.tool_servers_off})[:64],
        )

    def decoding_method(self, has_draft: bool) -> str:
        """The engine's method for this conversation: without a draft model, plain decoding; AUTO lets the
        engine choose per pass (and explain its choice)."""
        if not has_draft:
            return Method.SEQUENTIAL.value
        return self.method.value


# The built-in SmolLM2 135M is a tiny demo model. At the general defaults (temperature 0.7, top-p 0.9) it often
# answers "What is the capital of France?" in made-up French and, asked again, loops on a word; calmer
# sampling with a light repetition penalty keeps it on track (measured: docs/benchmarks.md, "The built-in
# model's sampling"). Bigger models keep the general defaults.
BUILTIN_SAMPLING = {"temperature": 0.2, "top_p": 0.5, "top_k": 0, "repetition_penalty": 1.1}

# A thinking model's thinking counts against the longest answer, and it often thinks for 1,000 tokens or more:
# at the schema's 512 most answers would be cut off before they begin. A new chat with such a model gets half
# the context window instead, at most this many tokens (the other half keeps the conversation: the engine
# leaves out old turns to keep room for the longest answer).
THINKING_MAX_TOKENS = 4096


@dataclass
class RemoteEndpoint:
    """An OpenAI-compatible server the user added in the model manager (its API key is in the OS keyring,
    core.remote.key_store, never in this file). url: the API root as core.remote.endpoint normalises it;
    model: the one last used there."""

    name: str = ""
    url: str = ""
    model: str = ""


@dataclass
class AppSettings:
    """App-wide settings. The model pair defaults to the built-in pair, so a first run can chat at once."""

    target: str = "builtin"
    draft: str = "builtin-draft"  # "" = no draft (plain sequential decoding)
    # The catalog pair the target and draft came from ("builtin", a catalog id), "" for models picked by path.
    active_pair: str = ""
    offload: Offload = Offload.AUTO
    vram_budget_gb: float = 0.0  # 0 = automatic
    theme: Theme = Theme.SYSTEM
    text_size: int = DEFAULT_TEXT_SIZE  # percent of the system's text size, one of TEXT_SIZES (text_percent)
    dtype: str = "auto"
    device: str = "auto"
    tree_budget: int = 0  # draft tokens per pass; 0 = automatic (chosen for this machine)
    max_depth: int = 32
    expand: int = 32
    context_length: int = 0  # tokens the KV caches are planned for, at most the models' limit; 0 = 4,096
    engine_threads: int = 0  # CPU threads for the engine; 0 = core.system.threads' default (physical cores minus one)
    models_folder: str = ""  # where models are downloaded and looked for; "" = the default (app.system.models_folder)
    # Where answers come from: "" = this computer (the engine process), else the name of one of `endpoints`.
    connection: str = ""
    endpoints: list[RemoteEndpoint] = field(default_factory=list)
    api_server: bool = False  # serve the OpenAI-compatible API on 127.0.0.1 (app.api.server)
    api_server_port: int = 8765
    api_server_require_key: bool = True
    api_server_key: str = ""  # made by the settings dialog the first time it shows the server row
    api_server_allowed_origins: str = ""  # web pages that may call the API from a browser, comma-separated (CORS)
    defaults: ConversationSettings = field(default_factory=ConversationSettings)
    schema_version: int = SETTINGS_SCHEMA_VERSION

    def conversation_defaults(self, model: dict[str, Any] | None = None) -> ConversationSettings:
        """What a new chat starts with (and the API server's requests leave out): `defaults`, except that the
        tiny built-in model, while in use on this computer, gets sampling of its own where `defaults` keep the
        schema's (BUILTIN_SAMPLING says why), and that a model that thinks (`model`: the engine's
        StatusReport.models) gets a longer longest answer where `defaults` keep the schema's
        (THINKING_MAX_TOKENS says why)."""
        defaults = self.defaults.validated()
        untouched = all(getattr(defaults, name) == getattr(ConversationSettings, name) for name in BUILTIN_SAMPLING)
        if self.target == "builtin" and not self.connection and untouched:
            defaults = dataclasses.replace(defaults, **BUILTIN_SAMPLING)
        model = model or {}
        room = int(model.get("max_context") or 0) // 2
        default_length = defaults.max_tokens == ConversationSettings.max_tokens
        if model.get("thinking") and default_length and room > defaults.max_tokens:
            defaults = dataclasses.replace(defaults, max_tokens=min(THINKING_MAX_TOKENS, room))
        return defaults

    def text_percent(self) -> int:
        """The text size in force: `text_size`, or the nearest of TEXT_SIZES to a value written by hand."""
        return min(TEXT_SIZES, key=lambda size: (abs(size - self.text_size), size))

    def remote_endpoint(self) -> RemoteEndpoint | None:
        """The endpoint answers come from; None for this computer (or a connection no longer listed)."""
        return next((e for e in self.endpoints if e.name == self.connection), None) if self.connection else None

    def load_request(self) -> P.Load:
        """The engine's Load for these settings (for a remote endpoint: its model, no draft)."""
        remote = self.remote_endpoint()
        if remote is not None:
            return P.Load(target=remote.model, draft=None)
        return P.Load(
            target=self.target or "builtin",
            draft=self.draft or None,
            dtype=self.dtype,
            device=self.device,
            offload=self.offload.value,
            vram_budget_gb=self.vram_budget_gb if self.vram_budget_gb > 0 else None,
            budget=self.tree_budget if self.tree_budget > 0 else "auto",
            max_depth=max(1, self.max_depth),
            expand=max(1, self.expand),
            context_length=self.context_length if self.context_length > 0 else None,
            fit_context=True,  # the setting is kept when the models change: a shorter model keeps its limit
        )

    def thread_count(self) -> int:
        return resolve_thread_count(self.engine_threads if self.engine_threads > 0 else None)


# ----------------------------------------------------------------------------------------------------------
# Dict form (what goes to disk)


def to_dict(settings: Any) -> dict[str, Any]:
    data: dict[str, Any] = {}
    for f in dataclasses.fields(settings):
        value = getattr(settings, f.name)
        if dataclasses.is_dataclass(value):
            value = to_dict(value)
        elif isinstance(value, list):
            value = [to_dict(item) if dataclasses.is_dataclass(item) else item for item in value]
        elif isinstance(value, StrEnum):
            value = value.value
        data[f.name] = value
    return data


def from_dict(cls: type, data: object) -> Any:
    """Build `cls` from a dict, keeping every valid field and defaulting the rest."""
    if not isinstance(data, dict):
        log.warning("settings for %s are not an object (%r): using defaults", cls.__name__, type(data).__name__)
        return cls()
    hints = typing.get_type_hints(cls)
    values: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        raw, hint = data[f.name], hints[f.name]
        try:
            values[f.name] = _coerce(raw, hint)
        except (TypeError, ValueError) as error:  # the value shortened: a damaged file must not flood the log
            log.warning(
                "setting %s.%s=%s is invalid (%s): using the default", cls.__name__, f.name, reprlib.repr(raw), error
            )
    unknown = set(data) - {f.name for f in dataclasses.fields(cls)}
    if unknown:
        log.info("ignoring %d unknown settings of %s: %s", len(unknown), cls.__name__, reprlib.repr(sorted(unknown)))
    return cls(**values)


def _coerce(raw: object, hint: Any) -> Any:
    if typing.get_origin(hint) is list:
        if not isinstance(raw, list):
            raise TypeError("expected a list")
        (item,) = typing.get_args(hint)
        return [_coerce(value, item) for value in raw]
    if isinstance(hint, type) and issubclass(hint, StrEnum):
        if not isinstance(raw, str) or raw not in {choice.value for choice in hint}:
            raise ValueError(f"expected one of {', '.join(choice.value for choice in hint)}")
        return hint(raw)
    if dataclasses.is_dataclass(hint):
        return from_dict(hint, raw)
    if hint is bool:
        if not isinstance(raw, bool):
            raise TypeError("expected true or false")
        return raw
    if hint is int:
        if not json_text.is_whole(raw):
            raise TypeError("expected a whole number")
        return raw
    if hint is float:
        if not json_text.is_number(raw):
            raise TypeError("expected a number")
        try:
            value = float(raw)
        except OverflowError:  # Python's json reads whole numbers of any length
            value = math.inf
        if not math.isfinite(value):  # and NaN and Infinity, which no setting means
            raise ValueError("expected a finite number")
        return value
    if hint is str:
        if not isinstance(raw, str):
            raise TypeError("expected text")
        return raw
    raise TypeError(f"unsupported setting type {hint!r}")


# ----------------------------------------------------------------------------------------------------------
# Migrations: _MIGRATIONS[n] turns a schema-n dict into a schema-(n+1) dict. Only ever append.


def _v1_to_v2(data: dict[str, Any]) -> dict[str, Any]:
    """Version 1 named the model pair `model` / `draft_model` and had a boolean `dark_mode`."""
    data = dict(data)
    if "model" in data:
        data["target"] = data.pop("model")
    if "draft_model" in data:
        data["draft"] = data.pop("draft_model") or ""
    dark = data.pop("dark_mode", None)
    if isinstance(dark, bool):
        data["theme"] = Theme.DARK.value if dark else Theme.LIGHT.value
    return data


def _v2_to_v3(data: dict[str, Any]) -> dict[str, Any]:
    """Version 2's tree budget defaulted to 128; version 3 chooses it automatically (0). A file still holding
    the old default gets the new one; any other budget was picked by the user and stays."""
    data = dict(data)
    if data.get("tree_budget") == 128:
        data["tree_budget"] = 0
    return data


_MIGRATIONS: dict[int, Callable[[dict[str, Any]], dict[str, Any]]] = {1: _v1_to_v2, 2: _v2_to_v3}


def migrate(data: dict[str, Any]) -> dict[str, Any]:
    version = data.get("schema_version", 1)
    if not isinstance(version, int) or version < 1:
        version = 1
    if version > SETTINGS_SCHEMA_VERSION:
        log.warning("settings were written by a newer version (schema %d): reading what this version knows", version)
        return data
    while version < SETTINGS_SCHEMA_VERSION:
        data = _MIGRATIONS[version](data)
        version += 1
    data["schema_version"] = SETTINGS_SCHEMA_VERSION
    return data


# ----------------------------------------------------------------------------------------------------------
# Files


def load_settings(path: Path) -> AppSettings:
    """The settings in `path`; defaults when it does not exist or cannot be read."""
    try:
        data = json.loads(read_text_file(path))
        if not isinstance(data, dict):
            raise ValueError("not a JSON object")
    except FileNotFoundError:
        return AppSettings()
    except OSError as error:
        log.warning("cannot read %s (%s): using default settings", path, error)
        return AppSettings()
    except ValueError as error:  # not JSON, or not text (TextEncodingError)
        broken = path.with_name(path.name + ".broken")
        log.warning("%s is not valid settings (%s): moved to %s, using defaults", path, error, broken)
        try:
            os.replace(path, broken)
        except OSError:
            pass
        return AppSettings()
    settings = from_dict(AppSettings, migrate(data))
    settings.schema_version = SETTINGS_SCHEMA_VERSION
    settings.endpoints = checked_endpoints(settings.endpoints)
    if settings.connection and settings.remote_endpoint() is None:
        log.warning("the connection %r is not among the saved endpoints: using this computer", settings.connection)
        settings.connection = ""
    return settings


def checked_endpoints(endpoints: list[RemoteEndpoint]) -> list[RemoteEndpoint]:
    """The endpoints of a settings file that are usable: a name (unique) and an address that passes
    core.remote.endpoint's checks (stored normalised). The file may have been edited by hand."""
    from core.remote.endpoint import normalise_base_url

    kept: list[RemoteEndpoint] = []
    for endpoint in endpoints:
        name = " ".join(endpoint.name.split())
        try:
            url = normalise_base_url(endpoint.url)
        except ValueError as error:
            log.warning("dropping the saved endpoint %r: %s", endpoint.name, error)
            continue
        if not name or any(e.name == name for e in kept):
            log.warning("dropping a saved endpoint without a name of its own (%r)", endpoint.name)
            continue
        kept.append(RemoteEndpoint(name, url, endpoint.model))
    return kept


class SettingsNotSaved(OSError):
    """The settings file could not be written (a full disk, a read-only or vanished folder): the settings
    still apply until the app quits, and the file keeps what it had."""


def save_settings(settings: AppSettings, path: Path) -> None:
    """Write atomically (a temporary file, then a rename), so a crash never leaves half a file; readable by
    this user only (0600), because the file holds the API server's key. Raises SettingsNotSaved, in words."""
    try:
        write_private_file(path, json.dumps(to_dict(settings), indent=2, sort_keys=True) + "\n")
    except OSError as error:
        raise SettingsNotSaved(
            f"Your settings could not be saved ({error.strerror or error}; in {path.parent}): they apply until "
            "you quit the app. Free some disk space, then change a setting again to save them."
        ) from error


def conversation_settings_from_json(
    text: str | None, defaults: ConversationSettings | None = None
) -> ConversationSettings:
    if not text:
        return dataclasses.replace(defaults) if defaults else ConversationSettings()
    try:
        data = json.loads(text)
    except ValueError:
        log.warning("conversation settings are not valid JSON: using defaults")
        return ConversationSettings()
    return from_dict(ConversationSettings, data)


def conversation_settings_to_json(settings: ConversationSettings) -> str:
    return json.dumps(to_dict(settings), sort_keys=True)
