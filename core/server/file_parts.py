"""Files sent in a request, read to text the way the app reads a file added to a message: OpenAI's `file`
content part in chat messages ({"type": "file", "file": {"filename", "file_data"}}) and the Responses API's
`input_file` part ({"type": "input_file", "filename", "file_data"}). Each becomes a text part holding
`fenced(filename, text)` (core.text.document_text) on a line of its own, before the request is parsed, so a
PDF, an Office document (Word, Excel, PowerPoint), an OpenDocument text, spreadsheet or presentation or a
text file sent through the API reaches the model as one added in the app does; a picture, a LibreOffice
drawing or a scanned PDF is refused in the reader's words.

Only a file's own bytes are taken: `file_data`, a data: URL in base64 as OpenAI's clients write it (bare base64
too). `file_id` (this server keeps no uploaded files: it has no /v1/files) and `file_url` (it fetches nothing
from the web) are refused in words. The bytes go to a private temporary folder under a name made from the
filename's safe characters (the filename itself is only shown to the model); a PDF or an Office file is parsed in
a child process (`specexec text --json`, core.system.cli_process) stopped after READ_TIMEOUT_S, since a
hostile file can keep a parser busy or swell it, and a process can be stopped where a thread cannot. At most
MAX_FILES files a request: each costs a process.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import re
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from core.errors import DocumentError
from core.server.api_errors import ApiError
from core.system.cli_process import cli_command
from core.system.file_names import is_windows_device
from core.text.document_text import READ_TIMEOUT_S, document_text, fenced, read_apart, reader_reply

MAX_FILES = 20
MAX_DISK_NAME = 100
DEFAULT_NAME = "document"
UNSAFE_NAME_CHARACTERS = re.compile(r"[^A-Za-z0-9 ._()+-]")
FileRoute = Literal["chat", "responses"]


@dataclass
class FilePart:
    """One file part of a request: where it is (for the error's `param`), the object holding its fields, and
    the content list and index it replaces when read."""

    where: str
    fields: dict[str, Any]
    content: list[Any]
    index: int
    text_type: str  # the text part it becomes: "text" in chat messages, "input_text" in Responses input


def file_parts(body: object, route: FileRoute) -> list[FilePart]:
    """The file parts of a request body, in order (none where its shape is not a request's: the parser says
    what is wrong with it)."""
    if not isinstance(body, dict):
        return []
    field = "messages" if route == "chat" else "input"
    items = body.get(field)
    if not isinstance(items, list):
        return []
    found = []
    for item_index, item in enumerate(items):
        if not isinstance(item, dict):
            continue
        key = "output" if item.get("type") == "function_call_output" else "content"  # a tool's result may be one
        content = item.get(key)
        if not isinstance(content, list):
            continue
        for index, part in enumerate(content):
            if not isinstance(part, dict):
                continue
            where = f"{field}[{item_index}].{key}[{index}]"
            if route == "chat" and part.get("type") == "file":
                fields = part.get("file")
                if not isinstance(fields, dict):
                    raise ApiError(400, f"{where}.file must be an object", param=f"{where}.file", code="invalid_type")
                found.append(FilePart(where, fields, content, index, "text"))
            elif route == "responses" and part.get("type") == "input_file":
                found.append(FilePart(where, part, content, index, "input_text"))
    if len(found) > MAX_FILES:
        raise ApiError(
            400,
            f"the request holds {len(found)} files, more than the {MAX_FILES} read in one request: send fewer",
            param=field,
            code="too_many_files",
        )
    return found


def file_data_bytes(parts: list[FilePart]) -> int:
    """How many bytes of the request body the parts' file data take (the rest is text the model reads)."""
    return sum(len(part.fields["file_data"]) for part in parts if isinstance(part.fields.get("file_data"), str))


async def read_file_parts(parts: list[FilePart]) -> None:
    """Replace each file part by a text part holding its name and text, one file after another.

    Raises:
        ApiError: 400 naming the part, for a file sent by id or URL, data that is not base64, or a file the
            reader refused (not text, damaged, locked, no text in it, too long to read), in its words; 500
            where the server's own disk could not take it.
    """
    for part in parts:
        name, data = _name_and_bytes(part)
        try:
            text = await asyncio.to_thread(_read, name, data)
        except DocumentError as error:
            raise ApiError(400, f"{part.where}: {error}", param=part.where, code="unreadable_file") from error
        except OSError as error:  # the server's disk, full or not writable: not the client's fault
            raise ApiError(
                500,
                f"{part.where}: the server could not write the file to a temporary folder to read it "
                f"({error.strerror or error})",
                "server_error",
                code="storage_error",
            ) from error
        block = fenced(name, text)
        if not _line_ended(part.content, part.index):
            block = "\n" + block  # on a line of its own, as the app puts a file at the cursor
        part.content[part.index] = {"type": part.text_type, "text": block}


def _line_ended(content: list[Any], index: int) -> bool:
    """Whether the text of the parts before `index` (joined, as the parser joins them) is empty or ends a line:
    the last of them that holds text says."""
    for part in reversed(content[:index]):
        text = part.get("text") if isinstance(part, dict) else None
        if isinstance(text, str) and text:
            return text.endswith("\n")
    return True


def _name_and_bytes(part: FilePart) -> tuple[str, bytes]:
    fields, where = part.fields, part.where
    if "file_id" in fields:
        raise ApiError(
            400,
            f"{where}: files are not uploaded to this server (it has no /v1/files), so a file_id names nothing "
            "here: send the file itself as 'file_data' (data:application/pdf;base64,...)",
            param=f"{where}.file_id",
            code="unsupported_content",
        )
    if "file_url" in fields:
        raise ApiError(
            400,
            f"{where}: this server fetches nothing from the web: send the file itself as 'file_data' "
            "(data:application/pdf;base64,...)",
            param=f"{where}.file_url",
            code="unsupported_content",
        )
    name = fields.get("filename", DEFAULT_NAME)
    if not isinstance(name, str):
        raise ApiError(400, f"{where}: 'filename' must be a string", param=f"{where}.filename", code="invalid_type")
    data = fields.get("file_data")
    if not isinstance(data, str):
        raise ApiError(
            400,
            f"{where}: 'file_data' must be a string: the file as a data: URL in base64 "
            "(data:application/pdf;base64,...)",
            param=f"{where}.file_data",
            code="invalid_type",
        )
    if data.startswith("data:"):
        header, comma, data = data.partition(",")
        if not comma or not header.endswith(";base64"):
            raise ApiError(
                400,
                f"{where}: 'file_data' must be in base64 (data:application/pdf;base64,...), got {header[:60]!r}",
                param=f"{where}.file_data",
                code="invalid_value",
            )
    try:
        decoded = base64.b64decode(data, validate=True)
    except (binascii.Error, ValueError) as error:
        raise ApiError(
            400, f"{where}: 'file_data' is not base64 ({error})", param=f"{where}.file_data", code="invalid_value"
        ) from error
    if not decoded:
        raise ApiError(400, f"{where}: the file is empty", param=f"{where}.file_data", code="invalid_value")
    return name.strip() or DEFAULT_NAME, decoded


def disk_name(name: str) -> str:
    """A name to write the file under that no filename can turn into another path or a device: its last part's
    letters, digits and plain punctuation, up to MAX_DISK_NAME characters."""
    safe = UNSAFE_NAME_CHARACTERS.sub("_", name.replace("\\", "/").rsplit("/", 1)[-1])
    safe = safe.strip(" .")[:MAX_DISK_NAME].strip(" .")
    if not safe:
        return DEFAULT_NAME
    return f"{DEFAULT_NAME}-{safe}" if is_windows_device(safe) else safe


def _read(name: str, data: bytes) -> str:
    """The text of one file (in a worker thread: it writes, and may wait for a child up to READ_TIMEOUT_S)."""
    with tempfile.TemporaryDirectory(prefix="specexec-file-") as folder:
        path = Path(folder) / disk_name(name)
        path.write_bytes(data)
        if not read_apart(path):
            return document_text(path)
        program, arguments = cli_command("text", str(path), "--json")
        try:
            done = subprocess.run(
                [program, *arguments], capture_output=True, stdin=subprocess.DEVNULL, timeout=READ_TIMEOUT_S
            )
        except subprocess.TimeoutExpired as error:
            raise DocumentError(
                f"reading {path.name} took longer than {READ_TIMEOUT_S:.0f} s and was stopped: the file may be "
                "damaged (save or print it again as a PDF, or send its text)"
            ) from error
        return reader_reply(done.returncode, done.stdout, done.stderr.decode("utf-8", "replace"), path.name)[1]
