"""Files sent to the API server (core.server.file_parts): OpenAI's `file` part and the Responses `input_file`
part read to text as the app reads a file added to a message, PDFs in a real `specexec text` child process;
hostile parts (ids, URLs, data that is not base64, names that are paths or devices, too many files, a picture)
refused in words before anything is read. The server's end of it: tests/test_serve_api.py."""

from __future__ import annotations

import asyncio
import base64
import copy

import pytest

from core.server.api_errors import ApiError
from core.server.file_parts import MAX_FILES, disk_name, file_data_bytes, file_parts, read_file_parts
from core.text.document_text import fenced
from test_document_text import write_pdf


def data_url(data: bytes, mime: str = "application/pdf") -> str:
    return f"data:{mime};base64,{base64.b64encode(data).decode()}"


def chat_body(*parts: dict) -> dict:
    return {
        "model": "m",
        "messages": [{"role": "system", "content": "Be brief."}, {"role": "user", "content": list(parts)}],
    }


def file_part(filename: str | None, data: str, **more: str) -> dict:
    fields = {"file_data": data, **more} if filename is None else {"filename": filename, "file_data": data, **more}
    return {"type": "file", "file": fields}


def read(body: dict, route: str = "chat") -> dict:
    """`body` with its files read, as the server reads them (a copy: the test keeps what it sent)."""
    body = copy.deepcopy(body)
    asyncio.run(read_file_parts(file_parts(body, route)))
    return body


def refused(body: dict, route: str = "chat") -> ApiError:
    with pytest.raises(ApiError) as caught:
        read(body, route)
    return caught.value


def test_a_pdf_and_a_text_file_become_text_parts_on_lines_of_their_own(tmp_path):
    """The PDF is read in a child process, the text file here; each block is what the app inserts for the same
    file (`fenced(name, text)`), after a line break where the text before it has none."""
    pdf = write_pdf(tmp_path / "minutes.pdf", ["Budget approved", "Next meeting: Friday"]).read_bytes()
    body = chat_body(
        {"type": "text", "text": "Sum these up:"},
        file_part("minutes.pdf", data_url(pdf)),
        file_part("notes.md", data_url("# Notes\nship it\n".encode(), "text/markdown")),
        {"type": "text", "text": "Thanks."},
    )
    parts = file_parts(body, "chat")
    assert [part.where for part in parts] == ["messages[1].content[1]", "messages[1].content[2]"]
    assert file_data_bytes(parts) == sum(len(part["file"]["file_data"]) for part in body["messages"][1]["content"][1:3])
    content = read(body)["messages"][1]["content"]
    assert content == [
        {"type": "text", "text": "Sum these up:"},
        {"type": "text", "text": "\n" + fenced("minutes.pdf", "Budget approved\n\nNext meeting: Friday")},
        {"type": "text", "text": fenced("notes.md", "# Notes\nship it\n")},  # the block before ends its line
        {"type": "text", "text": "Thanks."},
    ]


def test_responses_input_files_in_messages_and_tool_results_and_bare_base64():
    body = {
        "input": [
            {"role": "user", "content": [{"type": "input_file", "filename": "a.txt", "file_data": "aGVsbG8="}]},
            {"type": "function_call_output", "call_id": "c", "output": [{"type": "input_file", "file_data": "b2s="}]},
        ]
    }
    assert [part.where for part in file_parts(body, "responses")] == ["input[0].content[0]", "input[1].output[0]"]
    assert (
        file_parts(body, "chat") == [] and file_parts({"messages": "x"}, "chat") == [] and file_parts([], "chat") == []
    )
    read_body = read(body, "responses")
    assert read_body["input"][0]["content"] == [{"type": "input_text", "text": fenced("a.txt", "hello")}]
    assert read_body["input"][1]["output"] == [{"type": "input_text", "text": fenced("document", "ok")}]  # no name


def test_a_workbook_sent_without_a_name_and_presentations_come_as_their_markdown(tmp_path):
    """Read in `specexec text` children like a PDF; a file sent without a name is written as "document", with
    no extension, and is told by its parts."""
    from test_office_text import BUDGET, DECK, IMPRESS_DECK, write_presentation, write_workbook

    book = write_workbook(tmp_path / "budget.xlsx").read_bytes()
    deck = write_presentation(tmp_path / "plan.pptx").read_bytes()
    body = chat_body(
        file_part(None, data_url(book, "application/octet-stream")),
        file_part("plan.pptx", data_url(deck)),
        file_part("plan.odp", data_url(IMPRESS_DECK.read_bytes())),
    )
    assert read(body)["messages"][1]["content"] == [
        {"type": "text", "text": fenced("document", BUDGET)},
        {"type": "text", "text": fenced("plan.pptx", DECK)},
        {"type": "text", "text": fenced("plan.odp", DECK)},
    ]


@pytest.mark.parametrize(
    ("part", "param", "words"),
    [
        ({"type": "file", "file": {"file_id": "file-abc"}}, "file_id", "it has no /v1/files"),
        ({"type": "file", "file": {"file_url": "http://169.254.169.254/"}}, "file_url", "fetches nothing"),
        (file_part("a.pdf", "data:application/pdf,%PDF-1.4"), "file_data", "must be in base64"),
        (file_part("a.pdf", "data:application/pdf;base64,not base64!"), "file_data", "is not base64"),
        (file_part("a.pdf", ""), "file_data", "the file is empty"),
        ({"type": "file", "file": {"filename": "a.pdf", "file_data": 7}}, "file_data", "must be a string"),
        ({"type": "file", "file": {"filename": ["a"], "file_data": "aGk="}}, "filename", "must be a string"),
    ],
)
def test_files_that_are_not_sent_as_their_own_base64_bytes_are_refused_naming_the_field(part, param, words):
    error = refused(chat_body(part))
    assert error.status == 400 and error.param == f"messages[1].content[0].{param}" and words in error.message


def test_a_part_that_is_not_an_object_and_too_many_files_are_refused_before_any_is_read():
    with pytest.raises(ApiError, match="must be an object"):
        file_parts(chat_body({"type": "file", "file": "aGk="}), "chat")
    many = chat_body(*[file_part(f"{n}.txt", "aGk=") for n in range(MAX_FILES + 1)])
    with pytest.raises(ApiError, match=f"holds {MAX_FILES + 1} files, more than the {MAX_FILES} read") as caught:
        file_parts(many, "chat")
    assert caught.value.code == "too_many_files"
    assert len(file_parts(chat_body(*[file_part(f"{n}.txt", "aGk=") for n in range(MAX_FILES)]), "chat")) == MAX_FILES


def test_files_the_reader_refuses_are_said_in_its_words(tmp_path):
    """A picture is refused here, a damaged PDF by the child that parses it, a scan for having no text: each a
    400 that names the part and says what to do, under the name the file was sent with (its safe part)."""
    png = b"\x89PNG\r\n\x1a\n" + bytes(64)
    error = refused(chat_body(file_part("holiday.png", data_url(png, "image/png"))))
    assert error.code == "unreadable_file" and error.param == "messages[1].content[0]"
    assert (
        "holiday.png is not a text file, a PDF, an Office document (Word, Excel, PowerPoint) or a LibreOffice text,"
        in error.message
    )
    damaged = refused(chat_body(file_part("../../report.pdf", data_url(b"%PDF-1.7\n1 0 obj <<"))))
    assert "report.pdf is damaged, or not a PDF this reader understands" in damaged.message
    scan = write_pdf(tmp_path / "scan.pdf", [""]).read_bytes()
    assert (
        "has no text to read: it is probably scanned pages"
        in refused(chat_body(file_part("s.pdf", data_url(scan)))).message
    )


@pytest.mark.parametrize(
    ("name", "on_disk"),
    [
        ("report.pdf", "report.pdf"),
        ("../../etc/passwd", "passwd"),
        ("C:\\Users\\me\\notes.txt", "notes.txt"),
        ("résumé 2026.docx", "r_sum_ 2026.docx"),
        ("CON.txt", "document-CON.txt"),
        ("..", "document"),
        ("", "document"),
        (" .hidden. ", "hidden"),
        ("a" * 300 + ".pdf", "a" * 100),
        ("line\nbreak.txt", "line_break.txt"),
    ],
)
def test_the_name_a_file_is_written_under_is_never_a_path_or_a_device(name, on_disk):
    assert disk_name(name) == on_disk


def test_a_text_part_that_is_not_text_before_a_file_is_left_for_the_parser_to_name():
    """The file is read and put on its own line whatever the parts before it hold; the parser then refuses the
    part that is not text (a 400 naming it, not a server error)."""
    from core.server.requests import Defaults, parse_chat_request

    body = read(chat_body({"type": "text", "text": 5}, file_part("a.txt", "aGk=")))
    assert body["messages"][1]["content"][1] == {"type": "text", "text": fenced("a.txt", "hi")}
    with pytest.raises(ApiError, match="a text part's 'text' must be a string") as caught:
        parse_chat_request(body, Defaults())
    assert caught.value.status == 400 and caught.value.param == "messages[1].content"
    with pytest.raises(ApiError, match=r"only text and files can be read by a text model \(got 'image_url'\)"):
        parse_chat_request(chat_body({"type": "image_url", "image_url": {"url": "x"}}), Defaults())


def test_a_reading_that_takes_too_long_is_stopped_and_said(tmp_path, monkeypatch):
    """The reader's child is killed at the limit (here shorter than starting it takes) and the request gets a
    400 saying what to try; the temporary folder goes with it."""
    import tempfile

    from core.server import file_parts

    monkeypatch.setattr(file_parts, "READ_TIMEOUT_S", 0.001)
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    pdf = write_pdf(tmp_path / "big.pdf", ["Page one"]).read_bytes()
    error = refused(chat_body(file_part("big.pdf", data_url(pdf))))
    assert error.code == "unreadable_file" and "reading big.pdf took longer than" in error.message
    assert "was stopped: the file may be damaged" in error.message
    assert sorted(path.name for path in tmp_path.iterdir()) == ["big.pdf"]  # no specexec-file-* folder left
