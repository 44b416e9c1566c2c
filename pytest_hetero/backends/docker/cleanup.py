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

    from pytest_hetero.backends.docker.client import API_TIMEOUT_S, connection, make_client

    target = {"docker_host": args.docker_host} if args.docker_host else {}
    try:
        api = make_client(connection(target), API_TIMEOUT_S)
        api.ping()
    except docker.errors.DockerException as exc:
        raise CleanupError(f"Docker engine not reachable: {exc}") from None
    now, out = time.time(), []
    try:
        found: list[tuple[str, str, dict[str, str], float | None, Callable[[], Any]]] = []
        for c in api.containers(all=True, filters={"label": RUN_ID}):
            found.append(("container", c["Names"][0].lstrip("/"), c["Labels"] or {}, c.get("Created"),
                          partial(api.remove_container, c["Id"], force=True, v=True)))
        for v in api.volumes(filters={"label": RUN_ID}).get("Volumes") or []:
            found.append(("volume", v["Name"], v.get("Labels") or {}, None,
                          partial(api.remove_volume, v["Name"], force=True)))
        for i in api.images(all=True, filters={"label": RUN_ID}):
            found.append(("image", i["Id"], i.get("Labels") or {}, i.get("Created"),
                          partial(api.remove_image, i["Id"], force=True)))
        for n in api.networks(filters={"label": RUN_ID}):  # a training job's network (after its containers)
            found.append(("network", n["Name"], n.get("Labels") or {}, None,
                          partial(api.remove_network, n["Id"])))
        for kind, name, labels, created, remove in found:
            match, age = selected(labels, created, args, now)
            if not match:
                continue
            entry: CleanupEntry = {"backend": "docker", "kind": kind, "name": name, "run_id": labels.get(RUN_ID),
                                     "created_at": labels.get(CREATED_AT),
                                     "age_s": None if age is None else round(age, 1), "removed": False,
                                     "error": None}
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
