"""`preflight-webhook check` in a pipeline (issue 36): every input gives a valid report, every finding
names its job. Each test is one case of the issue, with the exact output a user sees:

1. an input with no job: exit 0 and a valid empty report in every format, the Summary counting what was
   skipped, `--fail-on-empty`; an empty directory too;
2. `-R` at a repository root: hidden directories, Helm chart files and files that are not manifests are
   passed over and counted, `--exclude`, a dangling symbolic link said;
3. `-o json`: always an array, each entry naming its object and where it is, against its JSON Schema
   (docs/schemas/check-report.v1.schema.json);
5. the skip annotation's granted and refused skips in every format; `--fail-on warn`; `--context`; a
   kubeconfig that is missing or broken said in one line;
6. control characters from a manifest shown as escapes in text and github output; SARIF relative URIs
   percent-encoded.
"""

from __future__ import annotations

import io
import json
import os
import subprocess
import sys
import xml.etree.ElementTree as ET
from pathlib import Path
from urllib.parse import unquote, urlsplit

import jsonschema
import pytest
import yaml

from tests.test_cmd_check import AIPERF, KUBECONFIG, aiperf, kubeconfig, main
from tests.test_cmd_check_ci import junit_schema, sarif_validator
from webhook.cli.formats import JSON_SCHEMA_VERSION

#: the fixtures shared with the modules they come from (one definition each)
__all__ = ["junit_schema", "kubeconfig", "sarif_validator"]

HERE = Path(__file__).parent
REPO = HERE.parent
SCHEMAS = HERE / "schemas"
REPORT_SCHEMA = REPO / "docs" / "schemas" / "check-report.v1.schema.json"

DEPLOYMENT = "apiVersion: apps/v1\nkind: Deployment\nmetadata: {name: x}\n"
NO_JOB = "note: no AIPerfJob, AIPerfSweep, TrainJob or JobSet found in the input"


@pytest.fixture(scope="module")
def report_validator() -> jsonschema.Draft202012Validator:
    schema = json.loads(REPORT_SCHEMA.read_text())
    jsonschema.Draft202012Validator.check_schema(schema)
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)


def job(name: str, **spec: object) -> dict:
    doc = aiperf(**{"image": "registry.example/nvidia/aiperf:0.13.0", **spec})
    doc["metadata"]["name"] = name
    return doc


def dump(*docs: dict) -> str:
    return "---\n".join(yaml.safe_dump(d, sort_keys=False) for d in docs)


# ---- 1. no job in the input ---------------------------------------------------------------------------


SUMMARY_NO_JOB = (
    "Summary: 0 jobs checked in 1 file: 0 passed, 0 passed with warnings, 0 failed; "
    "1 other object skipped (Deployment 1)"
)


@pytest.mark.parametrize("fmt", ["text", "json", "junit", "sarif", "github"])
def test_no_job_is_a_valid_empty_report_and_exit_0_in_every_format(
    monkeypatch, capsys, fmt, junit_schema, sarif_validator, report_validator
):
    """The issue's command: a Deployment on stdin printed 0 bytes and exited 2 in every format."""
    monkeypatch.setattr("sys.stdin", io.StringIO(DEPLOYMENT))
    code, out, err = main(capsys, "--offline", "-f", "-", "-o", fmt)
    assert code == 0
    note = f"{NO_JOB}; 1 other object skipped (Deployment 1)\n"
    if fmt in ("text", "github"):  # the summary ends the output, as always
        assert (out, err) == (SUMMARY_NO_JOB + "\n", note)
        return
    assert err == note + SUMMARY_NO_JOB + "\n"
    if fmt == "json":
        assert out == "[]\n"
        report_validator.validate(json.loads(out))
    elif fmt == "junit":
        junit_schema.validate(out)
        assert out == (
            '<?xml version="1.0" encoding="UTF-8"?>\n'
            '<testsuites name="preflight-webhook" tests="0" failures="0" errors="0">\n'
            "</testsuites>\n"
        )
    else:
        log = json.loads(out)
        sarif_validator.validate(log)
        [run] = log["runs"]
        assert (run["results"], run["tool"]["driver"]["rules"]) == ([], [])


@pytest.mark.parametrize("fmt", ["text", "sarif"])
def test_fail_on_empty_makes_no_job_exit_2_and_still_writes_the_report(monkeypatch, capsys, fmt, sarif_validator):
    monkeypatch.setattr("sys.stdin", io.StringIO(DEPLOYMENT))
    code, out, err = main(capsys, "--offline", "-f", "-", "-o", fmt, "--fail-on-empty")
    assert code == 2
    assert err.splitlines()[0] == (
        "error: no AIPerfJob, AIPerfSweep, TrainJob or JobSet found in the input; 1 other object skipped (Deployment 1)"
    )
    if fmt == "sarif":
        sarif_validator.validate(json.loads(out))
    else:
        assert out == SUMMARY_NO_JOB + "\n"


def test_an_empty_directory_is_an_empty_report_not_the_runtimes_message(tmp_path, capsys):
    code, out, err = main(capsys, "--offline", "-f", str(tmp_path), "-o", "json")
    assert (code, out) == (0, "[]\n")
    assert err == (f"{NO_JOB}\nSummary: 0 jobs checked in 0 files: 0 passed, 0 passed with warnings, 0 failed\n")
    code, _, err = main(capsys, "--offline", "-f", str(tmp_path), "--fail-on-empty")
    assert code == 2 and err == "error: no AIPerfJob, AIPerfSweep, TrainJob or JobSet found in the input\n"


def test_runtimes_alone_are_counted_as_skipped_objects(tmp_path, capsys):
    runtime = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "ClusterTrainingRuntime",
        "metadata": {"name": "r"},
    }
    p = tmp_path / "rt.yaml"
    p.write_text(dump(runtime))
    code, out, err = main(capsys, "--offline", "-f", str(p))
    assert code == 0
    assert out == (
        "Summary: 0 jobs checked in 1 file: 0 passed, 0 passed with warnings, 0 failed; "
        "1 other object skipped (ClusterTrainingRuntime 1)\n"
    )
    assert err == f"{NO_JOB}; 1 other object skipped (ClusterTrainingRuntime 1)\n"


def test_check_help_names_every_kind_it_judges(capsys):
    with pytest.raises(SystemExit):
        main(capsys, "--help")
    out = " ".join(capsys.readouterr().out.split())
    assert "Run the webhook's checks on AIPerfJob, AIPerfSweep, TrainJob and JobSet manifests." in out
    assert "--fail-on-empty exit 2 when the input holds no AIPerfJob, AIPerfSweep, TrainJob or JobSet" in out


# ---- 2. -R at a repository root -----------------------------------------------------------------------


@pytest.fixture
def checkout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository as CI checks it out: workflows, a .git, a Helm chart (templates, values, its CRDs), a
    docs config, the manifests, and vendored YAML; the tests run at its root (`check -R -f .`)."""
    files = {
        ".github/workflows/ci.yml": "on: push\njobs: {}\n",
        ".git/hooks/x.yaml": "a: 1\n",
        "chart/Chart.yaml": "apiVersion: v2\nname: bench\nversion: 0.1.0\n",
        "chart/values.yaml": "image: x\n",
        "chart/values-prod.yaml": "image: y\n",
        "chart/templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: {{ .Release.Name }}\n{{- if .Values.x }}\n",
        "chart/crds/crd.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\nmetadata: {name: x.y.z}\n",
        "mkdocs.yml": "site_name: docs\nnav: []\n",
        "manifests/job.yaml": dump(job("good")),
        "vendor/lib.yaml": "not: [valid\n",
    }
    for rel, text in files.items():
        (tmp_path / rel).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / rel).write_text(text)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_r_at_a_repository_root_reads_the_manifests_and_counts_what_it_passes_over(checkout, capsys):
    code, out, err = main(capsys, "-R", "-f", ".", "--offline", "--exclude", "vendor", "-o", "github")
    assert (code, err) == (0, "")
    assert out == (
        "Summary: 1 job checked in 2 files: 1 passed, 0 passed with warnings, 0 failed; "
        "1 other object skipped (CustomResourceDefinition 1); "
        "8 paths not read (Helm chart file 4, excluded 1, hidden directory 2, not a Kubernetes manifest 1)\n"
    )


def test_exclude_repeats_and_matches_names_and_paths(checkout, capsys):
    code, out, _ = main(
        capsys, "-R", "-f", ".", "--offline", "--exclude", "vendor/*", "--exclude", "*.yml", "--exclude", "chart"
    )
    assert code == 0
    assert out.splitlines()[-1] == (
        "Summary: 1 job checked in 1 file: 1 passed, 0 passed with warnings, 0 failed; "
        "5 paths not read (excluded 3, hidden directory 2)"
    )


def test_without_exclude_an_invalid_yaml_file_is_still_an_input_error(checkout, capsys):
    """A file that cannot be read as YAML may be a broken manifest: it is said, not passed over."""
    code, _, err = main(capsys, "-R", "-f", ".", "--offline")
    assert code == 2
    assert err == (
        "error: vendor/lib.yaml: document 1 is not valid YAML at line 2 column 1: "
        "expected ',' or ']', but got '<stream end>'\n"
    )


def test_a_chart_templates_directory_given_with_f_is_passed_over(checkout, capsys):
    code, out, err = main(capsys, "-f", "chart/templates", "--offline")
    assert code == 0
    assert out == (
        "Summary: 0 jobs checked in 0 files: 0 passed, 0 passed with warnings, 0 failed; "
        "1 path not read (Helm chart file 1)\n"
    )
    assert err == f"{NO_JOB}\n"


def test_a_file_named_with_f_is_read_whatever_it_holds(checkout, capsys):
    code, _, err = main(capsys, "-f", "mkdocs.yml", "--offline")
    assert code == 2
    assert err == "error: mkdocs.yml: document 1 has no apiVersion and no kind\n"


@pytest.mark.parametrize("fmt", ["text", "json"])
def test_a_dangling_symbolic_link_is_an_input_error(checkout, capsys, fmt):
    os.symlink("moved-away.yaml", "manifests/old.yaml")
    code, out, err = main(capsys, "-R", "-f", "manifests", "--offline", "-o", fmt)
    assert code == 2
    message = "manifests/old.yaml: a symbolic link to 'moved-away.yaml', which does not exist"
    assert err.splitlines()[0] == f"error: {message}"
    if fmt == "json":
        entries = json.loads(out)
        assert [(e["file"], e["error"]) for e in entries] == [
            ("manifests/job.yaml", None),
            ("manifests/old.yaml", message),
        ]
    else:
        assert out.splitlines()[-1] == (
            "Summary: 1 job checked in 1 file: 1 passed, 0 passed with warnings, 0 failed; 1 input error"
        )


# ---- 3. -o json: an array whose entries name their job ------------------------------------------------


def test_json_entries_name_their_object_and_where_it_is_and_follow_the_schema(tmp_path, capsys, report_validator):
    broken = job("broken")
    broken["spec"] = 5
    p = tmp_path / "jobs.yaml"
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "c"}}
    p.write_text(dump(cm, job("good"), job("bad-image", image="registry.example/nvidia/AIPerf:1"), broken))
    code, out, _ = main(capsys, "-f", str(p), "--offline", "-o", "json")
    assert code == 2
    entries = json.loads(out)
    report_validator.validate(entries)
    lines = p.read_text().splitlines()
    head = [
        {k: e[k] for k in ("apiVersion", "kind", "namespace", "name", "file", "document", "passed", "error")}
        for e in entries
    ]
    assert head == [
        {
            "apiVersion": "aiperf.nvidia.com/v1alpha1",
            "kind": "AIPerfJob",
            "namespace": "bench",
            "name": name,
            "file": str(p),
            "document": document,
            "passed": passed,
            "error": error,
        }
        for name, document, passed, error in [
            ("good", 2, True, None),
            ("bad-image", 3, False, None),
            ("broken", 4, False, "AIPerfJob bench/broken: spec must be a mapping, not int"),
        ]
    ]
    for e in entries:  # each line is its document's first, the line after its separator
        assert lines[e["line"] - 2] == "---" and lines[e["line"] - 1] == "apiVersion: aiperf.nvidia.com/v1alpha1"
    assert {e["schemaVersion"] for e in entries} == {JSON_SCHEMA_VERSION}


def test_the_report_schema_is_versioned_as_the_output_says():
    schema = json.loads(REPORT_SCHEMA.read_text())
    assert schema["$defs"]["entry"]["properties"]["schemaVersion"] == {"const": JSON_SCHEMA_VERSION}
    # the schema refuses what is not the v1 shape: an object instead of an array, an unknown field
    validator = jsonschema.Draft202012Validator(schema)
    assert not validator.is_valid({"passed": True, "has_warnings": False, "checks": []})


# ---- 5. skips named, --fail-on warn, --context, the kubeconfig ----------------------------------------

SKIP_CONFIG = "skippableChecks: [Image Reference]\n"
GRANTED = "Skipped: annotation preflight.webhook.io/skip-checks (in skippableChecks)"
REFUSED = "annotation preflight.webhook.io/skip-checks cannot skip 'Name Length': not in skippableChecks"


@pytest.fixture
def skipping(tmp_path: Path) -> tuple[Path, Path]:
    """(a config that lets the annotation skip Image Reference, a job whose annotation skips it and Name Length)."""
    cfg = tmp_path / "config.yaml"
    cfg.write_text(SKIP_CONFIG)
    doc = job("skips", image="Bad:Image")  # Image Reference would deny it: the skip is what admits it
    doc["metadata"]["annotations"] = {"preflight.webhook.io/skip-checks": "Image Reference, Name Length"}
    p = tmp_path / "job.yaml"
    p.write_text(dump(doc))
    return cfg, p


def test_skips_granted_and_refused_are_named_in_text(skipping, capsys):
    cfg, p = skipping
    code, out, err = main(capsys, "-f", str(p), "--offline", "--config", str(cfg))
    assert (code, err) == (0, "")
    lines = out.splitlines()
    assert f"  - Image Reference          {GRANTED}" in lines
    assert lines.index(f"  - Image Reference          {GRANTED}") < lines.index(
        "  - Image Pull               Skipped: needs a cluster (running offline)"
    )  # where the check runs
    assert lines[-4:] == [
        f"  ! {REFUSED}",
        "  PASSED with warnings: 5 passed, 0 failed, 1 warnings, 20 skipped; cluster checks were skipped (offline)",
        "",
        "Summary: 1 job checked in 1 file: 0 passed, 1 passed with warnings, 0 failed",
    ]


def test_skips_granted_and_refused_are_named_in_json(skipping, capsys, report_validator):
    cfg, p = skipping
    code, out, _ = main(capsys, "-f", str(p), "--offline", "--config", str(cfg), "-o", "json")
    assert code == 0
    entries = json.loads(out)
    report_validator.validate(entries)
    [e] = entries
    assert e["skipRequests"] == [
        {"check": "Image Reference", "granted": True, "message": GRANTED},
        {"check": "Name Length", "granted": False, "message": REFUSED},
    ]
    assert (e["notes"], e["has_warnings"]) == ([REFUSED], True)
    image = next(c for c in e["checks"] if c["name"] == "Image Reference")
    assert (image["status"], image["message"]) == ("skip", GRANTED)
    assert next(c for c in e["checks"] if c["name"] == "Name Length")["status"] == "pass"  # it ran


def test_skips_granted_and_refused_are_named_in_junit(skipping, capsys, junit_schema):
    cfg, p = skipping
    code, out, _ = main(capsys, "-f", str(p), "--offline", "--config", str(cfg), "-o", "junit")
    assert code == 0
    junit_schema.validate(out)
    suite = ET.fromstring(out).find("testsuite")
    assert suite is not None
    skipped = suite.find("testcase[@name='Image Reference']/skipped")
    assert skipped is not None and skipped.get("message") == GRANTED
    assert [x.text for x in suite.findall("system-out")] == [f"warning: {REFUSED}"]


def test_skips_granted_and_refused_are_named_in_sarif(skipping, capsys, sarif_validator):
    cfg, p = skipping
    code, out, _ = main(capsys, "-f", str(p), "--offline", "--config", str(cfg), "-o", "sarif")
    assert code == 0
    log = json.loads(out)
    sarif_validator.validate(log)
    [run] = log["runs"]
    assert [(r["ruleId"], r["level"], r["message"]["text"]) for r in run["results"]] == [
        (
            "skip-annotation",
            "note",
            "AIPerfJob bench/skips: check 'Image Reference' skipped by annotation preflight.webhook.io/skip-checks "
            "(in skippableChecks)",
        ),
        ("skip-annotation", "warning", f"AIPerfJob bench/skips: {REFUSED}"),
    ]
    assert [r["id"] for r in run["tool"]["driver"]["rules"]] == ["skip-annotation"]


def test_skips_granted_and_refused_are_named_in_github(skipping, capsys):
    cfg, p = skipping
    code, out, _ = main(capsys, "-f", str(p), "--offline", "--config", str(cfg), "-o", "github")
    assert code == 0
    title = "title=Skip Annotation%3A AIPerfJob bench/skips"
    assert out.splitlines() == [
        f"::notice file={p},line=1,{title}::check 'Image Reference' skipped by annotation "
        "preflight.webhook.io/skip-checks (in skippableChecks)",
        f"::warning file={p},line=1,{title}::{REFUSED}",
        "Summary: 1 job checked in 1 file: 0 passed, 1 passed with warnings, 0 failed",
    ]


def test_fail_on_warn_exits_1_when_the_webhook_would_warn(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("checks:\n  Image Reference: warn\n")
    p = tmp_path / "job.yaml"
    p.write_text(dump(job("warned", image="Bad:Image")))
    code, out, _ = main(capsys, "-f", str(p), "--offline", "--config", str(cfg))
    assert code == 0  # the default: a warning admits
    code, out2, _ = main(capsys, "-f", str(p), "--offline", "--config", str(cfg), "--fail-on", "warn")
    assert code == 1 and out2 == out
    assert out.splitlines()[-1] == "Summary: 1 job checked in 1 file: 0 passed, 1 passed with warnings, 0 failed"
    good = tmp_path / "good.yaml"
    good.write_text(dump(job("good")))
    assert main(capsys, "-f", str(good), "--offline", "--fail-on", "warn")[0] == 0


def test_context_is_the_kubeconfig_context_used(monkeypatch, capsys, kubeconfig):
    import webhook.cluster.live as live

    asked: list[object] = []

    async def refuse(settings, kubeconfig=None, **kw):
        asked.append(kw.get("context"))
        raise ConnectionRefusedError("connection refused")

    monkeypatch.setattr(live, "open_cluster_view", refuse)
    code, _, err = main(capsys, "-f", str(AIPERF), "--context", "other")
    assert (code, asked) == (2, ["other"])
    assert err == (
        "error: cannot connect to the cluster: connection refused. "
        "Fix: check --kubeconfig and --context, or run with --offline\n"
    )


def test_a_context_the_kubeconfig_does_not_have_is_one_line(capsys, kubeconfig):
    code, out, err = main(capsys, "-f", str(AIPERF), "--context", "prod")
    assert (code, out) == (2, "")
    assert err == (
        f"error: the kubeconfig {kubeconfig} has no context 'prod', named by --context (it has: test, other). "
        "Fix: give --context NAME, or run with --offline\n"
    )


def _cli(*argv: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "webhook", "check", *argv], capture_output=True, text=True, env=env, cwd=REPO
    )


def test_no_kubeconfig_is_one_readable_line_and_no_client_warning(tmp_path):
    """Before: "Expected key current-context" and a kubernetes_asyncio WARNING line."""
    env = {k: v for k, v in os.environ.items() if k not in ("KUBECONFIG", "KUBERNETES_SERVICE_HOST")}
    env["HOME"] = str(tmp_path)
    proc = _cli("-f", str(AIPERF), env=env)
    assert (proc.returncode, proc.stdout) == (2, "")
    assert proc.stderr == (
        f"error: no kubeconfig: {tmp_path}/.kube/config does not exist and $KUBECONFIG is not set. "
        "Fix: give a kubeconfig with --kubeconfig FILE (or $KUBECONFIG), or run with --offline\n"
    )


@pytest.mark.parametrize(
    "text, said",
    [
        ("clusters: [\n", "is not valid YAML at line 2 column 1"),
        ("apiVersion: v1\nkind: Config\nclusters: []\n", "has no current-context"),
    ],
)
def test_a_broken_kubeconfig_is_one_readable_line(tmp_path, capsys, text, said):
    p = tmp_path / "kc"
    p.write_text(text)
    code, out, err = main(capsys, "-f", str(AIPERF), "--kubeconfig", str(p))
    assert (code, out) == (2, "")
    fix = (
        "Fix: give a kubeconfig with --kubeconfig FILE (or $KUBECONFIG)"
        if "YAML" in said
        else "Fix: give --context NAME (it has none)"
    )
    assert err == f"error: the kubeconfig {p} {said}. {fix}, or run with --offline\n"


def test_a_kubeconfig_file_that_does_not_exist_is_one_readable_line(tmp_path, capsys):
    code, out, err = main(capsys, "-f", str(AIPERF), "--kubeconfig", str(tmp_path / "nope"))
    assert (code, out) == (2, "")
    assert err == (
        f"error: no kubeconfig: --kubeconfig {tmp_path}/nope does not exist. "
        "Fix: give a kubeconfig with --kubeconfig FILE (or $KUBECONFIG), or run with --offline\n"
    )


def test_a_context_naming_a_cluster_the_kubeconfig_lacks_is_one_readable_line(tmp_path, capsys):
    p = tmp_path / "kc"
    p.write_text(
        KUBECONFIG.replace("- {name: other, context: {cluster: test,", "- {name: other, context: {cluster: gone,")
    )
    code, _, err = main(capsys, "-f", str(AIPERF), "--kubeconfig", str(p), "--context", "other")
    assert code == 2
    assert err == (
        f"error: the kubeconfig {p}: context 'other' names cluster 'gone', which is not in its clusters. "
        "Fix: kubectl config set-context other --cluster=NAME, or run with --offline\n"
    )


# ---- 6. terminal safety and SARIF paths ---------------------------------------------------------------

HOSTILE_IMAGE = "nvcr.io/a\x01b\x1b[31mred:1"


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_control_characters_from_a_manifest_are_shown_as_escapes(tmp_path, capsys, fmt):
    p = tmp_path / "job.yaml"
    p.write_text(dump(job("hostile", image=HOSTILE_IMAGE)))
    code, out, _ = main(capsys, "-f", str(p), "--offline", "-o", fmt)
    assert code == 1
    assert "\x1b" not in out and "\x01" not in out
    [line] = [x for x in out.splitlines() if "Image Reference" in x]
    shown = 'Image "nvcr.io/a\\x01b\\x1b[31mred:1" used by containers'
    if fmt == "text":
        assert line.startswith(f"  ✗ Image Reference          {shown}")
    else:
        assert line.startswith(f"::error file={p},line=1,title=Image Reference%3A AIPerfJob bench/hostile::{shown}")


def test_a_file_name_with_control_characters_is_shown_as_escapes_on_stderr(tmp_path, capsys):
    p = tmp_path / "a\x1b[2Jb.yaml"
    p.write_text("kind: [\n")
    code, _, err = main(capsys, "-f", str(p), "--offline")
    assert code == 2 and "\x1b" not in err
    assert err.startswith(f"error: {tmp_path}/a\\x1b[2Jb.yaml: document 1 is not valid YAML")


def test_sarif_relative_uris_are_percent_encoded(tmp_path, monkeypatch, capsys, sarif_validator):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "my dir").mkdir()
    name = "my dir/job #1 100%.yaml"
    Path(name).write_text(dump(job("bad-image", image="Bad:Image")))
    code, out, _ = main(capsys, "-f", name, "--offline", "-o", "sarif")
    assert code == 1
    log = json.loads(out)
    sarif_validator.validate(log)
    uri = log["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
    assert uri == "my%20dir/job%20%231%20100%25.yaml"
    parts = urlsplit(uri)  # a relative reference whose path is the whole of it: no fragment cut at '#'
    assert (parts.scheme, parts.fragment, parts.query, unquote(parts.path)) == ("", "", "", name)


def test_r_reads_in_kubectls_order_a_subdirectory_where_its_name_sorts(tmp_path, monkeypatch, capsys):
    """filepath.Walk's order: m/a.yaml, m/sub/b.yaml, m/z.yaml (a subdirectory's files where its name sorts)."""
    monkeypatch.chdir(tmp_path)
    for rel in ("m/a.yaml", "m/sub/b.yaml", "m/z.yaml"):
        Path(rel).parent.mkdir(parents=True, exist_ok=True)
        Path(rel).write_text(dump(job(Path(rel).stem)))
    code, out, _ = main(capsys, "-R", "-f", "m", "--offline", "-o", "json")
    assert code == 0
    assert [(e["file"], e["name"]) for e in json.loads(out)] == [
        ("m/a.yaml", "a"),
        ("m/sub/b.yaml", "b"),
        ("m/z.yaml", "z"),
    ]
