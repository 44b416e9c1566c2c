"""``hetero doctor [MATRIX…]``: what the matrices' engines need on this machine, each missing piece with its fix.

Checks (each only when a matrix needs it; without a matrix, every check, none of them required):

- local engine: bubblewrap installed and able to build its namespaces here (user namespaces), the sandbox
  the code under test runs in;
- docker engine: the engine answers (``target.docker_host``/``tls`` or ``DOCKER_HOST``), and its runtimes
  include ``nvidia`` for a gpu resource and ``ascend`` for an npu resource (NVIDIA Container Toolkit, Ascend
  Docker Runtime);
- kubernetes engine: a kubeconfig context (``target.kubeconfig``/``context``, ``KUBECONFIG``, in-cluster), the
  apiserver answers, and the gate's identity holds the permissions ``deploy/rbac.yaml`` grants, asked with
  SelfSubjectAccessReview in the target namespace (jobs for ``submit_as: job|kueue-job``, Kueue workloads,
  Volcano podgroups as the matrix submits);
- device tools of the resource types, on this host for the local engine: ``nvidia-smi`` (gpu), ``npu-smi``
  (npu); ``dcgmi`` (DCGM diagnostics) is reported, never required;
- Chromium (or Chrome) for ``hetero render --pdf``: reported, never required.

Exit 0 when nothing required is missing, 1 when something is, 2 for a matrix that does not load.
"""

from __future__ import annotations

import argparse
import shutil
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.errors import HeteroError

if TYPE_CHECKING:
    from pytest_hetero.matrix.model import Matrix

OK, MISSING, INFO = "ok", "MISSING", "info"


@dataclass(frozen=True)
class Check:
    """One finding: ``status`` ok / MISSING / info, what was checked, what was found, and the fix."""

    status: str
    what: str
    detail: str
    fix: str = ""


PERMISSIONS: tuple[tuple[str, str, str, str, tuple[str, ...]], ...] = (
    # (when, API group, resource, subresource, verbs) — deploy/rbac.yaml
    ("always", "", "pods", "", ("create", "get", "list", "watch", "delete")),
    ("always", "", "pods", "exec", ("create",)),
    ("always", "", "pods", "log", ("get",)),
    ("always", "", "events", "", ("list",)),
    ("job", "batch", "jobs", "", ("create", "get", "list", "watch", "delete")),
    ("kueue-job", "kueue.x-k8s.io", "workloads", "", ("get", "list", "watch")),
    ("volcano-job", "batch.volcano.sh", "jobs", "", ("create", "get", "list", "watch", "delete")),
    ("volcano-job", "scheduling.volcano.sh", "podgroups", "", ("get", "list", "watch")),
)
"""What the gate asks of the cluster in the target namespace, per ``submit_as`` (``always`` for every one;
``kueue-job`` also needs ``job``). Nodes are read cluster-wide (``deploy/rbac.yaml``'s ClusterRole)."""


def check_sandbox() -> Check:
    """Whether bubblewrap is installed and able to create its namespaces here."""
    import os
    import subprocess

    bwrap = shutil.which("bwrap")
    if bwrap is None:
        return Check(MISSING, "bubblewrap (sandbox of the code under test)", "bwrap is not on PATH",
                     "apt-get install bubblewrap")
    flags = ["--unshare-pid", "--unshare-ipc", "--unshare-uts", "--die-with-parent", "--ro-bind", "/", "/",
             "--proc", "/proc", "--dev", "/dev"]
    if os.geteuid() != 0:
        flags.insert(0, "--unshare-user")
    done = subprocess.run([bwrap, *flags, "--", "/bin/sh", "-c", "exit 0"], capture_output=True, text=True,
                          timeout=30, check=False)
    if done.returncode != 0:
        return Check(MISSING, "bubblewrap (sandbox of the code under test)",
                     f"{bwrap} cannot create namespaces here: {done.stderr.strip()[-200:]}",
                     "allow unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, "
                     "user.max_user_namespaces > 0) or run the gate as root")
    return Check(OK, "bubblewrap (sandbox of the code under test)", f"{bwrap} creates its namespaces")


def check_tool(name: str, what: str, fix: str, required: bool) -> Check:
    """A command on PATH."""
    found = shutil.which(name)
    if found:
        return Check(OK, what, found)
    return Check(MISSING if required else INFO, what, f"{name} is not on PATH", fix)


class _EngineInfo(msgspec.Struct, frozen=True, kw_only=True):
    """What the check reads of the Docker engine's ``GET /info`` answer (Docker Engine API, ``SystemInfo``): its
    ``ServerVersion`` (``?`` when absent) and ``Runtimes`` (``{name: runtime}``), each as the engine wrote it."""

    server_version: object = msgspec.field(name="ServerVersion", default="?")
    runtimes: Any = msgspec.field(name="Runtimes", default=None)


def check_docker(target: dict[str, Any], types: set[str]) -> list[Check]:
    """The engine answers; runtimes for gpu (nvidia) and npu (ascend) resources."""
    import docker

    from pytest_hetero.backends.docker.client import connection

    what = "Docker engine"
    try:
        api = docker.APIClient(timeout=10, **connection(target))
        info = api.info()
    except Exception as exc:  # noqa: BLE001 - any failure to reach the engine is the finding itself
        where = target.get("docker_host") or "DOCKER_HOST / the local socket"
        return [Check(MISSING, what, f"no answer from {where}: {str(exc).splitlines()[0][:200]}",
                      "start dockerd (apt-get install docker.io; systemctl start docker), or point DOCKER_HOST / "
                      "target.docker_host at the engine; the user needs access to its socket")]
    said = msgspec.convert(info, _EngineInfo)  # a JSON object always fits (each field any JSON value)
    runtimes = sorted(said.runtimes or {})
    out = [Check(OK, what, f"{said.server_version}; runtimes: {', '.join(runtimes) or 'none'}")]
    wanted = (("gpu", "nvidia", "NVIDIA container runtime",
               "install the NVIDIA Container Toolkit and run: nvidia-ctk runtime configure --runtime=docker; "
               "systemctl restart docker"),
              ("npu", "ascend", "Ascend container runtime",
               "install Ascend Docker Runtime (ascend-docker-runtime) and restart dockerd"))
    for kind, runtime, label, fix in wanted:
        if kind in types:
            present = runtime in runtimes
            out.append(Check(OK if present else MISSING, label, f"runtime {runtime!r} "
                             f"{'registered' if present else 'not among ' + (', '.join(runtimes) or 'none')}", fix))
    return out


def check_kubernetes(target: dict[str, Any], submit_as: set[str]) -> list[Check]:
    """Context, apiserver, and the gate's permissions (SelfSubjectAccessReview) in the target namespace."""
    from kubernetes import client

    from pytest_hetero.backends.kubernetes.client import connect
    from pytest_hetero.backends.protocol import EngineFault

    try:
        api, namespace, context = connect(target, target.get("context"))
    except EngineFault as exc:
        return [Check(MISSING, "Kubernetes context", str(exc)[:300],
                      "set KUBECONFIG (or target.kubeconfig / target.context) to a kubeconfig for the cluster")]
    namespace = str(target.get("namespace") or namespace)
    out = [Check(OK, "Kubernetes context", f"{context or 'in-cluster'} (namespace {namespace})")]
    try:
        version = client.VersionApi(api).get_code(_request_timeout=10)
    except Exception as exc:  # noqa: BLE001 - any failure to reach the apiserver is the finding itself
        out.append(Check(MISSING, "Kubernetes apiserver", f"no answer: {str(exc).splitlines()[0][:200]}",
                         "check the kubeconfig's server address, the network and the credentials"))
        return out
    out.append(Check(OK, "Kubernetes apiserver", f"{version.git_version}"))
    wanted = {"always", *submit_as} | ({"job"} if "kueue-job" in submit_as else set())
    auth = client.AuthorizationV1Api(api)
    denied = []
    asks: list[tuple[str | None, str, str, str, str]] = [(None, "", "nodes", "", v) for v in ("get", "list", "watch")]
    asks += [(namespace, g, r, s, v) for when, g, r, s, verbs in PERMISSIONS if when in wanted for v in verbs]
    for ns, group, resource, sub, verb in asks:
        review = client.V1SelfSubjectAccessReview(spec=client.V1SelfSubjectAccessReviewSpec(
            resource_attributes=client.V1ResourceAttributes(namespace=ns, group=group, resource=resource,
                                                            subresource=sub or None, verb=verb)))
        try:
            status = auth.create_self_subject_access_review(review, _request_timeout=10).status
            allowed = bool(status and status.allowed)
        except Exception as exc:  # noqa: BLE001
            out.append(Check(MISSING, "Kubernetes permissions", f"SelfSubjectAccessReview failed: {exc}"[:300],
                             "the identity must be able to create selfsubjectaccessreviews (every user can by "
                             "default)"))
            return out
        if not allowed:
            full = f"{resource}/{sub}" if sub else resource
            denied.append(f"{verb} {full}{'.' + group if group else ''}" + (f" in {ns}" if ns else " (cluster)"))
    if denied:
        out.append(Check(MISSING, "Kubernetes permissions", "denied: " + ", ".join(denied),
                         f"kubectl apply -n {namespace} -f deploy/rbac.yaml (and bind it to this identity)"))
    else:
        out.append(Check(OK, "Kubernetes permissions", f"{len(asks)} SelfSubjectAccessReviews allowed"))
    return out


def checks_for(matrices: list[Matrix]) -> list[Check]:
    """Every check the matrices' engines and resource types need (none given: every check, as info)."""
    # the matrices of each built-in engine (those checked here), and of any other an extension brings
    backends: dict[str, list[Matrix]] = {"local": [], "docker": [], "kubernetes": []}
    for m in matrices:
        backends.setdefault(m.backend, []).append(m)
    out: list[Check] = []
    if not matrices or backends["local"]:
        out.append(check_sandbox())
    local_types = {r.type for m in backends["local"] for r in m.resources}
    out.append(check_tool("nvidia-smi", "nvidia-smi (NVIDIA devices on this host)",
                          "install the NVIDIA driver (nvidia-smi comes with it)", "gpu" in local_types))
    out.append(check_tool("npu-smi", "npu-smi (Ascend devices on this host)",
                          "install the Ascend driver and firmware (npu-smi comes with them)", "npu" in local_types))
    out.append(check_tool("dcgmi", "dcgmi (DCGM diagnostics, optional)", "install datacenter-gpu-manager", False))
    out.append(next((check_tool(b, "Chromium for hetero render --pdf (optional)", "", False)
                     for b in ("chromium", "chromium-browser", "google-chrome") if shutil.which(b)),
                    Check(INFO, "Chromium for hetero render --pdf (optional)", "no chromium on PATH",
                          "apt-get install chromium fonts-noto-cjk")))
    for m in backends["docker"]:
        out += check_docker(dict(m.target), {r.type for r in m.resources})
    if not matrices:
        out += [c if c.status == OK else Check(INFO, c.what, c.detail, c.fix) for c in check_docker({}, set())]
    for m in backends["kubernetes"]:
        out += check_kubernetes(dict(m.target), {str(m.target.get("submit_as", "pod"))})
    return out


def run(args: argparse.Namespace) -> int:
    """Run ``hetero doctor``; returns the exit code (module docstring)."""
    from pytest_hetero.matrix.load import load_matrix

    try:
        matrices = [load_matrix(Path(p)) for p in args.matrix]
    except HeteroError as exc:
        sys.stderr.write(f"hetero doctor: {exc.render()}\n")
        return 2
    found = checks_for(matrices)
    for c in found:
        print(f"{c.status:<8}{c.what}: {c.detail}")
        if c.status != OK and c.fix:
            print(f"        fix: {c.fix}")
    missing = sum(c.status == MISSING for c in found)
    print(f"{missing} missing" if missing else "nothing missing" + (" for " + ", ".join(args.matrix)
                                                                     if args.matrix else ""))
    return 1 if missing else 0


resolve(__name__)
