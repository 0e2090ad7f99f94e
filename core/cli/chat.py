"""`specexec chat`: a terminal chat with the engine running in its own process.

Answers stream as they are generated; the conversation (history) is kept, and each new turn reuses the
engine's KV cache of the conversation so far. Commands: /reset (forget the conversation), /system TEXT (set
the system prompt; /system alone clears it), /help, /quit. Ctrl-C stops the current answer (the words
already shown stay in the history) but not the program; Ctrl-D (end of input) leaves.

When stdin is not a terminal, each input line is answered in turn (one answer per output line, no prompts)
and the command exits at the end of input: 0 if every turn was answered, 1 otherwise. Loading steps (and
where an offloaded target's layers went) are reported on stderr in both modes.

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

from core.cli.options import add_generation_arguments, decoding_settings, engine_load_settings, sampling_params
from core.cli.thinking_output import ThinkingPrinter, add_thinking_arguments, template_kwargs
from core.engine import protocol as P
from core.engine.client import EngineClient
from core.cli.chat_tools import TerminalTools, prompt_reader
from core.engine.connection import EngineConnection
from core.errors import InvalidSettingError, RemoteError, SpecExecError
from core.text.tool_calls import ToolCallStream
from core.tools.connection import ToolResult
from core.tools.loop import cap_note, run_tool_turn

HELP = "commands: /reset (new conversation), /system TEXT (system prompt), /help, /quit; Ctrl-C stops an answer"


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_generation_arguments(parser)
    parser.add_argument("--system", default=None, help="system prompt")
    add_thinking_arguments(parser)
    tools = parser.add_argument_group("tools (MCP servers the model may call)")
    tools.add_argument("--mcp-config", default=None, metavar="FILE",
                       help='MCP servers in the common {"mcpServers": {...}} JSON; each call is asked about (y/a/N)')
    tools.add_argument("--allow-tools", action="store_true", help="allow every tool call without asking")
    remote = parser.add_argument_group("a model on another computer (any OpenAI-compatible server)")
    remote.add_argument("--remote", default=None, metavar="URL",
                        help="chat through the server at URL (e.g. http://192.168.1.20:8765/v1) instead of a local engine")
    remote.add_argument("--api-key", default=None, metavar="KEY",
                        help="the server's API key (default: the key saved for that address in the app, else none)")
    remote.add_argument("--model", default="", metavar="M", help="the server's model (default: the first it lists)")


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


class ChatLoop:
    """source: where answers come from, for a remote server ("alpha-7b on gpu-box"); None for this computer."""

    def __init__(self, client: EngineConnection, args: argparse.Namespace, interactive: bool,
                 source: str | None = None, tools: TerminalTools | None = None) -> None:
        settings = decoding_settings(args)  # checks the flags before anything is loaded
        params = sampling_params(args)
        self.client = client
        self.source = source
        self.interactive = interactive
        self.system: str | None = args.system
        self.history: list[dict[str, str]] = []
        self.failed_turns = 0
        self.hide_thinking = args.hide_thinking
        self.tools = tools
        self.line_started = False  # with tools: a word of this question's answer is on the output line
        self.generate_settings = dict(
            temperature=params.temperature, top_p=params.top_p, top_k=params.top_k,
            repetition_penalty=params.repetition_penalty, seed=params.seed, method=settings.method,
            presence_penalty=params.presence_penalty, frequency_penalty=params.frequency_penalty,
            max_new_tokens=settings.max_new_tokens, stop=settings.stop, chat_template_kwargs=template_kwargs(args),
        )
        if tools is not None:
            self.generate_settings["tools"] = tools.toolbox.definitions()

    def note(self, text: str) -> None:
        print(text, file=sys.stderr, flush=True)

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
        elif name == "/help":
            self.note(HELP)
        else:
            self.note(f"unknown command {name}; {HELP}")
        return True

    def turn(self, user_text: str) -> None:
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
        outcome = run_tool_turn(system + self.history + [user], generate, tools.toolbox, tools.fmt, tools.approvals,
                                tools.approve, tools.show_result, wait=self.wait_for_tool)
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
                    self.history = self.history[event.dropped_messages:]
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
                    if event.kind == "engine_died":
                        self.reconnect()
                    return ("".join(pieces), "".join(thoughts)), False

    def finish_line(self, event: P.Finished) -> str:
        if self.source is None:
            return (f"[{event.reason}] {event.generated_tokens} tokens; prompt {event.prompt_tokens} tokens, "
                    f"{event.reused_prefix_tokens} reused from the cache")
        counts = f" {event.generated_tokens} tokens; prompt {event.prompt_tokens} tokens" if event.prompt_tokens else ""
        return f"[{event.reason}]{counts} ({self.source})"

    def reconnect(self) -> None:
        """After a lost engine: start it again (a remote server: connect again); if that fails, say so and go
        on (the next message tries again)."""
        self.note("(restarting the engine)" if self.source is None else "(connecting again)")
        try:
            self.client.restart(reload=True, wait=True)
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
            ready = engine.load(args.model, wait=True,
                                on_progress=lambda event: print(event.stage, file=sys.stderr, flush=True))
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
    load_settings = engine_load_settings(args)
    interactive = sys.stdin.isatty()
    tools = None
    if args.mcp_config is not None:
        tools = TerminalTools.start(args.mcp_config, args.allow_tools, prompt_reader(interactive),
                                    lambda text: print(text, file=sys.stderr, flush=True))
    client = EngineClient(torch_threads=args.threads)
    try:
        client.start()
        ready = client.load(
            args.target,
            args.draft if args.method != "sequential" else None,
            budget=args.budget, max_depth=args.max_depth, expand=args.expand, draft_top_p=args.draft_top_p,
            wait=True, on_progress=lambda event: print(event.stage, file=sys.stderr, flush=True),
            **load_settings,
        )
        if tools is not None:
            tools.fmt = ready.models.get("tool_call_format")
            if tools.fmt is None:
                raise InvalidSettingError("this model's chat template has no tool support, so --mcp-config cannot "
                                          "be used with it (tools need a model such as Qwen2.5, Qwen3 or Llama 3.1)")
        return ChatLoop(client, args, interactive, tools=tools).run()
    finally:
        client.shutdown()
        if tools is not None:
            tools.close()
