"""``hetero cleanup``: remove what crashed runs left behind (containers, volumes, images), per backend.

Each backend contributes a *cleaner*: a module named in :data:`CLEANERS` that exposes
``add_arguments(parser)`` (its own options, prefixed by the backend name) and
``cleanup(args) -> list[dict]`` (what it removed, or would remove with ``--dry-run``: dicts with
``backend``, ``kind``, ``name``, ``run_id``, ``created_at``, ``age_s``, ``removed``, ``error``).
``--backend all`` (the default) runs every cleaner. The Kubernetes backend adds itself with one
line in :data:`CLEANERS`.

Selection: objects labelled ``pytest-hetero.run-id`` whose ``pytest-hetero.created-at`` label
(else the engine's creation time) is older than ``--older-than``, and/or whose run id is
``--run-id``. At least one of the two is required, so a bare ``hetero cleanup`` never removes
a run that is still going.

Exit codes: 0 every selected object removed (or listed with ``--dry-run``); 1 some removal
failed; 2 bad arguments or a backend that cannot be reached.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
import time
from datetime import datetime
from typing import Any

from pytest_hetero.matrix.load import parse_duration

CLEANERS: dict[str, str] = {
    "docker": "pytest_hetero.cli.cleanup",
    "kubernetes": "pytest_hetero.backends.kubernetes.cleanup",
}
"""Backend name → module providing ``add_arguments(parser)`` and ``cleanup(args)``."""


class CleanupError(Exception):
    """A backend cannot be reached or refuses to list its objects (exit code 2)."""


def add_parser(subparsers: Any) -> None:
    """Register ``cleanup`` on the ``hetero`` sub-parsers (an argparse ``_SubParsersAction``)."""
    parser = subparsers.add_parser("cleanup", help="remove containers/volumes left behind by crashed runs",
                                   description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--backend", choices=[*CLEANERS, "all"], default="all",
                        help="which backend's leftovers to remove (default: all)")
    parser.add_argument("--older-than", metavar="DURATION", default=None,
                        help="only objects created more than DURATION ago (e.g. 2h, 30m, 90s)")
    parser.add_argument("--run-id", metavar="ID", default=None, help="only objects of this run")
    parser.add_argument("--dry-run", action="store_true", help="list what would be removed, remove nothing")
    parser.add_argument("--json", action="store_true", help="print a JSON list instead of one line per object")
    for module in CLEANERS.values():
        importlib.import_module(module).add_arguments(parser)
    parser.set_defaults(func=run)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The Docker cleaner's option: ``--docker-host`` (else ``DOCKER_HOST`` / the local socket)."""
    parser.add_argument("--docker-host", metavar="URL", default=None,
                        help="Docker engine to clean (default: DOCKER_HOST, else the local socket)")


def _age_s(created_at: str | None, fallback_epoch: float | None, now: float) -> float | None:
    if created_at:
        try:
            return now - datetime.strptime(created_at, "%Y-%m-%dT%H:%M:%S%z").timestamp()
        except ValueError:
            pass
    return None if fallback_epoch is None else now - fallback_epoch


def selected(labels: dict[str, str], engine_created: float | None, args: argparse.Namespace,
             now: float) -> tuple[bool, float | None]:
    """``(matches, age in seconds)`` of an object by its labels against ``--run-id``/``--older-than``."""
    from pytest_hetero.backends.docker.client import CREATED_AT, RUN_ID

    age = _age_s(labels.get(CREATED_AT), engine_created, now)
    if args.run_id is not None and labels.get(RUN_ID) != args.run_id:
        return False, age
    if args.older_than_s is not None and (age is None or age < args.older_than_s):
        return False, age
    return True, age


def cleanup(args: argparse.Namespace) -> list[dict[str, Any]]:
    """Remove (or list) the Docker containers, volumes and images of pytest-hetero runs selected by ``args``.

    Raises CleanupError when the engine cannot be reached.
    """
    import docker
    import docker.errors

    from pytest_hetero.backends.docker.client import API_TIMEOUT_S, CREATED_AT, RUN_ID, connection, make_client

    target = {"docker_host": args.docker_host} if args.docker_host else {}
    try:
        api = make_client(connection(target), API_TIMEOUT_S)
        api.ping()
    except docker.errors.DockerException as exc:
        raise CleanupError(f"Docker engine not reachable: {exc}") from None
    now, out = time.time(), []
    try:
        found: list[tuple[str, str, dict[str, str], float | None, Any]] = []
        for c in api.containers(all=True, filters={"label": RUN_ID}):
            found.append(("container", c["Names"][0].lstrip("/"), c["Labels"] or {}, c.get("Created"),
                          lambda i=c["Id"]: api.remove_container(i, force=True, v=True)))
        for v in api.volumes(filters={"label": RUN_ID}).get("Volumes") or []:
            found.append(("volume", v["Name"], v.get("Labels") or {}, None,
                          lambda n=v["Name"]: api.remove_volume(n, force=True)))
        for i in api.images(all=True, filters={"label": RUN_ID}):
            found.append(("image", i["Id"], i.get("Labels") or {}, i.get("Created"),
                          lambda n=i["Id"]: api.remove_image(n, force=True)))
        for kind, name, labels, created, remove in found:
            match, age = selected(labels, created, args, now)
            if not match:
                continue
            entry = {"backend": "docker", "kind": kind, "name": name, "run_id": labels.get(RUN_ID),
                     "created_at": labels.get(CREATED_AT), "age_s": None if age is None else round(age, 1),
                     "removed": False, "error": None}
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


def run(args: argparse.Namespace) -> int:
    """Run ``hetero cleanup`` for parsed ``args``; returns the exit code (see module docstring)."""
    if args.older_than is None and args.run_id is None:
        sys.stderr.write("hetero cleanup: give --older-than DURATION and/or --run-id ID "
                         "(a bare cleanup could remove a run that is still going)\n")
        return 2
    try:
        args.older_than_s = None if args.older_than is None else parse_duration(args.older_than)
    except ValueError:
        sys.stderr.write(f"hetero cleanup: --older-than {args.older_than!r} is not a duration (e.g. 2h, 30m)\n")
        return 2
    names = list(CLEANERS) if args.backend == "all" else [args.backend]
    entries: list[dict[str, Any]] = []
    unreachable = False
    for name in names:
        try:
            entries += importlib.import_module(CLEANERS[name]).cleanup(args)
        except CleanupError as exc:
            sys.stderr.write(f"hetero cleanup: {name}: {exc}\n")
            unreachable = True
    if args.json:
        print(json.dumps(entries, indent=2))
    else:
        for e in entries:
            verb = "would remove" if args.dry_run else ("removed" if e["removed"] else f"FAILED ({e['error']})")
            age = "?" if e["age_s"] is None else f"{e['age_s'] / 3600:.1f}h"
            print(f"{verb} {e['backend']} {e['kind']} {e['name']} (run {e['run_id']}, age {age})")
        if not entries:
            print("nothing to clean up")
    if unreachable:
        return 2
    return 1 if any(e["error"] for e in entries) else 0
