"""Chat settings as a panel at the window's right, as in LM Studio and Jan: the system prompt (from a preset or
typed), how varied answers are, their longest length; under Advanced: top-p, top-k, repetition penalty, seed, the
method and the tree budget; and a switch per MCP server whose tools this chat may use (all by default). No OK button: each change is saved to the chat at once and applies to its next
answer ("Reset to defaults" undoes them all).

The panel shows one chat's settings; the window gives it another chat's with `set_settings`, which emits
nothing (a system prompt still being typed is saved to its own chat first), and saves what `changed` carries
into the chat it names.
"""

from __future__ import annotations

import dataclasses

from PySide6.QtCore import QEvent, Qt, QTimer, Signal
from PySide6.QtGui import QKeyEvent
from PySide6.QtWidgets import (
    QCheckBox,
    QFrame,
    QHBoxLayout,
    QPlainTextEdit,
    QToolButton,
    QVBoxLayout,
    QWidget,
)

from app.chat.message_words import WORDS_PER_TOKEN
from app.settings.fields import ChoiceField, OptionalNumberField, SliderField, StepsField, help_line, scrolled_body
from app.settings.presets import SYSTEM_PRESETS, preset_for
from app.settings.schema import BudgetMode, ConversationSettings, Method
from app.theme.icons import themed
from app.theme.manager import text_scale
from app.theme.tokens import SPACE
from app.window.buttons import LINK, button
from app.window.wheel_guard import NoWheelComboBox
from app.window.labels import Label

PANEL_WIDTH_PX = 340  # at the system's text size; it grows with the app's (Settings > Text size)
ANSWER_LENGTHS = (64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768)
TREE_BUDGETS = (16, 32, 64, 128, 256, 512, 1024, 2048, 4096)
PROMPT_SAVE_MS = 400  # typing in the system prompt is saved once the typing pauses

METHOD_CHOICES = (
    ("Automatic (fastest here)", Method.AUTO),
    ("SpecExec (the draft guesses ahead)", Method.SPECEXEC),
    ("SpecInfer", Method.SPECINFER),
    ("Plain decoding (no draft)", Method.SEQUENTIAL),
)
AUTOMATIC = 0  # the tree budget's "Automatic" in its list


def _temperature_words(value: float) -> str:
    if value == 0:
        return "0 (always the likeliest word)"
    return f"{value:.2f}"


def _length_words(tokens: int) -> str:
    return f"{tokens:,} tokens (about {round(tokens * WORDS_PER_TOKEN, -1 if tokens >= 100 else 0):,.0f} words)"


class ChatSettingsPanel(QFrame):
    changed = Signal(object, object)  # the chat's id (None: no chat yet), its ConversationSettings; after each edit
    reset_requested = Signal()  # the window answers with the defaults (set_settings, then changed)
    closed = Signal()

    def __init__(
        self, settings: ConversationSettings, conversation_id: int | None = None, parent: QWidget | None = None
    ) -> None:
        super().__init__(parent)
        self.conversation_id = conversation_id
        self.setObjectName("chatSettingsPanel")
        self.setAccessibleName("Chat settings")
        self._fit_text_size()
        self._settings = settings.validated()
        outer = QVBoxLayout(self)
        outer.setContentsMargins(0, 0, 0, 0)
        outer.setSpacing(0)
        top = QHBoxLayout()
        top.setContentsMargins(SPACE.l, SPACE.m, SPACE.s, SPACE.s)
        title = Label("Chat settings")
        title.setObjectName("panelTitle")
        self.close_button = QToolButton()
        self.close_button.setObjectName("panelClose")
        self.close_button.setAccessibleName("Close chat settings")
        self.close_button.setToolTip("Close")
        themed(self.close_button, "x", "muted_text", size=16)
        self.close_button.clicked.connect(self.closed)
        top.addWidget(title, 1)
        top.addWidget(self.close_button)
        outer.addLayout(top)
        scroll, body = scrolled_body("panelScroll", "panelBody")
        column = QVBoxLayout(body)
        column.setContentsMargins(SPACE.l, SPACE.xs, SPACE.l, SPACE.l)
        column.setSpacing(SPACE.l)
        outer.addWidget(scroll, 1)

        s = self._settings
        prompt_box = QWidget()
        prompt_column = QVBoxLayout(prompt_box)
        prompt_column.setContentsMargins(0, 0, 0, 0)
        prompt_column.setSpacing(SPACE.xs)
        prompt_top = QHBoxLayout()
        prompt_label = Label("System prompt")
        prompt_label.setObjectName("fieldName")
        self.preset = NoWheelComboBox()
        self.preset.setAccessibleName("System prompt preset")
        self.preset.addItems(list(SYSTEM_PRESETS))
        self.preset.addItem("Custom")
        self.preset.activated.connect(self._preset_chosen)
        prompt_top.addWidget(prompt_label, 1)
        prompt_top.addWidget(self.preset)
        self.system_prompt = QPlainTextEdit()
        self.system_prompt.setAccessibleName("System prompt")
        self.system_prompt.setPlaceholderText(
            "What the model should know or how it should answer, for example: Answer briefly."
        )
        self.system_prompt.setTabChangesFocus(True)
        self.system_prompt.setFixedHeight(96)
        prompt_label.setBuddy(self.system_prompt)
        self._prompt_timer = QTimer(self)
        self._prompt_timer.setSingleShot(True)
        self._prompt_timer.setInterval(PROMPT_SAVE_MS)
        self._prompt_timer.timeout.connect(self._emit)
        self.system_prompt.textChanged.connect(self._prompt_typed)
        prompt_column.addLayout(prompt_top)
        prompt_column.addWidget(self.system_prompt)
        prompt_column.addWidget(help_line("Sent before every message of this chat."))
        column.addWidget(prompt_box)

        self.temperature = SliderField(
            "&Temperature",
            0.0,
            2.0,
            s.temperature,
            step=0.05,
            words=_temperature_words,
            help_text="How varied answers are. Low: focused, the same each time; high: "
            "more surprising, and more often wrong.",
        )
        self.top_p = SliderField(
            "Top-&p",
            0.01,
            1.0,
            s.top_p,
            step=0.05,
            help_text="Choose only among the likeliest words that make up this share of the odds (1: all of them).",
        )
        self.max_tokens = StepsField(
            "&Longest answer",
            ANSWER_LENGTHS,
            s.max_tokens,
            _length_words,
            help_text="Answers stop after this many tokens.",
        )
        for field in (self.temperature, self.max_tokens):  # plain words first; top-p under Advanced (issue 42)
            column.addWidget(field)
        self.tools_box = QWidget()  # shown once the window names the running MCP servers (set_tool_servers)
        tools_column = QVBoxLayout(self.tools_box)
        tools_column.setContentsMargins(0, 0, 0, 0)
        tools_column.setSpacing(SPACE.xs)
        tools_label = Label("Tools")
        tools_label.setObjectName("fieldName")
        tools_column.addWidget(tools_label)
        self.tool_switch_column = QVBoxLayout()
        tools_column.addLayout(self.tool_switch_column)
        tools_column.addWidget(help_line("The MCP servers whose tools the model may call in this chat."))
        self.tool_switches: dict[str, QCheckBox] = {}
        self.tools_box.hide()
        column.addWidget(self.tools_box)

        self.advanced = QToolButton()  # a disclosure: folded, it takes one line and leaves no empty box
        self.advanced.setObjectName("disclosure")
        self.advanced.setText("Advanced")
        self.advanced.setCheckable(True)
        self.advanced.setAccessibleName("Advanced settings")
        self.advanced.setToolButtonStyle(Qt.ToolButtonStyle.ToolButtonTextBesideIcon)
        self._advanced_icon = themed(self.advanced, "chevron-right", size=16)
        column.addWidget(self.advanced, 0, Qt.AlignmentFlag.AlignLeft)
        self.advanced_box = QWidget()
        self.advanced_box.setObjectName("advancedSettings")
        advanced = QVBoxLayout(self.advanced_box)
        advanced.setContentsMargins(0, 0, 0, 0)
        advanced.setSpacing(SPACE.l)
        self.top_k = SliderField(
            "Top-&k",
            0,
            200,
            s.top_k,
            scale=1,
            words=lambda v: "Off" if v == 0 else f"{v:.0f}",
            help_text="Choose only among this many likeliest words (Off: no limit).",
        )
        self.repetition_penalty = SliderField(
            "&Repetition penalty",
            1.0,
            2.0,
            s.repetition_penalty,
            step=0.05,
            words=lambda v: "Off" if v == 1.0 else f"{v:.2f}",
            help_text="Above Off, words already used become less likely: fewer loops, sometimes odder words.",
        )
        self.seed = OptionalNumberField(
            "See&d",
            "Random",
            -1,
            s.seed,
            2**31 - 1,
            help_text="Empty: a new answer each time. A number gives the same answer again.",
        )
        self.method = ChoiceField(
            "&Method",
            METHOD_CHOICES,
            s.method,
            help_text="Automatic picks, for this computer, whether a draft model guessing ahead makes answers faster.",
        )
        self.budget = ChoiceField(
            "Tree &budget",
            [("Automatic", AUTOMATIC)],
            AUTOMATIC,
            help_text="How many guessed tokens the big model checks at once (SpecExec).",
        )
        for field in (self.top_p, self.top_k, self.repetition_penalty, self.seed, self.method, self.budget):
            advanced.addWidget(field)
        column.addWidget(self.advanced_box)
        self.reset_button = button(
            "Reset to defaults", LINK, "This chat's settings back to the defaults for the model in use"
        )
        self.reset_button.clicked.connect(self.reset_requested)
        column.addWidget(self.reset_button, 0, Qt.AlignmentFlag.AlignLeft)
        column.addStretch(1)
        self.advanced.toggled.connect(self._show_advanced)
        self._show_advanced(False)
        for field in (
            self.temperature,
            self.top_p,
            self.max_tokens,
            self.top_k,
            self.repetition_penalty,
            self.seed,
            self.method,
            self.budget,
        ):
            field.changed.connect(self._emit)
        self.set_settings(settings, conversation_id)

    def set_settings(self, settings: ConversationSettings, conversation_id: int | None) -> None:
        """Show `settings` of the chat `conversation_id` (None: the defaults of a chat not made yet) without
        emitting `changed` for them."""
        self.flush()
        self.conversation_id = conversation_id
        s = self._settings = settings.validated()
        self.system_prompt.blockSignals(True)
        self.system_prompt.setPlainText(s.system_prompt)
        self.system_prompt.blockSignals(False)
        self.preset.setCurrentText(preset_for(s.system_prompt) or "Custom")
        self.temperature.set_value(s.temperature)
        self.top_p.set_value(s.top_p)
        self.max_tokens.set_value(s.max_tokens)
        self.top_k.set_value(s.top_k)
        self.repetition_penalty.set_value(s.repetition_penalty)
        self.seed.set_value(s.seed)
        self.method.set_value(s.method)
        budgets = sorted(set(TREE_BUDGETS) | ({s.budget} if s.budget_mode == BudgetMode.MANUAL else set()))
        combo = self.budget.combo
        combo.blockSignals(True)
        combo.clear()
        combo.addItem("Automatic", AUTOMATIC)
        for budget in budgets:
            combo.addItem(f"{budget:,} tokens", budget)
        combo.blockSignals(False)
        self.budget.set_value(s.budget if s.budget_mode == BudgetMode.MANUAL else AUTOMATIC)
        for name, switch in self.tool_switches.items():
            switch.blockSignals(True)
            switch.setChecked(name not in s.tool_servers_off)
            switch.blockSignals(False)

    def set_tool_servers(self, names: list[str]) -> None:
        """Show a switch for each of these MCP servers (the running ones), on unless this chat switched it off."""
        for switch in self.tool_switches.values():
            self.tool_switch_column.removeWidget(switch)
            switch.deleteLater()
        self.tool_switches = {}
        for name in names:
            switch = QCheckBox(name)
            switch.setAccessibleName(f"Tools of {name} in this chat")
            switch.setChecked(name not in self._settings.tool_servers_off)
            switch.toggled.connect(self._emit)
            self.tool_switches[name] = switch
            self.tool_switch_column.addWidget(switch)
        self.tools_box.setVisible(bool(names))

    def values(self) -> ConversationSettings:
        """The chat's settings as the panel shows them; those it does not show (the Think switch, beside the
        message box) stay as they were."""
        budget = int(self.budget.value())
        return dataclasses.replace(
            self._settings,
            system_prompt=self.system_prompt.toPlainText(),
            temperature=self.temperature.value(),
            top_p=self.top_p.value(),
            max_tokens=int(self.max_tokens.value()),
            budget_mode=BudgetMode.AUTO if budget == AUTOMATIC else BudgetMode.MANUAL,
            budget=self._settings.budget if budget == AUTOMATIC else budget,
            top_k=int(self.top_k.value()),
            repetition_penalty=self.repetition_penalty.value(),
            seed=self.seed.value(),
            method=Method(self.method.value()),
            tool_servers_off=[n for n in self._settings.tool_servers_off if n not in self.tool_switches]
            + [n for n, switch in self.tool_switches.items() if not switch.isChecked()],
        ).validated()

    def _fit_text_size(self) -> None:
        """As wide as its controls and words need at the app's text size (a larger one cut them off)."""
        self.setFixedWidth(round(PANEL_WIDTH_PX * max(1.0, text_scale())))

    def changeEvent(self, event: QEvent) -> None:  # noqa: N802 - Qt signature
        super().changeEvent(event)
        if event.type() == QEvent.Type.FontChange:
            self._fit_text_size()

    def keyPressEvent(self, event: QKeyEvent) -> None:
        """Esc closes the panel (the focus is in it; while an answer streams, Esc stops it first)."""
        if event.key() == Qt.Key.Key_Escape:
            self.closed.emit()
            return
        super().keyPressEvent(event)

    def flush(self) -> None:
        """Save a system prompt still being typed (the panel closes, or another chat opens)."""
        if self._prompt_timer.isActive():
            self._prompt_timer.stop()
            self._emit()

    def _emit(self) -> None:
        settings = self.values()
        if settings != self._settings:
            self._settings = settings
            self.changed.emit(self.conversation_id, settings)

    def _prompt_typed(self) -> None:
        self.preset.setCurrentText(preset_for(self.system_prompt.toPlainText()) or "Custom")
        self._prompt_timer.start()

    def _preset_chosen(self, index: int) -> None:
        name = self.preset.itemText(index)
        if name in SYSTEM_PRESETS:
            self.system_prompt.setPlainText(SYSTEM_PRESETS[name])
            self.flush()

    def _show_advanced(self, shown: bool) -> None:
        self.advanced_box.setVisible(shown)
        self._advanced_icon.set("chevron-down" if shown else "chevron-right")
