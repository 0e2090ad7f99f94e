"""The sidebar's headings: Pinned above the chats pinned to the top, then dates (Today, Yesterday, Previous 7
days, Previous 30 days, then by month), as the chat apps group a long list of chats: by the day a chat was last
active, in local time. No Qt here."""

from __future__ import annotations

import datetime as dt

PINNED = "Pinned"
TODAY = "Today"
YESTERDAY = "Yesterday"
WEEK = "Previous 7 days"
MONTH = "Previous 30 days"


def group_label(updated_at: float, now: float) -> str:
    """The heading of a chat last active at `updated_at` (seconds since the epoch), seen at `now`. A time in
    the future (a clock set back) counts as today; months of an earlier year carry the year."""
    today = dt.datetime.fromtimestamp(now).date()
    day = dt.datetime.fromtimestamp(updated_at).date()
    days = (today - day).days
    if days <= 0:
        return TODAY
    if days == 1:
        return YESTERDAY
    if days <= 7:
        return WEEK
    if days <= 30:
        return MONTH
    return day.strftime("%B") if day.year == today.year else day.strftime("%B %Y")


def headings(times: list[float], now: float, pinned: int = 0) -> list[str]:
    """For a list whose first `pinned` rows are the pinned chats and the rest sorted most recent first: the
    heading to show above each row, "" where the row continues the group of the row above it."""
    shown: list[str] = []
    previous = None
    for row, updated_at in enumerate(times):
        label = PINNED if row < pinned else group_label(updated_at, now)
        shown.append(label if label != previous else "")
        previous = label
    return shown
