"""The shared quantity parser: the apiserver's grammar, exact values, canonical output."""

from decimal import Decimal as D

import pytest
from hypothesis import given
from hypothesis import strategies as st

from webhook import quantity as q


@pytest.mark.parametrize(
    "text, value",
    [
        ("500m", D("0.5")),
        ("2", D(2)),
        ("1.5Gi", D(1610612736)),
        ("6Gi", D(6 * 1024**3)),
        ("1Ki", D(1024)),
        ("1Ei", D(1024**6)),
        ("1k", D(1000)),
        ("1M", D(10**6)),
        ("1E", D(10**18)),
        ("100n", D("0.0000001")),
        ("5u", D("0.000005")),
        ("1e3", D(1000)),
        ("1E3", D(1000)),
        ("12e-1", D("1.2")),
        ("1e+2", D(100)),
        (".5", D("0.5")),
        ("1.", D(1)),
        ("+1k", D(1000)),
        ("-1", D(-1)),
        ("0", D(0)),
    ],
)
def test_parses_the_kubernetes_grammar_exactly(text, value):
    assert q.parse_quantity(text) == value


@pytest.mark.parametrize(
    "bad", ["", ".", "1e", "1Gb", "1 Gi", "Gi", "1.5.5", "1e1.5", "--1", "1ki", "1K", " 1", "1i", "0x10", "1E+"]
)
def test_rejects_what_the_apiserver_rejects(bad):
    with pytest.raises(ValueError) as exc:
        q.parse_quantity(bad)
    assert (
        str(exc.value) == f"quantity {bad!r} does not match the Kubernetes quantity format (e.g. 500m, 2, 1.5Gi, 1e3)"
    )


def test_yaml_numbers_are_quantities():
    assert q.parse_quantity(2) == D(2)
    assert q.parse_quantity(0.5) == D("0.5")
    assert q.parse_quantity(0.1) + q.parse_quantity(0.2) == D("0.3")  # exact, unlike floats


@pytest.mark.parametrize("bad", [True, None, float("nan"), float("inf"), [1]])
def test_rejects_non_numbers(bad):
    with pytest.raises(ValueError):
        q.parse_quantity(bad)


@pytest.mark.parametrize(
    "value, resource, text",
    [
        (D("3.35"), "cpu", "3350m"),
        (D(4), "cpu", "4"),
        (D("0.45"), "cpu", "450m"),
        (D("0.0000001"), "cpu", "100n"),
        (D(6 * 1024**3), "memory", "6Gi"),
        (D(1792 * 1024**2), "memory", "1792Mi"),
        (D(500_000_000), "memory", "500M"),
        (D(1000), "memory", "1k"),
        (D(1001), "memory", "1001"),
        (D(0), "memory", "0"),
        (D(4), "nvidia.com/gpu", "4"),
        (D(2 * 1024**3), "hugepages-1Gi", "2Gi"),
    ],
)
def test_format(value, resource, text):
    assert q.format_quantity(value, resource) == text


@given(st.integers(min_value=0, max_value=10**15), st.sampled_from(["cpu", "memory", "nvidia.com/gpu"]))
def test_format_round_trips(n, resource):
    value = D(n) / 1000
    assert q.parse_quantity(q.format_quantity(value, resource)) == value


def test_resource_sums_are_exact_and_per_resource():
    a = q.parse_resources({"cpu": "500m", "memory": "1Gi"})
    b = q.parse_resources({"cpu": 0.25, "nvidia.com/gpu": "1"})
    assert q.add(a, b) == {"cpu": D("0.75"), "memory": D(1024**3), "nvidia.com/gpu": D(1)}
    assert q.sum([a, a, b]) == {"cpu": D("1.25"), "memory": D(2 * 1024**3), "nvidia.com/gpu": D(1)}
    assert q.sum([]) == {}
    assert q.scale(a, 3) == {"cpu": D("1.5"), "memory": D(3 * 1024**3)}


def test_parse_resources_names_the_bad_resource():
    with pytest.raises(ValueError, match=r"^memory: quantity '1GB'"):
        q.parse_resources({"cpu": "1", "memory": "1GB"})


def test_pod_resources_follow_the_scheduler_rule():
    spec = {
        "initContainers": [
            {"name": "big-init", "resources": {"requests": {"cpu": "3"}}},
            {
                "name": "sidecar",
                "restartPolicy": "Always",
                "resources": {"requests": {"cpu": "100m", "memory": "64Mi"}},
            },
        ],
        "containers": [
            {"name": "a", "resources": {"limits": {"cpu": "1", "nvidia.com/gpu": 1}}},  # requests default to limits
            {"name": "b", "resources": {"requests": {"cpu": "500m", "memory": "1Gi"}}},
        ],
        "overhead": {"cpu": "10m"},
    }
    req = q.pod_resources(spec)
    assert req == {"cpu": D("3.01"), "memory": D(1024**3 + 64 * 1024**2), "nvidia.com/gpu": D(1)}
    assert q.pod_resources(spec, "limits") == {"cpu": D("1.01"), "nvidia.com/gpu": D(1)}


@pytest.mark.parametrize(
    "name, extended",
    [
        ("nvidia.com/gpu", True),
        ("amd.com/gpu", True),
        ("example.io/foo", True),
        ("cpu", False),
        ("memory", False),
        ("ephemeral-storage", False),
        ("hugepages-2Mi", False),
        ("kubernetes.io/foo", False),
    ],
)
def test_extended_resources(name, extended):
    assert q.is_extended_resource(name) is extended
