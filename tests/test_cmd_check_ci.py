"""`preflight-webhook check` in CI: many -f, directories (-R), stdin, and the junit, sarif and
github formats, each against a golden file and (junit, sarif) against the schema its readers use.

The schemas are copies (tests/schemas/): junit-10.xsd from the Jenkins xunit plugin
(jenkinsci/xunit-plugin, src/main/resources/org/jenkinsci/plugins/xunit/types/model/xsd/), and
the OASIS SARIF 2.1.0 JSON schema (sarif-schema-2.1.0.json, $id in the file).
Goldens: tests/golden/check/; after an intended change, rewrite them with
`UPDATE_GOLDENS=1 .venv/bin/python -m pytest tests/test_cmd_check_ci.py` and read the diff.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest
import xmlschema
import yaml

from tests.test_cmd_check import AIPERF, aiperf, main
from webhook.cli.formats import ErrorEntry, JobEntry, Report, render_github, render_junit, render_sarif
from webhook.results import CheckResult, PreflightResults, Status

HERE = Path(__file__).parent
SCHEMAS = HERE / "schemas"
GOLDEN = HERE / "golden" / "check"
REPO = HERE.parent


@pytest.fixture(scope="module")
def junit_schema() -> xmlschema.XMLSchema:
    return xmlschema.XMLSchema(str(SCHEMAS / "junit-10.xsd"))


@pytest.fixture(scope="module")
def sarif_validator() -> jsonschema.Draft7Validator:
    schema = json.loads((SCHEMAS / "sarif-schema-2.1.0.json").read_text())
    jsonschema.Draft7Validator.check_schema(schema)
    return jsonschema.Draft7Validator(schema, format_checker=jsonschema.Draft7Validator.FORMAT_CHECKER)


def golden(name: str, actual: str) -> None:
    path = GOLDEN / name
    if os.environ.get("UPDATE_GOLDENS"):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(actual, encoding="utf-8")
    assert actual == path.read_text(encoding="utf-8"), f"{name} differs from its golden (UPDATE_GOLDENS=1 rewrites)"


def dump(*docs: dict) -> str:
    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)


def _job(name: str, **spec: object) -> dict:
    doc = aiperf(**{"image": "registry.example/nvidia/aiperf:0.13.0", **spec})
    doc["metadata"]["name"] = name
    return doc


CONFIGMAP = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "settings", "namespace": "bench"}}
SERVICE = {"apiVersion": "v1", "kind": "Service", "metadata": {"name": "llm", "namespace": "bench"}}


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A directory of mixed manifests, as a repository holds them; the tests run in tmp_path so paths
    in the output are relative (as they are in a CI checkout)."""
    m = tmp_path / "manifests"
    (m / "team-b").mkdir(parents=True)
    # a.yaml: a ConfigMap (lines 1-5), the good job (from line 7), the bad one after it
    (m / "a.yaml").write_text(
        dump(CONFIGMAP, _job("good"), _job("bad-image", image="registry.example/nvidia/AIPerf:0.13.0")),
        encoding="utf-8",
    )
    (m / "notes.txt").write_text("not a manifest: a directory gives only .yaml, .yml and .json files\n")
    broken = _job("broken")
    broken["spec"] = 5
    (m / "team-b" / "b.yml").write_text(dump(SERVICE, broken), encoding="utf-8")
    monkeypatch.chdir(tmp_path)
    return m


def test_a_directory_without_r_reads_its_own_files_only(repo, capsys):
    code, out, err = main(capsys, "-f", "manifests", "--offline", "-o", "github")
    assert code == 1  # bad-image is denied; b.yml (and its broken job) is in a subdirectory
    assert err == ""
    assert out.splitlines()[-1] == (
        "Summary: 2 jobs checked in 1 file: 1 passed, 0 passed with warnings, 1 failed; "
        "1 other object skipped (ConfigMap 1)"
    )


def test_r_reads_subdirectories_and_exit_2_wins_for_an_input_error(repo, capsys):
    code, out, err = main(capsys, "-f", "manifests", "-R", "--offline", "-o", "text")
    assert code == 2
    assert err == "error: AIPerfJob bench/broken: spec must be a mapping, not int\n"
    assert out.splitlines()[-1] == (
        "Summary: 2 jobs checked in 2 files: 1 passed, 0 passed with warnings, 1 failed; 1 input error; "
        "2 other objects skipped (ConfigMap 1, Service 1)"
    )
    assert [x for x in out.splitlines() if x.startswith("AIPerfJob ")] == [
        "AIPerfJob bench/good",
        "AIPerfJob bench/bad-image",
    ]


def test_line_numbers_are_each_documents_first_line(repo):
    from webhook.manifests import locate_file

    text = (repo / "a.yaml").read_text().splitlines()
    located = locate_file("manifests/a.yaml")
    assert [(d.obj or {}).get("kind") for d in located] == ["ConfigMap", "AIPerfJob", "AIPerfJob"]
    for d in located:
        assert text[d.line - 2] == "---" or d.line == 1  # the line after its separator
        assert text[d.line - 1] == "apiVersion: " + str(d.obj["apiVersion"])  # type: ignore[index]
    assert located[0].line == 1 and 1 < located[1].line < located[2].line


def test_junit_from_the_cli_follows_the_schema(repo, capsys, junit_schema):
    code, out, err = main(capsys, "-f", "manifests", "-R", "--offline", "-o", "junit")
    assert code == 2
    junit_schema.validate(out)
    root = ET.fromstring(out)
    suites = root.findall("testsuite")
    assert [s.get("name") for s in suites] == [
        "AIPerfJob bench/good",
        "AIPerfJob bench/bad-image",
        "AIPerfJob bench/broken",
    ]
    # one testcase per job x check; the broken document is one <error>
    good, bad, broken = suites
    assert len(good.findall("testcase")) == len(bad.findall("testcase")) == int(good.get("tests", "0")) > 5
    failure = bad.find("testcase[@name='Image Reference']/failure")
    assert failure is not None and failure.get("message", "").startswith(
        'Image "registry.example/nvidia/AIPerf:0.13.0"'
    )
    error = broken.find("testcase/error")
    assert error is not None and error.get("message") == "AIPerfJob bench/broken: spec must be a mapping, not int"
    props = {p.get("name"): p.get("value") for p in broken.iter("property")}
    assert props == {"file": "manifests/team-b/b.yml", "line": "7"}
    assert root.get("errors") == "1" and root.get("failures") == bad.get("failures") != "0"
    assert err.startswith("error: AIPerfJob bench/broken") and err.splitlines()[-1].startswith("Summary: 2 jobs")


def test_junit_exact_output(junit_schema):
    """The whole document for fixed results (every status, an input error, a skipped-with-reason), against
    its golden: the CLI's own golden would change with every new check, this one only with the format."""
    results = PreflightResults(
        [
            CheckResult("Job Render", Status.INFO, "Renders 3 pod(s)"),
            CheckResult(
                "Image Reference", Status.FAIL, 'Image "A:b" is invalid. Fix: use "a:b"', details=["pod group x"]
            ),
            CheckResult(
                "Secrets", Status.WARN, 'cannot verify Secret "hf" (not permitted to get secrets)', hints=["grant get"]
            ),
            CheckResult("Resource Quotas", Status.SKIP, "Skipped: needs a cluster (running offline)"),
            CheckResult("Name Length", Status.PASS, "Longest derived name is 32 of 63 characters"),
        ]
    )
    report = Report(
        entries=[
            JobEntry("manifests/a.yaml", 7, "AIPerfJob bench/bad", results, False),
            ErrorEntry(
                "manifests/b.yml",
                3,
                "AIPerfJob bench/broken",
                "AIPerfJob bench/broken: spec must be a mapping, not int",
            ),
        ],
        files=2,
    )
    out = render_junit(report)
    junit_schema.validate(out)
    golden("fixed.junit.xml", out)


def test_sarif_golden_and_schema(repo, capsys, sarif_validator):
    code, out, _ = main(capsys, "-f", "manifests", "-R", "--offline", "-o", "sarif")
    assert code == 2
    log = json.loads(out)
    sarif_validator.validate(log)
    golden("mixed.sarif", out)
    a_lines = (repo / "a.yaml").read_text().splitlines()
    results = log["runs"][0]["results"]
    image = next(r for r in results if r["ruleId"] == "image-reference")
    where = image["locations"][0]["physicalLocation"]
    assert where["artifactLocation"]["uri"] == "manifests/a.yaml"
    # the bad-image job's document starts at its apiVersion line, after the second separator
    line = where["region"]["startLine"]
    assert a_lines[line - 2] == "---" and a_lines[line - 1].startswith("apiVersion:")
    assert a_lines.index("  name: bad-image") > line - 1
    broken = next(r for r in results if r["ruleId"] == "manifest")
    assert broken["level"] == "error"
    assert broken["locations"][0]["physicalLocation"]["region"] == {"startLine": 7}
    rules = {r["id"] for r in log["runs"][0]["tool"]["driver"]["rules"]}
    assert {r["ruleId"] for r in results} <= rules


def test_github_golden(repo, capsys):
    code, out, _ = main(capsys, "-f", "manifests", "-R", "--offline", "-o", "github")
    assert code == 2
    golden("mixed.github.txt", out)
    assert out.startswith("::error file=manifests/a.yaml,line=")


def test_stdin_multi_document_from_a_pipe_with_lines(monkeypatch, capsys, sarif_validator):
    """`helm template ... | preflight-webhook check -f -`: the source is stdin, lines count from its start."""
    text = "# Source: chart/templates/cm.yaml\n" + dump(CONFIGMAP, _job("bad-image", image="Bad:Image"))
    monkeypatch.setattr("sys.stdin", io.StringIO(text))
    code, out, err = main(capsys, "-f", "-", "--offline", "-o", "sarif")
    assert code == 1
    sarif_validator.validate(json.loads(out))
    loc = json.loads(out)["runs"][0]["results"][0]["locations"][0]["physicalLocation"]
    line = text.splitlines().index("kind: AIPerfJob")  # 0-based index of kind = 1-based line of apiVersion
    assert loc == {"artifactLocation": {"uri": "stdin"}, "region": {"startLine": line}}
    assert err == (
        "Summary: 1 job checked in 1 file: 0 passed, 0 passed with warnings, 1 failed; "
        "1 other object skipped (ConfigMap 1)\n"
    )


def test_many_f_and_stdin_only_once(tmp_path, capsys):
    code, out, _ = main(capsys, "-f", str(AIPERF), "-f", str(AIPERF), "--offline", "-o", "json")
    assert code == 0 and [d["passed"] for d in json.loads(out)] == [True, True]
    code, _, err = main(capsys, "-f", "-", "-f", "-", "--offline")
    assert code == 2 and err == "error: -f - (stdin) can be given once\n"


@pytest.mark.parametrize("fmt", ["junit", "sarif", "github", "json"])
def test_an_unreadable_yaml_file_is_a_structured_error_in_every_format(
    tmp_path, capsys, fmt, junit_schema, sarif_validator
):
    p = tmp_path / "bad.yaml"
    p.write_text("apiVersion: v1\nkind: ConfigMap\n---\nkind: [unclosed\n")
    code, out, err = main(capsys, "-f", str(p), "--offline", "-o", fmt)
    assert code == 2
    message = f"{p}: document 2 is not valid YAML at line 5 column 1: expected ',' or ']', but got '<stream end>'"
    assert err.splitlines()[0] == f"error: {message}"
    if fmt == "junit":
        junit_schema.validate(out)
        error = ET.fromstring(out).find("testsuite/testcase/error")
        assert error is not None and error.get("message") == message and error.get("type") == "InputError"
    elif fmt == "sarif":
        log = json.loads(out)
        sarif_validator.validate(log)
        [result] = log["runs"][0]["results"]
        assert (result["ruleId"], result["level"], result["message"]["text"]) == ("manifest", "error", message)
        assert result["locations"][0]["physicalLocation"]["region"] == {"startLine": 5}
    elif fmt == "github":
        assert out.splitlines()[0] == (f"::error file={p},line=5,title=Manifest%3A {p}%3A5::" + message)
    else:
        [doc] = json.loads(out)
        assert doc["passed"] is False and doc["checks"][0]["message"] == message
        assert (doc["file"], doc["line"], doc["document"], doc["error"]) == (str(p), 5, 2, message)


def test_render_escapes_what_each_format_must():
    """Messages are the user's object content too: XML specials, control characters, commas and colons."""
    nasty = 'a <b> & "c", d: e\n%f\x01'
    report = Report(
        entries=[
            JobEntry(
                "x,y:z.yaml", 3, "AIPerfJob ns/j", PreflightResults([CheckResult("Names", Status.FAIL, nasty)]), False
            ),
            ErrorEntry("e.yaml", 0, "e.yaml", "cannot read"),
        ],
        files=2,
    )
    assert render_github(report) == (
        # a control character (a line break too) from the object is shown as an escape (visible), then encoded
        '::error file=x%2Cy%3Az.yaml,line=3,title=Names%3A AIPerfJob ns/j::a <b> & "c", d: e\\x0a%25f\\x01\n'
        "::error file=e.yaml,title=Manifest%3A e.yaml::cannot read\n"
    )
    xml = render_junit(report)
    failure = ET.fromstring(xml).find("testsuite/testcase/failure")
    assert failure is not None and failure.get("message") == 'a <b> & "c", d: e\n%f\ufffd'
    sarif = json.loads(render_sarif(report))
    assert sarif["runs"][0]["results"][0]["message"]["text"] == "AIPerfJob ns/j: " + nasty
    assert sarif["runs"][0]["results"][1]["locations"][0]["physicalLocation"]["region"] == {"startLine": 1}


def _kubectl() -> Path:
    from e2e.harness.controlplane import cache_dir

    return cache_dir() / "bin" / "kubectl"


def test_kubectl_runs_the_entry_point_as_a_plugin(tmp_path):
    """The real kubectl (e2e/build.sh's) finds `kubectl-preflight` on PATH: `kubectl preflight check`."""
    kubectl = _kubectl()
    if not kubectl.is_file():
        proc = subprocess.run(["bash", str(REPO / "e2e" / "build.sh"), "control-plane"], capture_output=True, text=True)
        assert proc.returncode == 0, proc.stderr
    plugin = shutil.which("kubectl-preflight", path=str(Path(sys.executable).parent))
    assert plugin, "kubectl-preflight is not installed beside this Python (pip install -e .)"
    env = {**os.environ, "PATH": f"{Path(plugin).parent}:{kubectl.parent}:/usr/bin:/bin", "KUBECONFIG": "/dev/null"}
    listed = subprocess.run([str(kubectl), "plugin", "list"], capture_output=True, text=True, env=env)
    assert plugin in listed.stdout
    bad = tmp_path / "bad.yaml"
    bad.write_text(dump(_job("bad-image", image="Bad:Image")))
    proc = subprocess.run(
        [str(kubectl), "preflight", "check", "-f", str(bad), "--offline", "-o", "github"],
        capture_output=True,
        text=True,
        env=env,
    )
    assert proc.returncode == 1, proc.stderr
    assert proc.stdout.startswith(f"::error file={bad},line=1,title=Image Reference%3A AIPerfJob bench/bad-image::")
    usage = subprocess.run([str(kubectl), "preflight", "check"], capture_output=True, text=True, env=env)
    assert usage.returncode == 2 and usage.stderr.startswith("usage: kubectl preflight check")
