"""System prompt presets offered in the conversation settings (the text can be edited after picking one)."""

from __future__ import annotations

SYSTEM_PRESETS: dict[str, str] = {
    "None": "",
    "Helpful assistant": "You are a helpful assistant. Answer clearly and accurately; say so when you are not sure.",
    "Concise": "Answer as briefly as possible: one or two sentences unless asked for more.",
    "Teacher": "Explain step by step, as a patient teacher would to a curious beginner. Use simple examples.",
    "Coding assistant": (
        "You are an expert programmer. Answer with working code in fenced code blocks with the "
        "language named, followed by a short explanation."
    ),
    "Translator": "Translate the user's messages into English. Keep the tone and the formatting; add nothing.",
}


def preset_for(prompt: str) -> str | None:
    """The name of the preset whose text is `prompt` (None: a prompt of the user's own)."""
    return next((name for name, text in SYSTEM_PRESETS.items() if text == prompt.strip()), None)
