"""Fixtures for the desktop app tests: tiny model folders the real engine loads, tmp data dirs, screenshots.

The tiny pair here never emits its EOS: the tokenizer's EOS ("</s>") has id 64 while the models' vocabulary
is 0..63, so every answer runs to max_tokens (short in most tests, long where a test needs time to press
Stop or kill the engine). Messages end with "<|end|>" (id 0), an ordinary token, in the chat template.
"""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

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
        target=target, draft=draft, device="cpu", dtype="float32", tree_budget=16, max_depth=8, expand=8,
        engine_threads=1, defaults=ConversationSettings(**conversation),
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


@pytest.fixture(scope="module")
def shared_bridge(qapp, tiny_models):
    """One real engine (spawned process, tiny pair loaded) shared by the windows of a test module."""
    from app.engine.bridge import READY, EngineBridge
    from core.engine.client import EngineClient

    settings = tiny_settings(*tiny_models)
    bridge = EngineBridge(lambda: EngineClient(torch_threads=1, start_timeout=ENGINE_TIMEOUT_S))
    bridge.start(settings.load_request())
    try:
        wait_for(lambda: bridge.status.state in (READY, "crashed", "failed"), what="the engine to load")
        assert bridge.status.state == READY, bridge.status
        yield bridge
    finally:
        bridge.shutdown()


@pytest.fixture()
def controller(qtbot, tmp_path):
    """A ChatController on a tmp store and a recording bridge (no engine): tests feed it events."""
    from app.chat.controller import ChatController
    from app.settings.schema import AppSettings, BudgetMode, ConversationSettings
    from app.conversations.store import Store

    bridge = recording_bridge_class()()
    store = Store(tmp_path / "c.sqlite3")
    settings = AppSettings(defaults=ConversationSettings(system_prompt="Be brief.", budget_mode=BudgetMode.MANUAL, budget=9))
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

        def cancel(self, request_id: str) -> None:
            self.calls.append(("cancel", request_id))

        def restart(self) -> None:
            self.calls.append(("restart",))

    return RecordingBridge
