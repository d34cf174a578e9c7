"""`preflight-webhook report`: its rendering of the Policy Reports (pure), --help, and usage errors.

Against the real apiserver (reports read back, the live computation): e2e/test_audit_reports_live.py.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.test_audit_reports import AUDIT, BAD_IMAGE, IMAGE_FIX, _job, _judgement, _ref
from webhook.audit.findings import findings
from webhook.audit.reports import Entry, build_report
from webhook.cli import build_parser, main
from webhook.cli.report import Answer, render_table, rows_of_report, to_json


async def _answer() -> Answer:
    bad, good = await _judgement(_job(BAD_IMAGE), _ref()), await _judgement(_job(), _ref("ok", uid="u-2"))
    entries = [Entry(j.job, f) for j in (bad, good) for f in findings(j.evaluation, AUDIT)]
    return Answer("reports", rows_of_report(build_report("team-a", entries, now=1)))


async def test_the_table_shows_what_enforce_would_deny_and_says_so_in_one_line() -> None:
    text = render_table(await _answer(), "team-a")
    lines = text.splitlines()
    assert lines[0].split() == ["NAMESPACE", "JOB", "CHECK", "ENFORCE", "MESSAGE"]
    assert lines[1].startswith("team-a     AIPerfJob/bench  Image Reference  DENY     Image ")
    assert lines[1].endswith("…") and len(lines[1].split("DENY     ", 1)[1]) == 160
    assert lines[-1] == (
        "1 of 2 job(s) in namespace team-a would be DENIED if the webhook enforced "
        "(from the audit controller's Policy Reports); fix them before you switch to enforce."
    )
    assert len(lines) == 3  # passing checks are not shown without --all
    assert len(render_table(await _answer(), "team-a", show_all=True).splitlines()) == 12


async def test_json_groups_the_findings_by_job_with_the_whole_message() -> None:
    doc = to_json(await _answer(), "team-a")
    assert doc["source"] == "reports" and doc["wouldBeDenied"] == 1
    bench = next(j for j in doc["jobs"] if j["name"] == "bench")
    assert bench["wouldBeDenied"] is True
    assert {"check": "Image Reference", "result": "fail", "message": IMAGE_FIX, "enforce": "deny"} in bench["findings"]
    assert next(j for j in doc["jobs"] if j["name"] == "ok")["wouldBeDenied"] is False


def test_an_empty_answer_says_no_job_was_judged() -> None:
    assert render_table(Answer("live"), None) == "No judged job in every namespace (from a live check now).\n"


def test_help_explains_the_sources_the_results_and_the_exit_codes(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        build_parser().parse_args(["report", "--help"])
    out = capsys.readouterr().out
    for text in (
        "what the webhook in enforce mode would deny",
        "Exit 0 nothing would be denied, 1 something would, 2 usage or cluster errors",
        "fail     enforce would DENY the job for this check",
        "computed live from the kubeconfig when there are none",
        "The rollout this answers, step by step (audit, read the reports, warn, enforce): docs/rollout.md",
    ):
        assert text in " ".join(out.split()) or text in out, text


def test_namespace_and_all_namespaces_exclude_each_other(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["report", "-n", "a", "-A"])
    assert exc.value.code == 2
    assert "not allowed with argument" in capsys.readouterr().err


def test_an_unreadable_kubeconfig_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "kubeconfig"
    bad.write_text("not: [a kubeconfig")
    assert main(["report", "-A", "--kubeconfig", str(bad)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("error: cannot read the kubeconfig: ") and "Fix: check --kubeconfig" in err


def test_a_report_written_by_another_tool_is_read_without_breaking() -> None:
    rows = rows_of_report({"metadata": {"namespace": "x"}, "results": [{"policy": "p"}, "junk", {}]})
    assert [(r.namespace, r.check, r.result) for r in rows] == [("x", "p", ""), ("x", "", "")]
    assert json.dumps(to_json(Answer("reports", rows), "x"))


class _Client:
    """The two reads `report --live` makes for a TrainJob: its JobSet, its namespace's Workloads."""

    def __init__(self, jobset: bool) -> None:
        self.jobset = jobset

    async def request(self, method: str, path: str, **kw: object) -> dict[str, object]:
        from webhook.cluster.view import ApiError

        if "/jobsets/" in path:
            if not self.jobset:
                raise ApiError(404, "not found")
            return {"metadata": {"name": "tj"}}
        return {"items": []}


@pytest.mark.parametrize(
    ("resource", "obj", "jobset", "state"),
    [
        ("aiperfjobs", {"status": {"phase": "Running"}}, False, "running"),
        ("aiperfjobs", {"status": {"phase": "Queued"}}, False, "judged"),
        ("aiperfjobs", {"status": {"phase": "Completed"}}, False, "finished"),
        ("trainjobs", {"metadata": {"name": "tj", "namespace": "a"}, "spec": {"suspend": True}}, True, "judged"),
        ("trainjobs", {"metadata": {"name": "tj", "namespace": "a"}, "spec": {}}, True, "running"),
        ("trainjobs", {"metadata": {"name": "tj", "namespace": "a"}, "spec": {}}, False, "judged"),
    ],
)
async def test_live_judges_only_the_jobs_the_audit_controller_judges(
    resource: str, obj: dict, jobset: bool, state: str
) -> None:
    from webhook.cli.report import _state

    assert (await _state(_Client(jobset), resource, obj))[0] == state
