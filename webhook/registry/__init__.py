"""Asking a container registry whether an image can be pulled (the Image Pull check's client).

Foundation: no project imports but the foundation (imageref). The modules import one way:
keyring (the kubelet's credential matching) → challenge (WWW-Authenticate) → platform (an index's
platforms) → client (the OCI distribution API, with its cache, coalescing and circuit breaker).
"""
