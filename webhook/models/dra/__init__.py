"""Dynamic Resource Allocation as the scheduler decides it: `cel` (the selector subset, cel/compile.go)
and `allocate` (one node: can its ResourceSlices satisfy the claims at once; structured/internal/stable/
allocator_stable.go). The Device Allocation check (webhook/checks/dra/) gives the verdicts.
"""
