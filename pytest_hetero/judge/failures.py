"""The failure table: every failure category → the owner category that acts on it, and the status.

Engines (``backends/``), field-text readers (``pending/``) and layer checks (``layers/``) report a
failure *category* and the facts behind it; none of them names an owner. This table alone decides
who owns each category, so the same fact gets the same owner on every engine and in every rendering
(evidence, terminal, pytest-html, JUnit, CTRF). The matrix's ``spec.owners`` then turns the owner
category into a team name (:meth:`pytest_hetero.matrix.model.Matrix.team`).

``owner`` is an :data:`~pytest_hetero.vocab.OwnerCategory`, or ``"image"``: the owner of the images
on this target (``spec.target.image_owner``, ``platform`` by default, ``algorithm`` when the model
team ships its images). There is no ``matrix-author``: the matrix (resources with their selectors,
tolerations and requests) is the platform's description of its pools, and the gate — not a workload
owner — builds every pod spec from it, so a spec the cluster refuses is the platform's.

``status`` is what the item's evidence says: ``failed`` (the claim is false) or ``error`` (nothing
was proven either way: the harness, an infrastructure call, or an input that cannot be evaluated
broke). ``error_in`` names the layers where the row's fact cuts the layer off instead of falsifying its
claim: a node that is NotReady falsifies discovery's and scheduling's claims about its pool (``failed``),
but a node lost under startup or a model run leaves those layers unproven (``error``), on every engine.
``source`` names where the category is emitted; ``why`` is the reason of the owner.
``docs/failure-owners.md`` is generated from this table (``python -m pytest_hetero.judge.failures``)
and a test keeps the two equal.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final, Literal

from pytest_hetero.vocab import Layer, OwnerCategory

OwnerRole = Literal["platform", "infrastructure", "algorithm", "business", "image"]
"""An owner category, or ``image``: the target's image owner (``spec.target.image_owner``)."""
FailureStatus = Literal["failed", "error"]
"""The status a failure gives its item."""


@dataclass(frozen=True)
class Entry:
    """One row of the table: ``owner`` and ``status`` of a category, ``why`` that owner, ``source``
    the code that reports it; ``error_in`` the layers where the category is ``error`` whatever ``status``
    says (the fact stopped the layer from proving anything)."""

    owner: OwnerRole
    status: FailureStatus
    why: str
    source: str
    error_in: tuple[Layer, ...] = ()

    def status_in(self, layer: Layer | None) -> FailureStatus:
        """The status of this category in ``layer`` (None: the row's ``status``)."""
        return "error" if layer in self.error_in else self.status


P: Final = "platform"
INF: Final = "infrastructure"
A: Final = "algorithm"
B: Final = "business"
IMG: Final = "image"
F: Final = "failed"
E: Final = "error"

_PENDING = "pending/ (Kubernetes scheduler, admission, Kueue, Volcano, HAMi, kubelet)"
_DOCKER = "backends/docker"
_KUBE = "backends/kubernetes"
_LOCAL = "backends/local"
_ALL = "every engine"
_FIELD = "explain/ (hetero explain): "
_SPEC = "the gate builds this from the matrix's resource entry, the platform's description of its pool"


Row = tuple[OwnerRole, FailureStatus, str, str] | tuple[OwnerRole, FailureStatus, str, str, tuple[Layer, ...]]
"""A row as written below: owner, status, why, source[, error_in]."""


def _alike(owner: OwnerRole, status: FailureStatus, why: str, source: str, *categories: str) -> dict[str, Row]:
    """One row for each of ``categories`` that share owner, status, reason and source (e.g. every pod-spec
    refusal the gate builds from the pool's entry)."""
    return dict.fromkeys(categories, (owner, status, why, source))


def _rows() -> dict[str, Entry]:
    rows: dict[str, Row] = {
        # --- discovery -------------------------------------------------------------------------------
        "no_nodes": (INF, F, "no node offers the resource: capacity is the infrastructure's", _PENDING + ", discovery"),
        "node_not_ready": (INF, F, "a NotReady or unreachable node is a node fault; one lost under startup or a "
                                   "model run (the node watch) leaves that layer unproven: error there",
                           _PENDING + ", discovery, " + _KUBE + " (node watch)", ("startup", "model")),
        "node_unschedulable": (INF, F, "a cordoned node is the node operators'", _PENDING + ", discovery"),
        "node_condition": (INF, F, "a problem condition (pressure, hardware) set on the node", "discovery"),
        "lifecycle_taint": (INF, F, "a node.kubernetes.io/* taint stands for a node fault (pressure, outage)",
                            "discovery"),
        "untolerated_taint": (P, F, "the platform taints its nodes and declares the tolerations of its pools; "
                                    "the two disagree (same owner in discovery and scheduling)",
                              _PENDING + ", discovery"),
        "resource_not_advertised": (INF, F, "no node advertises the extended resource: device plugin or driver",
                                    _PENDING + ", discovery"),
        "allocatable_below_capacity": (INF, F, "devices advertised but not allocatable: unhealthy or held",
                                       "discovery"),
        "label_contract_broken": (INF, F, "GFD / node-feature labels the pool is selected by are missing or wrong",
                                  "discovery"),
        "expectation_mismatch": (INF, F, "the hardware differs from what the matrix expects of it", "discovery"),
        "driver_missing": (INF, F, "the host's or container's driver cannot be used", "discovery, startup payload"),
        "device_unhealthy": (INF, F, "the vendor tool reports devices unhealthy (Xid, ECC, health)",
                             "discovery, " + _PENDING + " (probe_failed cause)"),
        "device_missing": (INF, F, "device nodes absent on the host or in the container",
                           _DOCKER + ", discovery, startup payload"),
        "insufficient_capacity": (INF, F, "the engine host has less capacity than requested", "discovery"),
        # --- scheduling ------------------------------------------------------------------------------
        "insufficient_resource": (INF, F, "nodes lack free capacity of the resource", _PENDING),
        "too_many_pods": (INF, F, "nodes are at their pod limit", _PENDING),
        "unschedulable_unexplained": (P, F, "no node fits and the scheduler printed no reason (Kubernetes <= 1.4 "
                                            "'failed to fit in any node'): the platform operates the scheduler; a "
                                            "field text says undetermined", _PENDING),
        **_alike(P, F, _SPEC, _PENDING, "node_selector_mismatch", "node_affinity_mismatch", "node_name_mismatch",
                 "pod_affinity", "topology_spread", "port_conflict", "quota_requires_limits", "limitrange_violation",
                 "podsecurity_violation", "device_type_mismatch"),
        "node_pressure": (INF, F, "memory / disk / PID pressure on nodes", _PENDING),
        "volume_binding": (P, F, "storage classes and volumes are the platform's", _PENDING),
        "scheduling_gated": (P, F, "scheduling gates are set by platform controllers", _PENDING),
        "device_claim_unallocatable": (INF, F, "DRA claims the devices cannot satisfy", _PENDING),
        **_alike(P, F, "priority classes and preemption policy are the platform's", _PENDING,
                 "preemption_no_victims", "preemption_not_helpful"),
        "quota_exceeded": (P, F, "ResourceQuota is set by the platform", _PENDING),
        "forbidden_rbac": (P, F, "RBAC is the platform's", _PENDING),
        "webhook_denied": (P, F, "admission webhooks are the platform's policy", _PENDING),
        "webhook_unavailable": (P, F, "admission webhooks are the platform's", _PENDING),
        **_alike(P, F, "Kueue / Volcano queues and their quota are the platform's", _PENDING,
                 "queue_quota_insufficient", "queue_request_exceeds_max"),
        "queue_resource_not_covered": (P, F, "the queue has no flavor for the resource", _PENDING),
        "queue_flavor_mismatch": (P, F, "flavor labels/taints and the pool's spec are both the platform's",
                                  _PENDING),
        **_alike(P, F, "queue objects are the platform's", _PENDING, "queue_inactive", "queue_not_found",
                 "queue_namespace_mismatch"),
        "admission_check_failed": (P, F, "Kueue AdmissionChecks are the platform's", _PENDING),
        "queue_topology_unfit": (P, F, "topology-aware queues are the platform's", _PENDING),
        "queue_admission_blocked": (P, F, "queue admission policy is the platform's", _PENDING),
        "workload_evicted": (P, F, "the queue evicted or preempted the admitted workload", _PENDING),
        "queue_status_update_failed": (P, F, "the queue controller cannot write status", _PENDING),
        "gang_unschedulable": (INF, F, "not all gang members fit at once: capacity", _PENDING),
        "queue_rule_mismatch": (P, F, "a task type's job was admitted in another LocalQueue / ClusterQueue / priority "
                                      "class than spec.task_queues binds it to: queue objects and their defaulting "
                                      "are the platform's", "scheduling (task type)"),
        "queue_wait_exceeded": (P, F, "a task type's job waited longer than its max_wait from submission to "
                                      "admission: queue quota and fair sharing are the platform's",
                                "scheduling (task type)"),
        "gang_rendezvous_failed": (P, F, "the pods of an admitted multi-pod job could not reach each other through "
                                         "their headless Service's addresses: the pod network is the platform's",
                                   "scheduling (task type), " + _KUBE),
        **_alike(INF, F, "device capacity (HAMi)", _PENDING, "device_memory_insufficient", "device_cores_insufficient",
                 "device_count_insufficient", "device_unfit"),
        "device_numa_unfit": (INF, F, "device topology (HAMi)", _PENDING),
        "device_allocation_failed": (INF, F, "kubelet / device plugin failed to allocate devices", _PENDING),
        "device_node_unregistered": (P, F, "HAMi has no registered devices for the node", _PENDING),
        # --- pending/: causes a reader names behind a code (Reason.cause); owners looked up here ----------
        "command_not_found": (IMG, F, "the program the container's command runs is not in the image (kubelet "
                                      "StartError / RunContainerError: executable file not found): an image defect; "
                                      "at startup it is the gate's shell, as Docker's interpreter_missing",
                              _PENDING + " (container_start_error cause)"),
        "unknown": (P, F, "a refusal nobody can read yet: the platform operates the cluster", _PENDING),
        "scheduling_timeout": (P, F, "not placed in time and nothing says why", "scheduling, governance"),
        "request_untranslatable": (P, F, "the engine cannot express the pool's request", "scheduling"),
        "insufficient_devices": (INF, F, "fewer devices than the resource requests", "scheduling"),
        "allocation_mismatch": (P, F, "the engine stored other limits than the gate requested", "scheduling"),
        "bad_request": (P, F, "the engine refused the container's resource request", _DOCKER),
        "resource_rejected": (P, F, "the engine refused the requested cpus / memory", _DOCKER),
        # --- startup: images ---------------------------------------------------------------------------
        "image_not_found": (IMG, F, "the image reference names nothing: the image's owner", _ALL + " (pull)"),
        "pull_denied": (IMG, F, "registry credentials for the image are its owner's", _ALL + " (pull)"),
        "image_pull_failed": (IMG, F, "the image could not be pulled for a reason no rule names", _KUBE),
        "registry_unreachable": (INF, F, "the registry cannot be reached: network", _ALL + " (pull)"),
        "image_digest_mismatch": (IMG, F, "the image running is not the digest the matrix declares", "startup"),
        "interpreter_missing": (IMG, F, "the image lacks the interpreter the models' entrypoints run ({python}): "
                                        "an image defect", _ALL + ", startup"),
        "payload_failed": (IMG, F, "the device payload could not run in the image", "startup"),
        "container_exited": (IMG, F, "the image's container does not stay up", _ALL),
        "crash_loop": (IMG, F, "the image's container keeps exiting and nothing more specific is known",
                       _PENDING),
        "container_exit_nonzero": (IMG, F, "the image's container exited non-zero", _PENDING),
        "probe_failed": (IMG, F, "a probe of the image's container failed", _PENDING),
        "startup_oom_killed": (P, F, "OOM-killed while starting, before any model code ran: the memory limit "
                                     "of the pool vs the image", _DOCKER + ", " + _KUBE),
        "startup_timeout": (P, F, "the pod did not start in time and nothing says why", _KUBE),
        "container_config_error": (P, F, "a Secret / ConfigMap the container needs", _PENDING),
        "container_start_error": (INF, F, "the runtime could not start the container", _PENDING),
        "device_runtime_error": (INF, F, "the NVIDIA/Ascend container runtime or driver failed (also behind a "
                                       "crash loop)", _PENDING),
        "runtime_missing": (INF, F, "the engine has no such OCI runtime", _DOCKER),
        "device_driver_missing": (INF, F, "the engine cannot select a device driver", _DOCKER),
        "oci_runtime_error": (INF, F, "runc / containerd shim failed", _DOCKER),
        "mount_failed": (P, F, "bind mounts are the platform's configuration", _DOCKER),
        "container_removed": (INF, F, "the container disappeared under the run", _DOCKER + ", " + _KUBE),
        "container_killed": (INF, F, "the container was killed by a signal from outside the run", _ALL),
        "container_stopped_by_run": (A, F, "the model run signalled the container's PID 1 (it exits 0 through its "
                                           "trap only then)", _DOCKER),
        "device_not_visible": (INF, F, "the runtime did not expose the allocated devices", "startup payload"),
        "runtime_broken": (INF, F, "the vendor tool fails inside the container", "startup payload"),
        "devices_over_allocated": (INF, F, "more devices visible than allocated: isolation", "startup"),
        "device_inventory_mismatch": (INF, F, "devices visible differ from those allocated", "startup"),
        "framework_missing": (A, F, "the models' framework (ONNX Runtime) is the model team's dependency",
                              "startup"),
        "framework_without_accelerator": (A, F, "a framework build without the accelerator's provider",
                                          "startup, startup payload"),
        "start_timeout": (P, F, "the environment did not answer in time", _LOCAL),
        "start_failed": (P, F, "the environment could not be started", _LOCAL),
        "spawn_failed": (P, F, "the sandboxed process could not be spawned", _LOCAL),
        "sandbox_setup_failed": (INF, E, "the sandbox could not be set up", _LOCAL),
        "sandbox_lost": (INF, E, "the sandbox went away during the run", _LOCAL),
        "engine_error": (P, E, "the engine answered something no rule explains", _DOCKER),
        "engine_unreachable": (INF, E, "the container engine does not answer", _DOCKER),
        "engine_restarted": (INF, E, "the container engine restarted during the run", _DOCKER),
        "bad_target": (P, E, "spec.target is the platform's configuration", _DOCKER + ", " + _KUBE),
        "namespace_not_found": (P, E, "the run's namespace is the platform's", _KUBE),
        "pod_deleted": (INF, E, "the pod was deleted under the run", _KUBE),
        "api_not_served": (P, E, "the apiserver does not serve an API the target needs", _KUBE),
        "api_rejected": (P, E, "the apiserver rejected the gate's object", _KUBE),
        "apiserver_error": (INF, E, "the apiserver failed", _KUBE),
        "apiserver_unreachable": (INF, E, "the apiserver does not answer", _KUBE),
        "unauthorized": (P, E, "the gate's credentials are the platform's", _KUBE),
        "exec_stream_lost": (INF, E, "the exec stream to the pod broke", _KUBE),
        "tenant_unusable": (P, E, "a tenant namespace the matrix names cannot be used", _KUBE),
        "inputs_copy_failed": (P, E, "model inputs could not be copied into the pod", _KUBE),
        "serving_object_exists": (P, E, "a serving object of another run is in the way", _KUBE),
        "configuration": (P, E, "the target's or matrix's configuration is wrong", "every layer"),
        "rollout_not_complete": (P, F, "the serving Deployment the run deployed did not become ready in its timeout "
                                 "(the kubelet's reason is in the message)", _KUBE),
        # --- model run ------------------------------------------------------------------------------------
        "entrypoint_missing": (A, F, "the model's own program is missing from the image or code folder",
                               _ALL + " (model run)"),
        "bad_entrypoint": (A, F, "the model's entrypoint has an unknown placeholder", "backends/protocol"),
        "oom_killed": (A, F, "the model's run exceeded the memory limit", _ALL + " (model run)"),
        "timeout": (A, F, "the model's run exceeded the layer timeout", "model"),
        "nonzero_exit": (A, F, "the model's entrypoint exited non-zero", "model"),
        "run_status_unreadable": (A, F, "the model run wrote over its exit status file (the gate's wrapper writes an "
                                        "integer there; nothing else but the run can), or ended the gate's check of it "
                                        "in the pod", _KUBE),
        "no_outputs": (A, F, "the model's entrypoint wrote no outputs file", "model"),
        "bad_outputs": (A, F, "the outputs file is not one JSON object", "model"),
        "outputs_too_large": (A, F, "the model wrote more outputs than the limit", _KUBE),
        "outputs_changed": (A, F, "a process the model run left wrote its outputs file while the gate read it after "
                                  "the run's end", _KUBE),
        "container_not_reset": (INF, E, "the container could not be reset between model runs", _DOCKER),
        "file_missing": (A, F, "the model's / dataset's declared files are theirs", "startup (files)"),
        "digest_mismatch": (A, F, "the model's / dataset's files differ from their declared digests",
                            "startup (files)"),
        "wrong_model": (A, F, "the service serves another model", "serving"),
        "wrong_model_version": (A, F, "the service reports another version", "serving"),
        "bad_dataset": (A, F, "the served model's dataset cannot be sent", "serving"),
        "bad_responses": (A, F, "the service's answers cannot be read", "serving"),
        "service_errors": (P, F, "no request succeeded: the serving platform answered with errors", "serving"),
        "endpoint_unreachable": (INF, F, "no HTTP answer from the service", "serving"),
        "endpoint_not_ready": (P, F, "the inference service never became ready", "serving"),
        "auth_token_missing": (P, F, "the serving credentials are the platform's", "serving"),
        "auth_refused": (P, F, "the service refused the gate's credentials", "serving"),
        "auth_not_enforced": (P, F, "the service answers without authentication", "serving"),
        "protocol_unknown": (P, E, "the serving protocol named is not known", "serving"),
        "rollback_unreachable": (INF, F, "the rolled-back service does not answer", "serving"),
        "rollback_wrong_version": (A, F, "the rolled-back service reports another version", "serving"),
        "rollback_answers_wrong": (A, F, "the rolled-back model answers wrongly", "serving"),
        # --- business -----------------------------------------------------------------------------------
        "acceptance_failed": (B, F, "the outputs miss the business's acceptance bounds", "business"),
        "served_answers_wrong": (A, F, "a served model's answers (metric, golden) are wrong: the model's", "business"),
        "no_rules": (B, E, "the dataset has no acceptance rules: nothing can be evaluated, the rules are the "
                           "business's", "business"),
        "bad_rules": (B, E, "the acceptance-rules file cannot be read: nothing was evaluated, so never a "
                            "business failure; the file is the business's", "business"),
        "rules_error": (B, E, "a rule names a metric the outputs have under a close name (a typo in the rules)",
                        "business"),
        "outputs_missing_metric": (A, E, "the outputs lack a metric a rule reads", "business"),
        "outputs_invalid": (A, E, "an outputs value a rule reads is null, not numeric or inconsistent",
                            "business"),
        "outputs_unavailable": (P, E, "the model item's outputs cannot be read back by the gate", "business"),
        "predictions_unmatched": (A, F, "the predictions do not meet the dataset's truth one to one (ids missing, "
                                        "repeated or unknown)", "business"),
        "no_truth": (B, E, "a rule judges a metric only the dataset's truth gives, and the dataset declares none",
                     "business"),
        "truth_changed": (B, E, "the truth file's sha256 is not the one the matrix declares", "business"),
        "truth_invalid": (B, E, "the truth file lacks its target or id column, holds an unusable value or repeats "
                                "an id", "business"),
        "truth_unavailable": (B, E, "the truth file cannot be read (absent, too large, Parquet without pyarrow)",
                              "business"),
        # --- governance -------------------------------------------------------------------------------
        "cleanup_incomplete": (P, F, "the platform's cleanup of tenant workloads", "governance"),
        "governance_not_enforced": (P, F, "quota / queue governance is the platform's", "governance"),
        "refusal_unexpected": (P, F, "governance refused what it should admit", "governance"),
        "preemption_not_exercised": (P, E, "the preemption probe could not be exercised", "governance"),
        "eviction_unrecorded": (P, F, "a preemption left no record", "governance"),
        "probe_not_run": (P, E, "a governance probe could not run", "governance"),
        "device_isolation_breach": (P, F, "a tenant saw another's devices", "governance"),
        "network_policy_not_enforced": (P, F, "a NetworkPolicy the cluster accepted did not stop the traffic: the "
                                              "cluster's network plugin (or its policy agent on that node) does "
                                              "not enforce it", "governance"),
        "attribution_untracked": (P, F, "usage could not be attributed", "governance"),
        "attribution_mismatch": (P, F, "usage attributed to the wrong tenant", "governance"),
        "usage_not_released": (P, F, "usage not released after the run", "governance"),
        "serving_floor_broken": (P, F, "PriorityClasses and the pool's reserved capacity are the platform's: a "
                                       "training burst took serving replicas below their floor", "governance"),
        "serving_latency_breached": (P, F, "the platform's reservation did not keep the serving latency bound or "
                                           "its requests succeeding during a training burst", "governance"),
        # --- the gate itself --------------------------------------------------------------------------
        "harness": (P, E, "a bug of the gate or a hook: the platform runs the gate", "pytest_plugin/item"),
        "backend_unknown": (P, E, "no plugin provides the backend spec.target names", "pytest_plugin/item"),
        "pytest_outcome": (P, E, "pytest failed the phase outside the layer's verdict (a hook, a warning as "
                                 "error, a timeout plugin)", "pytest_plugin/plugin"),
        "disk_full": (INF, E, "the disk the run writes to is full", "pytest_plugin/item"),
        "read_only_filesystem": (INF, E, "the disk the run writes to is read-only", "pytest_plugin/item"),
        "unspecified": (P, E, "a check raised without a category: the gate's bug", "layers/base"),
        # --- field text: what `hetero explain` reads in a pasted output (explain/; rows of issue 31) --------
        # Readers report a code and one of these keys; a Kubernetes reason pasted as text keeps its own row
        # above, except the two field rows at the end (who wrote the pod spec, whose share a quota is).
        "gpu_hardware_fault": (INF, F, "the GPU, its memory or its board reports a fault (ECC, row remap, lost, "
                                       "unreadable fields, PCIe replays, marked unhealthy by the device plugin)",
                               _FIELD + "read_nvidia, read_nvtools, read_kube"),
        "gpu_reset_needed": (INF, F, "the driver or DCGM asks for a GPU reset or a reboot: node operators act",
                             _FIELD + "read_nvidia, read_nvtools"),
        "gpu_host_driver_fault": (INF, F, "the host's NVIDIA driver cannot bring the GPU up (probe/init failure, "
                                          "firmware file, NVML/driver mismatch, driver not loaded on the host)",
                                  _FIELD + "read_nvidia"),
        "gpu_health_incident": (INF, F, "DCGM health or diagnostics report a GPU incident", _FIELD + "read_nvtools, "
                                "read_nvidia"),
        "nvlink_fault": (INF, F, "NVLink links down or NVSwitch errors: the fabric is the node's", _FIELD +
                         "read_nvtools, read_nvidia"),
        "xid_application": (A, F, "NVIDIA's Xid catalog attributes this Xid to the application (illegal address, "
                                  "page fault in a user kernel); the GPU stays usable", _FIELD + "probes/xid_codes"),
        "xid_gpu_engine": (INF, F, "Xid of the GPU's engines (NVIDIA Xid catalog)", _FIELD + "probes/xid_codes"),
        "xid_gpu_bus": (INF, F, "Xid of the GPU's bus / PCIe link (NVIDIA Xid catalog)", _FIELD + "probes/xid_codes"),
        "xid_gpu_firmware": (INF, F, "Xid of the GPU's firmware / GSP (NVIDIA Xid catalog)", _FIELD +
                             "probes/xid_codes"),
        "xid_gpu_memory": (INF, F, "Xid of the GPU's memory: ECC, row remap, contained errors (NVIDIA Xid catalog)",
                           _FIELD + "probes/xid_codes"),
        "xid_gpu_power": (INF, F, "Xid of the GPU's power / thermal state (NVIDIA Xid catalog)", _FIELD +
                          "probes/xid_codes"),
        "xid_nvlink": (INF, F, "Xid of NVLink / NVSwitch (NVIDIA Xid catalog); an Xid 45 takes its cause's row",
                       _FIELD + "probes/xid_codes"),
        "xid_gpu_hardware": (INF, F, "an Xid this catalog does not list: read as a GPU fault of unknown kind",
                             _FIELD + "probes/xid_codes"),
        "xid_gpu_recovery": (INF, F, "Xid asking for a GPU reset or node reboot (NVIDIA Xid catalog)", _FIELD +
                             "probes/xid_codes"),
        "cuda_device_fault": (INF, F, "a CUDA error that means the GPU itself failed (ECC, hardware stop, lost "
                                      "device)", _FIELD + "probes/cuda_errors"),
        "cuda_environment_error": (P, F, "a CUDA error of the container's set-up: driver vs runtime versions, no "
                                         "visible device, stub library, architecture the image was not built for",
                                   _FIELD + "probes/cuda_errors"),
        "cuda_program_error": (A, F, "a CUDA error of the program's own use of CUDA (out of memory, invalid "
                                     "argument or ordinal, illegal address)", _FIELD + "probes/cuda_errors"),
        "gpu_driver_container_fault": (P, F, "nvidia-smi in a pod cannot reach the driver: the GPU Operator's "
                                             "driver container did not load it", _FIELD + "read_nvidia"),
        "gpu_tool_missing": (P, F, "nvidia-smi is not in the image or on the PATH", _FIELD + "read_nvidia"),
        "dcgm_diag_configuration": (P, F, "a DCGM diagnostic that fails on the set-up it ran in (CUDA/driver "
                                          "combination), not on the GPU", _FIELD + "read_nvidia"),
        "vgpu_memory_limit_exceeded": (A, F, "the program asked for more than its vGPU slice (HAMi limit)",
                                       _FIELD + "read_text"),
        "vgpu_capacity_committed": (B, F, "the card's vGPU cores/memory/shares are all taken by other workloads: "
                                          "the share between teams", _FIELD + "read_platform"),
        "device_registration_lost": (P, F, "HAMi deleted the node's device registration (its device plugin "
                                           "stopped handshaking)", _FIELD + "read_kube"),
        "device_plugin_disconnected": (P, F, "the kubelet lost the device plugin's ListAndWatch stream",
                                       _FIELD + "read_platform"),
        "runtime_hook_failed": (P, F, "the container runtime's device hook (ascend-docker-runtime, "
                                      "nvidia-container-cli) failed", _FIELD + "read_platform"),
        "container_device_mapping": (P, F, "the container command maps NPUs without the control devices the "
                                           "Ascend runtime needs", _FIELD + "core (prompt)"),
        "workload_not_admitted": (P, F, "the queue reserved quota but an admission check keeps the workload out",
                                  _FIELD + "read_platform"),
        "node_provisioning": (P, F, "the node is still being provisioned (not-ready with the autoscaler's or cloud "
                                    "controller's startup taints)", _FIELD + "read_kube"),
        "device_memory_accounting": (P, F, "HAMi's device-memory accounting finds no card with enough free memory: "
                                           "the memory its device plugin registered", _FIELD + "read_kube"),
        "node_unreachable": (INF, F, "the node stopped reporting (NodeStatusUnknown, unreachable taint)",
                             _FIELD + "read_kube"),
        "npu_hardware_fault": (INF, F, "npu-smi reports the NPU unhealthy, in warning, or unreadable",
                               _FIELD + "read_ascend"),
        "npu_driver_fault": (INF, F, "a DCMI/ACL code of the Ascend driver or device (timeouts, ioctl, device "
                                     "gone)", _FIELD + "probes/ascend_errors"),
        "npu_environment_error": (P, F, "a DCMI/ACL code of the container's set-up (device not visible, held by "
                                        "another container, not supported in a container)",
                                  _FIELD + "probes/ascend_errors"),
        "npu_program_error": (A, F, "an ACL code of the program's own calls (invalid parameter, no context)",
                              _FIELD + "probes/ascend_errors"),
        "npu_out_of_memory": (A, F, "torch_npu: the program asked for more NPU memory than is free",
                              _FIELD + "read_framework"),
        "cann_error": (P, F, "a CANN / torch_npu error code: the CANN toolkit and operator packages the image "
                             "ships (the step after the code names the detail)", _FIELD + "read_text"),
        "hccl_init_failed": (P, F, "the HCCL communicator could not be created (rank table, device ids, "
                                   "network configuration)", _FIELD + "read_text"),
        "hccp_init_failed": (A, F, "HCCP could not start because a previous process of the job still holds the "
                                   "NPU; with no such process, the NPU driver's (infrastructure)",
                             _FIELD + "read_text"),
        "nccl_network_error": (INF, F, "NCCL's socket/IB transport failed (no route, connection refused, IB "
                                       "completion error): the network", _FIELD + "read_framework"),
        "nccl_shm_exhausted": (P, F, "NCCL could not map shared memory: the pod's /dev/shm size", _FIELD +
                               "read_framework"),
        "nccl_usage_error": (A, F, "NCCL says the program called it wrongly (invalid argument / usage)", _FIELD +
                             "read_framework"),
        # --- the training checks (layers/training; issue 34): communication and checkpoint/resume -------------
        "rendezvous_unreachable": (P, F, "the job's ranks could not reach rank 0's rendezvous address and port "
                                         "(refused, no route, deadline exceeded): the network between the job's "
                                         "workloads (network policy, CNI, Service, firewall)", "layers/training"),
        "collective_peer_killed": (INF, F, "a rank of the job was killed from outside it (SIGKILL, not its own "
                                           "memory limit, not the gate) and the other ranks lost their peer: its "
                                           "node, its runtime or an operator", "layers/training"),
        "collective_peer_lost": (INF, F, "a rank lost its peer in the collective (connection closed or reset, "
                                         "heartbeat timeout) and no rank names another cause: the peer's node or "
                                         "the link", "layers/training"),
        "collective_wrong_result": (P, F, "the all-reduce returned a wrong sum: the framework, collective library "
                                          "or driver stack the image and node ship", "layers/training"),
        "bus_bandwidth_below_minimum": (INF, F, "the bus bandwidth the gate measured is below the matrix's minimum: "
                                                "the pool's interconnect (network, NVLink, HCCS)", "layers/training"),
        "no_collective_framework": (IMG, F, "the image ships no collective framework the gate can drive "
                                            "(torch.distributed or jax)", "layers/training"),
        "job_rank_failed": (IMG, F, "a rank of the gate's own job program exited non-zero with an error no reader "
                                    "names: the image's Python or framework (the program is the gate's)",
                            "layers/training"),
        "job_hung": (INF, F, "no rank of the gate's job failed, yet one never ended within the layer timeout: a "
                             "collective or a write that never completes (a network black hole, hung storage)",
                     "layers/training"),
        "volume_full": (INF, F, "the volume the job writes its checkpoints to is full (ENOSPC, EDQUOT): its size or "
                                "quota", "layers/training"),
        "volume_read_only": (P, F, "the volume the job writes its checkpoints to is mounted read-only",
                             "layers/training"),
        "checkpoint_not_resumed": (P, F, "after the restart the job did not find the checkpoint it wrote, or "
                                         "resumed another step: the volume does not persist across restarts",
                                   "layers/training"),
        "checkpoint_corrupted": (INF, F, "the checkpoint read back after the restart differs from the one written "
                                         "(digest): the storage", "layers/training"),
        "workload_spec": (A, F, "a field text shows a pod spec written by the workload's owner (selector, affinity, "
                                "tolerations, limits, flavor, policy) that the cluster refuses; in a gate run the "
                                "gate writes the spec and the specific row above applies", _FIELD + "read_kube"),
        "team_share_exceeded": (B, F, "a field text shows a namespace quota or queue share used up: the share "
                                      "between teams is the business's; in a gate run the specific row above applies",
                                _FIELD + "read_kube"),
        # --- change records (--hetero-audit-log) -------------------------------------------------------
        "undeclared_change": (P, F, "the apiserver's audit log (or managedFields) shows a change to a pool's nodes, "
                                    "quota, queues or device-plugin settings that the run's change record does not "
                                    "name: changes to the pools are the platform's to record",
                              "status/audit (--hetero-audit-log)"),
    }
    return {category: Entry(*row) for category, row in rows.items()}


TABLE: Final[dict[str, Entry]] = _rows()
"""category → :class:`Entry`; the only place an owner is decided."""


@dataclass(frozen=True)
class Undetermined:
    """A field-text category whose owner the text cannot decide: the ``candidates`` (owner categories with
    what would make each one right), ``next`` (what to read to decide), ``why`` and ``source``."""

    candidates: str
    next: str
    why: str
    source: str


UNDETERMINED: Final[dict[str, Undetermined]] = {
    "collective_peer_unknown": Undetermined(
        "infrastructure (a peer GPU, its node or the network link), algorithm (another rank stopped, "
        "diverged or never reached the collective)",
        "the logs of every rank (the first rank to fail names the cause) and the nodes' kernel logs",
        "one rank's NCCL watchdog timeout / remote error says a peer did not answer, not why",
        _FIELD + "read_framework"),
    "hccl_remote_timeout": Undetermined(
        "infrastructure (a peer NPU, its node or the network link), algorithm (a remote rank did not send: it "
        "failed earlier or diverged)",
        "every rank's plog; the first rank to fail names the cause",
        "an HCCL socket or notify-wait timeout (EI0006, EI0002) on one rank says a peer did not answer, not why",
        _FIELD + "read_text"),
    "gang_members_missing": Undetermined(
        "infrastructure (the cluster cannot place the missing members), algorithm (a member pod exited or "
        "failed)",
        "kubectl get pods -l volcano.sh/job-name=<job> and the PodGroup's events",
        "a gang message naming no resource, with members running: a member that exited and a cluster short of "
        "capacity read the same",
        _FIELD + "read_kube"),
    "volcano_job_waiting": Undetermined(
        "infrastructure (the cluster cannot place the gang), business (the queue's capability or share is used up), "
        "platform (the queue is closed or the scheduler is not running), algorithm (a member pod failed)",
        "kubectl describe podgroup <job> (its Unschedulable condition and events name the reason) and kubectl "
        "describe queue <queue>",
        "a vcjob's or PodGroup's status gives its phase and counts, not why it is not running",
        _FIELD + "read_kube"),
    "scheduler_reason_unprinted": Undetermined(
        "infrastructure (nodes short of cpu/memory/devices), algorithm (the pod's selector, affinity, tolerations "
        "or host ports), platform (node taints, readiness, cordons)",
        "kubectl describe nodes (Allocated resources, Taints, Conditions) against the pod's requests and spec; the "
        "scheduler's own log names the failed predicate per node",
        "Kubernetes 1.2-1.4's 'pod (x) failed to fit in any node' (or 1.0's 'failed to find a fit for pod') names "
        "no predicate when the per-node lines are absent",
        _FIELD + "read_text, read_kube"),
    "gpu_memory_held_elsewhere": Undetermined(
        "platform (a co-tenant or a process left behind on a GPU the platform handed out as free), algorithm "
        "(another process of the same job on the same GPU, e.g. ranks without torch.cuda.set_device)",
        "nvidia-smi --query-compute-apps=pid,process_name,used_memory on that node, and which pod each pid belongs to",
        "PyTorch 2.2+'s CUDA OOM names another process holding more of the GPU's memory than the failing one: "
        "the GPU was not free, and the text does not say whose that process is",
        _FIELD + "read_text"),
}
"""Field-text categories with no single owner (issue 31: where the text cannot decide, say so)."""


def field_owner(category: str | None) -> OwnerRole | None:
    """The owner category of a field-text finding's ``category`` (a key of :data:`TABLE`); None for no
    category, an :data:`UNDETERMINED` one, or one the table does not know."""
    row = TABLE.get(category) if category else None
    return row.owner if row is not None else None


def entry(category: str) -> Entry | None:
    """The table's row of ``category``; None for a category no built-in part reports (a hook's own)."""
    return TABLE.get(category)


def owner_category(category: str, layer: Layer, *, image_owner: OwnerCategory = "platform") -> OwnerCategory:
    """The owner category of a failure of ``category`` in ``layer``: the table's, ``image_owner`` for the
    image's rows; a category the table does not know (a third party's check) is the layer's own owner."""
    from pytest_hetero.vocab import DEFAULT_OWNERS

    row = TABLE.get(category)
    if row is None:
        return DEFAULT_OWNERS[layer]
    return image_owner if row.owner == "image" else row.owner


def status_of(category: str, reported: FailureStatus, layer: Layer | None = None) -> FailureStatus:
    """The status of a failure of ``category`` in ``layer``: the table's (``error`` in a layer of the row's
    ``error_in``), or ``reported`` (the outcome the check raised) for a category the table does not know."""
    row = TABLE.get(category)
    return reported if row is None else row.status_in(layer)


def markdown() -> str:
    """docs/failure-owners.md: the table as Markdown (category | owner | status | why | reported by)."""
    lines = [
        "# Failure owners",
        "",
        "Generated from `pytest_hetero/judge/failures.py` (`python -m pytest_hetero.judge.failures > "
        "docs/failure-owners.md`); a test keeps this file equal to the table.",
        "",
        "Engines, readers and layer checks report a failure *category* and its facts; this table alone decides",
        "the owner category and the status. The matrix's `spec.owners` turns an owner category into a team name.",
        "`image` means the target's image owner (`spec.target.image_owner`: `platform` by default, `algorithm`",
        "when the model team ships its images). There is no `matrix-author`: the gate builds every pod spec from",
        "the matrix's resource entries, the platform's description of its pools.",
        "",
        "| category | owner | status | why | reported by |",
        "|---|---|---|---|---|",
    ]
    for category in sorted(TABLE):
        row = TABLE[category]
        status = row.status + (f" (error in {', '.join(row.error_in)})" if row.error_in else "")
        lines.append(f"| `{category}` | {row.owner} | {status} | {row.why} | {row.source} |")
    lines += ["", "## Undetermined (field text)", "",
              "Field-text categories whose owner the text cannot decide: `hetero explain` names the candidates and",
              "what to read next instead of guessing.", "",
              "| category | candidates | read next | why | reported by |", "|---|---|---|---|---|"]
    for category in sorted(UNDETERMINED):
        u = UNDETERMINED[category]
        lines.append(f"| `{category}` | {u.candidates} | {u.next} | {u.why} | {u.source} |")
    return "\n".join(lines) + "\n"


README_BEGIN = "<!-- failure-owners: generated by python -m pytest_hetero.judge.failures --readme -->"
README_END = "<!-- /failure-owners -->"


def readme_table() -> str:
    """The README's block: every failure category of :data:`TABLE` by owner category (one row per owner, the
    categories whose status is ``error`` marked ``*``), between :data:`README_BEGIN` and :data:`README_END`; a test
    keeps the README's copy equal to it. The whole table (status, why, who reports it) is docs/failure-owners.md."""
    owners = sorted({row.owner for row in TABLE.values()})
    lines = [README_BEGIN, "| owner category | failure categories (`*`: status error, the rest failed) |", "|---|---|"]
    for owner in owners:
        names = ", ".join(f"`{c}`" + ("\\*" if TABLE[c].status == "error" else "")
                          for c in sorted(TABLE) if TABLE[c].owner == owner)
        lines.append(f"| {owner} | {names} |")
    return "\n".join([*lines, README_END])


if __name__ == "__main__":  # pragma: no cover - the generator of docs/failure-owners.md and the README's block
    import sys

    if sys.argv[1:] == ["--readme"]:
        print(readme_table())
        raise SystemExit(0)
    print(markdown(), end="")
