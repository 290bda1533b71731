"""``streamwarden serve``: the shared network behind an authenticating HTTP gateway.

The layers, top down (each module one job):

* :mod:`~streamwarden.service.app` — the REST contract's routes (FastAPI), thin: each
  authenticates, decides, audits and calls into the store, the query book or the host.
* :mod:`~streamwarden.service.auth` — who a bearer token speaks for: the store's own
  tokens, or JWTs of one issuer checked against its JWKS.
* :mod:`~streamwarden.service.queries` — each user's queries in the shared network:
  per-user ids, registration with the caller's grant, explanations, removal.
* :mod:`~streamwarden.service.providers` — records a provider appends to a stream, checked
  whole (all or nothing) and limited to the provider's own sub-stream.
* :mod:`~streamwarden.service.trail` — every request and decision into the hash-chained
  audit trail, written by one thread off the request path.
* :mod:`~streamwarden.service.metrics` — Prometheus text for operators.
* :mod:`~streamwarden.service.host` — the running network (Spark), polled for the store's
  live changes; absent in tests that exercise the HTTP contract alone.
* :mod:`~streamwarden.service.server` — the ``serve`` command: Spark, the host, uvicorn.

Every module calls :mod:`streamwarden.api` only (and the public leaf modules ``errors``,
``names`` and ``records``; ``tests/test_layers.py`` checks it): rows reach users through
the API's readers of the network's delivery logs (:func:`streamwarden.api.read_rows`), so
the HTTP layer never touches Spark, and a removed query's rows and state go through
:func:`streamwarden.api.forget_query`, so the service never learns the runtime's folders.
"""
