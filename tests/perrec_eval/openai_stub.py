"""A scripted OpenAI-compatible server on 127.0.0.1 (stdlib only) and the engine settings the tests use."""

from __future__ import annotations

import json
import socket
import threading
import time
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from perrec_eval.engines import load_engine
from perrec_eval.engines._common import sample_seed
from perrec_eval.engines.openai import OpenAIEngine
from perrec_eval.types import ChatRequest, GenParams

SECRET = "sk-perrec-TOPSECRET-0042"
KEY_ENV = "PERREC_TEST_API_KEY"
PARAMS = GenParams(temperature=0.1, top_p=1.0, max_tokens=32, n=1, seed=3)


def make_request(text: str) -> ChatRequest:
    return ChatRequest(messages=({"role": "system", "content": "rank"}, {"role": "user", "content": text}))


def answer(query: str, seed: int | None = PARAMS.seed, sample: int = 0, choice: int = 0) -> str:
    """What the stub server answers to `query` (it echoes the seed it was sent)."""
    return f"{query}|seed={sample_seed(seed, make_request(query), sample)}|{choice}"


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class StubServer:
    """A scripted OpenAI-compatible ``/v1/chat/completions`` on 127.0.0.1, stdlib only.

    `script` maps a request's last message to the actions of its successive attempts (the last one repeats);
    unscripted requests get ``"ok"``. Actions: ``"ok"``; ``"garbage"`` (truncated JSON); ``"html"`` (a proxy
    error page with status 200); ``("status", code, headers, body)`` (with ``retry-after-ms: 1`` unless the
    headers say how long to wait, so the client's retries are quick); ``("sleep", seconds)`` then ok;
    ``("echo-auth", code)`` (an error whose body repeats the Authorization header); ``"echo-key-ok"`` (a 200
    answer whose text repeats it); ``"echo-finish"`` (a 200 answer whose ``finish_reason`` repeats it);
    ``"echo-body"`` (a 200 answer whose text repeats the request's JSON body, extra fields included);
    ``"empty"`` (200 with ``choices: []``); ``("null", finish_reason)`` (200 with ``content: null``);
    ``("trickle", seconds)`` (status and headers of an ok answer, then one byte of it every `seconds`).
    `default` is the action of unscripted requests. ``GET /v1/models`` answers `models`: ``"ok"`` (the
    stub's model list) or ``("status", code, headers, body)``. `paths` holds each POST's path (and query).

    `in_flight` counts a POST from its arrival until just before its answer is written: once the answer is on
    the wire the client may send its next request before this thread runs again, so counting until the
    handler returns would see more requests in flight than the client ever had (`max_in_flight` is a lower
    bound of the client's). `linger` keeps each handler busy that long after its answer (to test just that).
    """

    def __init__(
        self,
        script: dict[str, list[Any]] | None = None,
        max_choices: int | None = None,
        models: Any = "ok",
        default: Any = "ok",
        linger: float = 0.0,
    ) -> None:
        self.linger = linger
        self.script = script or {}
        self.default = default
        self.max_choices = max_choices
        self.models = models
        self.model_lists = 0  # GET /v1/models requests
        self.bodies: list[dict[str, Any]] = []
        self.authorizations: list[str] = []
        self.paths: list[str] = []
        self.attempts: Counter[str] = Counter()
        self.times: dict[str, list[float]] = {}  # when each attempt of a request arrived (time.monotonic)
        self.in_flight = 0
        self.max_in_flight = 0
        self.lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), self._handler_class())
        self.httpd.daemon_threads = True
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.httpd.server_port}/v1"

    def start(self) -> StubServer:
        self.thread.start()
        return self

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(timeout=10)

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        stub = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, format: str, *args: Any) -> None:  # keep test output clean
                pass

            def do_GET(self) -> None:
                with stub.lock:
                    stub.model_lists += 1
                if self.path.partition("?")[0] != "/v1/models":
                    self._send(404, b"{}", "application/json")
                elif stub.models == "ok":
                    data = [{"id": "stub-model", "object": "model", "created": 0, "owned_by": "stub"}]
                    self._send(200, json.dumps({"object": "list", "data": data}).encode(), "application/json")
                else:
                    self._act(stub.models, {}, "")

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                content = body["messages"][-1]["content"]
                with stub.lock:
                    stub.bodies.append(body)
                    stub.authorizations.append(self.headers.get("Authorization", ""))
                    stub.paths.append(self.path)
                    attempt = stub.attempts[content]
                    stub.attempts[content] += 1
                    stub.times.setdefault(content, []).append(time.monotonic())
                    stub.in_flight += 1
                    stub.max_in_flight = max(stub.max_in_flight, stub.in_flight)
                self.answering = True
                actions = stub.script.get(content, [stub.default])
                try:
                    self._act(actions[min(attempt, len(actions) - 1)], body, content)
                    time.sleep(stub.linger)  # the answer is out; this thread is slow to return
                except OSError:  # the client gave up (timeout) and closed the socket
                    pass
                finally:
                    self._answered()

            def _answered(self) -> None:
                """This POST leaves the in-flight count (once), before its answer's first byte is sent."""
                if getattr(self, "answering", False):
                    self.answering = False
                    with stub.lock:
                        stub.in_flight -= 1

            def _act(self, action: Any, body: dict[str, Any], content: str) -> None:
                kind = action if isinstance(action, str) else action[0]
                if kind == "sleep":
                    time.sleep(action[1])
                    kind = "ok"
                if kind == "echo-key-ok":  # a successful answer that repeats the key it was sent
                    content = f"{content} {self.headers.get('Authorization')}"
                    kind = "ok"
                if kind == "echo-body":  # a successful answer that repeats everything it was sent
                    content = f"{content} {json.dumps(body)}"
                    kind = "ok"
                finish = self.headers.get("Authorization") if kind == "echo-finish" else "stop"
                if kind in ("ok", "echo-finish", "trickle"):
                    n = (
                        body.get("n", 1)
                        if stub.max_choices is None
                        else min(body.get("n", 1), stub.max_choices)
                    )
                    choices = [
                        {
                            "index": i,
                            "message": {
                                "role": "assistant",
                                "content": f"{content}|seed={body.get('seed')}|{i}",
                            },
                            "finish_reason": finish,
                        }
                        for i in range(n)
                    ]
                    usage = {"prompt_tokens": len(content), "completion_tokens": 2 * n, "total_tokens": 0}
                    payload = {
                        "id": "x",
                        "object": "chat.completion",
                        "created": 0,
                        "model": body["model"],
                        "choices": choices,
                        "usage": usage,
                    }
                    if kind == "trickle":
                        self._trickle(json.dumps(payload).encode(), action[1])
                    else:
                        self._send(200, json.dumps(payload).encode(), "application/json")
                elif kind in ("empty", "null"):
                    choices = []
                    if kind == "null":
                        message = {"role": "assistant", "content": None}
                        choices = [{"index": 0, "message": message, "finish_reason": action[1]}]
                    payload = {"id": "x", "object": "chat.completion", "created": 0, "choices": choices}
                    self._send(200, json.dumps(payload).encode(), "application/json")
                elif kind == "garbage":
                    self._send(200, b'{"choices": [{"index": 0, "mess', "application/json")
                elif kind == "html":
                    self._send(200, b"<html>502 bad gateway</html>", "text/html")
                elif kind == "status":
                    _, code, headers, text = action
                    if not {name.lower() for name in headers} & {"retry-after", "retry-after-ms"}:
                        headers = {**headers, "retry-after-ms": "1"}  # the client's retries wait 1 ms
                    self._send(
                        code, json.dumps({"error": {"message": text}}).encode(), "application/json", headers
                    )
                elif kind == "echo-auth":
                    text = f"bad request from {self.headers.get('Authorization')}"
                    self._send(
                        action[1], json.dumps({"error": {"message": text}}).encode(), "application/json"
                    )
                else:
                    raise ValueError(f"unknown stub action {action!r}")

            def _trickle(self, data: bytes, seconds: float) -> None:
                """Status and headers at once, then the body one byte every `seconds` (until the client
                leaves)."""
                self._answered()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.flush()
                for byte in data:
                    time.sleep(seconds)
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()

            def _send(self, code: int, data: bytes, content_type: str, headers: dict | None = None) -> None:
                self._answered()
                self.send_response(code)
                self.send_header("Content-Type", content_type)
                self.send_header("Content-Length", str(len(data)))
                for name, value in (headers or {}).items():
                    self.send_header(name, value)
                self.end_headers()
                self.wfile.write(data)

        return Handler


def make_engine(server: StubServer, **options: Any) -> OpenAIEngine:
    settings = dict(
        base_url=server.base_url,
        api_key_env=KEY_ENV,
        timeout=5.0,
    )
    settings.update(options)
    adapter = settings.pop("adapter", None)
    return load_engine("openai", "stub-model", adapter=adapter, options=settings)
