"""Tests for the cloud audit data generator (streamwarden.datagen.cloud): no Spark needed."""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest

from streamwarden.datagen.__main__ import main
from streamwarden.datagen.cloud import (
    DEFAULT_CLASSES,
    CloudAudit,
    Episode,
    company_name,
    message_log,
    write_message_log,
)

ISO_UTC = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{6})?Z$")
START = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
FOUR_CLASSES = {"Banks": ["1", "2", "3"], "Clouds": ["A", "B"], "Mail": ["x", "y"], "Pay": ["P"]}
#: A MessageLog record's fields, in order (the module docstring's record contract).
MESSAGE_LOG_FIELDS = ("ts", "serviceId", "msgType", "sender", "receiver", "outcome")


@pytest.fixture(scope="module")
def audit() -> CloudAudit:
    return message_log()


def when(record: dict) -> datetime:
    return datetime.fromisoformat(record["ts"])


def home_class(classes: dict[str, list[str]]) -> dict[str, str]:
    return {company_name(c): name for name, companies in classes.items() for c in companies}


# ------------------------------------------------------------------------ the stream


def test_same_seed_same_log_other_seed_other_log(audit: CloudAudit) -> None:
    assert message_log() == audit
    other = message_log(seed=8)
    assert other.records != audit.records and other.services["5"] == audit.services["5"]


def test_records_are_sorted_by_ts_in_the_paper_format(audit: CloudAudit) -> None:
    assert len(audit.records) > 1000
    assert all(ISO_UTC.match(r["ts"]) for r in audit.records)
    stamps = [when(r) for r in audit.records]
    assert stamps == sorted(stamps)
    span = timedelta(minutes=10)
    assert START <= stamps[0] and stamps[-1] < START + span + timedelta(seconds=1)  # replies may spill a little


def test_schema_and_values(audit: CloudAudit) -> None:
    companies = set(home_class(DEFAULT_CLASSES))
    assert companies == {"Company1", "Company2", "CompanyA", "CompanyB", "CompanyC"}
    for r in audit.records:
        assert tuple(r) == MESSAGE_LOG_FIELDS
        assert r["msgType"] in ("send", "receive") and r["outcome"] in ("success", "failure")
        assert r["serviceId"] in audit.services and r["sender"] in companies and r["receiver"] in companies
        # Each message is a hop of its service's chain: a send goes down it, a reply up it.
        chain = audit.services[r["serviceId"]]
        caller, callee = (r["sender"], r["receiver"]) if r["msgType"] == "send" else (r["receiver"], r["sender"])
        assert chain.index(callee) == chain.index(caller) + 1
    assert list(audit.services) == [str(s) for s in range(1, 7)]
    success = sum(r["outcome"] == "success" for r in audit.records) / len(audit.records)
    assert 0.8 < success < 0.99  # mostly successful, less so with a DoS episode


def test_ordinary_traffic_is_mostly_successful() -> None:
    quiet = message_log(dos_episodes=0, delay_episodes=0)
    outcomes = Counter(r["outcome"] for r in quiet.records)
    assert 0.93 < outcomes["success"] / len(quiet.records) < 0.99


def test_service_5_is_the_papers(audit: CloudAudit) -> None:
    assert audit.services["5"] == ("Company1", "CompanyB")
    assert [s for s, chain in audit.services.items() if chain == ("Company1", "CompanyB")] == ["5"]
    q1 = [r for r in audit.records if r["msgType"] == "send" and r["outcome"] == "success"
          and r["sender"] == "Company1" and r["receiver"] == "CompanyB"]
    assert q1 and {r["serviceId"] for r in q1} >= {"5"}
    for seed in range(5):  # whatever the seed, as long as there are 5 services
        assert message_log(minutes=1, services=5, seed=seed).services["5"] == ("Company1", "CompanyB")


def test_other_classes_have_no_paper_service() -> None:
    """Without Company1 and CompanyB chains are all drawn (repeating once all are used)."""
    audit = message_log(classes={"X": ["1"], "Y": ["A"]}, services=5, minutes=1, seed=2)
    assert set(audit.services.values()) == {("Company1", "CompanyA"), ("CompanyA", "Company1")}
    for e in audit.episodes:
        assert e.target in audit.services[e.service_id][1:]


@pytest.mark.parametrize("classes", [DEFAULT_CLASSES, FOUR_CLASSES, {"X": ["1"], "Y": ["2"], "Z": ["3"]}])
def test_no_chain_holds_two_companies_of_one_class(classes: dict[str, list[str]]) -> None:
    home = home_class(classes)
    lengths = Counter()
    for seed in range(10):
        audit = message_log(classes=classes, services=8, minutes=0.2, dos_episodes=0, delay_episodes=0, seed=seed)
        for chain in audit.services.values():
            assert 2 <= len(chain) <= min(3, len(classes))
            assert len({home[c] for c in chain}) == len(chain), chain
            lengths[len(chain)] += 1
    assert set(lengths) == set(range(2, min(3, len(classes)) + 1))  # both lengths occur when they can


def test_chains_differ_and_cover_the_companies() -> None:
    audit = message_log(classes=FOUR_CLASSES, services=8, minutes=0.2, seed=1)
    assert len(set(audit.services.values())) == 8
    assert {c for chain in audit.services.values() for c in chain} == set(home_class(FOUR_CLASSES))


def test_three_company_chains_nest() -> None:
    """c0 calls c1, c1 calls c2 only when reached, and every delivered send gets exactly one reply."""
    audit = message_log(classes={"X": ["1"], "Y": ["2"], "Z": ["3"]}, services=3, minutes=5, seed=0,
                        dos_episodes=0, delay_episodes=0)
    count = Counter((r["serviceId"], r["msgType"], r["sender"], r["receiver"], r["outcome"]) for r in audit.records)
    chains = {s: c for s, c in audit.services.items() if len(c) == 3}
    assert chains
    for s, (c0, c1, c2) in chains.items():
        delivered = count[s, "send", c0, c1, "success"]
        assert count[s, "send", c1, c2, "success"] + count[s, "send", c1, c2, "failure"] == delivered
        for caller, callee in ((c0, c1), (c1, c2)):
            replies = count[s, "receive", callee, caller, "success"] + count[s, "receive", callee, caller, "failure"]
            assert replies == count[s, "send", caller, callee, "success"]
        # The caller's reply fails whenever its own call failed.
        assert count[s, "receive", c1, c0, "failure"] >= count[s, "send", c1, c2, "failure"]


def test_replies_follow_their_sends_within_the_normal_delay() -> None:
    """With one invocation at a time, Q6's delay is each reply's ts minus its send's."""
    audit = message_log(services=5, minutes=2, rate_per_s=0.2, dos_episodes=0, delay_episodes=0, seed=4)
    pending: datetime | None = None
    delays = []
    for r in (r for r in audit.records if r["serviceId"] == "5"):
        if r["msgType"] == "send" and r["outcome"] == "success":
            pending = when(r)
        elif r["msgType"] == "receive" and pending is not None:
            delays.append((when(r) - pending).total_seconds())
            pending = None
    assert delays and all(0.05 <= d < 0.4 for d in delays)


# ------------------------------------------------------------------------- episodes


def test_episodes_lie_in_the_span_in_disjoint_windows(audit: CloudAudit) -> None:
    assert sorted(e.kind for e in audit.episodes) == ["delay", "dos"]
    many = message_log(minutes=10, dos_episodes=3, delay_episodes=2, seed=5)
    assert Counter(e.kind for e in many.episodes) == {"dos": 3, "delay": 2}
    for log in (audit, many):
        for e in log.episodes:
            assert START < e.start < e.end < START + timedelta(minutes=10)
            assert e.service_id in log.services and e.target in log.services[e.service_id][1:]
            if e.kind == "delay":
                assert e.target == log.services[e.service_id][-1]
        for before, after in zip(log.episodes, log.episodes[1:]):
            assert before.end <= after.start


def test_first_episodes_hit_service_5(audit: CloudAudit) -> None:
    assert {(e.kind, e.target, e.service_id) for e in audit.episodes} == {("dos", "CompanyB", "5"),
                                                                          ("delay", "CompanyB", "5")}


def test_no_episodes_when_none_are_asked_for() -> None:
    assert message_log(minutes=1, dos_episodes=0, delay_episodes=0).episodes == []


def test_dos_target_fails_far_more_inside_the_episode(audit: CloudAudit) -> None:
    dos = next(e for e in audit.episodes if e.kind == "dos")
    inside, outside = Counter(), Counter()
    for r in audit.records:
        if r["msgType"] == "send" and r["receiver"] == dos.target:
            (inside if dos.covers(r["ts"]) else outside)[r["outcome"]] += 1
    assert inside["failure"] / inside.total() > 0.7
    assert outside["failure"] / outside.total() < 0.1
    # Failed sends are not answered: the target replies to delivered sends only.
    replies = sum(r["msgType"] == "receive" and r["sender"] == dos.target and dos.covers(r["ts"])
                  for r in audit.records)
    assert replies <= inside["success"] + 5  # a few replies to sends from just before the window
    # The flood: the attacked service is called far more often during the episode.
    seconds = (dos.end - dos.start).total_seconds()
    calls = [r for r in audit.records if r["msgType"] == "send" and r["serviceId"] == dos.service_id
             and r["receiver"] == dos.target]
    rate_inside = sum(dos.covers(r["ts"]) for r in calls) / seconds
    rate_outside = sum(not dos.covers(r["ts"]) for r in calls) / (600 - seconds)
    assert rate_inside > 3 * rate_outside


def test_delayed_service_answers_late_inside_the_episode(audit: CloudAudit) -> None:
    delay = next(e for e in audit.episodes if e.kind == "delay")
    records = [r for r in audit.records if r["serviceId"] == delay.service_id]
    replies = [when(r) for r in records if r["msgType"] == "receive"]

    def answered_quickly(sent: datetime) -> bool:
        return any(sent < t <= sent + timedelta(seconds=0.45) for t in replies)

    inside, outside = [], []
    for r in records:
        if r["msgType"] == "send" and r["outcome"] == "success":
            (inside if delay.covers(r["ts"]) else outside).append(answered_quickly(when(r)))
    assert len(inside) > 10 and sum(inside) / len(inside) < 0.5
    assert sum(outside) / len(outside) > 0.9


def test_episode_covers_datetimes_and_texts() -> None:
    e = Episode("dos", "CompanyB", "5", START, START + timedelta(seconds=10))
    assert e.covers("2026-03-01T10:00:00Z") and e.covers(START + timedelta(seconds=9.5))
    assert not e.covers("2026-03-01T10:00:10Z") and not e.covers("2026-03-01T09:59:59.999999Z")


# ------------------------------------------------------------------- unknown senders


@pytest.mark.parametrize("fraction", [0.0, 0.05, 0.5, 1.0])
def test_unknown_fraction_relabels_exactly_that_many_senders(fraction: float) -> None:
    plain = message_log(minutes=2, seed=9)
    audit = message_log(minutes=2, seed=9, unknown_fraction=fraction)
    unknown = [r for r in audit.records if not r["sender"].startswith("Company")]
    assert len(unknown) == round(fraction * len(audit.records))
    assert all(re.fullmatch(r"Unregistered[1-9]", r["sender"]) for r in unknown)
    # Only the senders change: the traffic itself is the same.
    strip = [{k: v for k, v in r.items() if k != "sender"} for r in audit.records]
    assert strip == [{k: v for k, v in r.items() if k != "sender"} for r in plain.records]
    assert audit.episodes == plain.episodes and audit.services == plain.services


# -------------------------------------------------------------------------- arguments


@pytest.mark.parametrize("bad", [
    dict(services=0), dict(minutes=0), dict(minutes=float("inf")), dict(rate_per_s=0), dict(rate_per_s=float("nan")),
    dict(dos_episodes=-1), dict(delay_episodes=-1), dict(unknown_fraction=1.5), dict(unknown_fraction=-0.1),
    dict(seed=-1), dict(start="yesterday"), dict(minutes=0.02, dos_episodes=1, delay_episodes=1),
    dict(classes={"COI1": ["1", "2"]}), dict(classes={"COI1": ["1"], "COI2": []}),
    dict(classes={"COI1": ["1"], "COI2": ["1", "B"]}), dict(classes={"COI1": "12", "COI2": ["A"]}),
    dict(classes={"COI1": [""], "COI2": ["A"]}),
])
def test_bad_arguments_raise(bad: dict) -> None:
    with pytest.raises(ValueError):
        message_log(**bad)


def test_start_may_be_text() -> None:
    audit = message_log(minutes=0.5, start="2026-05-01T08:00:00Z", dos_episodes=0, delay_episodes=0)
    assert audit.records[0]["ts"].startswith("2026-05-01T08:00:")


# ---------------------------------------------------------------------------- writing


def read_lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_write_one_file(tmp_path: Path, audit: CloudAudit) -> None:
    counts = write_message_log(audit, tmp_path / "log")
    assert counts == {"MessageLog.jsonl": len(audit.records)}
    assert read_lines(tmp_path / "log" / "MessageLog.jsonl") == audit.records


def test_write_time_sliced_parts_replacing_stale_files(tmp_path: Path, audit: CloudAudit) -> None:
    write_message_log(audit, tmp_path)
    (tmp_path / "part-00007.jsonl").write_text("{}\n")
    counts = write_message_log(audit, tmp_path, files=3)
    assert list(counts) == ["part-00000.jsonl", "part-00001.jsonl", "part-00002.jsonl"]
    assert sorted(p.name for p in tmp_path.iterdir()) == list(counts)
    parts = [read_lines(tmp_path / name) for name in counts]
    assert [len(p) for p in parts] == list(counts.values())
    assert sum(parts, []) == audit.records
    assert all(abs(len(p) - len(audit.records) / 3) < 50 for p in parts)
    for before, after in zip(parts, parts[1:]):
        assert when(before[-1]) < when(after[0])  # an instant never straddles two files


def test_write_rejects_more_files_than_instants(tmp_path: Path) -> None:
    audit = CloudAudit([{"ts": "2026-03-01T10:00:00Z"}] * 3, [], {})
    with pytest.raises(ValueError):
        write_message_log(audit, tmp_path, files=2)
    with pytest.raises(ValueError):
        write_message_log(audit, tmp_path, files=0)
    assert not list(tmp_path.iterdir())


# -------------------------------------------------------------------------------- CLI


def test_cli_cloud(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = ["cloud", "--out", str(tmp_path / "c"), "--minutes", "1", "--services", "6", "--seed", "7"]
    assert main([*argv, "--files", "2", "--unknown", "0.1"]) == 0
    assert main(["cloud", "--out", str(tmp_path / "d"), "--minutes", "1", "--class", "X=1,2", "--class", "Y=A,B",
                 "--class", "Z=q", "--dos", "2", "--delays", "0", "--rate", "5"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert len(out) == 2
    expected = message_log(minutes=1, services=6, seed=7, unknown_fraction=0.1)
    assert out[0].startswith(f"MessageLog={len(expected.records)} records (")
    assert "6 services, 5 companies in 2 COI classes" in out[0] and "dos CompanyB on 5" in out[0]
    assert "2 file(s) written to" in out[0]
    assert sorted(p.name for p in (tmp_path / "c").iterdir()) == ["part-00000.jsonl", "part-00001.jsonl"]
    lines = sum((read_lines(tmp_path / "c" / n) for n in ("part-00000.jsonl", "part-00001.jsonl")), [])
    assert lines == expected.records
    assert "5 companies in 3 COI classes" in out[1] and "delay" not in out[1]
    assert (tmp_path / "d" / "MessageLog.jsonl").exists()


@pytest.mark.parametrize("argv", [
    ["--services", "0"], ["--unknown", "2"], ["--minutes", "0"], ["--class", "COI1=1"], ["--class", "nonsense"],
    ["--class", "X=1", "--class", "X=2"], ["--minutes", "0.01", "--dos", "3"],
])
def test_cli_rejects_bad_arguments(tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(["cloud", "--out", str(tmp_path / "out"), *argv])
    assert exit_info.value.code == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and "error:" in err and not (tmp_path / "out").exists()
