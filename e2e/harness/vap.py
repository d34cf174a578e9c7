"""ValidatingAdmissionPolicies (and MutatingAdmissionPolicies) for the e2e tests: the layer of admission behind the webhook that only
a dry run reaches (the Dry Run check's reason to exist). One builder, so every test's policy has the
shape Kubernetes documents (admissionregistration.k8s.io/v1: a ValidatingAdmissionPolicy with one
CEL validation, and its binding with validationActions [Deny] over labelled namespaces)."""

from __future__ import annotations

from typing import Any


def deny_policy(
    name: str,
    *,
    resource: str,
    validation: dict[str, str],
    namespace_labels: dict[str, str],
    group: str = "",
    version: str = "v1",
) -> list[dict[str, Any]]:
    """The policy ``name`` refusing the CREATE of ``resource`` (in ``group``/``version``) unless the CEL
    ``validation`` holds (``{"expression": ..., "message" or "messageExpression": ...}``), in the
    namespaces labelled ``namespace_labels``; and its binding (same name)."""
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "matchConstraints": {
                    "resourceRules": [
                        {
                            "apiGroups": [group],
                            "apiVersions": [version],
                            "operations": ["CREATE"],
                            "resources": [resource],
                        }
                    ]
                },
                "validations": [dict(validation)],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "ValidatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "validationActions": ["Deny"],
                "matchResources": {"namespaceSelector": {"matchLabels": dict(namespace_labels)}},
            },
        },
    ]


def mutate_policy(
    name: str, expression: str, *, namespace_labels: dict[str, str], patch_type: str = "ApplyConfiguration"
) -> list[dict[str, Any]]:
    """The MutatingAdmissionPolicy ``name`` applying the CEL ``expression`` (an ApplyConfiguration, or a
    JSONPatch when ``patch_type`` says so) to the Pods created in the namespaces labelled
    ``namespace_labels``, with failurePolicy Fail and no reinvocation; and its binding (same name)."""
    key = "applyConfiguration" if patch_type == "ApplyConfiguration" else "jsonPatch"
    return [
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicy",
            "metadata": {"name": name},
            "spec": {
                "failurePolicy": "Fail",
                "reinvocationPolicy": "Never",
                "matchConstraints": {
                    "resourceRules": [
                        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
                    ]
                },
                "mutations": [{"patchType": patch_type, key: {"expression": expression}}],
            },
        },
        {
            "apiVersion": "admissionregistration.k8s.io/v1",
            "kind": "MutatingAdmissionPolicyBinding",
            "metadata": {"name": name},
            "spec": {
                "policyName": name,
                "matchResources": {"namespaceSelector": {"matchLabels": dict(namespace_labels)}},
            },
        },
    ]
