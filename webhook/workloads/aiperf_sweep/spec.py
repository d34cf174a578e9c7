"""How an AIPerfSweep spec is read, and what the operator refuses when it cannot be.

The refusals are those of `operator/handlers/sweep/create.py` (AIPerf 0.13.0): `handle` raises
`AIPerfSweep spec invalid: …`, and `AIPerfSweep sweep expansion rejected the spec: …` for what
`config/sweep/expand.py` refuses. The spec's fields are read in camelCase or snake_case, as
the operator's pydantic models accept both (`webhook.workloads.aiperf.lookup`).
"""

from __future__ import annotations

KIND = "AIPerfSweep"
SWEEP_TYPES = ("grid", "zip", "scenarios", "sobol", "latin_hypercube", "adaptive_search")
#: sweep types whose points are drawn at run time (scipy, BoTorch), not at create
RUN_TIME_SAMPLED = ("sobol", "latin_hypercube", "adaptive_search")


class SpecInvalid(ValueError):
    """What the operator's create handler refuses (`AIPerfSweep spec invalid: ...`)."""

    prefix = "AIPerfSweep spec invalid"


class ExpansionRejected(SpecInvalid):
    """What expand_sweep refuses (`AIPerfSweep sweep expansion rejected the spec: ...`)."""

    prefix = "AIPerfSweep sweep expansion rejected the spec"
