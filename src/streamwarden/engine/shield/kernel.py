"""The Security Shield on Spark: SP records encoded and tuples decided in the JVM.

Two steps, and no row crosses into Python:

1. Each SP record is encoded for the user's roles by ``SpEncoder.java``
   (:func:`streamwarden.engine.jvm.sp_encoder`, memoized by the record's fields), the JVM
   twin of :mod:`streamwarden.security.punctuation.encode`, which stays the reference the
   tests hold it to. A malformed pattern becomes :data:`MALFORMED` and the reason, which
   the reader reports as a broken record naming its file and line.
2. :func:`apply_shield` runs the shield's state machine, one per provider, as the JVM
   operator ``streamwarden.jvm.SecurityShield`` (``flatMapGroupsWithState``: its state,
   the current policy, lives in Spark's state store and checkpoint; a replay runs it over
   one batch). What leaves is every tuple with ``_gov``, the provider's decision on it
   (a struct of ``mask``, the attributes its governing SPs grant for the tuple's key, ``grant``,
   the same counting only grants WITH GRANT OPTION, and ``immutable``, the policy's), or
   NULL when the shield denies it. Denied tuples still leave, so that the event-time
   watermark follows every tuple of the stream, not only those a user may see. In
   quarantine mode a broken record reaches it only as a marker (:data:`QUARANTINED`, no
   payload): a broken SP makes its policy grant nothing (a lost negative SP never turns into
   access), a broken tuple acts on the state as its tuple would; neither leaves.

The reference the JVM operator is tested against is the Python model in
``tests/oracles/shield.py``.
"""

from __future__ import annotations

from pyspark.sql import DataFrame

from streamwarden.engine.jvm import security_shield

GOV = "_gov"
#: The SP record's fields its code depends on, in :class:`~streamwarden.security.punctuation.encode.SpText` order.
SP_TEXT = ("streams", "tuples", "attributes", "roles", "sign", "immutable", "grant")
#: A code that starts with this is a malformed SP's reason, not a code (codes are JSON objects).
MALFORMED = "!"
#: The ``_code`` of a quarantined record's marker (quarantine mode): the shield lets a broken SP
#: taint its policy and a broken tuple act on the state as a tuple would, and delivers neither.
QUARANTINED = "!"
#: The columns the JVM shield reads, in its order (see SecurityShield.java).
CONTROL = ("_g", "_seq", "_file", "_line", "_is_sp", "_pts", "_sn", "_code", "_tts", "_tcsn", "_ktext", "_knum",
           "_payload")


def apply_shield(control: DataFrame) -> DataFrame:
    """``control`` (the :data:`CONTROL` columns) through one JVM shield per ``_g``:
    ``_payload`` and :data:`GOV` (the provider's decision; NULL: denied) for every tuple."""
    return security_shield(control.select(*CONTROL))


__all__ = ["CONTROL", "GOV", "MALFORMED", "QUARANTINED", "SP_TEXT", "apply_shield"]
