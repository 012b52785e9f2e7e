#!/usr/bin/env python3
"""A real Prometheus scraping a short convoy_train run (and a convoy_sim), with convoy's alert rules loaded and
every expression of its dashboard run against it.

    prometheus_test.py REPO_ROOT BIN_DIR

convoy_train --metrics lists its processes in <run>/prometheus_targets.json; Debian's prometheus reads that file
(file_sd), scrapes every second and evaluates deploy/monitoring/convoy-alerts.yml. Checked, through Prometheus'
HTTP API:
  - every target is up: the server as job convoy-ps, each agent as job convoy-agent, the simulator;
  - the server's values agree with GetStatus (convoy_status --json) at the same moment: a scrape that Prometheus
    stamped after one GetStatus and stored before the next lies between them (counters and the version), and
    what does not move (parameters, run id, model fingerprint, incarnation) is equal;
  - the agents count env steps, train steps and pushes, fill their replay memory and are in step; convoy_sim
    counts the steps it served its car;
  - the rules load and evaluate without error; every metric they or the dashboard name is scraped, and every
    expression of deploy/monitoring/convoy-dashboard.json returns data.
Every process is stopped and every file removed, also when a check fails. Exit 77 (SKIP) where Debian's
prometheus is not installed.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from prometheus_harness import PROMETHEUS, Prometheus, check, file_sd, say, wait_for  # noqa: E402

def convoy_status(bin_dir: Path, run: Path):
    r = subprocess.run([str(bin_dir / "convoy_status"), str(run), "--json"], capture_output=True, text=True,
                       timeout=30)
    check(r.returncode == 0, f"convoy_status --json exited {r.returncode}: {r.stderr[-2000:]}")
    lines = r.stdout.splitlines()
    check(len(lines) == 1, f"convoy_status --json printed {len(lines)} lines for one shard")
    return json.loads(lines[0])


def number(status: dict, field: str) -> float:
    """A GetStatus field of the JSON mapping (64-bit integers are strings there; a zero may be absent)."""
    return float(status.get(field, 0))


def metric_names(text: str):
    return set(re.findall(r"\b(convoy_[a-z0-9_]+|up)\b", text))


def run(repo: Path, bin_dir: Path, tmp: Path, procs: list):
    runs = tmp / "runs"
    run_dir = runs / "metrics"
    train_log = open(tmp / "train.log", "w")
    procs.append(("convoy_train", subprocess.Popen(
        [str(bin_dir / "convoy_train"), f"--runs_dir={runs}", "--name=metrics", "--metrics", "--agents=2",
         "--minutes=3", "--model=compact", "--device=cpu", "--validate_every_seconds=0", "--eval_episodes=1",
         "--final_validation_episodes=0", "--report_seconds=2"],
        stdout=train_log, stderr=subprocess.STDOUT)))
    targets_file = run_dir / "prometheus_targets.json"
    wait_for("convoy_train's prometheus_targets.json", targets_file.exists, 180)
    groups = json.loads(targets_file.read_text())
    jobs = sorted(g["labels"]["job"] for g in groups)
    check(jobs == ["convoy-agent", "convoy-agent", "convoy-ps"], f"the targets file lists jobs {jobs}")
    say(f"convoy_train lists {len(groups)} targets: {[g['targets'][0] for g in groups]}")

    sim_port_file = tmp / "sim.metrics.port"
    sim_log = open(tmp / "sim.log", "w")
    procs.append(("convoy_sim", subprocess.Popen(
        [str(bin_dir / "convoy_sim"), "--port=0", "--bind=127.0.0.1", "--clock=realtime",
         "--metrics_address=127.0.0.1:0", f"--metrics_port_file={sim_port_file}"],
        stdout=sim_log, stderr=subprocess.STDOUT)))
    sim_port = int(wait_for("convoy_sim's metrics port", lambda: sim_port_file.exists() and
                            sim_port_file.read_text().strip(), 60))

    prom = Prometheus(tmp, file_sd("convoy", targets_file) +
                      f'  - job_name: convoy-sim\n    static_configs:\n      - targets: ["127.0.0.1:{sim_port}"]\n',
                      repo / "deploy/monitoring/convoy-alerts.yml")
    procs.append(("prometheus", prom.process))
    active = wait_for("Prometheus scraping all 4 targets",
                      lambda: prom.targets_up({"convoy-ps": 1, "convoy-agent": 2, "convoy-sim": 1}), 60)
    say("targets up: " + ", ".join(f"{t['labels']['job']} {t['scrapeUrl']}" for t in active))

    # The agents have joined and pushed: the server has applied something.
    wait_for("a push applied", lambda: prom.query('convoy_ps_pushes_accepted_total > 0'), 120)

    # GetStatus at t0, a scrape stamped after t0, GetStatus again: the scrape lies between the two.
    bracketed = 0
    for attempt in range(5):
        before = convoy_status(bin_dir, run_dir)
        t0 = time.time()
        stamp = wait_for("a scrape after GetStatus",
                         lambda: next((float(r["value"][1]) for r in prom.query('timestamp(convoy_ps_version)')
                                       if float(r["value"][1]) > t0), None), 20, 0.2)
        after = convoy_status(bin_dir, run_dir)
        pairs = {
            "convoy_ps_version": "version",
            "convoy_ps_pushes_accepted_total": "updates_applied",
            "convoy_ps_applied_minibatches_total": "applied_minibatches",
            "convoy_ps_apply_steps_total": "apply_steps",
            "convoy_ps_received_bytes_total": "bytes_in",
            "convoy_ps_sent_bytes_total": "bytes_out",
            'convoy_ps_pulls_total{result="sent"}': "pulls_served",
            "convoy_ps_pushes_repeated_total": "repeated_pushes",
            "convoy_ps_checkpoints_written_total": "checkpoints_written",
        }
        for expr, field in pairs.items():
            scraped = prom.value(expr, at=stamp)
            low, high = number(before, field), number(after, field)
            check(low <= scraped <= high,
                  f"{expr} = {scraped} at {stamp:.3f}, not between GetStatus's {field} {low} (before) and {high} "
                  f"(after)")
        for agent in before.get("agents", []):
            expr = f'convoy_ps_agent_pushes_accepted_total{{agent="{agent["agent_id"]}"}}'
            low = number(agent, "pushes_accepted")
            high = next(number(a, "pushes_accepted") for a in after["agents"] if a["agent_id"] == agent["agent_id"])
            scraped = prom.value(expr, at=stamp)
            check(low <= scraped <= high, f"{expr} = {scraped}, not between {low} and {high}")
        check(prom.value("convoy_ps_parameters", at=stamp) == number(after, "parameter_count"),
              "convoy_ps_parameters is not GetStatus's parameter_count")
        info = prom.query("convoy_ps_run_info", at=stamp)
        check(len(info) == 1 and info[0]["metric"]["run_id"] == after["run_id"]
              and info[0]["metric"]["incarnation"] == str(after["incarnation"])
              and info[0]["metric"]["model_fingerprint"] == after["model_fingerprint"]
              and info[0]["metric"]["model_name"] == after["model_name"],
              f"convoy_ps_run_info {info} does not name GetStatus's run, incarnation, model and fingerprint")
        check(len(before.get("agents", [])) == 2, f"GetStatus lists {len(before.get('agents', []))} agents")
        if number(before, "updates_applied") < number(after, "updates_applied"):
            bracketed += 1  # Pushes were applied between the two: the scrape was of a moving server.
        say(f"scrape at {stamp:.3f} between two GetStatus calls: version {number(before, 'version'):.0f} <= "
            f"{prom.value('convoy_ps_version', at=stamp):.0f} <= {number(after, 'version'):.0f}")
        if bracketed >= 2:
            break
    check(bracketed >= 1, "the server applied nothing while its scrapes were compared with GetStatus")

    # The agents and the simulator.
    for agent in ("agent-0", "agent-1"):
        for expr in (f'convoy_agent_env_steps_total{{agent="{agent}"}}',
                     f'convoy_agent_train_steps_total{{agent="{agent}"}}',
                     f'convoy_agent_replay_transitions{{agent="{agent}"}}',
                     f'sum(convoy_agent_pushes_total{{agent="{agent}",result="applied"}})',
                     f'sum(convoy_agent_push_duration_seconds_count{{agent="{agent}"}})'):
            wait_for(f"{expr} > 0", lambda: prom.query(f"({expr}) > 0"), 60)
        wait_for(f"{agent} in step", lambda: prom.query(f'convoy_agent_in_step{{agent="{agent}"}} == 1'), 60)
    check(prom.value('convoy_agent_replay_capacity_transitions{agent="agent-0"}') > 0,
          "the agents report no replay capacity")
    wait_for("convoy_sim's steps", lambda: prom.query('convoy_sim_steps_total{vehicle="PhysXCar"} > 0'), 30)

    # The rules: loaded, healthy (evaluated without error).
    rules = [r for g in prom.get("rules")["groups"] for r in g["rules"]]
    check(len(rules) == 4, f"Prometheus loaded {len(rules)} rules, not convoy-alerts.yml's 4")
    wait_for("every rule evaluated", lambda: all(r.get("lastEvaluation", "").startswith("20")
                                                for g in prom.get("rules")["groups"] for r in g["rules"]), 30)
    for g in prom.get("rules")["groups"]:
        for r in g["rules"]:
            check(r["health"] == "ok", f"rule {r['name']}: {r['health']} {r.get('lastError', '')}")

    # Every metric the rules and the dashboard name is scraped; every dashboard expression returns data.
    import yaml  # python3-yaml, one of ./convoy's build packages
    alerts = yaml.safe_load((repo / "deploy/monitoring/convoy-alerts.yml").read_text())
    rule_exprs = [r["expr"] for g in alerts["groups"] for r in g["rules"]]
    dashboard = json.loads((repo / "deploy/monitoring/convoy-dashboard.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    check(len(exprs) >= 10, f"the dashboard has {len(exprs)} expressions")
    names = set().union(*(metric_names(e) for e in rule_exprs + exprs))
    time.sleep(2)  # rate() over [1m] needs two samples of every series: the agents' latest ones too.
    for name in sorted(names):
        check(bool(prom.query(f'count({{__name__="{name}"}})')), f"{name}, named by the rules or the dashboard, "
                                                                  f"is not scraped")
    for expr in exprs:
        result = wait_for(f"dashboard expression {expr}", lambda: prom.query(expr), 30)
        say(f"dashboard: {expr} -> {len(result)} series")
    say(f"{len(names)} metric names of the rules and the dashboard scraped; {len(exprs)} dashboard expressions "
        f"return data")


def main():
    if len(sys.argv) != 3:
        print(__doc__)
        sys.exit(2)
    if not os.path.exists(PROMETHEUS):
        print("SKIPPED: no prometheus (Debian: prometheus)")
        sys.exit(77)
    repo, bin_dir = Path(sys.argv[1]).resolve(), Path(sys.argv[2]).resolve()
    tmp = Path(tempfile.mkdtemp(prefix="convoy_prometheus_"))
    procs = []
    try:
        run(repo, bin_dir, tmp, procs)
        say("PASSED")
    except AssertionError as e:
        say(f"FAILED: {e}")
        for log in ("train.log", "prometheus.log", "sim.log"):
            if (tmp / log).exists():
                print(f"--- {log} (end) ---\n{(tmp / log).read_text()[-3000:]}")
        sys.exit(1)
    finally:
        for name, p in reversed(procs):
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for name, p in reversed(procs):
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                say(f"{name} did not stop in 60 s: killed")
                p.kill()
                p.wait()
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
