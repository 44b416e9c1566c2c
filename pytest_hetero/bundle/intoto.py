"""The in-toto and DSSE shapes the bundle writes, as types: the run's statement and its predicate, a team
sign-off's, a pool's Verification Summary Attestation, and the DSSE envelope around each.

These are :class:`~typing.TypedDict` s: at run time they stay the plain dicts ``json`` writes (the signed bytes
do not change), while mypy checks every field the gate writes and reads back. Formats: in-toto Statement v1
(https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md), DSSE v1
(https://github.com/secure-systems-lab/dsse/blob/master/envelope.md), SLSA VSA v1
(https://slsa.dev/spec/v1.0/verification_summary). What a file on disk holds is untrusted until
:func:`pytest_hetero.bundle.attestation.parse_line` has checked the envelope's shape.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypedDict

if TYPE_CHECKING:  # annotations only (postponed): no run-time dependency on typing_extensions on 3.10
    from typing import NotRequired

    from pytest_hetero.evidence.document import (
        JournalSection,
        NotProvenEntry,
        SelectionCounts,
        UntestedEntry,
        UntestedNode,
        ValidationSection,
    )
    from pytest_hetero.evidence.inputs import MatrixInputs
    from pytest_hetero.evidence.usage import GovernanceUsage, RetryWaste


class DigestSet(TypedDict):
    """An in-toto ``DigestSet``: the gate writes only ``sha256`` (hex)."""

    sha256: str


class Subject(TypedDict):
    """An in-toto ``ResourceDescriptor`` as a statement's subject: a bundle-relative name and its digest."""

    name: str
    digest: DigestSet


class Signature(TypedDict):
    """One DSSE signature: ``sig`` (base64) and ``keyid`` (DSSE leaves it optional; the gate always writes it)."""

    sig: str
    keyid: NotRequired[str]


class Envelope(TypedDict):
    """A DSSE envelope: the base64 ``payload``, its ``payloadType`` and the ``signatures`` over its PAE."""

    payloadType: str
    payload: str
    signatures: list[Signature]


class ToolInfo(TypedDict):
    """The tool that wrote the run's statement."""

    name: str
    version: str


class PredicateRun(TypedDict):
    """The run, as the predicate states it: each field is the evidence's ``run`` field, None when absent."""

    id: str | None
    started_at: str | None
    finished_at: str | None
    finished_at_recovered: bool | None
    exit_status: int | None
    interrupted: bool | None
    git_commit: str | None
    host: str | None
    profile: str | None


class MatrixDigest(TypedDict):
    """A matrix the run planned: its name and the sha256 of its file."""

    name: str
    sha256: str


class PredicateLeftover(TypedDict):
    """Something an engine left behind: each field the leftover's, None when it had none."""

    backend: str | None
    kind: str | None
    namespace: str | None
    name: str | None
    reason: str | None


class PredicateCleanup(TypedDict):
    """Whether every engine removed what it created, and what it left."""

    clean: bool
    leftovers: list[PredicateLeftover]


class PredicateUntested(TypedDict):
    """The untested scope: entries (each as the evidence holds it), never-covered values, counts by status, parts not
    proven, untested nodes."""

    items: list[UntestedEntry]
    never_covered: dict[str, dict[str, list[str]]]
    by_status: dict[str, int]
    not_proven: list[NotProvenEntry]
    nodes: NotRequired[list[UntestedNode]]


class FailedWaste(TypedDict):
    """The failed workloads of the usage ledger's waste: how many, and their resource-seconds."""

    workloads: int
    resource_seconds: dict[str, float]


class PredicateWaste(TypedDict):
    """The usage ledger's waste, summed: failed workloads' requests, retries, idle seconds."""

    failed: FailedWaste
    retries: RetryWaste
    idle_s: float


class PredicateUsage(TypedDict):
    """The usage ledger's sums (:func:`pytest_hetero.bundle.signing.build_predicate`); each value is the
    evidence ledger's (:class:`pytest_hetero.evidence.usage.UsageSection`), ``incomplete`` its count."""

    workloads: int
    simulated: int
    resource_seconds: dict[str, dict[str, dict[str, float]]]
    cpu_s: float
    waste: PredicateWaste
    governance: GovernanceUsage
    incomplete: int


class SnapshotDigest(TypedDict):
    """One cluster snapshot as the predicate names it: its matrix, when it was taken, its sha256."""

    matrix: Any
    taken_at: Any
    sha256: Any


class PredicateCluster(TypedDict):
    """The cluster snapshots' digests, their drift and the change record (``--hetero-snapshot``)."""

    snapshots: list[SnapshotDigest]
    drift: Any
    change_record: Any


class UnrecordedFile(TypedDict):
    """A file the finish found that the gate did not record (or recorded and found gone or changed): its
    bundle path, why (``unrecorded``, ``modified``, ``missing``, ``interrupted``…), the detail, and where it
    was moved (None when it was not)."""

    path: str
    kind: str
    detail: str
    moved_to: str | None


class RunPredicate(TypedDict):
    """The run's signed claim (:func:`pytest_hetero.bundle.signing.build_predicate`, its docstring says each
    section); the finish adds ``journal``, ``inputs``, ``unrecorded_files`` and ``inputs_not_kept``."""

    tool: ToolInfo
    run: PredicateRun
    matrices: list[MatrixDigest]
    owners: dict[str, dict[str, str]]
    target: list[dict[str, Any]]
    counts: dict[str, dict[str, int]]
    totals: dict[str, int]
    verdict: str
    verdict_reason: str | None
    selection: SelectionCounts | None
    cleanup: PredicateCleanup
    untested: PredicateUntested
    does_not_prove: dict[str, str]
    validation: ValidationSection
    cluster: PredicateCluster | None
    usage: PredicateUsage | None
    run_signer: str | None
    journal: NotRequired[JournalSection | None]
    inputs: NotRequired[dict[str, MatrixInputs]]
    unrecorded_files: NotRequired[list[UnrecordedFile]]
    inputs_not_kept: NotRequired[list[Any]]


class RunStatement(TypedDict):
    """The run's in-toto Statement v1 (``statement.intoto.json``)."""

    _type: str
    subject: list[Subject]
    predicateType: str
    predicate: RunPredicate


class ChainLink(TypedDict):
    """A sign-off's place in the chain: its 1-based ``sequence`` and the sha256 of the line before it."""

    sequence: int
    previous: str


class SignoffRun(TypedDict):
    """The run a sign-off decides on, as the run's predicate states it (None where it does not)."""

    id: Any
    verdict: Any
    finished_at: Any


class SignoffPredicate(TypedDict):
    """A team's decision (:func:`pytest_hetero.bundle.attestation.signoff_predicate`)."""

    role: str
    layers: list[str]
    decision: str
    conditions: str | None
    signed_at: str
    run: SignoffRun
    failing: dict[str, int]
    chain: NotRequired[ChainLink]


class SignoffStatement(TypedDict):
    """A sign-off's in-toto Statement v1: its subject is the run's statement."""

    _type: str
    subject: list[Subject]
    predicateType: str
    predicate: SignoffPredicate


class PoolIdentity(TypedDict):
    """What names a pool in its VSA subject digest (each the pool status's field, which every pool status has)."""

    matrix: str
    pool: str
    requests: dict[str, str]
    node_selector: dict[str, str]
    nodes: list[str]


class Verifier(TypedDict):
    """The VSA's verifier: the gate's id and ``{"pytest-hetero": version}``."""

    id: str
    version: dict[str, str]


class PolicyRef(TypedDict):
    """The VSA's policy: the validation-levels policy URI and the matrix file's digest."""

    uri: str
    digest: DigestSet


class InputAttestation(TypedDict):
    """An attestation the VSA was derived from: the run's ``statement.intoto.json`` and its digest."""

    uri: str
    digest: DigestSet


class HeteroExtension(TypedDict):
    """The VSA's ``pytestHetero`` extension: validity window, each task type's level, the pool's domain."""

    validFrom: str
    validUntil: str
    taskTypes: dict[str, str]
    domain: str


class VsaPredicate(TypedDict):
    """A SLSA Verification Summary Attestation v1 predicate, with the ``pytestHetero`` extension."""

    verifier: Verifier
    timeVerified: str
    resourceUri: str
    policy: PolicyRef
    inputAttestations: list[InputAttestation]
    verificationResult: str
    verifiedLevels: list[str]
    pytestHetero: HeteroExtension


class VsaStatement(TypedDict):
    """One pool's VSA statement (a line of ``validation.intoto.jsonl``)."""

    _type: str
    subject: list[Subject]
    predicateType: str
    predicate: VsaPredicate
