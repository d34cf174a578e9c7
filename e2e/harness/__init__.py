"""The e2e harness: what starts and drives the real parts, apart from the tests that use it.

* :mod:`e2e.harness.controlplane`: etcd + kube-apiserver (``ControlPlane``), binaries from e2e/build.sh
* :mod:`e2e.harness.node`: the real single node (``Node``) on top of it
* :mod:`e2e.harness.runner`: our webhook served and registered (``RunningWebhook``)
* :mod:`e2e.harness.delayproxy`: a loopback proxy that delays or blackholes the apiserver
* :mod:`e2e.harness.live`: one in-process evaluation against a live ClusterView
* :mod:`e2e.harness.registry`, :mod:`e2e.harness.oci_install`: the CNCF distribution registry, and
  publishing our image and chart to it and ``helm install oci://`` from it, as users do
* :mod:`e2e.harness.demo`, :mod:`e2e.harness.demo_cluster`: ``make demo`` and ``make demo-cluster``

Scripts run as modules from the repository root, e.g. ``python -m e2e.harness.node up``.
"""
