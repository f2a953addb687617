"""Attaching to a running Ray cluster (`ray.address`): only once something answers there, and
for a bounded time. Ray alone retries an address where nothing listens, or where something
that is no Ray head answers, for many minutes, printing a warning every few seconds."""
from __future__ import annotations

from typing import Any, Dict, Optional, Tuple

from sweeper.errors import ConfigError

PROBE_S = 5.0     # how long a cluster's head may take to accept a connection before it is called absent
WAIT_S = 120.0    # how long ray.init(address=...) may take once it does (Ray alone retries for many minutes)
# An HTTP/2 client's first bytes (RFC 9113 3.4), then an empty SETTINGS frame: a Ray head's GCS
# (gRPC) answers with a SETTINGS frame of its own; a dashboard, Redis or web server does not.
HTTP2_START = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n" + bytes([0, 0, 0, 4, 0, 0, 0, 0, 0])
SETTINGS = 4      # an HTTP/2 frame's type, the 4th byte of its 9-byte header


def attach(ray, address: str, kwargs: Dict[str, Any]) -> None:
    """ray.init(address=...), once something answers there: Ray itself retries an address where
    nothing listens for many minutes, printing a warning every few seconds, and holds up the
    driver's exit that long even after Ctrl-C or SIGTERM."""
    from sweeper.schema.run import came_from_ray_address, head_of

    what = "RAY_ADDRESS, from which it came" if came_from_ray_address(address) else "the address"
    fix = f"start one there (ray start --head) or fix {what}; ray.address=null starts a local Ray"
    head = head_of(address)
    if head is not None:
        try:
            grpc = speaks_http2(head)
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise ConfigError(f"ray.address={address}: no Ray cluster answers at {head[0]}:{head[1]} ({reason}); {fix}") \
                from None
        if grpc is False:       # Ray would retry it for WAIT_S, a warning every few seconds
            raise ConfigError(f"ray.address={address}: something answers at {head[0]}:{head[1]}, but not a Ray head "
                              f"(it does not speak gRPC: the dashboard's port? Redis? a web server?); give the head's "
                              f"GCS address, as `ray start --head` prints it (port 6379 by default)")
    try:
        ray.init(address=address, **kwargs)
    except ConnectionError as exc:      # `auto` with no cluster on this machine, or a head that refused us
        raise ConfigError(f"ray.address={address}: {str(exc).splitlines()[0].split('. ')[0]}; {fix}") from None


def speaks_http2(head: Tuple[str, int]) -> Optional[bool]:
    """Whether what accepts a connection at `head` answers an HTTP/2 start as gRPC servers do (a
    SETTINGS frame): True; False for any other answer, or a close; None when it says nothing
    within PROBE_S (then ray.init decides, within WAIT_S). OSError when nothing accepts."""
    import os
    import socket

    with socket.create_connection(head, timeout=PROBE_S) as conn:
        if os.environ.get("RAY_USE_TLS", "0").lower() in ("1", "true"):
            return None         # a TLS head answers plaintext with an alert or a close: ray.init decides
        conn.sendall(HTTP2_START)
        first = b""
        try:
            while len(first) < 9:
                chunk = conn.recv(9 - len(first))
                if not chunk:
                    return False
                first += chunk
        except socket.timeout:
            return None if not first else False
        except ConnectionResetError:
            return False
    return first[3] == SETTINGS


def not_taken(address: str) -> ConfigError:
    """The line for an attach still under way after WAIT_S (ray_executor.RayExecutor.start)."""
    return ConfigError(f"ray.address={address}: something answers there, but no Ray cluster took this driver within "
                       f"{WAIT_S:.0f} s; give the head's GCS address (`ray start --head` prints it) or ray.address=null "
                       f"for a local Ray")
