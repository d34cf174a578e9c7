"""Kubernetes vocabulary every layer shares; this module imports nothing from the project.

`Permission` is what a check declares and the cluster layer proves with a
SelfSubjectAccessReview; `ApiError` is what the cluster layer raises and checks and the
engine read. Both sit here, below cluster/ and checks/, so that neither imports the other
for them. The API names are the ones several modules spell (adapters, checks, discovery).
"""

from __future__ import annotations

import functools
import uuid
from collections.abc import Iterable
from dataclasses import dataclass

#: the label Kueue reads a job's LocalQueue from (kueue pkg/controller/constants QueueLabel)
QUEUE_LABEL = "kueue.x-k8s.io/queue-name"
#: spec.managedBy of a job MultiKueue dispatches to another cluster (kueue pkg/controller/constants)
MULTIKUEUE = "kueue.x-k8s.io/multikueue"
#: the JobSet API the AIPerf operator and Trainer v2.3.0 create (JobSet v0.12.0 serves it)
JOBSET_API_VERSION = "jobset.x-k8s.io/v1alpha2"
#: the most a ConfigMap's data may hold (Σ len(key) + len(value)): the apiserver's 1 MiB
#: (pkg/apis/core/validation ValidateConfigMap, core.MaxSecretSize) and AIPerf's CONFIGMAP_MAX_SIZE_BYTES
CONFIGMAP_MAX_BYTES = 1_048_576


@dataclass(frozen=True)
class Permission:
    """One (verb, group, resource) a check needs; probed by SelfSubjectAccessReview at start-up.

    With `namespace` and `name` it is one named object in one namespace (a single-object read
    the settings configure, e.g. the cluster-autoscaler status ConfigMap): the chart grants it
    by a Role with `resourceNames` in that namespace, not cluster-wide."""

    verb: str
    resource: str
    group: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""

    @property
    def what(self) -> str:
        """`leases.coordination.k8s.io`, `configmaps`: the resource as RBAC and kubectl spell it."""
        res = f"{self.resource}/{self.subresource}" if self.subresource else self.resource
        return f"{res}.{self.group}" if self.group else res

    def __str__(self) -> str:
        if self.name:
            where = f"{self.namespace}/{self.name}" if self.namespace else self.name
            return f"{self.verb} {self.what} {where}"
        return f"{self.verb} {self.what}"


class ApiError(Exception):
    """An apiserver answer that is not a success. `status` is the HTTP code (0 = no answer)."""

    #: longest message kept: the apiserver passes on what other webhooks say, at any length; the
    #: checks classify it and quote it in a denial (bench/fuzz_parsers.py: "apiserver message")
    MESSAGE_MAX = 8192

    def __init__(self, status: int, message: str, reason: str = "", warnings: tuple[str, ...] = ()) -> None:
        if len(message) > self.MESSAGE_MAX:
            message = f"{message[: self.MESSAGE_MAX]}… ({len(message)} characters)"
        super().__init__(message)
        self.status = status
        self.message = message
        self.reason = reason
        #: the texts of the answer's `Warning` headers (:func:`warning_texts`): what admission layers said
        #: before the refusal (a mutating webhook's warnings, a ValidatingAdmissionPolicy's Warn)
        self.warnings = warnings

    @property
    def transient(self) -> bool:
        return self.status == 0 or self.status == 429 or self.status >= 500

    @property
    def forbidden(self) -> bool:
        return self.status == 403

    @property
    def not_found(self) -> bool:
        return self.status == 404


#: where a dry run's answer (webhook/cluster/live.py dry_run_create) keeps the texts of its `Warning`
#: headers: a key no Kubernetes object has, read by webhook/workloads/admitted.py
WARNINGS_KEY = "preflight.webhook.io/warnings"
#: the most warnings kept of one answer, and of each its length (the apiserver caps them at 4 KiB in all,
#: k8s.io/apiserver pkg/endpoints/filters/warning.go truncateAtTotalRunes)
WARNINGS_MAX = 16
WARNING_MAX = 512


def warning_texts(headers: Iterable[str]) -> tuple[str, ...]:
    """The texts of an apiserver answer's `Warning` headers, in order, without duplicates.

    The apiserver writes each warning an admission layer adds (`warning.AddWarning`) as its own header
    `299 - "<text>"`, `"` and `\\` escaped by a backslash (k8s.io/apimachinery pkg/util/net/http.go
    `NewWarningHeader`, `makeQuotedString`), on a refusal too (the header is written as the warning is
    added, k8s.io/apiserver pkg/endpoints/filters/warning.go). A header that is not in that form is kept
    as it is."""
    out: list[str] = []
    for header in headers:
        code, _, rest = header.strip().partition(" ")
        _, _, quoted = rest.partition(" ")
        if code.isdigit() and len(quoted) >= 2 and quoted[0] == '"' and quoted[-1] == '"':
            text, escaping = [], False
            for ch in quoted[1:-1]:
                if ch == "\\" and not escaping:
                    escaping = True
                    continue
                text.append(ch)
                escaping = False
            value = "".join(text)
        else:
            value = header.strip()
        if len(value) > WARNING_MAX:
            value = value[: WARNING_MAX - 1] + "…"
        if value and value not in out:
            out.append(value)
        if len(out) >= WARNINGS_MAX:
            break
    return tuple(out)


_UID_SPACE = uuid.UUID("6f1c2a4e-9b3d-5e7f-8a1b-2c3d4e5f6a7b")


@functools.lru_cache(maxsize=4096)
def placeholder_uid(kind: str, namespace: str, name: str) -> str:
    """A stable stand-in for the uid an object will get (it does not exist yet): the owners of
    the Dry Run check's probe objects, and the children an AIPerfSweep's controller will create."""
    return str(uuid.uuid5(_UID_SPACE, f"{kind}/{namespace}/{name}"))
