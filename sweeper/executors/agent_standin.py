"""Stands in for one of a local raylet's Python agents (the dashboard agent, the runtime-env
agent) in the Ray the driver starts for itself (sweeper/executors/starter.py `lean_local_start`).

The raylet registers its node only once each agent has written its ports to the session folder,
and a real agent first imports Ray and its web and metrics stack: most of the node's start. The
driver uses neither agent (no metrics, dashboard, job or log API, no runtime_env), so this writes
-1 ("not served", as Ray's minimal agent does) for each port it is named and then lives as long as
the raylet: until the pipe the raylet gives it as stdin closes, or its parent changes.

Run as a script, with the interpreter's `-S`: it imports nothing but the standard library.
    python -S agent_standin.py PORT_NAME[,PORT_NAME...] --session-dir=DIR --node-id=HEX
"""
import os
import select
import sys


def options(argv):
    return dict(arg[2:].split("=", 1) for arg in argv if arg.startswith("--") and "=" in arg)


def report_unserved(ports, session_dir, node_id):
    """Each port file as Ray's agents write it (`<name>_<node id>`), whole when the raylet reads it."""
    for name in ports:
        path = os.path.join(session_dir, f"{name}_{node_id}")
        with open(f"{path}.part", "w") as f:
            f.write("-1")
        os.replace(f"{path}.part", path)


def live_with_parent():
    parent = os.getppid()
    piped = os.environ.get("RAY_enable_pipe_based_agent_to_parent_health_check", "1").lower() not in ("0", "false")
    while os.getppid() == parent:
        if piped and select.select([0], [], [], 1.0)[0] and not os.read(0, 4096):
            return                                   # the raylet is gone: its end of the pipe closed
        if not piped:
            select.select([], [], [], 1.0)


def main(argv):
    opts = options(argv[2:])
    report_unserved(argv[1].split(","), opts["session-dir"], opts["node-id"])
    live_with_parent()


if __name__ == "__main__":
    main(sys.argv)
