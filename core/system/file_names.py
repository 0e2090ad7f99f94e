"""File names Windows reads as something else, for every place that makes a name from outside text (a hub
listing's paths, an exported chat's title): the same rule on every system, so a name is refused or changed
everywhere or nowhere; and a path as a person types or pastes it."""

from __future__ import annotations

import re

_DEVICES = re.compile(r"^(con|prn|aux|nul|com[0-9¹²³]|lpt[0-9¹²³]|conin\$|conout\$)$")


def is_windows_device(name: str) -> bool:
    """Whether Windows takes the file `name` for a device (NUL, CON, COM1, ...): the part before the first dot,
    trailing spaces dropped, whatever the case, names the device, so "nul.txt" writes nowhere."""
    return _DEVICES.match(name.split(".")[0].rstrip(" ").casefold()) is not None


def unquoted(typed: str) -> str:
    """A path as typed, without surrounding space or the quotes Windows' "Copy as path" puts around it."""
    typed = typed.strip()
    if len(typed) > 1 and typed[0] == typed[-1] and typed[0] in "\"'":
        typed = typed[1:-1].strip()
    return typed
