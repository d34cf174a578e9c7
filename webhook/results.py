"""Check results in AIPerf's shape: CheckResult and PreflightResults.

The JSON form is AIPerf's `{"passed","has_warnings","checks":[...]}` so that tools
built for `aiperf kube preflight -o json` read ours unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from typing import Any

from webhook.config import Action


class Status(str, Enum):
    PASS = "pass"
    FAIL = "fail"
    WARN = "warn"
    SKIP = "skip"
    INFO = "info"


@dataclass(slots=True)  # ~20 per request: slots make them cheaper to build and read
class CheckResult:
    """One verdict of one check.

    `message` is what users read. A FAIL's message says what is wrong, why, and
    ends with `Fix: …` naming real objects. `details` are extra lines (never secret
    values); `hints` are follow-ups for the CLI's text output.
    """

    name: str
    status: Status
    message: str
    details: list[str] = field(default_factory=list)
    hints: list[str] = field(default_factory=list)
    duration_ms: float | None = None
    #: lines the user must see whatever the status (the verdict came from cached data older
    #: than cacheStaleSeconds): policy shows each as a warning. Also in `details`.
    caveats: list[str] = field(default_factory=list)
    #: the check did not finish by the deadline (a WARN whose verdict is unknown): policy
    #: applies timeoutAction instead of the check's action. Not part of the JSON form.
    timed_out: bool = False

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "status": self.status.value,
            "message": self.message,
            "details": list(self.details),
            "hints": list(self.hints),
            "duration_ms": None if self.duration_ms is None else round(self.duration_ms, 1),
        }


@dataclass
class PreflightResults:
    checks: list[CheckResult] = field(default_factory=list)
    #: each check's own action when the config names none (Check.default_action), set by the
    #: engine from the checks it ran; not part of the JSON form
    default_actions: dict[str, Action] = field(default_factory=dict)
    #: what admission changes in the pods, by pod group (`limits.cpu 500m on container "node", set by admission`),
    #: when the Dry Run saw it (webhook/engine.py judge_admitted; `plan --cluster` lists it); not part of the JSON form
    admitted: dict[str, list[str]] = field(default_factory=dict)

    def default_action(self, name: str) -> Action:
        return self.default_actions.get(name, "deny")

    @property
    def passed(self) -> bool:
        return not any(c.status is Status.FAIL for c in self.checks)

    @property
    def has_warnings(self) -> bool:
        return any(c.status is Status.WARN for c in self.checks)

    def by_status(self, status: Status) -> list[CheckResult]:
        return [c for c in self.checks if c.status is status]

    def to_dict(self) -> dict[str, Any]:
        return {
            "passed": self.passed,
            "has_warnings": self.has_warnings,
            "checks": [c.to_dict() for c in self.checks],
        }
