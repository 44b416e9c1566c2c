"""A per-run model run's container that the engine would not remove (an attack on issue 32's Docker spread).

The run container of one slot must be gone before another run is pinned to that slot: a container left running keeps
every process the model left in it (a hostile model's background ``sleep`` here) on the slot's CPUs or devices. The
engine refusing the removal is injected (``DockerBackend._remove`` raises the engine's error once, in the gate's own
process: a conftest of the pytester project), the rest is the real engine."""

from __future__ import annotations

import json
from typing import Any

import pytest
from dockerkit import docker_matrix, evidence, items, leftovers, record

pytestmark = pytest.mark.usefixtures("outside_inputs")

LEAVE = ('"$1" "$2/infer.py" --model "$3" --data "$4" --out "$5" --provider "$6" && (sleep 300 &) && sleep 1')
ENTRYPOINT = ["/bin/sh", "-c", LEAVE, "sh", "{python}", "{code}", "{model}", "{dataset}", "{outputs}", "{provider}"]
REFUSE_ONCE = '''
import docker.errors
from pytest_hetero.backends.docker.engine import DockerBackend
real = DockerBackend._remove
refused = []
def _remove(self, cid):
    labels = self.session.api.inspect_container(cid)["Config"]["Labels"] or {}
    if labels.get("pytest-hetero.role") == "model-run" and not refused:
        refused.append(cid)
        raise docker.errors.APIError("injected: the engine refused to remove the container")
    return real(self, cid)
DockerBackend._remove = _remove
'''


def test_a_slot_whose_run_container_was_not_removed_is_not_given_to_the_next_run(pytester: pytest.Pytester,
                                                                                 run_id: str, engine: Any) -> None:
    """One slot (``target.cpuset: "0"``), two model runs: the first leaves a process behind and its container is not
    removed. Before, the slot went back to the pool all the same: the second run was pinned to CPU 0 beside the first
    run's container, still running with its process, and recorded ``removed_at`` for a container that was not
    removed and isolation proven. Now the first run says its container was not removed, and the slot is not given to
    another run: the second run fails ``container_not_reset`` (infrastructure) naming the container."""
    doc = json.loads(docker_matrix(datasets=2, entrypoint=ENTRYPOINT))
    doc["spec"]["resources"][0].update(model_runs="per-run", concurrency=2)
    doc["spec"]["target"]["cpuset"] = {"cpu": "0"}
    pytester.makefile(".matrix.yaml", d=json.dumps(doc))
    pytester.makeconftest(REFUSE_ONCE)
    pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--hetero-run-id", run_id,
                                  "-k", "startup or model")
    ev = evidence(pytester)
    models = {k: v for k, v in items(ev).items() if k.endswith("::model")}
    assert len(models) == 2
    [first] = [v for v in models.values() if any(r["kind"] == "model.run" for r in v["records"])]
    [second] = [v for v in models.values() if v is not first]
    run = record(first, "model.run")
    assert run["spread"]["removed_at"] is None, run["spread"]
    assert "injected" in run["spread"]["not_removed"], run["spread"]
    assert not [r for r in second["records"] if r["kind"] == "model.run"], second["records"]  # it never ran
    assert second["failure"]["category"] == "container_not_reset", second["failure"]
    assert run["spread"]["container"] in second["failure"]["message"], second["failure"]
    assert leftovers(engine, run_id) == []  # the engine's close removed it
