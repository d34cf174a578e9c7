"""webhook/objects.py: the typed views are the apiserver's JSON dicts, every key optional."""

from typing import get_type_hints, is_typeddict

from webhook import objects
from webhook.workloads.base import PodGroup

VIEWS = [getattr(objects, name) for name in objects.__all__ if is_typeddict(getattr(objects, name))]


def test_every_view_leaves_every_key_optional() -> None:
    # Kubernetes omits empty fields: a check reads `.get` and never meets a required key
    assert len(VIEWS) > 20
    for view in VIEWS:
        assert view.__required_keys__ == frozenset(), view.__name__
        assert view.__optional_keys__ == frozenset(get_type_hints(view)), view.__name__


def test_as_view_is_the_same_object() -> None:
    raw = {"containers": [{"name": "a"}], "futureField": {"x": 1}}
    assert objects.as_pod_spec(raw) is raw
    meta = {"name": "n", "labels": {"a": "b"}}
    assert objects.as_object_meta(meta) is meta
    node = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4"}}}
    assert objects.as_node(node) is node
    nodes = [node]
    assert objects.as_nodes(nodes) is nodes


def test_pod_group_reads_a_spec_with_unknown_and_missing_fields() -> None:
    spec = objects.as_pod_spec({"initContainers": [{"name": "i"}], "containers": [{"name": "c"}], "new": True})
    group = PodGroup(name="g", pods=1, pod_spec=spec)
    assert [c.get("name") for c in group.containers()] == ["i", "c"]
    assert [c.get("name") for c in group.containers(init=False)] == ["c"]
    assert group.pod_metadata == {}
    assert PodGroup(name="e", pods=1, pod_spec=objects.PodSpec()).containers() == []
