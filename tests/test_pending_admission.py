"""kube-apiserver denials: ResourceQuota, LimitRange, RBAC, Pod Security, webhooks."""

from __future__ import annotations

from pytest_hetero.pending.admission import parse_admission_message


def test_quota_with_several_resources_gives_one_reason_each() -> None:
    text = (
        'Error from server (Forbidden): error when creating "job.yaml": pods "train-0" is forbidden: '
        "exceeded quota: team-a, requested: limits.cpu=4,requests.nvidia.com/gpu=2, "
        "used: limits.cpu=6,requests.nvidia.com/gpu=7, limited: limits.cpu=8,requests.nvidia.com/gpu=8"
    )
    cpu, gpu = parse_admission_message(text)
    assert (cpu.code, cpu.resource, dict(cpu.quantities)) == (
        "quota_exceeded",
        "cpu",
        {"requested": "4", "used": "6", "limited": "8"},
    )
    assert (gpu.code, gpu.resource, dict(gpu.quantities)) == (
        "quota_exceeded",
        "nvidia.com/gpu",
        {"requested": "2", "used": "7", "limited": "8"},
    )
    assert dict(gpu.detail) == {
        "quota": "team-a",
        "quota_resource": "requests.nvidia.com/gpu",
        "object_kind": "pods",
        "object_name": "train-0",
    }
    assert gpu.owner == "platform"


def test_quota_from_a_job_controller_event() -> None:
    text = (
        'Error creating: pods "bench-7xk2p" is forbidden: exceeded quota: npu, requested: '
        "huawei.com/Ascend910=8, used: huawei.com/Ascend910=8, limited: huawei.com/Ascend910=8"
    )
    (reason,) = parse_admission_message(text)
    assert (reason.resource, dict(reason.quantities)) == (
        "huawei.com/Ascend910",
        {"requested": "8", "used": "8", "limited": "8"},
    )
    assert reason.detail["object_name"] == "bench-7xk2p"


def test_failed_quota_must_specify_old_and_new_wording() -> None:
    old = parse_admission_message(
        'pods "p" is forbidden: failed quota: compute: must specify limits.cpu,limits.memory'
    )
    assert [(r.code, r.resource, r.owner) for r in old] == [
        ("quota_requires_limits", "cpu", "platform"),
        ("quota_requires_limits", "memory", "platform"),
    ]
    new = parse_admission_message(
        'pods "p" is forbidden: failed quota: compute: must specify limits.cpu for: '
        "app,sidecar; requests.memory for: app"
    )
    assert [(r.resource, r.detail["containers"]) for r in new] == [("cpu", "app,sidecar"), ("memory", "app")]


def test_limitrange_max_min_and_ratio() -> None:
    text = (
        'pods "x" is forbidden: [maximum cpu usage per Container is 2, but limit is 4, minimum memory usage '
        "per Pod is 1Gi, but request is 512Mi, cpu max limit to request ratio per Container is 2, but provided "
        "ratio is 4.000000]"
    )
    a, b, c = parse_admission_message(text)
    assert (a.code, a.resource, dict(a.quantities), a.detail["scope"]) == (
        "limitrange_violation",
        "cpu",
        {"maximum": "2", "limit": "4"},
        "Container",
    )
    assert (b.resource, dict(b.quantities), b.detail["scope"]) == (
        "memory",
        {"minimum": "1Gi", "request": "512Mi"},
        "Pod",
    )
    assert (c.resource, dict(c.quantities)) == ("cpu", {"max_ratio": "2", "ratio": "4.000000"})
    assert a.owner == "platform"  # the gate builds the requests from the pool's entry: the platform's


def test_rbac_namespaced_with_service_account() -> None:
    text = (
        'pods is forbidden: User "system:serviceaccount:ci:hetero-runner" cannot create resource "pods" in '
        'API group "" in the namespace "gpu-tests"'
    )
    (reason,) = parse_admission_message(text)
    assert (reason.source, reason.code, reason.owner, reason.resource) == (
        "apiserver",
        "forbidden_rbac",
        "platform",
        "pods",
    )
    assert dict(reason.detail) == {
        "verb": "create",
        "subject": "system:serviceaccount:ci:hetero-runner",
        "group": "",
        "namespace": "gpu-tests",
        "serviceaccount": "ci/hetero-runner",
    }


def test_rbac_cluster_scope_and_pre_1_14_wording() -> None:
    (cluster,) = parse_admission_message(
        'nodes is forbidden: User "alice" cannot list resource "nodes" in API group "" at the cluster scope'
    )
    assert dict(cluster.detail) == {"verb": "list", "subject": "alice", "group": "", "scope": "cluster"}
    (old,) = parse_admission_message(
        'pods is forbidden: User "bob" cannot create pods in the namespace "default"'
    )
    assert (old.resource, dict(old.detail)) == (
        "pods",
        {"verb": "create", "subject": "bob", "namespace": "default"},
    )
    (crd,) = parse_admission_message(
        'workloads.kueue.x-k8s.io is forbidden: User "carol" cannot get resource '
        '"workloads" in API group "kueue.x-k8s.io" in the namespace "ml"'
    )
    assert (crd.resource, crd.detail["group"]) == ("workloads", "kueue.x-k8s.io")


def test_pod_security_and_psp() -> None:
    (psa,) = parse_admission_message(
        'pods "cuda" is forbidden: violates PodSecurity "restricted:latest": allowPrivilegeEscalation != false '
        '(container "cuda" must set securityContext.allowPrivilegeEscalation=false)'
    )
    assert (psa.code, psa.owner, psa.detail["level"]) == (
        "podsecurity_violation",
        "platform",
        "restricted:latest",
    )
    (psp,) = parse_admission_message(
        'pods "x" is forbidden: unable to validate against any pod security policy: '
        "[spec.containers[0].securityContext.privileged: Invalid value: true]"
    )
    assert (psp.code, psp.detail["level"]) == ("podsecurity_violation", "PodSecurityPolicy")


def test_webhooks_denied_and_unreachable() -> None:
    (denied,) = parse_admission_message(
        'admission webhook "validation.gatekeeper.sh" denied the request: [gpu-limits] container <train> has no '
        "nvidia.com/gpu limit"
    )
    assert (denied.code, denied.owner, denied.detail["webhook"], denied.detail["why"]) == (
        "webhook_denied",
        "platform",
        "validation.gatekeeper.sh",
        "[gpu-limits] container <train> has no nvidia.com/gpu limit",
    )
    (down,) = parse_admission_message(
        'Internal error occurred: failed calling webhook "mpod.kb.io": failed to call webhook: Post '
        '"https://kueue-webhook-service.kueue-system.svc:443/mutate": dial tcp 10.96.0.10:443: connect: '
        "connection refused"
    )
    assert (down.code, down.detail["webhook"]) == ("webhook_unavailable", "mpod.kb.io")


def test_volcano_webhook_denial_is_a_queue_reason() -> None:
    (reason,) = parse_admission_message(
        'admission webhook "validatejob.volcano.sh" denied the request: can only submit job to queue with state '
        "`Open`, queue `gpu-q` status is `Closed`"
    )
    assert (reason.source, reason.code, reason.detail["queue"]) == ("volcano", "queue_inactive", "gpu-q")


def test_nothing_to_find() -> None:
    assert parse_admission_message("pod/x created") == []
