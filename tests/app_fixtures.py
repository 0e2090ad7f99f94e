"""Fixtures for the desktop app tests: tiny model folders the real engine loads, tmp data dirs, screenshots.

The tiny pair here never emits its EOS: the tokenizer's EOS ("</s>") has id 64 while the models' vocabulary
is 0..63, so every answer runs to max_tokens (short in most tests, long where a test needs time to press
Stop or kill the engine). Messages end with "<|end|>" (id 0), an ordinary token, in the chat template.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

VOCAB = 64
CONTEXT = 4096  # room for a long answer in the Stop / crash tests


def make_no_eos_tokenizer():
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<|end|>": 0, "<s>": 1, "<unk>": 2, "<|system|>": 3, "<|user|>": 4, "<|assistant|>": 5}
    vocab.update({f"w{i}": i for i in range(6, VOCAB)})
    vocab["</s>"] = VOCAB  # outside the models' vocabulary: never generated
    backend = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="</s>", unk_token="<unk>")
    tokenizer.chat_template = (
        "{% for m in messages %}<|{{ m['role'] }}|> {{ m['content'] }} <|end|> {% endfor %}"
        "{% if add_generation_prompt %}<|assistant|>{% endif %}"
    )
    return tokenizer


def save_tiny_pair(root: Path) -> tuple[str, str]:
    """A sharpened tiny Llama target and a noisy copy as its draft, saved as model folders with the tokenizer."""
    from conftest import make_tiny_llama, noisy_copy, sharpen

    target = sharpen(make_tiny_llama(0, vocab=VOCAB), 4.0)
    draft = noisy_copy(target)
    folders = []
    for lm, name in ((target, "target"), (draft, "draft")):
        folder = root / name
        lm.model.config.max_position_embeddings = CONTEXT
        lm.model.config.eos_token_id = None  # the EOS comes from the tokenizer alone (id 64)
        lm.model.generation_config.eos_token_id = None
        lm.model.save_pretrained(folder)
        make_no_eos_tokenizer().save_pretrained(folder)
        folders.append(str(folder))
    return folders[0], folders[1]


# ----------------------------------------------------------------------------------------------------------
# App fixtures (import the ones a test module uses: `from app_fixtures import ...`)

ARTIFACTS = Path(__file__).parent / "artifacts"
ENGINE_TIMEOUT_S = 90.0


def tiny_settings(target: str, draft: str, **defaults):
    """App settings pointing at the tiny pair: CPU, one engine thread, a small tree, short answers."""
    from app.settings.schema import AppSettings, ConversationSettings

    conversation = dict(max_tokens=24, temperature=0.8, top_p=0.95)
    conversation.update(defaults)
    return AppSettings(
        target=target,
        draft=draft,
        device="cpu",
        dtype="float32",
        tree_budget=16,
        max_depth=8,
        expand=8,
        engine_threads=1,
        defaults=ConversationSettings(**conversation),
    )


def wait_for(predicate, timeout: float = ENGINE_TIMEOUT_S, what: str = "condition") -> None:
    """Process Qt events until `predicate()` (for module-scoped fixtures, where qtbot is not available)."""
    from PySide6.QtWidgets import QApplication

    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}")
        QApplication.processEvents()
        time.sleep(0.01)


@pytest.fixture(scope="module")
def tiny_models(tmp_path_factory):
    return save_tiny_pair(tmp_path_factory.mktemp("app-models"))


@pytest.fixture()
def app_paths(tmp_path, monkeypatch):
    """Data, config and logs under a tmp folder (through SPECEXEC_DATA_DIR, as a user could set it)."""
    from app.system.paths import DATA_DIR_ENV, AppPaths

    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "specexec-data"))
    return AppPaths.from_env().ensure()


def _running_bridge(models: tuple[str, str]) -> Iterator:
    """A real engine (spawned process) with `models` loaded, behind an EngineBridge; shut down after."""
    from app.engine.bridge import READY, EngineBridge
    from core.engine.client import EngineClient

    settings = tiny_settings(*models)
    bridge = EngineBridge(lambda: EngineClient(torch_threads=1, start_timeout=ENGINE_TIMEOUT_S))
    bridge.start(settings.load_request())
    try:
        wait_for(lambda: bridge.status.state in (READY, "crashed", "failed"), what="the engine to load")
        assert bridge.status.state == READY, bridge.status
        yield bridge
    finally:
        bridge.shutdown()


@pytest.fixture(scope="module")
def shared_bridge(qapp, tiny_models):
    """One real engine (spawned process, tiny pair loaded) shared by the windows of a test module."""
    yield from _running_bridge(tiny_models)


@pytest.fixture(scope="session")
def session_tiny_models(tmp_path_factory):
    """The tiny pair of session_bridge."""
    return save_tiny_pair(tmp_path_factory.mktemp("app-session-models"))


@pytest.fixture(scope="session")
def session_bridge(qapp, session_tiny_models):
    """One real engine (tiny pair loaded) for every module of the session (of an xdist worker) that only
    sends requests through it: a test that kills it, restarts it or loads another pair takes shared_bridge.
    Take it through `pytest_plugins = ["app_fixtures"]`, not by importing it, or each module gets its own."""
    yield from _running_bridge(session_tiny_models)


@pytest.fixture()
def controller(qtbot, tmp_path):
    """A ChatController on a tmp store and a recording bridge (no engine): tests feed it events."""
    from app.chat.controller import ChatController
    from app.settings.schema import AppSettings, BudgetMode, ConversationSettings
    from app.conversations.store import Store

    bridge = recording_bridge_class()()
    store = Store(tmp_path / "c.sqlite3")
    settings = AppSettings(
        defaults=ConversationSettings(system_prompt="Be brief.", budget_mode=BudgetMode.MANUAL, budget=9)
    )
    c = ChatController(store, bridge, settings)
    yield c
    c.detach()
    store.close()


@pytest.fixture()
def quiet_window(qtbot, app_paths):
    """A main window on a tmp data dir with a recording bridge (no engine process)."""
    from app.window.main_window import MainWindow

    bridge = recording_bridge_class()()
    window = MainWindow(app_paths, bridge=bridge, confirm_delete=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    return window


# The window as people see it, and the mouse wheel over it (issue 42) -------------------------------------------


@pytest.fixture()
def styled_window(qtbot, themes, app_paths):
    """A main window with the app's theme and stylesheet (as people see it), no engine process."""
    from app.window.main_window import MainWindow

    window = MainWindow(app_paths, bridge=recording_bridge_class()(), confirm_delete=False)
    qtbot.addWidget(window)
    window.show()
    qtbot.waitExposed(window)
    window.activateWindow()
    return window


def wheel(widget, notches: int = -2) -> None:
    """`notches` turns of the wheel (negative: towards the reader, scrolling down) over `widget`'s centre."""
    from PySide6.QtCore import QPoint, QPointF, Qt
    from PySide6.QtGui import QWheelEvent
    from PySide6.QtWidgets import QApplication

    centre = QPointF(widget.rect().center())
    event = QWheelEvent(
        centre,
        QPointF(widget.mapToGlobal(widget.rect().center())),
        QPoint(0, 0),
        QPoint(0, 120 * notches),
        Qt.MouseButton.NoButton,
        Qt.KeyboardModifier.NoModifier,
        Qt.ScrollPhase.NoScrollPhase,
        False,
    )
    QApplication.sendEvent(widget, event)


def value_controls(root) -> list:
    """The enabled combo boxes and sliders (not scroll bars) shown under `root`: what the wheel must not change."""
    from PySide6.QtWidgets import QAbstractSlider, QComboBox, QScrollBar

    controls = root.findChildren(QComboBox) + [
        s for s in root.findChildren(QAbstractSlider) if not isinstance(s, QScrollBar)
    ]
    return [c for c in controls if c.isVisibleTo(root) and c.isEnabled()]


def control_value(control) -> object:
    from PySide6.QtWidgets import QComboBox

    return control.currentIndex() if isinstance(control, QComboBox) else control.value()


def grab_with_and_without_focus(qtbot, widget):
    """`widget` drawn with the keyboard focus, then without (a test compares them: the focus must show)."""
    from PySide6.QtCore import Qt

    widget.setFocus(Qt.FocusReason.TabFocusReason)
    qtbot.waitUntil(widget.hasFocus)
    with_focus = widget.grab().toImage()
    widget.clearFocus()
    qtbot.waitUntil(lambda: not widget.hasFocus())
    return with_focus, widget.grab().toImage()


def screenshot(widget, name: str) -> Path:
    """Save `widget` as tests/artifacts/<name>.png (git-ignored) and return the path."""
    from PySide6.QtWidgets import QApplication

    for _ in range(3):  # let pending layout requests (message heights) settle, as they would on screen
        QApplication.processEvents()
        time.sleep(0.02)
    ARTIFACTS.mkdir(exist_ok=True)
    path = ARTIFACTS / f"{name}.png"
    assert widget.grab().save(str(path)), f"could not save {path}"
    return path


def process_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    return True


# ----------------------------------------------------------------------------------------------------------
# Engine stand-ins for tests that need no engine process


class FakeClient:
    """Quacks like EngineClient for the bridge's worker: answers each Generate with a few chunks at once."""

    def __init__(self, chunks: tuple[str, ...] = ("Hello", " world")) -> None:
        from collections import deque

        self.chunks = chunks
        self.queue: deque = deque()
        self.calls: list[tuple] = []
        self.threads: set[int] = set()
        self.alive = False
        self.engine_pid = None
        self.fail_next_poll = False

    def _note(self, *call) -> None:
        self.calls.append(call)
        self.threads.add(threading.get_ident())

    def start(self, wait: bool = True, timeout: float | None = None) -> None:
        from core.engine import protocol as P

        self._note("start")
        self.alive, self.engine_pid = True, 4242
        if not wait:  # like EngineClient: the started event comes through poll
            self.queue.append(P.EngineStarted(4242))

    def load(self, target, draft, **settings) -> None:
        from core.engine import protocol as P

        self._note("load", target, draft)
        self.queue += [P.LoadProgress("Loading", fraction=0.5), P.StatusReport("ready", {"budget": 16})]

    def generate(self, messages, request_id: str, **settings) -> str:
        from core.engine import protocol as P

        self._note("generate", request_id, settings)
        for text in self.chunks:
            self.queue.append(P.TokenChunk(request_id, text, (7,)))
            self.queue.append(P.PassStats(request_id, 1, 4, 1.0, 2.0, 333.0, 16))
        self.queue.append(P.Finished(request_id, "eos", generated_tokens=len(self.chunks)))
        return request_id

    def cancel(self, request_id: str) -> None:
        self._note("cancel", request_id)

    def status(self) -> None:
        self._note("status")

    def restart(self, reload: bool = True, wait: bool = True) -> None:
        self._note("restart")

    def shutdown(self, timeout: float = 5.0) -> None:
        self._note("shutdown")
        self.alive = False

    def poll(self, timeout: float = 0.0):
        if self.fail_next_poll:
            self.fail_next_poll = False
            raise RuntimeError("poll exploded")
        return self.queue.popleft() if self.queue else None


def recording_bridge_class():
    """An EngineBridge that records what the UI asks for and starts no thread or process; tests feed it
    events with `handle_events`."""
    from app.engine.bridge import STARTING, EngineBridge

    class RecordingBridge(EngineBridge):
        def __init__(self) -> None:
            super().__init__()
            self.calls: list[tuple] = []
            self.counts: list[tuple] = []  # count_tokens requests (apart: they come whenever the typing pauses)

        def start(self, load=None) -> None:
            self.calls.append(("start", load))
            self._load_pending = load is not None
            self._set(state=STARTING)

        def load(self, load) -> None:
            self.calls.append(("load", load))

        def generate(self, messages, request_id=None, **settings) -> str:
            request_id = request_id or self.new_request_id()
            self.calls.append(("generate", request_id, list(messages), settings))
            self.in_flight.add(request_id)
            return request_id

        def count_tokens(self, messages, **settings) -> str:
            request_id = f"c{len(self.counts)}"
            self.counts.append((request_id, list(messages), settings))
            self.counting.add(request_id)
            return request_id

        def cancel(self, request_id: str) -> None:
            self.calls.append(("cancel", request_id))

        def restart(self) -> None:
            self.calls.append(("restart",))

    return RecordingBridge


def wizard_loading_the_builtin_pair(qtbot, models_dir: Path, monkeypatch):
    """The first-run wizard on the 12 GB GPU fixture with the built-in pair chosen: it needs no download, so
    the wizard is on its Done page, which has asked its recording bridge to load it. (wizard, bridge)."""
    from app.models.wizard.wizard import DONE, FirstRunWizard
    from app.settings.schema import AppSettings

    monkeypatch.setenv("SPECEXEC_HW_FIXTURE", str(Path(__file__).parent / "fixtures" / "hw" / "gpu12-ram16-pcie3.json"))
    bridge = recording_bridge_class()()
    wizard = FirstRunWizard(AppSettings(), models_dir, bridge=bridge)
    qtbot.addWidget(wizard)
    wizard.show()
    qtbot.waitUntil(lambda: wizard.state.recommendation is not None, timeout=20000)
    wizard.next()
    wizard.choose_page.pairs.select("builtin")
    wizard.next()
    assert wizard.currentId() == DONE
    return wizard, bridge


def ready(bridge) -> None:
    """A recording bridge's engine, started and ready (budget 16, 8,192 tokens of context)."""
    from core.engine import protocol as P

    bridge.handle_events([P.EngineStarted(pid=1), P.StatusReport("ready", {"budget": 16, "max_context": 8192})])


def answered(
    window,
    question: str = "first question",
    answer: str = "an answer",
    generated: int = 3,
    reason: str = "eos",
    prompt_tokens: int = 10,
) -> None:
    """Send `question` in `window` and finish its answer through the recording bridge (no engine process), as
    the engine ends it: `reason` "eos", or "length" (cut off at the longest answer or the context's end)."""
    from core.engine import protocol as P

    window.send(question)
    request_id = window.bridge.calls[-1][1]
    window.bridge.handle_events(
        [
            P.TokenChunk(request_id, answer, (7,)),
            P.PassStats(request_id, 1, 4, 1.0, 2.0, 333.0, 16),
            P.Finished(request_id, reason, prompt_tokens=prompt_tokens, generated_tokens=generated),
        ]
    )


# ----------------------------------------------------------------------------------------------------------
# Themes and contrast measured on pixels (issue 25)


@pytest.fixture()
def themes(qapp):
    """A ThemeManager on the test application (undone afterwards). Text is drawn without antialiasing while
    it lives, so every text pixel has its exact colour and contrast can be measured on the pixels; list this
    fixture before the one that builds the widgets.

    The windows the test made are deleted before the stylesheet goes: one deleted after the application's
    stylesheet was dropped and another set (pytest-qt deletes them later, in the next test's event loop) left
    Qt's style-sheet style with a dangling widget, and the next restyle crashed the process (a theme or text
    size switch; the app itself never drops its stylesheet)."""
    from PySide6.QtCore import QCoreApplication, QEvent
    from PySide6.QtGui import QFont, QPalette
    from PySide6.QtWidgets import QApplication

    from app.settings.schema import Theme
    from app.theme.manager import TEXT_SCALE_PROPERTY, ThemeManager

    style, font = qapp.style().name(), qapp.font()
    crisp = QFont(font)
    crisp.setStyleStrategy(QFont.StyleStrategy.NoAntialias)
    qapp.setFont(crisp)
    qapp.setStyle("Fusion")
    before = set(QApplication.topLevelWidgets())
    theme = ThemeManager(qapp, Theme.LIGHT)
    yield theme
    for widget in set(QApplication.topLevelWidgets()) - before:
        widget.close()
        widget.deleteLater()
    QCoreApplication.sendPostedEvents(None, QEvent.Type.DeferredDelete)
    qapp.setProperty(TEXT_SCALE_PROPERTY, None)  # the text size back to the system's with the font
    qapp.setFont(font)
    qapp.setStyleSheet("")
    qapp.styleHints().unsetColorScheme()
    qapp.setStyle(style)
    qapp.setPalette(QPalette())
    theme.deleteLater()


def relative_luminance(color) -> float:
    """WCAG 2 relative luminance of a QColor."""

    def channel(value: float) -> float:
        return value / 12.92 if value <= 0.03928 else ((value + 0.055) / 1.055) ** 2.4

    return 0.2126 * channel(color.redF()) + 0.7152 * channel(color.greenF()) + 0.0722 * channel(color.blueF())


def contrast_ratio(a, b) -> float:
    high, low = sorted((relative_luminance(a), relative_luminance(b)), reverse=True)
    return (high + 0.05) / (low + 0.05)


MIN_INK_PIXELS = 8  # a colour drawn on fewer pixels is an edge or a speck, not text
LINE_RUN_PX = 24  # a colour running this far in a straight line is a rule or a border, not a letter
AREA_SHARE = 0.5  # a colour whose pixels are mostly inside its own area is a background (a chip, a card)


def _most_common_beside(crop: np.ndarray, mine: np.ndarray, colour: int) -> int | None:
    """The colour most often found left, right, above or below a pixel of `colour` (ties: the one met first
    reading the crop row by row, each pixel's neighbours in the order right, left, below, above)."""
    padded = np.pad(crop, 1, constant_values=-1)  # -1: outside the crop, never a colour
    rows, cols = np.nonzero(mine)
    order = np.arange(rows.size) * 4
    values, seen = [], []
    for k, (dx, dy) in enumerate(((1, 0), (-1, 0), (0, 1), (0, -1))):
        around = padded[rows + 1 + dy, cols + 1 + dx]
        keep = (around != -1) & (around != colour)
        values.append(around[keep])
        seen.append(order[keep] + k)
    values, seen = np.concatenate(values), np.concatenate(seen)
    if values.size == 0:
        return None
    colours, inverse, counts = np.unique(values, return_inverse=True, return_counts=True)
    first = np.full(colours.size, np.iinfo(np.int64).max)
    np.minimum.at(first, inverse, seen)
    best = np.flatnonzero(counts == counts.max())
    return int(colours[best[np.argmin(first[best])]])


def _longest_run(mine: np.ndarray) -> int:
    """The longest straight run of True, along rows or columns."""
    longest = 0
    for grid in (mine, mine.T):
        edges = np.diff(np.pad(grid, ((0, 0), (1, 1))).astype(np.int8), axis=1)
        starts, ends = np.nonzero(edges == 1)[1], np.nonzero(edges == -1)[1]  # row by row, so they pair up
        if starts.size:
            longest = max(longest, int((ends - starts).max()))
    return longest


def _classify(crop: np.ndarray, colour: int) -> tuple[str, int | None]:
    """("area" | "line" | "ink", the colour most often beside it) for one colour of a crop (rows of QRgb
    values, as QImage.pixel gives them)."""
    mine = crop == colour
    padded = np.pad(crop, 1, constant_values=-1)
    inside = int(
        (
            mine
            & (padded[1:-1, 2:] == colour)
            & (padded[1:-1, :-2] == colour)
            & (padded[2:, 1:-1] == colour)
            & (padded[:-2, 1:-1] == colour)
        ).sum()
    )
    around_most = _most_common_beside(crop, mine, colour)
    if inside >= AREA_SHARE * int(mine.sum()):
        return "area", around_most
    return ("line" if _longest_run(mine) >= LINE_RUN_PX else "ink"), around_most


def grab_pixels(window) -> tuple[np.ndarray, float]:
    """`window` as drawn, after the pending events: its pixels as QRgb values (rows of 0xAARRGGBB, what
    QImage.pixel gives) and the device pixel ratio. One grab serves every region measured on it."""
    from PySide6.QtGui import QImage
    from PySide6.QtWidgets import QApplication

    for _ in range(3):
        QApplication.processEvents()
    image = window.grab().toImage()
    scale = image.devicePixelRatio()
    image = image.convertToFormat(QImage.Format.Format_ARGB32)
    rows = np.frombuffer(image.constBits(), dtype=np.uint32, count=image.height() * image.bytesPerLine() // 4)
    rows = rows.reshape(image.height(), image.bytesPerLine() // 4)[:, : image.width()].astype(np.int64)
    return rows, scale


def text_contrast(window, widget, inset: int = 0, grabbed: tuple[np.ndarray, float] | None = None) -> float:
    """The lowest contrast of any text inside `widget` (a scroll area: its viewport), `inset` pixels in from
    its edges, as drawn in `window` (see region_contrast)."""
    from PySide6.QtWidgets import QAbstractScrollArea

    target = widget.viewport() if isinstance(widget, QAbstractScrollArea) else widget
    return region_contrast(window, target, target.rect().adjusted(inset, inset, -inset, -inset), grabbed)


def region_contrast(window, widget, rect, grabbed: tuple[np.ndarray, float] | None = None) -> float:
    """The lowest contrast between a text colour in `rect` (in `widget`'s coordinates) and the colour around
    it, measured on the pixels of `window` as drawn (`grabbed`: grab_pixels(window), when several regions
    are measured on one drawing). Colours are sorted into backgrounds (areas: the widget's own, a code
    chip's), rules and borders (long straight lines: not text) and ink (letters: every other colour on at
    least MIN_INK_PIXELS pixels); each ink colour is compared with the colour most often beside it. Draw
    without antialiasing (the `themes` fixture), so letters keep their exact colour. No text at all:
    infinity."""
    from PySide6.QtCore import QRect
    from PySide6.QtGui import QColor

    pixels, scale = grabbed if grabbed is not None else grab_pixels(window)
    area = QRect(widget.mapTo(window, rect.topLeft()), rect.size())
    ys = (np.arange(area.top(), area.bottom() + 1) * scale).astype(np.int64)
    xs = (np.arange(area.left(), area.right() + 1) * scale).astype(np.int64)
    crop = np.zeros((ys.size, xs.size), dtype=np.int64)  # outside the image: 0, as QImage.pixel answers
    inside_y = (ys >= 0) & (ys < pixels.shape[0])
    inside_x = (xs >= 0) & (xs < pixels.shape[1])
    crop[np.ix_(inside_y, inside_x)] = pixels[np.ix_(ys[inside_y], xs[inside_x])]
    if crop.size == 0:
        return float("inf")
    colours, first, counts = np.unique(crop, return_index=True, return_counts=True)
    most = np.flatnonzero(counts == counts.max())
    background = colours[most[np.argmin(first[most])]]  # ties: the colour met first, row by row
    ratios = []
    for colour, count in zip(colours.tolist(), counts.tolist()):
        if colour == background or count < MIN_INK_PIXELS:
            continue
        kind, beside = _classify(crop, colour)
        if kind == "ink" and beside is not None:
            ratios.append(contrast_ratio(QColor(colour), QColor(beside)))
    return min(ratios, default=float("inf"))
