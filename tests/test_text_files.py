"""Files people write by hand, in the encodings Windows' own tools save: UTF-8 with Notepad's byte-order
mark, UTF-16 from Windows PowerShell 5.1's `>`, and bytes that are not text, refused in words."""

from __future__ import annotations

import json
import logging

import pytest

from app.settings.schema import load_settings
from core.cli.main import main
from core.errors import HardwareDescriptionError, TextEncodingError
from core.hardware.description import load_description
from core.system.locations import picked_models_folder
from core.system.text_files import decode_text, read_text_file
from core.text.prompts import read_messages_file, read_prompt_file
from core.tools.config import read_config_file

TEXT = '{"role": "user", "content": "Grüße, café ☕"}'
# what Notepad's "UTF-8" before 2019, Windows PowerShell 5.1's `>` (UTF-16 LE) and a big-endian tool write
MARKS = {
    "utf-8": (b"", "utf-8"),
    "utf-8 with its mark": (b"\xef\xbb\xbf", "utf-8"),
    "utf-16 le with its mark": (b"\xff\xfe", "utf-16-le"),
    "utf-16 be with its mark": (b"\xfe\xff", "utf-16-be"),
}


def encoded(text: str, encoding: str) -> bytes:
    mark, codec = MARKS[encoding]
    return mark + text.encode(codec)


ANSI_TEXT = '{"role": "user", "content": "Grüße, café"}'
NOT_TEXT = ANSI_TEXT.encode("cp1252")  # Windows' "ANSI": ü is the byte 0xFC, which is not UTF-8


@pytest.mark.parametrize("encoding", sorted(MARKS))
def test_each_encoding_reads_as_the_same_text_with_no_mark_left(encoding, tmp_path):
    path = tmp_path / "file.txt"
    path.write_bytes(encoded(TEXT, encoding))
    assert read_text_file(path) == TEXT


def test_bytes_that_are_not_text_are_refused_in_words_with_the_first_bad_byte():
    with pytest.raises(TextEncodingError) as caught:
        decode_text(NOT_TEXT, "chat.jsonl")
    message = str(caught.value)
    assert "chat.jsonl is not UTF-8 text" in message
    assert f"byte 0xFC at position {ANSI_TEXT.index('ü')}" in message
    assert "save it again as UTF-8" in message
    with pytest.raises(TextEncodingError, match="not a character in UTF-16"):
        decode_text(b"\xff\xfe\x00\xd8", "odd.json")  # a lone surrogate after UTF-16's mark


@pytest.mark.parametrize("encoding", sorted(MARKS))
def test_a_messages_file_and_a_prompt_file_in_each_encoding(encoding, tmp_path):
    messages = tmp_path / "messages.jsonl"
    messages.write_bytes(encoded(TEXT, encoding))
    assert read_messages_file(messages).messages[0]["content"] == "Grüße, café ☕"
    prompts = tmp_path / "prompts.jsonl"
    prompts.write_bytes(encoded(json.dumps({"messages": [json.loads(TEXT)]}, ensure_ascii=False), encoding))
    assert read_prompt_file(prompts)[0].messages[0]["content"] == "Grüße, café ☕"


def test_generate_refuses_a_messages_file_that_is_not_text_before_loading_anything(tmp_path, capsys):
    """It was a UnicodeDecodeError's traceback (exit 1)."""
    path = tmp_path / "chat.jsonl"
    path.write_bytes(NOT_TEXT)
    assert main(["generate", "--target", str(tmp_path / "no-model"), "--messages-file", str(path)]) == 2
    error = capsys.readouterr().err
    assert "chat.jsonl is not UTF-8 text" in error and "Traceback" not in error


def test_a_json_schema_file_saved_with_notepads_mark_constrains_the_answer(tmp_path):
    from argparse import Namespace

    from core.cli.options import grammar_spec

    path = tmp_path / "schema.json"
    path.write_bytes(b"\xef\xbb\xbf" + b'{"type": "object"}')
    spec = grammar_spec(Namespace(json_schema=str(path)))
    assert spec is not None and json.loads(spec.source) == {"type": "object"}
    assert spec.grammar()  # the schema reaches the grammar engine (with the mark it was "not JSON")


def test_an_mcp_json_written_by_powershell_starts_its_servers(tmp_path):
    path = tmp_path / "mcp.json"
    path.write_text(json.dumps({"mcpServers": {"files": {"command": "npx", "args": ["-y", "x"]}}}), encoding="utf-16")
    assert [server.name for server in read_config_file(path)] == ["files"]
    path.write_bytes(b'{"mcpServers": {"caf\xe9": {"command": "x"}}}')
    with pytest.raises(TextEncodingError, match="mcp.json is not UTF-8 text"):
        read_config_file(path)


def test_a_hardware_description_with_a_mark_is_read_and_one_not_text_is_refused(tmp_path):
    from pathlib import Path

    fixture = Path(__file__).parent / "fixtures" / "hw" / "gpu24-ram64-pcie4.json"
    path = tmp_path / "hw.json"
    path.write_bytes(b"\xef\xbb\xbf" + fixture.read_bytes())
    assert load_description(path).ram == load_description(fixture).ram
    path.write_bytes(fixture.read_bytes() + b"\xe9")
    with pytest.raises(HardwareDescriptionError, match="not UTF-8 text"):
        load_description(path)


def test_settings_saved_with_notepads_mark_are_kept_and_read_by_app_and_command_line(tmp_path, caplog):
    """A settings file edited in Notepad (with the mark) was moved aside as damaged and every setting lost."""
    config = tmp_path / "config"
    config.mkdir()
    path = config / "settings.json"
    folder = tmp_path / "models"
    path.write_bytes(b"\xef\xbb\xbf" + json.dumps({"theme": "dark", "models_folder": str(folder)}).encode())
    settings = load_settings(path)
    assert settings.theme == "dark" and settings.models_folder == str(folder)
    assert path.exists() and not path.with_name("settings.json.broken").exists()
    assert picked_models_folder({"SPECEXEC_CONFIG_DIR": str(config)}) == folder


def test_settings_that_are_not_text_are_set_aside_with_a_line_in_the_log_not_a_crash(tmp_path, caplog):
    """A settings file saved as "ANSI" with an accented folder name stopped the app at start."""
    config = tmp_path / "config"
    config.mkdir()
    path = config / "settings.json"
    damaged = b'{"theme": "dark", "models_folder": "C:\\\\Users\\\\Jos\xe9\\\\models"}'
    path.write_bytes(damaged)
    assert picked_models_folder({"SPECEXEC_CONFIG_DIR": str(config)}) is None
    with caplog.at_level(logging.WARNING):
        settings = load_settings(path)
    assert settings.theme != "dark" and not path.exists()
    assert path.with_name("settings.json.broken").read_bytes() == damaged  # kept, for the person to mend
    assert "is not UTF-8 text" in caplog.text


def run_in_code_page(code: str, stdin: bytes = b"", **env: str):
    """`python -c code` with its standard streams in cp1252, as Windows gives a redirected one."""
    import os
    import subprocess
    import sys

    return subprocess.run(
        [sys.executable, "-c", code],
        input=stdin,
        capture_output=True,
        env={**os.environ, "PYTHONIOENCODING": "cp1252", **env},
        timeout=120,
    )


def test_the_command_line_writes_utf8_to_a_file_or_pipe_where_the_system_code_page_is_another(tmp_path):
    """On Windows an answer with an emoji or Chinese, sent to a file, ended in a UnicodeEncodeError."""
    folder = tmp_path / "☕ 模型"
    folder.mkdir()
    result = run_in_code_page(
        "import sys; from core.cli.main import main; sys.exit(main(['models', 'list']))",
        SPECEXEC_MODELS_DIR=str(folder),
    )
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert f"Models folder: {folder}" in result.stdout.decode("utf-8")


def test_the_command_line_reads_a_utf8_prompt_piped_in_where_the_system_code_page_is_another():
    """A UTF-8 prompt piped into `specexec chat` on Windows arrived as "cafÃ©"; bytes that are not UTF-8 go on
    as on Linux (surrogates, read as U+FFFD further on)."""
    code = (
        "import sys; from core.cli.text_streams import use_utf8_streams; use_utf8_streams(); "
        "print(ascii(sys.stdin.read())); print('咖啡 ☕')"
    )
    result = run_in_code_page(code, stdin="café 咖啡\n".encode() + b"\xe9")
    assert result.returncode == 0, result.stderr.decode(errors="replace")
    assert result.stdout.decode("utf-8").splitlines() == [ascii("café 咖啡\n\udce9"), "咖啡 ☕"]
