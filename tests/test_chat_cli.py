"""`specexec chat` end to end: a real CLI process driving a real engine process with tiny models."""

from __future__ import annotations

import os
import pty
import re
import select
import signal
import subprocess
import sys
import time

import psutil
import pytest

from test_engine import save_tiny_pair

pytestmark = pytest.mark.timeout(150)

FLAGS = ["--threads", "1", "--temperature", "0", "--budget", "8", "--max-depth", "4", "--expand", "4"]


@pytest.fixture(scope="module")
def model_dirs(tmp_path_factory):
    return save_tiny_pair(tmp_path_factory.mktemp("chat-models"))


def chat_command(model_dirs, *extra: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "core.cli.main",
        "chat",
        "--target",
        model_dirs[0],
        "--draft",
        model_dirs[1],
        *FLAGS,
        *extra,
    ]


def greedy_answer(model_dirs, messages, max_new_tokens) -> str:
    """What the CLI should print for `messages`: in-process greedy generation with the CLI's settings."""
    from conftest import torch_threads
    from core.decoding.generation import generate
    from core.decoding.settings import DecodingSettings, SamplingParams, TreeSettings
    from core.loading.load import load_model
    from core.text.prompts import Prompt, encode_prompt

    with torch_threads(1):
        target = load_model(model_dirs[0], dtype="float32", device="cpu")
        draft = load_model(model_dirs[1], dtype="float32", device="cpu")
        prompt = encode_prompt(target.tokenizer, Prompt(messages=tuple(messages)))
        settings = DecodingSettings(tree=TreeSettings(8, 4, 4), max_new_tokens=max_new_tokens)
        return generate(target.lm, draft.lm, target.tokenizer, prompt, SamplingParams(temperature=0), settings).text


@pytest.mark.slow
def test_scripted_chat_answers_each_line_and_keeps_history(model_dirs, tmp_path):
    document = tmp_path / "notes.txt"
    document.write_text("w16 w17", encoding="utf-8")
    script = (
        f'w10 w11\n/system w7 w8\n\nw12 w13 w14\n/reset\nw15\n/file {tmp_path / "gone.txt"}\n/file "{document}"\nw18\n'
    )
    result = subprocess.run(
        chat_command(model_dirs, "--max-new-tokens", "12"), input=script, capture_output=True, text=True, timeout=140
    )
    assert result.returncode == 0, result.stderr
    answers = result.stdout.split("\n")
    assert len(answers) == 5 and answers[-1] == "", result.stdout  # four answers, one line each
    user1, user2, user3 = ({"role": "user", "content": t} for t in ("w10 w11", "w12 w13 w14", "w15"))
    system = {"role": "system", "content": "w7 w8"}
    assert answers[0] == greedy_answer(model_dirs, [user1], 12)
    history = [system, user1, {"role": "assistant", "content": answers[0]}, user2]
    assert answers[1] == greedy_answer(model_dirs, history, 12)
    assert answers[2] == greedy_answer(model_dirs, [system, user3], 12)  # /reset forgot turns 1-2
    # /file: the document leads the next message, fenced under its name, as the app adds it
    assert "(not added: gone.txt is not a file that can be read)" in result.stderr
    assert "(notes.txt goes into your next message: 7 characters)" in result.stderr
    user4 = {"role": "user", "content": "notes.txt:\n```\nw16 w17\n```\nw18"}
    history = [system, user3, {"role": "assistant", "content": answers[2]}, user4]
    assert answers[3] == greedy_answer(model_dirs, history, 12)


@pytest.mark.slow
def test_a_message_too_long_for_the_context_says_the_length_that_holds_it(model_dirs):
    """Loaded with room for 64 tokens of the tiny models' 128: an 80-word message fails, with the
    --context-length that would hold it; the chat goes on (and ends with 1, as a script with a failed turn does)."""
    long_line = " ".join(f"w{6 + i % 50}" for i in range(80))
    result = subprocess.run(
        chat_command(model_dirs, "--max-new-tokens", "8", "--context-length", "64"),
        input=f"{long_line}\nw10 w11\n",
        capture_output=True,
        text=True,
        timeout=140,
    )
    assert result.returncode == 1, result.stderr
    assert "but the model's context window is 64 tokens" in result.stderr
    # up to the models' own limit (128): a step of 1,024 would be longer than they keep
    assert "(these models keep up to 128 tokens: --context-length 128 holds it)" in result.stderr
    assert result.stdout.split("\n")[-2] == greedy_answer(model_dirs, [{"role": "user", "content": "w10 w11"}], 8)


@pytest.mark.slow
def test_offload_flags_reach_the_engine(model_dirs):
    """--offload on loads the target through the offloaded path (its report is on stderr with --verbose) with
    the same answer; a bad --resident-layers is a clear error before any engine starts."""
    result = subprocess.run(
        chat_command(model_dirs, "--max-new-tokens", "8", "--offload", "on", "--resident-layers", "1", "--verbose"),
        input="w10 w11\n",
        capture_output=True,
        text=True,
        timeout=140,
    )
    assert result.returncode == 0, result.stderr
    assert "layers in host RAM" in result.stderr  # core.offload.offloaded_lm.OffloadReport.summary
    assert result.stdout == greedy_answer(model_dirs, [{"role": "user", "content": "w10 w11"}], 8) + "\n"
    bad = subprocess.run(
        chat_command(model_dirs, "--resident-layers", "most"), input="", capture_output=True, text=True, timeout=60
    )
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert "error: --resident-layers takes 'auto' or a number" in bad.stderr


@pytest.fixture(scope="module")
def endless_dirs(tmp_path_factory):
    """A tiny pair that never writes its end of turn and keeps 4,096 tokens: an answer streams for seconds."""
    from app_fixtures import save_tiny_pair as save_endless_pair

    return save_endless_pair(tmp_path_factory.mktemp("endless-models"))


@pytest.mark.slow
def test_ctrl_c_stops_the_answer_not_the_program(endless_dirs):
    """Interactive mode (stdin is a terminal): Ctrl-C goes to the whole process group, as a terminal sends
    it; the answer stops, the chat and its engine live on and answer the next line, which Ctrl-C stops too.
    Each answer may run to 3,000 tokens, seconds of work, so it is still streaming when Ctrl-C comes (100
    tokens of a 128-token model could end first on a busy machine)."""
    master, slave = pty.openpty()
    process = subprocess.Popen(
        chat_command(endless_dirs, "--max-new-tokens", "3000", "--method", "sequential"),
        stdin=slave,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
    )
    os.close(slave)
    try:
        os.write(master, b"w10 w11\n")
        streamed = until_answer_streams(process.stdout.fileno())  # not the prompt, nor what readline writes
        assert re.search(rb"w\d", streamed)
        engines = psutil.Process(process.pid).children()
        os.killpg(process.pid, signal.SIGINT)
        time.sleep(0.5)
        assert process.poll() is None and all(e.is_running() for e in engines)
        until_answer_streams(process.stdout.fileno(), rb"> ")  # the stopped answer's end: the next prompt
        os.write(master, b"w12\n")
        until_answer_streams(process.stdout.fileno())
        os.killpg(process.pid, signal.SIGINT)
        os.write(master, b"/quit\n")
        out, err = process.communicate(timeout=120)
        assert process.returncode == 0, err
        assert err.count(b"[cancelled]") == 2, err  # each answer's status line
        assert err.count(b" reused from the cache") == 2  # and each ended as a stopped answer does
    finally:
        if process.poll() is None:
            process.kill()
        os.close(master)


def until_answer_streams(fd: int, pattern: bytes = rb"w\d", timeout: float = 120.0) -> bytes:
    """What the chat wrote on stdout until its answer's first word (the tiny models write "wNN" words), or
    until `pattern`: the "> " prompt alone, or the escape sequence readline writes to set a terminal up, came
    before the model had even loaded, and a Ctrl-C sent then found no answer to stop."""
    seen, deadline = b"", time.monotonic() + timeout
    while not re.search(pattern, seen):
        left = deadline - time.monotonic()
        assert left > 0, f"no answer streamed within {timeout:.0f} s: {seen!r}"
        if select.select([fd], [], [], left)[0]:
            chunk = os.read(fd, 256)
            assert chunk, f"the chat closed its output before answering: {seen!r}"
            seen += chunk
    return seen


def _engine_children(process: subprocess.Popen) -> list[psutil.Process]:
    """The chat's engine processes (multiprocessing children, not its resource tracker)."""
    found = []
    for child in psutil.Process(process.pid).children(recursive=True):
        try:
            command = " ".join(child.cmdline())
        except psutil.Error:
            continue
        if "spawn_main" in command and "resource_tracker" not in command:
            found.append(child)
    return found


def _kill_engine_while_loading(process: subprocess.Popen, lines: list[str]) -> None:
    """Read the chat's stderr until it reports loading the target (whose weights are a FIFO nobody writes:
    the engine waits there, loading), then SIGKILL that engine, as the system's out-of-memory killer would."""
    for line in process.stderr:
        lines.append(line)
        if line.startswith("Loading the target model"):
            break
    engines = _engine_children(process)
    assert len(engines) == 1, (engines, lines)
    engines[0].send_signal(signal.SIGKILL)
    engines[0].wait(timeout=30)


@pytest.mark.slow
@pytest.mark.timeout(600)  # three engine starts on 2 loaded cores
def test_an_engine_killed_while_loading_is_a_load_failure_tried_again_and_the_chat_goes_on(model_dirs, tmp_path):
    """The weights of the target are a named pipe: the engine blocks reading them, as a big model's load takes
    its time, and is killed there twice (the first load and its one retry). The chat says it as a load failure
    with what to try, does not exit, and loads again for the next line, which (the real weights back in place)
    it answers."""
    import shutil

    target = tmp_path / "target"
    shutil.copytree(model_dirs[0], target)
    weights = target / "model.safetensors"
    real = tmp_path / "weights.safetensors"
    weights.rename(real)
    os.mkfifo(weights)
    process = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "core.cli.main",
            "chat",
            "--target",
            str(target),
            "--draft",
            model_dirs[1],
            *FLAGS,
            "--max-new-tokens",
            "8",
            "--verbose",
        ],  # --verbose: each load step on stderr, the target's among them
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: list[str] = []
    try:
        _kill_engine_while_loading(process, lines)  # the first load
        _kill_engine_while_loading(process, lines)  # the retry
        said = "".join(lines)
        assert "error: the models could not be loaded: the engine stopped while loading them" in said
        assert "SIGKILL" in said and "Try a smaller model" in said and "close other programs" in said
        assert "(loading once more)" in said and "restart it to go on" not in said
        weights.unlink()
        real.rename(weights)
        out, err = process.communicate("w10 w11\n", timeout=400)
        err = said + err
        assert "(the next message tries again)" in err and "Traceback" not in err, err
        assert out == greedy_answer(model_dirs, [{"role": "user", "content": "w10 w11"}], 8) + "\n"
        assert process.returncode == 0, err
    finally:
        if process.poll() is None:
            process.kill()
