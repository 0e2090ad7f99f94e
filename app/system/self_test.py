"""`specexec-desktop --self-test`: prove an installed (or frozen) app works, end to end, without a screen.

What it does, in order, each step failing with a plain reason:
1. Qt: creates the application on the offscreen platform and builds the main window (with its stylesheet and
   icons) against a temporary data folder, so the installed UI code, Qt plugins and resources are all there.
2. Command line: runs `specexec hw --json` as a child process the way the wizard starts its downloads
   (core.system.cli_process: in a frozen bundle, this executable with `--cli`), and reads its JSON; then
   `specexec text resources/self-test.pdf --json` and the same for self-test.docx, .xlsx, .xls, .pptx and
   .odt, the way a document added to a message is read (app.chat.document_reading), and checks their words,
   accents included (the readers, pypdf, python-docx, openpyxl, xlrd, python-pptx and odfdo with lxml, must be
   bundled, and the child's output is UTF-8 whatever the system's code page).
3. Engine: starts the engine process the way the app does (`EngineClient`, multiprocessing "spawn"), and
   checks it runs the same executable as this process (a frozen bundle must re-launch itself, not look for
   a Python).
4. Model: loads the built-in pair (converting the bundled GGUF on first use), generates a few tokens for a
   fixed prompt and seed on the CPU in float32, and compares them with the stored expectation in
   `resources/self-test.json`; then asks for JSON mode and checks the answer is JSON (the grammar engine,
   llguidance, is a native library the bundle must carry).
5. GPU: runs the GPU check (`specexec doctor`, core.doctor) in its own process and prints its verdict, e.g.
   "No NVIDIA GPU found: using the processor.", saving its report in the log folder. The verdict is not
   judged (a GPU that fails the check is simply not used); a check that cannot run at all fails the test.

Exit status 0 when all pass; otherwise 1, with the reason on stderr and in the app's log file.
`python -m app.system.self_test --record` rewrites the expectation from this machine's run (after an intended
change to the model, the sampler or the prompt).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

from app.system import resources

log = logging.getLogger(__name__)

FLAG = "--self-test"
EXPECTATION_RESOURCE = "self-test.json"
# the documents the readers are tried on, and what each says (a PDF's one page, a Word document's and an
# OpenDocument text's paragraph, a workbook's one cell in a sheet named with an accent, a slide's title)
DOCUMENTS = (
    ("self-test.pdf", "Grüße aus dem PDF", "PDF"),
    ("self-test.docx", "Grüße aus dem Word-Dokument", "Word"),
    ("self-test.xlsx", "## Gruß\n\n| Grüße aus der Excel-Tabelle |\n| --- |", "Excel"),
    ("self-test.xls", "## Gruß\n\n| Grüße aus der Excel-97-Tabelle |\n| --- |", "Excel 97-2003"),
    ("self-test.pptx", "## Slide 1: Grüße aus der PowerPoint-Präsentation", "PowerPoint"),
    ("self-test.odt", "Grüße aus dem OpenDocument", "OpenDocument"),
)
LOAD_TIMEOUT_S = 900.0  # the first run converts the GGUF (about 30 s on a desktop, minutes on a slow CI box)
GENERATE_IDLE_TIMEOUT_S = 300.0
# One torch thread: a 135M model needs no more for 12 tokens, and a busy machine (a CI runner, a desktop
# compiling something) slows multi-threaded CPU kernels down many times over.
ENGINE_THREADS = 1


class SelfTestFailure(Exception):
    """One step of the self-test failed; the message says which and why, in plain words."""


@dataclass(frozen=True)
class Expectation:
    """A fixed request and the tokens the built-in pair must produce for it (CPU, float32)."""

    messages: tuple[dict[str, str], ...]
    seed: int
    temperature: float
    top_p: float
    method: str
    budget: int
    max_new_tokens: int
    token_ids: tuple[int, ...]
    text: str

    @classmethod
    def load(cls, path: Path) -> "Expectation":
        try:
            raw = json.loads(path.read_text(encoding="utf-8"))
            return cls(
                messages=tuple(dict(m) for m in raw["messages"]),
                seed=int(raw["seed"]),
                temperature=float(raw["temperature"]),
                top_p=float(raw["top_p"]),
                method=str(raw["method"]),
                budget=int(raw["budget"]),
                max_new_tokens=int(raw["max_new_tokens"]),
                token_ids=tuple(int(t) for t in raw["token_ids"]),
                text=str(raw["text"]),
            )
        except (OSError, ValueError, KeyError, TypeError) as error:
            raise SelfTestFailure(
                f"the self-test expectation {path} cannot be read ({error}): reinstall the app"
            ) from error

    def save(self, path: Path) -> None:
        data = asdict(self)
        data["messages"], data["token_ids"] = list(self.messages), list(self.token_ids)
        path.write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")


def expectation_path() -> Path:
    try:
        return resources.path(EXPECTATION_RESOURCE)
    except (KeyError, FileNotFoundError) as error:
        raise SelfTestFailure(f"the self-test expectation is missing from the app's resources ({error})") from error


def check_window() -> None:
    """Build and paint the main window offscreen against a throwaway data folder."""
    from app.application import create_application
    from app.window.main_window import MainWindow
    from app.system.paths import AppPaths

    app = create_application([sys.argv[0] if sys.argv else "specexec-desktop"])
    if app.platformName() != "offscreen":
        raise SelfTestFailure(f"Qt started the '{app.platformName()}' platform instead of 'offscreen'")
    with tempfile.TemporaryDirectory(prefix="specexec-self-test-") as tmp:
        root = Path(tmp)
        window = MainWindow(AppPaths(root, root / "config", root / "logs"), start_engine=False)
        try:
            window.show()
            app.processEvents()
            picture = window.grab()
            if picture.isNull() or picture.width() < 100:
                raise SelfTestFailure("the main window did not paint offscreen")
        finally:
            window.close()
            window.deleteLater()
            app.processEvents()
    log.info("self-test: main window built and painted offscreen")


def engine_executable(pid: int) -> Path:
    import psutil

    try:
        return Path(psutil.Process(pid).exe()).resolve()
    except psutil.Error as error:
        raise SelfTestFailure(f"cannot inspect the engine process {pid} ({error})") from error


def load_request(expectation: Expectation):  # -> core.engine.protocol.Load
    """The built-in pair on the CPU in float32: the same numbers on every machine the app runs on."""
    from core.engine import protocol as P

    return P.Load(target="builtin", draft="builtin-draft", device="cpu", dtype="float32", budget=expectation.budget)


def generate_request(expectation: Expectation, request_id: str):  # -> core.engine.protocol.Generate
    from core.engine import protocol as P

    return P.Generate(
        request_id=request_id,
        messages=expectation.messages,
        seed=expectation.seed,
        temperature=expectation.temperature,
        top_p=expectation.top_p,
        method=expectation.method,
        budget=expectation.budget,
        max_new_tokens=expectation.max_new_tokens,
        reuse_cache=False,
    )


def generate(expectation: Expectation, report=print) -> tuple[tuple[int, ...], str]:
    """Start the engine, load the built-in pair on the CPU in float32, and answer the expectation's request.

    Returns (token ids, text). Raises SelfTestFailure naming the step that failed.
    """
    from core.engine.client import EngineClient
    from core.errors import EngineError

    client = EngineClient(torch_threads=ENGINE_THREADS)
    try:
        started = time.monotonic()
        try:
            client.start(wait=True)
        except EngineError as error:
            raise SelfTestFailure(f"the engine process did not start: {error}") from error
        own, engine = Path(sys.executable).resolve(), engine_executable(client.engine_pid or -1)
        if engine != own:
            raise SelfTestFailure(f"the engine runs {engine}, not this program ({own})")
        report(f"engine started in {time.monotonic() - started:.1f} s (pid {client.engine_pid}, {engine.name})")
        started = time.monotonic()
        try:
            client.send(load_request(expectation))
            client.wait_loaded(lambda e: log.info("load: %s", e.stage), LOAD_TIMEOUT_S)
        except EngineError as error:
            raise SelfTestFailure(f"the built-in model pair did not load: {error}") from error
        report(f"built-in pair loaded in {time.monotonic() - started:.1f} s")
        started = time.monotonic()
        request = generate_request(expectation, f"self-test-{os.getpid()}")
        token_ids, text, _ = _answer(client, request)
        report(f"{len(token_ids)} tokens generated in {time.monotonic() - started:.1f} s")
        _check_structured_output(client, request, report)
        return token_ids, text
    finally:
        client.shutdown()


def _answer(client, request) -> tuple[tuple[int, ...], str, str]:  # client: EngineClient; request: P.Generate
    """Send `request` and collect its answer: (token ids, text, finish reason); SelfTestFailure otherwise."""
    from core.engine import protocol as P

    client.send(request)
    token_ids: list[int] = []
    text: list[str] = []
    reason = None
    try:
        for event in client.iter_request(request.request_id, idle_timeout=GENERATE_IDLE_TIMEOUT_S):
            if isinstance(event, P.TokenChunk):
                token_ids.extend(event.token_ids)
                text.append(event.text)
            elif isinstance(event, P.Error):
                raise SelfTestFailure(f"generation failed: {event.message} ({event.kind})")
            elif isinstance(event, P.Finished):
                reason = event.reason
    except TimeoutError as error:
        raise SelfTestFailure(f"generation stalled: {error}") from error
    if reason is None:
        raise SelfTestFailure("generation ended without a Finished event")
    return tuple(token_ids), "".join(text), reason


def _check_structured_output(client, request, report=print) -> None:
    """The grammar engine (llguidance, a native library the bundle must carry) makes the answer JSON."""
    started = time.monotonic()
    asked = dataclasses.replace(
        request, request_id=request.request_id + "-json", grammar_kind="json_object", max_new_tokens=48
    )
    _, text, reason = _answer(client, asked)
    try:
        parsed = json.loads(text) if reason == "eos" else None
    except ValueError:
        parsed = None
    if not text.startswith("{") or (reason == "eos" and not isinstance(parsed, dict)):
        raise SelfTestFailure(f"structured output is not JSON: {text!r} (finished by {reason})")
    report(f"structured output (JSON mode) in {time.monotonic() - started:.1f} s: {text[:40]!r}")


def compare(expectation: Expectation, token_ids: tuple[int, ...], text: str) -> None:
    if token_ids != expectation.token_ids:
        first = next(
            (i for i, (a, b) in enumerate(zip(token_ids, expectation.token_ids)) if a != b),
            min(len(token_ids), len(expectation.token_ids)),
        )
        raise SelfTestFailure(
            f"the built-in pair generated different tokens than expected for seed {expectation.seed} "
            f"(first difference at token {first}): got {list(token_ids)} {text!r}, expected "
            f"{list(expectation.token_ids)} {expectation.text!r}"
        )


def check_gpu(log_dir: Path, report=print) -> None:
    """The GPU check in its own process (torch stays out of this one); its report goes to `log_dir`."""
    from core.doctor.process import run_doctor_in_subprocess
    from core.errors import DoctorReportError

    started = time.monotonic()
    try:
        doctor = run_doctor_in_subprocess(
            log_dir, lambda step, steps, what: log.info("GPU check %d/%d: %s", step, steps, what)
        )
    except DoctorReportError as error:
        raise SelfTestFailure(f"the GPU check did not run: {error}") from error
    report(f"GPU check ({time.monotonic() - started:.1f} s): {doctor.conclusion.summary}")


def cli_child_json(what: str, *arguments: str) -> tuple[subprocess.CompletedProcess, object]:
    """`specexec ARGUMENTS` in a child process started as the app starts its downloads, measurements and
    document readings (core.system.cli_process), and the JSON it printed (None when it failed or printed none); `what`
    names it in the failure when it cannot run at all."""
    from core.system.cli_process import cli_command

    program, child_arguments = cli_command(*arguments)
    try:
        done = subprocess.run([program, *child_arguments], capture_output=True, timeout=120)
    except (OSError, subprocess.TimeoutExpired) as error:
        raise SelfTestFailure(f"{what} could not run as a child process: {error}") from error
    try:
        return done, json.loads(done.stdout) if done.returncode == 0 else None
    except ValueError:
        return done, None


def child_said(done: subprocess.CompletedProcess) -> str:
    """The end of what a child process said (stderr, else stdout), for a failure's words."""
    return (done.stderr or done.stdout).decode("utf-8", "replace").strip()[-300:]


def check_command_line(report=print) -> None:
    """`specexec hw --json` in a child process started as the app starts its downloads and measurements."""
    done, described = cli_child_json("the command line", "hw", "--json")
    if not isinstance(described, dict):
        raise SelfTestFailure(
            f"`specexec hw --json` as a child process gave exit code {done.returncode} and no JSON: {child_said(done)}"
        )
    report("command line as a child process: ok")


def check_document_reader(report=print) -> None:
    """`specexec text FILE --json` for each of DOCUMENTS in a child process, as the app reads a document added
    to a message."""
    for resource, expected, kind in DOCUMENTS:
        done, record = cli_child_json(f"the {kind} reader", "text", str(resources.path(resource)), "--json")
        text = record.get("text") if isinstance(record, dict) else None
        if text != expected:
            raise SelfTestFailure(
                f"`specexec text {resource} --json` gave exit code {done.returncode} and {text!r}, not "
                f"{expected!r}: {child_said(done)}"
            )
        report(f"{kind} reader as a child process: ok")


def run(log_dir: Path, report=print) -> None:
    """All the steps; SelfTestFailure on the first that fails."""
    os.environ["QT_QPA_PLATFORM"] = "offscreen"  # before any QApplication exists
    expectation = Expectation.load(expectation_path())
    check_window()
    report("main window: ok")
    check_command_line(report)
    check_document_reader(report)
    token_ids, text = generate(expectation, report)
    compare(expectation, token_ids, text)
    report(f"tokens match the expectation for seed {expectation.seed}: {text!r}")
    check_gpu(log_dir, report)


def say(message: str, stream) -> None:  # noqa: ANN001 - a text stream or None
    """Print to `stream` if there is one (a windowed Windows app has no stdout or stderr: the log has it all)."""
    if stream is not None:
        print(message, file=stream, flush=True)


def main() -> int:
    """The `--self-test` entry point: 0 when everything passed, 1 with the reason on stderr and in the log."""
    from app.system.logging_setup import setup_logging
    from app.system.paths import AppPaths

    paths = AppPaths.from_env().ensure()
    setup_logging(paths.log_file)

    def report(message: str) -> None:
        log.info("self-test: %s", message)
        say(f"self-test: {message}", sys.stdout)

    report(f"running {sys.executable} (frozen: {bool(getattr(sys, 'frozen', False))}); log: {paths.log_file}")
    try:
        run(paths.log_dir, report)
    except SelfTestFailure as failure:
        log.error("self-test FAILED: %s", failure)
        say(f"self-test FAILED: {failure}", sys.stderr)
        return 1
    except Exception as error:  # noqa: BLE001 - any crash is a failed self-test with its reason
        log.exception("self-test FAILED with an unexpected error")
        say(f"self-test FAILED: unexpected {type(error).__name__}: {error}", sys.stderr)
        return 1
    report("PASSED")
    return 0


def record(path: Path) -> None:
    """Run the request of the current expectation on this machine and store its tokens as the new one."""
    old = Expectation.load(path)
    token_ids, text = generate(old)
    new = Expectation(**{**asdict(old), "messages": old.messages, "token_ids": token_ids, "text": text})
    new.save(path)
    print(f"wrote {path}: {list(token_ids)} {text!r}")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description="Run the app's self-test, or re-record its expectation.")
    parser.add_argument("--record", action="store_true", help="rewrite resources/self-test.json from this run")
    args = parser.parse_args()
    if args.record:
        record(expectation_path())
        sys.exit(0)
    sys.exit(main())
