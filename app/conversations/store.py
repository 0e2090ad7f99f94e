"""Conversations in SQLite (one file in the user data dir). Qt-free.

Schema changes live in `MIGRATIONS` only: MIGRATIONS[n] takes a database of schema n to n+1 and is never
edited once released. `schema_version` holds the current number. Before migrating an existing database the
file is copied to `<name>.v<old>.bak`. A database from a newer version is refused (StoreError), not touched.

A thinking model's answer keeps its thinking apart from the answer (`reasoning`; schema 4): the answer alone
is copied and searched, the thinking is shown folded above it and goes back to the model in its own field.

A chat pinned to the top of the list (schema 6) keeps when it was pinned in `pinned_at` (NULL: not pinned):
pinned chats come first, the last one pinned at the top, and stay in that order however they are used.

An answer that called tools (core.tools; schema 5) keeps its rounds in `tool_rounds`, a JSON list of
{"content": the words written before the calls, "calls": [{"id", "name", "arguments" (an object), "server",
"decision" (once / always / deny / auto), "result" (the text the model got), "is_error", "status" (done,
denied, failed, stopped)}]}; `content` is the final answer. The rounds go back to the model as the assistant
and tool messages they were. Both the rounds and an answer's `stats` are checked as they are read
(app.conversations.message_fields): what is not of its type is left out.

Answers are written while they stream (status "streaming"); a database opened with such rows left over (the
app or the machine died mid-answer) marks them "interrupted", keeping the text saved so far. WAL journal with
synchronous=NORMAL: each commit is cheap enough to run twice a second while streaming, and a crash of the app
loses nothing committed.
"""

from __future__ import annotations

import contextlib
import functools
import json
import logging
import shutil
import sqlite3
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable, Iterable, Iterator

from app.conversations.message_fields import checked_rounds, checked_stats
from core.system.private_files import private_file, private_folder

log = logging.getLogger(__name__)

# Message statuses (stored as strings; do not rename).
COMPLETE = "complete"
STREAMING = "streaming"
STOPPED = "stopped"  # the user pressed Stop: the partial answer is kept
INTERRUPTED = "interrupted"  # the engine or the app died mid-answer: the partial answer is kept
FAILED = "error"  # the engine answered with an error (its text is in stats["error"])


class StoreError(RuntimeError):
    """The conversation database cannot be used: `reason` "newer" (written by a newer version of the app),
    "damaged" (SQLite cannot read it), "full" (the disk is full) or "unavailable" (locked by another program):
    after the last two, trying again later may work.
    A newer or damaged file can be set aside (`Store.set_aside`) and a fresh one started; nothing is deleted."""

    def __init__(self, message: str, reason: str = "damaged") -> None:
        super().__init__(message)
        self.reason = reason


@dataclass(frozen=True)
class Conversation:
    id: int
    title: str
    created_at: float
    updated_at: float
    settings_json: str = "{}"
    pinned_at: float | None = None  # when it was pinned to the top of the list (schema 6), None if it is not

    @property
    def pinned(self) -> bool:
        return self.pinned_at is not None


@dataclass(frozen=True)
class Message:
    id: int
    conversation_id: int
    role: str
    content: str
    status: str = COMPLETE
    stats: dict[str, Any] = field(default_factory=dict)
    created_at: float = 0.0
    alt_index: int = 0  # this answer's place among the alternatives of its turn (0-based)
    alt_count: int = 1  # how many answers the turn has (Regenerate adds one and keeps the old)
    reasoning: str = ""  # a thinking model's thinking before the answer (core.text.reasoning), "" for the others
    tool_rounds: list[dict[str, Any]] = field(default_factory=list)  # the answer's tool calls (schema 5)


# ----------------------------------------------------------------------------------------------------------
# Migrations


_V1 = (
    """CREATE TABLE conversations (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        title TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
    """CREATE TABLE messages (
        id INTEGER PRIMARY KEY AUTOINCREMENT,
        conversation_id INTEGER NOT NULL REFERENCES conversations(id) ON DELETE CASCADE,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        created_at REAL NOT NULL
    )""",
)

# Per-conversation settings and ordering by last activity; message status (streaming / stopped /
# interrupted / error) and per-answer stats.
_V2 = (
    "ALTER TABLE conversations ADD COLUMN updated_at REAL NOT NULL DEFAULT 0",
    "ALTER TABLE conversations ADD COLUMN settings TEXT NOT NULL DEFAULT '{}'",
    "UPDATE conversations SET updated_at = created_at",
    "ALTER TABLE messages ADD COLUMN status TEXT NOT NULL DEFAULT 'complete'",
    "ALTER TABLE messages ADD COLUMN stats TEXT NOT NULL DEFAULT '{}'",
    "CREATE INDEX messages_by_conversation ON messages(conversation_id, id)",
)


# Regenerated answers are kept as alternatives: `alt_of` is the first answer of the turn (NULL for that first
# one and for every other message), `hidden` marks the alternatives not on screen.
_V3 = (
    "ALTER TABLE messages ADD COLUMN alt_of INTEGER",
    "ALTER TABLE messages ADD COLUMN hidden INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX messages_by_alternative ON messages(alt_of, id)",
)


# A thinking model's thinking, apart from the answer (issue 32). How long it thought is in `stats`.
_V4 = ("ALTER TABLE messages ADD COLUMN reasoning TEXT NOT NULL DEFAULT ''",)

# An answer's tool calls and their results (issue 43), a JSON list of rounds (module docstring).
_V5 = ("ALTER TABLE messages ADD COLUMN tool_rounds TEXT NOT NULL DEFAULT '[]'",)

# A chat pinned to the top of the list, at the time it was pinned (module docstring).
_V6 = ("ALTER TABLE conversations ADD COLUMN pinned_at REAL",)


def _statements(*sql: str) -> Callable[[sqlite3.Connection], None]:
    def step(db: sqlite3.Connection) -> None:
        for statement in sql:
            db.execute(statement)

    return step


# MIGRATIONS[n]: schema n -> n+1, run inside one transaction. Append only; never edit a released step.
MIGRATIONS: dict[int, Callable[[sqlite3.Connection], None]] = {
    0: _statements(*_V1),
    1: _statements(*_V2),
    2: _statements(*_V3),
    3: _statements(*_V4),
    4: _statements(*_V5),
    5: _statements(*_V6),
}
SCHEMA_VERSION = len(MIGRATIONS)


@contextlib.contextmanager
def transaction(db: sqlite3.Connection) -> Iterator[sqlite3.Connection]:
    """BEGIN ... COMMIT, or ROLLBACK on an exception (connections here are in autocommit mode)."""
    db.execute("BEGIN IMMEDIATE")
    try:
        yield db
        db.execute("COMMIT")  # fails when the disk is full: rolled back below, so the next BEGIN works
    except BaseException:
        if db.in_transaction:
            db.execute("ROLLBACK")
        raise


def connect(path: Path | str) -> sqlite3.Connection:
    db = sqlite3.connect(path, isolation_level=None)  # autocommit; `transaction` groups statements
    db.execute("PRAGMA foreign_keys = ON")
    return db


def schema_version(db: sqlite3.Connection) -> int:
    has_table = db.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_version'").fetchone()
    if not has_table:
        return 0
    row = db.execute("SELECT version FROM schema_version").fetchone()
    return int(row[0]) if row else 0


def migrate(db: sqlite3.Connection, target: int = SCHEMA_VERSION) -> int:
    """Bring `db` to schema `target` (each step in one transaction); returns the version it had."""
    found = schema_version(db)
    if found > SCHEMA_VERSION:
        raise StoreError(
            f"the conversation database has schema version {found}, newer than this app's {SCHEMA_VERSION}: "
            "update SpecExec Desktop to open it",
            reason="newer",
        )
    for version in range(found, target):
        with transaction(db):  # one transaction per step: a failed step leaves the previous version intact
            db.execute("CREATE TABLE IF NOT EXISTS schema_version (version INTEGER NOT NULL)")
            MIGRATIONS[version](db)
            db.execute("DELETE FROM schema_version")
            db.execute("INSERT INTO schema_version (version) VALUES (?)", (version + 1,))
        log.info("conversation database migrated to schema %d", version + 1)
    return found


def _writes(method: Callable[..., Any]) -> Callable[..., Any]:
    """A Store method that writes: SQLite's failures to write (the disk is full, the file is locked by another
    program) become a StoreError in words, with reason "full" or "unavailable"; the database is unchanged (each
    write is one transaction), so the caller can keep what it meant to save and try again."""

    @functools.wraps(method)
    def write(self: Store, *args: Any, **kwargs: Any) -> Any:
        try:
            return method(self, *args, **kwargs)
        except sqlite3.OperationalError as error:
            full = "full" in str(error)
            why = "the disk is full: free some space" if full else f'SQLite says "{error}"'
            raise StoreError(
                f"could not save to the conversation database ({why})", reason="full" if full else "unavailable"
            ) from error

    return write


# ----------------------------------------------------------------------------------------------------------
# Store


class Store:
    """All reads and writes of conversations. Use from one thread (the UI thread)."""

    def __init__(self, path: Path | str) -> None:
        self.path = Path(path)
        private_folder(self.path.parent)
        existed = self.path.exists() and self.path.stat().st_size > 0
        for file in (self.path, *self._companions()):  # 0600 from the start; SQLite gives its -wal and -shm
            if file == self.path or file.exists():  # files the database file's mode
                private_file(file)
        try:
            self.db = connect(self.path)
            self.db.execute("PRAGMA journal_mode = WAL")
            self.db.execute("PRAGMA synchronous = NORMAL")
            problem = self.db.execute("PRAGMA quick_check").fetchone()[0] if existed else "ok"
            if problem != "ok":
                raise sqlite3.DatabaseError(problem)
            found = schema_version(self.db)
            if existed and 0 < found < SCHEMA_VERSION:
                self._backup(found)
            migrate(self.db)
            self.recovered = self._recover_streaming()
        except sqlite3.DatabaseError as error:
            with contextlib.suppress(AttributeError, sqlite3.Error):
                self.db.close()
            if isinstance(error, sqlite3.OperationalError) and "malformed" not in str(error):  # locked, full, ...
                raise StoreError(
                    f'the conversation database {self.path} cannot be opened: SQLite says "{error}"',
                    reason="unavailable",
                ) from error
            raise StoreError(f'the conversation database {self.path} is damaged: SQLite says "{error}"') from error
        except StoreError:
            self.db.close()
            raise

    def _companions(self) -> tuple[Path, Path]:
        return self.path.with_name(self.path.name + "-wal"), self.path.with_name(self.path.name + "-shm")

    @staticmethod
    def set_aside(path: Path | str) -> Path:
        """Move a database that cannot be used (and its -wal / -shm files) out of the way, to
        `<name>.unreadable-<time>`, so a fresh one can start where it was; returns where it went. Nothing is
        deleted: a newer app can still open it, and a damaged one can still be rescued by hand."""
        path = Path(path)
        aside = path.with_name(f"{path.name}.unreadable-{time.strftime('%Y%m%d-%H%M%S')}")
        for suffix in ("", "-wal", "-shm"):
            source = path.with_name(path.name + suffix)
            if source.exists():
                source.replace(aside.with_name(aside.name + suffix))
        log.warning("set the conversation database %s aside as %s", path, aside)
        return aside

    def _backup(self, version: int) -> None:
        backup = self.path.with_name(f"{self.path.name}.v{version}.bak")
        try:
            self.db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            shutil.copy2(self.path, backup)
            log.info("backed up the conversation database to %s before migrating", backup)
        except OSError as error:
            log.warning("could not back up %s before migrating: %s", self.path, error)

    def _recover_streaming(self) -> int:
        with transaction(self.db):
            count = self.db.execute(
                "UPDATE messages SET status = ? WHERE status = ?", (INTERRUPTED, STREAMING)
            ).rowcount
        if count:
            log.warning("%d answer(s) were cut off by a crash: kept and marked interrupted", count)
        return count

    def close(self) -> None:
        self.db.close()

    # -- conversations -------------------------------------------------------------------------------------

    @_writes
    def create_conversation(self, title: str = "New chat", settings_json: str = "{}") -> int:
        now = time.time()
        with transaction(self.db):
            cursor = self.db.execute(
                "INSERT INTO conversations (title, created_at, updated_at, settings) VALUES (?, ?, ?, ?)",
                (title, now, now, settings_json),
            )
        return int(cursor.lastrowid)

    _SELECT_CONVERSATION = "SELECT id, title, created_at, updated_at, settings, pinned_at FROM conversations"

    def conversation(self, conversation_id: int) -> Conversation | None:
        row = self.db.execute(f"{self._SELECT_CONVERSATION} WHERE id = ?", (conversation_id,)).fetchone()
        return Conversation(*row) if row else None

    def conversations(self, search: str = "") -> list[Conversation]:
        """The pinned chats first (the last pinned at the top), then the others, most recently active first;
        `search` matches titles and message text (case-insensitive)."""
        query = self._SELECT_CONVERSATION
        args: tuple[Any, ...] = ()
        if search.strip():
            pattern = "%" + search.strip().replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_") + "%"
            query += (
                " WHERE title LIKE ? ESCAPE '\\' OR id IN"
                " (SELECT conversation_id FROM messages WHERE content LIKE ? ESCAPE '\\')"
            )
            args = (pattern, pattern)
        query += " ORDER BY pinned_at IS NULL, pinned_at DESC, updated_at DESC, id DESC"
        return [Conversation(*row) for row in self.db.execute(query, args)]

    @_writes
    def rename_conversation(self, conversation_id: int, title: str) -> None:
        with transaction(self.db):
            self.db.execute("UPDATE conversations SET title = ? WHERE id = ?", (title, conversation_id))

    @_writes
    def set_pinned(self, conversation_id: int, pinned: bool) -> None:
        """Pin the chat to the top of the list (a pinned chat keeps its place) or unpin it. Its last activity is
        left as it was: unpinned, it goes back among the others by date."""
        with transaction(self.db):
            if pinned:
                self.db.execute(
                    "UPDATE conversations SET pinned_at = COALESCE(pinned_at, ?) WHERE id = ?",
                    (time.time(), conversation_id),
                )
            else:
                self.db.execute("UPDATE conversations SET pinned_at = NULL WHERE id = ?", (conversation_id,))

    @_writes
    def set_conversation_settings(self, conversation_id: int, settings_json: str) -> None:
        with transaction(self.db):
            self.db.execute("UPDATE conversations SET settings = ? WHERE id = ?", (settings_json, conversation_id))

    @_writes
    def add_conversation(
        self, title: str, settings_json: str, messages: Iterable[Message], created_at: float | None = None
    ) -> int:
        """A new chat named `title` holding `messages` (each one's role, text, status, stats, time, thinking and
        tool calls; ids are given anew), written in one transaction: a branch of a chat, or one imported.
        Returns its id."""
        now = time.time()
        with transaction(self.db):
            cursor = self.db.execute(
                "INSERT INTO conversations (title, created_at, updated_at, settings) VALUES (?, ?, ?, ?)",
                (title, now if created_at is None else created_at, now, settings_json),
            )
            conversation_id = int(cursor.lastrowid)
            self.db.executemany(
                "INSERT INTO messages (conversation_id, role, content, status, stats, created_at, reasoning,"
                " tool_rounds) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                [
                    (
                        conversation_id,
                        m.role,
                        m.content,
                        m.status,
                        json.dumps(m.stats),
                        m.created_at,
                        m.reasoning,
                        json.dumps(m.tool_rounds),
                    )
                    for m in messages
                ],
            )
        return conversation_id

    def branch_conversation(self, message_id: int, title: str) -> int:
        """A new chat named `title` holding the conversation as shown up to and including `message_id` (each
        turn with the answer on screen, not its alternatives), with the chat's settings; the original chat
        is left as it was. Returns the new chat's id."""
        source = self.message(message_id)
        if source is None:
            raise ValueError(f"message {message_id} does not exist")
        chat = self.conversation(source.conversation_id)
        assert chat is not None  # a message's chat is deleted with it (the foreign key cascades)
        shown = [m for m in self.messages(chat.id) if m.id <= message_id]
        return self.add_conversation(title, chat.settings_json, shown)

    @_writes
    def delete_conversation(self, conversation_id: int) -> None:
        with transaction(self.db):
            self.db.execute("DELETE FROM messages WHERE conversation_id = ?", (conversation_id,))
            self.db.execute("DELETE FROM conversations WHERE id = ?", (conversation_id,))

    def _touch(self, conversation_id: int) -> None:
        self.db.execute("UPDATE conversations SET updated_at = ? WHERE id = ?", (time.time(), conversation_id))

    # -- messages ------------------------------------------------------------------------------------------

    _SELECT = (  # alt_index / alt_count through the alt_of index: cheap however long the conversation
        "SELECT m.id, m.conversation_id, m.role, m.content, m.status, m.stats, m.created_at,"
        " CASE WHEN m.alt_of IS NULL THEN 0"
        " ELSE 1 + (SELECT COUNT(*) FROM messages a WHERE a.alt_of = m.alt_of AND a.id < m.id) END,"
        " 1 + (SELECT COUNT(*) FROM messages a WHERE a.alt_of = COALESCE(m.alt_of, m.id)), m.reasoning,"
        " m.tool_rounds"
        " FROM messages m"
    )

    @staticmethod
    def _message(r: tuple) -> Message:
        rounds = _load_rounds(r[10], finished=r[4] != STREAMING)
        return Message(r[0], r[1], r[2], r[3], r[4], _load_stats(r[5]), r[6], r[7], r[8], r[9], rounds)

    def messages(self, conversation_id: int) -> list[Message]:
        """The conversation as shown: each turn with the answer chosen among its alternatives."""
        rows = self.db.execute(
            f"{self._SELECT} WHERE m.conversation_id = ? AND m.hidden = 0 ORDER BY m.id", (conversation_id,)
        )
        return [self._message(r) for r in rows]

    def message(self, message_id: int) -> Message | None:
        r = self.db.execute(f"{self._SELECT} WHERE m.id = ?", (message_id,)).fetchone()
        return self._message(r) if r else None

    def alternatives(self, message_id: int) -> list[int]:
        """Ids of the answers of `message_id`'s turn, oldest first (just [message_id] when it has none)."""
        row = self.db.execute("SELECT COALESCE(alt_of, id) FROM messages WHERE id = ?", (message_id,)).fetchone()
        if row is None:
            return []
        rows = self.db.execute("SELECT id FROM messages WHERE id = ? OR alt_of = ? ORDER BY id", (row[0], row[0]))
        return [r[0] for r in rows]

    @_writes
    def add_alternative(self, message_id: int, status: str = STREAMING) -> Message:
        """A new, empty answer for the turn of answer `message_id`, shown instead of it (which is kept)."""
        old = self.message(message_id)
        if old is None or old.role != "assistant":
            raise ValueError(f"message {message_id} is not an answer")
        group = self.alternatives(message_id)[0]
        now = time.time()
        with transaction(self.db):
            self.db.execute("UPDATE messages SET hidden = 1 WHERE id = ? OR alt_of = ?", (group, group))
            cursor = self.db.execute(
                "INSERT INTO messages (conversation_id, role, content, status, stats, created_at, alt_of)"
                " VALUES (?, 'assistant', '', ?, '{}', ?, ?)",
                (old.conversation_id, status, now, group),
            )
            self._touch(old.conversation_id)
        new = self.message(int(cursor.lastrowid))
        assert new is not None
        return new

    @_writes
    def show_alternative(self, message_id: int) -> None:
        """Show answer `message_id` instead of the other answers of its turn."""
        group = self.alternatives(message_id)[0]
        with transaction(self.db):
            self.db.execute(
                "UPDATE messages SET hidden = (id != ?) WHERE id = ? OR alt_of = ?", (message_id, group, group)
            )

    @_writes
    def add_message(self, conversation_id: int, role: str, content: str, status: str = COMPLETE) -> Message:
        now = time.time()
        with transaction(self.db):
            cursor = self.db.execute(
                "INSERT INTO messages (conversation_id, role, content, status, stats, created_at)"
                " VALUES (?, ?, ?, ?, '{}', ?)",
                (conversation_id, role, content, status, now),
            )
            self._touch(conversation_id)
        return Message(int(cursor.lastrowid), conversation_id, role, content, status, {}, now)

    @_writes
    def update_message(
        self,
        message_id: int,
        *,
        content: str | None = None,
        status: str | None = None,
        stats: dict[str, Any] | None = None,
        reasoning: str | None = None,
        tool_rounds: list[dict[str, Any]] | None = None,
    ) -> None:
        sets, args = [], []
        for column, value in (("content", content), ("status", status), ("reasoning", reasoning)):
            if value is not None:
                sets.append(f"{column} = ?")
                args.append(value)
        if stats is not None:
            sets.append("stats = ?")
            args.append(json.dumps(stats))
        if tool_rounds is not None:
            sets.append("tool_rounds = ?")
            args.append(json.dumps(tool_rounds))
        if not sets:
            return
        with transaction(self.db):
            self.db.execute(f"UPDATE messages SET {', '.join(sets)} WHERE id = ?", (*args, message_id))

    @_writes
    def delete_messages_from(self, conversation_id: int, message_id: int) -> None:
        """Delete `message_id` and every later message of the conversation (regenerate / edit-and-resend)."""
        with transaction(self.db):
            self.db.execute("DELETE FROM messages WHERE conversation_id = ? AND id >= ?", (conversation_id, message_id))
            self._touch(conversation_id)


def _load_stats(text: str | None) -> dict[str, Any]:
    try:
        return checked_stats(json.loads(text or "{}"))
    except ValueError:
        return {}


def _load_rounds(text: str | None, finished: bool) -> list[dict[str, Any]]:
    try:
        return checked_rounds(json.loads(text or "[]"), finished)
    except ValueError:
        return []
