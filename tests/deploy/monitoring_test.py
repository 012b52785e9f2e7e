#!/usr/bin/env python3
"""deploy/monitoring checked offline with Debian's promtool: the alert rules and their unit tests, both scrape
configurations, and the Kubernetes one's relabelling run on the rendered manifests' pods.

    monitoring_test.py REPO_ROOT

  - `promtool check rules convoy-alerts.yml` and `promtool test rules convoy-alerts_test.yml` (each alert fires
    where it should and stays quiet where it should not);
  - `promtool check config` of prometheus-slurm.yml, and of prometheus.yml with its Kubernetes discovery replaced by
    a static target (Debian's Prometheus is built without Kubernetes discovery; the relabel rules are still
    parsed);
  - prometheus.yml's relabelling applied here, as Prometheus applies it, to the discovery labels Kubernetes would
    give each container port of the rendered overlay's pods: exactly one target per pod, its metrics port, as job
    convoy-ps for the parameter server and convoy-agent for the agents;
  - the dashboard is Grafana JSON with a uid and an expression in every panel (tests/deploy/prometheus_test.py
    runs each against a live Prometheus).
Exit 77 (SKIP) where promtool (Debian: prometheus) or PyYAML is missing.
"""

import copy
import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_checks import Checks  # noqa: E402

try:
    import yaml
except ImportError:
    print("SKIPPED: no PyYAML (Debian: python3-yaml)")
    sys.exit(77)


def promtool(t: Checks, cwd: Path, *args):
    r = subprocess.run(["promtool", *args], cwd=cwd, capture_output=True, text=True, timeout=120)
    t.check(r.returncode == 0, f"promtool {' '.join(args)} exited {r.returncode}: {r.stdout[-2000:]}{r.stderr[-2000:]}")
    return r


def sanitized(name: str) -> str:
    """A Kubernetes label or annotation name as a Prometheus discovery label suffix."""
    return re.sub(r"[^a-zA-Z0-9_]", "_", name)


def relabel(labels: dict, configs):
    """Prometheus' relabelling (the actions prometheus.yml uses: keep, drop, replace); None when dropped."""
    labels = dict(labels)
    for c in configs:
        action = c.get("action", "replace")
        value = c.get("separator", ";").join(labels.get(s, "") for s in c.get("source_labels", []))
        m = re.fullmatch(c.get("regex", "(.*)"), value)
        if action == "keep" and not m:
            return None
        if action == "drop" and m:
            return None
        if action == "replace" and m:
            replacement = re.sub(r"\$(\d+)", lambda g: m.group(int(g.group(1))) or "", c.get("replacement", "$1"))
            if replacement:
                labels[c["target_label"]] = replacement
            else:
                labels.pop(c["target_label"], None)
    return labels


def kubernetes_targets(config: dict, pods):
    """The targets of the first scrape job for `pods` ((name, template)), with role pod's discovery labels."""
    job = config["scrape_configs"][0]
    targets = []
    for name, template in pods:
        meta = template["metadata"]
        for c in template["spec"]["containers"]:
            for port in c.get("ports", []):
                labels = {"__address__": f"10.0.0.1:{port['containerPort']}", "__metrics_path__": "/metrics",
                          "job": job["job_name"], "__meta_kubernetes_namespace": "convoy",
                          "__meta_kubernetes_pod_name": name,
                          "__meta_kubernetes_pod_container_name": c["name"],
                          "__meta_kubernetes_pod_container_port_name": port.get("name", ""),
                          "__meta_kubernetes_pod_container_port_number": str(port["containerPort"])}
                for k, v in meta.get("labels", {}).items():
                    labels[f"__meta_kubernetes_pod_label_{sanitized(k)}"] = v
                for k, v in meta.get("annotations", {}).items():
                    labels[f"__meta_kubernetes_pod_annotation_{sanitized(k)}"] = v
                kept = relabel(labels, job.get("relabel_configs", []))
                if kept is not None:
                    targets.append(kept)
    return targets


def main():
    if len(sys.argv) != 2:
        print(__doc__)
        sys.exit(2)
    if shutil.which("promtool") is None:
        print("SKIPPED: no promtool (Debian: prometheus)")
        sys.exit(77)
    repo = Path(sys.argv[1]).resolve()
    monitoring = repo / "deploy" / "monitoring"
    t = Checks("monitoring")

    promtool(t, monitoring, "check", "rules", "convoy-alerts.yml")
    r = promtool(t, monitoring, "test", "rules", "convoy-alerts_test.yml")
    alerts = yaml.safe_load((monitoring / "convoy-alerts.yml").read_text())
    names = {rule["alert"] for g in alerts["groups"] for rule in g["rules"]}
    t.check(names == {"ConvoyPushesRefused", "ConvoyCheckpointTooOld", "ConvoyAgentOutOfStep", "ConvoyShardDown"},
            f"the alerts are {sorted(names)}")
    tests = yaml.safe_load((monitoring / "convoy-alerts_test.yml").read_text())
    tested = {a["alertname"] for case in tests["tests"] for a in case.get("alert_rule_test", [])
              if a.get("exp_alerts")}
    t.check(tested == names, f"alerts without a test where they fire: {sorted(names - tested)}")
    quiet = {a["alertname"] for case in tests["tests"] for a in case.get("alert_rule_test", [])
             if not a.get("exp_alerts")}
    t.check(quiet == names, f"alerts without a test where they stay quiet: {sorted(names - quiet)}")

    promtool(t, monitoring, "check", "config", "prometheus-slurm.yml")
    k8s = yaml.safe_load((monitoring / "prometheus.yml").read_text())
    with tempfile.TemporaryDirectory() as tmp:
        static = copy.deepcopy(k8s)
        for job in static["scrape_configs"]:
            t.check("kubernetes_sd_configs" in job, f"prometheus.yml: job {job['job_name']} has no Kubernetes discovery")
            job.pop("kubernetes_sd_configs", None)
            job["static_configs"] = [{"targets": ["10.0.0.1:9464"]}]
        (Path(tmp) / "prometheus.yml").write_text(yaml.safe_dump(static))
        shutil.copy(monitoring / "convoy-alerts.yml", tmp)
        promtool(t, Path(tmp), "check", "config", "prometheus.yml")

    from kubernetes_test import render  # noqa: E402  (needs PyYAML, checked above)
    for overlay in ("cpu", "sharded"):
        docs = render(repo / "deploy" / "kubernetes" / "overlays" / overlay)
        sts = next(d for d in docs if d["kind"] == "StatefulSet")
        job = next(d for d in docs if d["kind"] == "Job")
        pods = [(f"{sts['metadata']['name']}-{i}", sts["spec"]["template"]) for i in range(sts["spec"]["replicas"])]
        pods += [(f"{job['metadata']['name']}-{i}", job["spec"]["template"]) for i in range(job["spec"]["completions"])]
        targets = kubernetes_targets(k8s, pods)
        t.check(len(targets) == len(pods), f"overlay {overlay}: {len(targets)} scrape targets for {len(pods)} pods")
        for target in targets:
            pod = target.get("pod", "")
            want = "convoy-ps" if pod.startswith(sts["metadata"]["name"]) else "convoy-agent"
            t.check(target.get("job") == want, f"overlay {overlay}: pod {pod} is scraped as job {target.get('job')}, "
                                               f"not {want}")
            t.check(target["__address__"] == "10.0.0.1:9464" and target["__metrics_path__"] == "/metrics",
                    f"overlay {overlay}: pod {pod} is scraped at {target['__address__']}{target['__metrics_path__']}")
        print(f"overlay {overlay}: {len(targets)} pods, each scraped once at :9464/metrics as "
              f"{sorted({x['job'] for x in targets})}")

    dashboard = json.loads((monitoring / "convoy-dashboard.json").read_text())
    t.check(dashboard.get("uid") == "convoy" and dashboard.get("panels"), "the dashboard has no uid or no panels")
    for p in dashboard.get("panels", []):
        exprs = [x.get("expr", "") for x in p.get("targets", [])]
        t.check(bool(exprs) and all(exprs), f"dashboard panel {p.get('title')!r} has a target without an expression")
    print(r.stdout.strip())
    sys.exit(t.finish())


if __name__ == "__main__":
    main()
