"""``hetero cleanup`` for the Docker engine: containers, volumes and images that runs left behind.

Selected by the ``pytest-hetero.run-id`` label and the ``pytest-hetero.created-at`` label (else the
engine's creation time), see :mod:`pytest_hetero.backends.labels`. The docker SDK is imported only
when a cleanup runs.
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from functools import partial
from typing import Any

from pytest_hetero.backends.labels import CREATED_AT, RUN_ID, CleanupEntry, CleanupError, selected


def cleanup(args: argparse.Namespace) -> list[CleanupEntry]:
    """Remove (or list, with ``args.dry_run``) the Docker containers, volumes, images and networks of
    pytest-hetero runs selected by ``args`` (``run_id``, ``older_than_s``, ``docker_host``).

    Raises CleanupError when the engine cannot be reached.
    """
    import docker.errors

    from pytest_hetero.backends.docker.api import list_labelled
    from pytest_hetero.backends.docker.client import API_TIMEOUT_S, connection, make_client

    target = {"docker_host": args.docker_host} if args.docker_host else {}
    try:
        api = make_client(connection(target), API_TIMEOUT_S)
        api.ping()
    except docker.errors.DockerException as exc:
        raise CleanupError(f"Docker engine not reachable: {exc}") from None
    now, out = time.time(), []
    try:
        removers: dict[str, Callable[[str], Any]] = {
            "container": partial(api.remove_container, force=True, v=True),
            "volume": partial(api.remove_volume, force=True), "image": partial(api.remove_image, force=True),
            "network": api.remove_network}
        for kind, listed in list_labelled(api, RUN_ID):
            labels, remove = listed.labels, partial(removers[kind], listed.id)
            match, age = selected(labels, listed.created, args, now)
            if not match:
                continue
            entry: CleanupEntry = {"backend": "docker", "kind": kind, "name": listed.name,
                                   "run_id": labels.get(RUN_ID), "created_at": labels.get(CREATED_AT),
                                   "age_s": None if age is None else round(age, 1), "removed": False, "error": None}
            if not args.dry_run:
                try:
                    remove()
                    entry["removed"] = True
                except docker.errors.NotFound:
                    entry["removed"] = True
                except docker.errors.APIError as exc:
                    entry["error"] = str(exc.explanation or exc)
            out.append(entry)
    finally:
        api.close()
    return out
