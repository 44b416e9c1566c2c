"""Open Inference Protocol (KServe V2 inference protocol), REST binding.

Spec: kserve.github.io "Open Inference Protocol (V2 Inference Protocol)", REST API:

- ``GET  /v2/health/ready`` → 200 when the server is ready;
- ``GET  /v2/models/{name}[/versions/{version}]`` → metadata ``{"name", "versions"?: [str],
  "platform", "inputs", "outputs"}`` (404 when that model or version is not served);
- ``POST /v2/models/{name}[/versions/{version}]/infer`` with ``{"inputs": [{"name", "shape",
  "datatype", "data"}], "outputs"?: [{"name"}]}`` → ``{"model_name", "model_version"?, "id"?,
  "outputs": [{"name", "shape", "datatype", "data"}]}`` (tensor data row-major, flattened).

Requests carry a batch of samples as one tensor of shape ``[batch, features]``. Options
(``serving.options``): ``input_name`` (default ``predict``), ``datatype`` (default ``FP64``),
``output_name`` (default: the first output), ``versioned`` (default false: infer on the unversioned
path, so the ``model_version`` of every response proves which version answered).
"""

from __future__ import annotations

import json
from typing import TYPE_CHECKING, Any, TypedDict

import httpx
import msgspec

from pytest_hetero.declared import resolve
from pytest_hetero.matrix.model import Serving
from pytest_hetero.serving.protocol import (
    Answer,
    Get,
    Identity,
    PreparedRequest,
    Sample,
    ServingProtocol,
    options_of,
)

if TYPE_CHECKING:  # annotations only (postponed): no run-time dependency on typing_extensions on 3.10
    from typing import NotRequired


class InferInput(TypedDict):
    """One input tensor of an OIP inference request: ``name``, ``shape``, ``datatype`` and its ``data`` (row-major)."""

    name: str
    shape: list[int]
    datatype: str
    data: list[float]


class RequestedOutput(TypedDict):
    """An output an OIP inference request asks for by ``name``."""

    name: str


class InferRequest(TypedDict):
    """``POST /v2/models/{name}[/versions/{v}]/infer`` body (Open Inference Protocol) as the gate sends it."""

    inputs: list[InferInput]
    outputs: NotRequired[list[RequestedOutput]]


class ModelMetadata(msgspec.Struct, frozen=True, kw_only=True):
    """What the gate reads of ``GET /v2/models/{name}`` (model metadata): the ``name`` the server reports and the
    ``versions`` it serves (strings in the spec; a number is read as its text)."""

    name: str | None = None
    versions: list[str | int | float] | None = None


class OutputTensor(msgspec.Struct, frozen=True, kw_only=True):
    """One output tensor of an inference response: ``name``, ``shape`` and its ``data`` (row-major, flattened; any
    JSON values: numbers, or text for ``BYTES``)."""

    name: str | None = None
    shape: list[int]
    data: list[Any]


class InferResponse(msgspec.Struct, frozen=True, kw_only=True):
    """``POST …/infer`` answer (Open Inference Protocol) as the gate reads it: its ``outputs`` and the
    ``model_version`` that answered (a string in the spec; a number is read as its text)."""

    outputs: list[OutputTensor]
    model_version: str | int | float | None = None


class OipOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The ``serving.options`` of this protocol (see the module docstring): ``input_name``, ``datatype``,
    ``output_name`` (None: the first output) and ``versioned`` (None: false)."""

    input_name: str = "predict"
    datatype: str = "FP64"
    output_name: str | None = None
    versioned: bool | None = None


class OpenInferenceProtocol(ServingProtocol):
    """KServe V2 REST client of one served model. Raises OptionsInvalid (a ValueError) when an option of
    ``serving.options`` has another type than :class:`OipOptions` declares."""

    def __init__(self, serving: Serving) -> None:
        super().__init__(serving)
        self.options = options_of(serving, OipOptions)

    name = "oip"
    ready_path = "/v2/health/ready"

    def _model_path(self, versioned: bool) -> str:
        path = f"/v2/models/{self.serving.model_name}"
        return f"{path}/versions/{self.serving.version}" if versioned else path

    def metadata_path(self) -> str:
        """``/v2/models/{name}``."""
        return self._model_path(False)

    def identity(self, get: Get) -> Identity:
        """Model metadata, then the versioned metadata path (404 there: the version is not served)."""
        meta = get(self.metadata_path())
        ident = Identity(found=meta.status_code == 200, raw={self.metadata_path(): _doc(meta)})
        if not ident.found:
            return ident
        try:  # a document of another shape names no model and no version, as one that is no JSON object
            shown = msgspec.convert(ident.raw[self.metadata_path()], ModelMetadata)
        except msgspec.ValidationError:
            shown = ModelMetadata()
        ident.name, ident.versions = shown.name, [str(v) for v in shown.versions or ()]
        versioned = get(self._model_path(True))
        ident.raw[self._model_path(True)] = _doc(versioned)
        ident.version_served = versioned.status_code == 200
        return ident

    def prepare(self, samples: list[Sample], batch: int) -> list[PreparedRequest]:
        """One ``[batch, features]`` tensor per request, named ``input_name``."""
        opts = self.options
        path = self._model_path(bool(opts.versioned)) + "/infer"
        out: list[PreparedRequest] = []
        for start in range(0, len(samples), batch):
            chunk = samples[start:start + batch]
            width = len(chunk[0].features)
            doc: InferRequest = {"inputs": [{
                "name": opts.input_name, "shape": [len(chunk), width], "datatype": opts.datatype,
                "data": [v for s in chunk for v in s.features]}]}
            if opts.output_name is not None:
                doc["outputs"] = [{"name": opts.output_name}]
            out.append(PreparedRequest(path, json.dumps(doc, separators=(",", ":")).encode(),
                                       tuple(range(start, start + len(chunk)))))
        return out

    def parse(self, request: PreparedRequest, body: bytes) -> Answer:
        """Predictions from the named (or first) output: one row per sample, a scalar when the row
        has one element. Raises ValueError on a malformed document or a row count mismatch."""
        wanted = self.options.output_name
        try:
            doc = msgspec.convert(json.loads(body), InferResponse)
            out = next(o for o in doc.outputs if wanted is None or o.name == wanted)
        except (ValueError, StopIteration) as exc:  # msgspec.ValidationError is a ValueError naming the field
            raise ValueError(f"not an inference response: {type(exc).__name__}: {exc}") from None
        data, rows = out.data, out.shape[0] if out.shape else 1
        if rows != len(request.samples) or len(data) % max(rows, 1):
            raise ValueError(f"output has {rows} rows for {len(request.samples)} samples")
        width = len(data) // rows
        preds = [data[i] if width == 1 else data[i * width:(i + 1) * width] for i in range(rows)]
        return Answer(preds, None if doc.model_version is None else str(doc.model_version))


def _doc(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return {"status": response.status_code, "text": response.text[:500]}


resolve(__name__)
