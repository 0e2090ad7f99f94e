"""`specexec chat`: a terminal chat with the engine running in its own process.

Answers stream as they are generated; the conversation (history) is kept, and each new turn reuses the
engine's KV cache of the conversation so far. Commands: /reset (forget the conversation), /system TEXT (set
the system prompt; /system alone clears it), /file PATH (a text file's or a PDF's text goes into the next
message, as the app adds a document: core.text.document_text), /help, /quit. Ctrl-C stops the current answer
(the words already shown stay in the history) but not the program; Ctrl-D (end of input) leaves.

When stdin is not a terminal, each input line is answered in turn (one answer per output line, no prompts)
and the command exits at the end of input: 0 if every turn was answered, 1 otherwise. Loading is one line on
stderr ("Loading the model… 40%"); --verbose reports each step instead (files read, conversions, where an
offloaded target's layers went).

`--mcp-config FILE` gives the model tools: the MCP servers of FILE (the common {"mcpServers": {...}} JSON of
LM Studio, Claude Desktop and Jan) are started before the model loads, their tools are shown to the model
through its chat template, and each call the model writes is shown on stderr and asked about: y (once), a
(always, for that tool, until the program ends) or n (the default; the model is told it was refused). When
stdin is not a terminal, the answer is the next input line. `--allow-tools` allows every call unasked, for
scripts. A call's result goes back to the model, which answers again; after core.tools.loop.MAX_ROUNDS rounds
of calls the answer ends with a note. Ctrl-C also stops a running tool. A server that fails to start is
reported and left out; a model whose template has no tool support is an error before the first question.

`--remote URL` chats with a model on an OpenAI-compatible server instead (`specexec serve` on another
computer, vLLM, Ollama, LM Studio...) through core.remote.engine.RemoteEngine, which the loop drives exactly
like the engine process. `--model` picks the server's model (default: the first it lists); the key is
`--api-key`, else the one the app keeps for that address, else none. The sampling flags are sent with every
request; the model, tree and offload flags do not apply to a server. A lost connection is reported, and the
next message tries again.
"""

from __future__ import annotations

import argparse
import signal
import sys
import threading
from contextlib import contextmanager
from pathlib import Path
from typing import TextIO

from core.cli.options import (
    add_generation_arguments,
    decoding_settings,
    engine_load_settings,
    longer_context_advice,
    sampling_params,
)
from core.cli.thinking_output import ThinkingPrinter, add_thinking_arguments, template_kwargs
from core.engine import protocol as P
from core.cli.chat_tools import TerminalTools, prompt_reader
from core.text.terminal import for_stream
from core.engine.client import LOAD_DIED_HINT, EngineClient
from core.engine.connection import EngineConnection
from core.errors import DocumentError, InvalidSettingError, LoadDiedError, RemoteError, SpecExecError
from core.text.tool_calls import ToolCallStream
from core.text.counts import token_count
from core.tools.config import read_config_file
from core.tools.connection import ToolResult
from core.tools.loop import cap_note, run_tool_turn

HELP = (
    "commands: /reset (new conversation), /system TEXT (system prompt), /file PATH (a document's text into your "
    "next message), /help, /quit; Ctrl-C stops an answer"
)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_generation_arguments(parser)
    parser.add_argument("--system", default=None, help="system prompt")
    parser.add_argument(
        "--verbose",
        action="store_true",
        help="report every loading step (which file is read, how the weights are converted)",
    )
    add_thinking_arguments(parser)
    tools = parser.add_argument_group("tools (MCP servers the model may call)")
    tools.add_argument(
        "--mcp-config",
        default=None,
        metavar="FILE",
        help='MCP servers in the common {"mcpServers": {...}} JSON; each call is asked about (y/a/N)',
    )
    tools.add_argument("--allow-tools", action="store_true", help="allow every tool call without asking")
    remote = parser.add_argument_group("a model on another computer (any OpenAI-compatible server)")
    remote.add_argument(
        "--remote",
        default=None,
        metavar="URL",
        help="chat through the server at URL (e.g. http://192.168.1.20:8765/v1) instead of a local engine",
    )
    remote.add_argument(
        "--api-key",
        default=None,
        metavar="KEY",
        help="the server's API key (default: the key saved for that address in the app, else none)",
    )
    remote.add_argument("--model", default="", metavar="M", help="the server's model (default: the first it lists)")


def note_on_stderr(text: str) -> None:
    """A line for the person at the terminal: it may quote an answer, a tool's result or an engine error, so
    control characters are shown, not obeyed (core.text.terminal)."""
    print(for_stream(text, sys.stderr), file=sys.stderr, flush=True)


class LoadReport:
    """What loading says on stderr: one line, "Loading the model… 40%", kept up to date on a terminal; each
    engine step (files read, weights converted, their paths) only with --verbose."""

    def __init__(self, verbose: bool, stream: TextIO) -> None:
        self.verbose, self.stream = verbose, stream
        self.terminal = stream.isatty()
        self.said = False

    def __call__(self, event: P.LoadProgress) -> None:
        if self.verbose:
            print(event.stage, file=self.stream, flush=True)
            return
        percent = f" {event.fraction * 100:.0f}%" if event.fraction is not None else ""
        if self.terminal:
            print(f"\rLoading the model…{percent}   ", end="", file=self.stream, flush=True)
        elif not self.said:
            print("Loading the model…", file=self.stream, flush=True)
        self.said = True

    def done(self) -> None:
        if self.said and self.terminal and not self.verbose:
            print(file=self.stream, flush=True)  # end the progress line


class _Interrupt:
    """Ctrl-C while an answer streams sets a flag (checked between events) instead of raising, so it can
    never tear a message out of the middle of a queue read."""

    def __init__(self) -> None:
        self.requested = False

    def __call__(self, _signum, _frame) -> None:
        self.requested = True


@contextmanager
def _catch_interrupt():
    flag = _Interrupt()
    if threading.current_thread() is not threading.main_thread():
        yield flag
        return
    previous = signal.signal(signal.SIGINT, flag)
    try:
        yield flag
    finally:
        signal.signal(signal.SIGINT, previous)


def say_load_died(error: LoadDiedError, then: str) -> None:
    """A load the engine died in, in plain words: what happened, what to try, and what happens `then`."""
    print(f"error: {error}.\n  {LOAD_DIED_HINT[0].upper()}{LOAD_DIED_HINT[1:]}. ({then})", file=sys.stderr, flush=True)


class ModelLoader:
    """Loads the models into the local engine, and again after the engine died while loading them (each time
    in a fresh engine process): `load(tries)` says a death in plain words and is True once they are loaded."""

    def __init__(self, client: EngineClient, args: argparse.Namespace, report: LoadReport) -> None:
        self.client = client
        self.report = report
        self.loaded = False
        self.tool_call_format: str | None = None  # how the loaded model writes tool calls (None: it cannot)
        self.models: dict = {}  # the engine's StatusReport.models once loaded (its context, the models' limit)
        self._settings = dict(
            budget=args.budget,
            max_depth=args.max_depth,
            expand=args.expand,
            draft_top_p=args.draft_top_p,
            **engine_load_settings(args),
        )
        self._models = (args.target, args.draft if args.method != "sequential" else None)
        self._fresh = True  # the engine process has not died since it started

    def load(self, tries: int) -> bool:
        """Up to `tries` loads; a failure other than the engine's death (a missing model, a bad file) raises,
        since trying again cannot help."""
        for attempt in range(1, tries + 1):
            try:
                if not self._fresh:
                    self.client.restart(reload=False, wait=True)
                    self._fresh = True
                ready = self.client.load(*self._models, wait=True, **self._settings, on_progress=self.report)
                self.report.done()
                self.tool_call_format = ready.models.get("tool_call_format")
                self.models = dict(ready.models)
                self.loaded = True
                return True
            except LoadDiedError as error:
                self.report.done()
                self.lost()
                say_load_died(error, "loading once more" if attempt < tries else "the next message tries again")
        return False

    def lost(self) -> None:
        """The engine died while loading the models: the next load starts a fresh engine."""
        self.loaded, self._fresh = False, False


class ChatLoop:
    """source: where answers come from, for a remote server ("alpha-7b on gpu-box"); None for this computer.
    loader: the local engine's models (None: the connection loads its own), loaded again before a turn when
    the engine died while loading them."""

    def __init__(
        self,
        client: EngineConnection,
        args: argparse.Namespace,
        interactive: bool,
        source: str | None = None,
        loader: ModelLoader | None = None,
        tools: TerminalTools | None = None,
    ) -> None:
        settings = decoding_settings(args)  # checks the flags before anything is loaded
        params = sampling_params(args)
        self.client = client
        self.source = source
        self.loader = loader
        self.interactive = interactive
        self.system: str | None = args.system
        self.history: list[dict[str, str]] = []
        self.documents: list[str] = []  # /file's blocks, waiting for the next message
        self.failed_turns = 0
        self.hide_thinking = args.hide_thinking
        self.tools = tools
        self.line_started = False  # with tools: a word of this question's answer is on the output line
        self.generate_settings = dict(
            temperature=params.temperature,
            top_p=params.top_p,
            top_k=params.top_k,
            repetition_penalty=params.repetition_penalty,
            seed=params.seed,
            method=settings.method,
            presence_penalty=params.presence_penalty,
            frequency_penalty=params.frequency_penalty,
            max_new_tokens=settings.max_new_tokens,
            stop=settings.stop,
            chat_template_kwargs=template_kwargs(args),
        )
        if tools is not None:
            self.generate_settings["tools"] = tools.toolbox.definitions()

    def note(self, text: str) -> None:
        note_on_stderr(text)

    def read_line(self) -> str | None:
        if not self.interactive:
            line = sys.stdin.readline()
            return None if line == "" else line.rstrip("\r\n")
        while True:
            try:
                return input("> ")
            except EOFError:
                print()
                return None
            except KeyboardInterrupt:
                print()
                self.note("(Ctrl-C stops an answer; /quit or Ctrl-D leaves)")

    def run(self) -> int:
        if self.interactive:
            self.note(HELP)
        while True:
            line = self.read_line()
            if line is None:
                break
            text = line.strip()
            if not text:
                continue
            if text.startswith("/"):
                if not self.command(text):
                    break
                continue
            self.turn(text)
        return 1 if self.failed_turns else 0

    def command(self, text: str) -> bool:
        """Run a /command; False means leave."""
        name, _, rest = text.partition(" ")
        if name in ("/quit", "/exit"):
            return False
        if name == "/reset":
            self.history.clear()
            self.note("(new conversation)")
        elif name == "/system":
            self.system = rest.strip() or None
            self.note(f"(system prompt {'set' if self.system else 'cleared'})")
        elif name == "/file":
            self.add_document(rest)
        elif name == "/help":
            self.note(HELP)
        else:
            self.note(f"unknown command {name}; {HELP}")
        return True

    def add_document(self, typed: str) -> None:
        """/file PATH: the document's text, fenced under its name, waits for the next message (a path in
        quotes, as Windows' Copy as path gives it, is read without them)."""
        from core.system.file_names import unquoted
        from core.text.document_text import document_text, fenced

        typed = unquoted(typed)
        if not typed:
            self.note("/file takes a path: /file notes.txt")
            return
        path = Path(typed).expanduser()
        try:
            text = document_text(path)  # a damaged PDF can keep the parser busy: Ctrl-C stops it, not the chat
        except DocumentError as error:
            self.note(f"(not added: {error})")
            return
        except KeyboardInterrupt:
            self.note(f"(not added: reading {path.name} was stopped)")
            return
        self.documents.append(fenced(path.name, text))
        self.note(f"({path.name} goes into your next message: {len(text):,} characters)")

    def turn(self, user_text: str) -> None:
        if self.loader is not None and not self.loader.loaded:
            if not self.loader.load(tries=1):
                self.failed_turns += 1
                return
            if self.tools is not None and self.tools.fmt is None:  # the first load died: the format is known now
                self.tools.fmt = self.loader.tool_call_format
        if self.documents:  # /file's documents lead the message, as the app's attached files do
            user_text = "\n".join(self.documents) + user_text  # each block ends its line
            self.documents.clear()
        user = {"role": "user", "content": user_text}
        system = [{"role": "system", "content": self.system}] if self.system else []
        if self.tools is not None:
            self.tool_turn(system, user)
            return
        (answer, reasoning), ok = self.answer(system + self.history + [user])
        if ok:
            reply = {"role": "assistant", "content": answer}
            if reasoning:  # for templates that render earlier thinking (the others leave it out)
                reply["reasoning_content"] = reasoning
            self.history += [user, reply]
        else:
            self.failed_turns += 1

    def tool_turn(self, system: list[dict], user: dict) -> None:
        """A question answered with tools (core.tools.loop.run_tool_turn): the answer's words on one stdout line
        whatever the rounds of calls between them; calls, questions and results on stderr."""
        tools = self.tools

        def generate(messages: list[dict]) -> tuple[str, str] | None:
            produced, ok = self.answer(messages, end_line=False)
            return produced if ok else None

        self.line_started = False
        outcome = run_tool_turn(
            system + self.history + [user],
            generate,
            tools.toolbox,
            tools.fmt,
            tools.approvals,
            tools.approve,
            tools.show_result,
            wait=self.wait_for_tool,
        )
        print(flush=True)
        if outcome.capped:
            self.note(f"({cap_note()})")
        if outcome.answered:
            self.history += [user, *outcome.messages]
        else:
            self.failed_turns += 1

    def wait_for_tool(self, future) -> ToolResult | None:
        with _catch_interrupt() as interrupt:
            return self.tools.wait(future, lambda: interrupt.requested)

    def answer(self, messages: list[dict], end_line: bool = True) -> tuple[tuple[str, str], bool]:
        """Stream one answer to stdout (a thinking model's reasoning dimmed before it; with tools, the calls'
        text left out); returns ((text, reasoning), answered). `end_line`: end the output line after it."""
        client = self.client
        request_id = client.generate(messages, **self.generate_settings)
        pieces: list[str] = []
        thoughts: list[str] = []
        printer = ThinkingPrinter(self.hide_thinking)
        calls = ToolCallStream(self.tools.fmt, frozenset(self.tools.toolbox.tools)) if self.tools else None

        def visible(parts: list) -> str:
            """The answer's words (calls left out); spaces before the line's first word too."""
            text = "".join(part for part in parts if isinstance(part, str))
            if not self.line_started:
                text = text.lstrip()
                self.line_started = bool(text)
            return text

        cancel_sent = False
        with _catch_interrupt() as interrupt:
            while True:
                if interrupt.requested and not cancel_sent and client.alive:
                    client.cancel(request_id)
                    cancel_sent = True
                event = client.poll(0.1)
                if event is None:
                    continue
                if isinstance(event, P.TokenChunk) and event.request_id == request_id:
                    pieces.append(event.text)
                    thoughts.append(event.reasoning)
                    printer.write(event.reasoning, visible(calls.push(event.text)) if calls else event.text)
                elif isinstance(event, P.ContextTrimmed) and event.request_id == request_id:
                    # drop them here too, so the next turn's prompt starts like this one (KV cache reuse)
                    self.history = self.history[event.dropped_messages :]
                    self.note(f"(conversation too long: left out the {event.dropped_messages} oldest messages)")
                elif isinstance(event, P.AutoChoice) and event.request_id == request_id and self.interactive:
                    if not pieces and not thoughts:  # before the answer only: a note must not cut a streamed line
                        self.note(f"({event.reason})")
                elif isinstance(event, P.BudgetReduced) and event.request_id == request_id:
                    self.note(f"(out of GPU memory: tree budget {event.old_budget} -> {event.new_budget})")
                elif isinstance(event, P.Finished) and event.request_id == request_id:
                    if calls:
                        printer.write("", visible(calls.finish()))
                    printer.end()
                    if end_line:
                        print(flush=True)
                    if self.interactive:
                        self.note(self.finish_line(event))
                    return ("".join(pieces), "".join(thoughts)), True
                elif isinstance(event, P.Error) and event.request_id in (request_id, None):
                    if event.kind == "protocol" and event.request_id is None:
                        continue
                    printer.end()
                    print(flush=True)
                    self.note(f"error: {event.message}" + (f" ({event.hint})" if event.hint else ""))
                    if event.kind == "context_length" and self.loader is not None:
                        advice = longer_context_advice(
                            event.prompt_tokens, self.generate_settings["max_new_tokens"], self.loader.models
                        )
                        if advice:
                            self.note(advice)
                    if event.kind == "engine_died":
                        self.reconnect()
                    return ("".join(pieces), "".join(thoughts)), False

    def finish_line(self, event: P.Finished) -> str:
        if self.source is None:
            return (
                f"[{event.reason}] {token_count(event.generated_tokens)}; prompt {token_count(event.prompt_tokens)}, "
                f"{event.reused_prefix_tokens:,} reused from the cache"
            )
        counts = (
            f" {token_count(event.generated_tokens)}; prompt {token_count(event.prompt_tokens)}"
            if event.prompt_tokens
            else ""
        )
        return f"[{event.reason}]{counts} ({self.source})"

    def reconnect(self) -> None:
        """After a lost engine: start it again (a remote server: connect again); if that fails, say so and go
        on (the next message tries again)."""
        self.note("(restarting the engine)" if self.source is None else "(connecting again)")
        try:
            self.client.restart(reload=True, wait=True)
        except LoadDiedError as error:  # the reload died as well: the next message loads again
            if self.loader is not None:
                self.loader.lost()
            say_load_died(error, "the next message tries again")
        except (SpecExecError, OSError, TimeoutError) as error:
            self.note(f"(could not: {error})")


def run_remote(args: argparse.Namespace, interactive: bool) -> int:
    """The chat through an OpenAI-compatible server (RemoteError, in plain words, when it cannot be used)."""
    from core.remote.endpoint import Endpoint, checked_key, normalise_base_url
    from core.remote.engine import RemoteEngine
    from core.remote.key_store import stored_key

    base_url = normalise_base_url(args.remote)
    endpoint = Endpoint(base_url, checked_key(args.api_key or stored_key(base_url)))
    if endpoint.key_in_clear:
        print(f"warning: the API key travels unencrypted to {endpoint.host} (http, not https)", file=sys.stderr)
    engine = RemoteEngine(endpoint)
    try:
        engine.start()
        try:
            ready = engine.load(
                args.model, wait=True, on_progress=lambda event: print(event.stage, file=sys.stderr, flush=True)
            )
        except RemoteError as error:
            print(f"error: {error}" + (f" ({error.hint})" if error.hint else ""), file=sys.stderr)
            return 2
        source = f"{ready.models['target']} on {endpoint.label}"
        print(f"chatting with {source}", file=sys.stderr, flush=True)
        return ChatLoop(engine, args, interactive, source).run()
    finally:
        engine.shutdown()


def run(args: argparse.Namespace) -> int:
    decoding_settings(args)  # bad flags fail here, before the engine starts
    if args.allow_tools and args.mcp_config is None:
        raise InvalidSettingError("--allow-tools needs --mcp-config FILE (the MCP servers whose tools to allow)")
    if args.remote is not None:
        if args.mcp_config is not None:
            raise InvalidSettingError("--mcp-config works with a model on this computer, not with --remote")
        return run_remote(args, sys.stdin.isatty())
    interactive = sys.stdin.isatty()
    # a bad tools file fails here too; its servers start while the engine does (both take seconds)
    servers = read_config_file(args.mcp_config) if args.mcp_config is not None else None
    tools = None
    client = EngineClient(torch_threads=args.threads)
    report = LoadReport(args.verbose, sys.stderr)
    try:
        loader = ModelLoader(client, args, report)  # checks the load flags before the engine starts
        client.start(wait=False)
        if servers is not None:
            tools = TerminalTools.start(
                servers,
                args.mcp_config,
                args.allow_tools,
                prompt_reader(interactive),
                note_on_stderr,
            )
        client.wait_started()
        # a death while loading (out of memory?) is said, tried once more, then the chat goes on
        if loader.load(tries=2) and tools is not None:
            tools.fmt = loader.tool_call_format
            if tools.fmt is None:
                raise InvalidSettingError(
                    "this model's chat template has no tool support, so --mcp-config cannot "
                    "be used with it (tools need a model such as Qwen2.5, Qwen3 or Llama 3.1)"
                )
        return ChatLoop(client, args, interactive, loader=loader, tools=tools).run()
    finally:
        client.shutdown()
        if tools is not None:
            tools.close()
