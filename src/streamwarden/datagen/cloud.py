"""Cloud audit data: the ``MessageLog`` stream of the Chinese-Wall information-flow paper.

Issue 4's example application (sections 2-3 of the paper): companies offer services in
a cloud and are partitioned into conflict-of-interest (COI) classes; a service is an
invocation chain of companies from different classes (a complementing-interest class).
Every message of an invocation is audited into one stream, ``MessageLog``, which the
queries Q1-Q7 read at different security levels. This module generates that stream,
seeded and reproducible, with known attacks in it:

* :func:`message_log`: the records of all services in arrival order, the services'
  chains and the ground truth of the injected episodes (:class:`Episode`): denial of
  service (sends to one company fail, under a flood of calls) and delays (one service's
  replies take seconds, as a man in the middle would cause).
* :func:`write_message_log`: the records as JSON lines, one file or time-sliced parts.

Record contract (one JSON object per line, arrival order = line order)::

    {"ts": "2026-03-01T10:00:00.731000Z", "serviceId": "5", "msgType": "send",
     "sender": "Company1", "receiver": "CompanyB", "outcome": "success"}

An invocation of a chain ``c0 -> c1 [-> c2]`` is a ``send`` from each caller to its
callee, then the callee's reply as a ``receive`` (``sender`` = callee, ``receiver`` =
caller), innermost first. A failed send is not delivered: its callee neither replies
nor calls on, and the caller's own reply upstream fails. With the default classes (the
paper's ``COI1 = {1, 2}``, ``COI2 = {A, B, C}``) service ``"5"`` is ``Company1 ->
CompanyB`` (Q5, Q6), and the first DoS and delay episodes hit it.

Invocations are drawn column-wise with NumPy; Python loops run over services, episodes
and chain hops only (and the final ``dict`` per record).

Example:
    >>> audit = message_log(minutes=1, seed=0)
    >>> audit.services["5"]
    ('Company1', 'CompanyB')
    >>> audit.records[0]  # doctest: +NORMALIZE_WHITESPACE
    {'ts': '2026-03-01T10:00:00.351482Z', 'serviceId': '4', 'msgType': 'send', 'sender': 'CompanyC',
     'receiver': 'Company1', 'outcome': 'success'}
    >>> [(e.kind, e.target, e.service_id) for e in audit.episodes]
    [('dos', 'CompanyB', '5'), ('delay', 'CompanyB', '5')]
    >>> dos = audit.episodes[0]
    >>> hits = [r for r in audit.records if dos.covers(r["ts"]) and r["msgType"] == "send"
    ...         and r["receiver"] == "CompanyB"]
    >>> sum(r["outcome"] == "failure" for r in hits) > len(hits) / 2
    True
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import numpy as np

from .punctuated import DEFAULT_START, _iso, _rng, _start_micros, write_jsonl

__all__ = [
    "DEFAULT_CLASSES",
    "CloudAudit",
    "Episode",
    "company_name",
    "message_log",
    "write_message_log",
]

#: The paper's COI classes (section 3): class name -> its companies. The order fixes the
#: positions in a security level vector: ``[1, B]`` is Company1 and CompanyB.
DEFAULT_CLASSES: dict[str, list[str]] = {"COI1": ["1", "2"], "COI2": ["A", "B", "C"]}

_EPOCH = datetime(1970, 1, 1, tzinfo=timezone.utc)
_US = 1_000_000
_MS = 1_000
_MAX_CHAIN = 3  # companies per service
_HOPS = _MAX_CHAIN - 1

# The paper's service: "serviceId 5 involves Company1 from COI1 and CompanyB from COI2".
_PAPER_SERVICE = "5"
_PAPER_CHAIN = ("1", "B")

# Message timing (µs) and failure odds of ordinary traffic.
_FORWARD_US = (2 * _MS, 20 * _MS)  # a callee calling on down the chain, or replying up it
_SERVICE_US = (50 * _MS, 400 * _MS)  # the innermost callee's work
_DELAYED_US = (2 * _US, 6 * _US)  # ... during a delay episode
_SEND_FAILURE = 0.03
_REPLY_FAILURE = 0.03
_DOS_SEND_FAILURE = 0.9  # sends to the target of a DoS episode
_EPISODE_SHARE = 0.4  # of its time slot, an episode's length
_UNKNOWN_SENDERS = 9  # Unregistered1 .. Unregistered9

# Independent random streams per purpose, derived from the user seed (as in punctuated.py),
# so e.g. unknown_fraction never changes the traffic it relabels.
_KEY_CHAINS = 0
_KEY_EPISODES = 1
_KEY_ARRIVALS = 2
_KEY_TIMING = 3
_KEY_OUTCOMES = 4
_KEY_UNKNOWN = 5


def company_name(c: str) -> str:
    """The name a company has in the records: ``"Company" + c`` (the paper's spelling).

    >>> company_name("B")
    'CompanyB'
    """
    return f"Company{c}"


@dataclass(frozen=True)
class Episode:
    """One injected attack, the ground truth for detection queries.

    ``kind`` is ``"dos"`` (sends to ``target`` fail; ``service_id`` is the service
    flooded with calls) or ``"delay"`` (replies on ``service_id`` take seconds;
    ``target`` is its innermost callee). The episode covers ``[start, end)``.
    """

    kind: str
    target: str
    service_id: str
    start: datetime
    end: datetime

    def covers(self, ts: datetime | str) -> bool:
        """Whether ``ts`` (a datetime or a record's ISO-8601 text) lies in ``[start, end)``."""
        when = datetime.fromisoformat(ts) if isinstance(ts, str) else ts
        return self.start <= when < self.end


@dataclass(frozen=True)
class CloudAudit:
    """What :func:`message_log` generates.

    ``records``: the MessageLog records, sorted by ``ts`` (arrival order);
    ``episodes``: the injected episodes in time order; ``services``: serviceId -> its
    invocation chain of company names, caller first.
    """

    records: list[dict]
    episodes: list[Episode]
    services: dict[str, tuple[str, ...]]


@dataclass(frozen=True)
class _Plan:
    """Services and episodes as indices: chains (services x 3, -1 pads), episode windows (µs)."""

    chains: np.ndarray
    hops: np.ndarray
    kinds: tuple[str, ...]
    targets: np.ndarray  # company index
    services: np.ndarray  # service index
    starts: np.ndarray
    ends: np.ndarray


def message_log(*, classes: Mapping[str, Sequence[str]] = DEFAULT_CLASSES, services: int = 6,
                minutes: float = 10, rate_per_s: float = 2.0, dos_episodes: int = 1, delay_episodes: int = 1,
                unknown_fraction: float = 0.0, seed: int = 7, start: datetime | str = DEFAULT_START) -> CloudAudit:
    """The cloud's MessageLog: ``rate_per_s`` invocations a second for ``minutes``.

    Services ``"1".."N"`` each get a chain of 2-3 companies, each from a different
    class of ``classes`` (drawn so that chains differ and every company takes part, as
    far as possible); when the classes hold companies ``1`` and ``B`` in different
    classes and there are at least 5 services, service ``"5"`` is ``Company1 ->
    CompanyB``. Invocations start at Poisson times in ``[start, start + minutes)`` on
    uniformly drawn services; a caller forwards within 2-20 ms, the innermost callee
    answers after 50-400 ms, so the last replies may arrive just after the span.
    A send fails with odds 3 %, a reply with 3 %.

    Episodes fall in disjoint slots of the span, each lasting 40 % of its slot:

    * ``dos``: one company on one service is attacked: the service gets extra calls at
      ``rate_per_s`` and 90 % of all sends to the company fail (and are not answered);
    * ``delay``: the innermost callee of one service answers after 2-6 s.

    The earliest episode of each kind hits service ``"5"`` (CompanyB) when it is the
    paper's; the others hit drawn services and (for DoS) one of their callees.

    ``unknown_fraction`` of the records (exactly, rounded) get a sender outside the
    lattice, ``Unregistered1`` .. ``Unregistered9``; the engine gives them the top level.

    >>> audit = message_log(classes={"X": ["1"], "Y": ["2"], "Z": ["3"]}, services=3, minutes=0.5,
    ...                     dos_episodes=0, delay_episodes=0, unknown_fraction=0.1, seed=0)
    >>> audit.services  # doctest: +NORMALIZE_WHITESPACE
    {'1': ('Company3', 'Company2', 'Company1'), '2': ('Company1', 'Company2'),
     '3': ('Company3', 'Company1', 'Company2')}
    >>> sum(not r["sender"].startswith("Company") for r in audit.records) == round(0.1 * len(audit.records))
    True
    """
    codes = _check_classes(classes)
    _check_log(services, minutes, rate_per_s, dos_episodes, delay_episodes, unknown_fraction, seed)
    run_us = round(minutes * 60 * _US)
    if dos_episodes + delay_episodes > run_us // _US:
        raise ValueError(f"{dos_episodes + delay_episodes} episodes need a run of at least as many seconds, "
                         f"got {minutes} min")
    start_us = _start_micros(start)
    names = np.array([company_name(c) for c in codes], dtype=object)
    chains = _chains(classes, codes, services, seed)
    plan = _episodes(chains, codes, dos_episodes, delay_episodes, run_us, seed)
    t0, service = _arrivals(plan, services, run_us, rate_per_s, seed)
    events = _invocations(plan, t0, service, seed)
    records = _records(events, names, start_us, unknown_fraction, seed)
    service_ids = [str(s + 1) for s in range(services)]
    episodes = [Episode(kind, str(names[t]), service_ids[s], _datetime(start_us + a), _datetime(start_us + b))
                for kind, t, s, a, b in zip(plan.kinds, plan.targets.tolist(), plan.services.tolist(),
                                            plan.starts.tolist(), plan.ends.tolist())]
    return CloudAudit(records, episodes,
                      {sid: tuple(str(names[c]) for c in chain if c >= 0) for sid, chain in zip(service_ids, chains)})


def write_message_log(audit: CloudAudit, out: str | Path, files: int = 1) -> dict[str, int]:
    """Write ``audit.records`` as JSON lines into the folder ``out``; file name -> records.

    One file is ``out/MessageLog.jsonl``; ``files > 1`` cuts the records into that many
    consecutive time slices ``out/part-00000.jsonl``, ... of near-equal numbers of
    distinct timestamps (an instant's records never straddle two files). Earlier
    ``MessageLog.jsonl`` and ``part-*.jsonl`` files in ``out`` are removed: a folder is
    read whole, so a stale file from an earlier run would mix into this one.
    """
    if files < 1:
        raise ValueError(f"files must be >= 1, got {files}")
    ts = [r["ts"] for r in audit.records]
    firsts = [i for i in range(len(ts)) if i == 0 or ts[i] != ts[i - 1]]  # each instant's first record
    if files > max(len(firsts), 1):
        raise ValueError(f"files must be at most the number of distinct timestamps ({len(firsts)}), got {files}")
    folder = Path(out)
    if folder.is_dir():
        for stale in [*folder.glob("part-*.jsonl"), *folder.glob("MessageLog.jsonl")]:
            stale.unlink()
    if files == 1:
        write_jsonl(audit.records, folder / "MessageLog.jsonl")
        return {"MessageLog.jsonl": len(audit.records)}
    cuts = [firsts[int(k)] for k in np.linspace(0, len(firsts), files + 1).round().astype(int)[1:-1]]
    bounds = [0, *cuts, len(audit.records)]
    counts = {}
    for number, (a, b) in enumerate(zip(bounds[:-1], bounds[1:])):
        name = f"part-{number:05d}.jsonl"
        write_jsonl(audit.records[a:b], folder / name)
        counts[name] = b - a
    return counts


# ============================================================================ checks


def _check_classes(classes: Mapping[str, Sequence[str]]) -> list[str]:
    """All company codes, class by class; raises ValueError on an unusable lattice."""
    if not isinstance(classes, Mapping) or len(classes) < 2:
        raise ValueError(f"classes must map at least 2 COI class names to their companies (a chain spans "
                         f"2 classes), got {classes!r}")
    codes: list[str] = []
    for name, companies in classes.items():
        if isinstance(companies, str) or not companies:
            raise ValueError(f"COI class {name!r} must list at least one company code, got {companies!r}")
        for c in companies:
            if not isinstance(c, str) or not c:
                raise ValueError(f"company codes must be non-empty strings, got {c!r} in class {name!r}")
        codes += companies
    repeated = sorted({c for c in codes if codes.count(c) > 1})
    if repeated:
        raise ValueError(f"a company belongs to one COI class only; repeated: {', '.join(repeated)}")
    return codes


def _check_log(services: int, minutes: float, rate_per_s: float, dos_episodes: int, delay_episodes: int,
               unknown_fraction: float, seed: int) -> None:
    if services < 1:
        raise ValueError(f"services must be >= 1, got {services}")
    if not 0 < minutes < math.inf:
        raise ValueError(f"minutes must be a finite number > 0, got {minutes}")
    if not 0 < rate_per_s < math.inf:
        raise ValueError(f"rate_per_s must be a finite number > 0, got {rate_per_s}")
    if dos_episodes < 0:
        raise ValueError(f"dos_episodes must be >= 0, got {dos_episodes}")
    if delay_episodes < 0:
        raise ValueError(f"delay_episodes must be >= 0, got {delay_episodes}")
    if not 0 <= unknown_fraction <= 1:
        raise ValueError(f"unknown_fraction must be in [0, 1], got {unknown_fraction}")
    if seed < 0:
        raise ValueError(f"seed must be >= 0, got {seed}")


def _datetime(micros: int) -> datetime:
    return _EPOCH + timedelta(microseconds=micros)


# ======================================================================= the cloud


def _chains(classes: Mapping[str, Sequence[str]], codes: list[str], services: int, seed: int) -> np.ndarray:
    """Each service's chain as company indices (services x 3, -1 pads), caller first.

    A chain takes its companies from distinct classes, in a drawn order. Among a few
    draws the first one that is new and (while some are left out) brings in a company
    not yet in any chain is kept.
    """
    rng = _rng(seed, _KEY_CHAINS)
    members = [np.array([codes.index(c) for c in companies]) for companies in classes.values()]
    paper = _paper_chain(codes, classes)
    chains = np.full((services, _MAX_CHAIN), -1, dtype=np.int64)
    pinned = paper if services >= int(_PAPER_SERVICE) else None
    seen: set[tuple[int, ...]] = {pinned} if pinned is not None else set()
    for s in range(services):
        if pinned is not None and str(s + 1) == _PAPER_SERVICE:
            chain = pinned
        else:
            drawn = [_draw_chain(rng, members) for _ in range(20)]
            left_out = set(range(len(codes))) - {c for ch in seen for c in ch}
            new = [ch for ch in drawn if ch not in seen]
            bringing = [ch for ch in new if left_out & set(ch)]
            chain = (bringing or new or drawn)[0]
        seen.add(chain)
        chains[s, : len(chain)] = chain
    return chains


def _paper_chain(codes: list[str], classes: Mapping[str, Sequence[str]]) -> tuple[int, ...] | None:
    """Company1 -> CompanyB as indices, if both exist in different classes."""
    home = {c: name for name, companies in classes.items() for c in companies}
    caller, callee = _PAPER_CHAIN
    if caller in home and callee in home and home[caller] != home[callee]:
        return codes.index(caller), codes.index(callee)
    return None


def _draw_chain(rng: np.random.Generator, members: list[np.ndarray]) -> tuple[int, ...]:
    length = int(rng.integers(2, min(_MAX_CHAIN, len(members)) + 1))
    picked = rng.choice(len(members), length, replace=False)
    return tuple(int(rng.choice(members[k])) for k in picked)


def _episodes(chains: np.ndarray, codes: list[str], dos: int, delay: int, run_us: int, seed: int) -> _Plan:
    """Episode kinds, targets, services and windows: one per slot of the run, in time order."""
    rng = _rng(seed, _KEY_EPISODES)
    hops = (chains >= 0).sum(axis=1) - 1
    count = dos + delay
    kinds = tuple(np.array(["dos"] * dos + ["delay"] * delay)[rng.permutation(count)].tolist())
    slot = run_us / max(count, 1)
    offsets = np.arange(count) * slot + rng.uniform(0.1, 1.0 - _EPISODE_SHARE - 0.1, count) * slot
    starts = (offsets // _MS * _MS).astype(np.int64)
    ends = ((offsets + _EPISODE_SHARE * slot) // _MS * _MS).astype(np.int64)
    paper = len(chains) >= int(_PAPER_SERVICE) and _is_paper(chains[int(_PAPER_SERVICE) - 1], codes)
    targets, services = np.zeros(count, np.int64), np.zeros(count, np.int64)
    for j, kind in enumerate(kinds):
        if paper and kind not in kinds[:j]:
            s = int(_PAPER_SERVICE) - 1
        else:
            s = int(rng.integers(0, len(chains)))
        # DoS: one of the callees; delay: the innermost callee.
        position = int(rng.integers(1, hops[s] + 1)) if kind == "dos" else int(hops[s])
        targets[j], services[j] = chains[s, position], s
    return _Plan(chains, hops, kinds, targets, services, starts, ends)


def _is_paper(chain: np.ndarray, codes: list[str]) -> bool:
    return [codes[c] for c in chain if c >= 0] == list(_PAPER_CHAIN)


def _arrivals(plan: _Plan, services: int, run_us: int, rate_per_s: float,
              seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Invocation start times (µs after the start, sorted) and services, floods included."""
    rng = _rng(seed, _KEY_ARRIVALS)
    n = int(rng.poisson(rate_per_s * run_us / _US))
    t0 = [rng.uniform(0, run_us, n)]
    service = [rng.integers(0, services, n)]
    for kind, s, a, b in zip(plan.kinds, plan.services.tolist(), plan.starts.tolist(), plan.ends.tolist()):
        if kind == "dos":  # the flood: as many extra calls again, all on the attacked service
            m = int(rng.poisson(rate_per_s * (b - a) / _US))
            t0.append(rng.uniform(a, b, m))
            service.append(np.full(m, s))
    times, which = np.concatenate(t0).astype(np.int64), np.concatenate(service).astype(np.int64)
    order = np.argsort(times, kind="stable")
    return times[order], which[order]


@dataclass(frozen=True)
class _Events:
    """All messages, column-wise; ``invocation``/``seq`` order messages of one instant."""

    ts: np.ndarray
    invocation: np.ndarray
    seq: np.ndarray
    service: np.ndarray
    receive: np.ndarray  # msgType: False send, True receive
    sender: np.ndarray
    receiver: np.ndarray
    ok: np.ndarray


def _in_windows(plan: _Plan, kind: str, ts: np.ndarray, service: np.ndarray | None = None,
                company: np.ndarray | None = None) -> np.ndarray:
    """Whether each ``ts`` falls in an episode of ``kind`` on its service (or company)."""
    hit = np.zeros(len(ts), dtype=bool)
    for j, k in enumerate(plan.kinds):
        if k == kind:
            mine = (service == plan.services[j]) if service is not None else (company == plan.targets[j])
            hit |= mine & (ts >= plan.starts[j]) & (ts < plan.ends[j])
    return hit


def _invocations(plan: _Plan, t0: np.ndarray, service: np.ndarray, seed: int) -> _Events:
    """The sends and replies of every invocation, hop by hop (vectorized over invocations)."""
    timing, odds = _rng(seed, _KEY_TIMING), _rng(seed, _KEY_OUTCOMES)
    n = len(t0)
    forward = timing.integers(*_FORWARD_US, (n, _HOPS))
    back = timing.integers(*_FORWARD_US, (n, _HOPS))
    work = timing.integers(*_SERVICE_US, n)
    slow = timing.integers(*_DELAYED_US, n)
    work = np.where(_in_windows(plan, "delay", t0, service=service), slow, work)
    send_draw, reply_draw = odds.random((n, _HOPS)), odds.random((n, _HOPS))
    hops = plan.hops[service]
    caller = plan.chains[service]  # (n, 3): hop h goes from column h to column h + 1
    # Outward: send times, who is reached.
    sent = np.zeros((n, _HOPS), dtype=bool)
    send_ok = np.zeros((n, _HOPS), dtype=bool)
    send_ts = np.zeros((n, _HOPS), dtype=np.int64)
    for h in range(_HOPS):
        send_ts[:, h] = t0 if h == 0 else send_ts[:, h - 1] + forward[:, h]
        sent[:, h] = (h < hops) & (send_ok[:, h - 1] if h else True)
        dos = _in_windows(plan, "dos", send_ts[:, h], company=caller[:, h + 1])
        send_ok[:, h] = sent[:, h] & (send_draw[:, h] >= np.where(dos, _DOS_SEND_FAILURE, _SEND_FAILURE))
    # Inward: each reached callee replies once its own callee did (or could not be reached).
    reply_ok = np.zeros((n, _HOPS), dtype=bool)
    reply_ts = np.zeros((n, _HOPS), dtype=np.int64)
    for h in reversed(range(_HOPS)):
        innermost = h == hops - 1
        if h == _HOPS - 1:
            reply_ts[:, h], inner_ok = send_ts[:, h] + work, True
        else:
            inner_done = np.where(send_ok[:, h + 1], reply_ts[:, h + 1], send_ts[:, h + 1])
            reply_ts[:, h] = np.where(innermost, send_ts[:, h] + work, inner_done + back[:, h])
            inner_ok = innermost | reply_ok[:, h + 1]
        reply_ok[:, h] = send_ok[:, h] & (reply_draw[:, h] >= _REPLY_FAILURE) & inner_ok
    return _events(plan, t0, service, sent, send_ok, send_ts, reply_ok, reply_ts, caller)


def _events(plan: _Plan, t0: np.ndarray, service: np.ndarray, sent: np.ndarray, send_ok: np.ndarray,
            send_ts: np.ndarray, reply_ok: np.ndarray, reply_ts: np.ndarray, caller: np.ndarray) -> _Events:
    """Sends of hop h have seq h, replies seq 2*hops - 1 - h: the order within an instant."""
    columns: dict[str, list[np.ndarray]] = {f: [] for f in _Events.__dataclass_fields__}
    invocation = np.arange(len(t0))
    for h in range(_HOPS):
        for is_reply, mask, ts, ok in ((False, sent[:, h], send_ts[:, h], send_ok[:, h]),
                                       (True, send_ok[:, h], reply_ts[:, h], reply_ok[:, h])):
            src, dst = (caller[mask, h + 1], caller[mask, h]) if is_reply else (caller[mask, h], caller[mask, h + 1])
            count = int(mask.sum())
            parts = dict(ts=ts[mask], invocation=invocation[mask],
                         seq=np.full(count, 2 * _HOPS - 1 - h if is_reply else h), service=service[mask],
                         receive=np.full(count, is_reply), sender=src, receiver=dst, ok=ok[mask])
            for name, part in parts.items():
                columns[name].append(part)
    merged = {name: np.concatenate(parts) for name, parts in columns.items()}
    order = np.lexsort([merged["seq"], merged["invocation"], merged["ts"]])
    return _Events(**{name: column[order] for name, column in merged.items()})


def _records(events: _Events, names: np.ndarray, start_us: int, unknown_fraction: float,
             seed: int) -> list[dict]:
    """The MessageLog records, ``unknown_fraction`` of them with an unregistered sender."""
    n = len(events.ts)
    rng = _rng(seed, _KEY_UNKNOWN)
    unknown = rng.permutation(n) < round(unknown_fraction * n)  # exactly that many
    strangers = np.array([f"Unregistered{k}" for k in range(1, _UNKNOWN_SENDERS + 1)], dtype=object)
    sender = np.where(unknown, strangers[rng.integers(0, _UNKNOWN_SENDERS, n)], names[events.sender])
    columns = (
        _iso(start_us + events.ts).tolist(),
        (events.service + 1).astype(str).tolist(),
        np.where(events.receive, "receive", "send").tolist(),
        sender.tolist(),
        names[events.receiver].tolist(),
        np.where(events.ok, "success", "failure").tolist(),
    )
    return [{"ts": ts, "serviceId": sid, "msgType": kind, "sender": src, "receiver": dst, "outcome": outcome}
            for ts, sid, kind, src, dst, outcome in zip(*columns)]
