"""Policy: results + mode + per-check actions → a decision, rendered once.

A decision is data (allowed, message, warnings, audit annotations); the server and the
CLI only render it. Text rules: the denial has one header line, then one line per
failed check `[Check Name] what is wrong. Fix: how`. Warnings are one line each, at most
120 characters, at most 4 KiB together, no "Warning:" prefix; a longer finding goes on over
up to three warning lines (`[Check Name] … rest`) so that its fix is not cut off.
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


#: a finding longer than one warning goes on over at most this many warning lines
WARNING_MAX_LINES = 3


def wrap(text: str, lead: str, limit: int = WARNING_MAX_CHARS, max_lines: int = WARNING_MAX_LINES) -> list[str]:
    """`lead + text` as warning lines of at most `limit` characters, broken between words.

    kubectl prints each warning on its own line, so a long finding (and its `Fix:`) stays
    readable as two or three lines instead of being cut off; continuation lines start with
    `lead` and "…" so they read as one finding. Past `max_lines` the last line is clipped.
    """
    cont = f"{lead}… "
    lines: list[str] = []
    current = lead
    for word in _one_line(text).split(" "):
        fresh = current in (lead, cont)
        candidate = current + word if fresh else f"{current} {word}"
        if len(candidate) <= limit or fresh:
            current = candidate  # an over-long single word is clipped below
        else:
            lines.append(current)
            current = cont + word
    lines.append(current)
    lines = [clip(line, limit) for line in lines]
    if len(lines) > max_lines:
        last = lines[max_lines - 1].rstrip("…")
        lines = lines[: max_lines - 1] + [last[: limit - 2].rstrip() + " …"]
    return lines


def warning_lines(r: CheckResult, prefix: str = "") -> list[str]:
    """A finding as warning lines; when it is too long, the middle goes and the `Fix:` stays."""
    lead = f"{prefix}[{r.name}] "
    lines = wrap(r.message, lead, max_lines=10_000)
    if len(lines) <= WARNING_MAX_LINES:
        return lines
    what, sep, fix = r.message.rpartition(". Fix: ")
    if not sep:
        return wrap(r.message, lead)
    fix_lines = wrap(f"… Fix: {fix}", lead, max_lines=WARNING_MAX_LINES - 1)
    return wrap(f"{what}.", lead, max_lines=WARNING_MAX_LINES - len(fix_lines)) + fix_lines


def _cap_total(groups: list[list[str]]) -> list[str]:
    """Whole findings, in order, while they fit 4 KiB; then one line saying how many were left out."""
    out: list[str] = []
    total = 0
    for i, group in enumerate(groups):
        size = sum(len(line.encode("utf-8")) for line in group)
        if total + size > WARNINGS_MAX_TOTAL - 64:
            out.append(f"… {len(groups) - i} more finding(s); run `preflight-webhook check` for all")
            break
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
    # one group of warning lines per finding (a long finding wraps over up to three lines)
    warn_lines: list[list[str]] = [[clip(n)] for n in notes]  # notes obey the 120-character rule too
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
                warn_lines.append(warning_lines(r, prefix="pre-existing: "))
                audit.append(r)
                continue
            if action == "deny" and mode == "enforce":
                deny.append(r)
            elif action in ("deny", "warn") and mode in ("enforce", "warn"):
                warn_lines.append(warning_lines(r))
            audit.append(r)
        elif r.status is Status.WARN:
            if mode != "audit" and action != "audit":
                warn_lines.append(warning_lines(r))
            audit.append(r)
    for r in results.checks:  # a verdict from stale cached data says so, whatever it is
        if r.caveats and r.status is not Status.SKIP and mode != "audit" and settings.action_for(r.name) not in ("audit", "off"):
            for caveat in dict.fromkeys(r.caveats):
                group = wrap(caveat, f"[{r.name}] ")
                if group not in warn_lines:
                    warn_lines.append(group)

    annotations: dict[str, str] = {}
    if audit or notes:
        annotations["findings"] = _findings_json(audit)
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
            warnings=_cap_total(warn_lines),
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
