"""Device Allocation: the pods' Dynamic Resource Allocation claims (resource.k8s.io/v1), judged by the
scheduler's own rules.

The sources followed, k8s.io/kubernetes v1.37.2:
- pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go (PreFilter, Filter): which
  claims a pod has, what an allocated or fully reserved claim means, the texts the scheduler gives;
- staging/src/k8s.io/dynamic-resource-allocation/structured/allocator.go and
  structured/internal/stable/{allocator_stable.go,pools_stable.go}: the structured allocator
  (webhook/models/dra/allocate.py), and cel/compile.go: the selectors' CEL environment
  (webhook/models/dra/cel.py).

The package: `check` (the verdicts); the model it judges with, `cel` (the selector subset) and
`allocate` (one node: can its ResourceSlices satisfy the claims at once), is webhook/models/dra/.
"""

from webhook.checks.dra.check import CHECKS, DeviceAllocation

__all__ = ["CHECKS", "DeviceAllocation"]
