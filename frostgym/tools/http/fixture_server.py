"""The fixture API server: the world's APIs over real HTTP on loopback, for recording.

Only ``record_cassettes`` starts it. It binds 127.0.0.1 on an ephemeral port and routes
by the ``Host`` header, which the recording transport keeps canonical
(``api.weather.frostgym.test``), so nothing recorded depends on the port. Responses
carry no ``Date`` or ``Server`` header: the same request gives the same bytes.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qsl, urlsplit

from frostgym.tools.http.apis import dispatch

MAX_BODY = 1_000_000


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    server_version = "frostgym-fixture"
    sys_version = ""
    # One buffered write per response, no Nagle: otherwise each keep-alive response
    # waits out a 40 ms delayed ACK and a re-recording takes seconds instead of a blink.
    wbufsize = 1 << 16
    disable_nagle_algorithm = True

    def _serve(self) -> None:
        url = urlsplit(self.path)
        length = min(int(self.headers.get("Content-Length") or 0), MAX_BODY)
        body = self.rfile.read(length) if length else b""
        query = dict(parse_qsl(url.query, keep_blank_values=True))
        headers = {k: v for k, v in self.headers.items()}
        response = dispatch(self.headers.get("Host", ""), self.command, url.path, query, body, headers)
        data = response.body()
        # send_response_only: no Server/Date headers, which would differ between recordings.
        self.send_response_only(response.status)
        self.send_header("Content-Type", "application/json; charset=utf-8")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_DELETE = do_PUT = do_PATCH = _serve

    def log_message(self, format: str, *args: object) -> None:
        """Silent: a recording run should print only what it wrote."""


@contextmanager
def fixture_server() -> Iterator[int]:
    """Serve the fixture APIs on 127.0.0.1; yields the port, stops on exit."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, name="frostgym-fixture-server", daemon=True)
    thread.start()
    try:
        yield int(server.server_address[1])
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=5)
