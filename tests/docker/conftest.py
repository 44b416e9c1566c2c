"""Docker-backend tests: a real engine with the offline test images, and per-test run ids.

The session fixture :func:`engine` runs ``tests/infra/docker-engine.sh ensure`` + ``images`` (it
starts dockerd and builds the images on a fresh machine, as root). Without an engine and without
root the Docker tests are skipped, except under ``CI=true`` where that is a failure.

The fixtures live in :mod:`dockerkit` (mypy names a module by its file name, and tests/ may hold only
one module called ``conftest``); this file registers them for tests/docker.
"""

from dockerkit import engine, run_id  # noqa: F401
