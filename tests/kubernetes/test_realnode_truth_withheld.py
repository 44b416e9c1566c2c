"""The truth stays out of the pod on the real node (issue 30 follow-up): a model whose code folder holds the dataset
and a labels file (as the digits example's does) reads every file it can reach through ``{code}``, its working
folder and the truth files' host paths, in the container the real kubelet and containerd started, and finds no
label: the pod is given a copy of the code folder without them (``model.truth_withheld``). It fails on the accuracy
the gate computes from its real predictions; before the fix it read 360 labels and passed with accuracy 1.0.

(On a KWOK-simulated node the exec runs on the KWOK host itself, where the host paths are readable: only the real
node can show the pod's view.)"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest
from cheatkit import constant_accuracy, layout, sha
from realkit import real_matrix
from support import evidence_of

if TYPE_CHECKING:  # annotation only: 'conftest' names differ per folder at run time
    from conftest import RealNodeCluster

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


@pytest.fixture
def ns(realnode: RealNodeCluster) -> Iterator[str]:
    name = realnode.new_namespace("truth")
    yield name
    realnode.core.delete_namespace(name)


def _item(ev: dict[str, Any], layer: str, dataset: str) -> dict[str, Any]:
    return next(i for i in ev["items"] if i["layer"] == layer and i["keys"].get("dataset") == dataset)


def _record(item: dict[str, Any], kind: str) -> dict[str, Any]:
    found = [r["data"] for r in item["records"] if r["kind"] == kind]
    assert found, f"{item['nodeid']} has no {kind} record: {[r['kind'] for r in item['records']]}"
    return dict(found[-1])


def test_a_model_reading_labels_through_its_code_folder_finds_none_in_the_pod(
        pytester: pytest.Pytester, realnode: RealNodeCluster, realnode_images: dict[str, str], ns: str) -> None:
    cpu = {"name": "cpu", "type": "cpu", "requests": {"cpu": "100m", "memory": "256Mi"}, "limits": {"memory": "1Gi"}}
    spec = json.loads(real_matrix(realnode.info, ns, [cpu]))["spec"]
    paths = layout(pytester.path, {k: spec[k] for k in ("target", "resources", "images", "layers")})
    run_id = "r" + uuid.uuid4().hex[:10]
    pytester.runpytest("-p", "no:cacheprovider", "--hetero-run-id", run_id, str(paths["matrix"]))
    ev = evidence_of(pytester)
    expected = constant_accuracy()
    for dataset in ("inline", "separate"):
        model = _item(ev, "model", dataset)
        assert model["status"] == "passed", model["failure"]
        run = _record(model, "model.run")
        assert (run["simulated"], run["node"]) == (False, realnode.info.node)
        assert run["stderr"]["text"].strip().endswith("labels found: 0")
        withheld = _record(model, "model.truth_withheld")
        assert withheld["how"] == "left out of the copy of the code folder unpacked in the pod"
        assert sorted((f["path"], f["sha256"], f["dataset"], f["why"]) for f in withheld["files"]) == sorted([
            (str(paths["inline"]), sha(paths["inline"]), "inline", "truth file"),
            (str(paths["labels"]), sha(paths["labels"]), "separate", "truth file")])
        business = _item(ev, "business", dataset)
        assert (business["status"], business["failure"]["category"]) == ("failed", "acceptance_failed")
        (result,) = _record(business, "business.rules")["results"]
        assert (result["observed"], result["verdict"], result["provenance"]["source"]) == (expected, "fail",
                                                                                             "computed")
    left: list[Any] = realnode.core.list_namespaced_pod(ns, label_selector=f"pytest-hetero.run-id={run_id}").items
    assert not [p.metadata.name for p in left if p.metadata.deletion_timestamp is None]
