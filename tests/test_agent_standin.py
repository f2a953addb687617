"""The stand-ins for a local raylet's Python agents (sweeper/executors/agent_standin.py) and the
raylet command that starts them (sweeper/executors/starter.py)."""
import os
import shlex
import subprocess
import sys

import pytest

from sweeper.executors import agent_standin
from sweeper.executors.starter import STANDIN, _lean_part, _wait_registered, _without_monitors


def test_an_agents_command_becomes_its_standin_with_the_agents_session_and_node():
    agent = ("/opt/py -u /ray/_private/runtime_env/agent/main.py --node-id=ab12 --runtime-env-agent-port=0 "
             "--session-dir=/tmp/ray/session_x --log-dir=/tmp/ray/session_x/logs")
    part = _lean_part(f"--runtime_env_agent_command={agent}")
    flag, command = part.split("=", 1)
    assert flag == "--runtime_env_agent_command"
    assert shlex.split(command)[1:] == ["-S", STANDIN, "runtime_env_agent_port", "--node-id=ab12",
                                       "--session-dir=/tmp/ray/session_x"]
    dashboard = _lean_part(f"--dashboard_agent_command={agent}")
    assert "metrics_agent_port,metrics_export_port,dashboard_agent_listen_port" in dashboard
    assert _lean_part("--num_prestart_python_workers=16") == "--num_prestart_python_workers=1"
    assert _lean_part("--node_manager_port=0") == "--node_manager_port=0"


def test_a_standin_reports_each_port_it_is_named_as_not_served(tmp_path):
    agent_standin.report_unserved(["metrics_agent_port", "dashboard_agent_listen_port"], str(tmp_path), "ab12")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dashboard_agent_listen_port_ab12", "metrics_agent_port_ab12"]
    assert (tmp_path / "metrics_agent_port_ab12").read_text() == "-1"


@pytest.mark.slow
def test_a_standin_lives_until_the_raylets_pipe_closes(tmp_path):
    proc = subprocess.Popen([sys.executable, "-S", STANDIN, "runtime_env_agent_port", f"--session-dir={tmp_path}",
                             "--node-id=ab12"], stdin=subprocess.PIPE)
    try:
        with pytest.raises(subprocess.TimeoutExpired):
            proc.wait(timeout=1.5)                 # alive while the pipe is open
        assert (tmp_path / "runtime_env_agent_port_ab12").read_text() == "-1"
        proc.stdin.close()
        assert proc.wait(timeout=10) == 0
    finally:
        proc.kill()
        proc.wait()


class _Gcs:
    """Lists the node from its `after`-th look on."""

    def __init__(self, after):
        self.looks, self.after = 0, after

    def get_all_node_info(self, timeout):
        self.looks += 1
        return [_Id("ab12")] if self.looks > self.after else [_Id("ff00")]


class _Id(str):
    def hex(self):
        return str(self)


def _node(gcs):
    from types import SimpleNamespace

    raylet = SimpleNamespace(process=SimpleNamespace(pid=os.getpid()))        # alive: this process
    return SimpleNamespace(get_gcs_client=lambda: gcs, all_processes={"raylet": [raylet]}, _node_id="ab12")


def test_the_driver_looks_for_the_raylets_registration_until_it_is_there():
    gcs = _Gcs(after=2)
    _wait_registered(_node(gcs))
    assert gcs.looks == 3
    never = _Gcs(after=10**9)
    _wait_registered(_node(never), timeout_s=0.05)          # gives up: Ray's own wait follows
    assert never.looks >= 1


def test_the_log_monitor_and_autoscaler_monitor_are_switched_off_before_the_head_starts():
    from types import SimpleNamespace

    seen = []
    node = SimpleNamespace(_ray_params=SimpleNamespace(no_monitor=False, include_log_monitor=True))
    _without_monitors(lambda n: seen.append((n._ray_params.no_monitor, n._ray_params.include_log_monitor)))(node)
    assert seen == [(True, False)]
