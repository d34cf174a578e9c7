"""`check --offline`: the `CRD Schema` result, what kube-apiserver would answer a create of the object with.

The apiserver validates a custom resource against its CRD's structural schema before any validating webhook
sees it, so an object it refuses never reaches the webhook: the CLI reports that refusal as a failure the
webhook's policy cannot change (no action, no skip annotation, no mode). webhook.schema does the validation;
this module words it. With a cluster, the Dry Run check asks the cluster's own apiserver, with its own CRDs,
so the result is offline only.
"""

from __future__ import annotations

from typing import Any

from webhook.results import CheckResult, Status

#: the check name the result is reported under (a SARIF rule `crd-schema`, a JUnit testcase)
SCHEMA_CHECK = "CRD Schema"
SCHEMA_SUMMARY = "the object is valid against its CRD's OpenAPI schema, as kube-apiserver validates a create"

#: the warning a job gets when every result is a skip (webhook.cli.check): such a job is never PASSED
NOTHING_CHECKED = "nothing was checked: every check was skipped"


def schema_result(obj: dict[str, Any]) -> CheckResult:
    """The `CRD Schema` result for one object (SKIP when the project has no CRD for its apiVersion and kind)."""
    from webhook.schema import validate
    from webhook.schema.validate import known_kinds

    verdict = validate(obj)
    if verdict is None:
        kind = obj.get("kind")
        versions = [k.rsplit("/", 1)[0] for k in known_kinds() if k.rsplit("/", 1)[1] == kind]
        return CheckResult(
            SCHEMA_CHECK,
            Status.SKIP,
            f"Skipped: no CRD for {obj.get('apiVersion')} {kind} here (the project's CRDs have "
            f"{', '.join(versions) or 'none of this kind'}), so its schema is not validated",
        )
    what = f"{verdict.kind} CRD ({verdict.version}, {_origin(verdict.version)})"
    details: list[str] = []
    if verdict.not_evaluated:
        details += [f"x-kubernetes-validations rule not evaluated: {r}" for r in verdict.not_evaluated]
    if verdict.transition_rules:
        details.append(f"{verdict.transition_rules} transition rules (oldSelf) apply to updates only")
    if verdict.ok:
        rules = (
            f"; {verdict.rules_evaluated} x-kubernetes-validations rules evaluated" if verdict.rules_evaluated else ""
        )
        return CheckResult(SCHEMA_CHECK, Status.PASS, f"Valid against the {what}{rules}", details=details)
    lines = verdict.lines()
    more = f" ({len(lines) - 1} more below)" if len(lines) > 1 else ""
    if verdict.unknown:
        fix = (
            "Fix: remove or correct the fields the CRD does not declare (kubectl's default field validation is Strict)"
        )
    else:
        fix = "Fix: correct the fields named"
    return CheckResult(
        SCHEMA_CHECK,
        Status.FAIL,
        f"kube-apiserver would refuse it, as the {what} says: {lines[0]}{more}. {fix}",
        details=[*lines, *details],
    )


def _origin(api_version: str) -> str:
    """Where the CRD comes from: `jobset v0.12.0` (e2e/versions.env, as e2e/build.sh fetched it), or the project's."""
    from webhook.schema.validate import source

    pins = dict(p.split("=", 1) for p in source().split() if "=" in p)
    group = api_version.split("/", 1)[0]
    project = {"jobset.x-k8s.io": "jobset", "trainer.kubeflow.org": "trainer"}.get(group)
    return f"{project} {pins[project]}" if project in pins else "the project's e2e/crds"


__all__ = ["SCHEMA_CHECK", "SCHEMA_SUMMARY", "NOTHING_CHECKED", "schema_result"]
