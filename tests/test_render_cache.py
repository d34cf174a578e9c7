"""The render cache (webhook/workloads/render_cache.py): the same content and inputs render once;
a changed spec, object, runtime, setting or environment renders again."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from webhook.config import Settings
from webhook.metrics import Metrics
from webhook.workloads import AdapterError, aiperf, build_workload
from webhook.workloads.aiperf import run_epoch
from webhook.workloads.base import JsonText
from webhook.workloads.render_cache import CACHE, MAX_BYTES, UID_MARK, RenderCache, stats

SAMPLES = Path(__file__).resolve().parent.parent / "e2e" / "samples"


def sample(name: str) -> dict[str, Any]:
    doc: dict[str, Any] = yaml.safe_load((SAMPLES / f"{name}.yaml").read_text())
    return doc


def runtime(rv: str = "100") -> dict[str, Any]:
    (rt,) = [d for d in yaml.safe_load_all((SAMPLES / "01-clustertrainingruntime.yaml").read_text()) if d]
    rt["metadata"]["resourceVersion"] = rv
    return dict(rt)


class Lookup:
    """A runtime lookup answering with `self.found` and counting its calls."""

    def __init__(self, found: dict[str, Any] | None) -> None:
        self.found = found
        self.calls = 0

    def __call__(self, kind: str, namespace: str, name: str) -> dict[str, Any] | None:
        self.calls += 1
        return self.found


@pytest.fixture(autouse=True)
def empty_cache() -> Iterator[None]:
    CACHE.clear()
    yield
    CACHE.clear()


def counted() -> tuple[int, int]:
    return stats()


def delta(before: tuple[int, int]) -> tuple[int, int]:
    hits, misses = stats()
    return hits - before[0], misses - before[1]


def test_identical_trainjob_renders_once_and_each_review_gets_its_own_workload() -> None:
    settings, lookup = Settings(), Lookup(runtime())
    before = counted()
    first = build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=lookup)
    again_obj = sample("trainjob-good")
    second = build_workload(again_obj, settings=settings, runtime_lookup=lookup)
    assert delta(before) == (1, 1)
    assert first is not None and second is not None and first is not second
    assert second.obj is again_obj  # the review's own object, not the first one's
    assert second.derived == first.derived and second.pod_groups == first.pod_groups
    # one review changing its Workload's lists and dicts changes nothing another review sees
    second.pod_groups.clear()
    second.derived.pop("jobSet")
    second.render_errors.append("changed")
    third = build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=lookup)
    assert third is not None and third.pod_groups == first.pod_groups and "jobSet" in third.derived
    assert third.render_errors == first.render_errors
    assert delta(before) == (2, 1)


def test_a_changed_spec_misses() -> None:
    settings, lookup = Settings(), Lookup(runtime())
    build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=lookup)
    changed = sample("trainjob-good")
    changed["spec"]["trainer"]["numNodes"] = 3
    before = counted()
    wl = build_workload(changed, settings=settings, runtime_lookup=lookup)
    assert delta(before) == (0, 1)
    assert wl is not None and wl.total_pods == 3


def test_a_changed_label_misses() -> None:
    settings, lookup = Settings(), Lookup(runtime())
    build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=lookup)
    labelled = sample("trainjob-good")
    labelled["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "team-a"}
    before = counted()
    wl = build_workload(labelled, settings=settings, runtime_lookup=lookup)
    assert delta(before) == (0, 1)
    assert wl is not None and wl.queue_name == "team-a"


def test_a_new_create_of_a_trainjob_hits_its_uid_and_timestamps_are_not_read() -> None:
    """The apiserver gives every create (a dry run too) a new uid and creationTimestamp: a TrainJob's
    render does not read them, so a dry run and the apply that follows share one render."""
    settings, lookup = Settings(), Lookup(runtime())
    dry = sample("trainjob-good")
    dry["metadata"].update(uid="1111", creationTimestamp="2026-01-01T00:00:00Z", resourceVersion="")
    build_workload(dry, settings=settings, runtime_lookup=lookup)
    real = sample("trainjob-good")
    real["metadata"].update(uid="2222", creationTimestamp="2026-01-01T00:00:01Z", resourceVersion="7", generation=1)
    before = counted()
    wl = build_workload(real, settings=settings, runtime_lookup=lookup)
    assert delta(before) == (1, 0)
    assert wl is not None and wl.obj["metadata"]["uid"] == "2222"


def test_an_aiperfjob_with_another_uid_hits_and_its_render_holds_its_own_uid() -> None:
    settings = Settings()
    a = sample("aiperfjob-good")
    a["metadata"]["uid"] = "aaaa-1"
    build_workload(a, settings=settings)
    b = sample("aiperfjob-good")
    b["metadata"]["uid"] = "bbbb-2"
    before = counted()
    wl = build_workload(b, settings=settings)
    assert delta(before) == (1, 0)
    assert wl is not None
    env = [e for c in wl.pod_groups[0].containers() for e in c.get("env") or []]
    assert {"name": "AIPERF_JOB_UID", "value": "bbbb-2"} in env
    assert "aaaa-1" not in repr(wl.derived) and "aaaa-1" not in repr(wl.pod_groups)


def test_a_runtime_with_a_new_resource_version_misses_and_the_same_version_hits() -> None:
    settings = Settings()
    build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=Lookup(runtime("100")))
    before = counted()
    # another object with the same resourceVersion (a relist): the same runtime
    build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=Lookup(runtime("100")))
    assert delta(before) == (1, 0)
    changed = runtime("101")
    changed["spec"] = copy.deepcopy(changed["spec"])
    changed["spec"]["template"]["spec"]["replicatedJobs"][0]["replicas"] = 5
    before = counted()
    wl = build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=Lookup(changed))
    assert delta(before) == (0, 1)
    assert wl is not None and wl.runtime is changed


def test_a_runtime_that_appears_or_disappears_misses() -> None:
    settings = Settings()
    missing = build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=Lookup(None))
    assert missing is not None and missing.incomplete_reason and "was not found" in missing.incomplete_reason
    before = counted()
    found = build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=Lookup(runtime()))
    assert delta(before) == (0, 1)
    assert found is not None and found.incomplete_reason is None
    before = counted()
    gone = build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=Lookup(None))
    assert delta(before) == (0, 1)
    assert gone is not None and gone.incomplete_reason == missing.incomplete_reason
    # offline (no lookup at all) is not the same input as a lookup that found the runtime
    build_workload(sample("trainjob-good"), settings=settings, runtime_lookup=Lookup(runtime()))
    before = counted()
    offline = build_workload(sample("trainjob-good"), settings=settings)
    assert delta(before) == (0, 1)
    assert offline is not None and offline.incomplete_reason and "offline" in offline.incomplete_reason


def test_changed_settings_miss_and_equal_settings_hit() -> None:
    build_workload(sample("aiperfjob-good"), settings=Settings())
    before = counted()
    build_workload(sample("aiperfjob-good"), settings=Settings())  # another object, equal settings
    assert delta(before) == (1, 0)
    other = Settings.model_validate({"aiperfEnv": {"AIPERF_K8S_WORKER_POD_CPU": "7"}})
    before = counted()
    build_workload(sample("aiperfjob-good"), settings=other)
    assert delta(before) == (0, 1)


def test_a_changed_environment_misses(monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings()
    build_workload(sample("aiperfjob-good"), settings=settings)
    monkeypatch.setenv("AIPERF_K8S_WORKER_POD_CPU", "3")
    before = counted()
    build_workload(sample("aiperfjob-good"), settings=settings)
    assert delta(before) == (0, 1)


def test_a_namespace_default_is_part_of_the_key() -> None:
    settings = Settings()
    obj = sample("aiperfjob-good")
    del obj["metadata"]["namespace"]
    a = build_workload(copy.deepcopy(obj), settings=settings, namespace="team-a")
    before = counted()
    b = build_workload(copy.deepcopy(obj), settings=settings, namespace="team-b")
    assert delta(before) == (0, 1)
    assert a is not None and b is not None and (a.namespace, b.namespace) == ("team-a", "team-b")


def test_a_render_that_fails_is_not_cached() -> None:
    bad = sample("trainjob-good")
    bad["spec"] = "not a mapping"
    for _ in range(2):
        with pytest.raises(AdapterError, match="spec"):
            build_workload(copy.deepcopy(bad), settings=Settings(), runtime_lookup=Lookup(runtime()))
    assert len(CACHE) == 0


def test_an_object_that_is_not_plain_json_is_never_served_from_the_cache() -> None:
    """A YAML `1:` key dumps like "1": the cache must not answer for it with the string key's render."""
    settings = Settings()
    plain = sample("aiperfjob-good")
    plain["metadata"]["labels"] = {"1": "x"}
    build_workload(plain, settings=settings)
    yaml_keys = sample("aiperfjob-good")
    yaml_keys["metadata"]["labels"] = {1: "x"}
    before = counted()
    with pytest.raises(AdapterError):
        build_workload(yaml_keys, settings=settings)
    assert delta(before) == (0, 0)


def test_zero_entries_turns_it_off() -> None:
    settings = Settings.model_validate({"renderCacheEntries": 0})
    before = counted()
    a = build_workload(sample("aiperfjob-good"), settings=settings)
    b = build_workload(sample("aiperfjob-good"), settings=settings)
    assert delta(before) == (0, 0) and len(CACHE) == 0
    assert a is not None and b is not None and a.derived is not b.derived


def test_least_recently_used_is_dropped_at_the_entry_bound() -> None:
    cache = RenderCache()
    settings = Settings.model_validate({"renderCacheEntries": 2})
    builds: list[str] = []

    def render(name: str) -> None:
        obj = sample("aiperfjob-good")
        obj["metadata"]["name"] = name

        def build(lookup: Any, **per_create: Any) -> Any:
            builds.append(name)
            return build_workload(obj, settings=Settings.model_validate({"renderCacheEntries": 0}))

        cache.render(
            obj, ("aiperf.nvidia.com", "AIPerfJob"), build, settings=settings, runtime_lookup=None, namespace=None
        )

    for name in ("a", "b", "a", "c", "a", "b"):
        render(name)
    # a, b built; a hit (a is now the most recent); c built, b dropped; a hit; b built again
    assert builds == ["a", "b", "c", "b"]
    assert (cache.hits, cache.misses, len(cache)) == (2, 4, 2)


def test_an_object_over_the_byte_bound_is_rendered_but_not_kept(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("webhook.workloads.render_cache.MAX_BYTES", 100)
    assert MAX_BYTES > 100
    before = counted()
    for _ in range(2):
        assert build_workload(sample("aiperfjob-good"), settings=Settings()) is not None
    assert delta(before) == (0, 2) and len(CACHE) == 0


def test_the_metric_counts_hits_and_misses() -> None:
    settings = Settings()
    for _ in range(3):
        build_workload(sample("aiperfjob-good"), settings=settings)
    hits, misses = stats()
    text = Metrics().render()[0].decode()
    assert f'preflight_webhook_render_cache_total{{result="hit"}} {float(hits)}' in text
    assert f'preflight_webhook_render_cache_total{{result="miss"}} {float(misses)}' in text
    assert hits >= 2 and misses >= 1


def test_the_same_maps_in_another_order_miss_never_a_false_hit() -> None:
    settings = Settings()
    obj = sample("aiperfjob-good")
    build_workload(obj, settings=settings)
    reordered = {k: obj[k] for k in reversed(list(obj))}
    before = counted()
    wl = build_workload(copy.deepcopy(reordered), settings=settings)
    assert delta(before) == (0, 1)
    assert wl is not None and wl.name == "llama-bench"


# --- two objects never share a key wrongly (issue 22): another namespace, a delete and re-create


def _created(obj: dict[str, Any], uid: str, at: str, namespace: str | None = None) -> dict[str, Any]:
    """`obj` as the apiserver stores one create of it: its own uid and creationTimestamp."""
    out = copy.deepcopy(obj)
    out["metadata"].update(uid=uid, creationTimestamp=at, resourceVersion="5", generation=1)
    if namespace is not None:
        out["metadata"]["namespace"] = namespace
    return out


def _env(wl: Any) -> list[dict[str, Any]]:
    return [e for g in wl.pod_groups for c in g.containers() for e in c.get("env") or []]


def test_the_same_aiperfjob_in_another_namespace_renders_for_its_own_namespace() -> None:
    settings = Settings()
    a = build_workload(_created(sample("aiperfjob-good"), "u-1", "2026-01-01T00:00:00Z", "team-a"), settings=settings)
    before = counted()
    # the same name, spec and even uid in another namespace: another object, another render
    b = build_workload(_created(sample("aiperfjob-good"), "u-1", "2026-01-01T00:00:00Z", "team-b"), settings=settings)
    assert delta(before) == (0, 1)
    assert a is not None and b is not None and (a.namespace, b.namespace) == ("team-a", "team-b")
    assert b.derived != a.derived


def _rendered(wl: Any) -> str:
    """Everything a render holds, as text to compare byte for byte (a run_config.json left
    unwritten as its document and size)."""

    def enc(o: Any) -> Any:
        if isinstance(o, JsonText):
            return {"doc": o.doc, "nbytes": o.nbytes}
        raise TypeError(type(o))

    groups = [dataclasses.asdict(g) for g in wl.pod_groups]
    return json.dumps([wl.derived, groups, wl.render_errors, wl.incomplete_reason, wl.queue_name], default=enc)


def _uncached(obj: dict[str, Any], settings: Settings, namespace: str | None = None) -> Any:
    return aiperf.build(copy.deepcopy(obj), settings=settings, namespace=namespace)


def test_an_aiperfjob_deleted_and_created_again_renders_with_its_new_uid_and_epoch() -> None:
    """A second create of the same spec (a dry run, then the apply; a delete and create again) gets a
    new uid and creationTimestamp: it hits the render of the first, and gets the body an uncached
    render of it gives, its own uid in AIPERF_JOB_UID and its own run epoch in run_config.json."""
    settings = Settings()
    first = _created(sample("aiperfjob-good"), "aaaa-1111-2222", "2026-01-01T00:00:00Z")
    one = build_workload(first, settings=settings)
    again = _created(sample("aiperfjob-good"), "bbbb-3333-4444", "2026-01-01T00:05:00Z")
    before = counted()
    wl = build_workload(again, settings=settings)
    assert delta(before) == (1, 0)
    assert wl is not None and one is not None
    assert {"name": "AIPERF_JOB_UID", "value": "bbbb-3333-4444"} in _env(wl)
    assert run_epoch(again) != run_epoch(first)
    assert f'"epoch": "{run_epoch(again)}"' in wl.derived["configMap"]["data"]["run_config.json"]
    assert _rendered(wl) == _rendered(_uncached(again, settings))
    assert _rendered(one) == _rendered(_uncached(first, settings))  # the first review's body is untouched
    assert wl.obj is again


def test_creates_with_and_without_a_uid_never_share_a_render() -> None:
    """Without a uid no container gets AIPERF_JOB_UID: the key says whether there is one (a
    creationTimestamp with microseconds gives an epoch key of the same length either way)."""
    settings = Settings()
    with_uid = _created(sample("aiperfjob-good"), "aaaa-1111-2222", "2026-01-01T00:00:00.250000Z")
    without = copy.deepcopy(with_uid)
    del without["metadata"]["uid"]
    assert len(run_epoch(with_uid)) == len(run_epoch(without))
    build_workload(with_uid, settings=settings)
    before = counted()
    wl = build_workload(without, settings=settings)
    assert delta(before) == (0, 1)
    assert wl is not None and not any(e["name"] == "AIPERF_JOB_UID" for e in _env(wl))
    assert _rendered(wl) == _rendered(_uncached(without, settings))


def test_an_epoch_key_of_another_length_misses() -> None:
    """The ConfigMap's size is judged in the render: an epoch key of another length renders again."""
    settings = Settings()
    build_workload(_created(sample("aiperfjob-good"), "u-1", "2026-01-01T00:00:00Z"), settings=settings)
    early = _created(sample("aiperfjob-good"), "u-2", "1990-01-01T00:00:00Z")  # 9 digits of seconds, not 10
    before = counted()
    wl = build_workload(early, settings=settings)
    assert delta(before) == (0, 1)
    assert wl is not None and _rendered(wl) == _rendered(_uncached(early, settings))


def test_an_aiperfjob_holding_a_placeholder_renders_with_its_own_values() -> None:
    """An object that holds the placeholder itself (anywhere) is rendered with its uid and epoch:
    filling in never touches the object's own strings."""
    settings = Settings()
    obj = _created(sample("aiperfjob-good"), "aaaa-1111-2222", "2026-01-01T00:00:00Z")
    obj["metadata"].setdefault("labels", {})["note"] = UID_MARK
    obj["spec"]["podTemplate"] = {"env": [{"name": "MINE", "value": UID_MARK}]}
    for _ in range(2):
        wl = build_workload(copy.deepcopy(obj), settings=settings)
        assert wl is not None and {"name": "MINE", "value": UID_MARK} in _env(wl)
        assert _rendered(wl) == _rendered(_uncached(obj, settings))


def test_a_run_config_over_the_configmap_limit_is_filled_in_its_document() -> None:
    """Over 1 MiB run_config.json is kept as its document and size (JsonText): a second create
    fills its epoch into the document, and the size is the same."""
    settings = Settings()
    big = sample("aiperfjob-good")
    big["spec"]["benchmark"]["datasets"] = [
        {"name": "main", "type": "file", "records": [{"text": f"{i:07d} " + "x" * 200} for i in range(5500)]}
    ]
    first = _created(big, "aaaa-1111-2222", "2026-01-01T00:00:00Z")
    again = _created(big, "bbbb-3333-4444", "2026-01-01T00:05:00Z")
    one = build_workload(first, settings=settings)
    assert one is not None and isinstance(one.derived["configMap"]["data"]["run_config.json"], JsonText)
    before = counted()
    wl = build_workload(again, settings=settings)
    assert delta(before) == (1, 0)
    assert wl is not None and _rendered(wl) == _rendered(_uncached(again, settings))
    text = str(wl.derived["configMap"]["data"]["run_config.json"])
    assert f'"epoch": "{run_epoch(again)}"' in text


def test_an_aiperfjob_the_operator_refuses_hits_with_the_same_refusal() -> None:
    settings = Settings()
    bad = sample("aiperfjob-good")
    bad["spec"]["sweep"] = {"type": "grid", "variables": {}}
    build_workload(_created(bad, "u-1", "2026-01-01T00:00:00Z"), settings=settings)
    again = _created(bad, "u-2", "2026-01-01T00:00:01Z")
    before = counted()
    wl = build_workload(again, settings=settings)
    assert delta(before) == (1, 0)
    assert wl is not None and wl.render_errors and _rendered(wl) == _rendered(_uncached(again, settings))


def test_a_trainjob_created_again_in_another_namespace_renders_for_that_namespace() -> None:
    settings, lookup = Settings(), Lookup(runtime())
    obj = sample("trainjob-good")
    del obj["metadata"]["namespace"]
    a = build_workload(
        _created(obj, "u-1", "2026-01-01T00:00:00Z"), settings=settings, runtime_lookup=lookup, namespace="team-a"
    )
    before = counted()
    b = build_workload(
        _created(obj, "u-2", "2026-01-01T00:00:01Z"), settings=settings, runtime_lookup=lookup, namespace="team-b"
    )
    assert delta(before) == (0, 1)
    assert a is not None and b is not None and (a.namespace, b.namespace) == ("team-a", "team-b")
    assert b.derived["jobSet"]["metadata"]["namespace"] == "team-b"


def test_a_trainjob_whose_uid_is_not_a_string_is_refused_even_after_the_same_content_rendered() -> None:
    """The TrainJob key leaves a (string) uid out; a uid of the wrong shape stays in it, so the
    adapter sees it and refuses it instead of the cache answering with the good render."""
    settings, lookup = Settings(), Lookup(runtime())
    build_workload(
        _created(sample("trainjob-good"), "u-1", "2026-01-01T00:00:00Z"), settings=settings, runtime_lookup=lookup
    )
    bad = _created(sample("trainjob-good"), "u-1", "2026-01-01T00:00:00Z")
    bad["metadata"]["uid"] = 5
    with pytest.raises(AdapterError, match="metadata.uid"):
        build_workload(bad, settings=settings, runtime_lookup=lookup)
