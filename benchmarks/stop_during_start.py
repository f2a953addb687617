"""SIGTERM while a Ray sweep starts: does the command end, in one line, and how soon?

    python benchmarks/stop_during_start.py                # 20 tries, about a minute on 2 cores
    python benchmarks/stop_during_start.py --tries 40 --after 0.9-1.5

Each try starts a two-trial sweep through a local Ray (`tests.workloads_for_tests:quick`, W&B,
report and history off, results in a temporary folder), sends it SIGTERM after a delay drawn
uniformly from --after (seconds after its start: Ray's start is then under way), and waits up to
--hang-s for it to end. A command still running then is counted as hung, SIGKILLed with its
process group, and its last stderr line is shown. The table gives how many tries ended with exit
130 and one `interrupted ...` line, how many ended otherwise (143: the signal came before the
command set its handlers), how many hung, and the median and slowest time from the signal to the
end. docs/reliability.md gives the figures.
"""
from __future__ import annotations

import argparse
import os
import random
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Dict, List, Optional, Sequence

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks._common import PYTHON, ROOT, bench_env, machine_line, markdown_table, median  # noqa: E402

SWEEP = ["workload.target=tests.workloads_for_tests:quick", "workload.seed=0,1", "wandb.enabled=false",
         "report.enabled=false", "history.enabled=false"]


def one_try(after_s: float, hang_s: float, folder: Path) -> Dict[str, object]:
    proc = subprocess.Popen([PYTHON, "-m", "sweeper", f"results_dir={folder}", *SWEEP], cwd=ROOT, env=bench_env(),
                            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
    time.sleep(after_s)
    sent = time.monotonic()
    proc.send_signal(signal.SIGTERM)
    try:
        _, err = proc.communicate(timeout=hang_s)
        hung = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        _, err = proc.communicate()
        hung = True
    lines = err.strip().splitlines()
    return {"after": after_s, "code": proc.returncode, "hung": hung, "took": time.monotonic() - sent,
            "last": lines[-1] if lines else ""}


def tries(count: int, low: float, high: float, hang_s: float) -> List[Dict[str, object]]:
    done = []
    with tempfile.TemporaryDirectory(prefix="stop-during-start-") as folder:
        for index in range(count):
            result = one_try(random.uniform(low, high), hang_s, Path(folder) / str(index))
            print(f"  try {index + 1}: SIGTERM at {result['after']:.2f} s -> "
                  f"{'HUNG' if result['hung'] else 'exit ' + str(result['code'])} after {result['took']:.2f} s  "
                  f"{str(result['last'])[:100]}", flush=True)
            done.append(result)
    return done


def report(done: List[Dict[str, object]], low: float, high: float) -> str:
    clean = [r for r in done if not r["hung"] and r["code"] == 130 and str(r["last"]).startswith("interrupted")]
    hung = [r for r in done if r["hung"]]
    other = len(done) - len(clean) - len(hung)
    ended = [float(r["took"]) for r in done if not r["hung"]]
    rows = [[len(done), f"{low:g}-{high:g}", len(clean), other, len(hung),
             f"{median(ended):.2f}" if ended else "-", f"{max(ended):.2f}" if ended else "-"]]
    return "\n".join([f"Machine: {machine_line()}; load average {os.getloadavg()[0]:.1f} at the end", "",
                      markdown_table(["tries", "SIGTERM after, s", "exit 130, one line", "other exit", "hung",
                                      "signal to end, median s", "slowest s"], rows)])


def main(argv: Optional[Sequence[str]] = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tries", type=int, default=20)
    parser.add_argument("--after", default="0.9-1.5", help="the signal's delay after the start, LOW-HIGH seconds")
    parser.add_argument("--hang-s", type=float, default=45.0, help="a command not ended by then counts as hung")
    args = parser.parse_args(argv)
    low, high = (float(x) for x in args.after.split("-"))
    print(report(tries(args.tries, low, high, args.hang_s), low, high))


if __name__ == "__main__":
    main()
