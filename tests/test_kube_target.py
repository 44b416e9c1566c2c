"""The Kubernetes engine's target keys (``spec.target``) read once into :class:`KubeTarget`, without a cluster."""

from __future__ import annotations

import re
from typing import Any, get_args

import pytest

from pytest_hetero.backends.kubernetes.session import PULL, KubeTarget, PullPolicy, parse_target


def test_absent_keys_take_the_engine_s_defaults_and_other_backends_keys_are_ignored() -> None:
    conf = parse_target({"backend": "kubernetes", "docker_host": "unix:///x", "engine_wait_s": 5})
    assert conf == KubeTarget()
    assert (conf.context, conf.namespace, conf.submit_as, conf.pull_policy, conf.image_pull_policy, conf.python,
            conf.unschedulable_grace_s, conf.cleanup_wait_s) == (None, None, "pod", None, None, "python3", 0.0, None)


def test_given_keys_are_read_with_the_pull_policy_the_containers_get() -> None:
    conf = parse_target({"backend": "kubernetes", "context": "kind-gate", "namespace": "gate", "submit_as": "kueue-job",
                         "pull_policy": "if-not-present", "python": "python3.11", "unschedulable_grace_s": 2,
                         "cleanup_wait_s": 0})
    assert (conf.context, conf.namespace, conf.submit_as, conf.image_pull_policy, conf.python) == (
        "kind-gate", "gate", "kueue-job", "IfNotPresent", "python3.11")
    assert (conf.unschedulable_grace_s, conf.cleanup_wait_s) == (2.0, 0.0)


def test_the_pull_table_covers_every_pull_policy() -> None:
    assert set(PULL) == set(get_args(PullPolicy))
    assert {p: parse_target({"pull_policy": p}).image_pull_policy for p in PULL} == {
        "never": "Never", "always": "Always", "if-not-present": "IfNotPresent"}


@pytest.mark.parametrize(("raw", "path"), [({"pull_policy": "sometimes"}, "$.pull_policy"),
                                            ({"cleanup_wait_s": "30"}, "$.cleanup_wait_s"),
                                            ({"namespace": 3}, "$.namespace")])
def test_a_key_the_schema_would_refuse_is_refused_naming_it(raw: dict[str, Any], path: str) -> None:
    """The schema refuses these first (file, line); a target handed to the engine otherwise gets a ValueError
    naming the key, where before ``float("30")`` passed and an unknown pull policy silently meant none."""
    with pytest.raises(ValueError, match=re.escape(f"at `{path}`")):
        parse_target(raw)
