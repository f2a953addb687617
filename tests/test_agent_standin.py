"""The stand-ins for a local raylet's Python agents (sweeper/executors/agent_standin.py) and the
raylet command that starts them (sweeper/executors/starter.py)."""
import shlex
import subprocess
import sys

import pytest

from sweeper.executors import agent_standin
from sweeper.executors.starter import STANDIN, _lean_part


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
