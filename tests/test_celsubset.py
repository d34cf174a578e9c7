"""CEL compiled within a subset and run (webhook/celsubset.py), shared by the schema rules and the DRA selectors."""

from __future__ import annotations

import pytest

from webhook.celsubset import compile_within, run


def test_an_expression_within_the_subset_compiles_and_runs_with_its_variables() -> None:
    got = compile_within("self.size() > 2 && x == 'a'", frozenset({"size", "_>_", "_&&_", "_==_"}))
    assert not got.unparsed and got.outside == ()
    assert run(got.program, self=[1, 2, 3], x="a") is True
    assert run(got.program, self=[1], x="a") is False


def test_what_is_outside_the_subset_or_does_not_parse_is_said_not_compiled() -> None:
    got = compile_within("quantity(self).isGreaterThan(quantity('1')) && self.size() > 0", frozenset({"size"}))
    assert got.program is None and not got.unparsed
    assert got.outside == tuple(sorted(got.outside)) and "quantity" in got.outside and "size" not in got.outside
    bad = compile_within("self.(", frozenset())
    assert bad.program is None and bad.unparsed and bad.outside == ()


def test_a_runtime_error_is_raised_to_the_caller() -> None:
    got = compile_within("self.missing == 1", frozenset({"_==_"}))
    assert got.program is not None
    with pytest.raises(Exception):  # noqa: B017 - the library raises its own error types
        run(got.program, self={})
