"""The `check` report in the formats CI systems read: text, json, junit, sarif, github.

Rendering only. Each entry is either a job with the results as the webhook decides them
(`check.as_decided` over webhook.policy's Decision) or an input error; nothing here
judges. The formats follow what their readers parse:

- junit: the Jenkins xunit plugin's JUnit schema (jenkinsci/xunit-plugin
  src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/junit-10.xsd), which GitLab's
  `artifacts:reports:junit` also reads: one <testsuite> per job, one <testcase> per check;
  FAIL is a <failure>, SKIP a <skipped>, an input error an <error>. A warning passes (JUnit has
  no warning state) and says so in <system-out>.
- sarif: SARIF 2.1.0 (OASIS sarif-schema-2.1.0.json) as GitHub code scanning reads it: a rule
  per check, a result per FAIL (level error) and WARN (level warning), located at the line of
  the job's document.
- github: workflow commands (`::error file=F,line=L,title=T::message`), escaped as
  actions/toolkit packages/core/src/command.ts escapes data and properties.
- json: an array, one entry per job or input error (the AIPerf shape `passed`, `has_warnings`, `checks`,
  plus where the job is and what it is), versioned by `schemaVersion`; its JSON Schema is
  docs/schemas/check-report.v1.schema.json.

A check the object's skip annotation skips (granted) or asks in vain to skip (refused) is named in every
format. Text that reaches a terminal (text, github) shows control characters as escapes (`visible`).
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import quote
from xml.sax.saxutils import quoteattr

from webhook import __version__
from webhook.results import CheckResult, PreflightResults, Status

if TYPE_CHECKING:
    from webhook.preflight import SkipRequest

FORMATS = ("text", "json", "junit", "sarif", "github")

#: the name an input error is reported under where a format wants a check (json, junit, sarif)
INPUT_CHECK = "Manifest"

#: the name the skip annotation's findings are reported under where a format wants a rule (sarif, github)
SKIP_CHECK = "Skip Annotation"

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"

#: `schemaVersion` of each entry of `-o json`; docs/schemas/check-report.v1.schema.json describes it. A change
#: that removes or changes a field is a new version; a new optional field is not.
JSON_SCHEMA_VERSION = "preflight.webhook.io/check-report/v1"


@dataclass(frozen=True)
class Subject:
    """What an entry is about, as far as it was read (None: not read, e.g. a document that is not YAML)."""

    api_version: str | None = None
    kind: str | None = None
    namespace: str | None = None
    name: str | None = None


@dataclass
class JobEntry:
    source: str
    line: int
    label: str  # `AIPerfJob team-a/bench`
    results: PreflightResults  # as the webhook decides them
    allowed: bool
    subject: Subject = field(default_factory=Subject)
    #: the 1-based document of `source` the job is in (0: not known)
    document: int = 0
    #: the checks the skip annotation names, granted or refused (webhook.preflight.SkipRequest)
    skips: list[SkipRequest] = field(default_factory=list)
    #: the webhook's override notices other than a granted skip (a refused skip, a namespace's mode): each
    #: is a warning the webhook gives
    notes: list[str] = field(default_factory=list)

    @property
    def warned(self) -> bool:
        """Admitted with warnings: a check's, or an override notice's."""
        return self.allowed and (self.results.has_warnings or bool(self.notes))

    @property
    def unchecked(self) -> bool:
        """Admitted with no result but skips: never PASSED (check.py gives it the NOTHING_CHECKED warning)."""
        return self.allowed and not any(r.status is not Status.SKIP for r in self.results.checks)


@dataclass
class ErrorEntry:
    source: str
    line: int  # 0: the file as a whole
    label: str  # the object if it was read, else `file:line`
    message: str
    subject: Subject = field(default_factory=Subject)
    document: int = 0


Entry = JobEntry | ErrorEntry


@dataclass
class Report:
    entries: list[Entry] = field(default_factory=list)
    files: int = 0
    #: kinds of the objects that are not checked (and were skipped), with their counts
    skipped: Counter[str] = field(default_factory=Counter)
    #: paths found in directories and not read, by reason (webhook.manifests HIDDEN, CHART, EXCLUDED, NOT_OBJECT)
    skipped_paths: Counter[str] = field(default_factory=Counter)

    @property
    def jobs(self) -> list[JobEntry]:
        return [e for e in self.entries if isinstance(e, JobEntry)]

    @property
    def errors(self) -> list[ErrorEntry]:
        return [e for e in self.entries if isinstance(e, ErrorEntry)]


def skipped_text(skipped: Counter[str]) -> str:
    n = sum(skipped.values())
    kinds = ", ".join(f"{k} {c}" for k, c in sorted(skipped.items()))
    return f"{n} other object{'s' if n != 1 else ''} skipped ({kinds})"


def _paths_text(skipped: Counter[str]) -> str:
    n = sum(skipped.values())
    reasons = ", ".join(f"{k} {c}" for k, c in sorted(skipped.items()))
    return f"{n} path{'s' if n != 1 else ''} not read ({reasons})"


def summary(report: Report) -> str:
    """One line for the end of a CI log: what was checked, and how it went."""
    jobs = report.jobs
    failed = sum(not j.allowed for j in jobs)
    unchecked = sum(j.unchecked for j in jobs)
    warned = sum(j.warned and not j.unchecked for j in jobs)
    passed = len(jobs) - failed - warned - unchecked
    files = f"{report.files} file{'s' if report.files != 1 else ''}"
    parts = [f"{passed} passed", f"{warned} passed with warnings", f"{failed} failed"]
    if unchecked:
        parts.append(f"{unchecked} not checked")
    line = f"Summary: {len(jobs)} job{'s' if len(jobs) != 1 else ''} checked in {files}: {', '.join(parts)}"
    if report.errors:
        n = len(report.errors)
        line += f"; {n} input error{'s' if n != 1 else ''}"
    if report.skipped:
        line += f"; {skipped_text(report.skipped)}"
    if report.skipped_paths:
        line += f"; {_paths_text(report.skipped_paths)}"
    return visible(line)


#: characters shown as escapes where text reaches a terminal: the C0 and C1 controls but tab (ESC begins
#: the terminal's escape sequences; CR and BS overwrite what was printed), DEL, and the bidirectional
#: overrides and isolates that reorder what a line shows (CVE-2021-42574)
_INVISIBLE = re.compile("[\x00-\x08\x0a-\x1f\x7f-\x9f\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069]")


def _escape(m: re.Match[str]) -> str:
    c = ord(m.group())
    return f"\\x{c:02x}" if c < 0x100 else f"\\u{c:04x}"


def visible(text: str) -> str:
    """`text` with every control character shown as an escape (`\\x1b`, `\\u202e`): an object's text (an
    image name, a file name) never moves the cursor, colours or rewrites a terminal or a CI log."""
    return _INVISIBLE.sub(_escape, text)


def _where(source: str, line: int) -> str:
    return f"{source}:{line}" if line else source


# ---- json: AIPerf's shape; an input error is a report whose one check failed -------------------


def _error_check(e: ErrorEntry) -> CheckResult:
    return CheckResult(INPUT_CHECK, Status.FAIL, e.message, details=[f"at {_where(e.source, e.line)}"])


def _subject_json(s: Subject) -> dict[str, Any]:
    return {"apiVersion": s.api_version, "kind": s.kind, "namespace": s.namespace, "name": s.name}


def render_json(report: Report) -> str:
    """An array, one entry per job or input error, in input order (docs/schemas/check-report.v1.schema.json)."""
    docs: list[dict[str, Any]] = []
    for e in report.entries:
        head: dict[str, Any] = {
            "schemaVersion": JSON_SCHEMA_VERSION,
            **_subject_json(e.subject),
            "file": e.source,
            "line": e.line or None,
            "document": e.document or None,
        }
        if isinstance(e, JobEntry):
            shape = e.results.to_dict()
            shape["passed"] = e.allowed
            shape["has_warnings"] = e.warned
            skips = [{"check": s.check, "granted": s.granted, "message": s.message} for s in e.skips]
            docs.append({**head, **shape, "skipRequests": skips, "notes": list(e.notes), "error": None})
        else:
            shape = PreflightResults([_error_check(e)]).to_dict()
            docs.append({**head, **shape, "skipRequests": [], "notes": [], "error": e.message})
    return json.dumps(docs, indent=2) + "\n"


# ---- junit ------------------------------------------------------------------------------------

#: XML 1.0 forbids these characters even escaped; an object's text may carry them
_XML_INVALID = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\ufffe\uffff]")


def _x(text: str) -> str:
    return quoteattr(_XML_INVALID.sub("\ufffd", text))


def _xt(text: str) -> str:
    body = _XML_INVALID.sub("\ufffd", text).replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    return body


def _body(r: CheckResult) -> str:
    return "\n".join([r.message, *(d for d in r.details if d not in r.message), *(f"hint: {h}" for h in r.hints)])


def _properties(source: str, line: int) -> str:
    return (
        "    <properties>\n"
        f'      <property name="file" value={_x(source)}/>\n'
        f'      <property name="line" value="{line}"/>\n'
        "    </properties>\n"
    )


def render_junit(report: Report) -> str:
    suites: list[str] = []
    total = failures = errors = 0
    for e in report.entries:
        if isinstance(e, ErrorEntry):
            total += 1
            errors += 1
            suites.append(
                f'  <testsuite name={_x(e.label)} tests="1" failures="0" errors="1" skipped="0" file={_x(e.source)}>\n'
                + _properties(e.source, e.line)
                + f"    <testcase name={_x(INPUT_CHECK)} classname={_x(e.label)}>\n"
                f'      <error message={_x(e.message)} type="InputError">{_xt(e.message)}</error>\n'
                "    </testcase>\n"
                "  </testsuite>\n"
            )
            continue
        cases: list[str] = []
        fails = skips = 0
        for r in e.results.checks:
            head = f"    <testcase name={_x(r.name)} classname={_x(e.label)}"
            if r.status is Status.FAIL:
                fails += 1
                cases.append(
                    f'{head}>\n      <failure message={_x(r.message)} type="fail">{_xt(_body(r))}</failure>\n    </testcase>\n'
                )
            elif r.status is Status.SKIP:
                skips += 1
                cases.append(f"{head}>\n      <skipped message={_x(r.message)}/>\n    </testcase>\n")
            else:
                prefix = "warning: " if r.status is Status.WARN else ""
                cases.append(f"{head}>\n      <system-out>{_xt(prefix + _body(r))}</system-out>\n    </testcase>\n")
        total += len(cases)
        failures += fails
        # a refused skip (or a namespace's mode) is a warning of the webhook's about the job as a whole
        notes = "".join(f"    <system-out>{_xt('warning: ' + n)}</system-out>\n" for n in e.notes)
        suites.append(
            f'  <testsuite name={_x(e.label)} tests="{len(cases)}" failures="{fails}" errors="0" skipped="{skips}" '
            f"file={_x(e.source)}>\n" + _properties(e.source, e.line) + "".join(cases) + notes + "  </testsuite>\n"
        )
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuites name="preflight-webhook" tests="{total}" failures="{failures}" errors="{errors}">\n'
        + "".join(suites)
        + "</testsuites>\n"
    )


# ---- sarif ------------------------------------------------------------------------------------


def rule_id(name: str) -> str:
    """`Image Reference` → `image-reference`: a stable id per check (SARIF reportingDescriptor.id)."""
    return re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") or "check"


def _uri(source: str) -> str:
    """A relative path stays relative (code scanning resolves it against the checkout), percent-encoded as a
    URI reference's path (RFC 3986: a space, `#`, `%` or `?` in a file name is data, not syntax); an absolute
    one becomes a file: URI."""
    if source == "stdin":
        return "stdin"
    p = Path(source)
    if p.is_absolute():
        return p.as_uri()
    # ':' is encoded too: in a first segment it would read as a scheme (RFC 3986 4.2)
    return quote(p.as_posix(), safe="/!$&'()*+,;=@")


def _sarif_result(rule: str, level: str, text: str, source: str, line: int, label: str) -> dict[str, Any]:
    region = {"startLine": max(line, 1)}
    return {
        "ruleId": rule,
        "level": level,
        "message": {"text": text},
        "locations": [
            {
                "physicalLocation": {"artifactLocation": {"uri": _uri(source)}, "region": region},
                "logicalLocations": [{"fullyQualifiedName": label, "kind": "object"}],
            }
        ],
    }


_RULE_TEXT = {
    INPUT_CHECK: "the input can be read as Kubernetes objects",
    SKIP_CHECK: "the checks an object's skip annotation skips (skippableChecks) or asks in vain to skip",
}


def _skip_findings(e: JobEntry) -> list[tuple[str, str]]:
    """(level, text) of each skip the annotation asked for, then of each other override notice: a granted
    skip is a note, a refused one (and a namespace's mode) a warning, as the webhook warns of it."""
    out = [("note", f"{s.note} (in skippableChecks)") for s in e.skips if s.granted]
    return out + [("warning", n) for n in e.notes]


def render_sarif(report: Report, summaries: dict[str, str] | None = None) -> str:
    """`summaries`: check name → its one-line description (Check.summary), for the rules."""
    summaries = summaries or {}
    rules: dict[str, str] = {}
    results: list[dict[str, Any]] = []
    for e in report.entries:
        if isinstance(e, ErrorEntry):
            rules[INPUT_CHECK] = rule_id(INPUT_CHECK)
            results.append(_sarif_result(rule_id(INPUT_CHECK), "error", e.message, e.source, e.line, e.label))
            continue
        for r in e.results.checks:
            if r.status not in (Status.FAIL, Status.WARN):
                continue
            rules[r.name] = rule_id(r.name)
            level = "error" if r.status is Status.FAIL else "warning"
            results.append(_sarif_result(rule_id(r.name), level, f"{e.label}: {_body(r)}", e.source, e.line, e.label))
        for level, text in _skip_findings(e):
            rules[SKIP_CHECK] = rule_id(SKIP_CHECK)
            results.append(_sarif_result(rule_id(SKIP_CHECK), level, f"{e.label}: {text}", e.source, e.line, e.label))
    descriptors = [
        {
            "id": rid,
            "name": name,
            "shortDescription": {"text": summaries.get(name) or _RULE_TEXT.get(name, name)},
        }
        for name, rid in sorted(rules.items(), key=lambda kv: kv[1])
    ]
    log = {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {"driver": {"name": "preflight-webhook", "version": __version__, "rules": descriptors}},
                "results": results,
            }
        ],
    }
    return json.dumps(log, indent=2) + "\n"


# ---- github workflow commands -----------------------------------------------------------------


def _escape_data(s: str) -> str:
    return s.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def _escape_property(s: str) -> str:
    return _escape_data(s).replace(":", "%3A").replace(",", "%2C")


def _command(level: str, source: str, line: int, title: str, message: str) -> str:
    props = [f"file={_escape_property(visible(source))}"]
    if line:
        props.append(f"line={line}")
    props.append(f"title={_escape_property(visible(title))}")
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def _visible_body(r: CheckResult) -> str:
    """_body with each of its lines made `visible` (a line break inside a message is shown too)."""
    return "\n".join(
        visible(x) for x in [r.message, *(d for d in r.details if d not in r.message), *(f"hint: {h}" for h in r.hints)]
    )


def render_github(report: Report) -> str:
    lines: list[str] = []
    for e in report.entries:
        if isinstance(e, ErrorEntry):
            lines.append(_command("error", e.source, e.line, f"{INPUT_CHECK}: {e.label}", visible(e.message)))
            continue
        for r in e.results.checks:
            if r.status in (Status.FAIL, Status.WARN):
                level = "error" if r.status is Status.FAIL else "warning"
                lines.append(_command(level, e.source, e.line, f"{r.name}: {e.label}", _visible_body(r)))
        for level, text in _skip_findings(e):
            command = "notice" if level == "note" else level
            lines.append(_command(command, e.source, e.line, f"{SKIP_CHECK}: {e.label}", visible(text)))
    return "".join(f"{x}\n" for x in lines)


__all__ = [
    "FORMATS",
    "INPUT_CHECK",
    "SKIP_CHECK",
    "JSON_SCHEMA_VERSION",
    "Report",
    "Subject",
    "visible",
    "JobEntry",
    "ErrorEntry",
    "summary",
    "skipped_text",
    "render_json",
    "render_junit",
    "render_sarif",
    "render_github",
    "rule_id",
]
