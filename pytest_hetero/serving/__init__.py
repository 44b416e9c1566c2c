"""Inference-service validation: a served model's startup, load and rollback, through pluggable protocols.

A model with ``serving`` in the matrix is not run by an entrypoint; its layer items talk to the
running service instead::

    models:
      - name: digits-service
        version: 2.0.0                      # the version the service must report
        serving:
          protocol: oip                     # or openai; more via pytest_hetero_make_protocol
          endpoint: ${DIGITS_URL:-http://127.0.0.1:8080}   # or deploy: {kind, name, namespace}
          model_name: digits
          ready_timeout: 30s                # default: the startup layer timeout
          auth: {token_env: DIGITS_TOKEN, protected: true}
          load: {concurrency: [1, 8], requests: 360, batch: 1, request_timeout: 10s}  # or duration: 30s
          rollback: {version: 1.0.0, endpoint: http://127.0.0.1:8090}               # or deploy: {…}
          options: {input_name: predict, datatype: FP64}   # protocol options

startup: ready, model identity and version (metadata and a probe inference), auth (token
accepted; unauthenticated request refused when protected), Kubernetes objects recorded.
model: the data set's inputs at each concurrency level; per-request latency, time to first
byte (streaming), requests/s and samples/s, status counts; raw responses and ``outputs.json``
as artifacts; rollback. business: the data set's AcceptanceRules on those outputs, including
``service_latency``, ``error_rate`` and ``throughput`` rules.

Modules: :mod:`.protocol` (what a protocol client answers, data set samples, endpoint
expansion), :mod:`.oip` (Open Inference Protocol / KServe V2 REST), :mod:`.openai`
(OpenAI-compatible API), :mod:`.load` (concurrent load with per-request latency),
its layer checks (startup, execute, rollback) are :mod:`pytest_hetero.layers.serving`. The built-in
protocols are the last-resort
``pytest_hetero_make_protocol`` (:mod:`pytest_hetero.hooks.builtin`); checks reach the run's hook
and its terminal progress through the LayerContext (``ctx.hook``, ``ctx.progress``).
"""
