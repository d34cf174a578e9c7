"""The check registry: names are unique (settings, annotations, metrics and reports key on them)."""

from __future__ import annotations

import re
import types

import pytest

import webhook.checks as registry
from webhook.checks import DuplicateCheckName, all_checks, check_names


def test_registered_names_are_unique() -> None:
    names = check_names()
    assert len(names) == len(set(names))
    assert [c.name for c in all_checks()] == names


def test_a_duplicate_name_is_refused_at_registration(monkeypatch: pytest.MonkeyPatch) -> None:
    first = all_checks()[0]
    twin = types.SimpleNamespace(CHECKS=[first])
    monkeypatch.setattr(registry, "_FAMILIES", (*registry._FAMILIES, twin))
    with pytest.raises(DuplicateCheckName, match=re.escape(f"check name {first.name!r} registered twice")):
        registry._registered()


def test_all_checks_returns_a_fresh_list() -> None:
    got = all_checks()
    got.clear()
    assert all_checks()
