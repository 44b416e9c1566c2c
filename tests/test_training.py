"""The checks a task type brings, without an engine: which items a training model gains, what ``hetero plan``
says, the training settings, the gate's bandwidth arithmetic, and the reading of rank failure text (the real
NCCL/HCCL outputs of ../shared/fixtures/real and rank logs produced here by the Docker tests)."""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

import pytest
from support import REPO, matrix_text

from pytest_hetero.backends.jobs import JobSpec, RankExit
from pytest_hetero.cli import main
from pytest_hetero.explain.read_collective import read_failure
from pytest_hetero.judge.failures import TABLE, UNDETERMINED
from pytest_hetero.layers.base import LayerFailed
from pytest_hetero.layers.training import RankResult, _result, measure, raise_first_failure
from pytest_hetero.matrix.document import TaskType
from pytest_hetero.matrix.expand import expand
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.matrix.training import TASK_CHECKS, Training, checks_of

if TYPE_CHECKING:
    from pytest_hetero.evidence.document import EvidenceDocument

# the matrices sit in tmp_path and name the repository's cases/ by absolute path (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")

REAL = REPO.parent / "shared" / "fixtures" / "real"
OURS = Path(__file__).parent / "data" / "training"
COMBO = "digits-logreg@digits-test"


def training_doc(task_type: str, training: dict[str, Any] | None = None) -> dict[str, Any]:
    doc: dict[str, Any] = json.loads(matrix_text())
    doc["spec"]["models"][0]["task_type"] = task_type
    if training is not None:
        doc["spec"]["models"][0]["training"] = training
    return doc


def write(tmp_path: Path, doc: dict[str, Any]) -> Path:
    path = tmp_path / "m.matrix.yaml"
    path.write_text(json.dumps(doc))
    return path


@pytest.mark.parametrize("task_type", ["training", "fine-tune"])
def test_training_task_types_bring_communication_and_checkpoint_items(tmp_path: Path, task_type: str) -> None:
    plan = expand(load_matrix(write(tmp_path, training_doc(task_type))))
    res = plan.items[0].parts[0]
    img = [i for i in plan.items if i.layer == "startup"][0].parts[1]
    ids = {i.id: i for i in plan.items if i.layer == "model"}
    assert sorted(ids) == sorted(f"{res}::{img}::{COMBO}::{c}" for c in ("model", "communication::model",
                                                                          "checkpoint::model"))
    comm = ids[f"{res}::{img}::{COMBO}::communication::model"]
    assert comm.keys["check"] == "communication" and comm.depends_on == (res, img, "startup")


@pytest.mark.parametrize("task_type", ["batch-inference", "online-inference", "evaluation", "data-processing"])
def test_other_task_types_bring_none(tmp_path: Path, task_type: TaskType) -> None:
    doc = training_doc(task_type)
    if task_type == "online-inference":
        doc["spec"]["models"][0]["task_type"] = "online-inference"
    plan = expand(load_matrix(write(tmp_path, doc)))
    assert not any("check" in i.keys for i in plan.items)
    assert checks_of(task_type) == ()


def test_every_schema_task_type_has_a_row() -> None:
    schema = json.loads((REPO / "pytest_hetero" / "matrix" / "schema.json").read_text())
    assert set(schema["$defs"]["model"]["properties"]["task_type"]["enum"]) == set(TASK_CHECKS)


def test_plan_says_which_checks_each_task_type_brings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, training_doc("training"))
    assert main(["plan", str(path), "--json"]) == 0
    rep = json.loads(capsys.readouterr().out)
    assert rep["task_types"] == {"digits-logreg": {"task_type": "training", "checks": ["communication",
                                                                                        "checkpoint"]}}
    assert rep["items"] == 7
    assert main(["plan", str(path)]) == 0
    assert "task type of digits-logreg: training; checks it brings: communication, checkpoint" in capsys.readouterr().out


def test_training_settings_parse_quantities_durations_and_the_volume(tmp_path: Path) -> None:
    doc = training_doc("training", {"world_size": 4, "communication": {
        "sizes": ["4Ki", 1048576], "min_busbw_gbps": 2.5, "rendezvous_timeout": "1m30s", "backend": "nccl"},
        "checkpoint": {"volume": "./ckpt", "size": "2Mi", "steps": 10, "kill_after": 3}})
    t = load_matrix(write(tmp_path, doc)).models[0].training
    assert (t.world_size, t.sizes, t.min_busbw_gbps, t.judged_at, t.rendezvous_timeout_s, t.backend) == (
        4, (4096, 1048576), 2.5, 1048576, 90.0, "nccl")
    assert (t.volume, t.checkpoint_bytes, t.steps, t.kill_after) == (str(tmp_path / "ckpt"), 2 << 20, 10, 3)
    named = training_doc("training", {"checkpoint": {"volume": "train-ckpt-pvc"}})
    assert load_matrix(write(tmp_path, named)).models[0].training.volume == "train-ckpt-pvc"


def test_a_bad_training_field_names_its_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = write(tmp_path, training_doc("training", {"communication": {"iterations": 0}}))
    assert main(["lint", str(path)]) == 1
    out = capsys.readouterr()
    assert "training.communication.iterations" in out.out + out.err


def rank(rank: int, times: dict[int, list[float]], value: float = 3.0, contributed: int | None = None,
         world: int = 2) -> RankResult:
    return {"rank": rank, "world_size": world, "framework": "jax 0.10.2", "backend": "gloo", "devices": world,
            "contributed": rank + 1 if contributed is None else contributed, "init_s": 0.5 + rank,
            "sizes": [{"bytes": b, "elements": b // 4, "iterations": len(t), "median_s": statistics.median(t),
                       "min_s": min(t), "max_s": max(t), "first": value, "last": value}
                      for b, t in times.items()]}


def test_the_gate_computes_bus_bandwidth_like_nccl_tests() -> None:
    """busbw = algbw × 2(n−1)/n over the slowest rank's median time; n = 4 → factor 1.5."""
    times = {1024: [1e-4, 2e-4, 3e-4], 1 << 20: [1e-3, 2e-3, 9e-3]}
    slow = {1024: [1e-4, 2e-4, 3e-4], 1 << 20: [2e-3, 4e-3, 4e-3]}
    res = [rank(0, times, 10.0, world=4), rank(1, slow, 10.0, world=4), rank(2, times, 10.0, world=4),
           rank(3, times, 10.0, world=4)]
    facts = measure(res, Training())
    big = facts["sizes"][1]
    assert big["time_us"] == 4000.0  # rank 1's median, the slowest
    assert big["algbw_gbps"] == pytest.approx((1 << 20) / 4e-3 / 1e9)
    assert big["busbw_gbps"] == pytest.approx(big["algbw_gbps"] * 1.5)
    assert facts["latency_us"] == 200.0 and facts["world_size"] == 4 and facts["expected"] == 10.0
    assert facts["wrong"] == [] and facts["init_s"] == 3.5


def test_a_wrong_sum_and_a_world_size_disagreement_are_found() -> None:
    times = {4096: [1e-4]}
    facts = measure([rank(0, times), rank(1, times, value=2.0)], Training())
    assert facts["wrong"] == ["rank 1 read 2/2 at 4096 B, expected 3"]
    with pytest.raises(LayerFailed) as exc:
        measure([rank(0, times), rank(1, times, world=3)], Training())
    assert exc.value.category == "job_rank_failed"


@pytest.mark.parametrize(("fixture", "category"), [
    (REAL / "nccl-watchdog-timeout-allreduce-seqnum-808-600000ms-ranks-0-1-2-excerpt.txt", "collective_peer_unknown"),
    (REAL / "hccl-comminitrootinfoconfig-error-15-err02200-ee9999-phyid-device-id-error-rank1.txt",
     "hccl_init_failed"),
    (REAL / "hccl-hcclcomminitrootinfo-failed-mindie-310p-rank1-of-4.txt", "hccl_init_failed"),
    (REAL / "hccl-processgrouphccl-barrier-err02200-ej0001-hccp-init-failed-device3-excerpt.txt", "hccp_init_failed"),
    (OURS / "jax-gloo-allreduce-peer-sigkilled-rank0.log", "collective_peer_lost"),
    (OURS / "jax-coordination-registertask-deadline-rank1.log", "rendezvous_unreachable"),
    (OURS / "checkpoint-enospc-tmpfs-128k.log", "volume_full"),
])
def test_rank_failure_text_reads_to_a_category_with_an_owner(fixture: Path, category: str) -> None:
    found = read_failure(fixture.read_text(encoding="utf-8", errors="replace"))
    assert found is not None and found[0] == category
    assert category in TABLE or category in UNDETERMINED


def test_rank_failure_lines_quote_the_cause() -> None:
    found = read_failure((OURS / "jax-coordination-registertask-deadline-rank1.log").read_text())
    assert found == ("rendezvous_unreachable", "RPC: /xla.coordination.CoordinationService/RegisterTask "
                                               "(DEADLINE_EXCEEDED)")
    found = read_failure((OURS / "jax-gloo-allreduce-peer-sigkilled-rank0.log").read_text())
    assert found is not None and found[1].endswith("Connection reset by peer")
    assert read_failure("Traceback (most recent call last):\nValueError: bad shape\n") is None


def test_torch_gloo_and_tcpstore_texts() -> None:
    """torch.distributed's messages as torch prints them (c10d TCPStore, gloo transport)."""
    assert read_failure("torch.distributed.DistNetworkError: The client socket has timed out after 60000ms while "
                        "trying to connect to (rank0, 29500).")[0] == "rendezvous_unreachable"  # type: ignore[index]
    assert read_failure("RuntimeError: [../third_party/gloo/gloo/transport/tcp/pair.cc:534] Connection closed by "
                        "peer [10.0.0.2]:4321")[0] == "collective_peer_lost"  # type: ignore[index]
    assert owner("rendezvous_unreachable") == "platform" and owner("collective_peer_killed") == "infrastructure"
    assert owner("volume_full") == "infrastructure"


def owner(category: str) -> str:
    return TABLE[category].owner


def ended(rank: int, code: int | None, at: float | None, stderr: str = "", **flags: Any) -> RankExit:
    return RankExit(rank=rank, name=f"r{rank}", exit_code=code, stdout="", stderr=stderr, ended=at,
                    signal=code - 128 if code and code > 128 else None, **flags)


SPEC = JobSpec(name="communication", world_size=2, argv=("{python}",))


@pytest.mark.parametrize(("exits", "category", "words"), [
    # the first rank to end in failure names the cause: rank 1's SIGKILL came before rank 0's peer loss
    ([ended(0, 1, 20.0, "Connection reset by peer"), ended(1, 137, 10.0)], "collective_peer_killed",
     "rank 1 (r1) was killed"),
    ([ended(0, 137, 10.0, oom_killed=True), ended(1, 1, 12.0, "Connection reset by peer")], "oom_killed",
     "memory limit"),
    ([ended(0, 1, 9.0, "OSError: [Errno 28] No space left on device"), ended(1, 137, 19.0, stopped_after_peer=True)],
     "volume_full", "rank 1 stopped by the gate after its peer failed"),
    ([ended(0, 0, 5.0), ended(1, None, None)], "job_hung", "rank(s) 1 still running"),
    ([ended(0, 2, 5.0, "ValueError: something else")], "job_rank_failed", "ValueError: something else"),
])
def test_the_first_failing_rank_names_the_cause(exits: list[RankExit], category: str, words: str) -> None:
    with pytest.raises(LayerFailed) as exc:
        raise_first_failure(SPEC, exits)
    assert exc.value.category == category and words in exc.value.message


def test_a_rank_the_gate_killed_is_no_failure() -> None:
    raise_first_failure(SPEC, [ended(0, 137, 3.0, killed_by_gate=True)])


def test_a_checkpoint_kill_after_the_last_step_is_a_configuration_error(pytester: pytest.Pytester) -> None:
    """Checked before any job starts (here on the local engine, which runs no jobs: the settings come first)."""
    doc = training_doc("training", {"checkpoint": {"steps": 3, "kill_after": 3}})
    pytester.makefile(".matrix.yaml", m=json.dumps(doc))
    pytester.runpytest("-p", "no:cacheprovider", "-k", "checkpoint")
    (bundle,) = list((pytester.path / "reports").iterdir())
    (item,) = [i for i in json.loads((bundle / "evidence.json").read_text())["items"]
               if i["nodeid"].endswith("::checkpoint::model")]
    assert (item["status"], item["failure"]["category"]) == ("error", "configuration")
    assert "kill_after (3) must be below steps (3)" in item["failure"]["message"]


def heat_item(layer: str, status: str, check: str | None = None) -> dict[str, Any]:
    keys = {"resource": "cpu", "image": "img", "model": "m", "dataset": "d", **({"check": check} if check else {})}
    tail = f"{check}::model" if check else layer
    return {"nodeid": f"x.matrix.yaml::cpu::img::m@d::{tail}", "matrix": "x.matrix.yaml", "layer": layer,
            "keys": keys, "status": status, "blocked_by": None, "reason": None}


@pytest.mark.parametrize(("run", "comm", "shown"), [
    ("passed", "passed", "m@d::model"), ("passed", "failed", "communication::model"),
    ("failed", "passed", "m@d::model"), ("failed", "failed", "m@d::model")])
def test_the_heat_map_model_cell_never_hides_a_failure(run: str, comm: str, shown: str) -> None:
    from pytest_hetero.reporting.view import heatmap

    ev = {"items": [heat_item("model", run), heat_item("business", "passed"), heat_item("model", comm, "communication")],
          "untested": {"items": []}}
    (row,) = heatmap(cast("EvidenceDocument", ev))["rows"]
    model = row["cells"]["model"]
    assert model is not None and model["nodeid"].endswith(shown)


def test_a_result_line_cut_or_garbled_is_the_images_failure_with_its_place_not_a_harness_error() -> None:
    """A result line cut by a log reader (it held 100,000 raw times once) or rewritten by the image's Python is a
    clean ``job_rank_failed`` naming the rank and where the JSON ends, never a JSONDecodeError."""
    whole = json.dumps({"event": "result", **rank(1, {1024: [1e-4, 3e-4, 2e-4]})})
    assert _result('{"event": "joined"}\n' + whole + "\n", 1)["sizes"][0]["median_s"] == 2e-4
    with pytest.raises(LayerFailed) as cut:
        _result(whole[:len(whole) // 2], 1)
    assert cut.value.category == "job_rank_failed"
    assert str(cut.value).startswith(f"rank 1's result line is not whole JSON ({len(whole) // 2} characters, ")
    garbled = json.loads(whole)
    garbled["sizes"][0]["median_s"] = "fast"
    with pytest.raises(LayerFailed) as bad:
        _result(json.dumps(garbled), 0)
    assert str(bad.value) == "rank 0's result line is not the gate program's shape: sizes[0].median_s is str"
    del garbled["world_size"]
    with pytest.raises(LayerFailed) as missing:
        _result(json.dumps(garbled))
    assert str(missing.value).endswith("shape: world_size is missing")
    with pytest.raises(LayerFailed) as deep:
        _result('{"event": "result", "x": ' + "[" * 200_000 + "]" * 200_000 + "}", 3)
    assert str(deep.value).startswith("rank 3's result line nests deeper than the JSON reader goes")
    with pytest.raises(LayerFailed) as none:
        _result('{"event": "joined"}\n', 2)
    assert str(none.value) == "rank 2 ended 0 without its result line"



@pytest.mark.parametrize(("change", "said"), [
    ({"median_s": float("nan")}, "sizes[0].median_s is nan"),
    ({"max_s": float("inf")}, "sizes[0].max_s is inf"),
    ({"first": 10 ** 400}, "sizes[0].first is an integer beyond a float"),
    ({"bytes": 10 ** 400}, "sizes[0].bytes is an integer beyond a float"),
    ({"median_s": 0, "min_s": 0}, "sizes[0] times are not 0 <= min_s <= median_s <= max_s with median_s > 0 (min_s 0, "
                                  "median_s 0, max_s 0.0003)"),
    ({"min_s": -1.0}, "sizes[0] times are not 0 <= min_s <= median_s <= max_s with median_s > 0 (min_s -1.0, "
                      "median_s 0.0002, max_s 0.0003)"),
    ({"median_s": 5.0}, "sizes[0] times are not 0 <= min_s <= median_s <= max_s with median_s > 0 (min_s 0.0001, "
                        "median_s 5.0, max_s 0.0003)"),
    ({"iterations": 0}, "sizes[0].iterations is 0, not at least 1"),
])
def test_a_result_line_whose_numbers_no_measurement_gives_is_the_ranks_failure(change: dict[str, Any], said: str
                                                                               ) -> None:
    """JSON readers take NaN, Infinity and integers of any size: a result line whose times are not finite, negative,
    zero or out of order (an image's Python rewrote it) is a clean ``job_rank_failed``, never a bandwidth from the
    other ranks' times (max() skips a NaN key), a null time in the evidence or an OverflowError."""
    line = json.loads(json.dumps({"event": "result", **rank(1, {1024: [1e-4, 3e-4, 2e-4]})}))
    line["sizes"][0].update(change)
    with pytest.raises(LayerFailed) as bad:
        _result(json.dumps(line), 1)
    assert (bad.value.category, str(bad.value)) == ("job_rank_failed",
                                                    f"rank 1's result line is not the gate program's shape: {said}")
    line = json.loads(json.dumps({"event": "result", **rank(1, {1024: [1e-4, 3e-4, 2e-4]})}))
    line["init_s"] = -0.5
    with pytest.raises(LayerFailed) as early:
        _result(json.dumps(line), 1)
    assert str(early.value).endswith("shape: init_s is negative (-0.5)")


def test_a_nan_the_devices_returned_is_a_wrong_sum_not_a_garbled_line() -> None:
    """``first``/``last`` are what the reduction returned: a NaN or an infinity there (a faulty device) is the
    collective's wrong result, the platform's, as before; only the gate's own numbers must be finite."""
    line = json.loads(json.dumps({"event": "result", **rank(1, {1024: [1e-4, 3e-4, 2e-4]})}))
    line["sizes"][0].update(first=float("nan"), last=float("-inf"))
    got = _result(json.dumps(line), 1)
    facts = measure([rank(0, {1024: [1e-4]}), got], Training())
    assert facts["wrong"] == ["rank 1 read nan/-inf at 1024 B, expected 3"]


def test_ranks_that_measured_a_different_number_of_sizes_are_a_rank_failure_not_an_index_error() -> None:
    """Every rank's result line passed the shape check, but one measured fewer sizes (its program was given other
    sizes, or its line was rewritten): ``job_rank_failed``, whichever rank is first."""
    short, full = {4096: [1e-4]}, {4096: [1e-4], 65536: [2e-4]}
    for results in ([rank(0, full), rank(1, short)], [rank(0, short), rank(1, full)]):
        with pytest.raises(LayerFailed) as exc:
            measure(results, Training())
        assert (exc.value.category, str(exc.value)) == ("job_rank_failed", "ranks measured different message sizes")
