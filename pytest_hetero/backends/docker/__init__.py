"""The Docker engine: one container per resource × image, placement probes, ``docker exec`` runs.
Modules share one engine state object; nothing here imports another engine."""
