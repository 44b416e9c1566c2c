"""The Kubernetes objects of the gate, as TypedDicts of their JSON: those it builds and creates, and those it
reads as the apiserver serves them.

Field names, nesting and optionality are those of the Kubernetes API reference (``core/v1`` Pod, Service,
ConfigMap, Secret, PersistentVolumeClaim, Node, Event; ``batch/v1`` Job; ``apps/v1`` Deployment and
DaemonSet; ``discovery.k8s.io/v1`` EndpointSlice; ``networking.k8s.io/v1`` NetworkPolicy; Kueue's
``kueue.x-k8s.io`` Workload, LocalQueue, ClusterQueue; Volcano's ``batch.volcano.sh/v1alpha1`` Job and
``scheduling.volcano.sh/v1beta1`` PodGroup), cut to the fields the gate writes or reads back.

Built objects (``*Manifest``, :data:`Workload`, :data:`Serving`): a field the API lets a client leave out
is optional (``total=False``); one the gate always writes, or the API requires, is ``Required``. The
official client accepts these dicts as request bodies (it serialises a dict as is), and evidence keeps them
as they were sent (``manifest`` facts).

Served objects (``Served*``, :class:`EventJSON`, :class:`ConditionJSON`): what a GET, a LIST item or a watch
event's object holds, as ``json.loads`` decodes it. A field is optional (the apiserver leaves out what is
unset) but those it always serves, which are ``Required``: every object's ``metadata.name``, the fields the API
types declare without ``omitempty`` and the nested structs (``omitempty`` never drops a struct: a Pod's
``spec`` and ``status``, a listed Node's, an Event's ``source``), e.g. a LIST answer's ``items`` (``[]`` for
none) and ``metadata.resourceVersion``, a condition's ``type`` and ``status``, a container status's ``name``,
``image``, ``imageID``, ``restartCount``, ``state`` and ``lastState``, a terminated state's ``exitCode``, an
endpoint's ``addresses`` and ``conditions``. A custom resource (Kueue, Volcano) is stored as its controller
or client sent it and a status subresource starts empty: only what their APIs require is ``Required`` there
(a Workload's ``status`` may be absent). The parsers of
:mod:`.objects`, :mod:`.queues`, :mod:`.boundaries`, :mod:`.accounts` and :mod:`.snapshot` read them once and
fill API defaults. :class:`ServedPod` carries the ``deleted`` mark :mod:`.watch` adds.
"""

from __future__ import annotations

from typing import Generic, Literal, Required, TypedDict, TypeVar

from pytest_hetero.backends.protocol import Taint


class ObjectMeta(TypedDict, total=False):
    """``metadata`` of an object the gate creates (every one has a name and a namespace) or the apiserver
    serves (a ``name`` always); ``uid``, ``resourceVersion``, the timestamps and ``ownerReferences`` are the
    apiserver's, present only in what it serves."""

    name: Required[str]
    namespace: str
    labels: dict[str, str]
    annotations: dict[str, str]
    uid: str
    resourceVersion: str
    creationTimestamp: str
    deletionTimestamp: str
    finalizers: list[str]
    ownerReferences: list[OwnerReference]
    managedFields: list[dict[str, object]]


class TemplateMeta(TypedDict, total=False):
    """``metadata`` of a pod template: the pods' ``labels`` and ``annotations``."""

    labels: dict[str, str]
    annotations: dict[str, str]


class Listed(TypedDict):
    """Any object of a list call, as far as the gate reads every kind: its ``metadata`` (always served)."""

    metadata: ObjectMeta


class OwnerReference(TypedDict):
    """An ``ownerReferences[]`` entry as served: ``kind``, ``name`` and ``uid`` of the owner (the API requires
    all three)."""

    kind: str
    name: str
    uid: str


class Toleration(TypedDict, total=False):
    """A pod's ``tolerations[]`` entry (``core/v1`` Toleration; the matrix's
    :class:`~pytest_hetero.matrix.document.TolerationDoc` has the same shape)."""

    key: str
    operator: str
    value: str
    effect: str
    tolerationSeconds: int


class ResourceRequirements(TypedDict, total=False):
    """``resources`` of a container: resource name → quantity string."""

    requests: dict[str, str]
    limits: dict[str, str]


class ObjectFieldSelector(TypedDict):
    """``fieldRef``: the pod field whose value an environment variable takes (``metadata.annotations['x']``…)."""

    fieldPath: str


class SecretKeySelector(TypedDict):
    """``secretKeyRef``: the ``key`` of Secret ``name`` an environment variable takes."""

    name: str
    key: str


class EnvVarSource(TypedDict, total=False):
    """``valueFrom`` of an environment variable: a pod field or a Secret's key."""

    fieldRef: ObjectFieldSelector
    secretKeyRef: SecretKeySelector


class EnvVar(TypedDict, total=False):
    """A container's ``env[]`` entry: a literal ``value`` or a ``valueFrom`` source."""

    name: Required[str]
    value: str
    valueFrom: EnvVarSource


class ContainerPort(TypedDict):
    """A container's ``ports[]`` entry (the gate names every port)."""

    name: str
    containerPort: int


class VolumeMount(TypedDict, total=False):
    """A container's ``volumeMounts[]`` entry."""

    name: Required[str]
    mountPath: Required[str]
    readOnly: bool


class HTTPGetAction(TypedDict):
    """``httpGet`` of a probe: ``path`` on ``port`` (a number or a container port's name)."""

    path: str
    port: int | str


class Probe(TypedDict, total=False):
    """A container's ``readinessProbe``."""

    httpGet: Required[HTTPGetAction]
    periodSeconds: int
    failureThreshold: int
    timeoutSeconds: int


class Container(TypedDict, total=False):
    """A ``containers[]`` entry of a pod spec the gate builds (``name``, ``image``, ``resources`` always
    written by :func:`.scheduling.pod_spec`)."""

    name: Required[str]
    image: Required[str]
    command: list[str]
    args: list[str]
    resources: Required[ResourceRequirements]
    imagePullPolicy: str
    env: list[EnvVar]
    ports: list[ContainerPort]
    volumeMounts: list[VolumeMount]
    readinessProbe: Probe
    terminationMessagePolicy: str
    restartPolicy: str


class ConfigMapVolumeSource(TypedDict):
    """``configMap`` of a volume: the ConfigMap's ``name`` and the files' ``defaultMode``."""

    name: str
    defaultMode: int


class EmptyDirVolumeSource(TypedDict):
    """``emptyDir`` of a volume, bounded by ``sizeLimit`` (a quantity)."""

    sizeLimit: str


class ClaimVolumeSource(TypedDict, total=False):
    """``persistentVolumeClaim`` of a volume: the claim's name, mounted ``readOnly`` or not."""

    claimName: Required[str]
    readOnly: bool


class Volume(TypedDict, total=False):
    """A pod's ``volumes[]`` entry: exactly one source besides ``name``."""

    name: Required[str]
    configMap: ConfigMapVolumeSource
    emptyDir: EmptyDirVolumeSource
    persistentVolumeClaim: ClaimVolumeSource


class LocalObjectReference(TypedDict):
    """A reference by ``name`` to an object of the pod's namespace (an ``imagePullSecrets[]`` entry)."""

    name: str


class FieldRequirement(TypedDict):
    """A ``matchFields[]`` entry of a node selector term (``metadata.name In [node]``)."""

    key: str
    operator: str
    values: list[str]


class NodeSelectorTerm(TypedDict):
    """A ``nodeSelectorTerms[]`` entry: the gate's pins match the node's name field."""

    matchFields: list[FieldRequirement]


class NodeSelector(TypedDict):
    """``requiredDuringSchedulingIgnoredDuringExecution`` of a node affinity."""

    nodeSelectorTerms: list[NodeSelectorTerm]


class NodeAffinity(TypedDict):
    """``nodeAffinity`` of a pod: the required node selector only."""

    requiredDuringSchedulingIgnoredDuringExecution: NodeSelector


class Affinity(TypedDict):
    """A pod's ``affinity`` (node affinity only: :func:`.scheduling.pin`)."""

    nodeAffinity: NodeAffinity


class PodSpec(TypedDict, total=False):
    """A ``core/v1`` PodSpec as the gate builds it (:func:`.scheduling.pod_spec` writes ``containers``,
    ``restartPolicy``, ``terminationGracePeriodSeconds``, ``automountServiceAccountToken``) and as the
    apiserver serves it back (``nodeName``, ``hostname``, ``initContainers``, ``overhead``)."""

    containers: Required[list[Container]]
    initContainers: list[Container]
    restartPolicy: str
    terminationGracePeriodSeconds: int
    automountServiceAccountToken: bool
    nodeSelector: dict[str, str]
    tolerations: list[Toleration]
    priorityClassName: str
    schedulerName: str
    affinity: Affinity
    subdomain: str
    hostname: str
    nodeName: str
    shareProcessNamespace: bool
    volumes: list[Volume]
    imagePullSecrets: list[LocalObjectReference]
    overhead: dict[str, str]
    activeDeadlineSeconds: int


class PodTemplateSpec(TypedDict):
    """``template`` of a Job, Deployment or Volcano task: the pods' ``metadata`` and ``spec``."""

    metadata: TemplateMeta
    spec: PodSpec


class PodManifest(TypedDict):
    """A ``core/v1`` Pod the gate creates."""

    apiVersion: Literal["v1"]
    kind: Literal["Pod"]
    metadata: ObjectMeta
    spec: PodSpec


class ExitCodeRule(TypedDict):
    """``onExitCodes`` of a pod failure policy rule."""

    containerName: str
    operator: str
    values: list[int]


class PodFailurePolicyRule(TypedDict):
    """A ``podFailurePolicy.rules[]`` entry: ``action`` on the container's exit codes."""

    action: str
    onExitCodes: ExitCodeRule


class PodFailurePolicy(TypedDict):
    """A Job's ``podFailurePolicy``."""

    rules: list[PodFailurePolicyRule]


class JobSpec(TypedDict, total=False):
    """A ``batch/v1`` JobSpec (``template`` always written)."""

    template: Required[PodTemplateSpec]
    backoffLimit: int
    backoffLimitPerIndex: int
    podFailurePolicy: PodFailurePolicy
    ttlSecondsAfterFinished: int
    suspend: bool
    completionMode: str
    completions: int
    parallelism: int
    activeDeadlineSeconds: int


class JobManifest(TypedDict):
    """A ``batch/v1`` Job the gate creates (a workload, or a gang's indexed Job)."""

    apiVersion: Literal["batch/v1"]
    kind: Literal["Job"]
    metadata: ObjectMeta
    spec: JobSpec


class VolcanoTask(TypedDict):
    """A ``tasks[]`` entry of a Volcano Job: ``replicas`` pods of ``template``."""

    name: str
    replicas: int
    template: PodTemplateSpec


class VolcanoJobSpec(TypedDict):
    """The spec of a Volcano Job as :func:`.scheduling.manifest` writes it."""

    schedulerName: str
    queue: str
    minAvailable: int
    maxRetry: int
    tasks: list[VolcanoTask]


class VolcanoJobManifest(TypedDict):
    """A ``batch.volcano.sh/v1alpha1`` Job."""

    apiVersion: Literal["batch.volcano.sh/v1alpha1"]
    kind: Literal["Job"]
    metadata: ObjectMeta
    spec: VolcanoJobSpec


Workload = PodManifest | JobManifest | VolcanoJobManifest
"""A workload manifest of ``target.submit_as`` (:func:`.scheduling.manifest`): told apart by ``apiVersion``."""


class ServicePort(TypedDict, total=False):
    """A Service's ``ports[]`` entry (``targetPort``: a number or a container port's name)."""

    name: str
    port: Required[int]
    targetPort: int | str
    protocol: str


class ServiceSpec(TypedDict, total=False):
    """A ``core/v1`` ServiceSpec: ``selector`` and ``ports`` (``clusterIP: None`` makes it headless)."""

    selector: Required[dict[str, str]]
    ports: Required[list[ServicePort]]
    clusterIP: str
    publishNotReadyAddresses: bool


class ServiceManifest(TypedDict):
    """A ``core/v1`` Service the gate creates."""

    apiVersion: Literal["v1"]
    kind: Literal["Service"]
    metadata: ObjectMeta
    spec: ServiceSpec


class ConfigMapManifest(TypedDict):
    """A ``core/v1`` ConfigMap of files (``binaryData``: file name → base64 of its bytes)."""

    apiVersion: Literal["v1"]
    kind: Literal["ConfigMap"]
    metadata: ObjectMeta
    binaryData: dict[str, str]


class SecretManifest(TypedDict):
    """A ``core/v1`` Secret of ``stringData``."""

    apiVersion: Literal["v1"]
    kind: Literal["Secret"]
    metadata: ObjectMeta
    type: str
    stringData: dict[str, str]


class LabelSelector(TypedDict):
    """A Deployment's ``selector`` (``matchLabels`` only)."""

    matchLabels: dict[str, str]


class DeploymentSpec(TypedDict):
    """An ``apps/v1`` DeploymentSpec as the gate writes it."""

    replicas: int
    revisionHistoryLimit: int
    selector: LabelSelector
    template: PodTemplateSpec


class DeploymentManifest(TypedDict):
    """An ``apps/v1`` Deployment the gate creates."""

    apiVersion: Literal["apps/v1"]
    kind: Literal["Deployment"]
    metadata: ObjectMeta
    spec: DeploymentSpec


Serving = SecretManifest | DeploymentManifest | ServiceManifest
"""An object of a served model (:func:`.serving.manifests`)."""


class ConditionJSON(TypedDict, total=False):
    """A ``status.conditions[]`` entry of a Pod or Node (or a Kueue Workload, a Volcano PodGroup) as served:
    ``type`` and ``status`` always, the rest when set (``observedGeneration``: a ``metav1.Condition``'s, as a
    Workload's; with it every field of ``metav1.Condition`` is declared, so a Workload's conditions read into
    this shape keep all they were served with)."""

    type: Required[str]
    status: Required[str]
    reason: str
    message: str
    lastTransitionTime: str
    lastHeartbeatTime: str
    observedGeneration: int


class WaitingState(TypedDict, total=False):
    """``state.waiting`` of a container status: ``reason`` (``ErrImagePull``…) and ``message``."""

    reason: str
    message: str


class RunningState(TypedDict, total=False):
    """``state.running`` of a container status: ``startedAt``."""

    startedAt: str


class TerminatedState(TypedDict, total=False):
    """``state.terminated`` (or ``lastState.terminated``) of a container status: ``exitCode`` always, the rest
    when set (the times are null in the API's JSON when unset, and absent in a pod the official client
    decoded and re-serialised: :mod:`.startup` reads one so)."""

    reason: str
    exitCode: Required[int]
    message: str
    startedAt: str
    finishedAt: str


class ContainerState(TypedDict, total=False):
    """``state``/``lastState`` of a container status: at most one of ``waiting``, ``running``, ``terminated``."""

    waiting: WaitingState
    running: RunningState
    terminated: TerminatedState


class ContainerStatusJSON(TypedDict):
    """A ``status.containerStatuses[]`` entry as served (every field always: ``imageID`` is ``""`` before the
    image is pulled, ``state``/``lastState`` ``{}`` when there is none)."""

    name: str
    image: str
    imageID: str
    restartCount: int
    ready: bool
    state: ContainerState
    lastState: ContainerState


class PodStatus(TypedDict, total=False):
    """A served Pod's ``status`` (the fields the gate reads; every one may be absent)."""

    phase: str
    podIP: str
    reason: str
    message: str
    conditions: list[ConditionJSON]
    containerStatuses: list[ContainerStatusJSON]


class ServedPod(TypedDict, total=False):
    """A ``core/v1`` Pod as the apiserver serves it (a LIST item, a watch event's object): ``metadata``
    (with name and namespace), ``spec`` and ``status`` (``{}`` before the kubelet reports), all always served;
    ``deleted``: set by :mod:`.watch` on a pod it saw deleted. A pod the run never saw is
    :func:`.objects.unseen_pod`. Read it through :func:`.objects.parse_pod`."""

    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[PodSpec]
    status: Required[PodStatus]
    deleted: bool


class NodeSpec(TypedDict, total=False):
    """A served Node's ``spec``: its ``taints`` and whether it is cordoned (``unschedulable``)."""

    taints: list[Taint]
    unschedulable: bool


class NodeStatus(TypedDict, total=False):
    """A served Node's ``status``: ``conditions``, ``capacity`` and ``allocatable`` (name → quantity)."""

    conditions: list[ConditionJSON]
    capacity: dict[str, str]
    allocatable: dict[str, str]


class ListedNode(TypedDict, total=False):
    """A ``core/v1`` Node as a LIST, GET or watch event answers it: ``metadata``, ``spec`` and ``status`` always
    (the apiserver serves an unset struct as ``{}``). Read it through :func:`.objects.parse_node` (its Ready
    condition: :func:`.nodes.ready_condition`)."""

    apiVersion: str
    kind: str
    metadata: Required[ObjectMeta]
    spec: Required[NodeSpec]
    status: Required[NodeStatus]


class EventSource(TypedDict, total=False):
    """An Event's ``source``: the reporting ``component`` and the ``host`` (a kubelet's node)."""

    component: str
    host: str


class ObjectReference(TypedDict, total=False):
    """An Event's ``involvedObject``: ``kind``, ``name``, ``namespace``, ``uid``."""

    kind: str
    name: str
    namespace: str
    uid: str


class EventJSON(TypedDict, total=False):
    """A ``core/v1`` Event as served: ``type`` (``Normal``/``Warning``), ``reason``, ``message``, ``count``,
    its times (``firstTimestamp``/``lastTimestamp`` whole seconds, ``eventTime`` microseconds; each always
    served, null when unset), ``source`` (always served, ``{}`` when unset), ``reportingComponent``,
    ``involvedObject``. Read it through :func:`.objects.parse_event`."""

    metadata: ObjectMeta
    type: str
    reason: str
    message: str
    count: int
    firstTimestamp: Required[str | None]
    lastTimestamp: Required[str | None]
    eventTime: Required[str | None]
    source: Required[EventSource]
    reportingComponent: str
    involvedObject: ObjectReference


class PriorityClassRef(TypedDict, total=False):
    """A Kueue v1beta2 Workload's ``spec.priorityClassRef``: ``group``, ``kind`` (``PriorityClass`` or
    ``WorkloadPriorityClass``), ``name``."""

    group: str
    kind: str
    name: str


class WorkloadSpec(TypedDict, total=False):
    """A Kueue Workload's ``spec``: ``queueName``, ``priority``, and its priority class (v1beta2
    ``priorityClassRef``; v1beta1 ``priorityClassName``/``priorityClassSource``)."""

    queueName: str
    priority: int
    priorityClassRef: PriorityClassRef
    priorityClassName: str
    priorityClassSource: str


class PodSetAssignmentJSON(TypedDict, total=False):
    """A ``status.admission.podSetAssignments[]`` entry: ``name`` (required by Kueue's API), ``count``,
    ``flavors`` (resource → flavor), ``resourceUsage`` (resource → quantity)."""

    name: Required[str]
    count: int
    flavors: dict[str, str]
    resourceUsage: dict[str, str]


class Admission(TypedDict):
    """A Kueue Workload's ``status.admission``: the ``clusterQueue`` and the ``podSetAssignments`` (both
    required by Kueue's API)."""

    clusterQueue: str
    podSetAssignments: list[PodSetAssignmentJSON]


class WorkloadStatus(TypedDict, total=False):
    """A Kueue Workload's ``status``: ``conditions`` (QuotaReserved, Admitted, Evicted…) and ``admission``."""

    conditions: list[ConditionJSON]
    admission: Admission


class ServedWorkload(TypedDict, total=False):
    """A Kueue Workload (``kueue.x-k8s.io`` v1beta2 or v1beta1) as served; read it through
    :func:`.queues.parse_workload`; ``kind`` and ``metadata`` always (the API serves them on every object)."""

    apiVersion: str
    kind: Required[str]
    metadata: Required[ObjectMeta]
    spec: WorkloadSpec
    status: WorkloadStatus


class PodGroupStatus(TypedDict, total=False):
    """A Volcano PodGroup's ``status``: its ``phase`` and ``conditions`` (Unschedulable…)."""

    phase: str
    conditions: list[ConditionJSON]


class ServedPodGroup(TypedDict, total=False):
    """A Volcano PodGroup (``scheduling.volcano.sh/v1beta1``) as served: what the gate reads of it (the
    rest, for :func:`pytest_hetero.pending.explain`, stays in the object); ``kind`` and ``metadata`` always (the
    API serves them on every object, a custom resource's LIST items included)."""

    apiVersion: str
    kind: Required[str]
    metadata: Required[ObjectMeta]
    status: PodGroupStatus


QueueObject = ServedWorkload | ServedPodGroup
"""What a queue made of a Job: Kueue's Workload or Volcano's PodGroup."""


class LocalQueueSpec(TypedDict, total=False):
    """A Kueue LocalQueue's ``spec``: the ``clusterQueue`` it points at."""

    clusterQueue: str


class FlavorResourceUsage(TypedDict, total=False):
    """A ``resources[]`` entry of a queue's flavor usage: the resource ``name`` and its ``total`` (a quantity;
    both always served: Kueue's API requires the name and writes a zero total as ``"0"``)."""

    name: Required[str]
    total: Required[str]
    borrowed: str


class FlavorUsage(TypedDict):
    """A ``flavorsUsage[]``/``flavorsReservation[]`` entry of a queue's status: the flavor ``name`` and its
    ``resources`` (both required by Kueue's API; the list is not ``omitempty`` there, so a nil one is served
    null)."""

    name: str
    resources: list[FlavorResourceUsage] | None


class QueueStatus(TypedDict, total=False):
    """A Kueue ClusterQueue's or LocalQueue's ``status``: ``flavorsUsage`` (a LocalQueue of Kueue before
    v0.9: ``flavorUsage``), ``flavorsReservation``, ``admittedWorkloads``, ``reservingWorkloads``,
    ``pendingWorkloads``."""

    flavorsUsage: list[FlavorUsage]
    flavorUsage: list[FlavorUsage]
    flavorsReservation: list[FlavorUsage]
    admittedWorkloads: int
    reservingWorkloads: int
    pendingWorkloads: int


class ServedLocalQueue(TypedDict, total=False):
    """A Kueue LocalQueue as served."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    spec: LocalQueueSpec
    status: QueueStatus


class ServedClusterQueue(TypedDict, total=False):
    """A Kueue ClusterQueue as served (its ``status`` only is read)."""

    apiVersion: str
    kind: str
    metadata: ObjectMeta
    status: QueueStatus


class PortJSON(TypedDict, total=False):
    """A ``ports[]`` entry of a served Service or EndpointSlice: ``name``, ``protocol`` (TCP when absent),
    ``port`` (absent in a slice: every port), a Service's ``targetPort``."""

    name: str
    protocol: str
    port: int
    targetPort: int | str


class ServedServiceSpec(TypedDict, total=False):
    """A served Service's ``spec``: ``clusterIP`` (``None`` for a headless one) and ``ports``."""

    clusterIP: str
    ports: list[PortJSON]


class ServedService(TypedDict):
    """A ``core/v1`` Service as served (``metadata`` with its name, and ``spec``, always served)."""

    metadata: ObjectMeta
    spec: ServedServiceSpec


class EndpointConditions(TypedDict, total=False):
    """An endpoint's ``conditions``: ``ready`` (absent: unknown, which counts as ready)."""

    ready: bool
    serving: bool
    terminating: bool


class EndpointJSON(TypedDict, total=False):
    """An ``endpoints[]`` entry of an EndpointSlice: ``addresses`` and ``conditions`` (always served),
    ``hostname``, ``targetRef``."""

    addresses: Required[list[str]]
    conditions: Required[EndpointConditions]
    hostname: str
    targetRef: ObjectReference


class ServedEndpointSlice(TypedDict, total=False):
    """A ``discovery.k8s.io/v1`` EndpointSlice as served: ``ports`` and ``endpoints`` (always served; null when
    the slice has none)."""

    metadata: ObjectMeta
    ports: Required[list[PortJSON] | None]
    endpoints: Required[list[EndpointJSON] | None]


class SelectorRequirement(TypedDict, total=False):
    """A ``matchExpressions[]`` entry of a LabelSelector: ``key`` and ``operator`` (both required by the API),
    ``values``."""

    key: Required[str]
    operator: Required[str]
    values: list[str]


class LabelSelectorJSON(TypedDict, total=False):
    """A LabelSelector: ``matchLabels`` and ``matchExpressions`` (both absent: everything)."""

    matchLabels: dict[str, str]
    matchExpressions: list[SelectorRequirement]


class PolicyPortJSON(TypedDict, total=False):
    """A NetworkPolicy rule's ``ports[]`` entry: ``protocol``, ``port`` (a number or a named port),
    ``endPort``."""

    protocol: str
    port: int | str
    endPort: int


class PolicyPeer(TypedDict, total=False):
    """A ``from[]``/``to[]`` entry of a NetworkPolicy rule (selectors or an ``ipBlock``; never read field by
    field: a rule with peers admits only them)."""

    podSelector: LabelSelectorJSON
    namespaceSelector: LabelSelectorJSON
    ipBlock: dict[str, object]


PolicyRuleJSON = TypedDict("PolicyRuleJSON", {"from": list[PolicyPeer], "to": list[PolicyPeer],
                                              "ports": list[PolicyPortJSON]}, total=False)
"""An ``ingress[]`` (``from``, ``ports``) or ``egress[]`` (``to``, ``ports``) rule of a NetworkPolicy."""


class NetworkPolicySpec(TypedDict, total=False):
    """A NetworkPolicy's ``spec``: ``podSelector`` (always served; ``{}`` selects every pod), ``policyTypes``,
    ``ingress`` and ``egress`` rules."""

    podSelector: Required[LabelSelectorJSON]
    policyTypes: list[str]
    ingress: list[PolicyRuleJSON]
    egress: list[PolicyRuleJSON]


class ServedNetworkPolicy(TypedDict):
    """A ``networking.k8s.io/v1`` NetworkPolicy as served (``metadata`` name and namespace always set; ``spec``
    always served)."""

    metadata: ObjectMeta
    spec: NetworkPolicySpec


class ClaimSpec(TypedDict, total=False):
    """A PersistentVolumeClaim's ``spec``: ``volumeName``, ``accessModes``, ``storageClassName`` (``""``:
    no class), ``resources.requests`` (``resources`` always: the gate writes it, the apiserver serves it)."""

    volumeName: str
    accessModes: list[str]
    storageClassName: str
    resources: Required[ResourceRequirements]


class ClaimStatus(TypedDict, total=False):
    """A PersistentVolumeClaim's ``status``: its ``phase`` (Pending, Bound, Lost)."""

    phase: str


class ClaimManifest(TypedDict):
    """A ``core/v1`` PersistentVolumeClaim the gate creates."""

    apiVersion: Literal["v1"]
    kind: Literal["PersistentVolumeClaim"]
    metadata: ObjectMeta
    spec: ClaimSpec


class ServedClaim(TypedDict):
    """A PersistentVolumeClaim as served (``metadata``, ``spec`` and ``status`` always served)."""

    metadata: ObjectMeta
    spec: ClaimSpec
    status: ClaimStatus


class ServedTemplate(TypedDict, total=False):
    """A pod ``template`` as served (a controller's): the pods' ``metadata`` and ``spec`` (always served)."""

    metadata: TemplateMeta
    spec: Required[PodSpec]


class DaemonSetSpec(TypedDict):
    """An ``apps/v1`` DaemonSet's ``spec``: its pod ``template`` (required by the API)."""

    template: ServedTemplate


class ServedDaemonSet(TypedDict):
    """An ``apps/v1`` DaemonSet as served (``metadata`` and ``spec`` always)."""

    metadata: ObjectMeta
    spec: DaemonSetSpec


class ListMeta(TypedDict, total=False):
    """A LIST answer's ``metadata``: the ``resourceVersion`` it was read at (a watch starts from it; the
    apiserver always sets it). The ``*List`` answers always hold ``metadata`` and ``items`` (``[]`` when
    nothing matched)."""

    resourceVersion: Required[str]


class WatchedObject(TypedDict, total=False):
    """The ``object`` of a watch event, as far as the watch itself reads it: an object's ``metadata`` (a
    ``BOOKMARK``'s carries only its ``resourceVersion``), an ``ERROR``'s Status ``code`` (410: too old)."""

    metadata: ObjectMeta
    code: int


class WatchEvent(TypedDict):
    """One line of a watch stream (``metav1.WatchEvent``): ``type`` (``ADDED``, ``MODIFIED``, ``DELETED``,
    ``BOOKMARK``, ``ERROR``) and ``object`` (both always sent)."""

    type: str
    object: WatchedObject


ItemT = TypeVar("ItemT")


class ObjectList(TypedDict, Generic[ItemT], total=False):
    """A LIST answer of any kind (a custom resource's too): its ``items`` (always served) and ``metadata``."""

    metadata: Required[ListMeta]
    items: Required[list[ItemT]]


class PodList(TypedDict, total=False):
    """``GET …/pods``: the ``items`` (:class:`ServedPod`) and the list's ``metadata``."""

    metadata: ListMeta
    items: Required[list[ServedPod]]


class NodeList(TypedDict, total=False):
    """``GET /api/v1/nodes``: the ``items`` (:class:`ListedNode`) and the list's ``metadata``."""

    metadata: Required[ListMeta]
    items: Required[list[ListedNode]]


class EventList(TypedDict, total=False):
    """``GET …/events``: the ``items`` (:class:`EventJSON`)."""

    metadata: ListMeta
    items: Required[list[EventJSON]]


class EndpointSliceList(TypedDict, total=False):
    """``GET …/endpointslices``: the ``items`` (:class:`ServedEndpointSlice`)."""

    metadata: ListMeta
    items: Required[list[ServedEndpointSlice]]


class ServiceList(TypedDict, total=False):
    """``GET …/services``: the ``items`` (:class:`ServedService`)."""

    metadata: ListMeta
    items: Required[list[ServedService]]


class NetworkPolicyList(TypedDict, total=False):
    """``GET …/networkpolicies``: the ``items`` (:class:`ServedNetworkPolicy`)."""

    metadata: ListMeta
    items: Required[list[ServedNetworkPolicy]]


class ClaimList(TypedDict, total=False):
    """``GET …/persistentvolumeclaims``: the ``items`` (:class:`ServedClaim`)."""

    metadata: ListMeta
    items: Required[list[ServedClaim]]


class StatusCause(TypedDict, total=False):
    """A ``details.causes[]`` entry of a ``metav1.Status``: ``reason`` (an exec's ``ExitCode``), ``message``
    (its exit code as text), ``field``."""

    reason: str
    message: str
    field: str


class StatusDetails(TypedDict, total=False):
    """A ``metav1.Status``'s ``details``: the ``kind`` (a 404's resource: ``pods``, ``namespaces``…), ``name``
    and ``causes``."""

    kind: str
    name: str
    causes: list[StatusCause]


class StatusJSON(TypedDict, total=False):
    """A ``metav1.Status`` as the apiserver answers a refused call (an ApiException's body) or an exec's error
    channel sends it: ``status`` (``Success``/``Failure``), ``message``, ``reason``, ``code``, ``details``; every
    field optional. Read it through :func:`.objects.parse_status`."""

    status: str
    message: str
    reason: str
    code: int
    details: StatusDetails
