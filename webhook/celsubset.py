"""CEL compiled and run with the project's `cel` library (the `common-expression-language` wheel,
bindings of the Rust `cel` crate) for the subsets the webhook evaluates itself: a CRD's
x-kubernetes-validations rules (webhook/schema/rules.py) and DRA device selectors
(webhook/models/dra/cel.py).

The library has none of Kubernetes' CEL libraries (k8s.io/apiserver pkg/cel/library: quantity,
semver, ...), so each caller names the functions its subset allows; an expression that calls
another, or that does not parse here, is not evaluated and the caller says why in its own words.
A compile is cached by (expression, allowed functions).

The library is imported on the first compile, not with this module: its package `__init__` imports
its command line (`cel.cli`, prompt_toolkit and rich), 12.3 MiB of RSS that a webhook whose reviews
never meet a CEL rule or selector does not hold (bench/import_weight.py, issue 38 item 3).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any


@dataclass(frozen=True)
class Compiled:
    """An expression compiled: its program, or why it is not evaluated here."""

    #: None when it does not parse here or calls a function outside the subset
    program: Any
    #: the library could not parse it
    unparsed: bool = False
    #: the functions it calls outside the allowed ones, sorted
    outside: tuple[str, ...] = ()


@lru_cache(maxsize=1024)
def compile_within(expression: str, allowed: frozenset[str]) -> Compiled:
    """`expression` compiled, if it parses here and calls only `allowed` functions (as the `cel`
    package names them)."""
    import cel

    try:
        program = cel.compile(expression)
    except Exception:  # the library raises its own parse errors
        return Compiled(None, unparsed=True)
    outside = tuple(sorted(set(program.functions()) - allowed))
    return Compiled(None, outside=outside) if outside else Compiled(program)


def run(program: Any, **variables: Any) -> Any:
    """The program's value with `variables` bound; raises what the library raises on a runtime error."""
    import cel

    ctx = cel.Context()
    for name, value in variables.items():
        ctx.add_variable(name, value)
    return program.execute(ctx)
