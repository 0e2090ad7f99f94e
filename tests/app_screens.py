"""Every screen of the app, built offscreen with the real widgets and plausible data (a hardware fixture for
the wizard, a few chats in a real SQLite store, a recording bridge in place of the engine): used by the
contrast test (tests/test_app_contrast.py) and by scripts/app-screenshots.py, which writes docs/images/.

`build_screens` returns (name, top-level widget) pairs, shown and sized; a theme switch re-styles them all.
"""

from __future__ import annotations

import os
import time
from pathlib import Path
from typing import Callable

from app_fixtures import recording_bridge_class

HW_FIXTURE = Path(__file__).parent / "fixtures" / "hw" / "gpu12-ram16-pcie3.json"
WINDOW_SIZE = (1280, 800)  # a 13-14 inch laptop's screen, the smallest the window is made for

CODE_ANSWER = (
    "Here is a short one. It ignores case and spaces, so `Never odd or even` counts:\n\n"
    "```python\ndef is_palindrome(word: str) -> bool:\n    # compare the cleaned word with its reverse\n"
    '    cleaned = word.replace(" ", "").lower()\n    return cleaned == cleaned[::-1]\n```\n\n'
    "| word | palindrome? |\n|---|---|\n| level | yes |\n| hello | no |\n\n"
    "See [the Python docs](https://docs.python.org/3/library/stdtypes.html#str) for more string methods."
)


def settle(rounds: int = 8) -> None:
    from PySide6.QtWidgets import QApplication

    for _ in range(rounds):
        QApplication.processEvents()
        time.sleep(0.02)


def _ready(bridge) -> None:
    from core.engine import protocol as P

    bridge.handle_events(
        [
            P.EngineStarted(pid=1),
            P.StatusReport("ready", {"budget": 64, "max_context": 8192, "target": "builtin", "draft": "builtin-draft"}),
        ]
    )


def chat_window(paths, chats: bool = True):
    """The main window with a few chats, the open one answered with code, a table and a link."""
    from app.conversations import store as S
    from app.window.main_window import MainWindow
    from core.engine import protocol as P

    bridge = recording_bridge_class()()
    window = MainWindow(paths, bridge=bridge, confirm_delete=False)
    window.resize(*WINDOW_SIZE)
    _ready(bridge)
    if chats:
        store = window.store
        for title, days in (("Weekend trip ideas", 4), ("A birthday poem for Anna", 1)):  # under their dates
            older = store.create_conversation(title)
            store.db.execute(
                "UPDATE conversations SET updated_at = updated_at - ? WHERE id = ?", (days * 24 * 3600, older)
            )
        store.db.commit()
        cid = store.create_conversation("Palindromes in Python")
        store.add_message(cid, "user", "Write a Python function that checks whether a word is a palindrome.")
        answer = store.add_message(cid, "assistant", CODE_ANSWER, S.COMPLETE)
        store.update_message(
            answer.id,
            stats={
                "tokens": 96,
                "tokens_per_s": 14.2,
                "tokens_per_pass": 2.61,
                "prompt_tokens": 61,
                "generated_tokens": 96,
            },
        )
        window.controller.conversations.refresh()
        window.controller.open_conversation(cid)
        window.controller.stats.add(P.PassStats("x", 3, 64, 50.0, 126.0, 14.2, 64))  # 5 tokens in 0.352 s: 14.2/s
        window.controller.stats.add(P.PassStats("x", 2, 64, 50.0, 126.0, 14.2, 64))
        window.controller.stats.flush()
    return window


PRIME_QUESTION = "Is 391 a prime number?"
PRIME_THOUGHT = (
    "The question is whether 391 is prime. Check small factors up to √391 ≈ 19.8.\n\n"
    "391 is odd, so not 2. Digit sum 3 + 9 + 1 = 13: not 3. It ends in 1: not 5. "
    "7 × 55 = 385, remainder 6. 11 × 35 = 385, remainder 6. 13 × 30 = 390, remainder 1. "
    "17 × 23 = 391. So it factors: 391 = 17 × 23, not prime."
)
PRIME_ANSWER = (
    "No. **391 = 17 × 23**, so it is not a prime number.\n\n"
    "A quick way to find it: try the primes up to √391 ≈ 19.8 (2, 3, 5, 7, 11, 13, 17, 19); 17 divides it."
)


def thinking_window(paths, answered: bool):
    """A chat with Qwen3 32B, a model that thinks (its template can turn it off: the Think switch shows).
    `answered`: its answer came and the thinking is folded above it; else the model is still thinking, the
    block open and counting up."""
    from app.conversations import store as S
    from app.settings.schema import AppSettings, save_settings
    from core.engine import protocol as P

    models = Path("/home/you/.local/share/specexec-desktop/models")
    save_settings(
        AppSettings(
            target=str(models / "Qwen3-32B-AWQ"), draft=str(models / "Qwen3-0.6B"), active_pair="qwen3-32b-awq"
        ),
        paths.settings_file,
    )
    window = chat_window(paths, chats=False)
    window.bridge.handle_events(
        [
            P.StatusReport(
                "ready",
                {
                    "budget": 64,
                    "max_context": 32768,
                    "thinking": "switchable",
                    "target": "Qwen3-32B",
                    "draft": "Qwen3-0.6B",
                },
            )
        ]
    )
    store = window.store
    cid = store.create_conversation("Is 391 prime?")
    store.add_message(cid, "user", "What is 17 squared?")
    first = store.add_message(cid, "assistant", "17² = **289**.", S.COMPLETE)
    store.update_message(
        first.id,
        reasoning="17 × 17 = 17 × 10 + 17 × 7 = 170 + 119 = 289.",
        stats={"tokens": 61, "tokens_per_s": 9.8, "prompt_tokens": 24, "generated_tokens": 61, "thinking_seconds": 3.1},
    )
    window.controller.conversations.refresh()
    window.controller.open_conversation(cid)
    if answered:
        store.add_message(cid, "user", PRIME_QUESTION)
        answer = store.add_message(cid, "assistant", PRIME_ANSWER, S.COMPLETE)
        store.update_message(
            answer.id,
            reasoning=PRIME_THOUGHT,
            stats={
                "tokens": 214,
                "tokens_per_s": 10.3,
                "prompt_tokens": 98,
                "generated_tokens": 214,
                "thinking_seconds": 14.2,
            },
        )
        window.controller.open_conversation(cid)
        return window
    window.send(PRIME_QUESTION)
    request_id = window.bridge.calls[-1][1]
    window.bridge.handle_events([P.PromptStarted(request_id, 98, 85)])
    for piece in (PRIME_THOUGHT.split("\n\n")[0], "\n\n391 is odd, so not 2.", " Digit sum 3 + 9 + 1 = 13: not 3."):
        window.bridge.handle_events([P.TokenChunk(request_id, "", (7,), reasoning=piece)])  # it streams in
        window.controller.active.thinking["thinking_started_at"] = time.time() - 8  # for a while already
        window.controller._flush()
        window.chat_view.last_answer().render()
    return window


def crashed_window(paths):
    """The chat after the engine died mid-answer: the banner, the interrupted answer."""
    from core.engine import protocol as P

    window = chat_window(paths)
    window.send("And in JavaScript?")
    request_id = window.bridge.calls[-1][1]
    window.bridge.handle_events([P.TokenChunk(request_id, "In JavaScript you can", (7,))])
    settle()
    window.bridge.handle_events(
        [
            P.Error(
                None,
                "engine_died",
                "the engine process was killed by SIGKILL",
                "restart the engine to go on - the conversation is kept",
            )
        ]
    )
    return window


def seventy_b_window(paths):
    """Llama 3.3 70B on a 24 GB card, loaded with room for 4,096 tokens (the model keeps up to 131,072)."""
    from app.settings.schema import AppSettings, save_settings
    from core.engine import protocol as P

    models = Path("/home/you/.local/share/specexec-desktop/models")
    save_settings(
        AppSettings(
            target=str(models / "llama-3.3-70b-instruct-awq"),
            draft=str(models / "Meta-Llama-3.1-8B-Instruct-GPTQ-INT4"),
            active_pair="llama3.3-70b-instruct-awq",
        ),
        paths.settings_file,
    )
    window = chat_window(paths, chats=False)
    # 16-bit keys and values: 80 layers x 8 heads x 128 for the 70B, 32 x 8 x 128 for the 8B draft
    per_token = 2 * 2 * (80 + 32) * 8 * 128
    models_info = {
        "max_context": 4096,
        "model_context": 131072,
        "context_bytes_per_token": per_token,
        "device": "cuda:0",
    }
    window.bridge.handle_events(
        [P.StatusReport("ready", {**models_info, "target": "llama-3.3-70b-instruct-awq", "draft": "Llama-3.1-8B"})]
    )
    return window


def report_message() -> str:
    """A question with a long report added to it (about 6,200 tokens)."""
    from core.text.document_text import fenced

    report = "\n".join(f"Section {n}: what the quarter brought, in figures and words." for n in range(1, 181))
    return "Summarise this report in five bullet points.\n\n" + fenced("quarterly-report.pdf", report)


def too_long_window(paths):
    """The 70B with room for 4,096 tokens: a report added to a message is longer, and the answer's error
    offers Make room."""
    from core.engine import protocol as P

    window = seventy_b_window(paths)
    window.send(report_message())
    window.bridge.handle_events(
        [
            P.Error(
                window.bridge.calls[-1][1],
                "context_length",
                "the prompt is 6,214 tokens with the chat template, but the model's context window is 4,096 tokens",
                "shorten the message or the system prompt, or start a new conversation",
                6214,
            )
        ]
    )
    return window


def long_message_window(paths, wait: Callable[[Callable[[], bool]], None]):
    """The same report in the message box, not sent yet: counted by the engine, and said to be too long under
    the box, with the Make room that sending it offers; the meter full."""
    from core.engine import protocol as P

    window = seventy_b_window(paths)
    window.input.setPlainText(report_message())
    wait(lambda: bool(window.bridge.counts))
    window.bridge.handle_events([P.TokenCount(window.bridge.counts[-1][0], 6214, fits=False)])
    return window


def cut_off_window(paths):
    """A chat whose answer stopped at the longest answer: its footer says so, and Continue is under it."""
    from core.engine import protocol as P

    window = chat_window(paths, chats=False)
    window.send("Write a short story about a lighthouse keeper who finds a message in a bottle.")
    request_id = window.bridge.calls[-1][1]
    story = (
        "Every evening for thirty-one years, Elias climbed the hundred and twelve steps of the Skerry Point "
        "light and wound the clockwork that turned its lens. The sea had brought him many things in that time: "
        "driftwood, a ship's bell, once a bewildered seal.\n\nBut on the morning after the October storm it "
        "brought him a green bottle, its cork sealed with red wax, and inside it a letter addressed to"
    )
    window.bridge.handle_events(
        [
            P.PromptStarted(request_id, 34, 0),
            P.TokenChunk(request_id, story, (7,)),
            P.PassStats(request_id, 96, 64, 5200.0, 9800.0, 6.4, 64),
            P.Finished(request_id, "length", prompt_tokens=34, generated_tokens=96),
        ]
    )
    return window


def wizard(models_dir: Path):
    from app.models.wizard.wizard import FirstRunWizard
    from app.settings.schema import AppSettings

    bridge = recording_bridge_class()()
    wizard = FirstRunWizard(AppSettings(), models_dir, bridge=bridge)
    wizard.bridge_for_screens = bridge
    return wizard


def build_screens(
    paths, models_dir: Path, wait: Callable[[Callable[[], bool]], None], details: bool = True
) -> list[tuple[str, object]]:
    """Every screen, shown. `wait(predicate)` processes events until the predicate holds (probes, scans);
    `details`: the wizard's computer details open (they name the hardware fixture's file: not for docs)."""
    from app.models.manager import ModelManager
    from app.models.wizard.wizard import CHOOSE, DONE, DOWNLOAD
    from app.settings.schema import ConversationSettings
    from core.system.locations import MODELS_DIR_ENV
    from app.window.confirm import confirm_box
    from core.engine import protocol as P

    screens: list[tuple[str, object]] = []

    def add(name: str, widget) -> None:
        widget.show()
        screens.append((name, widget))

    def own(name: str):
        """Each window its own folders: windows that share a database would list each other's chats."""
        return type(paths)(*(folder / name for folder in (paths.data_dir, paths.config_dir, paths.log_dir))).ensure()

    empty = chat_window(own("empty"), chats=False)
    add("chat-empty", empty)
    main = chat_window(own("chat"))
    add("chat", main)
    add("chat-engine-stopped", crashed_window(own("crashed")))
    add("chat-too-long", too_long_window(own("too-long")))
    add("chat-message-too-long", long_message_window(own("message-too-long"), wait))
    add("chat-thinking", thinking_window(own("thinking"), answered=False))
    add("chat-thought", thinking_window(own("thought"), answered=True))
    add("chat-cut-off", cut_off_window(own("cut-off")))

    speed = chat_window(own("speed"))
    speed.status_line.speed_button.setChecked(True)
    add("chat-speed-details", speed)
    panel = chat_window(own("panel"))
    panel.controller.set_conversation_settings(ConversationSettings(system_prompt="You are a helpful assistant."))
    panel.open_conversation_settings()
    panel.chat_settings.advanced.setChecked(True)
    add("chat-settings", panel)
    main.sidebar.open_chat_menu(main.sidebar.view.currentIndex(), main.mapToGlobal(main.rect().center()))
    chat_menu = main.sidebar.chat_menu
    chat_menu.aboutToHide.disconnect()  # kept for the screenshot of both themes
    add("chat-menu", chat_menu)
    add("app-menu", main.app_menu)
    add("about", main.about())
    add("shortcuts", main.show_shortcuts())
    settings_window = chat_window(own("settings"))
    settings_window.open_settings(has_gpu=True)
    add("settings", settings_window)
    add(
        "delete-chat",
        confirm_box(
            main,
            "Delete this chat?",
            "“Palindromes in Python” and all its messages will be deleted. This cannot be undone.",
            "Delete chat",
        ),
    )

    def models_page(name: str, section: int) -> ModelManager:
        """A window showing its Models page (in the chat's place, the sidebar beside it) at `section`."""
        window = chat_window(own(name))
        before = os.environ.get(MODELS_DIR_ENV)
        os.environ[MODELS_DIR_ENV] = str(models_dir)  # the page lists this folder's models
        try:
            page = window.open_model_manager()
        finally:
            if before is None:
                os.environ.pop(MODELS_DIR_ENV)
            else:
                os.environ[MODELS_DIR_ENV] = before
        page.sections.setCurrentIndex(section)
        add(name, window)
        wait(lambda: bool(page.entries) and bool(page.catalog_list.fits))
        return page

    installed = models_page("models-installed", 0)
    models_page("models-catalog", 1)
    for index in range(2, installed.sections.count()):  # later sections (Connections) as screens of their own
        models_page("models-" + installed.sections.text(index).lower().replace(" ", "-").replace("&", ""), index)

    hardware = wizard(models_dir)
    add("wizard-1-computer", hardware)
    wait(lambda: hardware.state.recommendation is not None)
    if details:
        hardware.hardware_page.details_button.click()

    choose = wizard(models_dir)
    add("wizard-2-choose", choose)
    wait(lambda: choose.state.recommendation is not None)
    choose.next()
    assert choose.currentId() == CHOOSE

    download = wizard(models_dir)
    add("wizard-3-download", download)
    wait(lambda: download.state.recommendation is not None)
    page = download.download_page
    page.worker.start = lambda pair_id: None  # the screenshot shows a download under way, fed its events
    download.next()
    pick = next(fit for fit in download.state.recommendation.pairs if fit.pair.download_bytes and fit.fit != "no")
    download.choose_page.pairs.select(pick.pair.id)
    download.next()
    assert download.currentId() == DOWNLOAD
    total = download.state.chosen.pair.download_bytes
    page._planned({"total_bytes": total, "already_bytes": 0, "files": ["model-00001-of-00004.safetensors"] * 4})
    page._progress(
        {
            "done_bytes": int(total * 0.37),
            "total_bytes": total,
            "bytes_per_second": 48_000_000,
            "eta_seconds": 512,
            "file": "model-00002-of-00004.safetensors",
        }
    )

    done = wizard(models_dir)
    add("wizard-4-done", done)
    wait(lambda: done.state.recommendation is not None)
    done.next()
    done.choose_page.pairs.select("builtin")
    done.next()
    assert done.currentId() == DONE
    done.bridge_for_screens.handle_events([P.LoadProgress("Dequantising the weights of x.gguf", fraction=0.62)])
    loaded = wizard(models_dir)
    add("wizard-4-done-ready", loaded)
    wait(lambda: loaded.state.recommendation is not None)
    loaded.next()
    loaded.choose_page.pairs.select("builtin")
    loaded.next()
    _ready(loaded.bridge_for_screens)
    settle()
    return screens
