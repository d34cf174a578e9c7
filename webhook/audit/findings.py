"""What one judgement means for the reports, the metrics and `preflight-webhook report`: one Finding
per check, with the Policy Reports result (pass | fail | warn | skip) of "what enforce would do".

Audit mode gets its meaning here: a finding is `fail` exactly when the webhook in `enforce` mode
would deny the job for that check. The verdict is the domain's: `webhook.policy.decide` is asked
again, with mode enforce, on the same results the controller's evaluation produced (checks do not
depend on the mode, so the results are those an enforce-mode webhook computes). Nothing here judges.

    status FAIL (or timed out) and the enforce verdict is deny -> fail
    status FAIL, but the check's action is warn or audit          -> warn  (enforce admits it)
    status WARN (cannot verify, transient, advisory)               -> warn
    status PASS, INFO                                              -> pass
    status SKIP, or the check's action is off                      -> skip

The result names follow openreports.io v1alpha1 (`Result`: pass;fail;warn;error;skip in
github.com/openreports/reports-api apis/openreports.io/v1alpha1/report_types.go). `error` is never
written: an unknown is a warning here, never a deny (the project's rule).
"""

from __future__ import annotations

from dataclasses import dataclass

from webhook.config import Settings
from webhook.policy import AUDIT, DENY, OFF, WARN, decide
from webhook.preflight import OBJECT_SIZE, Evaluation
from webhook.results import PreflightResults, Status

PASS, FAIL, WARNING, SKIP = "pass", "fail", "warn", "skip"
RESULTS = (PASS, FAIL, WARNING, SKIP)

#: how the check's finding is treated now, in the job's effective mode (Decision.verdicts)
NOW = {DENY: "denied", WARN: "warned", AUDIT: "recorded", OFF: "off", "": "none"}


@dataclass(frozen=True, slots=True)
class Finding:
    check: str
    #: pass | fail | warn | skip: what the webhook in enforce mode does with this finding
    result: str
    #: the check's message, one line (a fail says what, why and the fix)
    message: str
    #: the check's own status (pass | fail | warn | skip | info)
    status: str
    #: the verdict in enforce mode: deny | warn | audit | off | "" (Decision.verdicts)
    enforce: str
    #: the verdict in the job's effective mode now (the global mode, or its namespace's label)
    now: str


def _one_line(text: str) -> str:
    return " ".join(text.split())


def enforce_verdicts(ev: Evaluation, settings: Settings) -> list[str]:
    """Each result's verdict (Decision.verdicts) had the webhook run in enforce mode.

    The single-finding verdicts `webhook.preflight` gives before the checks run (Object Size) carry
    their own action (objectLimits.action), as `preflight._single_verdict` passes it to decide."""
    local = settings
    if any(r.name == OBJECT_SIZE for r in ev.results.checks):
        local = settings.model_copy(update={"checks": {**settings.checks, OBJECT_SIZE: settings.object_limits.action}})
    return decide(ev.results, settings=local, mode="enforce").verdicts


def findings(ev: Evaluation, settings: Settings) -> list[Finding]:
    """One Finding per check result of the evaluation, in the engine's order."""
    results: PreflightResults = ev.results
    enforce = enforce_verdicts(ev, settings)
    now = ev.decision.verdicts or [""] * len(results.checks)
    out: list[Finding] = []
    for r, verdict, current in zip(results.checks, enforce, now, strict=False):
        if verdict == OFF:
            result = SKIP
        elif verdict == DENY:
            result = FAIL
        elif r.status is Status.FAIL or r.timed_out or r.status is Status.WARN:
            result = WARNING
        elif r.status is Status.SKIP:
            result = SKIP
        else:  # pass, info
            result = PASS
        message = _one_line(r.message)
        if verdict == OFF and not message:
            message = f"the check is off (checks.{r.name}: off)"
        out.append(Finding(r.name, result, message, r.status.value, verdict, NOW.get(current, current)))
    return out


def denied_checks(ev: Evaluation, settings: Settings) -> list[str]:
    """The checks the webhook in enforce mode would deny the job for, in order."""
    return [f.check for f in findings(ev, settings) if f.result == FAIL]
