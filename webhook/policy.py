"""Policy: results + mode + per-check actions → a decision, rendered once.

A decision is data (allowed, message, warnings, audit annotations, and the verdict for each
check result); the server and the CLI only render it. Text rules: the denial has one header
line, then one line per failed check `[Check Name] what is wrong. Fix: how`.

Warnings follow what the apiserver does with them (k8s.io/apiserver
pkg/endpoints/filters/warning.go): it deduplicates identical texts, drops a text with a
control character, and lets warnings through untouched while together they stay within
4096 runes (`truncateAtTotalRunes`); past that it truncates EVERY warning to 256 runes
(`truncateItemRunes`) and stops at 4096. kubectl prints each warning as one
`Warning: <text>` line. So: one warning per finding, one line, no "Warning:" prefix, at most
256 characters — a finding that is longer goes on, word for word, in the next warning
(`[Check Name] … rest`), so that nothing is ever cut, not even if other webhooks' warnings
push the request into truncation. Whole findings are sent in order while they fit 4096
characters in all; then one last warning says how many more there are and where to read them.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Set
from dataclasses import dataclass, field
from enum import StrEnum

from webhook.config import Settings
from webhook.results import CheckResult, PreflightResults, Status

#: k8s.io/apiserver pkg/endpoints/filters/warning.go truncateItemRunes (Python len() counts runes)
WARNING_MAX_CHARS = 256
#: the same file's truncateAtTotalRunes
WARNINGS_MAX_TOTAL = 4096
AUDIT_VALUE_MAX = 8192

#: an unreadable object's problem is quoted up to this length (paths carry user-chosen keys)
ADAPTER_ERROR_MAX_CHARS = 1000

#: what each check result became in the decision (Decision.verdicts)
DENY, WARN, AUDIT, OFF, NONE = "deny", "warn", "audit", "off", ""


class Outcome(StrEnum):
    """What became of one admission request: Decision.outcome and the metrics' decision label."""

    ALLOWED = "allowed"
    DENIED = "denied"
    WARNED = "warned"
    AUDITED = "audited"
    #: no adapter for the kind: allowed without checks
    UNHANDLED = "unhandled"
    #: DELETE / CONNECT: allowed untouched
    SKIPPED = "skipped"
    #: the request itself was refused (400/413/415)
    INVALID = "invalid"
    #: not judged now: too many large reviews at once (HTTP 503 with Retry-After, or timeoutAction deny)
    BUSY = "busy"
    #: our own bug: allowed (fail-open) with a warning
    ERROR = "error"


@dataclass
class Decision:
    allowed: bool
    message: str | None = None
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)
    outcome: Outcome = Outcome.ALLOWED
    denied_checks: list[str] = field(default_factory=list)
    #: one per results.checks entry: "deny" (in the denial), "warn" (shown as a warning),
    #: "audit" (recorded only), "off" (the check is off), "" (nothing to report: pass, skip)
    verdicts: list[str] = field(default_factory=list)


#: the control characters (Unicode category Cc: U+0000-U+001F, U+007F-U+009F) that are not
#: whitespace, for str.translate to drop; the whitespace ones are collapsed by split()
_DROP_CONTROLS = {c: None for c in (*range(0x20), *range(0x7F, 0xA0)) if not chr(c).isspace()}


def _one_line(text: str) -> str:
    """Whitespace collapsed and control characters dropped: the apiserver drops a warning
    that holds one (k8s.io/apimachinery pkg/util/net NewWarningHeader)."""
    return " ".join(text.translate(_DROP_CONTROLS).split())


def clip(text: str, limit: int = WARNING_MAX_CHARS) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def wrap(text: str, lead: str, limit: int = WARNING_MAX_CHARS) -> list[str]:
    """`lead + text` as warnings of at most `limit` characters, broken between words, nothing left out.

    A finding that fits is one warning; a longer one goes on in the next warnings, each
    starting `lead` + "…" so that they read as one finding. A single word longer than a
    warning is split (never dropped). The last WRAPPED findings' lines are kept: the creates of one
    spec give the same findings, and a long one's word-by-word walk was ~2 % of a review's CPU.
    """
    return list(_wrapped(text, lead, limit))


#: findings whose warning lines `wrap` keeps (each at most a few KiB of text: a message, never a secret value)
WRAPPED = 512


@functools.lru_cache(maxsize=WRAPPED)
def _wrapped(text: str, lead: str, limit: int) -> tuple[str, ...]:
    text = _one_line(text)
    if len(lead) + len(text) <= limit:  # most findings: one warning, as the loop below would make it
        return (lead + text,)
    cont = f"{lead}… "
    lines: list[str] = []
    current = lead
    for word in text.split(" "):
        while True:
            fresh = current in (lead, cont)
            candidate = current + word if fresh else f"{current} {word}"
            if len(candidate) <= limit:
                current = candidate
                break
            if not fresh:
                lines.append(current)
                current = cont
                continue
            room = max(1, limit - len(current))  # an over-long word: fill this warning, go on with the rest
            lines.append(current + word[:room])
            word, current = word[room:], cont
    if current not in (lead, cont) or not lines:
        lines.append(current)
    return tuple(lines)


def warning_lines(r: CheckResult, prefix: str = "") -> list[str]:
    """A finding as warnings: one when it fits WARNING_MAX_CHARS, else continued word for word."""
    return wrap(r.message, f"{prefix}[{r.name}] ")


def more_findings(n: int) -> str:
    return f"… {n} more finding(s) not shown: run `preflight-webhook check` on the manifest, or read the findings audit annotation"


def _cap_total(groups: list[list[str]]) -> list[str]:
    """Whole findings, in order, while they fit WARNINGS_MAX_TOTAL characters; then one warning
    saying how many were left out (room for it is kept)."""
    out: list[str] = []
    total = 0
    for i, group in enumerate(groups):
        size = sum(len(line) for line in group)
        rest = sum(len(line) for g in groups[i + 1 :] for line in g)
        if total + size + rest <= WARNINGS_MAX_TOTAL:
            return out + [line for g in groups[i:] for line in g]  # everything left fits
        if total + size + len(more_findings(len(groups) - i)) > WARNINGS_MAX_TOTAL:
            out.append(more_findings(len(groups) - i))
            return out
        out.extend(group)
        total += size
    return out


def _findings_json(results: list[CheckResult]) -> str:
    """The findings as a JSON list that stays valid JSON within AUDIT_VALUE_MAX."""
    findings = [{"check": r.name, "status": r.status.value, "message": r.message} for r in results]
    value = json.dumps(findings, separators=(",", ":"))
    while len(value) > AUDIT_VALUE_MAX and findings:
        dropped = len(results) - len(findings) + 1
        findings.pop()
        value = json.dumps(findings + [{"more": dropped}], separators=(",", ":"))
    return value


def decide(
    results: PreflightResults,
    *,
    settings: Settings,
    mode: str | None = None,
    subject: str = "the object",
    preexisting: Set[str] = frozenset(),
    notes: list[str] | None = None,
) -> Decision:
    """Turn results into a decision.

    `mode` overrides settings.mode (namespace label). `preexisting` names checks that
    already failed on the old object of an UPDATE: their failures never block (ratchet).
    `notes` are override notices (skipped checks, mode overrides) shown as warnings and
    audit annotations so that no override is silent.

    Steps, in the admission path's order: classify each result (`_classify`: its verdict and the caveats
    of verdicts made from stale cached data), the audit annotations, then the message (`_denial`, or
    `_admission`).
    """
    mode = mode or settings.mode
    notes = list(notes or [])
    v = _classify(results, settings=settings, mode=mode, preexisting=preexisting, notes=notes)
    annotations = _annotations(v.audit, notes, mode)
    if v.deny:
        return _denial(v, annotations, subject)
    return _admission(v, annotations, mode)


def _classify(
    results: PreflightResults, *, settings: Settings, mode: str, preexisting: Set[str], notes: list[str]
) -> _Verdicts:
    """Each result's verdict under its action and `mode`, then the caveats of verdicts made from stale cached data."""
    v = _Verdicts(notes)
    configured, defaults = settings.checks, results.default_actions  # = settings.action_for(name, default_action)
    for r in results.checks:
        v.add(r, configured.get(r.name, defaults.get(r.name, "deny")), settings, mode, preexisting)
    for r in results.checks:  # a verdict from stale cached data says so, whatever it is
        if (
            r.caveats
            and r.status is not Status.SKIP
            and mode != "audit"
            and settings.action_for(r.name, results.default_action(r.name)) not in ("audit", "off")
        ):
            for caveat in dict.fromkeys(r.caveats):
                group = wrap(caveat, f"[{r.name}] ")
                if group not in v.warn_lines:
                    v.warn_lines.append(group)
    return v


def _denial(v: _Verdicts, annotations: dict[str, str], subject: str) -> Decision:
    """The denial: one header line naming `subject`, then one line per failure that denies."""
    n = len(v.deny)
    header = f"{subject} failed {n} preflight check{'s' if n != 1 else ''}:"
    body = "\n".join(f"[{r.name}] {_one_line(r.message)}" for r in v.deny)
    annotations["decision"] = "denied"
    return Decision(
        allowed=False,
        message=f"{header}\n{body}",
        warnings=_cap_total(v.warn_lines),
        audit_annotations=annotations,
        outcome=Outcome.DENIED,
        denied_checks=[r.name for r in v.deny],
        verdicts=v.verdicts,
    )


def _admission(v: _Verdicts, annotations: dict[str, str], mode: str) -> Decision:
    """The admission, and its outcome: audited, warned or allowed, from what the verdicts report."""
    outcome = Outcome.ALLOWED
    if v.audit:
        outcome = Outcome.AUDITED if mode == "audit" else (Outcome.WARNED if v.warn_lines else Outcome.AUDITED)
    elif v.warn_lines:
        outcome = Outcome.WARNED
    annotations["decision"] = "allowed"
    return Decision(
        allowed=True,
        warnings=_cap_total(v.warn_lines),
        audit_annotations=annotations,
        outcome=outcome,
        verdicts=v.verdicts,
    )


class _Verdicts:
    """Each result's verdict in order: the failures that deny, the warnings (one group of lines per
    finding; a finding longer than one warning goes on in the next), the findings for the audit log."""

    def __init__(self, notes: list[str]) -> None:
        self.deny: list[CheckResult] = []
        self.warn_lines: list[list[str]] = [wrap(n, "") for n in notes]
        self.audit: list[CheckResult] = []
        self.verdicts: list[str] = []

    def add(self, r: CheckResult, action: str, settings: Settings, mode: str, preexisting: Set[str]) -> None:
        if action == "off":
            self.verdicts.append(OFF)
            return
        if r.timed_out:
            action = settings.timeout_action
            failing = True
        else:
            failing = r.status is Status.FAIL
        if failing:
            if r.name in preexisting and action == "deny":
                self.warn_lines.append(warning_lines(r, prefix="pre-existing: "))
                self.audit.append(r)
                self.verdicts.append(WARN)
                return
            if action == "deny" and mode == "enforce":
                self.deny.append(r)
                self.verdicts.append(DENY)
            elif action in ("deny", "warn") and mode in ("enforce", "warn"):
                self.warn_lines.append(warning_lines(r))
                self.verdicts.append(WARN)
            else:
                self.verdicts.append(AUDIT)
            self.audit.append(r)
        elif r.status is Status.WARN:
            if mode != "audit" and action != "audit":
                self.warn_lines.append(warning_lines(r))
                self.verdicts.append(WARN)
            else:
                self.verdicts.append(AUDIT)
            self.audit.append(r)
        else:
            self.verdicts.append(NONE)


def _annotations(audit: list[CheckResult], notes: list[str], mode: str) -> dict[str, str]:
    """The audit annotations (without `decision`): the findings as JSON, the failed checks, the overrides, the mode."""
    annotations: dict[str, str] = {}
    if audit or notes:
        annotations["findings"] = _findings_json(audit)
        failed = sorted({r.name for r in audit if r.status is Status.FAIL or r.timed_out})
        if failed:
            annotations["failed-checks"] = ",".join(failed)
        if notes:
            annotations["overrides"] = "; ".join(notes)[:AUDIT_VALUE_MAX]
    annotations["mode"] = mode
    return annotations


def unreadable(subject: str, kind: str, problem: str) -> Decision:
    """The denial of an object its adapter cannot read as its kind (the object's problem, not
    the request's: the apiserver shows the message, and the user fixes the field it names)."""
    if len(problem) > ADAPTER_ERROR_MAX_CHARS:
        problem = problem[: ADAPTER_ERROR_MAX_CHARS - 1] + "…"
    message = f"{subject} is not a valid {kind}: {problem}. Fix: correct that field and apply again."
    return Decision(allowed=False, message=message, outcome=Outcome.DENIED)


def unreadable_before(problem: str) -> Decision:
    """An UPDATE of an object that was stored before this webhook could judge it: never block
    the fix or the cancel (ratchet); the problem is shown as a warning."""
    note = clip(f"pre-existing: the object cannot be read: {problem}")
    return Decision(allowed=True, warnings=[note], outcome=Outcome.WARNED)
