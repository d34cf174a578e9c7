"""The AdmissionReview envelope: parsing with field-path errors, and response building."""

from __future__ import annotations

import json
from typing import Any

import pytest

from webhook.admission import ReviewError, parse_review, parse_review_bytes, response_from_decision, review_response
from webhook.policy import Decision


def _review(**request: Any) -> dict[str, Any]:
    req = {
        "uid": "705ab4f5-6393-11e8-b7cc-42010a800002",
        "kind": {"group": "aiperf.nvidia.com", "version": "v1alpha1", "kind": "AIPerfJob"},
        "resource": {"group": "aiperf.nvidia.com", "version": "v1alpha1", "resource": "aiperfjobs"},
        "requestKind": {"group": "aiperf.nvidia.com", "version": "v1alpha1", "kind": "AIPerfJob"},
        "name": "llama-sweep",
        "namespace": "bench",
        "operation": "CREATE",
        "userInfo": {"username": "alice", "uid": "1", "groups": ["dev"], "extra": {"scopes": ["a"]}},
        "object": {
            "apiVersion": "aiperf.nvidia.com/v1alpha1",
            "kind": "AIPerfJob",
            "metadata": {"name": "llama-sweep"},
        },
        "oldObject": None,
        "dryRun": True,
        "options": {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"},
        "futureField": {"ignored": True},
    }
    req.update(request)
    return {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview", "request": req}


def test_parses_a_full_request_and_keeps_objects_as_dicts() -> None:
    review = parse_review(_review())
    req = review.request
    assert req.uid == "705ab4f5-6393-11e8-b7cc-42010a800002"
    assert (req.kind.group, req.kind.version, req.kind.kind) == ("aiperf.nvidia.com", "v1alpha1", "AIPerfJob")
    assert req.resource.resource == "aiperfjobs"
    assert req.request_kind is not None and req.request_kind.kind == "AIPerfJob"
    assert (req.name, req.namespace, req.operation, req.dry_run) == ("llama-sweep", "bench", "CREATE", True)
    assert req.user_info.username == "alice" and req.user_info.groups == ["dev"]
    assert req.user_info.extra == {"scopes": ["a"]}
    assert type(req.object) is dict and req.object["metadata"] == {"name": "llama-sweep"}
    assert req.old_object is None
    assert req.options == {"apiVersion": "meta.k8s.io/v1", "kind": "CreateOptions"}


def test_delete_needs_no_object() -> None:
    req = parse_review(_review(operation="DELETE", object=None, oldObject={"kind": "AIPerfJob"})).request
    assert req.object is None and req.old_object == {"kind": "AIPerfJob"}


@pytest.mark.parametrize(
    ("mutate", "message"),
    [
        (lambda r: r.pop("apiVersion"), "apiVersion: Field required"),
        (
            lambda r: r.update(apiVersion="admission.k8s.io/v1beta1"),
            "apiVersion: Input should be 'admission.k8s.io/v1'",
        ),
        (lambda r: r.update(kind="Pod"), "kind: Input should be 'AdmissionReview'"),
        (lambda r: r.pop("request"), "request: Field required"),
        (lambda r: r["request"].update(uid=""), "request.uid: String should have at least 1 character"),
        (lambda r: r["request"].update(uid=7), "request.uid: Input should be a valid string"),
        (lambda r: r["request"]["kind"].pop("kind"), "request.kind.kind: Field required"),
        (
            lambda r: r["request"].update(operation="PATCH"),
            "request.operation: Input should be 'CREATE', 'UPDATE', 'DELETE' or 'CONNECT'",
        ),
        (lambda r: r["request"].update(object=[1]), "request.object: Input should be a JSON object"),
        (lambda r: r["request"].update(object=None), "request.object is required for operation CREATE"),
        (
            lambda r: r["request"]["userInfo"].update(groups="dev"),
            "request.userInfo.groups: Input should be a valid list",
        ),
        (lambda r: r["request"].update(dryRun="maybe"), "request.dryRun: Input should be a valid boolean"),
    ],
)
def test_errors_name_the_field_path(mutate: Any, message: str) -> None:
    review = _review()
    mutate(review)
    with pytest.raises(ReviewError) as exc:
        parse_review(review)
    assert str(exc.value).startswith("not an AdmissionReview admission.k8s.io/v1: ")
    assert message in str(exc.value)


def test_list_index_in_field_path() -> None:
    review = _review()
    review["request"]["userInfo"]["groups"] = ["ok", 5]
    with pytest.raises(ReviewError, match=r"request\.userInfo\.groups\[1\]: Input should be a valid string"):
        parse_review(review)


def test_many_errors_are_summarised() -> None:
    with pytest.raises(ReviewError) as exc:
        parse_review({"apiVersion": 1, "kind": 2, "request": {"uid": 3, "kind": 4, "resource": 5, "operation": 6}})
    assert "request.kind: Input should be a JSON object" in str(exc.value)
    assert str(exc.value).endswith("; and 1 more")


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"", "the request body is empty; expected an AdmissionReview JSON object"),
        (b"[]", "not an AdmissionReview: the body is a JSON array, not an object"),
        (b'"x"', "not an AdmissionReview: the body is a JSON string, not an object"),
        (b"null", "not an AdmissionReview: the body is a JSON null, not an object"),
        (b"3", "not an AdmissionReview: the body is a JSON number, not an object"),
        (b"\xff\xfe{", "the request body is not valid JSON: "),
        (b"{", "the request body is not valid JSON: "),
        (b"[" * 100_000, "the request body is not valid JSON: "),
    ],
)
def test_bad_bodies(body: bytes, message: str) -> None:
    with pytest.raises(ReviewError) as exc:
        parse_review_bytes(body)
    assert str(exc.value).startswith(message)


def test_denied_response_carries_403_forbidden() -> None:
    out = review_response("u1", allowed=False, message="no", warnings=["w"], audit_annotations={"a": "b"})
    assert out == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {
            "uid": "u1",
            "allowed": False,
            "status": {"code": 403, "status": "Failure", "reason": "Forbidden", "message": "no"},
            "warnings": ["w"],
            "auditAnnotations": {"a": "b"},
        },
    }


def test_allowed_response_is_minimal() -> None:
    assert review_response("u2", allowed=True) == {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "response": {"uid": "u2", "allowed": True},
    }


def test_response_from_decision() -> None:
    d = Decision(
        allowed=False, message="header\n[X] bad. Fix: y", warnings=["[Y] meh"], audit_annotations={"decision": "denied"}
    )
    resp = response_from_decision("u3", d)["response"]
    assert resp["status"]["message"] == "header\n[X] bad. Fix: y"
    assert resp["warnings"] == ["[Y] meh"]
    assert resp["auditAnnotations"] == {"decision": "denied"}
    json.dumps(resp)  # serialisable as is


# --------------------------------------------------------------------------- the head of a body too large to parse


def test_peek_envelope_reads_the_fields_the_apiserver_writes_before_the_object() -> None:
    from webhook.admission import peek_envelope

    # Go's encoding/json writes AdmissionReview/AdmissionRequest fields in struct order
    body = (
        b'{"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","request":{"uid":"705ab4f5-6393-11e8",'
        b'"kind":{"group":"aiperf.nvidia.com","version":"v1alpha1","kind":"AIPerfJob"},'
        b'"resource":{"group":"aiperf.nvidia.com","version":"v1alpha1","resource":"aiperfjobs"},'
        b'"requestKind":{"group":"aiperf.nvidia.com","version":"v1alpha1","kind":"AIPerfJob"},'
        b'"namespace":"team-a","operation":"CREATE","userInfo":{"username":"alice"},'
        b'"object":{"apiVersion":"aiperf.nvidia.com/v1alpha1","kind":"AIPerfJob","metadata":{"generateName":"b-"},'
        b'"spec":{"benchmark":{"datasets":[{"name":"main"}]}}}}}'
    )
    assert peek_envelope(body) == {
        "uid": "705ab4f5-6393-11e8", "operation": "CREATE", "name": "", "namespace": "team-a", "kind": "AIPerfJob",
    }  # fmt: skip


def test_peek_envelope_needs_the_uid_first_in_request() -> None:
    from webhook.admission import peek_envelope

    assert peek_envelope(b'{"request":{"object":{"metadata":{"uid":"x"}},"uid":"y"}}') is None
