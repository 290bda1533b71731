"""The Security Shield's rules: every case of Theorem 5.1's proof, reordering, snapshots."""

from __future__ import annotations

from datetime import datetime, timedelta, timezone

from streamwarden.catalog.punctuations import sp

from oracles.shield import Shield, SpPolicy, visible_attributes

T0 = datetime(2026, 3, 1, 10, tzinfo=timezone.utc)
T1 = T0 + timedelta(minutes=5)
ATTRS = ["ts", "Patient_id", "Beats_per_min"]
GP = frozenset({"GP"})


def gp_policy(ts: datetime, sn: int = 1, tuples: str = "[120, 133]"):
    return sp("HeartRate", tuples, "*", "GP", ts=ts, sn=sn)


def test_complete_policy_governs_its_tuples() -> None:
    shield = Shield()
    shield.on_sp(gp_policy(T0, 1))
    shield.on_sp(sp("HeartRate", "*", "Beats_per_min", "C", ts=T0, sn=2))
    governing = shield.on_tuple(T0, 2)
    assert governing is not None and governing.csn == 2
    assert visible_attributes(governing, "HeartRate", 125, ATTRS, GP) == ["ts", "Patient_id", "Beats_per_min"]
    assert visible_attributes(governing, "HeartRate", 125, ATTRS, frozenset({"C"})) == ["Beats_per_min"]
    assert visible_attributes(governing, "HeartRate", 140, ATTRS, GP) is None  # no attribute but ts: not delivered


def test_incomplete_policy_denies_and_is_dropped() -> None:
    shield = Shield()
    shield.on_sp(gp_policy(T0, 1))
    shield.on_sp(gp_policy(T0, 3))  # SP 2 was lost
    assert shield.on_tuple(T0, 3) is None  # the tuple expects csn 3; only 1..1 are complete
    assert shield.on_tuple(T0, 1) is None  # the policy was dropped: denied until a newer one


def test_tuple_before_its_policy_is_denied() -> None:
    shield = Shield()
    shield.on_sp(gp_policy(T0))
    assert shield.on_tuple(T1, 1) is None  # its policy (T1) has not arrived yet
    shield.on_sp(gp_policy(T1))
    assert shield.on_tuple(T1, 1) is not None


def test_unrelated_newer_policy_overrides() -> None:
    shield = Shield()
    shield.on_sp(gp_policy(T0))
    assert shield.on_tuple(T0, 1) is not None
    shield.on_sp(gp_policy(T1, tuples="{999}"))
    assert shield.on_tuple(T0, 1) is None  # the old policy no longer applies


def test_older_sps_are_discarded_even_after_a_reset() -> None:
    shield = Shield()
    shield.on_sp(gp_policy(T1))
    shield = shield.reset()
    shield.on_sp(gp_policy(T0))
    assert shield.current is None and shield.discarded == 1
    shield.on_sp(gp_policy(T1))  # not older than the newest seen: starts a policy again
    assert shield.on_tuple(T1, 1) is not None


def test_reordered_and_duplicated_sps_within_a_batch() -> None:
    shield = Shield()
    for sn in (2, 1, 1):
        shield.on_sp(gp_policy(T0, sn))
    governing = shield.on_tuple(T0, 2)
    assert governing is not None and [s.sn for s in governing.sps] == [2, 1]


def test_missing_policy_fields_and_no_policy_deny() -> None:
    shield = Shield()
    assert shield.on_tuple(T0, 1) is None  # no policy yet
    shield.on_sp(gp_policy(T0))
    assert shield.on_tuple(None, None) is None
    assert shield.on_tuple(T0, 1) is not None  # a tuple without ts.csn does not drop the policy


def test_sp_1_missing_means_nothing_is_complete() -> None:
    shield = Shield()
    shield.on_sp(gp_policy(T0, 2))
    assert shield.on_tuple(T0, 0) is None


def test_server_policies_combine() -> None:
    shield = Shield()
    shield.on_sp(gp_policy(T0))
    governing = shield.on_tuple(T0, 1)
    server = SpPolicy.of([sp("HeartRate", "*", "Beats_per_min", "GP")])
    assert visible_attributes(governing, "HeartRate", 125, ATTRS, GP, server, "intersect") == ["Beats_per_min"]
    assert visible_attributes(governing, "HeartRate", 125, ATTRS, GP, server, "union") == ATTRS
    immutable = Shield()
    immutable.on_sp(sp("HeartRate", "[120, 133]", "*", "GP", immutable=True, ts=T0))
    assert visible_attributes(immutable.on_tuple(T0, 1), "HeartRate", 125, ATTRS, GP, server, "intersect") == ATTRS


def test_snapshot_restore_gives_the_same_decisions() -> None:
    shield = Shield()
    shield.on_sp(gp_policy(T0, 1))
    shield.on_sp(gp_policy(T0, 2))
    restored = Shield.restore(shield.snapshot())
    assert restored == shield
    assert restored.on_tuple(T0, 2) == shield.on_tuple(T0, 2)
