"""The Security Shield on Spark: SP records encoded for the user, tuples decided in the JVM.

Two steps, so that no tuple's data crosses into Python:

1. Each SP record is encoded for the user's roles
   (:mod:`streamwarden.security.punctuation.encode`, memoized by the record's text): in the
   JVM (``SpEncoder.java``, :func:`streamwarden.engine.jvm.sp_encoder`) for the patterns
   providers write, else by :func:`sp_codes`, a pandas UDF that receives only the SP
   records the JVM left (every other row's arguments are NULL). A malformed pattern
   becomes ``!`` and the reason, which the reader reports as a broken record naming its
   file and line.
2. :func:`apply_shield` runs the shield's state machine, one per provider, as the JVM
   operator ``streamwarden.jvm.SecurityShield`` (``flatMapGroupsWithState``: its state,
   the current policy, lives in Spark's state store and checkpoint; a replay runs it over
   one batch). What leaves is every tuple with ``_gov``, the provider's decision on it
   (:data:`DECISION`: the attribute mask its governing SPs grant for the tuple's key, the
   same counting only grants WITH GRANT OPTION, and whether the policy is immutable), or
   NULL when the shield denies it. Denied tuples still leave, so that the event-time
   watermark follows every tuple of the stream, not only those a user may see.

:class:`streamwarden.security.punctuation.shield.Shield` is the reference the JVM
operator is tested against.

    >>> import pandas as pd
    >>> config = ShieldConfig("S", ("ts", "x"), frozenset({"GP"}))
    >>> encode_records(config, pd.Series([True, False, True]), pd.Series(["*", None, "*"]),
    ...     pd.Series(["*", None, "[1"]), pd.Series(["x", None, "x"]), pd.Series(["{GP}", None, "{GP}"]),
    ...     pd.Series(["+", None, "+"]), pd.Series([False, None, False]), pd.Series([False, None, False])).tolist()
    ['{"p":true,"i":false,"g":false,"m":2,"k":"any","ls":null,"hs":null,"ld":null,"hd":null,"vs":[],"vd":[]}', None, '!malformed tuples pattern [1']
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Callable

import numpy as np
import pandas as pd
from pyspark.sql import Column, DataFrame
from pyspark.sql import functions as F

from streamwarden.engine.jvm import security_shield

from streamwarden.security.punctuation.encode import MalformedSp, SpEncoder, SpText

GOV = "_gov"
#: The SP record's fields its code depends on, in :class:`SpText` order.
SP_TEXT = ("streams", "tuples", "attributes", "roles", "sign", "immutable", "grant")
#: A code that starts with this is a malformed SP's reason, not a code (codes are JSON objects).
MALFORMED = "!"
#: The columns the JVM shield reads, in its order (see SecurityShield.java).
CONTROL = ("_g", "_seq", "_file", "_line", "_is_sp", "_pts", "_sn", "_code", "_tts", "_tcsn", "_ktext", "_knum",
           "_payload")
#: The fields of :data:`GOV`, the provider's decision on a tuple (NULL: denied).
DECISION = ("mask", "grant", "immutable")


@dataclass(frozen=True)
class ShieldConfig:
    """What encoding a stream's SPs needs to know: the stream, its attributes and the user's roles."""

    stream: str
    attributes: tuple[str, ...]
    roles: frozenset[str]

    def encoder(self) -> SpEncoder:
        return SpEncoder(self.stream, self.attributes, self.roles)


# One encoder per configuration per Python worker, kept across tasks (micro-batches), so a
# template SP met in an earlier batch costs a dictionary lookup. Bounded: a worker serving
# many users' shields keeps the most recent.
_ENCODERS: dict[ShieldConfig, SpEncoder] = {}
_MAX_ENCODERS = 64


def _encoder(config: ShieldConfig) -> SpEncoder:
    encoder = _ENCODERS.get(config)
    if encoder is None:
        if len(_ENCODERS) >= _MAX_ENCODERS:
            _ENCODERS.pop(next(iter(_ENCODERS)))
        encoder = _ENCODERS[config] = config.encoder()
    return encoder


def _value(value: object) -> object:
    """A pattern field as the encoder takes it: NULL (None, or pandas' NaN) is None."""
    return None if value is None or (isinstance(value, float) and math.isnan(value)) else value


def encode_records(config: ShieldConfig, is_sp: pd.Series, *fields: pd.Series) -> pd.Series:
    """The code of each SP record (``fields`` in :data:`SP_TEXT` order); NULL for tuples;
    ``!`` and the reason for a malformed one."""
    encoder = _encoder(config)
    codes = np.full(len(is_sp), None, dtype=object)
    columns = [field.to_numpy(dtype=object) for field in fields]
    for position in np.flatnonzero(is_sp.to_numpy(dtype=bool, na_value=False)).tolist():
        text = SpText(*(_value(column[position]) for column in columns))
        try:
            codes[position] = encoder(text)
        except MalformedSp as exc:
            codes[position] = MALFORMED + str(exc)
    return pd.Series(codes, dtype=object)


def sp_codes(config: ShieldConfig) -> Callable[..., Column]:
    """A pandas UDF: (``_is_sp``, the SP fields in :data:`SP_TEXT` order) → the SP's code."""

    @F.pandas_udf("string")  # type: ignore[call-overload]
    def encode(is_sp: pd.Series, streams: pd.Series, tuples: pd.Series, attributes: pd.Series, roles: pd.Series,
               sign: pd.Series, immutable: pd.Series, grant: pd.Series) -> pd.Series:
        return encode_records(config, is_sp, streams, tuples, attributes, roles, sign, immutable, grant)

    # Nondeterministic only so that Spark's optimizer never copies the call into each
    # operator that uses the code (the reader's checks and the shield's input).
    return encode.asNondeterministic()


def apply_shield(control: DataFrame) -> DataFrame:
    """``control`` (the :data:`CONTROL` columns) through one JVM shield per ``_g``:
    ``_payload`` and :data:`GOV` (:data:`DECISION`) for every tuple."""
    return security_shield(control.select(*CONTROL))


__all__ = ["CONTROL", "DECISION", "GOV", "MALFORMED", "SP_TEXT", "ShieldConfig", "apply_shield", "encode_records", "sp_codes"]
