"""Serving on Kubernetes: the model server image as a Deployment + Service, its endpoint, pods and rollouts.

For a model whose ``serving.deploy`` is ``{kind: Deployment, name, namespace?}`` the engine creates
(once per run and object, for one resource × image: an item of another resource or image asking
for the same object fails ``configuration``, as does another pytest-xdist worker's):

- a Secret ``<name>-token`` (key ``token``) when the matrix names ``auth.token_env``;
- a Deployment ``<name>`` (1 replica) running ``step.image`` with the resource's requests/limits,
  nodeSelector and tolerations, the image's own command, and the **serving container contract**:
  the server listens on port :data:`PORT` (named ``http``), serves the version in
  ``$HETERO_SERVING_VERSION`` and, when ``$HETERO_SERVING_TOKEN`` is set (from the Secret), refuses
  requests without ``Authorization: Bearer <token>`` except on the protocol's readiness path, which
  is the pod's readinessProbe (``httpGet``);
- a Service ``<name>`` (ClusterIP, port 80 → ``http``) selecting those pods.

Every object carries the run's labels (``pytest-hetero.owner`` etc.) and is deleted at close with the
rest (:func:`.cleanup.delete_owned`, the Deployment with foreground propagation, so its pods are
gone when it is); the pods carry ``pytest-hetero.serving`` / ``pytest-hetero.serving-owner`` only,
so the run's pod watch and cleanup never race the ReplicaSet.

**Endpoint without kube-proxy**: the Service's EndpointSlices (``kubernetes.io/service-name``) name
the ready pod IPs; the base URL is ``http://<pod IP>:<port>`` of a ready endpoint of the Deployment's
current ReplicaSet, reached from this host through the node's CNI. Not the apiserver's service proxy:
it would carry the load test (measuring the apiserver, not the server) and takes the
``Authorization`` header for itself; not the ClusterIP: nothing routes it without kube-proxy. A
cluster whose pod network this host cannot route to answers ``endpoint_unreachable``.

**Rollout and rollback** (:func:`switch`): ``kubectl rollout undo`` semantics through the API: the
newest earlier ReplicaSet whose template serves the wanted version becomes the Deployment's template
again (``pod-template-hash`` dropped, a JSON patch of ``/spec/template``); when none exists the
template's ``HETERO_SERVING_VERSION`` is patched. Either way the engine waits for the rollout (new
pods available, old ones gone, a ready endpoint of the new ReplicaSet).

Readiness failures quote the kubelet: the current pods' waiting reason (``CrashLoopBackOff`` with the
last exit, ``ErrImageNeverPull``…) and its Warning events (``Readiness probe failed: …``); a final
waiting reason (:data:`FINAL`) fails at once, anything else (retried by the kubelet) when the ready
timeout ends.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any, TypedDict

from kubernetes import client
from kubernetes.client.exceptions import ApiException

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes import scheduling as ks
from pytest_hetero.backends.kubernetes import usage as kube_usage
from pytest_hetero.backends.kubernetes.manifests import EnvVar, ObjectMeta, Serving
from pytest_hetero.backends.kubernetes.objects import NO_CONTAINER, Pod, find, parse_event, parse_pod
from pytest_hetero.backends.kubernetes.session import Deployed
from pytest_hetero.backends.kubernetes.startup import STUCK, image_identity, read_logs, state_text
from pytest_hetero.backends.labels import LABEL, OWNER, RUN_ID
from pytest_hetero.backends.protocol import (
    ActionFailed,
    RolloutFacts,
    ServingPod,
    ServingRequest,
    Step,
    SwitchFacts,
    Unsupported,
)

if TYPE_CHECKING:
    from typing import NotRequired

    from pytest_hetero.backends.kubernetes.session import KubeSession

PORT = 8080
"""Container port of the serving contract (``$HETERO_SERVING_PORT``)."""
VERSION_ENV, TOKEN_ENV, PORT_ENV = "HETERO_SERVING_VERSION", "HETERO_SERVING_TOKEN", "HETERO_SERVING_PORT"
SERVED, SERVED_OWNER = LABEL + "serving", LABEL + "serving-owner"
REVISION = "deployment.kubernetes.io/revision"
POLL_S = 0.5


class NotReadyFacts(TypedDict):
    """Why a Deployment did not become ready: the ``deployment`` (``namespace/name``), ``waited_s``, the
    ``timeout_s``, whether a pod was ``stuck``; with a pod, its name (``pod``), the kubelet's ``state``, its last
    Warning events (``warnings``) and the container's ``log`` tail (kept as the artifact ``log_artifact``)."""

    deployment: str
    waited_s: float
    timeout_s: float
    stuck: bool
    pod: NotRequired[str]
    state: NotRequired[str]
    warnings: NotRequired[list[str]]
    log: NotRequired[str]
    log_artifact: NotRequired[str]


class NotReady(ActionFailed):
    """A Deployment that did not become ready: ``facts`` (pod, kubelet state, Warning events, the
    container's log tail) for evidence besides the message."""

    def __init__(self, message: str, category: str, facts: NotReadyFacts) -> None:
        super().__init__(message, category)
        self.facts = facts


def _where(session: KubeSession, request: ServingRequest) -> tuple[str, str]:
    """``(namespace, name)`` of the deploy; Unsupported for kinds this engine does not deploy."""
    kind = request.deploy.get("kind", "")
    if kind != "Deployment":
        raise Unsupported(f"the kubernetes backend deploys serving.deploy kind Deployment (+ Service), not "
                          f"{kind or 'an unnamed kind'}; give serving.endpoint for a {kind} served otherwise")
    _ = session.api
    return request.deploy.get("namespace") or session.namespace, request.deploy["name"]


def _selector(session: KubeSession, name: str) -> dict[str, str]:
    return {SERVED: kc.label_value(name), SERVED_OWNER: session.owner}


def manifests(session: KubeSession, step: Step, request: ServingRequest, namespace: str, name: str
              ) -> list[Serving]:
    """Secret (when a token is given), Deployment and Service bodies for ``request``."""
    labels = kc.labels(session.settings.run_id, session.owner, "serving", model=request.model_name)
    notes = kc.created_annotations()

    def meta(named: str) -> ObjectMeta:
        return {"namespace": namespace, "labels": labels, "annotations": notes, "name": named}

    spec = ks.pod_spec(step.resource, step.image.reference,
                       pull_policy=session.conf.image_pull_policy)
    container = spec["containers"][0]
    del container["command"]
    env: list[EnvVar] = [{"name": VERSION_ENV, "value": request.version},
                                 {"name": PORT_ENV, "value": str(PORT)}]
    bodies: list[Serving] = []
    if request.token:
        secret = f"{name}-token"
        bodies.append({"apiVersion": "v1", "kind": "Secret", "metadata": meta(secret),
                       "type": "Opaque", "stringData": {"token": request.token}})
        env.append({"name": TOKEN_ENV, "valueFrom": {"secretKeyRef": {"name": secret, "key": "token"}}})
    container["name"] = "server"
    container["env"] = env
    container["ports"] = [{"name": "http", "containerPort": PORT}]
    container["readinessProbe"] = {"httpGet": {"path": request.ready_path, "port": "http"},
                                   "periodSeconds": 1, "failureThreshold": 2, "timeoutSeconds": 2}
    pods = _selector(session, name)
    bodies.append({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": meta(name),
                   "spec": {"replicas": 1, "revisionHistoryLimit": 5, "selector": {"matchLabels": pods},
                            "template": {"metadata": {"labels": pods}, "spec": spec}}})
    bodies.append({"apiVersion": "v1", "kind": "Service", "metadata": meta(name),
                   "spec": {"selector": pods, "ports": [{"name": "http", "port": 80, "targetPort": "http"}]}})
    return bodies


def _create(api: client.ApiClient, session: KubeSession, body: Serving) -> None:
    """Create ``body``; an object of that name this run created already is fine. ActionFailed
    ``serving_object_exists`` (platform) for one it did not create; the API's refusal otherwise."""
    kind, namespace, name = body["kind"], body["metadata"]["namespace"], body["metadata"]["name"]
    apps, core = client.AppsV1Api(api), client.CoreV1Api(api)
    create: Any = {"Deployment": apps.create_namespaced_deployment, "Service": core.create_namespaced_service,
              "Secret": core.create_namespaced_secret}[kind]
    read: Any = {"Deployment": apps.read_namespaced_deployment, "Service": core.read_namespaced_service,
            "Secret": core.read_namespaced_secret}[kind]
    try:
        create(namespace, body, _request_timeout=kc.API_TIMEOUT_S)
        return
    except ApiException as exc:
        if exc.status != 409:
            raise kc.api_outcome(exc, f"create {kind} {name} in namespace {namespace}") from None
    found = read(name, namespace, _request_timeout=kc.API_TIMEOUT_S)
    mine = found.metadata.labels or {}
    if mine.get(OWNER) != session.owner and mine.get(RUN_ID) == kc.label_value(session.settings.run_id):
        raise ActionFailed(f"{kind} {namespace}/{name} was deployed by another process of this run (another "
                           "pytest-xdist worker, for another resource): serving.deploy is deployed once, for one "
                           "resource; give the serving matrix one resource", "configuration")
    if mine.get(OWNER) != session.owner:
        raise ActionFailed(f"{kind} {namespace}/{name} exists and was not created by this run: the gate deploys "
                           f"serving.deploy itself; delete it or name another", "serving_object_exists")


def endpoint(session: KubeSession, step: Step, request: ServingRequest) -> str:
    """Deploy ``request`` (first call for the object) and wait until it is ready; its base URL
    (``http://<pod IP>:<port>``). Records ``serving.k8s.deployed`` (first call) and
    ``serving.k8s.ready``. ActionFailed ``endpoint_not_ready`` (platform) with the kubelet's reason."""
    namespace, name = _where(session, request)
    key = (namespace, name)
    with session.lock:
        first = key not in session.serving
        entry = session.serving.setdefault(key, Deployed((step.resource.name, step.image.name)))
    if entry.resource_image != (step.resource.name, step.image.name):
        raise ActionFailed(f"Deployment {namespace}/{name} was deployed for resource {entry.resource_image[0]} × "
                           f"image {entry.resource_image[1]}, not {step.resource.name} × {step.image.name}: "
                           "serving.deploy is deployed once, for one resource and image; give the serving matrix "
                           "one of each (or select one with -k)", "configuration")
    if first:
        bodies = manifests(session, step, request, namespace, name)
        for body in bodies:
            _create(session.api, session, body)
        session.serving[key].created = True
        step.record("serving.k8s.deployed", namespace=namespace, name=name, image=step.image.reference,
                    version=request.version, objects=[f"{b['kind']}/{b['metadata']['name']}" for b in bodies],
                    port=PORT, token_secret=bool(request.token))
    try:
        url, facts = wait_rolled_out(session, namespace, name, request.ready_timeout_s, "endpoint_not_ready")
    except NotReady as exc:
        keep_not_ready(step, exc)
        raise
    step.record("serving.k8s.ready", **facts)
    return url


def keep_not_ready(step: Step, exc: NotReady) -> None:
    """Record ``serving.k8s.not_ready`` (the facts without the log) and keep the container's log tail as
    the artifact ``serving-<pod>.log``."""
    facts = exc.facts.copy()
    log = facts.pop("log", None)
    if log is not None:
        facts["log_artifact"] = step.artifact(f"serving-{facts['pod']}.log", str(log)).path
    step.record("serving.k8s.not_ready", category=exc.category, **facts)


def _rs_of(apps: client.AppsV1Api, namespace: str, dep: Any) -> list[Any]:
    """The Deployment's ReplicaSets (owned by it), newest revision first."""
    sets: list[Any] = apps.list_namespaced_replica_set(
        namespace, label_selector=",".join(f"{k}={v}" for k, v in dep.spec.selector.match_labels.items()),
        _request_timeout=kc.API_TIMEOUT_S).items
    mine = [rs for rs in sets if any(o.uid == dep.metadata.uid for o in rs.metadata.owner_references or [])]
    return sorted(mine, key=lambda rs: -int((rs.metadata.annotations or {}).get(REVISION, "0")))


def _revision(obj: Any) -> str:
    return str((obj.metadata.annotations or {}).get(REVISION, ""))


def _complete(dep: Any) -> bool:
    want, st = dep.spec.replicas or 0, dep.status
    return bool((st.observed_generation or 0) >= (dep.metadata.generation or 0) and (st.updated_replicas or 0) == want
                and (st.available_replicas or 0) == want and (st.replicas or 0) == want)


def _ready_address(api: client.ApiClient, namespace: str, name: str, pods: set[str]) -> tuple[str, int] | None:
    """``(pod IP, port)`` of a ready endpoint of Service ``name`` backed by one of ``pods``, else None."""
    slices = client.DiscoveryV1Api(api).list_namespaced_endpoint_slice(
        namespace, label_selector=f"kubernetes.io/service-name={name}", _request_timeout=kc.API_TIMEOUT_S).items
    for sl in slices:
        port = next((p.port for p in sl.ports or [] if p.name == "http"), None)
        for ep in sl.endpoints or []:
            ready = ep.conditions is not None and ep.conditions.ready
            if ready and port and ep.target_ref is not None and ep.target_ref.name in pods and ep.addresses:
                return ep.addresses[0], int(port)
    return None


def wait_rolled_out(session: KubeSession, namespace: str, name: str, timeout_s: float, category: str
                    ) -> tuple[str, RolloutFacts]:
    """Poll until Deployment ``name``'s rollout is complete and its Service has a ready endpoint of the
    current ReplicaSet; ``(base URL, facts)``. ActionFailed ``category`` (platform) when a current pod's
    container is stuck (:data:`FINAL`) or ``timeout_s`` passes, quoting the kubelet."""
    api, begin = session.api, time.monotonic()
    apps = client.AppsV1Api(api)
    while True:
        try:
            dep = apps.read_namespaced_deployment(name, namespace, _request_timeout=kc.API_TIMEOUT_S)
            sets = _rs_of(apps, namespace, dep)
            current = next((rs for rs in sets if _revision(rs) == _revision(dep)), None)
            pods = _pods(api, namespace, dep, current)
            ready = {p.name for p in pods if _pod_ready(p)}
            address = _ready_address(api, namespace, name, ready) if _complete(dep) and current else None
        except ApiException as exc:
            raise kc.api_outcome(exc, f"read Deployment {namespace}/{name}") from None
        waited = time.monotonic() - begin
        if address is not None:
            assert current is not None
            return f"http://{address[0]}:{address[1]}", {
                "deployment": f"{namespace}/{name}", "revision": _revision(dep), "replicaset": current.metadata.name,
                "endpoint_source": "EndpointSlice", "pod_ip": address[0], "port": address[1],
                "pods": sorted(ready), "waited_s": round(waited, 3)}
        # until the controller has observed the latest template, "current" may still be the ReplicaSet being
        # replaced (a rollback's crash-looping one): its pods say nothing about the rollout asked for
        status, meta = dep.status, dep.metadata
        observed = status is not None and meta is not None and \
            (status.observed_generation or 0) >= (meta.generation or 0)
        stuck = next((p for p in pods if _stuck(p)), None) if observed else None
        if stuck is not None or waited >= timeout_s:
            _not_ready(api, namespace, name, dep, pods, stuck, waited, timeout_s, category)
        time.sleep(POLL_S)


def _pods(api: client.ApiClient, namespace: str, dep: Any, current: Any) -> list[Pod]:
    """Pods (:func:`~.objects.parse_pod` of their JSON) of the Deployment's current ReplicaSet (all of its pods
    before one exists)."""
    labels = dict(dep.spec.selector.match_labels)
    if current is not None:
        labels["pod-template-hash"] = current.metadata.labels.get("pod-template-hash", "")
    found: Any = client.CoreV1Api(api).list_namespaced_pod(
        namespace, label_selector=",".join(f"{k}={v}" for k, v in labels.items()), _request_timeout=kc.API_TIMEOUT_S)
    return [parse_pod(api.sanitize_for_serialization(p)) for p in found.items  # type: ignore[no-untyped-call]
            if p.metadata.deletion_timestamp is None]


def _pod_ready(pod: Pod) -> bool:
    return find(pod.conditions, "Ready", "True") is not None


FINAL = STUCK - {"CreateContainerConfigError", "CreateContainerError", "RunContainerError", "ErrImagePull"}
"""Waiting reasons that end the wait for readiness at once: a server that exited (``CrashLoopBackOff``)
or an image that will not come. The others of :data:`.startup.STUCK` are retried by the kubelet and
can clear (observed under load on the real node: ``CreateContainerConfigError: failed to sync secret
cache: timed out waiting for the condition`` for a Secret that exists); they end it at the ready
timeout, quoted the same way."""


def _stuck(pod: Pod) -> bool:
    return any(s.waiting is not None and s.waiting.reason in FINAL for s in pod.container_statuses)


def _not_ready(api: client.ApiClient, namespace: str, name: str, dep: Any, pods: list[Pod],
               stuck: Pod | None, waited: float, timeout_s: float, category: str) -> None:
    """Raise ActionFailed ``category`` naming the kubelet's account of the first (stuck) pod."""
    pod = stuck or (pods[0] if pods else None)
    facts: NotReadyFacts = {"deployment": f"{namespace}/{name}", "waited_s": round(waited, 3),
                            "timeout_s": timeout_s, "stuck": stuck is not None}
    if pod is None:
        conditions = "; ".join(f"{c.type}={c.status} {c.reason}: {c.message}" for c in dep.status.conditions or [])
        why = f"no pod was created ({conditions or 'no Deployment conditions'})"
    else:
        pod_name = pod.name
        warnings = [f"{e.reason}: {e.message}" for e in map(parse_event, ks.events_for(api, namespace, pod_name))
                    if e.type == "Warning"]
        why = f"pod {pod_name}: {state_text(pod) or 'Running, not Ready'}"
        if warnings:
            why += f"; last kubelet warning: {warnings[-1]}"
        facts["pod"], facts["state"], facts["warnings"] = pod_name, state_text(pod), warnings[-10:]
        facts["log"] = read_logs(client.CoreV1Api(api), namespace, pod_name, previous=_restarted(pod),
                                 container="server")
    when = f"after {waited:.0f} s" if stuck is not None else f"within {timeout_s:g} s"
    raise NotReady(f"Deployment {namespace}/{name} not ready {when}: {why}", category, facts)


def _restarted(pod: Pod) -> bool:
    """True when the pod's container was restarted (its previous run's log holds why it ended)."""
    return any(s.restart_count > 0 for s in pod.container_statuses)


def pods(session: KubeSession, request: ServingRequest) -> list[ServingPod]:
    """The current pods of the Deployment: ``[{"name", "node", "phase", "ready", "ip", "image",
    "image_digest", "requests", "limits", "version", "revision", "usage"}]`` (see the protocol's verb;
    ``usage``: the pod's usage facts, :mod:`.usage`, for a Deployment this run deployed)."""
    namespace, name = _where(session, request)
    api = session.api
    apps = client.AppsV1Api(api)
    try:
        dep = apps.read_namespaced_deployment(name, namespace, _request_timeout=kc.API_TIMEOUT_S)
        current = next((rs for rs in _rs_of(apps, namespace, dep) if _revision(rs) == _revision(dep)), None)
        found = _pods(api, namespace, dep, current)
    except ApiException as exc:
        raise kc.api_outcome(exc, f"list the pods of Deployment {namespace}/{name}") from None
    out: list[ServingPod] = []
    for pod in found:
        container = pod.containers[0] if pod.containers else NO_CONTAINER
        node = pod.node_name or None
        if node:
            session.seen_nodes.add(node)
        ident = image_identity(pod)
        out.append({"name": pod.name, "node": node, "phase": pod.phase,
                    "ready": _pod_ready(pod), "ip": pod.ip,
                    "image": container.image, "image_digest": ident["digest"],
                    "requests": container.requests, "limits": container.limits,
                    "version": container.env.get(VERSION_ENV), "revision": _revision(dep)})
        if (namespace, name) in session.serving:  # deployed by this run: the gate's own workload, ledgered
            out[-1]["usage"] = kube_usage.pod_facts(session, pod)
    return out


def switch(session: KubeSession, step: Step, request: ServingRequest, version: str) -> SwitchFacts:
    """Roll the Deployment to ``version`` (``kubectl rollout undo`` to the newest earlier ReplicaSet
    serving it, else a patch of ``$HETERO_SERVING_VERSION``) and wait for the rollout; its facts
    ``{"how", "revision_before", "revision_after", "replicaset", "endpoint", "waited_s"}``.
    ActionFailed ``rollout_not_complete`` (platform) when it does not complete in the ready timeout,
    ``configuration`` for a Deployment this session did not deploy (it never patches another's)."""
    namespace, name = _where(session, request)
    if (namespace, name) not in session.serving:
        deployed = ", ".join(f"{ns}/{n}" for ns, n in session.serving) or "none"
        raise ActionFailed(f"Deployment {namespace}/{name} was not deployed by this run (deployed: {deployed}); the "
                           "kubernetes backend rolls back only what it deployed: drop serving.rollback.deploy, "
                           "serving.deploy is rolled back", "configuration")
    api = session.api
    apps = client.AppsV1Api(api)
    try:
        dep: Any = apps.read_namespaced_deployment(name, namespace, _request_timeout=kc.API_TIMEOUT_S)
        before = _revision(dep)
        earlier = next((rs for rs in _rs_of(apps, namespace, dep)
                        if _revision(rs) != before and _served_version(rs.spec.template) == version), None)
        patch: list[dict[str, Any]] = []  # the client's own type of a JSON Patch body
        if _served_version(dep.spec.template) == version:
            how = f"none: the Deployment's template already serves {version}"
        elif earlier is not None:
            template = api.sanitize_for_serialization(earlier.spec.template)  # type: ignore[no-untyped-call]
            template["metadata"]["labels"].pop("pod-template-hash", None)
            patch = [{"op": "replace", "path": "/spec/template", "value": template}]
            how = f"rollout undo to revision {_revision(earlier)} (ReplicaSet {earlier.metadata.name})"
        else:
            env = dep.spec.template.spec.containers[0].env or []
            index = next(i for i, e in enumerate(env) if e.name == VERSION_ENV)
            patch = [{"op": "replace", "path": f"/spec/template/spec/containers/0/env/{index}/value", "value": version}]
            how = f"patched {VERSION_ENV} to {version} (no earlier ReplicaSet serves it)"
        if patch:
            apps.patch_namespaced_deployment(name, namespace, patch, _request_timeout=kc.API_TIMEOUT_S)
    except ApiException as exc:
        raise kc.api_outcome(exc, f"roll Deployment {namespace}/{name} to {version}") from None
    try:
        url, facts = wait_rolled_out(session, namespace, name, request.ready_timeout_s, "rollout_not_complete")
    except NotReady as exc:
        keep_not_ready(step, exc)
        raise
    return {"how": how, "revision_before": before, "revision_after": facts["revision"],
            "replicaset": facts["replicaset"], "endpoint": url, "waited_s": facts["waited_s"]}


def _served_version(template: Any) -> str | None:
    """``$HETERO_SERVING_VERSION`` of a pod template's first container."""
    env = template.spec.containers[0].env or []
    return next((e.value for e in env if e.name == VERSION_ENV), None)


def namespaces(session: KubeSession) -> set[str]:
    """Namespaces this session deployed serving objects in (cleaned at close besides its own)."""
    return {ns for ns, _ in session.serving}
