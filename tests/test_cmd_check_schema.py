"""`check --offline` validates each job against its CRD's OpenAPI schema (issue 36, item 4).

What kube-apiserver would answer a create with (webhook/schema; e2e/test_crd_schema_oracle.py compares it
with the real apiserver) is the `CRD Schema` result, first among the checks: FAIL (the apiserver refuses
the object, exit 1), PASS, or SKIP (no CRD of the project's for that apiVersion). A job whose only results are
skips is NOT CHECKED, a warning in every format, never PASSED. Each status is tested with its exact words,
in text, json, junit, sarif and github.
"""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.test_cmd_check import AIPERF, main
from tests.test_cmd_check_ci import junit_schema, sarif_validator
from tests.test_cmd_check_pipeline import REPORT_SCHEMA
from webhook.cli.schema_check import NOTHING_CHECKED
from webhook.schema import validate
from webhook.schema.errors import SchemaVerdict
from webhook.schema.rules import run_rules

__all__ = ["junit_schema", "sarif_validator"]

TRAINJOB_CRD = "the TrainJob CRD (trainer.kubeflow.org/v1alpha1, trainer v2.3.0)"
NO_REF = (
    f"kube-apiserver would refuse it, as {TRAINJOB_CRD} says: spec.runtimeRef: Required value (1 more below). "
    "Fix: correct the fields named"
)
NOT_CHECKED_NOTE = (
    "<nil>: Invalid value: null: some validation rules were not checked because the object was invalid; correct the "
    "existing errors to complete validation"
)
TYPO = (
    f'kube-apiserver would refuse it, as {TRAINJOB_CRD} says: TrainJob in version "v1alpha1" cannot be handled as a '
    'TrainJob: strict decoding error: unknown field "spec.trainr". Fix: remove or correct the fields the CRD does '
    "not declare (kubectl's default field validation is Strict)"
)


def trainjob(name: str, **spec: Any) -> dict[str, Any]:
    return {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainJob",
        "metadata": {"name": name, "namespace": "team-a"},
        "spec": spec,
    }


def jobset(**changes: Any) -> dict[str, Any]:
    container = {"name": "node", "image": "pytorch/pytorch:2.7.1", "ports": [{"containerPort": 80}]}
    doc = {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {"name": "js", "namespace": "team-a"},
        "spec": {
            "replicatedJobs": [
                {"name": "node", "template": {"spec": {"template": {"spec": {"containers": [container]}}}}}
            ]
        },
    }
    doc["spec"].update(changes)
    return doc


def write(tmp_path: Path, *docs: dict[str, Any], name: str = "job.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump_all(docs, sort_keys=False), encoding="utf-8")
    return p


def no_ref() -> dict[str, Any]:
    return trainjob("no-ref", trainer={"image": "pytorch/pytorch:2.7.1", "numNodes": 2})


def typo() -> dict[str, Any]:
    return trainjob("typo", runtimeRef={"name": "torch-distributed"}, trainr={"image": "x"})


# ---- webhook.schema: the apiserver's answers --------------------------------------------------------------


def test_required_type_enum_and_duplicates_nested_in_pod_templates() -> None:
    pod = "spec.replicatedJobs[0].template.spec.template.spec"
    doc = jobset(successPolicy={"operator": "Some"})
    c = doc["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]["spec"]["containers"]
    c[0]["ports"].append({"containerPort": 80})
    c.append({"image": "x", "imagePullPolicy": 3})
    verdict = validate(doc)
    assert verdict is not None
    # (the apiserver's order is kube-openapi's; the oracle compares the findings as a multiset)
    assert sorted(zip(verdict.lines(), (e.reason for e in verdict.errors))) == [
        (NOT_CHECKED_NOTE, "FieldValueInvalid"),
        (
            f'{pod}.containers[0].ports[1]: Duplicate value: {{"containerPort":80,"protocol":"TCP"}}',
            "FieldValueDuplicate",
        ),
        (
            f'{pod}.containers[1].imagePullPolicy: Invalid value: "integer": {pod}.containers[1].imagePullPolicy in '
            'body must be of type string: "integer"',
            "FieldValueTypeInvalid",
        ),
        (f"{pod}.containers[1].name: Required value", "FieldValueRequired"),
        (
            'spec.successPolicy.operator: Unsupported value: "Some": supported values: "All", "Any"',
            "FieldValueNotSupported",
        ),
    ]


def test_unknown_fields_anywhere_are_the_strict_decoding_error_alone() -> None:
    doc = jobset(bogus=1)
    doc["metadata"]["foo"] = 1
    rj = doc["spec"]["replicatedJobs"][0]
    rj["replicas"] = "two"  # a type error too: never reached, as the decoder refuses first
    rj["template"]["spec"]["template"]["spec"]["containers"][0]["imagee"] = "x"
    verdict = validate(doc)
    assert verdict is not None and verdict.errors == []
    assert verdict.lines() == [
        'JobSet in version "v1alpha2" cannot be handled as a JobSet: strict decoding error: unknown field '
        '"metadata.foo", unknown field "spec.bogus", unknown field '
        '"spec.replicatedJobs[0].template.spec.template.spec.containers[0].imagee"'
    ]


def test_cel_rules_evaluated_and_transition_rules_left_to_updates() -> None:
    verdict = validate(trainjob("Bad.Name", runtimeRef={"name": "r"}, managedBy="me"))
    assert verdict is not None
    assert verdict.lines() == [
        'metadata.name: Invalid value: "Bad.Name": a lowercase RFC 1123 subdomain must consist of lower case '
        "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. "
        "'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')",
        "<nil>: Invalid value: metadata.name must match RFC 1035 DNS label format",
        'spec.managedBy: Invalid value: "me": ManagedBy must be trainer.kubeflow.org/trainjob-controller or '
        "kueue.x-k8s.io/multikueue if set",
    ]
    assert (verdict.rules_evaluated, verdict.transition_rules, verdict.not_evaluated) == (3, 2, [])


def test_a_rule_the_library_cannot_evaluate_is_named_never_failed() -> None:
    schema = {
        "type": "object",
        "properties": {"spec": {"type": "object", "properties": {"cpu": {"type": "string"}}}},
        "x-kubernetes-validations": [
            {"rule": "quantity(self.spec.cpu).isLessThan(quantity('1'))", "message": "too big"},
            {"rule": "self.spec.missing == 'x'", "message": "absent"},
            {"rule": "self.spec == oldSelf.spec", "message": "immutable"},
            {"rule": "self.spec.cpu == '1'", "message": "cpu must be 1"},
        ],
    }
    verdict = SchemaVerdict("Widget", "example.com/v1")
    run_rules({"spec": {"cpu": "2"}}, schema, verdict, skip=False)
    assert [str(e) for e in verdict.errors] == ["<nil>: Invalid value: cpu must be 1"]
    assert verdict.not_evaluated[0] == (
        "<root>: quantity(self.spec.cpu).isLessThan(quantity('1')) (it calls isLessThan, quantity, a Kubernetes CEL "
        "library function)"
    )
    assert verdict.not_evaluated[1].startswith("<root>: self.spec.missing == 'x' (its evaluation failed here: ")
    assert (verdict.rules_evaluated, verdict.transition_rules) == (1, 1)


def test_defaults_apply_before_validation_and_status_is_not_validated_on_create() -> None:
    doc = jobset()
    doc["status"] = {"restarts": "many"}  # reset on create: the kind has the status subresource
    doc["metadata"]["labels"] = {"app": None}  # a null where it is not nullable is dropped, in a map too
    doc["spec"]["replicatedJobs"][0]["replicas"] = 2.0  # an integral number is an integer
    verdict = validate(doc)
    assert verdict is not None and verdict.ok, verdict.lines()
    assert validate({"apiVersion": "v1", "kind": "ConfigMap"}) is None


# ---- the CLI: each status, its exact words, in every format -----------------------------------------------


def test_a_trainjob_without_runtime_ref_fails_offline_as_the_apiserver_refuses_it(tmp_path, capsys) -> None:
    code, out, err = main(capsys, "-f", str(write(tmp_path, no_ref())), "--offline")
    assert (code, err) == (1, "")
    lines = out.splitlines()
    assert lines[:3] == [
        "TrainJob team-a/no-ref",
        f"  ✗ CRD Schema               {NO_REF}",
        f"      {NOT_CHECKED_NOTE}",
    ]
    assert lines[-3] == (
        "  FAILED: 0 passed, 1 failed, 0 warnings, 24 skipped; kube-apiserver would refuse it; cluster checks were "
        "skipped (offline)"
    )
    assert lines[-1] == "Summary: 1 job checked in 1 file: 0 passed, 0 passed with warnings, 1 failed"


def test_an_unknown_field_fails_with_the_strict_decoding_error(tmp_path, capsys) -> None:
    code, out, _ = main(capsys, "-f", str(write(tmp_path, typo())), "--offline")
    assert code == 1
    assert f"  ✗ CRD Schema               {TYPO}" in out.splitlines()


def test_a_valid_job_passes_the_schema_first(capsys) -> None:
    code, out, _ = main(capsys, "-f", str(AIPERF), "--offline")
    assert code == 0
    assert out.splitlines()[1] == (
        "  ✓ CRD Schema               Valid against the AIPerfJob CRD (aiperf.nvidia.com/v1alpha1, the project's "
        "e2e/crds)"
    )


def test_schema_failure_in_json_junit_sarif_github(tmp_path, capsys, junit_schema, sarif_validator) -> None:
    import jsonschema

    p = write(tmp_path, no_ref(), typo())
    code, out, _ = main(capsys, "-f", str(p), "--offline", "-o", "json")
    assert code == 1
    entries = json.loads(out)
    jsonschema.validate(entries, json.loads(REPORT_SCHEMA.read_text()))
    assert [(e["name"], e["passed"], e["checks"][0]) for e in entries] == [
        (
            "no-ref",
            False,
            {
                "name": "CRD Schema",
                "status": "fail",
                "message": NO_REF,
                "details": ["spec.runtimeRef: Required value", NOT_CHECKED_NOTE],
                "hints": [],
                "duration_ms": None,
            },
        ),
        (
            "typo",
            False,
            {
                "name": "CRD Schema",
                "status": "fail",
                "message": TYPO,
                "details": [TYPO.split(" says: ")[1].split(". Fix:")[0]],
                "hints": [],
                "duration_ms": None,
            },
        ),
    ]

    second = entries[1]["line"]

    code, out, _ = main(capsys, "-f", str(p), "--offline", "-o", "junit")
    assert code == 1
    junit_schema.validate(out)
    failures = ET.fromstring(out).findall(".//testcase[@name='CRD Schema']/failure")
    assert [f.get("message") for f in failures] == [NO_REF, TYPO]

    code, out, _ = main(capsys, "-f", str(p), "--offline", "-o", "sarif")
    assert code == 1
    log = json.loads(out)
    sarif_validator.validate(log)
    run = log["runs"][0]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["crd-schema"]
    assert [(r["ruleId"], r["level"], r["message"]["text"].split("\n")[0]) for r in run["results"]] == [
        ("crd-schema", "error", f"TrainJob team-a/no-ref: {NO_REF}"),
        ("crd-schema", "error", f"TrainJob team-a/typo: {TYPO}"),
    ]

    code, out, _ = main(capsys, "-f", str(p), "--offline", "-o", "github")
    assert code == 1
    f = str(p).replace("%", "%25").replace(":", "%3A").replace(",", "%2C")
    assert out.splitlines()[:2] == [
        f"::error file={f},line=1,title=CRD Schema%3A TrainJob team-a/no-ref::{NO_REF}%0A{NOT_CHECKED_NOTE}",
        f"::error file={f},line={second},title=CRD Schema%3A TrainJob team-a/typo::{TYPO}",
    ]


def test_a_runtime_the_apiserver_refuses_is_reported_and_a_valid_one_stays_skipped(tmp_path, capsys) -> None:
    def runtime(name: str, **policy: Any) -> dict[str, Any]:
        return {
            "apiVersion": "trainer.kubeflow.org/v1alpha1",
            "kind": "ClusterTrainingRuntime",
            "metadata": {"name": name},
            "spec": {"mlPolicy": {"numNodes": 1, **policy}, "template": {"spec": {"replicatedJobs": []}}},
        }

    p = write(tmp_path, runtime("both", torch={}, mpi={}), runtime("good", torch={}))
    code, out, _ = main(capsys, "-f", str(p), "--offline")
    assert code == 1
    assert out.splitlines() == [
        "ClusterTrainingRuntime default/both",
        "  ✗ CRD Schema  kube-apiserver would refuse it, as the ClusterTrainingRuntime CRD "
        "(trainer.kubeflow.org/v1alpha1, trainer v2.3.0) says: spec.mlPolicy: Invalid value: Only one of the policy "
        "can be configured. Fix: correct the fields named",
        "  FAILED: 0 passed, 1 failed, 0 warnings, 0 skipped; kube-apiserver would refuse it",
        "",
        "Summary: 1 job checked in 1 file: 0 passed, 0 passed with warnings, 1 failed; 1 other object skipped "
        "(ClusterTrainingRuntime 1)",
    ]


# ---- only skips: NOT CHECKED, never PASSED ----------------------------------------------------------------

OFFLINE_CHECKS = "Job Render, Image Reference, ConfigMap Size, Name Length, Accelerator Limits"


@pytest.fixture
def unchecked(tmp_path: Path) -> tuple[Path, Path]:
    """(a config letting the annotation skip every offline check, an AIPerfJob of a version the project has no
    CRD for, skipping them all): every result is a skip."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(f"skippableChecks: [{OFFLINE_CHECKS}]\n")
    doc = yaml.safe_load(AIPERF.read_text())
    doc["apiVersion"] = "aiperf.nvidia.com/v1beta1"
    doc["metadata"]["annotations"] = {"preflight.webhook.io/skip-checks": OFFLINE_CHECKS}
    return cfg, write(tmp_path, doc)


def test_only_skips_is_not_checked_in_text_and_fails_under_fail_on_warn(unchecked, capsys) -> None:
    cfg, p = unchecked
    code, out, err = main(capsys, "-f", str(p), "--offline", "--config", str(cfg))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert lines[1] == (
        "  - CRD Schema               Skipped: no CRD for aiperf.nvidia.com/v1beta1 AIPerfJob here (the project's "
        "CRDs have aiperf.nvidia.com/v1alpha1), so its schema is not validated"
    )
    assert lines[-4:] == [
        f"  ! {NOTHING_CHECKED}",
        "  NOT CHECKED: 0 passed, 0 failed, 1 warnings, 25 skipped; cluster checks were skipped (offline)",
        "",
        "Summary: 1 job checked in 1 file: 0 passed, 0 passed with warnings, 0 failed, 1 not checked",
    ]
    code, _, _ = main(capsys, "-f", str(p), "--offline", "--config", str(cfg), "--fail-on", "warn")
    assert code == 1


def test_only_skips_is_a_warning_in_json_junit_sarif_github(unchecked, capsys, junit_schema, sarif_validator) -> None:
    cfg, p = unchecked
    base = ("-f", str(p), "--offline", "--config", str(cfg))
    code, out, err = main(capsys, *base, "-o", "json")
    [entry] = json.loads(out)
    assert (code, entry["passed"], entry["has_warnings"], entry["notes"]) == (0, True, True, [NOTHING_CHECKED])
    assert {c["status"] for c in entry["checks"]} == {"skip"}
    assert err.endswith("0 passed, 0 passed with warnings, 0 failed, 1 not checked\n")

    _, out, _ = main(capsys, *base, "-o", "junit")
    junit_schema.validate(out)
    assert f"warning: {NOTHING_CHECKED}" in [e.text for e in ET.fromstring(out).iter("system-out")]

    _, out, _ = main(capsys, *base, "-o", "sarif")
    log = json.loads(out)
    sarif_validator.validate(log)
    assert [(r["level"], r["message"]["text"]) for r in log["runs"][0]["results"]][-1] == (
        "warning",
        f"AIPerfJob bench/llama-sweep: {NOTHING_CHECKED}",
    )

    _, out, _ = main(capsys, *base, "-o", "github")
    assert out.splitlines()[-2].startswith("::warning ") and out.splitlines()[-2].endswith(f"::{NOTHING_CHECKED}")
    assert (
        out.splitlines()[-1]
        == "Summary: 1 job checked in 1 file: 0 passed, 0 passed with warnings, 0 failed, 1 not checked"
    )


def test_integer_formats_and_label_keys_in_the_apiservers_words() -> None:
    doc = jobset()
    doc["metadata"]["labels"] = {"example.com/": "x", "v": "v" * 64}
    rj = doc["spec"]["replicatedJobs"][0]
    rj["replicas"] = 2**40
    rj["template"]["spec"]["parallelism"] = 1.5
    verdict = validate(doc)
    assert verdict is not None
    parallelism = "spec.replicatedJobs[0].template.spec.parallelism"
    assert sorted(verdict.lines()) == sorted(
        [
            'metadata.labels: Invalid value: "example.com/": name part must be non-empty',
            'metadata.labels: Invalid value: "example.com/": name part must consist of alphanumeric characters, '
            "'-', '_' or '.', and must start and end with an alphanumeric character (e.g. 'MyName',  or 'my.name',  "
            "or '123-abc', regex used for validation is '([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')",
            f'metadata.labels: Invalid value: "{"v" * 64}": must be no more than 63 bytes',
            '<nil>: Invalid value: "": Checked value must be of type integer with format int32 in '
            "spec.replicatedJobs[0].replicas",
            f'{parallelism}: Invalid value: "float64": {parallelism} in body must be of type int32: "float64"',
            f'<nil>: Invalid value: "": Checked value must be of type integer with format int32 in {parallelism}',
            NOT_CHECKED_NOTE,
        ]
    )


AIPERF_VALID = "Valid against the AIPerfJob CRD (aiperf.nvidia.com/v1alpha1, the project's e2e/crds)"
NO_CRD = (
    "Skipped: no CRD for aiperf.nvidia.com/v1beta1 AIPerfJob here (the project's CRDs have "
    "aiperf.nvidia.com/v1alpha1), so its schema is not validated"
)


def test_pass_and_skip_in_json_and_junit(unchecked, capsys, junit_schema) -> None:
    """A pass and a skip are not findings (sarif, github): json and junit name them."""
    cfg, p = unchecked
    for argv, status, message in (
        (("-f", str(AIPERF)), "pass", AIPERF_VALID),
        (("-f", str(p), "--config", str(cfg)), "skip", NO_CRD),
    ):
        _, out, _ = main(capsys, *argv, "--offline", "-o", "json")
        [entry] = json.loads(out)
        assert entry["checks"][0] == {
            "name": "CRD Schema",
            "status": status,
            "message": message,
            "details": [],
            "hints": [],
            "duration_ms": None,
        }
        _, out, _ = main(capsys, *argv, "--offline", "-o", "junit")
        junit_schema.validate(out)
        [case] = ET.fromstring(out).findall(".//testcase[@name='CRD Schema']")
        if status == "skip":
            assert case.find("skipped").get("message") == NO_CRD  # type: ignore[union-attr]
        else:
            assert case.find("system-out").text == AIPERF_VALID  # type: ignore[union-attr]
        _, out, _ = main(capsys, *argv, "--offline", "-o", "sarif")
        assert all(r["ruleId"] != "crd-schema" for r in json.loads(out)["runs"][0]["results"])
        _, out, _ = main(capsys, *argv, "--offline", "-o", "github")
        assert "CRD Schema" not in out
