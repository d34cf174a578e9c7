"""What the checks share: models of how Kubernetes and its projects decide, as pure logic, no Check.

    checks/  →  models/  →  workloads/, cluster/ (the ClusterView protocol only), the foundation

A check (webhook/checks/) reads a Workload and the cluster and says a verdict. What two checks both need
to know of how the scheduler, the apiserver's admission plugins, Kueue, Karpenter, Pod Security or DRA
decide lives here, once, each module naming the upstream code it follows: node shapes and scheduling
predicates (nodes), what could add a node (provisioning), ResourceQuota admission (quota), Kueue's queues,
cohorts and waits (kueue/), the Pod Security port (podsecurity/), the DRA allocator and its CEL subset
(dra/), NetworkPolicy evaluation (netpol), the dry-run probes and their cache (dryrun_probe, dryrun_cache), the
AIPerf endpoint URLs (endpoint), the names JobSet derives (names), the namespaces the chart grants
(grants), and what a check reads (context). A model never imports a check (tests/test_layers.py), and
no check imports another check family: what they share comes here.
"""
