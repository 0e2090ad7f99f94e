"""Shared fixtures: tiny random float64 Llama models built from a config (milliseconds, no download)."""

from __future__ import annotations

import copy
import io
import os
import shutil
import queue
import subprocess
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import torch
from transformers import LlamaConfig, LlamaForCausalLM

from core.modeling.causal_lm import CausalLM

if TYPE_CHECKING:
    from core.server.api_errors import ApiError
    from core.engine.process import Engine

if os.environ.get("PYTEST_XDIST_WORKER"):  # parallel workers (scripts/run-tests.sh) already fill the cores:
    torch.set_num_threads(1)  # torch's own threads on top would only wait on each other (see torch_threads)
    # ... and so would those of every process a test starts (the GPU check's parts, `bench matmul`, the doctor),
    # which take torch's default of one thread per core unless they set their own count (the engine and
    # `generate` do: core.system.threads). Under two busy loops `gpu-check.sh --cpu` took 98.6 s with the
    # default and 21.7 s with one thread (docs/development.md).
    os.environ["OMP_NUM_THREADS"] = "1"


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist: a run without it (-p no:xdist) ignores it
def pytest_xdist_auto_num_workers(config: pytest.Config) -> int | None:
    """`-n auto` (scripts/run-tests.sh) starts one worker more than xdist's count of cores. A worker spends
    part of its time waiting, not computing: for a server or engine in another process to start, for a
    timeout a test is about (a hanging tool, a dying doctor); the extra worker fills those waits. On the 2
    idle cores of the reference machine the whole suite took 514 s with 3 workers and 572 s with 2, the CPUs
    busy 96% of the run instead of ~86% (docs/development.md). PYTEST_XDIST_AUTO_NUM_WORKERS, when set, is
    xdist's own count and wins (None defers to xdist)."""
    if os.environ.get("PYTEST_XDIST_AUTO_NUM_WORKERS"):
        return None
    from xdist.plugin import pytest_xdist_auto_num_workers as cores

    return cores(config) + 1


# The files that take longest on a worker (21-103 s each on 2 cores, 2026-12-07: a timed per-test log of a whole
# run), longest first. Workers take a file at a time from a queue; xdist orders it by number of tests, which put
# files of a few long tests (engines, chats, the GPU check) last, and the run ended with one worker on such a file
# and the other cores idle. Handed out longest first, they end while the many short files fill the other workers.
# A stale entry only costs a little of that balance.
LONGEST_FILES = (
    "test_specinfer.py",
    "test_serve.py",
    "test_trace.py",
    "test_doctor.py",
    "test_chat_cli.py",
    "test_thinking_budget.py",
    "test_exactness.py",
    "test_chat_tools_cli.py",
    "test_app_window.py",
    "test_gpu_check.py",
    "test_reasoning.py",
    "test_app_wizard.py",
    "test_serve_agents.py",
    "test_constraints.py",
    "test_download_safety.py",
    "test_cli.py",
    "test_serve_api.py",
    "test_remote_serve.py",
    "test_meta_device.py",
    "test_tools_mcp.py",
    "test_engine.py",
    "test_serve_faults.py",
    "test_builtin.py",
    "test_app_tools.py",
)


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """On parallel workers, LONGEST_FILES first (scripts/run-tests.sh keeps this order with
    --no-loadscope-reorder); the rest keep their order. Every worker sorts the same way, as xdist requires."""
    if os.environ.get("PYTEST_XDIST_WORKER"):
        rank = {name: place for place, name in enumerate(LONGEST_FILES)}
        items.sort(key=lambda item: rank.get(item.path.name, len(rank)))  # stable: a file's tests stay in order


@pytest.fixture(scope="session", autouse=True)
def session_cache_dir(tmp_path_factory) -> Iterator[None]:
    """Point SPECEXEC_CACHE_DIR at a session folder, so what tests cache (the autotuner's cost models) never
    lands in the user's cache; the converted built-in model is linked in from the real cache when it is
    there, so tests do not convert it again, else from a folder the session's workers share, so it is
    converted once. Engine processes inherit the variable."""
    from core.system.env import CACHE_DIR_ENV
    from core.system.locations import cache_dir, old_cache_dir

    folder = tmp_path_factory.mktemp("specexec-cache")
    real = next((c for c in (cache_dir(), old_cache_dir()) if c is not None and (c / "builtin").is_dir()), None)
    if real is not None:  # the user's cache, under its name before an update too
        (folder / "builtin").symlink_to(real / "builtin", target_is_directory=True)
    elif os.environ.get("PYTEST_XDIST_WORKER"):  # one conversion for all workers (~25 s each on a fresh machine)
        shared = tmp_path_factory.getbasetemp().parent / "specexec-builtin"
        shared.mkdir(exist_ok=True)  # a conversion publishes by an atomic rename: racing workers keep the first
        (folder / "builtin").symlink_to(shared, target_is_directory=True)
    previous = os.environ.get(CACHE_DIR_ENV)
    os.environ[CACHE_DIR_ENV] = str(folder)
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop(CACHE_DIR_ENV, None)
        else:
            os.environ[CACHE_DIR_ENV] = previous


def make_tiny_llama(seed: int, vocab: int = 64, layers: int = 2, hidden: int = 32, dtype=torch.float64) -> CausalLM:
    """A random Llama with 4 heads / 2 KV heads; float64 so tree-vs-sequential logits agree to ~1e-15."""
    torch.manual_seed(seed)
    config = LlamaConfig(
        vocab_size=vocab,
        hidden_size=hidden,
        intermediate_size=2 * hidden,
        num_hidden_layers=layers,
        num_attention_heads=4,
        num_key_value_heads=2,
        max_position_embeddings=1024,
        bos_token_id=1,
        eos_token_id=0,
    )
    config._attn_implementation = "sdpa"
    model = LlamaForCausalLM(config).to(dtype).eval()
    return CausalLM(model=model, name=f"tiny-{seed}", eos_token_ids=(0,), max_context=1024)


def sharpen(model: CausalLM, factor: float) -> CausalLM:
    """Scale the lm_head so distributions are peaked like a real LM's (more acceptance, deeper trees)."""
    with torch.no_grad():
        model.model.lm_head.weight.mul_(factor)
    return model


def noisy_copy(target: CausalLM, seed: int = 0, scale: float = 0.05) -> CausalLM:
    """A draft that resembles the target: the target's weights plus `scale` relative noise, so trees get
    accepted the way a quantised draft's do."""
    torch.manual_seed(seed)
    model = copy.deepcopy(target.model)
    with torch.no_grad():
        for param in model.parameters():
            param.add_(scale * torch.randn_like(param) * param.std().clamp_min(1e-3))
    return CausalLM(
        model=model, name=f"{target.name}-draft", eos_token_ids=target.eos_token_ids, max_context=target.max_context
    )


@contextmanager
def torch_threads(count: int) -> Iterator[None]:
    """Run a block with `count` intra-op threads: thousands of tiny forwards on a shared 2-core machine are
    several times faster on one thread (OpenMP barriers cost more than the matmuls)."""
    previous = torch.get_num_threads()
    torch.set_num_threads(count)
    try:
        yield
    finally:
        torch.set_num_threads(previous)


def in_process_engine(**engine_options) -> tuple["Engine", Callable[[object], list]]:
    """An engine run in this process (no child process): `serve(message)` hands it one request, runs what it
    queued to the end and returns the events it emitted meanwhile. engine_options: Engine's keywords."""
    from core.engine.process import Engine

    events: queue.Queue = queue.Queue()
    engine = Engine(queue.Queue(), events, **engine_options)

    def serve(message) -> list:
        engine.accept(message)
        while engine.pending:
            engine.handle(engine.pending.popleft())
        return [events.get() for _ in range(events.qsize())]

    return engine, serve


def run_cli(capsys: pytest.CaptureFixture[str], *args: str, stdin: str | None = None) -> subprocess.CompletedProcess:
    """`specexec ARGS` run in this process, as a finished process would report it (exit code, stdout, stderr):
    for tests of what a command says and returns, where no process boundary is under test. A child process
    pays 5-14 s to import torch and transformers again; this pays nothing. `stdin`: what the command reads
    (not a terminal, as from a pipe). torch's thread count, which the command sets, is put back."""
    from core.cli.main import main

    threads, previous_stdin = torch.get_num_threads(), sys.stdin
    capsys.readouterr()  # what the test printed before is not the command's
    if stdin is not None:
        sys.stdin = io.StringIO(stdin)
    try:
        code = main(list(args))
    except SystemExit as exit_:  # argparse's usage errors
        code = exit_.code if isinstance(exit_.code, int) else (0 if exit_.code is None else 1)
    finally:
        torch.set_num_threads(threads)
        sys.stdin = previous_stdin
    out, err = capsys.readouterr()
    return subprocess.CompletedProcess(["specexec", *args], code, out, err)


def refused_request(parse: Callable, body: dict, defaults) -> "ApiError":
    """The API server's check `parse(body, defaults)` (core.server.requests) must refuse `body` with a 400:
    the error, for the test to read its field (`param`) and its words."""
    from core.server.api_errors import ApiError

    with pytest.raises(ApiError) as caught:
        parse(body, defaults)
    assert caught.value.status == 400
    return caught.value


@pytest.fixture(scope="module")
def one_torch_thread() -> Iterator[None]:
    with torch_threads(1):
        yield


@pytest.fixture(scope="session")
def tiny_target() -> CausalLM:
    return sharpen(make_tiny_llama(0), 8.0)


@pytest.fixture(scope="session")
def tiny_draft(tiny_target) -> CausalLM:
    return noisy_copy(tiny_target)


def make_word_tokenizer(vocab: int = 64):
    """A word-level tokenizer whose ids match the tiny models' vocabulary: token i is the word 'wi'."""
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    words = {f"w{i}": i for i in range(vocab)}
    words["w0"] = 0
    backend = Tokenizer(models.WordLevel(vocab=words, unk_token="w2"))
    backend.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    tokenizer = PreTrainedTokenizerFast(tokenizer_object=backend, eos_token="w0", bos_token="w1", unk_token="w2")
    tokenizer.chat_template = (
        "{% for m in messages %}w3 {{ m['role'] }} {{ m['content'] }} w4 {% endfor %}"
        "{% if add_generation_prompt %}w3 assistant {% endif %}"
    )
    return tokenizer


@pytest.fixture(scope="session")
def word_tokenizer():
    return make_word_tokenizer()


@pytest.fixture
def dict_keyring() -> Iterator[dict[tuple[str, str], str]]:
    """A working keyring backend for this test (the OS keyrings cannot run on a headless machine): a
    dictionary behind keyring's own backend API, which is all the secret stores talk to. Yields the secrets,
    keyed by (service, user name)."""
    import keyring
    from keyring.backend import KeyringBackend

    # before the class below exists: keyring picks its first backend among the subclasses of KeyringBackend
    # by priority, so asked later it would choose this one, and "restore" it for the tests that follow
    previous = keyring.get_keyring()

    class DictKeyring(KeyringBackend):
        priority = 1

        def __init__(self) -> None:
            super().__init__()
            self.secrets: dict[tuple[str, str], str] = {}

        def get_password(self, service, username):
            return self.secrets.get((service, username))

        def set_password(self, service, username, password):
            self.secrets[(service, username)] = password

        def delete_password(self, service, username):
            del self.secrets[(service, username)]

    backend = DictKeyring()
    keyring.set_keyring(backend)
    try:
        yield backend.secrets
    finally:
        keyring.set_keyring(previous)


@pytest.fixture
def no_keyring():
    """No usable keyring (keyring's own "fail" backend, as on a headless Linux box)."""
    import keyring
    from keyring.backends import fail

    previous = keyring.get_keyring()
    keyring.set_keyring(fail.Keyring())
    try:
        yield
    finally:
        keyring.set_keyring(previous)


@pytest.fixture()
def models_folder_unset(monkeypatch) -> None:
    """SPECEXEC_MODELS_DIR and its from-settings mark unset for the test and put back as they were after it:
    the app's models folder (app.system.models_folder) writes them into this process's environment."""
    from core.system.env import MODELS_DIR_ENV, MODELS_DIR_FROM_SETTINGS_ENV

    for name in (MODELS_DIR_ENV, MODELS_DIR_FROM_SETTINGS_ENV):
        monkeypatch.setenv(name, "")  # recorded first, so that teardown restores it even once the app set it
        monkeypatch.delenv(name)


@pytest.fixture()
def small_disk(tmp_path) -> Iterator[Path]:
    """A real 2 MB filesystem (tmpfs), mounted for the test: needs root and a kernel that lets it mount."""
    disk = tmp_path / "disk"
    disk.mkdir()
    if os.name != "posix" or os.geteuid() != 0:
        pytest.skip("mounting a small filesystem needs root")
    mounted = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=2m", "tmpfs", str(disk)], capture_output=True, check=False
    )
    if mounted.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {mounted.stderr.decode().strip()}")
    try:
        yield disk
    finally:
        subprocess.run(["umount", "-l", str(disk)], check=True)


def fill_disk(disk: Path) -> Path:
    """Write a file until the filesystem has no room left; returns it (delete it to free the space)."""
    filler = disk / "filler"
    descriptor = os.open(filler, os.O_WRONLY | os.O_CREAT, 0o600)
    try:
        while True:
            os.write(descriptor, b"\0" * 4096)
    except OSError:  # ENOSPC: full
        pass
    finally:
        os.close(descriptor)
    return filler


def without_read_override() -> list[str]:
    """How to start a program that folder permissions apply to: as it is for a user, and for root without the
    capabilities that let root read any folder (setpriv drops them from what the program may hold)."""
    if os.geteuid() != 0:
        return []
    if shutil.which("setpriv") is None:
        pytest.skip("needs setpriv (util-linux) to drop root's right to read every folder")
    drop = "-dac_override,-dac_read_search"
    return ["setpriv", f"--bounding-set={drop}", f"--inh-caps={drop}"]
