#!/usr/bin/env python3
"""deploy/kubernetes, checked offline.

    kubernetes_test.py REPO_ROOT BIN_DIR

Every manifest parses; each overlay renders, with a small built-in kustomize (the features the manifests use:
resources, images, strategic-merge patches) and, where `kubectl kustomize` is available, with kubectl too, and the
two renderings must agree. In each rendered overlay the pieces must fit together: the Service the agents' address
names, its selector and ports, the StatefulSet and its volumes, the gRPC health probes, the ConfigMap keys the pods
use, $(VAR) references, and every flag passed to convoy_ps and convoy_agent, which must be one the binaries accept
(their --help). Security: the PS serves TLS and requires the bearer token, the agents verify its certificate (by a
name the certificate of convoy_ps --write_credentials carries) and send the token, neither runs --insecure, and
every file they read comes from the Secret convoy-auth under the keys convoy_ps --write_credentials writes; that
Secret is created by hand and is no rendered object (applying must never replace it). Needs PyYAML (Debian:
python3-yaml).
"""

import copy
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

# The agent flags whose values a convoy_ps run owns (RunConfig, docs/deploy.md's tuning section).
# The run settings the PS owns, as convoy_agent's --help marks them (deploy_checks.run_settings); set by main.
RUN_SETTINGS = ()

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_checks import (  # noqa: E402
    Checks, accepted_flags, die, flag_defaults, flag_name, run_settings, same_value)

try:
    import yaml
except ImportError:
    die("PyYAML is missing: install Debian's python3-yaml (./convoy build installs it)")

OVERLAYS = ("cpu", "gpu", "sharded")

# The Secret the pods mount, created by hand (docs/deploy.md), and its keys: the files convoy_ps --write_credentials
# writes. Each security flag reads the file under one key.
AUTH_SECRET = "convoy-auth"
AUTH_KEYS = {"auth_token", "ca.crt", "tls.crt", "tls.key"}
PS_AUTH_FLAGS = {"tls_cert": "tls.crt", "tls_key": "tls.key", "auth_token_file": "auth_token"}
AGENT_AUTH_FLAGS = {"tls_ca": "ca.crt", "auth_token_file": "auth_token"}

# Strategic-merge keys of the lists the manifests patch (Kubernetes' patchMergeKey for each field name).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}


def written_credentials(convoy_ps: Path):
    """convoy_ps --write_credentials into a fresh directory: the names of the files it writes, and the DNS names
    and addresses in its certificate (None without openssl)."""
    with tempfile.TemporaryDirectory() as d:
        auth = Path(d) / "auth"
        r = subprocess.run([str(convoy_ps), f"--write_credentials={auth}"], capture_output=True, text=True,
                           timeout=60)
        if r.returncode != 0:
            raise RuntimeError(f"convoy_ps --write_credentials failed ({r.returncode}): {r.stderr.strip()[:500]}")
        files = {f.name for f in auth.iterdir()}
        openssl = shutil.which("openssl")
        if openssl is None:
            return files, None
        x = subprocess.run([openssl, "x509", "-in", str(auth / "tls.crt"), "-noout", "-ext", "subjectAltName"],
                           capture_output=True, text=True, timeout=60)
        if x.returncode != 0:
            raise RuntimeError(f"openssl cannot read the written tls.crt: {x.stderr.strip()[:500]}")
        names = set(re.findall(r"(?:DNS|IP Address):([^,\s]+)", x.stdout))
        return files, names


def load_docs(path: Path):
    with open(path) as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


def strategic_merge(base, patch, field=None):
    """Kubernetes' strategic merge patch, for maps and the lists in MERGE_KEYS; other lists are replaced."""
    if isinstance(base, dict) and isinstance(patch, dict):
        out = dict(base)
        for k, v in patch.items():
            if v is None:
                out.pop(k, None)
            elif k in out:
                out[k] = strategic_merge(out[k], v, k)
            else:
                out[k] = copy.deepcopy(v)
        return out
    if isinstance(base, list) and isinstance(patch, list) and field in MERGE_KEYS:
        key = MERGE_KEYS[field]
        out = [copy.deepcopy(x) for x in base]
        for item in patch:
            match = next((i for i, x in enumerate(out) if x.get(key) == item.get(key)), None)
            if match is None:
                out.append(copy.deepcopy(item))
            else:
                out[match] = strategic_merge(out[match], item, None)
        return out
    return copy.deepcopy(patch)


def containers_of(doc):
    spec = doc.get("spec", {})
    pod = spec.get("template", {}).get("spec", {}) if "template" in spec else spec
    return pod.get("containers", []) + pod.get("initContainers", [])


def split_image(image: str):
    """'repo/name:tag' -> ('repo/name', 'tag'); digests are not used here."""
    name, _, tag = image.rpartition(":")
    if not name or "/" in tag:
        return image, None
    return name, tag


def render(directory: Path):
    """The subset of kustomize the manifests use: resources, images, patches (strategic merge by kind and name)."""
    k = yaml.safe_load(open(directory / "kustomization.yaml"))
    unknown = set(k) - {"apiVersion", "kind", "resources", "images", "patches"}
    if unknown:
        raise RuntimeError(f"{directory}/kustomization.yaml uses {sorted(unknown)}: teach render() about them")
    docs = []
    for r in k.get("resources", []):
        p = directory / r
        docs += render(p) if p.is_dir() else load_docs(p)
    for patch_entry in k.get("patches", []):
        if set(patch_entry) != {"path"}:
            raise RuntimeError(f"patch {patch_entry}: only strategic-merge patch files are supported")
        for patch in load_docs(directory / patch_entry["path"]):
            target = [
                i
                for i, d in enumerate(docs)
                if d["kind"] == patch["kind"] and d["metadata"]["name"] == patch["metadata"]["name"]
            ]
            if len(target) != 1:
                raise RuntimeError(f"patch {patch_entry['path']} matches {len(target)} resources")
            docs[target[0]] = strategic_merge(docs[target[0]], patch)
    for img in k.get("images", []):
        for d in docs:
            for c in containers_of(d):
                name, tag = split_image(c["image"])
                if name == img["name"]:
                    c["image"] = f"{img.get('newName', name)}:{img.get('newTag', tag or 'latest')}"
                    if tag is None and "newTag" not in img:
                        c["image"] = img.get("newName", name)
    return docs


def by_kind(docs):
    return {(d["kind"], d["metadata"]["name"]): d for d in docs}


def kubectl_render(directory: Path):
    kubectl = shutil.which("kubectl")
    if kubectl is None:
        return None, "kubectl not found"
    r = subprocess.run([kubectl, "kustomize", str(directory)], capture_output=True, text=True, timeout=120)
    if r.returncode != 0:
        return None, f"kubectl kustomize failed: {r.stderr.strip()[:500]}"
    return list(d for d in yaml.safe_load_all(r.stdout) if d is not None), None


def expand(arg: str, env: dict):
    """Kubernetes' $(VAR) expansion in args; returns the result and the names it could not resolve."""
    missing = []

    def sub(m):
        if m.group(1) in env:
            return env[m.group(1)]
        missing.append(m.group(1))
        return m.group(0)

    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, arg), missing


def container_env(c, objects):
    """What the container sees as environment: envFrom ConfigMaps' keys, then env (valueFrom as a placeholder)."""
    env = {}
    for src in c.get("envFrom", []):
        ref = src.get("configMapRef", {}).get("name")
        cm = objects.get(("ConfigMap", ref))
        if cm is not None:
            env.update({k: str(v) for k, v in cm.get("data", {}).items()})
    for e in c.get("env", []):
        env[e["name"]] = str(e.get("value", "0" if "valueFrom" in e else ""))
    return env


def labels_match(selector: dict, labels: dict):
    return bool(selector) and all(labels.get(k) == v for k, v in selector.items())


def secret_file(path: str, pod: dict, container: dict):
    """The (Secret name, key) a file path in the container comes from, or None when no Secret volume provides it."""
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for m in container.get("volumeMounts", []):
        mount = m["mountPath"].rstrip("/") + "/"
        v = volumes.get(m["name"], {})
        if "secret" not in v or not path.startswith(mount):
            continue
        rel = path[len(mount):]
        items = v["secret"].get("items")
        key = next((i["key"] for i in items if i["path"] == rel), None) if items is not None else rel
        if key is not None:
            return v["secret"]["secretName"], key
    return None


def check_overlay(name: str, docs, flags: dict, t: Checks, renderer: str, cert_names):
    o = by_kind(docs)
    where = f"overlay {name} ({renderer})"
    for d in docs:
        t.check(all(k in d for k in ("apiVersion", "kind", "metadata")), f"{where}: {d.get('kind')} lacks a field")

    cm = o.get(("ConfigMap", "convoy-config"))
    svcs = [d for d in docs if d["kind"] == "Service"]
    stss = [d for d in docs if d["kind"] == "StatefulSet"]
    jobs = [d for d in docs if d["kind"] == "Job"]
    if not t.check(cm and len(svcs) == 1 and len(stss) == 1 and len(jobs) == 1,
                   f"{where}: expected the ConfigMap, one Service, one StatefulSet and one Job"):
        return
    # The credentials are the user's: `kubectl apply -k` must not create or overwrite them.
    t.check(not any(d["kind"] == "Secret" for d in docs),
            f"{where}: renders a Secret; the auth Secret is created by hand and applying would replace it")
    svc, sts, job = svcs[0], stss[0], jobs[0]
    data = cm["data"]

    # Every ConfigMap value is a string (Kubernetes rejects numbers there).
    for k, v in data.items():
        t.check(isinstance(v, str), f"{where}: ConfigMap key {k} is not a string ({v!r})")

    # The Service: headless, selecting the PS pods, its port reaching the PS container's gRPC port.
    t.check(svc["spec"].get("clusterIP") == "None", f"{where}: Service {svc['metadata']['name']} is not headless")
    sts_spec = sts["spec"]
    pod_labels = sts_spec["template"]["metadata"]["labels"]
    t.check(labels_match(svc["spec"]["selector"], pod_labels), f"{where}: the Service does not select the PS pods")
    t.check(labels_match(sts_spec["selector"]["matchLabels"], pod_labels),
            f"{where}: the StatefulSet selector does not match its pod template")
    t.check(sts_spec.get("serviceName") == svc["metadata"]["name"], f"{where}: StatefulSet serviceName is not the Service")
    shards = int(data.get("PS_SHARDS", "-1"))
    t.check(sts_spec.get("replicas") == shards,
            f"{where}: the PS StatefulSet has {sts_spec.get('replicas')} replicas, not PS_SHARDS={shards}")

    ps = sts_spec["template"]["spec"]["containers"][0]
    ps_ports = {p.get("name"): p["containerPort"] for p in ps.get("ports", [])}
    svc_port = svc["spec"]["ports"][0]
    target = svc_port.get("targetPort", svc_port["port"])
    container_port = ps_ports.get(target) if isinstance(target, str) else target
    t.check(container_port in ps_ports.values(), f"{where}: Service targetPort {target!r} is no PS container port")

    # PS args: $(VARS) resolve, flags are convoy_ps's, --port is the container port, --resume and a checkpoint
    # directory on the claim template's volume.
    ps_env = container_env(ps, o)
    ps_args = {}
    for c, binary in ((ps, "convoy_ps"), (job["spec"]["template"]["spec"]["containers"][0], "convoy_agent")):
        t.check(c.get("command", [""])[0] == f"/usr/local/bin/{binary}",
                f"{where}: container {c['name']} does not run /usr/local/bin/{binary}")
        env = container_env(c, o)
        parsed = {}
        for arg in c.get("args", []):
            value, missing = expand(arg, env)
            t.check(not missing, f"{where}: {c['name']} arg {arg} refers to undefined {missing}")
            fname = flag_name(value)
            if t.check(fname is not None, f"{where}: {c['name']} arg {arg!r} is not a --flag"):
                t.check(fname in flags[binary], f"{where}: {binary} does not accept --{fname} ({arg})")
                parsed[fname] = value.partition("=")[2] if "=" in value else "true"
        for src in c.get("envFrom", []):
            ref = src.get("configMapRef", {}).get("name")
            t.check(("ConfigMap", ref) in o, f"{where}: {c['name']} envFrom names a missing ConfigMap {ref}")
        for e in c.get("env", []):
            ref = e.get("valueFrom", {}).get("configMapKeyRef") or e.get("valueFrom", {}).get("secretKeyRef")
            if ref:
                kind = "ConfigMap" if "configMapKeyRef" in e["valueFrom"] else "Secret"
                obj = o.get((kind, ref["name"]), {})
                keys = set(obj.get("data", {})) | set(obj.get("stringData", {}))
                t.check(ref["key"] in keys, f"{where}: {c['name']} env {e['name']} names a missing {kind} key")
        ps_args[binary] = parsed
    psa, aga = ps_args["convoy_ps"], ps_args["convoy_agent"]
    t.check(psa.get("port") and int(psa["port"]) == container_port,
            f"{where}: convoy_ps --port={psa.get('port')} is not the container port {container_port}")
    t.check("resume" in psa, f"{where}: convoy_ps runs without --resume")
    vct = {v["metadata"]["name"] for v in sts_spec.get("volumeClaimTemplates", [])}
    mounts = {m["mountPath"]: m["name"] for m in ps.get("volumeMounts", [])}
    t.check(mounts.get(psa.get("checkpoint_dir")) in vct,
            f"{where}: --checkpoint_dir={psa.get('checkpoint_dir')} is not on a persistent volume claim")
    # The agents keep their replay checkpoints on a claim every agent pod can mount (ReadWriteMany: a Job's pods
    # cannot have a claim each) and start with --resume, so that a pod restarted or moved continues from its own.
    agent = job["spec"]["template"]["spec"]["containers"][0]
    agent_mounts = {m["mountPath"]: m["name"] for m in agent.get("volumeMounts", [])}
    agent_volumes = {v["name"]: v for v in job["spec"]["template"]["spec"].get("volumes", [])}
    replay_volume = agent_volumes.get(agent_mounts.get(aga.get("replay_checkpoint_dir")), {})
    claim_name = replay_volume.get("persistentVolumeClaim", {}).get("claimName")
    claim = o.get(("PersistentVolumeClaim", claim_name), {})
    t.check(claim_name and claim, f"{where}: the agents' --replay_checkpoint_dir={aga.get('replay_checkpoint_dir')} "
                                  "is not on a PersistentVolumeClaim the overlay defines")
    t.check("ReadWriteMany" in claim.get("spec", {}).get("accessModes", []),
            f"{where}: the agents' replay claim {claim_name} is not ReadWriteMany, which every agent pod needs")
    t.check("resume" in aga, f"{where}: the agents run without --resume")
    grace = job["spec"]["template"]["spec"].get("terminationGracePeriodSeconds", 30)
    t.check(grace >= 30, f"{where}: the agents' terminationGracePeriodSeconds {grace} leaves no time to save")
    # The run settings are passed once, to the PS; the agents adopt them on Join (an agent flag that
    # disagreed would stop the agent).
    for flag in RUN_SETTINGS:
        t.check(flag not in aga, f"{where}: the agents are given --{flag}, a run setting the PS owns")
    for flag in ("model", "batch_size", "batch_update_frequency", "gamma", "n_step",
                 "mirror_augmentation", "prioritized", "average_horizon"):
        t.check(flag in psa, f"{where}: convoy_ps is not given --{flag}")

    # Health: readiness and liveness (and startup) through the gRPC health service on the PS port.
    for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
        p = ps.get(probe, {})
        t.check("grpc" in p and p["grpc"].get("port") == container_port,
                f"{where}: PS {probe} is not a gRPC probe on port {container_port}")

    # The agents: an indexed Job as large as NUM_AGENTS, reaching the PS by the Service's DNS name and port.
    jspec = job["spec"]
    t.check(jspec.get("completionMode") == "Indexed", f"{where}: the agents Job is not Indexed")
    n = int(data.get("NUM_AGENTS", "-1"))
    t.check(jspec.get("completions") == n and jspec.get("parallelism") == n,
            f"{where}: Job completions/parallelism ({jspec.get('completions')}/{jspec.get('parallelism')}) "
            f"differ from NUM_AGENTS={n}")
    t.check(psa.get("apex_num_agents") == str(n), f"{where}: convoy_ps --apex_num_agents is not NUM_AGENTS")
    # One shard: the Service's name (or its pod's); several: every pod's own name, in ordinal (shard) order, since
    # the Service's name would reach any one of them.
    svc_name = svc["metadata"]["name"]
    addresses = aga.get("ps", "").split(",")
    t.check(len(addresses) == shards, f"{where}: agents' --ps={aga.get('ps')} lists {len(addresses)} servers, "
                                      f"not PS_SHARDS={shards}")
    for i, address in enumerate(addresses):
        host, _, port = address.rpartition(":")
        first_host = host.split(".")[0]
        names_pod = first_host == f"{sts['metadata']['name']}-{i}" and host.split(".")[1:2] == [svc_name]
        t.check(names_pod or (shards == 1 and first_host == svc_name),
                f"{where}: agents' server {i}, {address}, is not pod {sts['metadata']['name']}-{i} of the Service "
                f"{svc_name}")
        t.check(port.isdigit() and int(port) == svc_port["port"],
                f"{where}: agents' PS port {port} is not the Service port")
    host = addresses[0].rpartition(":")[0]
    # Each pod serves the shard its ordinal names.
    t.check(psa.get("num_shards") == str(shards), f"{where}: convoy_ps --num_shards is not PS_SHARDS")
    index_env = [e for e in ps.get("env", []) if e["name"] == "POD_INDEX"]
    t.check(index_env and index_env[0]["valueFrom"]["fieldRef"]["fieldPath"]
            == "metadata.labels['apps.kubernetes.io/pod-index']",
            f"{where}: POD_INDEX does not come from the pod's apps.kubernetes.io/pod-index label")
    t.check(ps["args"].count("--shard_index=$(POD_INDEX)") == 1, f"{where}: convoy_ps --shard_index is not the pod index")
    if shards > 1:
        t.check(sts_spec.get("podManagementPolicy") == "Parallel",
                f"{where}: the shards start one after another (podManagementPolicy is not Parallel)")
    index_env = [e for e in job["spec"]["template"]["spec"]["containers"][0].get("env", []) if e["name"] == "AGENT_INDEX"]
    t.check(index_env and "job-completion-index" in index_env[0]["valueFrom"]["fieldRef"]["fieldPath"],
            f"{where}: AGENT_INDEX does not come from the Job's completion index")
    t.check(aga.get("agent_index") == "0", f"{where}: --agent_index is not the completion index")

    # Volumes: every mount names a volume; Secret volumes name the auth Secret and only its documented keys.
    for owner, pod in (("PS", sts_spec["template"]["spec"]), ("agents", jspec["template"]["spec"])):
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for c in pod["containers"]:
            for m in c.get("volumeMounts", []):
                t.check(m["name"] in volumes or (owner == "PS" and m["name"] in vct),
                        f"{where}: {owner} mount {m['name']} has no volume")
        for v in volumes.values():
            if "secret" in v:
                t.check(v["secret"]["secretName"] == AUTH_SECRET,
                        f"{where}: {owner} volume {v['name']} names Secret {v['secret']['secretName']}, "
                        f"not {AUTH_SECRET}")
                t.check(not v["secret"].get("optional", False),
                        f"{where}: {owner} volume {v['name']} is optional: the pods would start without credentials")
                items = v["secret"].get("items")
                if t.check(items is not None, f"{where}: {owner} volume {v['name']} lists no items"):
                    for item in items:
                        t.check(item["key"] in AUTH_KEYS,
                                f"{where}: {owner} volume {v['name']} uses key {item['key']}, not one of "
                                f"{sorted(AUTH_KEYS)}")
        t.check(any("secret" in v and v["secret"]["secretName"] == AUTH_SECRET for v in volumes.values()),
                f"{where}: the {owner} pods do not mount the auth Secret")

    # Security: TLS and the token on both sides, each file from its key of the auth Secret; never --insecure.
    agent_c = jspec["template"]["spec"]["containers"][0]
    for owner, pod, c, args, wanted in (
            ("PS", sts_spec["template"]["spec"], ps, psa, PS_AUTH_FLAGS),
            ("agents", jspec["template"]["spec"], agent_c, aga, AGENT_AUTH_FLAGS)):
        t.check("insecure" not in args, f"{where}: the {owner} args include --insecure")
        for flag, key in wanted.items():
            if t.check(bool(args.get(flag)), f"{where}: the {owner} args lack --{flag}"):
                t.check(secret_file(args[flag], pod, c) == (AUTH_SECRET, key),
                        f"{where}: {owner} --{flag}={args[flag]} is not key {key} of Secret {AUTH_SECRET} "
                        f"(it is {secret_file(args[flag], pod, c)})")
    t.check("health_without_auth" in psa and psa["health_without_auth"] in ("true", "1"),
            f"{where}: convoy_ps runs without --health_without_auth; the kubelet's gRPC probes carry no token")
    server_name = aga.get("tls_server_name") or host
    t.check(bool(server_name), f"{where}: the agents check no name in the PS's certificate")
    if cert_names is not None:
        t.check(server_name in cert_names,
                f"{where}: the agents check {server_name!r}, which the certificate of convoy_ps --write_credentials "
                f"does not carry ({sorted(cert_names)})")

    # Metrics: both pods serve /metrics on their container port "metrics" (--metrics_address), and say so to
    # Prometheus' Kubernetes discovery (deploy/monitoring/prometheus.yml keeps the pods annotated so).
    agent_labels = jspec["template"]["metadata"]["labels"]
    metrics_ports = {}
    for owner, template, c, args in (("PS", sts_spec["template"], ps, psa),
                                     ("agents", jspec["template"], jspec["template"]["spec"]["containers"][0], aga)):
        ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
        port = ports.get("metrics")
        metrics_ports[owner] = port
        address = args.get("metrics_address", "")
        t.check(port is not None and address == f"0.0.0.0:{port}",
                f"{where}: {owner} --metrics_address={address!r} is not the container port metrics ({port})")
        notes = template["metadata"].get("annotations", {})
        t.check(notes.get("prometheus.io/scrape") == "true" and notes.get("prometheus.io/port") == str(port)
                and notes.get("prometheus.io/path") == "/metrics",
                f"{where}: the {owner} pods do not carry the prometheus.io/scrape, port and path annotations")

    # NetworkPolicy: the PS port open to the agents' pods, and each metrics port to the scraper alone.
    policies = {d["metadata"]["name"]: d for d in docs if d["kind"] == "NetworkPolicy"}
    t.check(len(policies) == 2, f"{where}: {len(policies)} NetworkPolicies, not one for the PS and one for the agents")

    def admits(npol, port, labels):
        return [r for r in npol["spec"]["ingress"] if any(p["port"] == port for p in r.get("ports", []))
                and any(labels_match(f.get("podSelector", {}).get("matchLabels", {}), labels) for f in r["from"])]

    scraper = {"app.kubernetes.io/name": "prometheus"}
    for npol in policies.values():
        selected = npol["spec"]["podSelector"]["matchLabels"]
        is_ps = labels_match(selected, pod_labels)
        t.check(is_ps or labels_match(selected, agent_labels),
                f"{where}: NetworkPolicy {npol['metadata']['name']} selects neither the PS nor the agents")
        rules = npol["spec"]["ingress"]
        metrics_port = metrics_ports["PS" if is_ps else "agents"]
        t.check(len(admits(npol, metrics_port, scraper)) == 1,
                f"{where}: NetworkPolicy {npol['metadata']['name']} does not admit the scraper to port {metrics_port}")
        if is_ps:
            t.check(len(admits(npol, container_port, agent_labels)) == 1,
                    f"{where}: NetworkPolicy does not admit the agents to the PS port")
            t.check(len(rules) == 2, f"{where}: the PS NetworkPolicy admits more than the agents and the scraper")
        else:
            t.check(len(rules) == 1, f"{where}: the agents' NetworkPolicy admits more than the scraper")
        for r in rules:
            for p in r["ports"]:
                t.check(p["port"] in (container_port, metrics_port),
                        f"{where}: NetworkPolicy {npol['metadata']['name']} opens port {p['port']}")
            if any(p["port"] == metrics_port for p in r["ports"]):
                t.check(all(labels_match(f.get("podSelector", {}).get("matchLabels", {}), scraper) for f in r["from"]),
                        f"{where}: NetworkPolicy {npol['metadata']['name']} admits more than the scraper to metrics")

    # The overlay's own promise.
    agent = jspec["template"]["spec"]["containers"][0]
    gpus = agent.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
    if name == "gpu":
        t.check(gpus == 1, f"{where}: agents do not request one nvidia.com/gpu each")
        t.check(aga.get("device", "").startswith("cuda"), f"{where}: agents do not run --device=cuda")
    else:
        t.check(gpus is None, f"{where}: agents request GPUs")
        t.check(aga.get("device") == "cpu", f"{where}: agents do not run --device=cpu")
    image = "convoy-rl:cpu" if name == "sharded" else f"convoy-rl:{name}"
    for c in containers_of(sts) + containers_of(job):
        t.check(c["image"] == image, f"{where}: {c['name']} runs image {c['image']}, not {image}")
        # podman kube play looks for a build directory named as the image's last path part (before ':') in
        # the directory it is run from; played from a checkout, an entry of that name breaks the play.
        build_dir = c["image"].split(":")[0].split("/")[-1].split("@")[0]
        t.check(not (REPO / build_dir).exists(),
                f"{where}: image {c['image']} is named as ./{build_dir} of the checkout, which podman kube play "
                f"run from the checkout takes for a build directory")
    if name == "sharded":
        t.check(shards > 1, f"{where}: the sharded overlay runs {shards} shard")


REPO = Path(".")  # The checkout's root: main() sets it.


def normalized(docs):
    return sorted((yaml.safe_dump(d, sort_keys=True) for d in docs))


def main():
    if len(sys.argv) != 3:
        die(__doc__)
    repo, bindir = Path(sys.argv[1]), Path(sys.argv[2])
    global REPO
    REPO = repo
    root = repo / "deploy" / "kubernetes"
    t = Checks("kubernetes")
    flags = {b: accepted_flags(bindir / b) for b in ("convoy_ps", "convoy_agent")}
    global RUN_SETTINGS
    RUN_SETTINGS = run_settings(bindir / "convoy_agent")
    t.check({"model", "n_step", "learning_rate", "priority_exponent"} <= set(RUN_SETTINGS),
            f"convoy_agent --help marks too few run settings: {RUN_SETTINGS}")
    written, cert_names = written_credentials(bindir / "convoy_ps")
    t.check(written == AUTH_KEYS, f"convoy_ps --write_credentials writes {sorted(written)}, not the Secret's keys "
                                  f"{sorted(AUTH_KEYS)}")
    if cert_names is None:
        print("openssl not found: the name the agents check is not compared with the written certificate")

    files = sorted(root.rglob("*.yaml"))
    t.check(len(files) >= 8, f"found only {len(files)} manifests under {root}")
    for f in files:
        try:
            docs = load_docs(f)
            t.check(bool(docs), f"{f}: empty")
            for d in docs:
                t.check(isinstance(d, dict) and "apiVersion" in d and "kind" in d, f"{f}: a document lacks apiVersion/kind")
        except yaml.YAMLError as e:
            t.check(False, f"{f}: does not parse: {e}")

    base = render(root / "base")
    base_kinds = {d["kind"] for d in base}
    t.check({"ConfigMap", "Service", "StatefulSet", "Job"} <= base_kinds, "base lacks a resource kind")
    t.check("Secret" not in base_kinds, "base renders a Secret; the auth Secret is created by hand")

    # The base's run settings are a cluster's: convoy_ps's defaults (the settings table's), not convoy_train's own
    # for one machine (common/settings/run_defaults.h), and the model is the one convoy.sbatch runs, so the two cluster
    # deployments start the same run. A change that moves a cluster default moves the ConfigMap with it. The
    # deployment's own sizes (agents, replay memory) are its own.
    cluster_defaults = flag_defaults(bindir / "convoy_ps")
    sbatch_model = re.search(r'^MODEL="\$\{CONVOY_MODEL:-([A-Za-z0-9_]+)\}"$',
                             (repo / "deploy" / "slurm" / "convoy.sbatch").read_text(), re.M)
    t.check(sbatch_model is not None, "deploy/slurm/convoy.sbatch sets no MODEL default to compare with")
    if sbatch_model:
        cluster_defaults["model"] = sbatch_model.group(1)
    cm_data = next((d.get("data", {}) for d in base if d["kind"] == "ConfigMap"), {})
    for flag in RUN_SETTINGS + ("average_horizon",):
        key = flag.upper()
        if key in cm_data and flag in cluster_defaults:
            t.check(same_value(cm_data[key], cluster_defaults[flag]),
                    f"base ConfigMap {key}={cm_data[key]!r}, but a cluster's default --{flag} is "
                    f"{cluster_defaults[flag]!r} (convoy_ps; the model convoy.sbatch's)")
    t.check(sum(f.upper() in cm_data and f in cluster_defaults for f in RUN_SETTINGS) >= 8,
            "the base ConfigMap and convoy_ps share fewer than 8 run settings; the default check compares little")

    for name in OVERLAYS:
        directory = root / "overlays" / name
        ours = render(directory)
        check_overlay(name, ours, flags, t, "built-in renderer", cert_names)
        theirs, why = kubectl_render(directory)
        if theirs is None:
            print(f"overlay {name}: {why}; checked with the built-in renderer only")
        else:
            t.check(normalized(ours) == normalized(theirs),
                    f"overlay {name}: kubectl kustomize renders differently from the built-in renderer")
            check_overlay(name, theirs, flags, t, "kubectl kustomize", cert_names)
            print(f"overlay {name}: kubectl kustomize agrees with the built-in renderer")
    return t.finish()


if __name__ == "__main__":
    sys.exit(main())
