"""OpenAI-compatible API: model list, embeddings and chat completions (optionally streamed).

Spec: the OpenAI API reference, as implemented by compatible servers (vLLM, llama.cpp, …):

- ``GET  /v1/models`` → ``{"object": "list", "data": [{"id", "object": "model", …}]}``;
- ``POST /v1/embeddings`` with ``{"model", "input": [str]}`` → ``{"data": [{"index",
  "embedding": [float]}], "model", "usage"}``;
- ``POST /v1/chat/completions`` with ``{"model", "messages": [{"role", "content"}], "max_tokens",
  "temperature", "stream"}`` → ``{"choices": [{"message": {"content"}}], "model"}``, or with
  ``stream: true`` server-sent events ``data: {"choices": [{"delta": {"content"}}]}`` lines ending
  with ``data: [DONE]``.

The API has no model version: identity is the model id in ``/v1/models``, which must equal
``serving.model_name`` (put the version in the id when it matters). Readiness is ``/v1/models``
answering 200. Predictions: embeddings → the vector's dimension, with ``embedding_norm`` (L2) per
sample as an extra field; chat → the answer text. Options: ``max_tokens`` (default 16),
``stream`` (default false; a server that streams anyway is understood), ``system`` (a system prompt).
With ``stream``, time to first byte is measured per request (:mod:`.load`).
"""

from __future__ import annotations

import json
import math
from typing import TypedDict

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


class OpenAIOptions(msgspec.Struct, frozen=True, kw_only=True):
    """The ``serving.options`` of this protocol (see the module docstring): ``max_tokens``, ``stream`` (None: false)
    and ``system`` (None: no system prompt)."""

    max_tokens: int = 16
    stream: bool | None = None
    system: str | None = None


class OpenAICompatible(ServingProtocol):
    """OpenAI-compatible client of one served model (``task``: ``embeddings`` or ``chat``). Raises OptionsInvalid
    (a ValueError) when an option of ``serving.options`` has another type than :class:`OpenAIOptions` declares."""

    def __init__(self, serving: Serving) -> None:
        super().__init__(serving)
        self.options = options_of(serving, OpenAIOptions)

    name = "openai"
    ready_path = "/v1/models"

    @property
    def task(self) -> str:
        """``embeddings`` or ``chat`` (default ``chat``)."""
        return self.serving.task or "chat"

    def metadata_path(self) -> str:
        """``/v1/models``."""
        return "/v1/models"

    def identity(self, get: Get) -> Identity:
        """Found when ``model_name`` is one of the listed model ids; versions are not reported."""
        response = get(self.metadata_path())
        try:
            doc = response.json()
            ids = [str(m["id"]) for m in doc["data"]]
        except (ValueError, KeyError, TypeError):
            doc, ids = {"status": response.status_code, "text": response.text[:500]}, []
        found = response.status_code == 200 and self.serving.model_name in ids
        return Identity(found=found, name=self.serving.model_name if found else None,
                        raw={self.metadata_path(): doc, "model_ids": ids})

    def prepare(self, samples: list[Sample], batch: int) -> list[PreparedRequest]:
        """Embeddings: ``batch`` texts per request; chat: one prompt per request."""
        model = self.serving.model_name
        opts = self.options
        out: list[PreparedRequest] = []
        if self.task == "embeddings":
            for start in range(0, len(samples), batch):
                chunk = samples[start:start + batch]
                body: EmbeddingsRequest = {"model": model, "input": [_text(s) for s in chunk]}
                out.append(PreparedRequest("/v1/embeddings", _encode(body),
                                           tuple(range(start, start + len(chunk)))))
            return out
        stream = bool(opts.stream)
        for pos, sample in enumerate(samples):
            messages: list[ChatMessage] = [] if opts.system is None else [{"role": "system", "content": opts.system}]
            messages.append({"role": "user", "content": _text(sample)})
            chat: ChatRequest = {"model": model, "messages": messages, "temperature": 0,
                                    "max_tokens": opts.max_tokens, "stream": stream}
            out.append(PreparedRequest("/v1/chat/completions", _encode(chat), (pos,), stream=stream))
        return out

    def parse(self, request: PreparedRequest, body: bytes) -> Answer:
        """Embedding dimensions and norms, or the chat answer (streamed deltas joined).

        Raises ValueError on a malformed document or a count mismatch.
        """
        try:
            if request.stream or body.lstrip().startswith(b"data:"):  # some servers always stream
                return Answer([_sse_text(body)])
            doc = json.loads(body)
            if self.task == "embeddings":
                rows = sorted(doc["data"], key=lambda d: int(d["index"]))
                vectors = [[float(v) for v in row["embedding"]] for row in rows]
                if len(vectors) != len(request.samples):
                    raise ValueError(f"{len(vectors)} embeddings for {len(request.samples)} inputs")
                norms = [round(math.sqrt(sum(v * v for v in vec)), 6) for vec in vectors]
                return Answer([len(vec) for vec in vectors], extra={"embedding_norm": norms})
            return Answer([str(doc["choices"][0]["message"]["content"])])
        except (KeyError, TypeError, IndexError, json.JSONDecodeError) as exc:
            raise ValueError(f"not an OpenAI {self.task} response: {type(exc).__name__}: {exc}") from None


def _text(sample: Sample) -> str:
    return sample.text if sample.text is not None else " ".join(f"{v:g}" for v in sample.features)


class ChatMessage(TypedDict):
    """One message of a chat completion request: ``role`` (``system``/``user``) and ``content``."""

    role: str
    content: str


class ChatRequest(TypedDict):
    """``POST /v1/chat/completions`` body (OpenAI API) as the gate sends it: deterministic, short, maybe streamed."""

    model: str
    messages: list[ChatMessage]
    temperature: int
    max_tokens: int
    stream: bool


class EmbeddingsRequest(TypedDict):
    """``POST /v1/embeddings`` body (OpenAI API): the ``model`` and the texts to embed (``input``)."""

    model: str
    input: list[str]


def _encode(doc: ChatRequest | EmbeddingsRequest) -> bytes:
    return json.dumps(doc, separators=(",", ":")).encode()


class StreamDelta(msgspec.Struct, frozen=True, kw_only=True):
    """``choices[0].delta`` of a streamed chat event: the ``content`` it adds (None or absent: nothing)."""

    content: str | None = None


class StreamChoice(msgspec.Struct, frozen=True, kw_only=True):
    """A choice of a streamed chat event: its ``delta`` (absent: an empty one)."""

    delta: StreamDelta = msgspec.field(default_factory=StreamDelta)


class StreamEvent(msgspec.Struct, frozen=True, kw_only=True):
    """A ``data:`` event of a streamed chat completion (OpenAI API ``chat.completion.chunk``): its ``choices`` (the
    first is read; an empty list adds nothing — the API's last chunk under ``stream_options.include_usage`` carries
    only ``usage``, and Azure OpenAI's first only ``prompt_filter_results``)."""

    choices: list[StreamChoice]


def _sse_text(body: bytes) -> str:
    """Join ``choices[0].delta.content`` of every ``data:`` event until ``[DONE]`` (an event without a
    ``delta`` adds nothing). Raises ValueError (JSONDecodeError) for an event that is not JSON, ValueError naming
    the field for an event of another shape than :class:`StreamEvent` (no ``choices``, a ``choices[0]`` or
    ``delta`` that is not an object, a ``content`` that is not text); an empty ``choices`` adds nothing."""
    parts: list[str] = []
    for line in body.decode("utf-8").splitlines():
        if not line.startswith("data:"):
            continue
        data = line[5:].strip()
        if data == "[DONE]":
            break
        try:
            event = msgspec.convert(json.loads(data), StreamEvent)
        except msgspec.ValidationError as exc:
            raise ValueError(f"a streamed event of another shape ({exc}): {data[:200]!r}") from None
        if event.choices:
            parts.append(event.choices[0].delta.content or "")
    return "".join(parts)


resolve(__name__)
