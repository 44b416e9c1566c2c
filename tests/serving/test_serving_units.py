"""Serving pieces without a server: endpoint expansion, data set reading, protocol encoding and
parsing, the service acceptance rules, and the matrix's serving validation."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import httpx
import pytest

from pytest_hetero.errors import CaseError, MatrixInvalid
from pytest_hetero.matrix.acceptance import AcceptanceRule, evaluate, load_rules
from pytest_hetero.matrix.load import load_matrix
from pytest_hetero.matrix.model import Auth, LoadSettings, Rollback, Serving
from pytest_hetero.serving.oip import OpenInferenceProtocol
from pytest_hetero.serving.openai import OpenAICompatible, _sse_text
from pytest_hetero.serving.protocol import OptionsInvalid, Sample, expand_endpoint, read_samples
from serving.helpers import DIGITS, oip, serving_matrix

# its matrices sit in a temporary folder and name the repository's cases/ (or a neighbouring temporary
# folder) by absolute path, which path containment refuses unless allowed (suite_setup.outside_inputs)
pytestmark = pytest.mark.usefixtures("outside_inputs")


def test_expand_endpoint() -> None:
    env = {"HOST": "10.0.0.7", "EMPTY": ""}
    assert expand_endpoint("http://${HOST}:8080/", env) == "http://10.0.0.7:8080"
    assert expand_endpoint("${URL:-http://127.0.0.1:9}", env) == "http://127.0.0.1:9"
    assert expand_endpoint("${EMPTY:-http://a}", env) == "http://a"
    with pytest.raises(KeyError, match="NOPE"):
        expand_endpoint("http://${NOPE}", env)


def test_read_samples_csv_and_jsonl(tmp_path: Path) -> None:
    digits = read_samples(DIGITS / "data" / "digits-test-1.0.0.csv")
    assert len(digits) == 360
    assert (digits[0].index, digits[0].label, len(digits[0].features)) == (0, 0, 64)
    assert digits[0].features[:6] == (0.0, 0.0, 5.0, 13.0, 9.0, 1.0)
    assert (digits[1].index, digits[1].label) == (5, 5)
    texts = tmp_path / "t.jsonl"
    texts.write_text('{"index": 3, "input": "hello", "label": "greeting"}\n\n{"index": 4, "input": "bye"}\n')
    assert read_samples(texts) == [Sample(3, "greeting", text="hello"), Sample(4, None, text="bye")]
    texts.write_text('{"index": 3}\n')
    with pytest.raises(ValueError, match=r"t.jsonl:1: need \{index, input, label\?\}"):
        read_samples(texts)


def test_oip_prepare_and_parse() -> None:
    proto = OpenInferenceProtocol(Serving("oip", "digits", "2.0.0", endpoint="http://x"))
    samples = [Sample(0, 0, (1.0, 2.0)), Sample(5, 5, (3.0, 4.0)), Sample(9, 9, (5.0, 6.0))]
    reqs = proto.prepare(samples, 2)
    assert [(r.path, r.samples) for r in reqs] == [("/v2/models/digits/infer", (0, 1)),
                                                   ("/v2/models/digits/infer", (2,))]
    assert json.loads(reqs[0].body) == {"inputs": [{"name": "predict", "shape": [2, 2], "datatype": "FP64",
                                                    "data": [1.0, 2.0, 3.0, 4.0]}]}
    body = b'{"model_name":"digits","model_version":"2.0.0","outputs":[{"name":"predict","shape":[2,1],' \
           b'"datatype":"INT64","data":[0,5]}]}'
    answer = proto.parse(reqs[0], body)
    assert (answer.predictions, answer.version) == ([0, 5], "2.0.0")
    with pytest.raises(ValueError, match="output has 2 rows for 1 samples"):
        proto.parse(reqs[1], body)
    with pytest.raises(ValueError, match="not an inference response"):
        proto.parse(reqs[1], b'{"error": "boom"}')


def test_oip_reads_the_declared_response_shape_and_names_a_field_of_another_type() -> None:
    proto = OpenInferenceProtocol(Serving("oip", "digits", "2.0.0", endpoint="http://x"))
    (req,) = proto.prepare([Sample(0, 0, (1.0,)), Sample(1, 1, (2.0,))], 2)
    numbered = b'{"model_version":2,"outputs":[{"name":"predict","shape":[2],"data":[NaN,1]}]}'
    answer = proto.parse(req, numbered)
    assert answer.version == "2" and answer.predictions[1] == 1 and answer.predictions[0] != answer.predictions[0]
    # (until msgspec: "output has 2 rows for 2 samples", which blamed the row count)
    with pytest.raises(ValueError, match=r"not an inference response: .*`\$\.outputs\[0\]\.data`"):
        proto.parse(req, b'{"outputs":[{"name":"predict","shape":[2,1],"data":"0,5"}]}')
    with pytest.raises(ValueError, match="not an inference response: StopIteration"):
        OpenInferenceProtocol(Serving("oip", "digits", "2.0.0", endpoint="http://x", options={
            "output_name": "other"})).parse(req, numbered)


def test_oip_identity_reads_name_and_versions_and_nothing_of_a_document_of_another_shape() -> None:
    proto = OpenInferenceProtocol(Serving("oip", "digits", "2.0.0", endpoint="http://x"))

    def answering(doc: object) -> Callable[[str], httpx.Response]:
        return lambda path: httpx.Response(200, json=doc)

    ident = proto.identity(answering({"name": "digits", "versions": ["1.0.0", 2], "platform": "sklearn"}))
    assert (ident.found, ident.name, ident.versions, ident.version_served) == (True, "digits", ["1.0.0", "2"], True)
    # (until msgspec: a name of another type was passed on as it was, the number 5)
    odd = proto.identity(answering({"name": 5, "versions": ["1.0.0"]}))
    assert (odd.found, odd.name, odd.versions) == (True, None, [])
    assert odd.raw["/v2/models/digits"] == {"name": 5, "versions": ["1.0.0"]}


def test_protocol_options_are_read_once_as_declared() -> None:
    proto = OpenInferenceProtocol(Serving("oip", "digits", "2.0.0", endpoint="http://x", options={
        "versioned": True, "input_name": "x", "datatype": "FP32", "output_name": "o", "unknown": 1}))
    (req,) = proto.prepare([Sample(0, 0, (1.0,))], 2)
    assert req.path == "/v2/models/digits/versions/2.0.0/infer"
    assert json.loads(req.body) == {"inputs": [{"name": "x", "shape": [1, 1], "datatype": "FP32", "data": [1.0]}],
                                    "outputs": [{"name": "o"}]}
    unversioned = OpenInferenceProtocol(Serving("oip", "digits", "2.0.0", endpoint="http://x",
                                                options={"versioned": None}))
    assert unversioned.prepare([Sample(0, 0, (1.0,))], 2)[0].path == "/v2/models/digits/infer"
    chat = OpenAICompatible(Serving("openai", "tiny", "1", endpoint="http://x", options={
        "system": "be brief", "max_tokens": 4}))
    (req,) = chat.prepare([Sample(1, None, text="hi")], 1)
    assert json.loads(req.body) == {"model": "tiny", "messages": [{"role": "system", "content": "be brief"},
                                                                  {"role": "user", "content": "hi"}],
                                    "temperature": 0, "max_tokens": 4, "stream": False}


def test_a_protocol_option_of_another_type_is_refused_naming_it() -> None:
    # (until msgspec: max_tokens "16" was coerced, "lots" raised out of int(); an input_name 5 was sent as is)
    with pytest.raises(OptionsInvalid, match=r"protocol 'openai' \(model tiny\): .*`\$\.max_tokens`"):
        OpenAICompatible(Serving("openai", "tiny", "1", endpoint="http://x", options={"max_tokens": "16"}))
    with pytest.raises(OptionsInvalid, match=r"`\$\.input_name`"):
        OpenInferenceProtocol(Serving("oip", "digits", "2.0.0", endpoint="http://x", options={"input_name": 5}))


def test_openai_chat_stream_and_embeddings() -> None:
    sse = (b'data: {"choices":[{"delta":{"role":"assistant"}}]}\n\n'
           b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\ndata: {"choices":[{"delta":{"content":"lo"}}]}\n\n'
           b'data: [DONE]\n\n')
    assert _sse_text(sse) == "Hello"
    chat = OpenAICompatible(Serving("openai", "tiny", "1", endpoint="http://x", options={"stream": True}))
    (req,) = chat.prepare([Sample(1, None, text="hi")], 4)
    assert req.stream and json.loads(req.body) == {"model": "tiny", "messages": [{"role": "user", "content": "hi"}],
                                                   "max_tokens": 16, "temperature": 0, "stream": True}
    assert chat.parse(req, sse).predictions == ["Hello"]
    emb = OpenAICompatible(Serving("openai", "e5", "1", endpoint="http://x", task="embeddings"))
    (req,) = emb.prepare([Sample(1, None, text="a"), Sample(2, None, text="b")], 8)
    body = json.dumps({"data": [{"index": 1, "embedding": [0.0, 2.0]}, {"index": 0, "embedding": [3.0, 4.0]}]})
    answer = emb.parse(req, body.encode())
    assert (answer.predictions, answer.extra) == ([2, 2], {"embedding_norm": [5.0, 2.0]})


@pytest.mark.parametrize("event", [b'{"choices":["x"]}', b'{"choices":[{"delta":[1]}]}', b'{"choices":[7]}',
                                   b'[1]', b'{"choices":{"0":1}}', b'nope',
                                   b'{"choices":[{"delta":null}]}', b'{"choices":[{"delta":{"content":5}}]}'])
def test_a_streamed_event_of_another_shape_is_a_value_error_never_a_traceback(event: bytes) -> None:
    chat = OpenAICompatible(Serving("openai", "tiny", "1", endpoint="http://x", options={"stream": True}))
    (req,) = chat.prepare([Sample(1, None, text="hi")], 4)
    with pytest.raises(ValueError):
        chat.parse(req, b'data: {"choices":[{"delta":{"content":"a"}}]}\n\ndata: ' + event + b"\n\ndata: [DONE]\n")


def test_a_streamed_event_without_choices_adds_nothing() -> None:
    """Valid streams carry chunks with ``choices: []``: the last one under ``stream_options.include_usage`` (only
    ``usage``) and Azure OpenAI's first (only ``prompt_filter_results``); they were refused as of another shape."""
    sse = (b'data: {"choices":[],"prompt_filter_results":[{"prompt_index":0}]}\n\n'
           b'data: {"choices":[{"delta":{"content":"Hel"}}]}\n\ndata: {"choices":[{"delta":{"content":"lo"}}]}\n\n'
           b'data: {"choices":[],"usage":{"prompt_tokens":1,"completion_tokens":2,"total_tokens":3}}\n\n'
           b'data: [DONE]\n\n')
    assert _sse_text(sse) == "Hello"


def test_a_streamed_event_of_another_shape_is_named_by_its_field() -> None:
    with pytest.raises(ValueError, match=r"a streamed event of another shape \(.*`\$\.choices\[0\]\.delta\.content`"):
        _sse_text(b'data: {"choices":[{"delta":{"content":5}}]}\n\n')


@pytest.mark.parametrize("shape", ["5", "[null]", '["x"]', "[]", '{"a": 1}'])
def test_an_oip_output_shape_of_another_type_is_a_value_error_never_a_traceback(shape: str) -> None:
    proto = OpenInferenceProtocol(Serving("oip", "digits", "2.0.0", endpoint="http://x"))
    (req,) = proto.prepare([Sample(0, 0, (1.0, 2.0)), Sample(1, 1, (1.0, 2.0))], 2)
    with pytest.raises(ValueError):
        proto.parse(req, b'{"outputs":[{"name":"p","shape":' + shape.encode() + b',"data":[1, 2]}]}')


LEVELS = {"service": {"levels": [
    {"concurrency": 1, "requests": 10, "errors": 0, "error_rate": 0.0, "requests_per_s": 50.0,
     "samples_per_s": 50.0, "latencies_ms": [10.0, 12.0, 11.0, 30.0]},
    {"concurrency": 8, "requests": 20, "errors": 2, "error_rate": 0.1, "requests_per_s": 180.0,
     "samples_per_s": 180.0, "latencies_ms": [20.0, 40.0, 35.0, 90.0]},
]}}


def _rules(tmp_path: Path, body: str) -> list[AcceptanceRule]:
    path = tmp_path / "rules.yaml"
    path.write_text("apiVersion: pytest-hetero/v1\nkind: AcceptanceRules\nrules:\n" + body)
    return load_rules(path)


def test_service_rules_name_measured_values(tmp_path: Path) -> None:
    rules = _rules(tmp_path, """
  - {name: p95, service_latency: {percentile: 95, max_ms: 50}}
  - {name: p95-c1, service_latency: {percentile: 95, max_ms: 50, concurrency: 1}}
  - {name: errors, error_rate: {max: 0.05}}
  - {name: rps, throughput: {min_rps: 100, concurrency: 8}}
  - {name: rps-all, throughput: {min_rps: 100, min_sps: 10}}
  - {name: c32, throughput: {min_rps: 1, concurrency: 32}}
""")
    results = {r["name"]: r for r in evaluate(rules, LEVELS)}
    assert results["p95"] == {"name": "p95", "kind": "service_latency",
                              "expected": "p95 ≤ 50 ms at every concurrency level",
                              "observed": "c=1: p95 30.0 ms; c=8: p95 90.0 ms", "verdict": "fail",
                              "detail": "bound missed at c=8: p95 90.0 ms",
                              "provenance": {"source": "measured",
                                             "by": "the gate's load generator (outputs.service.levels)"}}
    assert (results["p95-c1"]["verdict"], results["p95-c1"]["observed"]) == ("pass", "c=1: p95 30.0 ms")
    assert results["errors"]["observed"] == "c=1: 0.0000 (0/10); c=8: 0.1000 (2/20)"
    assert results["errors"]["detail"] == "bound missed at c=8: 0.1000 (2/20)"
    assert (results["rps"]["verdict"], results["rps"]["expected"]) == ("pass", "req/s ≥ 100 at concurrency 8")
    assert results["rps-all"]["expected"] == "req/s ≥ 100 and samples/s ≥ 10 at every concurrency level"
    assert results["rps-all"]["detail"] == "bound missed at c=1: 50 req/s, 50 samples/s"
    assert results["c32"]["detail"] == "cannot evaluate: no load level at concurrency 32 (measured: 1, 8)"
    assert evaluate(rules[:1], {"predictions": []})[0]["detail"] == \
        "cannot evaluate: outputs have no service levels (not the run of a served model?)"


@pytest.mark.parametrize(("body", "message"), [
    ("  - {name: x, error_rate: {}}\n", "rule 'x': error_rate needs numeric max"),
    ("  - {name: x, throughput: {concurrency: 8}}\n", "rule 'x': throughput needs numeric min_rps or min_sps"),
    ("  - {name: x, service_latency: {percentile: 120, max_ms: 5}}\n",
     "rule 'x': service_latency needs numeric percentile and max_ms"),
    ("  - {name: x, service_latency: {percentile: 95, max_ms: fast}}\n",
     "rule 'x': service_latency needs numeric percentile and max_ms"),
    # concurrency: true was taken for the level of concurrency 1 (True == 1) before the body's shape was declared
    ("  - {name: x, error_rate: {max: 0.1, concurrency: true}}\n", "rule 'x': error_rate needs numeric max"),
])
def test_bad_service_rules(tmp_path: Path, body: str, message: str) -> None:
    with pytest.raises(CaseError) as info:
        _rules(tmp_path, body)
    assert info.value.message == message


def test_matrix_serving_model(tmp_path: Path) -> None:
    path = tmp_path / "m.matrix.yaml"
    path.write_text(serving_matrix(oip("${U:-http://127.0.0.1:1}", auth={"token_env": "TOK", "protected": True},
                                       load={"concurrency": [1, 8], "duration": "2s", "request_timeout": "500ms"},
                                       rollback={"version": "1.0.0", "endpoint": "http://127.0.0.1:2"})))
    model = load_matrix(path).models[0]
    assert (model.entrypoint, model.sha256) == ((), "")
    assert model.serving == Serving(
        protocol="oip", model_name="digits", version="2.0.0", endpoint="${U:-http://127.0.0.1:1}", deploy=None,
        task="", auth=Auth(token_env="TOK", protected=True),
        load=LoadSettings(concurrency=(1, 8), duration_s=2.0, request_timeout_s=0.5),
        rollback=Rollback(version="1.0.0", endpoint="http://127.0.0.1:2"), options={}, ready_timeout_s=None)


def _problems(tmp_path: Path, text: str) -> list[str]:
    path = tmp_path / "m.matrix.yaml"
    path.write_text(text)
    with pytest.raises(MatrixInvalid) as info:
        load_matrix(path)
    return [f"{p.location.field}: {p.message} | {p.hint}" for p in info.value.problems]


def test_matrix_serving_errors(tmp_path: Path) -> None:
    doc = json.loads(serving_matrix({"protocol": "oip", "model_name": "digits",
                                     "rollback": {"version": "1.0.0"}}))
    doc["spec"]["models"].append({"name": "plain", "version": "1"})
    assert _problems(tmp_path, json.dumps(doc)) == [
        ("spec.models[0:digits-service].serving: serving of model 'digits-service' names neither endpoint nor "
         "deploy | add endpoint: http://HOST:PORT, or deploy: {kind: InferenceService, name: …}"),
        ("spec.models[0:digits-service].serving.rollback: rollback of model 'digits-service' has no way to switch"
         " | add endpoint: (the previous version's URL) or deploy: (the object to patch; default: "
         "serving.deploy)"),
        ("spec.models[1:plain]: model 'plain' has no entrypoint or uri or sha256 and no serving | give entrypoint, "
         "uri and sha256 to run the model, or serving: {protocol, endpoint | deploy, model_name} to validate "
         "a running inference service"),
    ]
    doc = json.loads(serving_matrix({"protocol": "oip", "model_name": "digits", "endpoint": "http://x",
                                     "deploy": {"kind": "Pod", "name": "p"}}))
    assert _problems(tmp_path, json.dumps(doc)) == [
        ("spec.models[0:digits-service].serving.deploy.kind: 'Pod' is not one of ['Deployment', 'Service', "
         "'InferenceService'] | use one of: ['Deployment', 'Service', 'InferenceService']")]
