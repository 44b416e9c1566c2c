"""The Kubernetes engine: nodes, workload pods through the real scheduling path, exec into pods.
Modules share one engine state object; nothing here imports another engine."""
