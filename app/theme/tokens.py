"""The look in one place: a palette of colour ramps, then colours named by the role they play, resolved per
theme (light, dark), plus type and spacing steps.

Widgets and the stylesheet read role names only (`colors.muted_text`, `@muted_text` in resources/style.qss),
never a hex value, so a theme switch re-resolves every screen at once. `current()` picks the roles from the
application palette, so code that draws (rendered chat HTML, the pass chart, icons) needs no global state of
its own: the palette that ThemeManager sets is the theme.

Text roles are chosen to reach WCAG AA (4.5:1) on the backgrounds they are used on; tests measure it on the
rendered pixels of every screen (tests/test_app_contrast.py).
"""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass

from PySide6.QtGui import QColor, QPalette

# -- the palette: ramps, named by hue and lightness (50 lightest ... 950 darkest) ----------------------------
GRAY = {
    0: "#ffffff",
    50: "#f6f7f9",
    100: "#eef0f3",
    150: "#e4e7eb",
    200: "#d5d9e0",
    300: "#b9bfc8",
    400: "#8f96a1",
    500: "#6b7380",
    600: "#545b66",
    700: "#3b4048",
    750: "#33363d",
    800: "#2a2c31",
    850: "#222428",
    900: "#1b1c20",
    950: "#131417",
}
BLUE = {50: "#eaf1fe", 100: "#d6e4fd", 300: "#8ab4ff", 400: "#5b93f5", 600: "#2563eb", 700: "#1d4ed8", 900: "#1e3052"}
GREEN = {300: "#6fd08c", 700: "#1a7f37"}
AMBER = {50: "#fff6db", 300: "#e9c46a", 400: "#e0b050", 700: "#8a5a00", 800: "#5c4400", 900: "#3a2f12"}
RED = {50: "#fdecea", 300: "#ff9b91", 600: "#d1453b", 700: "#b42318", 900: "#3d2222"}


@dataclass(frozen=True)
class Colors:
    """Colours by role. `*_text` roles are for text on the background named beside them."""

    dark: bool
    window: str  # the sidebar and dialogs' frame
    view: str  # the chat column, lists, text fields
    surface: str  # cards, the composer
    surface_alt: str  # hover, pressed, the code-card header
    border: str  # outlines of cards and fields
    divider: str  # thin lines between regions
    text: str  # body text on window / view / surface
    muted_text: str  # secondary text (times, hints, sizes) on the same backgrounds
    placeholder_text: str
    disabled_text: str  # exempt from the contrast rule, still readable
    accent: str  # primary buttons, focus, progress
    accent_hover: str  # a primary button under the pointer
    on_accent: str  # text and icons on `accent`
    link: str  # links and link-like buttons on view / window
    selected: str  # background of a selected row or card
    selected_border: str
    user_bubble: str  # your messages
    code_background: str
    code_border: str
    danger: str  # destructive buttons' background
    danger_hover: str
    on_danger: str
    danger_text: str  # error text on view / window
    failed_background: str  # a failed answer's card
    warning_background: str  # the banner
    warning_border: str
    warning_text: str
    success_text: str  # "fits" on a card
    caution_text: str  # "tight" on a card
    scrollbar: str
    scrollbar_hover: str
    chart_bar: str
    toast_background: str  # transient feedback over the chat (app/window/toast.py)
    toast_text: str


LIGHT = Colors(
    dark=False,
    window=GRAY[50],
    view=GRAY[0],
    surface=GRAY[0],
    surface_alt=GRAY[100],
    border=GRAY[200],
    divider=GRAY[150],
    text="#1f2328",
    muted_text=GRAY[600],
    placeholder_text="#5f6670",
    disabled_text=GRAY[400],
    accent=BLUE[600],
    accent_hover=BLUE[700],
    on_accent=GRAY[0],
    link=BLUE[700],
    selected=BLUE[50],
    selected_border=BLUE[600],
    user_bubble="#edf1f7",
    code_background=GRAY[50],
    code_border=GRAY[200],
    danger=RED[700],
    danger_hover="#912018",
    on_danger=GRAY[0],
    danger_text=RED[700],
    failed_background=RED[50],
    warning_background=AMBER[50],
    warning_border=AMBER[300],
    warning_text=AMBER[800],
    success_text="#17732f",
    caution_text=AMBER[700],
    scrollbar=GRAY[300],
    scrollbar_hover=GRAY[400],
    chart_bar=BLUE[600],
    toast_background=GRAY[800],
    toast_text=GRAY[0],
)

DARK = Colors(
    dark=True,
    window=GRAY[900],
    view=GRAY[850],
    surface=GRAY[800],
    surface_alt=GRAY[750],
    border=GRAY[700],
    divider=GRAY[800],
    text="#e8e9ec",
    muted_text="#a3a9b3",
    placeholder_text="#9198a2",
    disabled_text=GRAY[500],
    accent=BLUE[600],
    accent_hover=BLUE[700],
    on_accent=GRAY[0],
    link=BLUE[300],
    selected=BLUE[900],
    selected_border=BLUE[400],
    user_bubble="#2c3441",
    code_background=GRAY[950],
    code_border=GRAY[700],
    danger=RED[700],
    danger_hover="#912018",
    on_danger=GRAY[0],
    danger_text=RED[300],
    failed_background=RED[900],
    warning_background=AMBER[900],
    warning_border="#6b5520",
    warning_text="#ffe3a0",
    success_text=GREEN[300],
    caution_text=AMBER[400],
    scrollbar="#4a4e56",
    scrollbar_hover="#60656e",
    chart_bar=BLUE[400],
    toast_background=GRAY[100],
    toast_text="#1f2328",
)


@dataclass(frozen=True)
class TypeScale:
    """Font sizes as factors of the application font (so the user's font size setting still counts)."""

    body: float = 1.1  # the chat's messages: a little larger than the controls around them
    small: float = 0.9  # times, hints, the status bar
    title: float = 1.2  # the conversation's title, card titles
    headline: float = 1.9  # the empty chat's greeting
    body_line_height: int = 150  # per cent of the font's height, in the chat


@dataclass(frozen=True)
class Spacing:
    """Spacing steps in pixels."""

    xs: int = 4
    s: int = 8
    m: int = 12
    l: int = 16  # noqa: E741 - a step name, read beside xs / s / m / xl
    xl: int = 24


TYPE = TypeScale()
SPACE = Spacing()
READABLE_COLUMN_PX = 760  # the conversation column's widest text (about 80-90 characters)


def for_palette(palette: QPalette) -> Colors:
    """The roles of the theme a palette belongs to (dark when its view background is dark)."""
    return DARK if palette.color(QPalette.ColorRole.Base).lightness() < 128 else LIGHT


def current() -> Colors:
    """The roles of the theme in use: the application palette's (ThemeManager sets it). A widget's own
    palette is not asked: a stylesheet's transparent background makes it look dark in any theme."""
    from PySide6.QtGui import QGuiApplication

    return for_palette(QGuiApplication.palette())


def qpalette(colors: Colors) -> QPalette:
    """A QPalette from the roles, for widgets the stylesheet does not reach (menus, tooltips, native parts)."""
    R = QPalette.ColorRole  # noqa: N806 - short, so the table below reads as a table
    roles = {
        R.Window: colors.window,
        R.WindowText: colors.text,
        R.Base: colors.view,
        R.AlternateBase: colors.surface_alt,
        R.ToolTipBase: colors.surface,
        R.ToolTipText: colors.text,
        R.PlaceholderText: colors.placeholder_text,
        R.Text: colors.text,
        R.Button: colors.surface,
        R.ButtonText: colors.text,
        R.BrightText: colors.danger_text,
        R.Highlight: colors.accent,
        R.HighlightedText: colors.on_accent,
        R.Link: colors.link,
        R.LinkVisited: colors.link,
        R.Light: colors.surface_alt,
        R.Midlight: colors.divider,
        R.Mid: colors.border,
        R.Dark: colors.scrollbar_hover,
        R.Shadow: "#000000",
    }
    palette = QPalette()
    for role, color in roles.items():
        palette.setColor(role, QColor(color))
    for role in (R.Text, R.ButtonText, R.WindowText):
        palette.setColor(QPalette.ColorGroup.Disabled, role, QColor(colors.disabled_text))
    return palette


_TOKEN = re.compile(r"@([a-z_]+)")


def fill_stylesheet(template: str, colors: Colors, base_pt: float, images: dict[str, str] | None = None) -> str:
    """resources/style.qss with every `@role` replaced by its colour, every `@<step>_pt` (body_pt, small_pt,
    title_pt, headline_pt) by a point size relative to `base_pt`, the application font's, and every
    `@<name>_image` by the file of `images[name]` (an icon in the theme's colour); an unknown name fails loudly."""
    values = {f.name: getattr(colors, f.name) for f in dataclasses.fields(colors) if f.name != "dark"}
    values.update({f"{name}_image": path for name, path in (images or {}).items()})
    for step in ("body", "small", "title", "headline"):
        values[f"{step}_pt"] = f"{base_pt * getattr(TYPE, step):.1f}pt"

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            raise KeyError(f"style.qss names an unknown token @{name}; known: {', '.join(values)}")
        return values[name]

    return _TOKEN.sub(replace, template)
