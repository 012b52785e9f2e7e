#!/usr/bin/env python3
"""deploy/kubernetes run by a real engine: `podman kube play` of the rendered overlays `cpu` (one parameter server)
and `sharded` (scaled to 2 shards), each a short training whose agents reach the server(s) by the names the
manifests give, with checkpoints on the claim, everything taken down after.

    kube_play_test.py REPO_ROOT [OVERLAY...]

The overlays are rendered by kubernetes_test.py's renderer (the one the offline checks compare with kubectl
kustomize) and the run's scale set as a user would set it: NUM_AGENTS and the Job's completions 2, MAX_MINUTES
1, checkpoints every 20 s, and for `sharded` 2 replicas with PS_SHARDS and PS_ADDRESS to match. What podman 4.3
does not honour is bridged here, never in the manifests:

  - StatefulSet -> one Pod per ordinal, named and labelled as Kubernetes names them (convoy-ps-<i>, the
    apps.kubernetes.io/pod-index label), its volumeClaimTemplate a podman volume checkpoints-convoy-ps-<i>,
    made here and given to fsGroup (podman ignores fsGroup);
  - Job (Indexed) -> one Pod per completion index, with the job-completion-index annotation's value;
  - the agents' ReadWriteMany claim -> one podman volume made here, mounted by every agent pod;
  - $(VAR) in args -> expanded from the container's environment (envFrom the ConfigMap, env), as the kubelet
    does; fieldRef env -> the value the field has;
  - the headless Service -> hostAliases in the agents' pods: convoy-ps and convoy-ps-<i>.convoy-ps name the
    servers' pod addresses, as cluster DNS would (the servers start first);
  - a Secret volume -> a read-only hostPath directory holding the Secret's files, decoded, mode 0440,
    group 10001 (podman 4.3 crashes on a Secret volume, or gives its files base64 text);
  - probes -> not run by podman; the test waits for the server's serving line instead;
  - terminationGracePeriodSeconds -> the stop timeout of the servers' pods (podman's default is 10 s);
  - containerPort -> left out: Kubernetes publishes nothing on the node, podman 4.3 publishes it on the host.
  NetworkPolicy has no podman counterpart and stays checked offline (kubernetes_test.py).

Checked: every pod starts; each agent pod joins the server(s) under its pod's hostname and runs to completion
(exit 0, as the Job counts it), having started with an empty replay memory (--resume finds no checkpoint the
first time) and written its replay checkpoint on the agents' claim; the version advances on every shard; the
final checkpoint on each claim (written on the pods' SIGTERM at `kube down`) verifies and belongs to its shard.
Exit 77 where podman cannot run.
"""

import copy
import os
import re
import shutil
import sys
import tempfile
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from podman_harness import Podman, say, check, wait_for, verify_checkpoint  # noqa: E402

try:
    import yaml
except ImportError:
    print("SKIPPED: no PyYAML (Debian: python3-yaml)")
    sys.exit(77)
from kubernetes_test import container_env, expand, render  # noqa: E402

IMAGE = "convoy-rl:cpu"  # what overlays/cpu (and sharded, on it) name


def by(docs, kind, name):
    found = [d for d in docs if d["kind"] == kind and d["metadata"]["name"] == name]
    check(len(found) == 1, f"the rendered overlay has {len(found)} {kind} {name}")
    return found[0]


def pod_env(container: dict, config: dict, fields: dict):
    """The container's environment as the kubelet makes it: kubernetes_test's (envFrom the ConfigMap, then env),
    with each fieldRef's value from fields instead of its placeholder."""
    env = container_env(container, {("ConfigMap", "convoy-config"): {"data": config}})
    for e in container.get("env", []):
        if "valueFrom" in e:
            path = e["valueFrom"]["fieldRef"]["fieldPath"]
            check(path in fields, f"env {e['name']}: fieldRef {path} has no value here")
            env[e["name"]] = fields[path]
    return env


def pod_from_template(name: str, template: dict, config: dict, fields: dict, labels: dict, annotations: dict,
                      volumes: dict, host_aliases=None):
    """A Pod of a workload's pod template, bridged for podman 4.3 (see the module's doc)."""
    spec = copy.deepcopy(template["spec"])
    for c in spec["containers"]:
        env = pod_env(c, config, fields)
        args = []
        for a in c.get("args", []):
            value, missing = expand(a, env)
            check(not missing, f"{name}: {a} names {missing}, which its environment lacks")
            args.append(value)
        c["args"] = args
        c["env"] = [{"name": k, "value": v} for k, v in env.items()]
        c.pop("envFrom", None)
        for probe in ("startupProbe", "readinessProbe", "livenessProbe"):
            c.pop(probe, None)
        # A containerPort is the pod's own: Kubernetes publishes nothing on the node. podman 4.3 publishes it on
        # the host (a second shard then finds 50051 taken): the pods reach each other on the network instead.
        c.pop("ports", None)
    new_volumes = []
    for v in spec.get("volumes", []):
        new_volumes.append(volumes.get(v["name"], v))
    for claim, volume in volumes.items():
        if not any(v["name"] == claim for v in new_volumes):
            new_volumes.append(volume)
    spec["volumes"] = new_volumes
    spec["hostname"] = name
    if host_aliases:
        spec["hostAliases"] = host_aliases
    meta = {"name": name, "labels": {**template["metadata"].get("labels", {}), **labels}}
    if annotations:
        meta["annotations"] = annotations
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": spec}


class Overlay:
    def __init__(self, repo: Path, p: Podman, overlay: str, tmp: Path, net: str, auth: Path):
        self.repo, self.p, self.overlay, self.tmp, self.net, self.auth = repo, p, overlay, tmp, net, auth
        docs = render(repo / "deploy" / "kubernetes" / "overlays" / overlay)
        self.config = dict(by(docs, "ConfigMap", "convoy-config")["data"])
        self.sts = by(docs, "StatefulSet", "convoy-ps")
        self.job = by(docs, "Job", "convoy-agents")
        self.service = by(docs, "Service", "convoy-ps")
        self.kinds = sorted({d["kind"] for d in docs})
        self.played = []  # the kube play files, for kube down
        # The run's scale, as a user sets it for a short run on a small machine.
        self.shards = 2 if overlay == "sharded" else 1
        self.agents = 2
        self.config.update({"NUM_AGENTS": str(self.agents), "MAX_MINUTES": "1", "CHECKPOINT_EVERY_SECONDS": "20",
                            "TORCH_THREADS": "1", "REPLAY_MEMORY_SIZE": "2000", "BATCH_SIZE": "16"})
        if overlay == "sharded":
            self.config["PS_SHARDS"] = str(self.shards)
            self.config["PS_ADDRESS"] = ",".join(f"convoy-ps-{i}.convoy-ps:50051" for i in range(self.shards))
        check(int(self.config["PS_SHARDS"]) == self.shards, f"{overlay}: PS_SHARDS {self.config['PS_SHARDS']}")

    def secret_volume(self, v):
        """A Secret volume as the files it gives: a read-only host directory with just its items."""
        d = self.tmp / f"{self.overlay}-{v['name']}"
        d.mkdir(exist_ok=True)
        for item in v["secret"].get("items", []):
            shutil.copy(self.auth / item["key"], d / item["path"])
            os.chown(d / item["path"], 0, 10001)
            (d / item["path"]).chmod(v["secret"].get("defaultMode", 0o644))
        return {"name": v["name"], "hostPath": {"path": str(d), "type": "Directory"}}

    def secret_volumes(self, template):
        return {v["name"]: self.secret_volume(v) for v in template["spec"].get("volumes", []) if "secret" in v}

    def play(self, pods, what):
        path = self.tmp / f"{self.overlay}-{what}.yaml"
        path.write_text(yaml.safe_dump_all(pods, sort_keys=False))
        for pod in pods:
            self.p.made_one("pod", pod["metadata"]["name"])
        # Played from the checkout's root, where a user plays the manifests: podman looks there for a build
        # directory named after the image (./convoy-rl/Containerfile), and the image must not be named after an
        # entry of the root (./convoy, a file, failed the play with ENOTDIR).
        r = self.p("kube", "play", "--network", self.net, str(path), check=False, timeout=300, cwd=self.repo)
        check(r.returncode == 0, f"podman kube play {what} failed: {r.stderr[-3000:]}")
        self.played.append(path)
        return path

    def run(self):
        say(f"overlay {self.overlay}: renders {', '.join(self.kinds)}; {self.shards} shard(s), {self.agents} agents")
        template = self.sts["spec"]["template"]
        claim = self.sts["spec"]["volumeClaimTemplates"][0]["metadata"]["name"]
        check(self.service["spec"].get("clusterIP") == "None", "the Service is not headless")
        ps_pods, claims = [], []
        for i in range(self.shards):
            name = f"{self.sts['metadata']['name']}-{i}"
            volume = self.p.volume(f"{claim}-{name}")  # fsGroup: podman's volume made the pod's group's
            claims.append(volume)
            volumes = {claim: {"name": claim, "persistentVolumeClaim": {"claimName": volume}},
                       **self.secret_volumes(template)}
            labels = {"apps.kubernetes.io/pod-index": str(i), "statefulset.kubernetes.io/pod-name": name}
            ps_pods.append(pod_from_template(name, template, self.config,
                                             {"metadata.labels['apps.kubernetes.io/pod-index']": str(i)},
                                             labels, {}, volumes))
        self.play(ps_pods, "parameter-servers")
        addresses = {}
        for pod in ps_pods:
            name = pod["metadata"]["name"]
            container = f"{name}-{pod['spec']['containers'][0]['name']}"

            self.p.wait_serving(container)
            addresses[name] = self.p.inspect(container)["NetworkSettings"]["Networks"][self.net]["IPAddress"]
        # The headless Service's DNS: its name resolves to the servers, each pod's name under it to that pod.
        service = self.service["metadata"]["name"]
        aliases = [{"ip": ip, "hostnames": [f"{name}.{service}"]} for name, ip in addresses.items()]
        aliases[0]["hostnames"].append(service)
        say(f"servers up: {addresses}")

        jt = self.job["spec"]["template"]
        check(self.job["spec"].get("completionMode") == "Indexed", "the agents' Job is not Indexed")
        # The agents' replay claim (ReadWriteMany): one podman volume that every agent pod mounts.
        replay = next(v for v in jt["spec"]["volumes"] if "persistentVolumeClaim" in v)
        replay_volume = self.p.volume(replay["persistentVolumeClaim"]["claimName"])
        agent_volumes = {replay["name"]: {"name": replay["name"], "persistentVolumeClaim": {"claimName": replay_volume}},
                         **self.secret_volumes(jt)}
        agent_pods = []
        for i in range(self.agents):
            name = f"{self.job['metadata']['name']}-{i}"
            annotation = {"batch.kubernetes.io/job-completion-index": str(i)}
            fields = {"metadata.annotations['batch.kubernetes.io/job-completion-index']": str(i)}
            agent_pods.append(pod_from_template(name, jt, self.config, fields,
                                                {"batch.kubernetes.io/job-completion-index": str(i)}, annotation,
                                                agent_volumes, aliases))
        self.play(agent_pods, "agents")
        agent_containers = [f"{pod['metadata']['name']}-{pod['spec']['containers'][0]['name']}" for pod in agent_pods]

        # The agents run MAX_MINUTES and exit 0: the Job's completions.
        def finished():
            states = [self.p.inspect(c).get("State", {}) for c in agent_containers]
            return states if all(s.get("Status") == "exited" for s in states) else None
        states = wait_for("the agents' pods completing", finished, 420, 5)
        for c, s in zip(agent_containers, states):
            log = self.p.logs(c)
            check(s.get("ExitCode") == 0, f"{c} exited {s.get('ExitCode')}:\n{log[-3000:]}")
            check(re.search(r"\] done: .* steps", log), f"{c} logged no finished run:\n{log[-2000:]}")
            check("starting with an empty replay memory" in log and re.search(r"replay checkpoint \S+: \d+ bytes", log),
                  f"{c} did not start empty and end with a replay checkpoint on the claim:\n{log[-2000:]}")
        saved = sorted(f.name for f in self.p.volume_path(replay_volume).iterdir() if f.suffix == ".replay")
        check(saved == [f"agent-{i}.replay" for i in range(self.agents)],
              f"the replay claim holds {saved}, not one checkpoint per agent")
        ps_containers = [f"{pod['metadata']['name']}-{pod['spec']['containers'][0]['name']}" for pod in ps_pods]
        for pod, c in zip(agent_pods, agent_containers):
            index = pod["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"]
            for ps in ps_containers:
                joined = rf"agent agent-{index} \(index {index}\) joined from {re.escape(pod['metadata']['name'])}$"
                check(re.search(joined, self.p.logs(ps), re.M),
                      f"{ps} does not log agent-{index} joining from its pod's hostname {pod['metadata']['name']}:\n"
                      f"{self.p.logs(ps)[-2500:]}")

        # Deleting the servers: SIGTERM with the pod's terminationGracePeriodSeconds (podman's stop timeout;
        # kube down alone would give 10 s), then kube down. Each writes its final checkpoint on its claim.
        grace = int(template["spec"].get("terminationGracePeriodSeconds", 30))
        for pod, c in zip(ps_pods, ps_containers):
            self.p("pod", "stop", "-t", str(grace), pod["metadata"]["name"], timeout=grace + 60)
            state = self.p.inspect(c).get("State", {})
            log = self.p.logs(c)
            check(state.get("ExitCode") == 0 and "final checkpoint" in log,
                  f"{c} did not exit 0 with a final checkpoint on SIGTERM (exit {state.get('ExitCode')}):\n"
                  f"{log[-2500:]}")
        for path in reversed(self.played):
            r = self.p("kube", "down", str(path), check=False, timeout=300)
            check(r.returncode == 0, f"podman kube down {path.name}: {r.stderr[-1500:]}")
        versions = []
        for i, volume in enumerate(claims):
            root = self.p.volume_path(volume)
            ckpts = sorted(d for d in root.iterdir() if d.name.startswith("ckpt-"))
            check(ckpts, f"no checkpoint on the claim {volume}")
            version = verify_checkpoint(ckpts[-1])
            manifest = (ckpts[-1] / "MANIFEST").read_text()
            if self.shards > 1:
                check(re.search(rf"shard_index: {i}\b", manifest) or (i == 0 and "shard_index" not in manifest),
                      f"{volume}'s checkpoint is not shard {i}'s")
            check(version > 0, f"{volume}: the checkpoint is at version {version}; no push was applied")
            versions.append(version)
        for pod in [*ps_pods, *agent_pods]:
            self.p.made["pod"].remove(pod["metadata"]["name"])
        say(f"overlay {self.overlay}: agents completed; final checkpoints verified at versions {versions}")
        return versions


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    repo = Path(sys.argv[1]).resolve()
    overlays = sys.argv[2:] or ["cpu", "sharded"]
    p = Podman("kube")
    tmp = Path(tempfile.mkdtemp(prefix="convoy-kube-test-"))

    def body():
        p.ensure_image(repo, IMAGE)
        net = p.network(f"convoy-kube-{os.getpid()}")
        # The Secret's files; each pod gets them as a Secret volume would give them (secret_volume).
        auth = tmp / "auth"
        p.write_credentials(IMAGE, auth)
        results = {}
        for overlay in overlays:
            results[overlay] = Overlay(repo, p, overlay, tmp, net, auth).run()
        print("RESULT " + " ".join(f"{o}_versions={'/'.join(map(str, v))}" for o, v in results.items()))

    return p.run_test(body, tmp)


if __name__ == "__main__":
    sys.exit(main())
