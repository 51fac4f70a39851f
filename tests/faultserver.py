"""A misbehaving OpenAI-compatible server on 127.0.0.1, raw asyncio sockets: every byte it sends is
chosen (invalid UTF-8, events split across writes, CRLF, a reset mid-stream, a server that accepts
and never answers...), which aiohttp's server would not let a test do.

``FaultServer(plan)`` answers /health, /v1/models, /tokenize and /metrics like vLLM, and each
completion request with ``plan(ordinal)``: a ``Reply`` (status, headers, body pieces, then close,
reset or hang). ``good_stream`` is the stream vLLM sends with continuous usage statistics.
"""

from __future__ import annotations

import asyncio
import json
import socket
import struct
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

MODEL = "Qwen/Qwen3-32B"
PROMPT_TOKENS = 16
CONTENT = [" one", " two", " three", " four", " five"]  # one token each


@dataclass(frozen=True)
class Reply:
    status: str = "200 OK"
    headers: tuple[tuple[str, str], ...] = (("Content-Type", "text/event-stream"),)
    pieces: Sequence[bytes] = ()  # written one after another, each flushed (so they arrive as separate reads)
    end: str = "close"  # close | reset (RST: SO_LINGER 0) | hang (never finishes)
    head: bytes | None = None  # the whole status line and headers, raw, instead of status/headers
    gap_s: float = 0.0  # pause between pieces
    silent: bool = False  # accept and never answer at all


def usage(completion: Any, prompt: Any = PROMPT_TOKENS) -> dict[str, Any]:
    total = prompt + completion if type(prompt) is int and type(completion) is int else None
    return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}


def event(content: str | None = None, tokens: Any = None, *, model: str = MODEL, finish: str | None = None, **extra: Any) -> dict:
    delta: dict[str, Any] = {} if content is None else {"content": content}
    data: dict[str, Any] = {"id": "chatcmpl-1", "object": "chat.completion.chunk", "model": model}
    data["choices"] = [{"index": 0, "delta": delta, "finish_reason": finish}]
    if tokens is not None:
        data["usage"] = usage(tokens)
    data.update(extra)
    return data


def good_events(continuous: bool = True, model: str = MODEL) -> list[dict]:
    """vLLM's chat stream: a role frame, one content chunk per token, a finish frame, a usage frame."""
    first = event(None, 0 if continuous else None, model=model)
    first["choices"][0]["delta"] = {"role": "assistant", "content": ""}
    events = [first]
    events += [event(text, index + 1 if continuous else None, model=model) for index, text in enumerate(CONTENT)]
    events.append(event(None, len(CONTENT) if continuous else None, model=model, finish="length"))
    events.append({"id": "chatcmpl-1", "model": model, "choices": [], "usage": usage(len(CONTENT))})
    return events


def sse(events: Sequence[dict | bytes], done: bool = True, newline: bytes = b"\n") -> list[bytes]:
    """Each event as ``data: ...`` and a blank line (bytes are sent as the payload, as they are)."""
    pieces = [b"data: " + (e if isinstance(e, bytes) else json.dumps(e).encode()) + newline + newline for e in events]
    return pieces + ([b"data: [DONE]" + newline + newline] if done else [])


def stream(events: Sequence[dict | bytes], done: bool = True, **reply: Any) -> Reply:
    return Reply(pieces=sse(events, done), **reply)


GOOD = stream(good_events())


@dataclass
class FaultServer:
    plan: Callable[[int], Reply] = lambda ordinal: GOOD
    models: tuple[str, ...] = (MODEL,)  # what /v1/models lists, first the name vLLM streams
    tokenize: Callable[[str], Reply] | None = None  # /tokenize's reply to a text (default: 1 token per 4 characters)
    completions: int = 0  # completion requests received (ground truth for what the client sent)
    bodies: list[dict] = field(default_factory=list)

    def __enter__(self) -> FaultServer:
        self._loop = asyncio.new_event_loop()
        self._ready = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()
        assert self._ready.wait(10), "fault server did not start"
        return self

    def __exit__(self, *exc: object) -> None:
        self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(10)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_until_complete(self._main())
        self._loop.close()

    async def _main(self) -> None:
        self._stop = asyncio.Event()
        self._tasks: set[asyncio.Task] = set()
        server = await asyncio.start_server(self._track, "127.0.0.1", 0)
        self.port = server.sockets[0].getsockname()[1]
        self._ready.set()
        await self._stop.wait()
        server.close()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _track(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        self._tasks.add(task)
        try:
            await self._connection(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError, asyncio.CancelledError):
            pass
        finally:
            self._tasks.discard(task)
            if not writer.is_closing():
                writer.close()

    async def _connection(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        request_line, *header_lines = head.decode("latin-1").split("\r\n")
        method, path, _ = request_line.split(" ", 2)
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in header_lines if line)}
        body = await reader.readexactly(int(headers.get("content-length", "0")))
        if method == "GET" and path == "/health":
            return await self._send(writer, Reply(headers=(("Content-Type", "text/plain"),), pieces=[b"ok"]))
        if method == "GET" and path == "/v1/models":
            models = json.dumps({"object": "list", "data": [{"id": m, "object": "model"} for m in self.models]}).encode()
            return await self._send(writer, Reply(headers=(("Content-Type", "application/json"),), pieces=[models]))
        if path == "/tokenize":
            prompt = json.loads(body).get("prompt", "")
            if self.tokenize is not None:
                return await self._send(writer, self.tokenize(prompt))
            count = json.dumps({"count": max(1, len(prompt) // 4)}).encode()
            return await self._send(writer, Reply(headers=(("Content-Type", "application/json"),), pieces=[count]))
        if path.endswith("/completions") and method == "POST":
            ordinal = self.completions
            self.completions += 1
            self.bodies.append(json.loads(body))
            return await self._send(writer, self.plan(ordinal))
        return await self._send(writer, Reply("404 Not Found", (("Content-Type", "text/plain"),), [b"not found"]))

    async def _send(self, writer: asyncio.StreamWriter, reply: Reply) -> None:
        if reply.silent:
            await asyncio.Event().wait()  # accepted, read, never answered: cancelled when the server stops
        head = reply.head
        if head is None:
            lines = [f"HTTP/1.1 {reply.status}", *(f"{k}: {v}" for k, v in reply.headers), "Connection: close", "", ""]
            head = "\r\n".join(lines).encode("latin-1")
        writer.write(head)
        await writer.drain()
        for piece in reply.pieces:
            if reply.gap_s:
                await asyncio.sleep(reply.gap_s)
            writer.write(piece)
            await writer.drain()
        if reply.end == "hang":
            await asyncio.Event().wait()
        if reply.end == "reset":
            sock = writer.get_extra_info("socket")
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))  # close sends RST
            writer.transport.abort()
            return
        writer.close()
