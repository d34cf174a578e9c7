"""Policy: modes, per-check actions, timeouts, ratchet, and the exact text users read."""

import json

import pytest

from webhook.config import Settings
from webhook.engine import timed_out_result
from webhook.policy import WARNING_MAX_CHARS, WARNINGS_MAX_TOTAL, decide
from webhook.results import CheckResult, PreflightResults, Status

SUBJECT = 'TrainJob "llama-ft" in namespace "team-a"'
SECRET_FAIL = CheckResult(
    "Image Reference", Status.FAIL,
    'Image "Foo" used by container "node" in pod group "node" is invalid: repository "Foo" contains uppercase letters. Fix: use a lowercase repository',
)
GPU_FAIL = CheckResult("Accelerator Limits", Status.FAIL, "Container \"node\" requests nvidia.com/gpu: 8 with no limit.\nFix: set limits")
NAME_WARN = CheckResult("Name Length", Status.WARN, "something to know")
PASS = CheckResult("ConfigMap Size", Status.PASS, "fine")


def results(*rs: CheckResult) -> PreflightResults:
    return PreflightResults(list(rs))


def test_enforce_denies_with_header_and_one_line_per_failed_check():
    d = decide(results(SECRET_FAIL, GPU_FAIL, NAME_WARN, PASS), settings=Settings(), subject=SUBJECT)
    assert not d.allowed
    assert d.outcome == "denied"
    assert d.message == (
        'TrainJob "llama-ft" in namespace "team-a" failed 2 preflight checks:\n'
        '[Image Reference] Image "Foo" used by container "node" in pod group "node" is invalid: repository "Foo" contains '
        "uppercase letters. Fix: use a lowercase repository\n"
        '[Accelerator Limits] Container "node" requests nvidia.com/gpu: 8 with no limit. Fix: set limits'
    )
    assert d.warnings == ["[Name Length] something to know"]
    assert d.denied_checks == ["Image Reference", "Accelerator Limits"]
    assert d.audit_annotations["decision"] == "denied"
    assert d.audit_annotations["mode"] == "enforce"
    assert d.audit_annotations["failed-checks"] == "Accelerator Limits,Image Reference"
    findings = json.loads(d.audit_annotations["findings"])
    assert [f["check"] for f in findings] == ["Image Reference", "Accelerator Limits", "Name Length"]


def test_single_failure_header_is_singular():
    d = decide(results(GPU_FAIL), settings=Settings(), subject=SUBJECT)
    assert d.message.splitlines()[0] == 'TrainJob "llama-ft" in namespace "team-a" failed 1 preflight check:'


def test_all_pass_allows_quietly():
    d = decide(results(PASS), settings=Settings(), subject=SUBJECT)
    assert (d.allowed, d.message, d.warnings, d.outcome) == (True, None, [], "allowed")
    assert d.audit_annotations == {"mode": "enforce", "decision": "allowed"}


def test_warn_mode_turns_failures_into_warnings():
    d = decide(results(SECRET_FAIL, NAME_WARN), settings=Settings(mode="warn"), subject=SUBJECT)
    assert d.allowed and d.message is None
    assert d.outcome == "warned"
    assert d.warnings == [
        '[Image Reference] Image "Foo" used by container "node" in pod group "node" is invalid: repository "Foo" contains',
        "[Image Reference] … uppercase letters. Fix: use a lowercase repository",
        "[Name Length] something to know",
    ]
    assert all(len(w) <= WARNING_MAX_CHARS for w in d.warnings)


def test_audit_mode_shows_nothing_and_records_everything():
    d = decide(results(SECRET_FAIL, NAME_WARN), settings=Settings(mode="audit"), subject=SUBJECT)
    assert d.allowed and d.warnings == [] and d.outcome == "audited"
    assert d.audit_annotations["failed-checks"] == "Image Reference"
    assert d.audit_annotations["mode"] == "audit"


def test_mode_argument_overrides_settings():
    d = decide(results(SECRET_FAIL), settings=Settings(mode="enforce"), mode="warn", subject=SUBJECT)
    assert d.allowed and d.audit_annotations["mode"] == "warn"


@pytest.mark.parametrize(
    "action, allowed, warnings, outcome",
    [
        ("deny", False, [], "denied"),
        ("warn", True, ["[Accelerator Limits] Container \"node\" requests nvidia.com/gpu: 8 with no limit. Fix: set limits"], "warned"),
        ("audit", True, [], "audited"),
        ("off", True, [], "allowed"),
    ],
)
def test_per_check_actions(action, allowed, warnings, outcome):
    d = decide(results(GPU_FAIL), settings=Settings(checks={"Accelerator Limits": action}), subject=SUBJECT)
    assert (d.allowed, d.warnings, d.outcome) == (allowed, warnings, outcome)
    if action == "off":
        assert "findings" not in d.audit_annotations


def test_warn_result_of_audit_action_is_not_shown():
    d = decide(results(NAME_WARN), settings=Settings(checks={"Name Length": "audit"}), subject=SUBJECT)
    assert d.warnings == [] and d.outcome == "audited"


@pytest.mark.parametrize(
    "timeout_action, allowed, n_warnings",
    [("warn", True, 1), ("deny", False, 0), ("audit", True, 0)],
)
def test_timeout_action(timeout_action, allowed, n_warnings):
    slow = timed_out_result("Secrets", 4.0)
    d = decide(results(slow), settings=Settings(timeoutAction=timeout_action), subject=SUBJECT)
    assert d.allowed is allowed
    assert len(d.warnings) == n_warnings
    if n_warnings:
        assert d.warnings == ["[Secrets] did not finish within the 4.0s budget; its verdict is unknown (timed out)"]
    if not allowed:
        assert d.message == (
            'TrainJob "llama-ft" in namespace "team-a" failed 1 preflight check:\n'
            "[Secrets] did not finish within the 4.0s budget; its verdict is unknown (timed out)"
        )
    assert d.audit_annotations["failed-checks"] == "Secrets"


def test_ratchet_preexisting_failure_never_blocks():
    d = decide(results(SECRET_FAIL, GPU_FAIL), settings=Settings(), subject=SUBJECT, preexisting={"Image Reference"})
    assert not d.allowed
    assert d.denied_checks == ["Accelerator Limits"]
    assert d.warnings == [
        'pre-existing: [Image Reference] Image "Foo" used by container "node" in pod group "node" is invalid: repository "Foo"',
        "pre-existing: [Image Reference] … contains uppercase letters. Fix: use a lowercase repository",
    ]
    only_old = decide(results(SECRET_FAIL), settings=Settings(), subject=SUBJECT, preexisting={"Image Reference"})
    assert only_old.allowed and only_old.warnings[0].startswith("pre-existing: [Image Reference] Image")


def test_notes_are_shown_and_recorded_and_clipped():
    long_note = "annotation preflight.webhook.io/skip-checks cannot skip " + repr("X" * 100) + ": not in skippableChecks"
    d = decide(results(PASS), settings=Settings(), subject=SUBJECT, notes=["mode warn for namespace team-a (label x)", long_note])
    assert d.allowed and d.outcome == "warned"
    assert d.warnings[0] == "mode warn for namespace team-a (label x)"
    assert all(len(w) <= WARNING_MAX_CHARS for w in d.warnings)
    assert d.audit_annotations["overrides"].startswith("mode warn for namespace team-a (label x); annotation")


def test_warnings_are_one_line_each_120_chars_and_4k_in_total():
    many = [CheckResult(f"Check {i}", Status.WARN, f"line one {i}\nline two " + "y" * 300) for i in range(100)]
    d = decide(results(*many), settings=Settings(), subject=SUBJECT)
    assert all("\n" not in w and len(w) <= WARNING_MAX_CHARS for w in d.warnings)
    assert sum(len(w.encode("utf-8")) for w in d.warnings) <= WARNINGS_MAX_TOTAL
    assert d.warnings[-1].startswith("… ") and d.warnings[-1].endswith("more finding(s); run `preflight-webhook check` for all")
    shown = sum(1 for w in d.warnings[:-1] if not w.split("] ", 1)[1].startswith("…"))  # findings, not lines
    assert d.warnings[-1] == f"… {100 - shown} more finding(s); run `preflight-webhook check` for all"
    # a long finding wraps over at most three lines, continuation lines marked "…"
    assert d.warnings[0] == "[Check 0] line one 0 line two"
    assert d.warnings[1] == "[Check 0] … " + "y" * 107 + "…"
    assert not any(w.lower().startswith("warning:") for w in d.warnings)


def test_audit_annotation_value_is_bounded():
    many = [CheckResult(f"Check {i}", Status.FAIL, "z" * 500) for i in range(40)]
    d = decide(results(*many), settings=Settings(mode="audit"), subject=SUBJECT)
    assert len(d.audit_annotations["findings"]) <= 8192


def test_long_finding_wraps_between_words_over_at_most_three_lines():
    from webhook.policy import wrap

    msg = 'Secret "hf-token" not found in namespace "team-a" (referenced by env HF_TOKEN of container node). Fix: kubectl create secret generic hf-token -n team-a --from-literal=token=…'
    assert wrap(msg, "[Secrets] ") == [
        '[Secrets] Secret "hf-token" not found in namespace "team-a" (referenced by env HF_TOKEN of container node). Fix: kubectl',
        "[Secrets] … create secret generic hf-token -n team-a --from-literal=token=…",
    ]
    long = wrap("word " * 200, "[X] ")
    assert len(long) == 3 and all(len(line) <= 120 for line in long)
    assert long[1].startswith("[X] … word") and long[2].endswith(" …")
    assert wrap("short", "[X] ") == ["[X] short"]


def test_findings_annotation_stays_valid_json_when_bounded():
    import json

    many = [CheckResult(f"Check {i}", Status.FAIL, "z" * 500) for i in range(40)]
    d = decide(results(*many), settings=Settings(mode="audit"), subject=SUBJECT)
    findings = json.loads(d.audit_annotations["findings"])
    assert findings[-1]["more"] == 40 - (len(findings) - 1)
    assert findings[0] == {"check": "Check 0", "status": "fail", "message": "z" * 500}


def test_an_overlong_finding_keeps_its_fix():
    from webhook.policy import warning_lines

    r = CheckResult("Image Reference", Status.WARN, "what " * 80 + "is wrong. Fix: pin a version tag or a digest")
    lines = warning_lines(r)
    assert len(lines) == 3 and all(len(line) <= WARNING_MAX_CHARS for line in lines)
    assert lines[0].startswith("[Image Reference] what what")
    assert lines[1].startswith("[Image Reference] … what") and lines[1].endswith(" …")
    assert lines[2] == "[Image Reference] … Fix: pin a version tag or a digest"
