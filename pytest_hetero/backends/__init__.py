"""Backends: where layers run (local host, Docker engine, Kubernetes cluster), behind one small interface."""
