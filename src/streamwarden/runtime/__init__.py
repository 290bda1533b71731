"""The runtime: what keeps compiled plans running on Spark, and applies live changes.

* :mod:`~streamwarden.runtime.plan` — the network's pipelines (pure: no Spark);
* :mod:`~streamwarden.runtime.network` — the shared network on Spark's streaming operators.
"""
