"""The state one Kubernetes connection holds for a run, shared by the engine's modules.

The engine (:mod:`.engine`) owns one :class:`KubeSession`; submission (:mod:`.submit`), placement
(:mod:`.placement`), startup (:mod:`.startup`), model runs (:mod:`.run`) and node readiness
(:mod:`.nodes`) receive it instead of the engine object, so no module of the package imports
another's class and none reaches into the engine.
"""

from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any, Literal, TypedDict

import msgspec
from kubernetes import client

from pytest_hetero.backends.kubernetes import client as kc
from pytest_hetero.backends.kubernetes.manifests import Workload
from pytest_hetero.backends.kubernetes.nodes import NodeReadiness, ReadyCondition
from pytest_hetero.backends.kubernetes.queues import Served, discover
from pytest_hetero.backends.kubernetes.watch import PodWatch
from pytest_hetero.backends.labels import OWNER
from pytest_hetero.backends.protocol import EngineFault, NodeFacts
from pytest_hetero.declared import resolve
from pytest_hetero.settings import Settings


class NodeLost(TypedDict):
    """Why a workload's pod is not used again (:mod:`.nodes`): its ``node``, what it ``said`` (``was NotReady
    before`` / ``turned NotReady during``), the ``item`` that saw it, and the node's Ready ``condition``."""

    node: str
    said: str
    item: str
    condition: ReadyCondition


@dataclass(eq=False)
class WorkloadRecord:
    """One workload the run created (:mod:`.submit`, or a model run's own pod, :mod:`.spread`): its pod label
    ``probe`` key, object ``name`` and ``kind`` (``target.submit_as``), the fault of its creation (``error``;
    None when it was created), the ``node`` it is pinned to (None: not pinned); ``created`` (set once the create
    call answered), the manifest ``body`` and ``submitted_at`` (epoch s) once submitted (None before); then what
    the layers learn (None until they do): its ``pod``, ``node_lost``, ``released`` (epoch s), ``oom_kills`` seen
    (0), the ``inputs`` folder copied into it and the ``root`` folder of a model run's pod or of a pod pinned to a
    node (None: ``/tmp/hetero-<owner>``, the shared workload's), and that pod's
    container environment (``env``, as ``env`` printed it when its inputs were copied)."""

    probe: str
    name: str
    kind: str
    error: EngineFault | None
    node: str | None
    created: threading.Event = field(default_factory=threading.Event)
    body: Workload | None = None
    submitted_at: float | None = None
    root: str | None = None
    pod: str | None = None
    node_lost: NodeLost | None = None
    released: float | None = None
    oom_kills: int = 0
    inputs: str | None = None
    env: str | None = None

    def started_pod(self) -> str:
        """The workload's pod (set once placement or startup found it); RuntimeError before (a harness bug: the
        layers read it after startup)."""
        if self.pod is None:
            raise RuntimeError(f"{self.kind} {self.name} has no pod yet")
        return self.pod


PullPolicy = Literal["never", "if-not-present", "always"]
"""A target's ``pull_policy`` (the matrix schema's enum)."""
PULL: dict[PullPolicy, str] = {"never": "Never", "always": "Always", "if-not-present": "IfNotPresent"}
"""A target's ``pull_policy`` → the containers' ``imagePullPolicy``."""


class KubeTarget(msgspec.Struct, frozen=True, kw_only=True):
    """What this engine reads of the matrix's ``spec.target`` (:class:`pytest_hetero.matrix.document.TargetDoc`),
    resolved once (:func:`parse_target`): ``context`` and ``namespace`` (None: the kubeconfig's), ``submit_as``
    (``pod`` when absent), ``pull_policy`` (None when absent: the engine's default) and the containers'
    ``imagePullPolicy`` it names (:attr:`image_pull_policy`: :data:`PULL`; None: the cluster's default), the
    ``python`` the workload image runs (``python3``), ``unschedulable_grace_s`` (0), ``cleanup_wait_s`` (None:
    the cleanup's default). The other backends' keys are ignored."""

    context: str | None = None
    namespace: str | None = None
    submit_as: str = "pod"
    pull_policy: PullPolicy | None = None
    python: str = "python3"
    unschedulable_grace_s: float = 0.0
    cleanup_wait_s: float | None = None

    @property
    def image_pull_policy(self) -> str | None:
        """The containers' ``imagePullPolicy`` :attr:`pull_policy` names (None: the cluster's default)."""
        return None if self.pull_policy is None else PULL[self.pull_policy]


def parse_target(raw: dict[str, Any]) -> KubeTarget:
    """:class:`KubeTarget` of a matrix target (as the backend receives it), read once into its declared shape.
    ValueError (``msgspec.ValidationError``, naming the key's ``$.path``) for a key of the wrong type or a
    ``pull_policy`` outside :data:`PULL` (the matrix schema refuses both first, naming the file and line)."""
    return msgspec.convert(raw, KubeTarget)


@dataclass(frozen=True)
class ServerVersion:
    """The apiserver's ``/version`` (``VersionInfo``) as the fingerprint keeps it: ``git_version`` and
    ``platform`` (None where the apiserver left one out)."""

    git_version: str | None
    platform: str | None


@dataclass
class Deployed:
    """A serving Deployment this run deploys (:mod:`.serving`): for which ``(resource, image)``, and whether its
    objects were ``created`` (set once every create call answered)."""

    resource_image: tuple[str, str]
    created: bool = False


class KubeSession:
    """Connection and run state: the ApiClient (on first use), ``namespace`` and ``context``, the
    run's pod watch, the workloads created (by (resource, image)), the node facts seen (``nodes`` by
    name; ``seen_nodes`` for the fingerprint), image ``digests`` by image name, a thread ``pool`` of
    ``--hetero-parallel`` submitters, and ``owner`` (this process's label token)."""

    def __init__(self, target: dict[str, Any], settings: Settings) -> None:
        self.target = target
        self.conf = parse_target(target)
        self.settings = settings
        self.owner = uuid.uuid4().hex[:10]
        self.context: str | None = settings.kube_context or self.conf.context
        self.submit_as = self.conf.submit_as
        self._api: client.ApiClient | None = None
        self.namespace = ""
        self.server: ServerVersion | None = None
        """The apiserver's version, once connected."""
        self.watch: PodWatch | None = None
        self.node_feed: NodeReadiness | None = None
        """The watch of every node's Ready condition that model runs watch their node through (:meth:`node_watch`)."""
        self.workloads: dict[tuple[str, ...], WorkloadRecord] = {}
        """Workloads by (resource, image), and node-coverage ones by (resource, image, node)."""
        self.nodes: dict[str, NodeFacts] = {}
        """Facts of the nodes listed so far (discovery's pool listing, placement's refresh), by name."""
        self.unread_nodes: dict[str, str] = {}
        """Nodes placement's refresh could not list (:func:`.placement.refresh_nodes`), by name: why."""
        self.seen_nodes: set[str] = set()
        """Nodes discovery listed or a workload was placed on (the fingerprint's ``nodes``)."""
        self.digests: dict[str, str] = {}
        self.restarts: dict[str, int] = {}
        """Pod name → its containers' restart count when startup saw it running (:func:`.startup.stopped`)."""
        self.running: dict[str, str] = {}
        """Model runs whose exec is in flight, run folder → pod (:func:`.run.kill_running` kills them at close)."""
        self.lock = threading.Lock()
        self.pool = ThreadPoolExecutor(max(1, settings.parallel), thread_name_prefix="hetero-kube")
        self.prefetched: set[str] = set()
        self.serving: dict[tuple[str, str], Deployed] = {}
        """Serving objects deployed (by (namespace, name)); see :mod:`.serving`."""
        self._served: Served | None = None

    @property
    def connected(self) -> bool:
        """True once the apiserver was reached."""
        return self._api is not None

    @property
    def api(self) -> client.ApiClient:
        """The ApiClient (connects on first use; ActionFailed ``bad_target`` without configuration)."""
        with self.lock:
            if self._api is None:
                api, namespace, context = kc.connect(self.target, self.context)
                self.namespace = self.settings.kube_namespace or self.conf.namespace or namespace
                self.context = self.context or context
                try:
                    info = client.VersionApi(api).get_code(_request_timeout=kc.API_TIMEOUT_S)
                    self.server = ServerVersion(git_version=info.git_version, platform=info.platform)
                except Exception as exc:  # noqa: BLE001 - translated
                    raise kc.api_outcome(exc, f"reach the apiserver of context {self.context}") from None
                self._api = api
            return self._api

    def listed(self, facts: NodeFacts) -> None:
        """Keep ``facts`` as what is known of its node (a listing of it that failed before is forgotten)."""
        self.nodes[facts["name"]] = facts
        self.unread_nodes.pop(facts["name"], None)

    def unreadable(self, node: str, why: str) -> None:
        """Note that node ``node`` could not be listed (``why``); facts listed of it before are dropped."""
        self.nodes.pop(node, None)
        self.unread_nodes[node] = why

    def known(self, node: str) -> bool:
        """True once node ``node`` was listed, or a listing of it failed."""
        return node in self.nodes or node in self.unread_nodes

    def simulated(self, node: str) -> bool:
        """True when node ``node`` is listed and KWOK simulates it (one not listed, or unreadable, is not)."""
        facts = self.nodes.get(node)
        return facts is not None and facts["simulated"]

    def served(self) -> Served:
        """The API groups and versions the apiserver serves (API discovery, once per session; see
        :func:`.queues.discover`: a failed discovery is kept as ``Served.error``)."""
        if self._served is None:
            self._served = discover(self.api)
        return self._served

    @property
    def core(self) -> client.CoreV1Api:
        """CoreV1Api on :attr:`api`."""
        return client.CoreV1Api(self.api)

    def pods(self) -> PodWatch:
        """The run's pod watch, started on first use (ActionFailed ``forbidden_rbac`` without list/watch pods)."""
        api = self.api
        with self.lock:
            if self.watch is None:
                watch = PodWatch(api, self.namespace, f"{OWNER}={self.owner}")
                try:
                    watch.start()
                except Exception as exc:  # noqa: BLE001 - translated
                    raise kc.api_outcome(exc, f"list pods in namespace {self.namespace}") from None
                self.watch = watch
            return self.watch

    def node_watch(self) -> NodeReadiness:
        """The session's watch of every node's Ready condition (:class:`.nodes.NodeReadiness`), started on first
        use. Never raises for an API answer (its failures are the watch's ``error``)."""
        api = self.api
        with self.lock:
            if self.node_feed is None:
                self.node_feed = NodeReadiness(api).start()
            return self.node_feed


resolve(__name__)
