"""Progress: plain lines when piped; on a terminal the same lines above a bar with an ETA."""
import io

from sweeper.progress import Progress


class Terminal(io.StringIO):
    def isatty(self):
        return True


def finish_three(stream):
    progress = Progress(3, stream=stream)
    for _ in range(2):
        progress.trial_done(lambda done, total, wall: f"[{done}/{total}] ok trial-{done}")
    progress.grow()                                  # an out-of-memory retry joined
    progress.trial_done(lambda done, total, wall: f"[{done}/{total}] ok trial-{done}")
    progress.close()
    return stream.getvalue()


def test_piped_output_is_plain_lines_only():
    out = finish_three(io.StringIO())
    assert out.splitlines() == ["[1/3] ok trial-1", "[2/3] ok trial-2", "[3/4] ok trial-3"]


def test_a_terminal_gets_the_lines_and_a_bar_with_an_eta():
    out = finish_three(Terminal())
    for line in ("[1/3] ok trial-1", "[2/3] ok trial-2", "[3/4] ok trial-3"):
        assert line in out
    assert "0/3 trials" in out and "2/4 trials" in out       # the bar, redrawn as it grows
    assert "<" in out                                         # elapsed<remaining: the ETA
