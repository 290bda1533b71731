"""The [ROWS n] window kernel of continuous runs, without Spark: every split into
micro-batches gives the rows of one pass over the whole stream."""

from __future__ import annotations

import pandas as pd
from hypothesis import given, settings
from hypothesis import strategies as st

from streamwarden.engine.rows import ARRIVAL, QUALIFIES, T, RowsSpec, arg, window_rows

SPEC = RowsSpec(3, ("n", "low"), ("count", "min"), ("g",))


def history(rows: list[tuple[bool, int, str | None]]) -> pd.DataFrame:
    """A NULL group (a masked attribute) reaches pandas as NaN, as from Spark's Arrow batches."""
    return pd.DataFrame({T: list(range(len(rows))), ARRIVAL: [f"f:{i:012d}" for i in range(len(rows))],
                         QUALIFIES: [q for q, _, _ in rows], arg(0): 1, arg(1): [x for _, x, _ in rows],
                         "g": pd.Series([float("nan") if g is None else g for _, _, g in rows], dtype=object)})


def brute_force(rows: list[tuple[bool, int, str]], spec: RowsSpec) -> list[tuple]:
    out = []
    for i in range(len(rows)):
        window = [r for r in rows[max(0, i - spec.n + 1):i + 1] if r[0]]
        for g in sorted({r[2] for r in window}, key=lambda g: (g is None, str(g))):  # NULL is one group
            members = [r[1] for r in window if r[2] == g]
            out.append((i, g, len(members), min(members)))
    return sorted(out, key=lambda t: (t[0], t[1] is None, str(t[1])))


def emitted(frame: pd.DataFrame) -> list[tuple]:
    return sorted(((int(r["ts"]), None if pd.isna(r["g"]) else r["g"], int(r["n"]), int(r["low"]))
                   for _, r in frame.iterrows()), key=lambda t: (t[0], t[1] is None, str(t[1])))


rows_strategy = st.lists(st.tuples(st.booleans(), st.integers(0, 9), st.sampled_from(["a", "b", None])), max_size=25)


@settings(max_examples=200)
@given(rows=rows_strategy, cut=st.integers(0, 25))
def test_micro_batches_see_what_one_pass_sees(rows, cut) -> None:
    cut = min(cut, len(rows))
    first = window_rows(history(rows[:cut]), SPEC, 0) if cut else pd.DataFrame(columns=["ts", "g", "n", "low"])
    kept = history(rows).iloc[max(0, cut - (SPEC.n - 1)):cut]  # what the state store keeps: the last n - 1
    second = window_rows(pd.concat([kept, history(rows).iloc[cut:]], ignore_index=True), SPEC, len(kept))
    assert emitted(pd.concat([first, second])) == brute_force(rows, SPEC)


def test_without_group_by_every_arrival_emits_one_row() -> None:
    spec = RowsSpec(2, ("n", "low"), ("count", "min"), ())
    frame = window_rows(history([(False, 5, "a"), (True, 3, "a"), (False, 1, "a"), (False, 2, "a")]), spec, 0)
    assert frame["n"].tolist() == [0, 1, 1, 0]
    assert frame["low"].isna().tolist() == [True, False, False, True]
