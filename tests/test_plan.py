"""`preflight-webhook plan` and the manifest loader it shares with `check`."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from webhook.cli import plan as cmd_plan
from webhook.manifests import load_documents, parse_documents, split_runtimes

ORACLE = Path(__file__).parent / "oracle"
AIPERF = ORACLE / "specs" / "sample.yaml"
TRAINJOB = (ORACLE / "samples" / "trainjob.yaml").read_text()
RUNTIME = (ORACLE / "samples" / "clustertrainingruntime.yaml").read_text()


def _run(path, output="json", capsys=None):
    code = cmd_plan.run(argparse.Namespace(filename=str(path), output=output, config=None))
    out = capsys.readouterr()
    return code, out.out, out.err


@pytest.fixture(autouse=True)
def _no_operator_env(monkeypatch):
    import os

    for k in list(os.environ):
        if k.startswith("AIPERF_"):
            monkeypatch.delenv(k)


def test_aiperf_plan_json_matches_the_oracle(capsys):
    code, out, err = _run(AIPERF, capsys=capsys)
    assert code == 0 and err == ""
    p = json.loads(out)
    golden = json.loads((ORACLE / "golden" / "sample.json").read_text())
    cm_bytes = sum(len(k.encode()) + len(v.encode()) for k, v in golden["configMap"]["data"].items())
    assert list(p) == ["kind", "name", "namespace", "podGroups", "references", "derived"]
    assert p["kind"] == "AIPerfJob" and p["name"] == "llama-sweep" and p["namespace"] == "bench"
    assert [(g["name"], g["replicas"], g["requests"], g["limits"]) for g in p["podGroups"]] == [
        ("controller", 1, {"cpu": "450m", "memory": "1792Mi"}, {"cpu": "450m", "memory": "1792Mi"}),
        ("workers", 2, {"cpu": "3350m", "memory": "6Gi"}, {"cpu": "3350m", "memory": "6Gi"}),
    ]
    assert p["podGroups"][0]["containers"][0] == {"name": "event-bus-proxy", "image": "nvcr.io/nvidia/aiperf:0.13.0"}
    assert len(p["podGroups"][1]["containers"]) == 21
    assert p["references"] == {"secrets": ["hf", "ngc"], "serviceAccount": None, "configMaps": []}
    assert p["derived"] == {
        "jobSet": {"name": "aiperf-llama-sweep"},
        "configMap": {"name": "aiperf-llama-sweep-config", "bytes": cm_bytes},
    }


def test_trainjob_plan_uses_the_runtime_in_the_same_input(tmp_path, capsys):
    f = tmp_path / "tj.yaml"
    f.write_text(TRAINJOB + "\n---\n" + RUNTIME)
    code, out, _ = _run(f, capsys=capsys)
    p = json.loads(out)
    assert code == 0
    assert [(g["name"], g["replicas"], g["requests"]) for g in p["podGroups"]] == [
        ("model-initializer", 1, {"cpu": "2", "memory": "4Gi"}),
        ("node", 4, {"cpu": "32", "memory": "256Gi", "nvidia.com/gpu": "8"}),
    ]
    assert p["references"]["secrets"] == ["ghcr-pull", "hf-token"]
    assert p["derived"] == {"jobSet": {"name": "llama-ft"}, "configMap": None}


def test_trainjob_without_runtime_still_lists_its_secrets(tmp_path, capsys):
    f = tmp_path / "tj.yaml"
    f.write_text(TRAINJOB)
    code, out, _ = _run(f, output="text", capsys=capsys)
    assert code == 0
    assert out.splitlines()[:3] == [
        "TrainJob team-a/llama-ft",
        '  pods unknown: ClusterTrainingRuntime "torch-distributed" was not found (offline: put it in the same input file)',
        "  secrets: hf-token",
    ]


def test_text_output_is_readable(capsys):
    code, out, _ = _run(AIPERF, output="text", capsys=capsys)
    assert code == 0
    lines = out.splitlines()
    assert lines[0] == "AIPerfJob bench/llama-sweep"
    assert "  pod group workers: 2 pod(s)" in lines
    assert "    per pod: requests cpu=3350m memory=6Gi; limits cpu=3350m memory=6Gi" in lines
    assert lines[-1] == "  creates ConfigMap aiperf-llama-sweep-config (1,547 bytes of 1,048,576)"


def test_unrenderable_job_exits_1_with_the_reason(capsys):
    code, out, err = _run(ORACLE / "specs" / "uneven-split.yaml", capsys=capsys)
    assert code == 1
    assert "error: AIPerfJob bench/uneven: The AIPerf operator would refuse to render this job: total_workers=25" in err
    assert json.loads(out)["podGroups"] == []


@pytest.mark.parametrize(
    "content, message",
    [
        ("a: [1, 2\n", "document 1 is not valid YAML at line 2 column 1"),
        ("apiVersion: v1\nkind: X\n---\n- 3\n", "document 2 is a int, not a Kubernetes object"),
        ("kind: X\n", "document 1 has no apiVersion"),
        ("", "no Kubernetes objects found"),
        ('{"apiVersion": "v1", ', "invalid JSON at line 1"),
    ],
)
def test_unreadable_input_exits_2(tmp_path, capsys, content, message):
    f = tmp_path / "bad.yaml"
    f.write_text(content)
    code, out, err = _run(f, capsys=capsys)
    assert code == 2 and out == ""
    assert message in err


def test_missing_file_and_bad_spec_exit_2(tmp_path, capsys):
    code, _, err = _run(tmp_path / "nope.yaml", capsys=capsys)
    assert code == 2 and "no such file" in err
    f = tmp_path / "bad.yaml"
    f.write_text(AIPERF.read_text().replace("connectionsPerWorker: 100", "connectionsPerWorker: 100\n  workers: 3"))
    code, _, err = _run(f, capsys=capsys)
    assert code == 2 and "spec.workers is not a field of AIPerfJob" in err


def test_loader_accepts_json_lists_and_kind_list():
    docs = parse_documents(
        '[{"apiVersion": "v1", "kind": "A"}, {"apiVersion": "v1", "kind": "List", "items": [{"apiVersion": "v1", "kind": "B"}]}]'
    )
    assert [d["kind"] for d in docs] == ["A", "B"]
    assert len(load_documents(str(AIPERF))) == 1


def test_split_runtimes_keys_cluster_and_namespaced():
    rt = {"apiVersion": "trainer.kubeflow.org/v1alpha1", "kind": "ClusterTrainingRuntime", "metadata": {"name": "c"}}
    nrt = {
        "apiVersion": "trainer.kubeflow.org/v1alpha1",
        "kind": "TrainingRuntime",
        "metadata": {"name": "n", "namespace": "a"},
    }
    job = {"apiVersion": "v1", "kind": "X"}
    jobs, lookup = split_runtimes([rt, nrt, job])
    assert jobs == [job]
    assert lookup("ClusterTrainingRuntime", "", "c") is rt
    assert lookup("TrainingRuntime", "a", "n") is nrt
    assert lookup("TrainingRuntime", "b", "n") is None
