"""Faults a client or the machine causes, against real servers on loopback (issue 41): an engine killed, then its
replacement killed while it starts (the server retries with a backoff and /health says so meanwhile); hostile
bodies (a lone surrogate, JSON nested 10,000 deep, max_tokens beyond the context) that must be 400s without a
traceback in the log; and request headers that never finish, which must not hold a connection open."""

from __future__ import annotations

import http.client
import json
import socket
import time
import urllib.error
import urllib.request

import psutil
import pytest
from starlette.applications import Starlette
from starlette.responses import PlainTextResponse
from starlette.routing import Route
from test_serve_api import KEY, post, start_server, stop_server, tool_models  # noqa: F401 - the fixture

from core.server.engine_thread import RESTART_BACKOFF_MAX_S, restart_delay
from core.server.runner import ApiServer

WAIT_S = 240.0  # the longest any state below may take to come, on a loaded 2-core machine


def _health(url: str) -> tuple[int, dict]:
    try:
        with urllib.request.urlopen(url.removesuffix("/v1") + "/health", timeout=30) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as error:
        return error.code, json.loads(error.read())


def _engines(server_pid: int) -> list[psutil.Process]:
    """The server's live engine processes (a killed one lingers as a zombie until the server reaps it)."""
    found = []
    for child in psutil.Process(server_pid).children():
        try:
            if "spawn_main" in " ".join(child.cmdline()):
                found.append(child)
        except (psutil.ZombieProcess, psutil.NoSuchProcess):
            pass
    return found


def _wait_for(what: str, check, deadline_s: float = WAIT_S):
    deadline = time.monotonic() + deadline_s
    while time.monotonic() < deadline:
        found = check()
        if found:
            return found
        time.sleep(0.05)
    raise AssertionError(f"{what} did not happen within {deadline_s:.0f} s")


def test_restarts_back_off_and_never_stop():
    assert [restart_delay(n) for n in range(7)] == [0, 1, 2, 4, 8, 16, RESTART_BACKOFF_MAX_S]
    assert restart_delay(50) == RESTART_BACKOFF_MAX_S


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_a_replacement_engine_killed_while_it_starts_is_restarted_again(tool_models):  # noqa: F811
    """kill -9 the engine, then kill -9 its replacement as soon as it is spawned (while it imports torch): the
    server tries again after a backoff, /health answers 503 "restarting" (saying why) until the models are
    loaded again, then 200 "ok", and the next request is answered."""
    process, url = start_server(tool_models)
    try:
        assert _health(url) == (200, {"status": "ok", "model": "target", "requests": 0, "cancelling": 0})
        first = _engines(process.pid)
        assert len(first) == 1
        first[0].kill()
        second = _wait_for("a replacement engine", lambda: [p for p in _engines(process.pid) if p.pid != first[0].pid])
        second[0].kill()  # during its start: it has not said EngineStarted yet (torch takes seconds to import)
        status, body = _wait_for("/health saying restarting", lambda: (h := _health(url))[0] == 503 and h)
        assert body["status"] == "restarting" and "the engine is being restarted" in body["message"], body
        _wait_for(
            "a third engine", lambda: [p for p in _engines(process.pid) if p.pid not in (first[0].pid, second[0].pid)]
        )
        _wait_for("/health saying ok", lambda: _health(url)[0] == 200)
        status, _, reply = post(
            url,
            json.dumps({"model": "m", "max_tokens": 2, "messages": [{"role": "user", "content": "hi"}]}),
            {"Content-Type": "application/json"},
        )
        assert status == 200 and json.loads(reply)["usage"]["completion_tokens"] == 2
    finally:
        log = stop_server(process)
    assert "could not restart the engine" in log or "restarting the engine in" in log, log


@pytest.mark.slow
@pytest.mark.timeout(600)
def test_hostile_bodies_are_400s_with_nothing_but_a_line_in_the_log(tool_models):  # noqa: F811
    process, url = start_server(tool_models)
    json_type = {"Content-Type": "application/json"}
    try:
        deep = (
            '{"model": "m", "messages": [{"role": "user", "content": "hi"}], "x": ' + "[" * 10_000 + "]" * 10_000 + "}"
        )
        status, _, reply = post(url, deep, json_type)
        assert status == 400 and json.loads(reply)["error"]["code"] == "invalid_json"
        lone = '{"model": "m", "messages": [{"role": "user", "content": "hi \\ud800"}]}'
        status, _, reply = post(url, lone, json_type)
        assert status == 400 and json.loads(reply)["error"]["param"] == "messages[0].content"
        huge = json.dumps({"model": "m", "max_tokens": 10**30, "messages": [{"role": "user", "content": "hi"}]})
        status, _, reply = post(url, huge, json_type)
        assert status == 400 and json.loads(reply)["error"]["param"] == "max_tokens"
        context = json.dumps({"model": "m", "max_tokens": 10**6, "messages": [{"role": "user", "content": "hi"}]})
        status, _, reply = post(url, context, json_type)
        assert status == 400 and "more than the model's whole context window" in json.loads(reply)["error"]["message"]
        responses = json.dumps({"model": "m", "max_output_tokens": 10**6, "input": "hi"})
        status, _, reply = post(url, responses, json_type, "/v1/responses")
        assert status == 400 and json.loads(reply)["error"]["param"] == "max_output_tokens"
        beyond_floats = json.dumps({"model": "m", "temperature": 10**400, "prompt": "hi"})  # was a 500
        status, _, reply = post(url, beyond_floats, json_type, "/v1/completions")
        error = json.loads(reply)["error"]
        assert status == 400 and error["param"] == "temperature" and len(error["message"]) < 120, error
    finally:
        log = stop_server(process)
    assert "Traceback" not in log and "RecursionError" not in log, log


def _slow_client(port: int) -> socket.socket:
    """A connection that sends the start of a request's headers, then nothing more."""
    sock = socket.create_connection(("127.0.0.1", port), timeout=60)
    sock.sendall(b"GET /health HTTP/1.1\r\nHost: localhost\r\nX-Slow: ")
    return sock


def test_request_headers_that_never_finish_are_cut_off():
    """50 connections that never finish their headers (one keeps sending a byte at a time) are all closed by
    the server after its header timeout; a complete request on a fresh connection is still answered."""
    app = Starlette(routes=[Route("/health", lambda request: PlainTextResponse("ok"))])
    server = ApiServer(app, port=0, header_timeout_s=0.5)
    server.start()
    try:
        slow = [_slow_client(server.port) for _ in range(50)]
        trickle = _slow_client(server.port)
        for sock in slow:
            assert sock.recv(1) == b""  # closed by the server (the socket's own timeout would raise instead)
            sock.close()
        closed = False
        while not closed:  # a byte at a time does not keep it open
            try:
                trickle.sendall(b"x")
                closed = trickle.recv(1, socket.MSG_DONTWAIT) == b""
            except BlockingIOError:
                time.sleep(0.05)
            except (BrokenPipeError, ConnectionResetError):
                closed = True
        trickle.close()
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30)
        connection.request("GET", "/health")
        assert connection.getresponse().read() == b"ok"
        connection.close()
    finally:
        server.stop()
