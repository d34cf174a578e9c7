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
"""

from __future__ import annotations

import json
import re
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from xml.sax.saxutils import quoteattr

from webhook import __version__
from webhook.results import CheckResult, PreflightResults, Status

FORMATS = ("text", "json", "junit", "sarif", "github")

#: the name an input error is reported under where a format wants a check (json, junit, sarif)
INPUT_CHECK = "Manifest"

SARIF_SCHEMA = "https://docs.oasis-open.org/sarif/sarif/v2.1.0/errata01/os/schemas/sarif-schema-2.1.0.json"


@dataclass
class JobEntry:
    source: str
    line: int
    label: str  # `AIPerfJob team-a/bench`
    results: PreflightResults  # as the webhook decides them
    allowed: bool


@dataclass
class ErrorEntry:
    source: str
    line: int  # 0: the file as a whole
    label: str  # the object if it was read, else `file:line`
    message: str


Entry = JobEntry | ErrorEntry


@dataclass
class Report:
    entries: list[Entry] = field(default_factory=list)
    files: int = 0
    #: kinds of the objects that are not checked (and were skipped), with their counts
    skipped: Counter[str] = field(default_factory=Counter)

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


def summary(report: Report) -> str:
    """One line for the end of a CI log: what was checked, and how it went."""
    jobs = report.jobs
    failed = sum(not j.allowed for j in jobs)
    warned = sum(j.allowed and j.results.has_warnings for j in jobs)
    passed = len(jobs) - failed - warned
    files = f"{report.files} file{'s' if report.files != 1 else ''}"
    parts = [f"{passed} passed", f"{warned} passed with warnings", f"{failed} failed"]
    line = f"Summary: {len(jobs)} job{'s' if len(jobs) != 1 else ''} checked in {files}: {', '.join(parts)}"
    if report.errors:
        n = len(report.errors)
        line += f"; {n} input error{'s' if n != 1 else ''}"
    if report.skipped:
        line += f"; {skipped_text(report.skipped)}"
    return line


def _where(source: str, line: int) -> str:
    return f"{source}:{line}" if line else source


# ---- json: AIPerf's shape; an input error is a report whose one check failed -------------------


def _error_check(e: ErrorEntry) -> CheckResult:
    return CheckResult(INPUT_CHECK, Status.FAIL, e.message, details=[f"at {_where(e.source, e.line)}"])


def render_json(report: Report) -> str:
    docs: list[dict[str, Any]] = [
        e.results.to_dict() if isinstance(e, JobEntry) else PreflightResults([_error_check(e)]).to_dict()
        for e in report.entries
    ]
    if not docs:
        return ""
    return json.dumps(docs[0] if len(docs) == 1 else docs, indent=2) + "\n"


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
        suites.append(
            f'  <testsuite name={_x(e.label)} tests="{len(cases)}" failures="{fails}" errors="0" skipped="{skips}" '
            f"file={_x(e.source)}>\n" + _properties(e.source, e.line) + "".join(cases) + "  </testsuite>\n"
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
    """A relative path stays relative (code scanning resolves it against the checkout); an absolute one
    becomes a file: URI."""
    if source == "stdin":
        return "stdin"
    p = Path(source)
    return p.as_uri() if p.is_absolute() else p.as_posix()


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
    descriptors = [
        {
            "id": rid,
            "name": name,
            "shortDescription": {
                "text": summaries.get(name)
                or ("the input can be read as Kubernetes objects" if name == INPUT_CHECK else name)
            },
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
    props = [f"file={_escape_property(source)}"]
    if line:
        props.append(f"line={line}")
    props.append(f"title={_escape_property(title)}")
    return f"::{level} {','.join(props)}::{_escape_data(message)}"


def render_github(report: Report) -> str:
    lines: list[str] = []
    for e in report.entries:
        if isinstance(e, ErrorEntry):
            lines.append(_command("error", e.source, e.line, f"{INPUT_CHECK}: {e.label}", e.message))
            continue
        for r in e.results.checks:
            if r.status in (Status.FAIL, Status.WARN):
                level = "error" if r.status is Status.FAIL else "warning"
                lines.append(_command(level, e.source, e.line, f"{r.name}: {e.label}", _body(r)))
    return "".join(f"{x}\n" for x in lines)


__all__ = [
    "FORMATS",
    "INPUT_CHECK",
    "Report",
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
