"""The CLI's input bounds follow the apiserver's own limits (issue 33, part 5).

The reproduction: `preflight-webhook check --offline -f big.yaml` on a 50 MB YAML with 2.4M labels took
122 s and 3,744 MiB, and its error blamed "YAML aliases" (there were none). Now a document is measured
from the parser's events as its lines are read, and one over the apiserver's 3 MiB request body is
refused with that reason before anything is built; the rest of it is passed over unparsed. Labels and
annotations are held to the apiserver's ObjectMeta validation. The inputs are generated; the memory bound
is asserted on what is decoded and loaded, not on RSS (docs/benchmarks/cli-input.md has the RSS).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest
import yaml

from tests.test_cmd_check import AIPERF, main
from webhook import apilimits, manifests
from webhook.manifests import Located, locate_documents, locate_file

HEADER = (
    "apiVersion: aiperf.nvidia.com/v1alpha1\nkind: AIPerfJob\nmetadata:\n  name: big\n  namespace: default\n  labels:\n"
)


def labels_yaml(n: int) -> str:
    """The reproduction's shape: one AIPerfJob with `n` labels (2.4M made the 50 MB file)."""
    return (
        HEADER
        + "".join(f"    k{i:07d}: v{i:07d}\n" for i in range(n))
        + "spec:\n  benchmark:\n    endpoint:\n      url: http://x\n"
    )


#: what the reproduction's file is refused with, whatever its size past the limit
BIG_REFUSAL = (
    "document 1 (line 1) is refused: it is more than 3 MiB as JSON, over the 3 MiB (3,145,728 bytes) the apiserver "
    "reads of a request body (k8s.io/apiserver MaxRequestBodyBytes), so it would answer 413 Request Entity Too "
    "Large before any webhook sees the object; the limit is passed at line 142989, entry 142,983 of "
    "metadata.labels. Fix: remove what the job does not need (inline data belongs in a ConfigMap, a volume or a "
    "URL)"
)


@pytest.fixture(scope="module")
def big(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """600,000 labels (13 MB): past the loader's old 1,000,000-value bound, where it blamed YAML aliases."""
    p = tmp_path_factory.mktemp("big") / "big.yaml"
    p.write_text(labels_yaml(600_000))
    return p


def test_the_reproduction_is_refused_with_the_true_cause_and_exit_2(big, capsys):
    code, out, err = main(capsys, "-f", str(big), "--offline")
    assert code == 2
    assert out == ""
    assert err == f"error: {big}: {BIG_REFUSAL}\n"
    assert "aliases" not in err


def test_the_refused_document_is_neither_loaded_nor_kept(big, monkeypatch):
    """Memory linear in the input, bounded per document: of 13 MB, only what the measure needed to pass the
    limit is decoded (about 3 MiB of YAML), nothing reaches the loader, and the rest is skipped unread."""
    decoded: list[int] = []
    composed: list[int] = []
    decode, compose = manifests._decode, manifests._compose

    def counting_decode(raw: bytes, offset: int) -> str:
        decoded.append(len(raw))
        return decode(raw, offset)

    def counting_compose(text: str, *args, **kwargs):
        composed.append(len(text))
        return compose(text, *args, **kwargs)

    monkeypatch.setattr(manifests, "_decode", counting_decode)
    monkeypatch.setattr(manifests, "_compose", counting_compose)
    [refused] = locate_file(str(big))
    assert refused == Located(str(big), 1, error=f"{big}: {BIG_REFUSAL}")
    assert big.stat().st_size > 13_000_000
    assert sum(decoded) < 4 * 2**20
    assert composed == []


def test_documents_after_a_refused_one_are_read_with_their_lines(big, tmp_path, capsys):
    p = tmp_path / "two.yaml"
    big_text = big.read_text()
    p.write_text(big_text + "---\n" + AIPERF.read_text())
    code, out, err = main(capsys, "-f", str(p), "--offline", "-o", "json")
    assert code == 2  # an input error, and the other document is still judged
    assert err.splitlines()[0] == f"error: {p}: {BIG_REFUSAL}"
    assert json.loads(out)[1]["passed"] is True
    located = locate_file(str(p))
    [sample] = locate_documents(AIPERF.read_text())
    assert [d.line for d in located] == [1, big_text.count("\n") + 1 + sample.line]


def test_plan_reads_through_the_same_bound(big, capsys):
    import argparse

    from webhook.cli import plan as cmd_plan

    code = cmd_plan.run(argparse.Namespace(filename=str(big), output="json", config=None))
    out, err = capsys.readouterr()
    assert (code, out) == (2, "")
    assert err == f"error: {big}: {BIG_REFUSAL}\n"


def test_stdin_is_read_in_chunks_too(big, monkeypatch, capsys):
    class Stdin:
        buffer = io.BytesIO(big.read_bytes())

    monkeypatch.setattr("sys.stdin", Stdin())
    code, _, err = main(capsys, "-f", "-", "--offline")
    assert code == 2
    assert err == f"error: stdin: {BIG_REFUSAL}\n"


def test_a_list_is_measured_item_by_item_as_kubectl_sends_it(monkeypatch):
    """kubectl sends each item of a List (or of a top-level list) on its own: only an item is held to the limit."""
    monkeypatch.setattr(manifests, "MAX_OBJECT_BYTES", 4096)
    item = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "x"}, "data": {"a": "x" * 3000}}
    items = yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [item, item, item]})
    assert [d.obj for d in locate_documents(items)] == [item, item, item]
    listed = yaml.safe_dump([item, item, item])
    assert [d.obj for d in locate_documents(listed)] == [item, item, item]
    whole = yaml.safe_dump({"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": "x" * 3000, "b": "y" * 3000}})
    [refused] = locate_documents(whole, "in.yaml")
    assert refused.error is not None
    assert refused.error.startswith("in.yaml: document 1 (line 1) is refused: it is more than 4 KiB as JSON")
    assert "; the limit is passed at line 4, entry 2 of data." in refused.error
    big_item = dict(item, data={"a": "x" * 5000})
    [refused] = locate_documents(yaml.safe_dump({"apiVersion": "v1", "kind": "List", "items": [item, big_item]}))
    assert refused.error is not None and ", entry 1 of items[1].data." in refused.error


def test_json_over_the_limit_is_refused_after_parsing_with_its_exact_size(tmp_path, capsys):
    doc = {"apiVersion": "aiperf.nvidia.com/v1alpha1", "kind": "AIPerfJob", "metadata": {"name": "j"}}
    doc["spec"] = {"x": "y" * (3 * 2**20)}
    p = tmp_path / "big.json"
    p.write_text(json.dumps(doc))
    size = len(json.dumps(doc, separators=(",", ":")))
    code, out, err = main(capsys, "-f", str(p), "--offline")
    assert code == 2 and out == ""
    assert err == (
        f"error: {p}: document 1 (line 1) is refused: it is {size:,} bytes as JSON, over the 3 MiB (3,145,728 "
        "bytes) the apiserver reads of a request body (k8s.io/apiserver MaxRequestBodyBytes), so it would answer "
        "413 Request Entity Too Large before any webhook sees the object. Fix: remove what the job does not need "
        "(inline data belongs in a ConfigMap, a volume or a URL)\n"
    )


# --------------------------------------------------------------------------- labels and annotations


def with_metadata(tmp_path: Path, **meta: object) -> Path:
    doc = yaml.safe_load(AIPERF.read_text())
    doc["metadata"].update(meta)
    p = tmp_path / "job.yaml"
    p.write_text(yaml.safe_dump(doc))
    return p


LABEL_FIX = (
    "Fix: a label key is an optional DNS subdomain prefix and '/' then a name of at most 63 characters, a label "
    "value at most 63 characters (alphanumerics, '-', '_' and '.')"
)


def test_labels_the_apiserver_refuses_are_refused_with_its_reasons(tmp_path, capsys):
    p = with_metadata(tmp_path, labels={"a/b/c": "x", "ok": "v" * 64, "team": "x\x1b[31m"})
    code, out, err = main(capsys, "-f", str(p), "--offline")
    assert code == 2 and out == ""
    assert err == (
        f"error: {p}: document 1 (line 1) is refused: the apiserver validates metadata before any webhook sees the "
        "object, and would refuse metadata.labels key 'a/b/c': a valid label key must consist of alphanumeric "
        "characters, '-', '_' or '.', and must start and end with an alphanumeric character with an optional DNS "
        "subdomain prefix and '/' (e.g. 'example.com/MyName'); metadata.labels['ok'] value "
        "'vvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvvv...': must be no more than 63 characters; metadata.labels['team'] "
        "value 'x\\x1b[31m': a valid label must be an empty string or consist of alphanumeric characters, '-', '_' "
        f"or '.', and must start and end with an alphanumeric character. {LABEL_FIX}\n"
    )


def test_annotations_over_256_kib_are_refused(tmp_path, capsys):
    p = with_metadata(tmp_path, annotations={"a": "x" * (256 * 1024)})
    code, _, err = main(capsys, "-f", str(p), "--offline")
    assert code == 2
    assert err == (
        f"error: {p}: document 1 (line 1) is refused: the apiserver validates metadata before any webhook sees the "
        "object, and would refuse metadata.annotations: Too long: must have at most 262144 bytes (keys and values "
        "are 262,145 bytes; TotalAnnotationSizeLimitB, 256 KiB). Fix: keep large data out of annotations (a "
        "ConfigMap, a volume or a URL)\n"
    )


def test_annotations_at_256_kib_and_valid_labels_pass(tmp_path, capsys):
    labels = {"example.com/MyName": "my_value", "1.2.3.4/5678": "", "UpperCase123": "12345"}
    p = with_metadata(tmp_path, annotations={"Example.COM/x": "x" * (256 * 1024 - 13)}, labels=labels)
    code, _, err = main(capsys, "-f", str(p), "--offline")
    assert (code, err) == (0, "")


@pytest.mark.parametrize(
    ("key", "problems"),
    [  # cases from k8s.io/apimachinery's own tests of IsQualifiedName
        ("simple", []),
        ("now-with-dashes", []),
        ("1-starts-with-num", []),
        ("1234", []),
        ("simple/simple", []),
        ("now-with-dashes/simple", []),
        ("1-num.2-num/3-num", []),
        ("1.2.3.4/5678", []),
        ("Uppercase_Is_OK_123", []),
        ("example.com/Uppercase_Is_OK_123", []),
        ("a" * 63, []),
        ("a" * 253 + "/a", []),
        ("?", ["name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
               "alphanumeric character"]),
        ("/simple", ["prefix part must be non-empty"]),
        ("example.com/", ["name part must be non-empty", "name part must consist of alphanumeric characters, '-', "
                          "'_' or '.', and must start and end with an alphanumeric character"]),
        ("a" * 64, ["name part must be no more than 63 characters"]),
        ("a" * 254 + "/a", ["prefix part must be no more than 253 characters"]),
        ("Example.com/a", ["prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric "
                           "characters, '-' or '.', and must start and end with an alphanumeric character"]),
    ],
)  # fmt: skip
def test_label_keys_follow_is_label_key(key, problems):
    assert apilimits.label_key_problems(key) == problems


# --------------------------------------------------------------------------- the loader's own bound, named truly


def test_too_many_values_without_aliases_is_not_blamed_on_aliases(monkeypatch):
    monkeypatch.setattr(manifests, "MAX_EXPANDED_VALUES", 1000)
    text = "apiVersion: v1\nkind: X\nspec:\n" + "".join(f"  k{i}: {i}\n" for i in range(600))
    [refused] = locate_documents(text, "in.yaml")
    assert refused.error == (
        "in.yaml: document 1 is refused: it holds more than 1000 values (keys, values and list items), more than "
        "preflight-webhook reads in one document. Fix: split it into smaller objects"
    )


def test_aliases_are_blamed_when_they_make_the_document_too_big(monkeypatch):
    monkeypatch.setattr(manifests, "MAX_EXPANDED_VALUES", 1000)
    text = "apiVersion: v1\nkind: X\nspec:\n  a: &a [1, 2, 3, 4, 5, 6, 7, 8, 9, 10]\n"
    text += "  b: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a, *a]\n  c: [*b, *b, *b, *b, *b, *b, *b, *b, *b, *b]\n"
    [refused] = locate_documents(text, "in.yaml")
    assert refused.error == (
        "in.yaml: document 1 is refused: YAML aliases expand it to more than 1000 values (23 written out). Fix: "
        "write the repeated values with fewer aliases"
    )


def test_undecodable_bytes_are_named_with_their_offset(tmp_path):
    p = tmp_path / "bad.yaml"
    p.write_bytes(b"apiVersion: v1\nkind: A\n---\napiVersion: v1\nkind: \xff\n")
    located = locate_file(str(p))
    assert [(d.line, d.error) for d in located] == [
        (1, None),
        (5, f"{p}: not UTF-8 text (invalid start byte at byte 48)"),
    ]


# --------------------------------------------------------------------------- libyaml reads, PyYAML's words


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("apiVersion: v1\nkind:\tX\n", "document 1 is not valid YAML at line 2 column 6: found character '\\t' that "
         "cannot start any token"),
        ("apiVersion: v1\nkind: X\n---\t# c\n", "document 2 is not valid YAML at line 3 column 4: found character "
         "'\\t' that cannot start any token"),
        ("apiVersion: v1\nkind: X\nspec: 'a\n---\nx: y\n", "document 1 is not valid YAML at line 4 column 1: found "
         "unexpected document separator"),
    ],
)  # fmt: skip
def test_where_libyaml_and_pyyaml_differ_the_message_is_pyyamls(text, error):
    """Documents are loaded with libyaml's composer; where it reads differently (tabs) or cannot read, PyYAML's
    loader reads the document again, with the rest of the input when it ends at a separator."""
    assert [d.error for d in locate_documents(text, "in.yaml") if d.error] == [f"in.yaml: {error}"]


def test_the_measure_is_exact_for_strings_and_a_lower_bound_otherwise(monkeypatch):
    """At the limit a document is read; one byte over, it is refused before loading. What the measure
    counts low (merged keys: `<<`) is caught after loading, by the exact size."""
    monkeypatch.setattr(manifests, "MAX_OBJECT_BYTES", 4096)
    head = '{"apiVersion":"v1","kind":"ConfigMap","data":{"a":""}}'
    fits = {"apiVersion": "v1", "kind": "ConfigMap", "data": {"a": 'x"\\' * ((4096 - len(head)) // 5)}}
    assert len(json.dumps(fits, separators=(",", ":"))) == 4096 - (4096 - len(head)) % 5
    fits["data"]["a"] += "y" * ((4096 - len(head)) % 5)
    assert len(json.dumps(fits, separators=(",", ":"))) == 4096
    assert [d.obj for d in locate_documents(yaml.safe_dump(fits))] == [fits]
    fits["data"]["a"] += "z"
    [over] = locate_documents(yaml.safe_dump(fits), "in.yaml")
    assert over.error is not None and "is refused: it is more than 4 KiB as JSON" in over.error
    merged = "apiVersion: v1\nkind: X\nbase: &b {a: " + "x" * 3000 + "}\nobj: {<<: *b}\n"
    [over] = locate_documents(merged, "in.yaml")
    assert over.error is not None and "is refused: it is 6,061 bytes as JSON, over the 4 KiB" in over.error
