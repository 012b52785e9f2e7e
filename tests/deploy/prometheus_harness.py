#!/usr/bin/env python3
"""Debian's prometheus for the tests: started on a configuration of the test's own, queried through its HTTP API.

    prometheus_harness.py check TARGETS_FILE RULES_FILE WORK_DIR JOB=COUNT... -- EXPR...

`check` (for the shell tests, tests/deploy/slurm_test.sh) starts a Prometheus that scrapes the file_sd file
TARGETS_FILE every second with RULES_FILE loaded, prints "prometheus: ready" once its API answers (so a caller can
start what it watches only then: a short job may otherwise end before Prometheus is up), waits (up to 120 s) until
each JOB has had COUNT targets scraped up (a job's processes may come and go, as a requeued Slurm job's do), then
until each EXPR returns data, and stops it; exit 0, or 1 naming what did not happen. Exit 77 where prometheus is
not installed (Debian: prometheus).
"""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

PROMETHEUS = shutil.which("prometheus") or "/usr/bin/prometheus"


def say(message: str):
    print(f"prometheus: {message}", flush=True)


def fail(message: str):
    raise AssertionError(message)


def check(condition: bool, message: str):
    if not condition:
        fail(message)


def wait_for(what: str, probe, timeout: float, interval: float = 0.5):
    """probe() until it returns something true, at most `timeout` seconds; its value."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = probe()
        if value:
            return value
        time.sleep(interval)
    fail(f"{what}: not within {timeout:.0f} s")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Prometheus:
    """A prometheus process scraping every second, or the API of one (start=False)."""

    def __init__(self, work: Path, scrape_configs: str, rules: Path = None):
        self.work = work
        port = free_port()
        self.base = f"http://127.0.0.1:{port}/api/v1"
        config = work / "prometheus.yml"
        config.write_text("global:\n  scrape_interval: 1s\n  evaluation_interval: 1s\n" +
                          (f"rule_files:\n  - {rules}\n" if rules else "") +
                          "scrape_configs:\n" + scrape_configs)
        self.log = work / "prometheus.log"
        with open(self.log, "w") as log:
            self.process = subprocess.Popen(
                [PROMETHEUS, f"--config.file={config}", f"--storage.tsdb.path={work / 'tsdb'}",
                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                stdout=log, stderr=subprocess.STDOUT)

    def stop(self):
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()

    def get(self, path: str, **params):
        url = f"{self.base}/{path}" + (f"?{urllib.parse.urlencode(params)}" if params else "")
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        check(body.get("status") == "success", f"GET {url}: {body}")
        return body["data"]

    def query(self, expr: str, at: float = None):
        params = {"query": expr}
        if at is not None:
            params["time"] = f"{at:.3f}"
        return self.get("query", **params)["result"]

    def value(self, expr: str, at: float = None) -> float:
        result = self.query(expr, at)
        check(len(result) == 1, f"{expr}: {len(result)} series, expected one: {result}")
        return float(result[0]["value"][1])

    def targets_up(self, expected: dict):
        """The active targets once every job has its expected count and all are up; else None."""
        try:
            active = self.get("targets")["activeTargets"]
        except OSError:
            return None
        counts = {}
        for t in active:
            counts[t["labels"]["job"]] = counts.get(t["labels"]["job"], 0) + 1
        if counts != expected or any(t["health"] != "up" for t in active):
            return None
        return active


def file_sd(job: str, targets_file: Path) -> str:
    return f"  - job_name: {job}\n    file_sd_configs:\n      - files: [{targets_file}]\n        refresh_interval: 1s\n"


def main():
    if len(sys.argv) < 6 or sys.argv[1] != "check" or "--" not in sys.argv:
        print(__doc__)
        sys.exit(2)
    if not os.path.exists(PROMETHEUS):
        print("SKIPPED: no prometheus (Debian: prometheus)")
        sys.exit(77)
    split = sys.argv.index("--")
    targets, rules, work = Path(sys.argv[2]), Path(sys.argv[3]), Path(sys.argv[4])
    expected = {job: int(n) for job, n in (a.split("=") for a in sys.argv[5:split])}
    exprs = sys.argv[split + 1:]
    work.mkdir(parents=True, exist_ok=True)
    prom = Prometheus(work, file_sd("convoy", targets), rules)
    seen = {}  # scrape URL -> job, of every target scraped up at least once

    def all_seen():
        try:
            active = prom.get("targets")["activeTargets"]
        except OSError:
            return False
        for t in active:
            if t["health"] == "up":
                seen[t["scrapeUrl"]] = t["labels"]["job"]
        counts = {job: list(seen.values()).count(job) for job in expected}
        return all(counts[job] >= n for job, n in expected.items())

    def ready():
        try:
            prom.get("targets")
            return True
        except OSError:
            return False

    try:
        wait_for("Prometheus answering its API", ready, 60, 0.2)
        say("ready")
        wait_for(f"targets {expected} each scraped", all_seen, 120, 0.2)
        say("scraped: " + ", ".join(f"{job} {url}" for url, job in sorted(seen.items())))
        for expr in exprs:
            result = wait_for(f"{expr} returning data", lambda: prom.query(expr), 120)
            say(f"{expr}: " + ", ".join(f"{r['metric']} {r['value'][1]}" for r in result))
    except AssertionError as e:
        say(f"FAILED: {e}")
        print(prom.log.read_text()[-3000:])
        sys.exit(1)
    finally:
        prom.stop()


if __name__ == "__main__":
    main()
