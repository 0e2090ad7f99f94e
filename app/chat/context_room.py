"""Room for a message longer than the context window ("Make room"): the context length that holds it, and what
a failed answer says to do.

A document added to a message is the usual cause: a ten-page PDF is about 6,000 tokens, and a model is loaded
with room for 4,096 unless Settings ask for more. Where the model itself goes further (its own limit, which the
engine reports as StatusReport.models["model_context"]), the answer's error offers to load it again with a
context that holds the message, as Jan's "Increase context size" does, instead of sending the person to
Settings to guess a number; where it does not, the words say that only a shorter message helps. A message
the engine counted too long before it was sent gets the same offer beside the note under the message box.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from app.settings.schema import CONTEXT_LENGTHS
from core.planning.residency import context_needed, context_to_hold
from core.planning.sizes import format_bytes

SHORTEN = (
    "shorten the message (of a file added to it, keep the part you need) or the system prompt, or start a new chat"
)
SHORTEN_IT = "Shorten it (of a file added to it, keep the part you need)."  # said under the message box


@dataclass(frozen=True)
class Room:
    """A context length that holds a message: `tokens`, `more_bytes`, the memory it sets aside beyond the
    context in force (0: not known), and whether that memory is the graphics card's (`on_gpu`), where it
    leaves less room for the big model's layers: an offloaded model then streams more of them per pass."""

    tokens: int
    more_bytes: int = 0
    on_gpu: bool = False

    def words(self) -> str:
        """The offer in plain words, the memory it costs where known."""
        memory = ""
        if self.more_bytes:
            where = "of the graphics card's memory aside, so answers may come slower" if self.on_gpu else "memory aside"
            memory = f" (it sets about {format_bytes(self.more_bytes)} more {where})"
        return f"Make room loads the model again with room for {self.tokens:,} tokens{memory}"


def room_for(prompt_tokens: int, max_tokens: int, models: dict[str, Any], refused: int = 0) -> Room | None:
    """The shortest context length in Settings' choices that holds a `prompt_tokens` prompt and the start of its
    answer (`max_tokens`, at most residency.ANSWER_ROOM), capped at the models' own limit; None where they
    cannot hold it, the prompt's length is not known, the engine does not say how far its models go (a
    server's), or the models could not run with that much already (`refused`: the length a Make room failed
    with, 0: none), where a second try would only fail again."""
    ceiling = int(models.get("model_context") or 0)
    in_force = int(models.get("max_context") or 0)
    tokens = context_to_hold(prompt_tokens, max_tokens, in_force, ceiling, CONTEXT_LENGTHS)
    if tokens is None or (refused and tokens >= refused):
        return None
    per_token = int(models.get("context_bytes_per_token") or 0)
    on_gpu = str(models.get("device") or "").startswith("cuda")
    return Room(tokens, per_token * (tokens - in_force) if in_force else 0, on_gpu)


def refused_in_the_way(prompt_tokens: int, max_tokens: int, models: dict[str, Any], refused: int) -> bool:
    """Whether only the `refused` length (a Make room that failed) keeps room_for from offering room."""
    return bool(refused) and room_for(prompt_tokens, max_tokens, models) is not None


def could_not_run(tokens: int) -> str:
    """What is left to do after the models could not run with room for `tokens` (a Make room that failed)."""
    return f"the model could not run with room for {tokens:,} tokens: {SHORTEN}"


def too_long_hint(
    room: Room | None, prompt_tokens: int, max_tokens: int, models: dict[str, Any], remote: bool, refused: int = 0
) -> str:
    """What a person can do about a message longer than the context: Make room where it helps (`room`, what
    room_for offered); where the model cannot keep that much, or could not run with it (`refused`), say so and
    leave shortening; for a server, whose context the app does not set, shortening too."""
    if remote:
        return SHORTEN
    if room is not None:
        return f"{room.words()}; or {SHORTEN}"
    if refused_in_the_way(prompt_tokens, max_tokens, models, refused):
        return could_not_run(refused)
    ceiling = int(models.get("model_context") or 0)
    if ceiling and prompt_tokens > 0 and context_needed(prompt_tokens, max_tokens) > ceiling:
        return f"this model keeps at most {ceiling:,} tokens of a chat: {SHORTEN}"
    return f"{SHORTEN}; Menu > Settings > Context length lets the model keep more in mind, up to what it reads"


def draft_too_long(
    room: Room | None,
    prompt_tokens: int,
    max_tokens: int,
    models: dict[str, Any],
    refused: int = 0,
    remote: bool = False,
) -> str:
    """What the message box says under a message too long for the model before it is sent (`prompt_tokens`,
    the engine's count of the prompt sending it would make): the Make room and send beside it where `room` is
    offered (room_for's, as for too_long_hint; the button's tooltip says what it costs), else why not: the
    models could not run with that length (`refused`), or cannot keep that much, so it must be shorter. A
    server's model (`remote`, counted by the server) keeps what the server set; it refuses a message whose
    answer of up to `max_tokens` would pass that too, so a shorter longest answer helps there as well."""
    limit = int(models.get("max_context") or 0)
    if remote:
        if prompt_tokens < limit:
            return (
                f"Too long for the server's model: about {prompt_tokens:,} tokens and an answer of up to "
                f"{max_tokens:,} pass the {limit:,} it keeps. {SHORTEN_IT[:-1]}, or choose a shorter Longest "
                "answer in the chat's settings."
            )
        return f"Too long for the server's model: about {prompt_tokens:,} tokens, and it keeps {limit:,}. {SHORTEN_IT}"
    said = f"Too long for the model: about {prompt_tokens:,} tokens, and it keeps {limit:,} in mind now"
    if room is not None:
        return f"{said}. Make room and send, or shorten it."
    if refused_in_the_way(prompt_tokens, max_tokens, models, refused):
        return f"{said}, and it could not run with room for {refused:,}. {SHORTEN_IT}"
    ceiling = int(models.get("model_context") or 0)
    if ceiling and context_needed(prompt_tokens, max_tokens) > ceiling:
        return (
            f"Too long for this model: about {prompt_tokens:,} tokens, and it keeps at most {ceiling:,}. {SHORTEN_IT}"
        )
    return f"{said}. Shorten it, or let the model keep more in Menu > Settings > Context length."
