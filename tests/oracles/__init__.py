"""Reference models the tests hold the product to: small, engine-independent, no Spark.

* :mod:`oracles.switches` — Zaki et al.'s privacy switches at work (Algorithm 1), as stateful
  objects;
* :mod:`oracles.network` — their switched network run one event at a time (tuples and SPs in,
  each user's results out, operator invocations counted);
* :mod:`oracles.shield` — the Security Shield's state machine (Nehme et al.) and the policy
  model ``SpPolicy``, which the JVM shield is tested against.

Unlike the independent oracles beside them (``tests/*oracle.py``, which import nothing of
the product's logic), these reuse the product's parsing (SP patterns, records) and its
switch placement: they check how the engine executes, not those.
The tests import them as ``oracles.*`` (pytest puts ``tests/`` on ``sys.path``).
"""
