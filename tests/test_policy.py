"""Policy: modes, per-check actions, timeouts, ratchet, and the exact text users read."""

import json

import pytest

from webhook.config import Settings
from webhook.engine import timed_out_result
from webhook.policy import WARNING_MAX_CHARS, WARNINGS_MAX_TOTAL, decide
from webhook.results import CheckResult, PreflightResults, Status

SUBJECT = 'TrainJob "llama-ft" in namespace "team-a"'
SECRET_FAIL = CheckResult(
    "Image Reference",
    Status.FAIL,
    'Image "Foo" used by container "node" in pod group "node" is invalid: repository "Foo" contains uppercase letters. Fix: use a lowercase repository',
)
GPU_FAIL = CheckResult(
    "Accelerator Limits", Status.FAIL, 'Container "node" requests nvidia.com/gpu: 8 with no limit.\nFix: set limits'
)
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
    assert d.warnings == [  # one warning per finding, whole
        '[Image Reference] Image "Foo" used by container "node" in pod group "node" is invalid: repository "Foo" contains '
        "uppercase letters. Fix: use a lowercase repository",
        "[Name Length] something to know",
    ]
    assert d.verdicts == ["warn", "warn"]
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
        (
            "warn",
            True,
            ['[Accelerator Limits] Container "node" requests nvidia.com/gpu: 8 with no limit. Fix: set limits'],
            "warned",
        ),
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
        'pre-existing: [Image Reference] Image "Foo" used by container "node" in pod group "node" is invalid: repository "Foo" '
        "contains uppercase letters. Fix: use a lowercase repository",
    ]
    assert d.verdicts == ["warn", "deny"]
    only_old = decide(results(SECRET_FAIL), settings=Settings(), subject=SUBJECT, preexisting={"Image Reference"})
    assert only_old.allowed and only_old.warnings[0].startswith("pre-existing: [Image Reference] Image")


def test_notes_are_shown_and_recorded_whole():
    long_note = (
        "annotation preflight.webhook.io/skip-checks cannot skip " + repr("X" * 250) + ": not in skippableChecks"
    )
    d = decide(
        results(PASS),
        settings=Settings(),
        subject=SUBJECT,
        notes=["mode warn for namespace team-a (label x)", long_note],
    )
    assert d.allowed and d.outcome == "warned"
    assert d.warnings[0] == "mode warn for namespace team-a (label x)"
    assert all(len(w) <= WARNING_MAX_CHARS for w in d.warnings)
    assert d.warnings[1:] == [
        "annotation preflight.webhook.io/skip-checks cannot skip",
        "… '" + "X" * 250 + "':",
        "… not in skippableChecks",
    ]
    assert " ".join(w.removeprefix("… ") for w in d.warnings[1:]) == long_note
    assert d.audit_annotations["overrides"].startswith("mode warn for namespace team-a (label x); annotation")


def test_warnings_are_one_per_finding_whole_and_4096_characters_in_total():
    """k8s.io/apiserver pkg/endpoints/filters/warning.go: untouched while the total stays within
    4096 runes; so whole findings while they fit, then one warning saying how many more."""
    many = [
        CheckResult(f"Check {i}", Status.WARN, f"line one {i}\nline two " + "y" * 300 + " end. Fix: do it")
        for i in range(100)
    ]
    d = decide(results(*many), settings=Settings(), subject=SUBJECT)
    assert all("\n" not in w and len(w) <= WARNING_MAX_CHARS for w in d.warnings)
    assert sum(len(w) for w in d.warnings) <= WARNINGS_MAX_TOTAL
    # a finding longer than one warning goes on, word for word, in the next (nothing is cut)
    assert d.warnings[0] == "[Check 0] line one 0 line two"
    assert d.warnings[1] == "[Check 0] … " + "y" * 244
    assert d.warnings[2] == "[Check 0] … " + "y" * 56 + " end. Fix: do it"
    shown = sum(1 for w in d.warnings[:-1] if not w.split("] ", 1)[1].startswith("…"))  # findings, not warnings
    assert shown == 10  # 10 × ~370 characters, and room for the last warning
    assert d.warnings[-1] == (
        f"… {100 - shown} more finding(s) not shown: run `preflight-webhook check` on the manifest, "
        "or read the findings audit annotation"
    )
    assert not any(w.lower().startswith("warning:") for w in d.warnings)


def test_findings_that_fit_need_no_tail():
    few = [CheckResult(f"Check {i}", Status.WARN, "z" * 200) for i in range(18)]  # 18 × 210 = 3780 characters
    d = decide(results(*few), settings=Settings(), subject=SUBJECT)
    assert d.warnings == [f"[Check {i}] " + "z" * 200 for i in range(18)]


def test_control_characters_are_dropped_so_the_apiserver_keeps_the_warning():
    r = CheckResult("Image Reference", Status.WARN, "tag \x1b[31mred\x1b[0m\tand\rmore")
    d = decide(results(r), settings=Settings(), subject=SUBJECT)
    assert d.warnings == ["[Image Reference] tag [31mred[0m and more"]


def test_audit_annotation_value_is_bounded():
    many = [CheckResult(f"Check {i}", Status.FAIL, "z" * 500) for i in range(40)]
    d = decide(results(*many), settings=Settings(mode="audit"), subject=SUBJECT)
    assert len(d.audit_annotations["findings"]) <= 8192


def test_a_finding_that_fits_is_one_warning_a_longer_one_goes_on_word_for_word():
    from webhook.policy import wrap

    msg = 'Secret "hf-token" not found in namespace "team-a" (referenced by env HF_TOKEN of container node). Fix: kubectl create secret generic hf-token -n team-a --from-literal=token=…'
    assert wrap(msg, "[Secrets] ") == ["[Secrets] " + msg]
    long = wrap("word " * 200, "[X] ")
    assert [len(line) for line in long] == [253, 255, 255, 255]
    assert long[1].startswith("[X] … word") and all(line.endswith("word") for line in long)
    assert sum(line.count("word") for line in long) == 200
    assert wrap("short", "[X] ") == ["[X] short"]
    assert wrap("x" * 300, "[X] ") == ["[X] " + "x" * 252, "[X] … " + "x" * 48]
    # exactly at the limit: still one warning; one character more: two
    fits = "y" * (256 - len("[X] "))
    assert wrap(fits, "[X] ") == ["[X] " + fits]
    assert wrap(fits + " z", "[X] ") == ["[X] " + fits, "[X] … z"]
    assert wrap("", "[X] ") == ["[X] "] and wrap(" a \n b\t", "[X] ") == ["[X] a b"]
    # the lines are kept per finding (policy.WRAPPED): each call still gets a list of its own
    long.append("changed by a caller")
    assert [len(line) for line in wrap("word " * 200, "[X] ")] == [253, 255, 255, 255]


def test_findings_annotation_stays_valid_json_when_bounded():
    import json

    many = [CheckResult(f"Check {i}", Status.FAIL, "z" * 500) for i in range(40)]
    d = decide(results(*many), settings=Settings(mode="audit"), subject=SUBJECT)
    findings = json.loads(d.audit_annotations["findings"])
    assert findings[-1]["more"] == 40 - (len(findings) - 1)
    assert findings[0] == {"check": "Check 0", "status": "fail", "message": "z" * 500}


def test_a_long_finding_loses_nothing():
    from webhook.policy import warning_lines

    r = CheckResult("Image Reference", Status.WARN, "what " * 80 + "is wrong. Fix: pin a version tag or a digest")
    lines = warning_lines(r)
    assert len(lines) == 2 and all(len(line) <= WARNING_MAX_CHARS for line in lines)
    assert lines[0].startswith("[Image Reference] what what")
    assert lines[1].startswith("[Image Reference] … what") and lines[1].endswith(
        "is wrong. Fix: pin a version tag or a digest"
    )
    assert " ".join(line.split("] ", 1)[1].removeprefix("… ") for line in lines) == r.message.strip()


def test_verdicts_follow_actions_and_modes():
    rs = results(SECRET_FAIL, GPU_FAIL, NAME_WARN, PASS)
    s = Settings(checks={"Accelerator Limits": "warn", "Name Length": "audit"})
    assert decide(rs, settings=s, subject=SUBJECT).verdicts == ["deny", "warn", "audit", ""]
    assert decide(rs, settings=s, mode="warn", subject=SUBJECT).verdicts == ["warn", "warn", "audit", ""]
    assert decide(rs, settings=s, mode="audit", subject=SUBJECT).verdicts == ["audit", "audit", "audit", ""]
    off = Settings(checks={"Image Reference": "off"})
    assert decide(rs, settings=off, subject=SUBJECT).verdicts == ["off", "deny", "warn", ""]


def test_a_timeout_is_the_result_field_not_the_message_text():
    # a check's own WARN that happens to start like the timeout text is judged by the check's action
    lookalike = CheckResult("Secrets", Status.WARN, "did not finish within the 4.0s budget; said by the check")
    d = decide(results(lookalike), settings=Settings(timeoutAction="deny"), subject=SUBJECT)
    assert d.allowed is True and "failed-checks" not in d.audit_annotations
    slow = timed_out_result("Secrets", 4.0)
    assert slow.timed_out is True
    assert decide(results(slow), settings=Settings(timeoutAction="deny"), subject=SUBJECT).allowed is False


def test_outcomes_are_one_enum_and_label_as_their_values():
    from webhook.metrics import Metrics
    from webhook.policy import Outcome

    d = decide(results(NAME_WARN), settings=Settings(), subject=SUBJECT)
    assert d.outcome is Outcome.WARNED and d.outcome == "warned"
    m = Metrics(known_kinds=["TrainJob"])
    m.observe_request("TrainJob", "CREATE", d.outcome, 0.01)
    body, _ = m.render()
    assert b'preflight_webhook_requests_total{decision="warned",kind="TrainJob",operation="CREATE"} 1.0' in body


def test_one_line_drops_exactly_the_non_space_control_characters() -> None:
    """What NewWarningHeader refuses: Unicode category Cc; whitespace (also Cc) collapses."""
    import unicodedata

    from webhook.policy import _one_line

    for code in range(0x3100):
        ch = chr(code)
        text = f"a{ch}b"
        if ch.isspace():
            assert _one_line(text) == "a b", hex(code)
        elif unicodedata.category(ch) == "Cc":
            assert _one_line(text) == "ab", hex(code)
        else:
            assert _one_line(text) == text, hex(code)
    assert _one_line("  x\t\n y\x00z\x85 \x7f") == "x yz"
