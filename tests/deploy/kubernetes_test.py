#!/usr/bin/env python3
"""deploy/kubernetes, checked offline.

    kubernetes_test.py REPO_ROOT BIN_DIR

Every manifest parses; each overlay renders, with a small built-in kustomize (the features the manifests use:
resources, images, strategic-merge patches) and, where `kubectl kustomize` is available, with kubectl too, and the
two renderings must agree. In each rendered overlay the pieces must fit together: the Service the agents' address
names, its selector and ports, the StatefulSet and its volumes, the gRPC health probes, the Secret and ConfigMap
keys the pods use, $(VAR) references, and every flag passed to convoy_ps and convoy_agent, which must be one the
binaries accept (their --help). Needs PyYAML (Debian: python3-yaml).
"""

import copy
import re
import shutil
import subprocess
import sys
from pathlib import Path

sys.dont_write_bytecode = True  # no __pycache__ in the source tree
sys.path.insert(0, str(Path(__file__).resolve().parent))
from deploy_checks import Checks, accepted_flags, die, flag_name  # noqa: E402

try:
    import yaml
except ImportError:
    die("PyYAML is missing: install Debian's python3-yaml (./convoy build installs it)")

OVERLAYS = ("cpu", "gpu")

# Strategic-merge keys of the lists the manifests patch (Kubernetes' patchMergeKey for each field name).
MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "ports": "containerPort",
}


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


def check_overlay(name: str, docs, flags: dict, t: Checks, renderer: str):
    o = by_kind(docs)
    where = f"overlay {name} ({renderer})"
    for d in docs:
        t.check(all(k in d for k in ("apiVersion", "kind", "metadata")), f"{where}: {d.get('kind')} lacks a field")

    cm = o.get(("ConfigMap", "convoy-config"))
    secret = o.get(("Secret", "convoy-auth"))
    svcs = [d for d in docs if d["kind"] == "Service"]
    stss = [d for d in docs if d["kind"] == "StatefulSet"]
    jobs = [d for d in docs if d["kind"] == "Job"]
    if not t.check(cm and secret and len(svcs) == 1 and len(stss) == 1 and len(jobs) == 1,
                   f"{where}: expected the ConfigMap, the Secret, one Service, one StatefulSet and one Job"):
        return
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
    t.check(sts_spec.get("replicas") == 1, f"{where}: the PS StatefulSet must have one replica")

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
    for flag in ("model", "batch_size", "batch_update_frequency"):
        t.check(psa.get(flag) == aga.get(flag),
                f"{where}: --{flag} differs between the PS ({psa.get(flag)}) and the agents ({aga.get(flag)})")

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
    host, _, port = aga.get("ps", "").rpartition(":")
    svc_name = svc["metadata"]["name"]
    first_host = host.split(".")[0]
    names_service = first_host == svc_name or (
        first_host == f"{sts['metadata']['name']}-0" and host.split(".")[1:2] == [svc_name])
    t.check(names_service, f"{where}: agents' --ps={aga.get('ps')} does not name the Service {svc_name}")
    t.check(port.isdigit() and int(port) == svc_port["port"], f"{where}: agents' PS port {port} is not the Service port")
    index_env = [e for e in job["spec"]["template"]["spec"]["containers"][0].get("env", []) if e["name"] == "AGENT_INDEX"]
    t.check(index_env and "job-completion-index" in index_env[0]["valueFrom"]["fieldRef"]["fieldPath"],
            f"{where}: AGENT_INDEX does not come from the Job's completion index")
    t.check(aga.get("agent_index") == "0", f"{where}: --agent_index is not the completion index")

    # Volumes: every mount names a volume; Secret volumes name the Secret's keys.
    for owner, pod in (("PS", sts_spec["template"]["spec"]), ("agents", jspec["template"]["spec"])):
        volumes = {v["name"]: v for v in pod.get("volumes", [])}
        for c in pod["containers"]:
            for m in c.get("volumeMounts", []):
                t.check(m["name"] in volumes or (owner == "PS" and m["name"] in vct),
                        f"{where}: {owner} mount {m['name']} has no volume")
        for v in volumes.values():
            if "secret" in v:
                s = o.get(("Secret", v["secret"]["secretName"]))
                if t.check(s is not None, f"{where}: {owner} volume {v['name']} names a missing Secret"):
                    keys = set(s.get("data", {})) | set(s.get("stringData", {}))
                    for item in v["secret"].get("items", []):
                        t.check(item["key"] in keys, f"{where}: Secret {s['metadata']['name']} lacks key {item['key']}")
        t.check(any("secret" in v and v["secret"]["secretName"] == "convoy-auth" for v in volumes.values()),
                f"{where}: the {owner} pods do not mount the auth Secret")
    for key in ("auth_token", "tls.crt", "tls.key", "ca.crt"):
        t.check(key in secret.get("stringData", {}) or key in secret.get("data", {}), f"{where}: Secret lacks {key}")

    # NetworkPolicy: the PS port, open to the agents' pods.
    for npol in (d for d in docs if d["kind"] == "NetworkPolicy"):
        t.check(labels_match(npol["spec"]["podSelector"]["matchLabels"], pod_labels),
                f"{where}: NetworkPolicy {npol['metadata']['name']} does not select the PS")
        rule = npol["spec"]["ingress"][0]
        agent_labels = jspec["template"]["metadata"]["labels"]
        t.check(labels_match(rule["from"][0]["podSelector"]["matchLabels"], agent_labels),
                f"{where}: NetworkPolicy does not admit the agents")
        t.check(rule["ports"][0]["port"] == container_port, f"{where}: NetworkPolicy opens another port")

    # The overlay's own promise.
    agent = jspec["template"]["spec"]["containers"][0]
    gpus = agent.get("resources", {}).get("limits", {}).get("nvidia.com/gpu")
    if name == "gpu":
        t.check(gpus == 1, f"{where}: agents do not request one nvidia.com/gpu each")
        t.check(aga.get("device", "").startswith("cuda"), f"{where}: agents do not run --device=cuda")
    else:
        t.check(gpus is None, f"{where}: agents request GPUs")
        t.check(aga.get("device") == "cpu", f"{where}: agents do not run --device=cpu")
    for c in containers_of(sts) + containers_of(job):
        t.check(c["image"] == f"convoy:{name}", f"{where}: {c['name']} runs image {c['image']}, not convoy:{name}")


def normalized(docs):
    return sorted((yaml.safe_dump(d, sort_keys=True) for d in docs))


def main():
    if len(sys.argv) != 3:
        die(__doc__)
    repo, bindir = Path(sys.argv[1]), Path(sys.argv[2])
    root = repo / "deploy" / "kubernetes"
    t = Checks("kubernetes")
    flags = {b: accepted_flags(bindir / b) for b in ("convoy_ps", "convoy_agent")}

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

    base_kinds = {d["kind"] for d in render(root / "base")}
    t.check({"ConfigMap", "Secret", "Service", "StatefulSet", "Job"} <= base_kinds, "base lacks a resource kind")

    for name in OVERLAYS:
        directory = root / "overlays" / name
        ours = render(directory)
        check_overlay(name, ours, flags, t, "built-in renderer")
        theirs, why = kubectl_render(directory)
        if theirs is None:
            print(f"overlay {name}: {why}; checked with the built-in renderer only")
        else:
            t.check(normalized(ours) == normalized(theirs),
                    f"overlay {name}: kubectl kustomize renders differently from the built-in renderer")
            check_overlay(name, theirs, flags, t, "kubectl kustomize")
            print(f"overlay {name}: kubectl kustomize agrees with the built-in renderer")
    return t.finish()


if __name__ == "__main__":
    sys.exit(main())
