"""`preflight-webhook check`: output shapes, exit codes, and where text goes."""

import argparse
import io
import json
from pathlib import Path

import pytest
import yaml

from webhook.cli import check as cmd_check
from webhook.results import CheckResult, PreflightResults, Status

SAMPLES = Path(__file__).parent / "oracle" / "samples"  # copies of the design notes' samples
AIPERF = SAMPLES / "aiperfjob.yaml"


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="preflight-webhook")
    cmd_check.add_parser(p.add_subparsers(dest="command"))
    return p.parse_args(["check", *argv])


def main(capsys, *argv: str) -> tuple[int, str, str]:
    args = parse(*argv)
    code = args.func(args)
    out, err = capsys.readouterr()
    return code, out, err


def aiperf(**spec_changes) -> dict:
    doc = yaml.safe_load(AIPERF.read_text())
    doc["spec"].update(spec_changes)
    return doc


def write(tmp_path: Path, *docs: dict, name: str = "in.yaml") -> Path:
    p = tmp_path / name
    p.write_text(yaml.safe_dump_all(docs), encoding="utf-8")
    return p


def test_text_output_offline_sample_passes(capsys):
    code, out, err = main(capsys, "-f", str(AIPERF), "--offline")
    assert code == 0
    lines = out.rstrip("\n").splitlines()
    assert lines[0] == "AIPerfJob bench/llama-sweep"
    assert "  ✓ Image Reference          The image is a valid reference (0 pinned by digest)" in lines
    assert '  ✓ ConfigMap Size           ConfigMap "aiperf-llama-sweep-config" is ' in "\n".join(lines)
    assert any(
        line.startswith("  - Secrets ") and line.endswith("Skipped: needs a cluster (running offline)")
        for line in lines
    )
    assert lines[-3].startswith("  PASSED: ") and lines[-3].endswith("; cluster checks were skipped (offline)")
    assert lines[-2] == ""
    assert lines[-1] == "Summary: 1 job checked in 1 file: 1 passed, 0 passed with warnings, 0 failed"
    assert err == ""


def test_json_output_is_an_array_of_aiperf_shaped_entries_that_name_their_job(capsys):
    code, out, err = main(capsys, "-f", str(AIPERF), "--offline", "-o", "json")
    assert code == 0
    [doc] = json.loads(out)
    assert {"passed", "has_warnings", "checks"} <= set(doc)  # AIPerf's shape, for the tools that read it
    assert {k: doc[k] for k in ("schemaVersion", "apiVersion", "kind", "namespace", "name")} == {
        "schemaVersion": "preflight.webhook.io/check-report/v1",
        "apiVersion": "aiperf.nvidia.com/v1alpha1",
        "kind": "AIPerfJob",
        "namespace": "bench",
        "name": "llama-sweep",
    }
    # the document's first line, after the sample's comments
    assert (doc["file"], doc["line"], doc["document"], doc["error"]) == (str(AIPERF), 4, 1, None)
    assert doc["passed"] is True
    assert all(set(c) == {"name", "status", "message", "details", "hints", "duration_ms"} for c in doc["checks"])
    assert {"Image Reference", "ConfigMap Size", "Name Length", "Accelerator Limits"} <= {
        c["name"] for c in doc["checks"]
    }


def test_failed_check_exits_1_and_several_documents_give_a_list(tmp_path, capsys):
    bad = aiperf(image="Nvcr.io/nvidia/AIPerf:0.13.0")
    bad["metadata"]["name"] = "bad-image"
    p = write(tmp_path, aiperf(), bad)
    code, out, err = main(capsys, "-f", str(p), "--offline", "-o", "json")
    assert code == 1
    docs = json.loads(out)
    assert isinstance(docs, list) and [d["passed"] for d in docs] == [True, False]
    image = next(c for c in docs[1]["checks"] if c["name"] == "Image Reference")
    assert image["status"] == "fail"
    assert image["message"].startswith('Image "Nvcr.io/nvidia/AIPerf:0.13.0" used by containers "event-bus-proxy"')
    assert err == "Summary: 2 jobs checked in 1 file: 1 passed, 0 passed with warnings, 1 failed\n"


def test_failed_text_output_shows_symbol_details_and_decision(tmp_path, capsys):
    p = write(tmp_path, aiperf(image="Nvcr.io/nvidia/AIPerf:0.13.0"))
    code, out, err = main(capsys, "-f", str(p), "--offline")
    assert code == 1
    line = next(x for x in out.splitlines() if "Image Reference" in x)
    assert line.startswith("  ✗ Image Reference ")
    verdict = out.rstrip("\n").splitlines()[-3]
    assert verdict.startswith("  FAILED: ") and "the webhook would deny it" in verdict


def test_stdin(monkeypatch, capsys):
    monkeypatch.setattr("sys.stdin", io.StringIO(AIPERF.read_text()))
    code, out, _ = main(capsys, "-f", "-", "--offline", "-o", "json")
    assert code == 0 and json.loads(out)[0]["passed"] is True


def test_missing_file_exits_2_and_says_so_on_stderr_and_in_the_json(tmp_path, capsys):
    nope = tmp_path / "nope.yaml"
    code, out, err = main(capsys, "-f", str(nope), "--offline", "-o", "json")
    assert code == 2
    assert json.loads(out) == [
        {
            "schemaVersion": "preflight.webhook.io/check-report/v1",
            "apiVersion": None,
            "kind": None,
            "namespace": None,
            "name": None,
            "file": str(nope),
            "line": None,
            "document": None,
            "passed": False,
            "has_warnings": False,
            "checks": [
                {
                    "name": "Manifest",
                    "status": "fail",
                    "message": f"{nope}: no such file",
                    "details": [f"at {nope}"],
                    "hints": [],
                    "duration_ms": None,
                }
            ],
            "skipRequests": [],
            "notes": [],
            "error": f"{nope}: no such file",
        }
    ]
    assert err == (
        f"error: {nope}: no such file\n"
        "Summary: 0 jobs checked in 1 file: 0 passed, 0 passed with warnings, 0 failed; 1 input error\n"
    )


def test_missing_file_in_text_is_only_on_stderr(tmp_path, capsys):
    code, out, err = main(capsys, "-f", str(tmp_path / "nope.yaml"), "--offline")
    assert (code, out) == (2, "")
    assert err == f"error: {tmp_path / 'nope.yaml'}: no such file\n"


def test_invalid_yaml_exits_2(tmp_path, capsys):
    p = tmp_path / "bad.yaml"
    p.write_text("kind: [unclosed\n")
    code, out, err = main(capsys, "-f", str(p), "--offline")
    assert (code, out) == (2, "")
    assert err.startswith(f"error: {p}: document 1 is not valid YAML")


def test_document_that_is_not_its_kind_exits_2_but_others_are_reported(tmp_path, capsys):
    broken = aiperf()
    broken["spec"] = 5
    broken["metadata"]["name"] = "broken"
    p = write(tmp_path, broken, aiperf())
    code, out, err = main(capsys, "-f", str(p), "--offline", "-o", "json")
    assert code == 2
    assert err == (
        "error: AIPerfJob bench/broken: spec must be a mapping, not int\n"
        "Summary: 1 job checked in 1 file: 1 passed, 0 passed with warnings, 0 failed; 1 input error\n"
    )
    broken_report, checked = json.loads(out)
    assert checked["passed"] is True  # the readable document is still checked
    assert broken_report["passed"] is False
    assert [(c["name"], c["message"], c["details"]) for c in broken_report["checks"]] == [
        ("Manifest", "AIPerfJob bench/broken: spec must be a mapping, not int", [f"at {p}:1"])
    ]


def test_unhandled_kinds_are_counted_and_no_job_is_an_empty_report_exit_0(tmp_path, capsys):
    p = write(tmp_path, {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}})
    code, out, err = main(capsys, "-f", str(p), "--offline")
    assert code == 0
    assert out == (
        "Summary: 0 jobs checked in 1 file: 0 passed, 0 passed with warnings, 0 failed; "
        "1 other object skipped (ConfigMap 1)\n"
    )
    assert err == (
        "note: no AIPerfJob, AIPerfSweep, TrainJob or JobSet found in the input; 1 other object skipped (ConfigMap 1)\n"
    )


def test_bad_config_exits_2(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("mode: strict\n")
    code, out, err = main(capsys, "-f", str(AIPERF), "--offline", "--config", str(cfg))
    assert (code, out) == (2, "")
    assert err.startswith(f"error: config file {cfg} is invalid:\n  mode: Input should be")


def test_config_actions_apply(tmp_path, capsys):
    cfg = tmp_path / "c.yaml"
    cfg.write_text("checks:\n  Image Reference: off\n")
    p = write(tmp_path, aiperf(image="Nvcr.io/nvidia/AIPerf:0.13.0"))
    code, out, _ = main(capsys, "-f", str(p), "--offline", "--config", str(cfg), "-o", "json")
    assert code == 0
    assert "Image Reference" not in {c["name"] for c in json.loads(out)[0]["checks"]}


def test_bad_timeout_exits_2(capsys):
    code, out, err = main(capsys, "-f", str(AIPERF), "--offline", "--timeout", "0")
    assert (code, out, err) == (
        2,
        "",
        "error: --timeout must be greater than 0 (got 0): it is each job's time budget in seconds. "
        "Fix: give e.g. --timeout 10, or leave it out to use the config's budgetSeconds\n",
    )


KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: test
contexts:
- {name: test, context: {cluster: test, user: test}}
- {name: other, context: {cluster: test, user: test}}
clusters:
- {name: test, cluster: {server: "https://127.0.0.1:1"}}
users:
- {name: test, user: {token: x}}
"""


@pytest.fixture
def kubeconfig(tmp_path, monkeypatch) -> Path:
    """A kubeconfig that names its contexts, clusters and users consistently (as $KUBECONFIG)."""
    p = tmp_path / "kubeconfig"
    p.write_text(KUBECONFIG)
    monkeypatch.setenv("KUBECONFIG", str(p))
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST", raising=False)
    return p


def test_without_offline_a_cluster_error_suggests_offline(monkeypatch, capsys, kubeconfig):
    import webhook.cluster.live as live

    async def refuse(settings, kubeconfig=None, **kw):
        raise FileNotFoundError(f"kubeconfig {kubeconfig} not found")

    monkeypatch.setattr(live, "open_cluster_view", refuse)
    code, out, err = main(capsys, "-f", str(AIPERF), "--kubeconfig", str(kubeconfig), "-o", "json")
    assert (code, out) == (2, "")
    assert err == (
        f"error: cannot connect to the cluster: kubeconfig {kubeconfig} not found. "
        "Fix: check --kubeconfig and --context, or run with --offline\n"
    )


def test_with_a_cluster_view_cluster_checks_run_and_the_view_is_closed(monkeypatch, capsys, kubeconfig):
    import webhook.cluster.live as live

    class View:
        closed = False

        def check_capability(self, check):
            return False, "not permitted to get secrets"

        def get_cached(self, resource, namespace, name):
            return None

        def list_cached(self, resource, namespace=None):
            return []

        async def close(self):
            View.closed = True

    async def open_view(settings, kubeconfig=None, **kw):
        return View()

    monkeypatch.setattr(live, "open_cluster_view", open_view)
    code, out, err = main(capsys, "-f", str(AIPERF), "-o", "json")
    assert code == 0
    checks = {c["name"]: c for c in json.loads(out)[0]["checks"]}
    assert checks["Secrets"]["message"] == "Skipped: not permitted to get secrets"
    assert View.closed


def test_render_text_hints_and_details():
    res = PreflightResults(
        [
            CheckResult("A", Status.WARN, "short", details=["more detail"], hints=["try this"]),
            CheckResult("Bee", Status.INFO, "fyi"),
        ]
    )
    assert cmd_check.render_text("TrainJob ns/x", res, True, False).splitlines() == [
        "TrainJob ns/x",
        "  ! A    short",
        "      more detail",
        "      hint: try this",
        "  i Bee  fyi",
        "  PASSED with warnings: 0 passed, 0 failed, 1 warnings, 0 skipped",
    ]


@pytest.mark.parametrize("argv", [[], ["-f", "x", "-o", "yaml"]])
def test_usage_errors_exit_2(argv):
    with pytest.raises(SystemExit) as exc:
        parse(*argv)
    assert exc.value.code == 2


def test_a_failure_the_webhook_only_warns_about_is_a_warning_and_exits_0(tmp_path, capsys):
    """Action warn: the webhook admits the object with a warning, so the CLI says the same (exit 0)."""
    cfg = tmp_path / "c.yaml"
    cfg.write_text("checks:\n  Image Reference: warn\n")
    p = write(tmp_path, aiperf(image="Nvcr.io/nvidia/AIPerf:0.13.0"))
    code, out, err = main(capsys, "-f", str(p), "--offline", "--config", str(cfg))
    assert (code, err) == (0, "")
    lines = out.rstrip("\n").splitlines()
    image = next(i for i, x in enumerate(lines) if "Image Reference" in x)
    assert lines[image].startswith(
        '  ! Image Reference          Image "Nvcr.io/nvidia/AIPerf:0.13.0" used by containers'
    )
    assert "      the webhook admits it with this warning (the check's action is warn)" in lines[image + 1 :]
    assert lines[-3].startswith("  PASSED with warnings: ") and "0 failed" in lines[-3] and "deny" not in lines[-3]
    assert lines[-1] == "Summary: 1 job checked in 1 file: 0 passed, 1 passed with warnings, 0 failed"

    code, out, _ = main(capsys, "-f", str(p), "--offline", "--config", str(cfg), "-o", "json")
    [doc] = json.loads(out)
    assert code == 0 and doc["passed"] is True and doc["has_warnings"] is True
    image = next(c for c in doc["checks"] if c["name"] == "Image Reference")
    assert image["status"] == "warn"
    assert image["details"][-1] == "the webhook admits it with this warning (the check's action is warn)"


@pytest.mark.parametrize(
    "config, note",
    [
        ("mode: warn\n", "the webhook admits it with this warning (mode warn)"),
        ("mode: audit\n", "the webhook admits it and records this in its audit annotations only (mode audit)"),
        (
            "checks:\n  Image Reference: audit\n",
            "the webhook admits it and records this in its audit annotations only (the check's action is audit)",
        ),
    ],
)
def test_modes_and_audit_action_are_rendered_as_the_webhook_decides(tmp_path, capsys, config, note):
    cfg = tmp_path / "c.yaml"
    cfg.write_text(config)
    p = write(tmp_path, aiperf(image="Nvcr.io/nvidia/AIPerf:0.13.0"))
    code, out, _ = main(capsys, "-f", str(p), "--offline", "--config", str(cfg), "-o", "json")
    [doc] = json.loads(out)
    image = next(c for c in doc["checks"] if c["name"] == "Image Reference")
    assert (code, doc["passed"], image["status"], image["details"][-1]) == (0, True, "warn", note)


def test_as_decided_renders_the_decision_not_the_raw_results():
    from webhook.config import Settings
    from webhook.engine import timed_out_result
    from webhook.policy import decide

    res = PreflightResults(
        [CheckResult("Secrets", Status.FAIL, "gone. Fix: create it"), timed_out_result("Image Reference", 4.0)]
    )
    d = decide(res, settings=Settings(timeoutAction="deny", checks={"Secrets": "warn"}))
    shown = cmd_check.as_decided(res, d)
    assert [(r.name, r.status) for r in shown.checks] == [("Secrets", Status.WARN), ("Image Reference", Status.FAIL)]
    assert not d.allowed and not shown.passed
    text = cmd_check.render_text("TrainJob ns/x", shown, d.allowed, False).splitlines()
    assert text[-1] == "  FAILED: 0 passed, 1 failed, 1 warnings, 0 skipped; the webhook would deny it"


# --------------------------------------------------------------------------- hostile YAML

BILLION_LAUGHS = """\
apiVersion: aiperf.nvidia.com/v1alpha1
kind: AIPerfJob
metadata: {name: lol, namespace: default}
spec:
  a: &a ["lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol", "lol"]
  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]
  c: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]
  d: &d [*c, *c, *c, *c, *c, *c, *c, *c, *c, *c]
  e: &e [*d, *d, *d, *d, *d, *d, *d, *d, *d, *d]
  f: &f [*e, *e, *e, *e, *e, *e, *e, *e, *e, *e]
  g: &g [*f, *f, *f, *f, *f, *f, *f, *f, *f, *f]
  h: &h [*g, *g, *g, *g, *g, *g, *g, *g, *g, *g]
  i: &i [*h, *h, *h, *h, *h, *h, *h, *h, *h, *h]
"""


def test_a_billion_laughs_is_refused_with_exit_2(tmp_path, capsys):
    """Measured from the parser's events, aliases counted as what they expand to, before anything is built."""
    p = tmp_path / "lol.yaml"
    p.write_text("---\n" + BILLION_LAUGHS)
    code, out, err = main(capsys, "-f", str(p), "--offline")
    assert code == 2
    assert out == ""
    assert err.strip() == (
        f"error: {p}: document 1 (line 2) is refused: it is more than 3 MiB as JSON once its YAML aliases are "
        "expanded, over the 3 MiB (3,145,728 bytes) the apiserver reads of a request body (k8s.io/apiserver "
        "MaxRequestBodyBytes), so it would answer 413 Request Entity Too Large before any webhook sees the object; "
        "the limit is passed at line 11, entry 4 of spec.f. Fix: remove what the job does not need (inline data "
        "belongs in a ConfigMap, a volume or a URL); every YAML alias is sent as a whole copy of its anchor"
    )


def test_a_recursive_alias_is_refused_with_exit_2(tmp_path, capsys):
    p = tmp_path / "loop.yaml"
    p.write_text("apiVersion: v1\nkind: X\nmetadata: {name: x}\nspec: &s {again: *s}\n")
    code, _, err = main(capsys, "-f", str(p), "--offline")
    assert code == 2
    assert err.strip() == (
        f"error: {p}: document 1 (line 1) is refused: a YAML alias at line 4 refers to a value that contains it "
        "(a recursive alias), which has no JSON form. Fix: write the value out, or alias a value that is complete"
    )


@pytest.mark.parametrize(("fmt", "text"), [
    ("yaml", "apiVersion: v1\nkind: X\nspec: " + "[" * 5000 + "]" * 5000 + "\n"),
    ("json", '{"apiVersion": "v1", "kind": "X", "spec": ' + "[" * 5000 + "]" * 5000 + "}"),
])  # fmt: skip
def test_nesting_deeper_than_the_recursion_limit_is_exit_2_not_a_traceback(tmp_path, capsys, fmt, text):
    p = tmp_path / f"deep.{fmt}"
    p.write_text(text)
    code, out, err = main(capsys, "-f", str(p), "--offline")
    assert code == 2
    assert "Traceback" not in err
    assert err.strip() == (
        f"error: {p}: document 1 is nested too deeply to read (more levels than Python's recursion limit)"
    )
