"""Policy: results + mode + per-check actions → a decision, rendered once.

A decision is data (allowed, message, warnings, audit annotations); the server and the
CLI only render it. Text rules: the denial has one header line, then one line per
failed check `[Check Name] what is wrong. Fix: how`. Warnings are one line each, at most
120 characters, at most 4 KiB together, no "Warning:" prefix.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from webhook.config import Settings
from webhook.engine import is_timed_out
from webhook.results import CheckResult, PreflightResults, Status

WARNING_MAX_CHARS = 120
WARNINGS_MAX_TOTAL = 4096
AUDIT_VALUE_MAX = 8192


@dataclass
class Decision:
    allowed: bool
    message: str | None = None
    warnings: list[str] = field(default_factory=list)
    audit_annotations: dict[str, str] = field(default_factory=dict)
    #: label for metrics: allowed | denied | warned | audited
    outcome: str = "allowed"
    denied_checks: list[str] = field(default_factory=list)


def _one_line(text: str) -> str:
    return " ".join(text.split())


def clip(text: str, limit: int = WARNING_MAX_CHARS) -> str:
    text = _one_line(text)
    return text if len(text) <= limit else text[: limit - 1].rstrip() + "…"


def warning_line(r: CheckResult, prefix: str = "") -> str:
    return clip(f"{prefix}[{r.name}] {r.message}")


def _cap_total(lines: list[str]) -> list[str]:
    out, total = [], 0
    for i, line in enumerate(lines):
        size = len(line.encode("utf-8"))
        if total + size > WARNINGS_MAX_TOTAL - 64:
            out.append(f"… {len(lines) - i} more finding(s); run `preflight-webhook check` for all")
            break
        out.append(line)
        total += size
    return out


def decide(
    results: PreflightResults,
    *,
    settings: Settings,
    mode: str | None = None,
    subject: str = "the object",
    preexisting: set[str] = frozenset(),
    notes: list[str] | None = None,
) -> Decision:
    """Turn results into a decision.

    `mode` overrides settings.mode (namespace label). `preexisting` names checks that
    already failed on the old object of an UPDATE: their failures never block (ratchet).
    `notes` are override notices (skipped checks, mode overrides) shown as warnings and
    audit annotations so that no override is silent.
    """
    mode = mode or settings.mode
    notes = list(notes or [])
    deny: list[CheckResult] = []
    warn_lines: list[str] = [clip(n) for n in notes]  # notes obey the 120-character rule too
    audit: list[CheckResult] = []

    for r in results.checks:
        action = settings.action_for(r.name)
        if action == "off":
            continue
        if is_timed_out(r):
            action = settings.timeout_action
            failing = True
        else:
            failing = r.status is Status.FAIL
        if failing:
            if r.name in preexisting and action == "deny":
                warn_lines.append(warning_line(r, prefix="pre-existing: "))
                audit.append(r)
                continue
            if action == "deny" and mode == "enforce":
                deny.append(r)
            elif action in ("deny", "warn") and mode in ("enforce", "warn"):
                warn_lines.append(warning_line(r))
            audit.append(r)
        elif r.status is Status.WARN:
            if mode != "audit" and action != "audit":
                warn_lines.append(warning_line(r))
            audit.append(r)
    for r in results.checks:  # a verdict from stale cached data says so, whatever it is
        if r.caveats and r.status is not Status.SKIP and mode != "audit" and settings.action_for(r.name) not in ("audit", "off"):
            warn_lines.extend(line for line in dict.fromkeys(clip(f"[{r.name}] {c}") for c in r.caveats) if line not in warn_lines)

    annotations: dict[str, str] = {}
    if audit or notes:
        findings = [{"check": r.name, "status": r.status.value, "message": r.message} for r in audit]
        value = json.dumps(findings, separators=(",", ":"))
        if len(value) > AUDIT_VALUE_MAX:
            value = value[: AUDIT_VALUE_MAX - 1] + "…"
        annotations["findings"] = value
        failed = sorted({r.name for r in audit if r.status is Status.FAIL or is_timed_out(r)})
        if failed:
            annotations["failed-checks"] = ",".join(failed)
        if notes:
            annotations["overrides"] = "; ".join(notes)[:AUDIT_VALUE_MAX]
    annotations["mode"] = mode

    if deny:
        n = len(deny)
        header = f"{subject} failed {n} preflight check{'s' if n != 1 else ''}:"
        body = "\n".join(f"[{r.name}] {_one_line(r.message)}" for r in deny)
        annotations["decision"] = "denied"
        return Decision(
            allowed=False,
            message=f"{header}\n{body}",
            warnings=_cap_total([w for w in warn_lines]),
            audit_annotations=annotations,
            outcome="denied",
            denied_checks=[r.name for r in deny],
        )
    outcome = "allowed"
    if audit:
        outcome = "audited" if mode == "audit" else ("warned" if warn_lines else "audited")
    elif warn_lines:
        outcome = "warned"
    annotations["decision"] = "allowed"
    return Decision(allowed=True, warnings=_cap_total(warn_lines), audit_annotations=annotations, outcome=outcome)
