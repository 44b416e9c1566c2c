"""The Docker Engine API documents parsed once at the boundary (:mod:`pytest_hetero.backends.docker.api`)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import docker.errors
import pytest

from pytest_hetero.backends.docker.api import (
    ALLOCATED_FIELDS,
    ContainerInspect,
    ContainerState,
    EngineAnswerUnreadable,
    EngineInfo,
    ExecInspect,
    HostConfig,
    ImageInspect,
    Listed,
    StatsDocument,
    list_labelled,
    pull_errors,
)


def test_host_config_keeps_the_allocated_fields_as_served_and_none_for_those_left_out() -> None:
    served = {"NanoCpus": 1500000000, "Memory": 268435456, "MemorySwap": 268435456, "CpusetCpus": "0,1",
              "DeviceRequests": [{"Driver": "", "Count": 0, "DeviceIDs": ["0"], "Capabilities": [["gpu"]]}],
              "ReadonlyRootfs": True}
    parsed = HostConfig.parse(served)
    assert (parsed.nano_cpus, parsed.memory) == (1500000000, 268435456.0)
    assert list(parsed.allocated) == list(ALLOCATED_FIELDS)
    assert parsed.allocated == {"NanoCpus": 1500000000, "CpusetCpus": "0,1", "Memory": 268435456,
                                "MemorySwap": 268435456, "Devices": None,
                                "DeviceRequests": served["DeviceRequests"], "Runtime": None}


def test_a_host_config_left_out_or_null_is_unlimited_and_allocated_nothing() -> None:
    for doc in ({"Id": "c1", "HostConfig": None}, {"Id": "c1"}):
        parsed = ContainerInspect.parse(doc).host_config
        assert (parsed.nano_cpus, parsed.memory) == (0, 0.0)
        assert parsed.allocated == dict.fromkeys(ALLOCATED_FIELDS)


def test_a_host_config_that_is_no_object_is_refused_as_an_engine_error_naming_it() -> None:
    # (until msgspec: read as unlimited, silently) — an APIError, which every caller handles as the engine's refusal
    raws: tuple[object, ...] = ([], "x")
    for raw in raws:
        with pytest.raises(docker.errors.APIError, match=r"container inspect document .*at `\$\.HostConfig`"):
            ContainerInspect.parse({"Id": "c1", "HostConfig": raw})


def test_container_inspect_reads_every_field_and_keeps_the_state_as_served() -> None:
    state = {"Status": "exited", "Running": False, "OOMKilled": True, "Dead": False, "Pid": 0, "ExitCode": 137,
             "Error": "", "StartedAt": "2026-12-04T19:00:00.1Z", "FinishedAt": "2026-12-04T19:00:05.2Z"}
    parsed = ContainerInspect.parse({"Id": "c1", "Name": "/w", "Created": "2026-12-04T18:59:59Z",
                                     "RestartCount": 2, "State": state, "HostConfig": {"NanoCpus": 10**9}})
    assert (parsed.id, parsed.name, parsed.created, parsed.restart_count) == ("c1", "/w", "2026-12-04T18:59:59Z", 2)
    got = parsed.state
    assert (got.running, got.status, got.exit_code, got.oom_killed, got.error) == (False, "exited", 137, True, "")
    assert (got.started_at, got.finished_at) == ("2026-12-04T19:00:00.1Z", "2026-12-04T19:00:05.2Z")
    assert got.document == state and parsed.host_config.nano_cpus == 10**9


def test_null_fields_read_as_left_out() -> None:
    parsed = ContainerInspect.parse({"Id": "c1", "Name": None, "RestartCount": None, "State": {
        "Running": None, "OOMKilled": None, "Error": None, "ExitCode": None}})
    assert (parsed.name, parsed.restart_count) == ("", 0)
    assert (parsed.state.running, parsed.state.oom_killed, parsed.state.error, parsed.state.exit_code) == (
        False, False, "", None)
    assert ContainerState.parse(None) == ContainerState.parse({})
    assert ExecInspect.parse({"Running": True, "ExitCode": None}) == ExecInspect(running=True, exit_code=None)
    image = ImageInspect.parse({"Id": "sha256:a", "RepoDigests": None, "Config": None})
    assert (image.repo_digests, image.user, image.size) == ([], None, None)


def test_a_field_of_another_type_or_a_document_without_id_is_refused_naming_the_field() -> None:
    # (until msgspec: a wrongly typed field read as None, a container without Id got the id "None", an image
    # without Id raised KeyError)
    cases: list[tuple[Callable[[], object], str]] = [
        (lambda: ContainerInspect.parse({"Id": "c1", "State": {"ExitCode": "0"}}), r"State .*`\$\.ExitCode`"),
        (lambda: ContainerInspect.parse({"Name": "/w"}), r"missing required field `Id`"),
        (lambda: ContainerInspect.parse({"Id": "c1", "HostConfig": {"Memory": "1g"}}),
         r"`\$\.HostConfig\.Memory`"),
        (lambda: ImageInspect.parse({"RepoDigests": []}), r"image inspect .*missing required field `Id`"),
        (lambda: ImageInspect.parse({"Id": "sha256:a", "Config": {"User": 0}}), r"`\$\.Config\.User`"),
        (lambda: ExecInspect.parse({"Running": "no"}), r"`\$\.Running`"),
        (lambda: ExecInspect.parse(None), r"exec inspect .*Expected `object`"),
        (lambda: EngineInfo.parse({}, {"NCPU": "8"}), r"/info .*`\$\.NCPU`"),
        (lambda: Listed.parse({"Names": [], "Id": "c1"}, "container"), r"`\$\.Names`"),
        (lambda: Listed.parse({"Name": "n"}, "network"), r"network list entry .*`Id`"),
        (lambda: StatsDocument.parse({"memory_stats": {"usage": "1"}}), r"`\$\.memory_stats\.usage`"),
    ]
    for call, message in cases:
        with pytest.raises(EngineAnswerUnreadable, match=message):
            call()


def test_engine_info_reads_version_and_info() -> None:
    info = EngineInfo.parse({"Version": "27.3.1", "ApiVersion": "1.47", "KernelVersion": "6.8.0", "Arch": "amd64"},
                            {"ID": "abc", "Name": "host", "OperatingSystem": "Ubuntu", "NCPU": 8, "MemTotal": 2**34,
                             "Runtimes": {"runc": {"path": "runc"}, "nvidia": {}}, "DefaultRuntime": "runc",
                             "CgroupVersion": "2", "CgroupDriver": "systemd", "Driver": "overlay2"})
    assert info == EngineInfo(version="27.3.1", api_version="1.47", kernel="6.8.0", arch="amd64", id="abc",
                              name="host", os="Ubuntu", runtimes=("runc", "nvidia"), default_runtime="runc", ncpu=8,
                              mem_total=2**34, cgroup_version="2", cgroup_driver="systemd", storage_driver="overlay2")
    assert EngineInfo.parse({}, {}) == EngineInfo()


def test_listed_names_each_kind_as_its_remove_call_takes_it() -> None:
    assert Listed.parse({"Names": ["/w1", "/x"], "Id": "c1", "Labels": {"a": "b"}, "Created": 17e8}, "container") == (
        Listed(name="w1", id="c1", labels={"a": "b"}, created=17e8))
    assert Listed.parse({"Name": "v", "Labels": None, "CreatedAt": "2026-12-04T18:00:00Z"}, "volume") == (
        Listed(name="v", id="v", labels={}, created=None))
    assert Listed.parse({"Id": "sha256:i", "Created": 1700000000}, "image") == (
        Listed(name="sha256:i", id="sha256:i", labels={}, created=1700000000))
    assert Listed.parse({"Name": "n", "Id": "n1", "Created": "2026-12-04T18:00:00Z"}, "network") == (
        Listed(name="n", id="n1", labels={}, created=None))


def test_stats_prefer_the_cgroup_v1_total_and_read_a_null_one_as_left_out() -> None:
    v1 = StatsDocument.parse({"memory_stats": {"stats": {"total_inactive_file": 7, "inactive_file": 3}}})
    null_total = StatsDocument.parse({"memory_stats": {"stats": {"total_inactive_file": None, "inactive_file": 3}}})
    assert (v1.inactive_file, null_total.inactive_file) == (7, 3)


def test_pull_errors_are_the_error_texts_of_the_progress_stream() -> None:
    class Api:
        def __init__(self, messages: list[object]) -> None:
            self.messages = messages

        def pull(self, ref: str, *, stream: bool, decode: bool) -> list[object]:
            return self.messages

    # stand-ins for docker.APIClient
    ok: Any = Api([{"status": "Pulling from library/alpine", "id": "latest"}, {"status": "Digest: sha256:a"}])
    refused: Any = Api([{"status": "Pulling"}, {"error": "manifest unknown", "errorDetail": {"message": "manifest unknown"}}])
    odd: Any = Api([{"error": {"code": 1}}])
    assert pull_errors(ok, "alpine") == []
    assert pull_errors(refused, "x") == ["manifest unknown"]
    with pytest.raises(EngineAnswerUnreadable, match=r"pull progress message .*`\$\.error`"):
        pull_errors(odd, "x")


def test_list_labelled_lists_each_kind_in_order_and_names_a_field_of_another_type() -> None:
    class Api:
        def __init__(self, volumes: object) -> None:
            self.answer = volumes

        def containers(self, **_: object) -> list[object]:
            return [{"Names": ["/c"], "Id": "c1", "Labels": {"k": "v"}, "Created": 1}]

        def volumes(self, **_: object) -> object:
            return self.answer

        def images(self, **_: object) -> list[object]:
            return [{"Id": "sha256:i"}]

        def networks(self, **_: object) -> list[object]:
            return [{"Name": "n", "Id": "n1"}]

    listed: Any = Api({"Volumes": [{"Name": "v"}], "Warnings": None})
    assert [(kind, found.name) for kind, found in list_labelled(listed, "x")] == [
        ("container", "c"), ("volume", "v"), ("image", "sha256:i"), ("network", "n")]
    no_volumes: Any = Api({"Volumes": None})
    assert [kind for kind, _ in list_labelled(no_volumes, "x")] == ["container", "image", "network"]
    odd: Any = Api({"Volumes": [{"Name": 7}]})
    with pytest.raises(EngineAnswerUnreadable, match=r"volume list .*`\$\.Volumes\[0\]\.Name`"):
        list_labelled(odd, "x")
