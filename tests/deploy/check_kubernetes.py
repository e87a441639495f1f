#!/usr/bin/python3
"""Offline check of the Kubernetes manifests in deploy/kubernetes/.

No cluster is needed (kubectl's client-side dry run still asks a server for
its API list, so it cannot run offline). Checked instead:

1. Schema: every object is checked against the fields Kubernetes defines for
   the parts of its kind these manifests use (apps/v1 Deployment, v1
   Service and ConfigMap, policy/v1 PodDisruptionBudget, monitoring.coreos.com/v1
   PodMonitor, kustomize's Kustomization), with their types. An unknown
   field is an error: the API server would drop it (or refuse it), so a
   misspelt `terminationGracePeriodSecond` would silently do nothing.
2. What the deployment relies on (docs/DEPLOY.md):
   * liveness, readiness and startup probes are native gRPC probes
     (grpc.health.v1) on the port the server listens on;
   * terminationGracePeriodSeconds > preStop sleep + --drain_timeout_ms, and
     liveness tolerates that long (a draining server reports NOT_SERVING);
   * a preStop hook delays SIGTERM so that endpoints drain first;
   * the GPU is requested (nvidia.com/gpu) and --device names it;
   * the gRPC Service is headless (clusterIP: None, only ready pods), a
     ClusterIP Service serves the metrics port, both select the pods, and
     the server closes old connections (grpc.max_connection_age_ms) so that
     clients balancing over DNS re-resolve and find new replicas;
   * Prometheus finds the pods (scrape annotations and/or a PodMonitor with
     job="specverify", which deploy/prometheus/alerts.yml selects on);
   * a PodDisruptionBudget selects the pods and allows one disruption;
   * the server's flags come from the ConfigMap (--config_file on a mounted
     key that exists), and with --server, the real specverify-server
     accepts that file (started with it on loopback, stopped with SIGTERM);
   * kustomization.yaml lists every manifest but podmonitor.yaml, and with
     --kubectl, `kubectl kustomize` renders exactly those objects.
3. --self-test: each of a list of broken variants of the manifests must be
   refused with the expected message (the check can fail); with --server,
   so must ConfigMaps with a misspelt flag, a value out of range and a line
   that is not name=value, by the server itself.

Usage: check_kubernetes.py --dir deploy/kubernetes [--server BIN] [--kubectl BIN]
       check_kubernetes.py --dir deploy/kubernetes --self-test
"""
import argparse
import copy
import os
import re
import signal
import subprocess
import sys
import tempfile

import yaml

# ------------------------------------------------------------------ schema --
# A schema is a type: str, int, bool, a dict {field: schema} (an object; no
# other field allowed), a one-element list [schema] (a list of it), or one of
# the markers below.
QUANTITY = "quantity"          # "500m", "4Gi", 1
INT_OR_STRING = "int-or-string"
STRING_MAP = "string-map"      # labels, annotations, nodeSelector, data
ANY = "any"

LABEL_SELECTOR = {
    "matchLabels": STRING_MAP,
    "matchExpressions": [{"key": str, "operator": str, "values": [str]}],
}
OBJECT_META = {
    "name": str, "namespace": str, "labels": STRING_MAP, "annotations": STRING_MAP,
    "generateName": str,
}
EXEC_ACTION = {"command": [str]}
HTTP_GET = {"path": str, "port": INT_OR_STRING, "host": str, "scheme": str,
            "httpHeaders": [{"name": str, "value": str}]}
PROBE = {
    "exec": EXEC_ACTION, "httpGet": HTTP_GET, "tcpSocket": {"port": INT_OR_STRING, "host": str},
    # The gRPC probe's port is a number: named ports are not supported.
    "grpc": {"port": int, "service": str},
    "initialDelaySeconds": int, "timeoutSeconds": int, "periodSeconds": int,
    "successThreshold": int, "failureThreshold": int, "terminationGracePeriodSeconds": int,
}
LIFECYCLE_HANDLER = {"exec": EXEC_ACTION, "httpGet": HTTP_GET,
                     "tcpSocket": {"port": INT_OR_STRING, "host": str},
                     "sleep": {"seconds": int}}
CAPABILITIES = {"add": [str], "drop": [str]}
SECCOMP = {"type": str, "localhostProfile": str}
CONTAINER = {
    "name": str, "image": str, "imagePullPolicy": str, "command": [str], "args": [str],
    "workingDir": str,
    "ports": [{"name": str, "containerPort": int, "protocol": str, "hostPort": int, "hostIP": str}],
    "env": [{"name": str, "value": str, "valueFrom": {
        "configMapKeyRef": {"name": str, "key": str, "optional": bool},
        "secretKeyRef": {"name": str, "key": str, "optional": bool},
        "fieldRef": {"fieldPath": str, "apiVersion": str},
        "resourceFieldRef": {"resource": str, "containerName": str, "divisor": QUANTITY}}}],
    "envFrom": [{"prefix": str, "configMapRef": {"name": str, "optional": bool},
                 "secretRef": {"name": str, "optional": bool}}],
    "resources": {"requests": {"*": QUANTITY}, "limits": {"*": QUANTITY}},
    "volumeMounts": [{"name": str, "mountPath": str, "readOnly": bool, "subPath": str}],
    "livenessProbe": PROBE, "readinessProbe": PROBE, "startupProbe": PROBE,
    "lifecycle": {"preStop": LIFECYCLE_HANDLER, "postStart": LIFECYCLE_HANDLER},
    "securityContext": {
        "allowPrivilegeEscalation": bool, "readOnlyRootFilesystem": bool, "privileged": bool,
        "runAsNonRoot": bool, "runAsUser": int, "runAsGroup": int,
        "capabilities": CAPABILITIES, "seccompProfile": SECCOMP},
    "terminationMessagePath": str, "terminationMessagePolicy": str,
    "stdin": bool, "tty": bool,
}
VOLUME = {
    "name": str,
    "configMap": {"name": str, "items": [{"key": str, "path": str, "mode": int}],
                  "defaultMode": int, "optional": bool},
    "secret": {"secretName": str, "items": [{"key": str, "path": str, "mode": int}],
               "defaultMode": int, "optional": bool},
    "emptyDir": {"medium": str, "sizeLimit": QUANTITY},
    "hostPath": {"path": str, "type": str},
}
POD_SPEC = {
    "containers": [CONTAINER], "initContainers": [CONTAINER], "volumes": [VOLUME],
    "terminationGracePeriodSeconds": int, "restartPolicy": str, "dnsPolicy": str,
    "serviceAccountName": str, "automountServiceAccountToken": bool,
    "enableServiceLinks": bool, "priorityClassName": str, "runtimeClassName": str,
    "nodeSelector": STRING_MAP, "hostIPC": bool, "hostNetwork": bool, "hostPID": bool,
    "shareProcessNamespace": bool,
    "securityContext": {"runAsNonRoot": bool, "runAsUser": int, "runAsGroup": int,
                        "fsGroup": int, "supplementalGroups": [int],
                        "seccompProfile": SECCOMP},
    "tolerations": [{"key": str, "operator": str, "value": str, "effect": str,
                     "tolerationSeconds": int}],
    "topologySpreadConstraints": [{"maxSkew": int, "topologyKey": str,
                                   "whenUnsatisfiable": str, "labelSelector": LABEL_SELECTOR,
                                   "minDomains": int, "matchLabelKeys": [str]}],
    "affinity": ANY,
    "imagePullSecrets": [{"name": str}],
}
SCHEMAS = {
    ("apps/v1", "Deployment"): {
        "apiVersion": str, "kind": str, "metadata": OBJECT_META,
        "spec": {
            "replicas": int, "revisionHistoryLimit": int, "minReadySeconds": int,
            "progressDeadlineSeconds": int, "paused": bool, "selector": LABEL_SELECTOR,
            "strategy": {"type": str, "rollingUpdate": {"maxSurge": INT_OR_STRING,
                                                        "maxUnavailable": INT_OR_STRING}},
            "template": {"metadata": OBJECT_META, "spec": POD_SPEC},
        },
    },
    ("v1", "Service"): {
        "apiVersion": str, "kind": str, "metadata": OBJECT_META,
        "spec": {
            "type": str, "clusterIP": str, "clusterIPs": [str], "selector": STRING_MAP,
            "publishNotReadyAddresses": bool, "sessionAffinity": str,
            "internalTrafficPolicy": str, "externalTrafficPolicy": str,
            "ipFamilyPolicy": str, "ipFamilies": [str],
            "ports": [{"name": str, "port": int, "targetPort": INT_OR_STRING,
                       "protocol": str, "appProtocol": str, "nodePort": int}],
        },
    },
    ("v1", "ConfigMap"): {
        "apiVersion": str, "kind": str, "metadata": OBJECT_META,
        "data": STRING_MAP, "immutable": bool,
    },
    ("policy/v1", "PodDisruptionBudget"): {
        "apiVersion": str, "kind": str, "metadata": OBJECT_META,
        "spec": {"selector": LABEL_SELECTOR, "minAvailable": INT_OR_STRING,
                 "maxUnavailable": INT_OR_STRING, "unhealthyPodEvictionPolicy": str},
    },
    ("monitoring.coreos.com/v1", "PodMonitor"): {
        "apiVersion": str, "kind": str, "metadata": OBJECT_META,
        "spec": {
            "jobLabel": str, "podTargetLabels": [str], "selector": LABEL_SELECTOR,
            "namespaceSelector": {"any": bool, "matchNames": [str]},
            "podMetricsEndpoints": [{"port": str, "path": str, "interval": str,
                                     "scrapeTimeout": str, "scheme": str,
                                     "honorLabels": bool}],
        },
    },
    ("kustomize.config.k8s.io/v1beta1", "Kustomization"): {
        "apiVersion": str, "kind": str, "resources": [str], "namespace": str,
        "images": [{"name": str, "newName": str, "newTag": str, "digest": str}],
        "labels": ANY, "patches": ANY,
    },
}
ENUMS = {
    "imagePullPolicy": {"Always", "IfNotPresent", "Never"},
    "protocol": {"TCP", "UDP", "SCTP"},
    "whenUnsatisfiable": {"DoNotSchedule", "ScheduleAnyway"},
    "effect": {"NoSchedule", "PreferNoSchedule", "NoExecute"},
    "operator": {"Exists", "Equal", "In", "NotIn", "DoesNotExist"},
}
QUANTITY_RE = re.compile(r"^[+-]?(\d+(\.\d*)?|\.\d+)(m|k|M|G|T|P|E|Ki|Mi|Gi|Ti|Pi|Ei|e[+-]?\d+)?$")
DNS_LABEL_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def check_schema(value, schema, path, errors):
    if schema is ANY:
        return
    if schema is str:
        if not isinstance(value, str):
            errors.append(f"{path}: must be a string, is {type(value).__name__} {value!r}")
        return
    if schema is bool:
        if not isinstance(value, bool):
            errors.append(f"{path}: must be true or false, is {value!r}")
        return
    if schema is int:
        if isinstance(value, bool) or not isinstance(value, int):
            errors.append(f"{path}: must be an integer, is {value!r}")
        return
    if schema is QUANTITY:
        if isinstance(value, bool) or not (isinstance(value, int) or
                                           (isinstance(value, str) and QUANTITY_RE.match(value))):
            errors.append(f"{path}: {value!r} is not a quantity (e.g. 4, 500m, 8Gi)")
        return
    if schema is INT_OR_STRING:
        if isinstance(value, bool) or not isinstance(value, (int, str)):
            errors.append(f"{path}: must be an integer or a string, is {value!r}")
        return
    if schema is STRING_MAP:
        if not isinstance(value, dict):
            errors.append(f"{path}: must be a map of strings")
            return
        for k, v in value.items():
            if not isinstance(k, str) or not isinstance(v, str):
                errors.append(f"{path}.{k}: values must be strings (quote {v!r})")
        return
    if isinstance(schema, list):
        if not isinstance(value, list):
            errors.append(f"{path}: must be a list")
            return
        for i, item in enumerate(value):
            check_schema(item, schema[0], f"{path}[{i}]", errors)
        return
    if isinstance(schema, dict):
        if not isinstance(value, dict):
            errors.append(f"{path}: must be an object")
            return
        for k, v in value.items():
            sub = schema.get(k, schema.get("*"))
            if sub is None:
                errors.append(f"{path}.{k}: unknown field (known: {', '.join(sorted(schema))})")
                continue
            if k in ENUMS and isinstance(v, str) and v not in ENUMS[k]:
                errors.append(f"{path}.{k}: {v!r} is not one of {sorted(ENUMS[k])}")
            check_schema(v, sub, f"{path}.{k}", errors)
        return
    raise AssertionError(f"bad schema at {path}")


# ------------------------------------------------------------------ loading --
def load_dir(directory):
    """Returns ({file: [objects]}, kustomization or None)."""
    files = {}
    kustomization = None
    for name in sorted(os.listdir(directory)):
        if not name.endswith((".yaml", ".yml")):
            continue
        with open(os.path.join(directory, name)) as f:
            docs = [d for d in yaml.safe_load_all(f) if d is not None]
        if name == "kustomization.yaml":
            kustomization = docs[0] if docs else {}
        else:
            files[name] = docs
    return files, kustomization


def parse_flags_file(text):
    """name=value lines as the server reads them (server_options.cc)."""
    flags = {}
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        if line.startswith("--"):
            line = line[2:]
        if "=" not in line:
            raise ValueError(f"{line!r} is not name=value")
        name, value = line.split("=", 1)
        flags[name.strip().replace("-", "_")] = value.strip()
    return flags


def parse_args_flags(args):
    flags = {}
    for a in args:
        if a.startswith("--") and "=" in a:
            name, value = a[2:].split("=", 1)
            flags[name.replace("-", "_")] = value
    return flags


def port_of(address):
    return int(address.rsplit(":", 1)[1])


def matches(selector, labels):
    return all(labels.get(k) == v for k, v in (selector or {}).items())


# ------------------------------------------------------------------- checks --
SERVER_FLAG_DEFAULTS = {"drain_timeout_ms": "10000", "listen_address": "0.0.0.0:50051",
                        "metrics_address": "0.0.0.0:9401", "device": "auto", "grpc_args": ""}


def check_manifests(files, kustomization, server_defaults=None):
    """Returns (errors, facts); facts carries what --server needs."""
    errors = []
    defaults = dict(SERVER_FLAG_DEFAULTS, **(server_defaults or {}))
    objects = []
    for name, docs in files.items():
        for doc in docs:
            where = f"{name}: {doc.get('kind', '?')}/{(doc.get('metadata') or {}).get('name', '?')}"
            schema = SCHEMAS.get((doc.get("apiVersion"), doc.get("kind")))
            if schema is None:
                errors.append(f"{where}: unexpected apiVersion/kind {doc.get('apiVersion')}/"
                              f"{doc.get('kind')} (known: {sorted(SCHEMAS)})")
                continue
            check_schema(doc, schema, where, errors)
            meta_name = (doc.get("metadata") or {}).get("name", "")
            if not DNS_LABEL_RE.match(meta_name) or len(meta_name) > 63:
                errors.append(f"{where}: metadata.name {meta_name!r} is not a DNS label")
            objects.append((name, doc))
    if errors:
        return errors, {}

    def of_kind(kind):
        return [(n, d) for n, d in objects if d["kind"] == kind]

    deployments = of_kind("Deployment")
    if len(deployments) != 1:
        return errors + [f"expected one Deployment, found {len(deployments)}"], {}
    dep_file, dep = deployments[0]
    spec = dep["spec"]
    pod_labels = spec["template"]["metadata"].get("labels", {})
    annotations = spec["template"]["metadata"].get("annotations", {})
    pod = spec["template"]["spec"]
    replicas = spec.get("replicas", 1)
    if not matches(spec["selector"].get("matchLabels"), pod_labels) or not spec["selector"].get("matchLabels"):
        errors.append(f"{dep_file}: spec.selector.matchLabels must select the template's labels")
    containers = pod.get("containers", [])
    if len(containers) != 1:
        return errors + [f"{dep_file}: expected one container, found {len(containers)}"], {}
    c = containers[0]
    ports = {p.get("name"): p["containerPort"] for p in c.get("ports", [])}
    for needed in ("grpc", "metrics"):
        if needed not in ports:
            errors.append(f"{dep_file}: container port named {needed!r} missing")

    # Flags: --config_file on a mounted ConfigMap key.
    configmaps = {d["metadata"]["name"]: d for _, d in of_kind("ConfigMap")}
    args = c.get("args", [])
    config_args = [a for a in args if re.match(r"^--config[_-]file=", a)]
    flags = {}
    flags_text = None
    if len(config_args) != 1:
        errors.append(f"{dep_file}: args must pass exactly one --config_file= (the ConfigMap's flags), "
                      f"found {config_args}")
    else:
        path = config_args[0].split("=", 1)[1]
        mount = next((m for m in c.get("volumeMounts", [])
                      if path.startswith(m["mountPath"].rstrip("/") + "/")), None)
        volume = mount and next((v for v in pod.get("volumes", []) if v["name"] == mount["name"]), None)
        if not volume or "configMap" not in volume:
            errors.append(f"{dep_file}: --config_file={path} is not on a mounted ConfigMap volume")
        else:
            cm_name = volume["configMap"]["name"]
            key = path[len(mount["mountPath"].rstrip("/")) + 1:]
            for item in volume["configMap"].get("items", []):
                if item["path"] == key:
                    key = item["key"]
            cm = configmaps.get(cm_name)
            if cm is None:
                errors.append(f"{dep_file}: volume {mount['name']!r} names ConfigMap {cm_name!r}, "
                              f"which no manifest defines")
            elif key not in cm.get("data", {}):
                errors.append(f"ConfigMap {cm_name}: no key {key!r} (--config_file={path})")
            else:
                flags_text = cm["data"][key]
                try:
                    flags = parse_flags_file(flags_text)
                except ValueError as e:
                    errors.append(f"ConfigMap {cm_name} key {key}: {e}")
    # Later command-line flags override the file.
    after = args[args.index(config_args[0]) + 1:] if len(config_args) == 1 else args
    effective = dict(defaults, **flags, **parse_args_flags(after))
    grpc_port = port_of(effective["listen_address"])
    metrics_port = port_of(effective["metrics_address"]) if effective["metrics_address"] else None
    drain_s = int(effective["drain_timeout_ms"]) / 1000.0
    if ports.get("grpc") != grpc_port:
        errors.append(f"{dep_file}: container port grpc is {ports.get('grpc')}, the server listens "
                      f"on {grpc_port} (--listen_address={effective['listen_address']})")
    if metrics_port is None:
        errors.append("--metrics_address is empty: nothing for Prometheus to scrape")
    elif ports.get("metrics") != metrics_port:
        errors.append(f"{dep_file}: container port metrics is {ports.get('metrics')}, the server "
                      f"exports on {metrics_port} (--metrics_address={effective['metrics_address']})")

    # GPU.
    limits = c.get("resources", {}).get("limits", {})
    gpus = limits.get("nvidia.com/gpu")
    if gpus is None or int(gpus) < 1:
        errors.append(f"{dep_file}: resources.limits must request nvidia.com/gpu (extended resources "
                      f"are set in limits)")
    requests_gpu = c.get("resources", {}).get("requests", {}).get("nvidia.com/gpu")
    if requests_gpu is not None and requests_gpu != gpus:
        errors.append(f"{dep_file}: requests and limits of nvidia.com/gpu must be equal")
    device = effective["device"]
    if not re.match(r"^(cuda:\d+(,\d+)*|cuda:all|auto)$", device):
        errors.append(f"--device={device}: a GPU pod serves with cuda:N[,M...] or cuda:all "
                      f"(or auto)")
    elif gpus is not None and re.match(r"^cuda:\d", device):
        ordinals = [int(n) for n in device.split(":")[1].split(",")]
        if max(ordinals) >= int(gpus):
            errors.append(f"--device={device}: the pod sees GPUs 0..{int(gpus) - 1}")

    # Probes: native gRPC (grpc.health.v1) on the server's port.
    for probe_name in ("livenessProbe", "readinessProbe", "startupProbe"):
        probe = c.get(probe_name)
        if probe is None:
            errors.append(f"{dep_file}: {probe_name} missing")
            continue
        if "grpc" not in probe or any(k in probe for k in ("httpGet", "tcpSocket", "exec")):
            errors.append(f"{dep_file}: {probe_name} must be a gRPC probe (grpc.health.v1)")
            continue
        if probe["grpc"].get("port") != grpc_port:
            errors.append(f"{dep_file}: {probe_name}.grpc.port is {probe['grpc'].get('port')}, the "
                          f"server listens on {grpc_port}")
        service = probe["grpc"].get("service", "")
        if service not in ("", "specverify.v1.Verifier"):
            errors.append(f"{dep_file}: {probe_name}.grpc.service {service!r}: the server reports "
                          f"health for \"\" and \"specverify.v1.Verifier\" only")

    # Termination: preStop, then SIGTERM and the drain, within the grace period.
    pre_stop = c.get("lifecycle", {}).get("preStop")
    pre_stop_s = 0
    if pre_stop is None:
        errors.append(f"{dep_file}: lifecycle.preStop missing: SIGTERM would arrive while the pod is "
                      f"still in clients' endpoints")
    elif "sleep" in pre_stop:
        pre_stop_s = pre_stop["sleep"]["seconds"]
    elif "exec" in pre_stop:
        cmd = pre_stop["exec"]["command"]
        if len(cmd) == 2 and os.path.basename(cmd[0]) == "sleep" and re.match(r"^\d+$", cmd[1]):
            pre_stop_s = int(cmd[1])
        else:
            errors.append(f"{dep_file}: preStop {cmd} is not a plain sleep; cannot bound its time")
    if pre_stop is not None and pre_stop_s < 1:
        errors.append(f"{dep_file}: preStop sleeps {pre_stop_s} s; endpoints need time to drain")
    grace = pod.get("terminationGracePeriodSeconds", 30)
    # gRPC's stop and the backend's shutdown after the drain: a few seconds.
    margin_s = 5
    if grace < pre_stop_s + drain_s + margin_s:
        errors.append(f"{dep_file}: terminationGracePeriodSeconds={grace} must exceed preStop "
                      f"{pre_stop_s} s + --drain_timeout_ms {drain_s:g} s + {margin_s} s for the "
                      f"stop, or a draining server is SIGKILLed")
    live = c.get("livenessProbe", {})
    live_window = live.get("periodSeconds", 10) * live.get("failureThreshold", 3)
    if live and live_window <= pre_stop_s + drain_s:
        errors.append(f"{dep_file}: livenessProbe fails after {live_window} s of NOT_SERVING, within "
                      f"preStop + drain ({pre_stop_s + drain_s:g} s): a draining server could be "
                      f"restarted")
    sc = pod.get("securityContext", {})
    csc = c.get("securityContext", {})
    if not (sc.get("runAsNonRoot") or csc.get("runAsNonRoot")):
        errors.append(f"{dep_file}: runAsNonRoot must be true (the image runs as uid 10001)")

    # Services.
    services = of_kind("Service")
    headless = [d for _, d in services if d["spec"].get("clusterIP") == "None"]
    cluster_ip = [d for _, d in services if d["spec"].get("clusterIP") != "None"]
    if len(headless) != 1:
        errors.append(f"expected one headless Service (clusterIP: None) for gRPC, found {len(headless)}")
    for svc in headless:
        n = svc["metadata"]["name"]
        if svc["spec"].get("publishNotReadyAddresses"):
            errors.append(f"Service {n}: publishNotReadyAddresses would put draining pods in DNS")
        target = [p for p in svc["spec"].get("ports", []) if p.get("targetPort") in ("grpc", grpc_port)]
        if not target:
            errors.append(f"Service {n}: no port targets the gRPC port (grpc / {grpc_port})")
    if not any(any(p.get("targetPort") in ("metrics", metrics_port) for p in d["spec"].get("ports", []))
               and d["spec"].get("type", "ClusterIP") == "ClusterIP" for d in cluster_ip):
        errors.append("expected a ClusterIP Service for the metrics port")
    for svc in headless + cluster_ip:
        if not svc["spec"].get("selector") or not matches(svc["spec"]["selector"], pod_labels):
            errors.append(f"Service {svc['metadata']['name']}: selector does not select the pods")
        for p in svc["spec"].get("ports", []):
            if isinstance(p.get("targetPort"), str) and p["targetPort"] not in ports:
                errors.append(f"Service {svc['metadata']['name']}: targetPort {p['targetPort']!r} is "
                              f"no container port name")

    # Client-side balancing over DNS sees new replicas only when clients
    # re-resolve, which a connection's GOAWAY (max connection age) triggers.
    if replicas > 1 or headless:
        age = re.search(r"(?:^|,)\s*grpc\.max_connection_age_ms\s*=\s*(\d+)", effective.get("grpc_args", ""))
        if not age:
            errors.append("--grpc_args sets no grpc.max_connection_age_ms: clients balancing over the "
                          "headless Service's DNS would never see replicas added after they connected")

    # Prometheus.
    podmonitors = [d for _, d in of_kind("PodMonitor")]
    scrape_annotated = annotations.get("prometheus.io/scrape") == "true"
    if scrape_annotated and annotations.get("prometheus.io/port") != str(metrics_port):
        errors.append(f"{dep_file}: prometheus.io/port is {annotations.get('prometheus.io/port')!r}, "
                      f"metrics are on {metrics_port}")
    for pm in podmonitors:
        n = pm["metadata"]["name"]
        if not matches(pm["spec"]["selector"].get("matchLabels"), pod_labels):
            errors.append(f"PodMonitor {n}: selector does not select the pods")
        if not any(e.get("port") == "metrics" for e in pm["spec"].get("podMetricsEndpoints", [])):
            errors.append(f"PodMonitor {n}: no endpoint on port 'metrics'")
        job_label = pm["spec"].get("jobLabel")
        if pod_labels.get(job_label) != "specverify":
            errors.append(f"PodMonitor {n}: jobLabel {job_label!r} must name a pod label whose value "
                          f"is 'specverify' (alerts.yml selects job=\"specverify\")")
    if not scrape_annotated and not podmonitors:
        errors.append("neither prometheus.io/scrape annotations nor a PodMonitor: nothing scrapes")

    # PodDisruptionBudget.
    pdbs = [d for _, d in of_kind("PodDisruptionBudget")]
    if len(pdbs) != 1:
        errors.append(f"expected one PodDisruptionBudget, found {len(pdbs)}")
    for pdb in pdbs:
        n = pdb["metadata"]["name"]
        if not matches(pdb["spec"]["selector"].get("matchLabels"), pod_labels):
            errors.append(f"PodDisruptionBudget {n}: selector does not select the pods")
        if ("minAvailable" in pdb["spec"]) == ("maxUnavailable" in pdb["spec"]):
            errors.append(f"PodDisruptionBudget {n}: set exactly one of minAvailable, maxUnavailable")
        min_av = pdb["spec"].get("minAvailable")
        if isinstance(min_av, int) and min_av >= replicas:
            errors.append(f"PodDisruptionBudget {n}: minAvailable={min_av} with {replicas} replicas "
                          f"blocks every node drain")
        if pdb["spec"].get("maxUnavailable") in (0, "0%"):
            errors.append(f"PodDisruptionBudget {n}: maxUnavailable=0 blocks every node drain")

    # Kustomization: every manifest but the CRD-dependent PodMonitor.
    if kustomization is None:
        errors.append("kustomization.yaml missing")
    else:
        check_schema(kustomization, SCHEMAS[("kustomize.config.k8s.io/v1beta1", "Kustomization")],
                     "kustomization.yaml", errors)
        listed = set(kustomization.get("resources", []))
        expected = {n for n, docs in files.items()
                    if not any(d.get("kind") == "PodMonitor" for d in docs)}
        if listed != expected:
            errors.append(f"kustomization.yaml resources {sorted(listed)} != the manifests without a "
                          f"PodMonitor {sorted(expected)}")
    facts = {"flags_text": flags_text, "grpc_port": grpc_port, "drain_s": drain_s,
             "objects": sorted((d["kind"], d["metadata"]["name"]) for _, d in objects
                               if d["kind"] != "PodMonitor")}
    return errors, facts


# -------------------------------------------------------------- the server --
def server_defaults(server):
    """Defaults from `specverify-server --help` (the flags the checks use)."""
    out = subprocess.run([server, "--help"], capture_output=True, text=True, timeout=30).stdout
    found = dict(re.findall(r"^  --(\w+) \(default \"([^\"]*)\"\)", out, re.M))
    missing = [f for f in SERVER_FLAG_DEFAULTS if f not in found]
    if missing:
        raise RuntimeError(f"{server} --help lists no {missing}")
    return {k: found[k] for k in SERVER_FLAG_DEFAULTS}


def run_server_with_flags(server, flags_text):
    """Starts the server with the ConfigMap's file; errors or []."""
    with tempfile.TemporaryDirectory() as tmp:
        path = os.path.join(tmp, "server.flags")
        with open(path, "w") as f:
            f.write(flags_text)
        # The file's every line is parsed and applied; then, for this
        # GPU-less machine, the CPU backend on loopback with a small arena
        # (later flags override the file's values, not its parsing).
        cmd = [server, f"--config_file={path}", "--device=cpu",
               "--listen_address=127.0.0.1:0", "--metrics_address=127.0.0.1:0",
               "--kv_arena_bytes=16777216"]
        proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
        try:
            lines = []
            for line in proc.stdout:
                lines.append(line.rstrip("\n"))
                if line.startswith("listening on port"):
                    break
            else:
                proc.wait(timeout=30)
                return [f"specverify-server refused the ConfigMap's flags (exit {proc.returncode}): "
                        + " | ".join(lines)]
            proc.send_signal(signal.SIGTERM)
            rest, _ = proc.communicate(timeout=60)
            if proc.returncode != 0:
                return [f"specverify-server with the ConfigMap's flags exited {proc.returncode} on "
                        f"SIGTERM: {rest}"]
            print(f"specverify-server accepted the ConfigMap's flags: {lines[0]}")
            return []
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()


def kustomize_objects(kubectl, directory):
    env = dict(os.environ, KUBECONFIG=os.devnull)
    out = subprocess.run([kubectl, "kustomize", directory], capture_output=True, text=True,
                         timeout=120, env=env)
    if out.returncode != 0:
        raise RuntimeError(f"kubectl kustomize {directory} failed: {out.stderr.strip()}")
    docs = [d for d in yaml.safe_load_all(out.stdout) if d]
    return sorted((d["kind"], d["metadata"]["name"]) for d in docs)


# --------------------------------------------------------------- self-test --
def mutations():
    """(description, function(files, kustomization), expected error substring)."""
    def dep(files):
        return files["deployment.yaml"][0]

    def container(files):
        return dep(files)["spec"]["template"]["spec"]["containers"][0]

    def svc(files, name):
        return files[name][0]

    def cm(files):
        return files["configmap.yaml"][0]

    def set_flag(files, name, value):
        text = cm(files)["data"]["server.flags"]
        text = re.sub(rf"^{name}=.*$", f"{name}={value}", text, flags=re.M)
        cm(files)["data"]["server.flags"] = text

    def rename(d, old, new):
        d[new] = d.pop(old)

    return [
        ("misspelt field", lambda f, k: rename(dep(f)["spec"]["template"]["spec"],
                                              "terminationGracePeriodSeconds",
                                              "terminationGracePeriodSecond"),
         "unknown field"),
        ("number as a string", lambda f, k: dep(f)["spec"].__setitem__("replicas", "2"),
         "must be an integer"),
        ("bad quantity", lambda f, k: container(f)["resources"]["limits"].__setitem__("memory", "8 GB"),
         "is not a quantity"),
        ("HTTP liveness probe", lambda f, k: container(f).__setitem__(
            "livenessProbe", {"httpGet": {"path": "/", "port": 9401}}), "must be a gRPC probe"),
        ("probe on the wrong port", lambda f, k: container(f)["readinessProbe"]["grpc"].__setitem__(
            "port", 9401), "readinessProbe.grpc.port is 9401"),
        ("named gRPC probe port", lambda f, k: container(f)["startupProbe"]["grpc"].__setitem__(
            "port", "grpc"), "must be an integer"),
        ("unknown health service", lambda f, k: container(f)["readinessProbe"]["grpc"].__setitem__(
            "service", "specverify.Verifier"), "reports health"),
        ("no startup probe", lambda f, k: container(f).pop("startupProbe"), "startupProbe missing"),
        ("no preStop", lambda f, k: container(f).pop("lifecycle"), "preStop missing"),
        ("grace too short", lambda f, k: dep(f)["spec"]["template"]["spec"].__setitem__(
            "terminationGracePeriodSeconds", 15), "must exceed preStop"),
        ("drain longer than grace", lambda f, k: set_flag(f, "drain_timeout_ms", "60000"),
         "must exceed preStop"),
        ("liveness inside the drain", lambda f, k: container(f)["livenessProbe"].__setitem__(
            "failureThreshold", 1), "a draining server could be"),
        ("no GPU", lambda f, k: [container(f)["resources"][s].pop("nvidia.com/gpu")
                                 for s in ("limits", "requests")], "nvidia.com/gpu"),
        ("CPU device in a GPU pod", lambda f, k: set_flag(f, "device", "cpu"), "a GPU pod serves"),
        ("second GPU named", lambda f, k: set_flag(f, "device", "cuda:1"), "the pod sees GPUs"),
        ("two GPUs named, one given", lambda f, k: set_flag(f, "device", "cuda:0,1"),
         "the pod sees GPUs"),
        ("gRPC Service not headless", lambda f, k: svc(f, "service-grpc.yaml")["spec"].pop("clusterIP"),
         "headless Service"),
        ("not-ready pods in DNS", lambda f, k: svc(f, "service-grpc.yaml")["spec"].__setitem__(
            "publishNotReadyAddresses", True), "publishNotReadyAddresses"),
        ("Service selects nothing", lambda f, k: svc(f, "service-grpc.yaml")["spec"]["selector"]
         .__setitem__("app.kubernetes.io/name", "other"), "does not select the pods"),
        ("no metrics Service", lambda f, k: f.pop("service-metrics.yaml"), "ClusterIP Service"),
        ("listen port != container port", lambda f, k: set_flag(f, "listen_address", "0.0.0.0:50052"),
         "container port grpc is 50051"),
        ("scrape annotation on the gRPC port", lambda f, k: dep(f)["spec"]["template"]["metadata"]
         ["annotations"].__setitem__("prometheus.io/port", "50051"), "prometheus.io/port"),
        ("no max connection age", lambda f, k: set_flag(f, "grpc_args", ""),
         "grpc.max_connection_age_ms"),
        ("PodMonitor job label", lambda f, k: f["podmonitor.yaml"][0]["spec"].__setitem__(
            "jobLabel", "app.kubernetes.io/component"), "jobLabel"),
        ("nothing scrapes", lambda f, k: (dep(f)["spec"]["template"]["metadata"].pop("annotations"),
                                          f.pop("podmonitor.yaml")), "nothing scrapes"),
        ("PDB blocks drains", lambda f, k: rename(f["pdb.yaml"][0]["spec"], "maxUnavailable",
                                                  "minAvailable") or
         f["pdb.yaml"][0]["spec"].__setitem__("minAvailable", 2), "blocks every node drain"),
        ("no PDB", lambda f, k: f.pop("pdb.yaml"), "PodDisruptionBudget"),
        ("flags not from the ConfigMap", lambda f, k: container(f).__setitem__(
            "args", ["--device=cuda:0"]), "--config_file"),
        ("ConfigMap key missing", lambda f, k: rename(cm(f)["data"], "server.flags", "flags"),
         "no key 'server.flags'"),
        ("ConfigMap not mounted", lambda f, k: container(f).__setitem__(
            "volumeMounts", [m for m in container(f)["volumeMounts"] if m["name"] != "flags"]),
         "not on a mounted ConfigMap"),
        ("running as root allowed", lambda f, k: dep(f)["spec"]["template"]["spec"]
         ["securityContext"].pop("runAsNonRoot"), "runAsNonRoot"),
        ("manifest not in kustomization", lambda f, k: k["resources"].remove("pdb.yaml"),
         "kustomization.yaml resources"),
    ]


def self_test(files, kustomization, server=None):
    base_errors, _ = check_manifests(files, kustomization)
    if base_errors:
        print("the manifests themselves fail, so the self-test cannot run:", *base_errors, sep="\n  ")
        return 1
    failed = 0
    cases = mutations()
    for description, mutate, expected in cases:
        f, k = copy.deepcopy(files), copy.deepcopy(kustomization)
        mutate(f, k)
        errors, _ = check_manifests(f, k)
        hit = [e for e in errors if expected in e]
        if hit:
            print(f"ok   {description}: {hit[0]}")
        else:
            failed += 1
            print(f"FAIL {description}: expected an error containing {expected!r}, got {errors}")
    total = len(cases)
    if server:
        # Flags the manifest checks cannot judge: the server's own parser must refuse them.
        _, facts = check_manifests(files, kustomization)
        for description, extra, expected in [
                ("misspelt flag", "max_batch_sequence=256", "unknown flag --max_batch_sequence"),
                ("out-of-range value", "max_draft_tokens=1000", "--max_draft_tokens is 1000"),
                ("not name=value", "device cuda:0", "is not name=value")]:
            total += 1
            errors = run_server_with_flags(server, facts["flags_text"] + extra + "\n")
            if errors and expected in errors[0]:
                print(f"ok   {description}: {errors[0]}")
            else:
                failed += 1
                print(f"FAIL {description}: expected the server to refuse it with {expected!r}, "
                      f"got {errors}")
    print(f"{total - failed} passed, {failed} failed")
    return 1 if failed else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--dir", required=True, help="deploy/kubernetes")
    ap.add_argument("--server", help="specverify-server: read its defaults, run the ConfigMap's flags")
    ap.add_argument("--kubectl", help="kubectl: render the kustomization offline and compare")
    ap.add_argument("--self-test", action="store_true", help="check that broken variants are refused")
    a = ap.parse_args()
    files, kustomization = load_dir(a.dir)
    if a.self_test:
        return self_test(files, kustomization, a.server)
    defaults = server_defaults(a.server) if a.server else None
    errors, facts = check_manifests(files, kustomization, defaults)
    if not errors and a.server:
        errors += run_server_with_flags(a.server, facts["flags_text"])
    if not errors and a.kubectl:
        rendered = kustomize_objects(a.kubectl, a.dir)
        if rendered != facts["objects"]:
            errors.append(f"kubectl kustomize renders {rendered}, the manifests hold {facts['objects']}")
        else:
            print(f"kubectl kustomize renders the {len(rendered)} objects of kustomization.yaml")
    for e in errors:
        print(f"error: {e}")
    n = sum(len(d) for d in files.values())
    print(f"{'FAILED' if errors else 'ok'}: {n} objects in {len(files)} manifests, {len(errors)} errors "
          f"(drain {facts.get('drain_s', '?')} s, gRPC port {facts.get('grpc_port', '?')})")
    return 1 if errors else 0


if __name__ == "__main__":
    sys.exit(main())
