"""ray.address: what answers there is asked whether it speaks gRPC (HTTP/2) before Ray is handed
the address; Ray alone retried a dashboard's or Redis' port for two minutes, a warning every few
seconds. A real Ray head passes the same probe in tests/test_reliability.py (`ray start` clusters)."""
import contextlib
import socket
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from sweeper.errors import ConfigError
from sweeper.executors.attached import PROBE_S, attach, speaks_http2


def serve_once(reply: bytes):
    """A listener that accepts one connection, reads the client's first bytes, sends `reply`, closes."""
    listener = socket.create_server(("127.0.0.1", 0))

    def answer():
        conn, _ = listener.accept()
        with conn, contextlib.suppress(OSError):          # the client may be gone: it asked nothing
            conn.recv(64)
            conn.sendall(reply)
        listener.close()

    threading.Thread(target=answer, daemon=True).start()
    return listener.getsockname()[:2]


def test_a_web_server_at_the_address_is_one_line_at_once():
    server = ThreadingHTTPServer(("127.0.0.1", 0), BaseHTTPRequestHandler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    host, port = server.server_address[:2]
    started = time.monotonic()
    try:
        with pytest.raises(ConfigError, match=rf"^ray.address=127.0.0.1:{port}: something answers .* not a Ray head"):
            attach(None, f"127.0.0.1:{port}", {})     # Ray is never reached
    finally:
        server.shutdown()
        server.server_close()
    assert time.monotonic() - started < PROBE_S


def test_what_answers_is_told_apart_by_its_first_frame():
    settings = bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])                 # an HTTP/2 server's first frame
    assert speaks_http2(serve_once(settings)) is True
    assert speaks_http2(serve_once(b"-ERR unknown command 'PRI'\r\n")) is False     # Redis
    assert speaks_http2(serve_once(b"")) is False                                   # closes at once


def test_nothing_listening_is_an_os_error_attach_names():
    with socket.create_server(("127.0.0.1", 0)) as probe:
        port = probe.getsockname()[1]                               # free once closed
    with pytest.raises(ConfigError, match=rf"no Ray cluster answers at 127.0.0.1:{port}"):
        attach(None, f"127.0.0.1:{port}", {})


def test_a_tls_cluster_is_left_to_ray(monkeypatch):
    """With RAY_USE_TLS a head answers plaintext with a TLS alert or a close: not a verdict."""
    monkeypatch.setenv("RAY_USE_TLS", "1")
    assert speaks_http2(serve_once(b"\x15\x03\x03\x00\x02\x02\x46")) is None       # a TLS alert record
