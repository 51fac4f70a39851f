"""A real HTTP server on 127.0.0.1 for one test: ``with serve(HandlerClass) as url: ...``."""

from __future__ import annotations

import contextlib
import http.server
import threading
from collections.abc import Iterator


@contextlib.contextmanager
def serve(handler) -> Iterator[str]:  # type: ignore[no-untyped-def]
    """Serve ``handler`` (a request handler class or a partial of one) on a free loopback port; the base URL.
    serve_forever polls for shutdown() every poll_interval seconds, 0.5 by default, and shutdown() waits
    for that poll (https://docs.python.org/3/library/socketserver.html#socketserver.BaseServer.serve_forever):
    a short interval ends each test without half a second of idle."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.01}, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()
        server.server_close()
