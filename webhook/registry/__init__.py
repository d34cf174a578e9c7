"""Asking a container registry whether an image can be pulled (the Image Pull check's client).

Foundation: no project imports but the foundation (imageref). The modules import one way:
keyring (the kubelet's credential matching) → challenge (WWW-Authenticate) → platform (an index's
platforms) → address (where the client may connect, and the resolver that pins it there) → client
(the OCI distribution API, with its cache, coalescing, circuit breaker and the rules a hostile
registry meets).
"""
