"""Attaching to a running Ray cluster (`ray.address`): only once something answers there, and
for a bounded time. Ray alone retries an address where nothing listens, or where something
that is no Ray head answers, for many minutes, printing a warning every few seconds."""
from __future__ import annotations

from typing import Any, Dict

from sweeper.errors import ConfigError

PROBE_S = 5.0     # how long a cluster's head may take to accept a connection before it is called absent
WAIT_S = 120.0    # how long ray.init(address=...) may take once it does (Ray alone retries for many minutes)


def attach(ray, address: str, kwargs: Dict[str, Any]) -> None:
    """ray.init(address=...), once something answers there: Ray itself retries an address where
    nothing listens for many minutes, printing a warning every few seconds, and holds up the
    driver's exit that long even after Ctrl-C or SIGTERM."""
    import socket

    from sweeper.schema.run import head_of

    fix = "start one there (ray start --head) or fix the address; ray.address=null starts a local Ray"
    head = head_of(address)
    if head is not None:
        try:
            socket.create_connection(head, timeout=PROBE_S).close()
        except OSError as exc:
            reason = exc.strerror or type(exc).__name__
            raise ConfigError(f"ray.address={address}: no Ray cluster answers at {head[0]}:{head[1]} ({reason}); {fix}") \
                from None
    try:
        ray.init(address=address, **kwargs)
    except ConnectionError as exc:      # `auto` with no cluster on this machine, or a head that refused us
        raise ConfigError(f"ray.address={address}: {str(exc).splitlines()[0].split('. ')[0]}; {fix}") from None


def not_taken(address: str) -> ConfigError:
    """The line for an attach still under way after WAIT_S (ray_executor.RayExecutor.start)."""
    return ConfigError(f"ray.address={address}: something answers there, but no Ray cluster took this driver within "
                       f"{WAIT_S:.0f} s; give the head's GCS address (`ray start --head` prints it) or ray.address=null "
                       f"for a local Ray")
