"""Web page origins allowed to call the API server from a browser (CORS). Light on purpose: the app's
settings row imports it without pulling in the HTTP stack.

An origin is what a browser sends in its `Origin` header: scheme, host and port, no path
("http://localhost:3000", "https://chat.example.com"); "*" allows every page, which only makes sense with an
API key on.
"""

from __future__ import annotations

import re

from core.errors import ServerError

_ORIGIN = re.compile(r"https?://(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9.-]+)(:\d{1,5})?")


def parse_origins(text: str | list[str] | tuple[str, ...]) -> tuple[str, ...]:
    """The origins in a comma-separated string (or a list of them), checked and without duplicates.

    Raises:
        ServerError: an entry is not "*" or scheme://host[:port].
    """
    entries = text.split(",") if isinstance(text, str) else [part for item in text for part in item.split(",")]
    origins: list[str] = []
    for entry in (e.strip().rstrip("/") for e in entries):
        if not entry:
            continue
        if entry != "*" and not _ORIGIN.fullmatch(entry):
            raise ServerError(
                f"{entry!r} is not a web origin: write it as the browser shows it, scheme, host and "
                "port without a path (http://localhost:3000), or * for any page"
            )
        if entry not in origins:
            origins.append(entry)
    return tuple(origins)
