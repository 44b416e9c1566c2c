"""Inference-service validation: a served model's startup, load and rollback, through pluggable protocols.

A model with ``serving`` in the matrix is not run by an entrypoint; its layer items talk to the
running service instead. Modules: :mod:`.protocol` (what a protocol client answers, data set
samples, endpoint expansion), :mod:`.oip` (Open Inference Protocol / KServe V2 REST),
:mod:`.openai` (OpenAI-compatible API), :mod:`.load` (concurrent load with per-request latency),
:mod:`.checks` (startup, execute, rollback), :mod:`.plugin` (hook implementations and terminal
progress).
"""
