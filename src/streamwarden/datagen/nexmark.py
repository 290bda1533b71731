"""NEXMark's online auction streams (Person, Auction, Bid), seeded, with what policies need.

The model is the NEXMark generator of Apache Beam as the Flink community's ``nexmark``
repository runs it (``GeneratorConfig``, ``PersonGenerator``, ``AuctionGenerator``,
``BidGenerator``): event ``i`` of the run is a person, an auction or a bid by ``i % 50``
(proportions 1 : 3 : 46); its event time is ``start + i / rate`` in whole milliseconds;
ids start at 1000 and grow by one per entity; categories are 10..14; prices are
``round(10 ** U(0, 6) * 100)`` cents; an auction's reserve is its initial bid plus a
price; an auction expires a random time (twice NEXMark's in-flight horizon on average)
after it opens; sellers and bidders are people, bids are on auctions. Hot entities
follow the model: 3/4 of auctions are by the "hot" seller (the first of the latest 100
people), 1/2 of bids are on the hot auction (the first of the latest 100 auctions) and
3/4 by the hot bidder (the second of the latest 100 people); the others pick one of
the 1,000 most recent people or the 100 most recent auctions, or one of the next 10 not
yet created (NEXMark's "lead", so a reference may name an entity a few events ahead).
The random draws are NumPy's, not Java's: the same distributions, other values.

What streamwarden adds (docs/semantics.md):

* ``market``: every record belongs to one of two marketplaces, ``eu`` and ``us``. A
  person's is fixed by their id (:func:`market_of`, independent of the seed, so a
  catalog can name its users' clearances); an auction is listed on its seller's market
  and a bid is placed on its auction's market. ``examples/nexmark/catalog.yaml`` puts a
  Chinese-Wall level boundary between the two.
* ``PunctuatedBid``: the Bid stream with bidders' own security punctuations inline
  (``key`` and ``punctuated_by``: ``bidder``): each bidder's sub-stream opens with their
  policy (:data:`BIDDER_POLICIES`), and about one bidder in three changes it once.

Referential integrity: every reference names an entity of the run. NEXMark's lead can
name a person or auction the run ends before creating; such references are moved to the
last one created.

Example:
    >>> tables = nexmark_tables(1000, seed=7)
    >>> {name: t.num_rows for name, t in tables.items()}
    {'Person': 20, 'Auction': 60, 'Bid': 920}
    >>> set(tables["Bid"].column("bidder").to_pylist()) <= set(tables["Person"].column("id").to_pylist())
    True
    >>> market_of(1000), market_of(1002)
    ('eu', 'us')
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timezone
from functools import partial
from pathlib import Path
from types import MappingProxyType
from typing import Literal, overload

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

# The drill generator's writers: Arrow-kernel JSON lines (no Python per row) and the
# hidden-name-then-rename that keeps a live reader from seeing half a file.
from .drill import _write_atomically, _write_jsonl
from .punctuated import _iso as _iso_texts
from .punctuated import write_jsonl

__all__ = [
    "BIDDER_POLICIES",
    "DEFAULT_RATE",
    "DEFAULT_START",
    "FIRST_AUCTION_ID",
    "FIRST_CATEGORY_ID",
    "FIRST_PERSON_ID",
    "MARKETS",
    "SCHEMAS",
    "STREAMS",
    "NexmarkSummary",
    "generate_nexmark",
    "market_of",
    "nexmark_tables",
    "punctuated_bids",
]

Format = Literal["jsonl", "parquet"]

DEFAULT_START = "2026-03-01T10:00:00Z"
#: Events per second of event time (NEXMark's ``firstEventRate`` with one generator).
DEFAULT_RATE = 10_000.0
FIRST_PERSON_ID = 1000
FIRST_AUCTION_ID = 1000
FIRST_CATEGORY_ID = 10
MARKETS = ("eu", "us")
STREAMS = ("Person", "Auction", "Bid")

# GeneratorConfig / NexmarkConfiguration defaults.
_PERSON_PROPORTION, _AUCTION_PROPORTION, _BID_PROPORTION = 1, 3, 46
_TOTAL = _PERSON_PROPORTION + _AUCTION_PROPORTION + _BID_PROPORTION
_HOT_AUCTION_RATIO, _HOT_SELLERS_RATIO, _HOT_BIDDERS_RATIO = 2, 4, 4
_NUM_IN_FLIGHT_AUCTIONS, _NUM_ACTIVE_PEOPLE = 100, 1000
_AVG_PERSON_BYTES, _AVG_AUCTION_BYTES, _AVG_BID_BYTES = 200, 500, 100
# The generators' own constants.
_HOT_BATCH = 100  # HOT_SELLER_RATIO = HOT_AUCTION_RATIO = HOT_BIDDER_RATIO in the model classes
_ID_LEAD = 10  # PERSON_ID_LEAD, AUCTION_ID_LEAD
_NUM_CATEGORIES = 5
_MIN_STRING = 3
_HOT_CHANNELS = ("Google", "Facebook", "Baidu", "Apple")
_CHANNELS = 10_000
_US_STATES = ("AZ", "CA", "ID", "OR", "WA", "WY")
_US_CITIES = ("Phoenix", "Los Angeles", "San Francisco", "Boise", "Portland", "Bend", "Redmond", "Seattle", "Kent",
              "Cheyenne")
_FIRST_NAMES = ("Peter", "Paul", "Luke", "John", "Saul", "Vicky", "Kate", "Julie", "Sarah", "Deiter", "Walter")
_LAST_NAMES = ("Shultz", "Abrams", "Spencer", "White", "Bartels", "Walton", "Smith", "Jones", "Noris")

#: Catalog schemas (``dateTime`` is streamwarden's event time ``ts``), ``market`` last.
SCHEMAS: Mapping[str, tuple[tuple[str, str], ...]] = MappingProxyType({
    "Person": (("ts", "timestamp"), ("id", "long"), ("name", "string"), ("emailAddress", "string"),
               ("creditCard", "string"), ("city", "string"), ("state", "string"), ("extra", "string"),
               ("market", "string")),
    "Auction": (("ts", "timestamp"), ("id", "long"), ("itemName", "string"), ("description", "string"),
                ("initialBid", "long"), ("reserve", "long"), ("expires", "timestamp"), ("seller", "long"),
                ("category", "long"), ("extra", "string"), ("market", "string")),
    "Bid": (("ts", "timestamp"), ("auction", "long"), ("bidder", "long"), ("price", "long"), ("channel", "string"),
            ("url", "string"), ("extra", "string"), ("market", "string")),
})

#: Bidders' own policies for ``PunctuatedBid``, as (attribute pattern, role pattern) SPs:
#: every bidder lets themself and the auditors see everything; an "open" bidder also lets
#: market analysts see what they bid, never who bid it.
BIDDER_POLICIES: Mapping[str, tuple[tuple[str, str], ...]] = MappingProxyType({
    "open": (("*", "{Bidder, Auditor}"), ("{auction, price, channel, url, market}", "{Analyst}")),
    "private": (("*", "{Bidder, Auditor}"),),
})

# Independent random streams per purpose, derived from the seed (as in drill.py and punctuated.py).
_KEY_PERSON, _KEY_AUCTION, _KEY_BID, _KEY_EXTRA, _KEY_CHANNELS, _KEY_POLICIES = range(6)


def _rng(seed: int, key: int) -> np.random.Generator:
    return np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(key,)))


@overload
def market_of(person: int) -> str: ...
@overload
def market_of(person: np.ndarray) -> np.ndarray: ...
def market_of(person: int | np.ndarray) -> str | np.ndarray:
    """The marketplace a person registered with: a fixed hash of ``id // 2``, about half each.

    Pairs of ids share a market so that the model's hot seller and hot bidder of a batch
    (ids 100k and 100k + 1) do: most bids then stay on one market, as on regional sites.

    >>> market_of(1002), list(market_of(np.array([1000, 1001])))
    ('us', ['eu', 'eu'])
    """
    ids = np.asarray(person, dtype=np.uint64)
    # Fibonacci hashing: the top bit of id * 2^32/phi (mod 2^32) halves any run of ids.
    cohort = ids // np.uint64(2)
    bit = ((cohort * np.uint64(0x9E3779B1)) & np.uint64(0xFFFFFFFF)) >> np.uint64(31)
    markets = np.array(MARKETS, dtype=object)[bit.astype(np.int64)]
    return str(markets) if np.ndim(person) == 0 else markets


# ================================================================ the event timeline


def _start_ms(start: datetime | str) -> int:
    if isinstance(start, str):
        start = datetime.fromisoformat(start.replace("Z", "+00:00"))
    if start.tzinfo is None:
        start = start.replace(tzinfo=timezone.utc)
    return round(start.timestamp() * 1000)


@dataclass(frozen=True)
class _Timeline:
    """Event numbers and NEXMark's id bookkeeping for one run (one generator, event id = number)."""

    events: int
    rate: float
    start_ms: int

    def time_ms(self, number: np.ndarray) -> np.ndarray:
        """``timestampForEvent``: the start plus ``number`` inter-event delays, in whole milliseconds."""
        delay_us = 1_000_000.0 / self.rate
        return self.start_ms + (number * delay_us).astype(np.int64) // 1000

    @staticmethod
    def last_person(event: np.ndarray) -> np.ndarray:
        """``lastBase0PersonId``: the latest person created at or before each event."""
        return (event // _TOTAL) * _PERSON_PROPORTION + np.minimum(event % _TOTAL, _PERSON_PROPORTION - 1)

    @staticmethod
    def last_auction(event: np.ndarray) -> np.ndarray:
        """``lastBase0AuctionId``: the latest auction created at or before each event (-1: none yet)."""
        epoch, offset = event // _TOTAL, event % _TOTAL
        person = offset < _PERSON_PROPORTION
        epoch = np.where(person, epoch - 1, epoch)
        offset = np.where(person | (offset >= _PERSON_PROPORTION + _AUCTION_PROPORTION), _AUCTION_PROPORTION - 1,
                          offset - _PERSON_PROPORTION)
        return epoch * _AUCTION_PROPORTION + offset


def _recent_person(rng: np.random.Generator, event: np.ndarray) -> np.ndarray:
    """``nextBase0PersonId``: one of the latest 1,000 people, or of the next 10 (the lead)."""
    people = _Timeline.last_person(event) + 1
    active = np.minimum(people, _NUM_ACTIVE_PEOPLE)
    return people - active + (rng.random(len(event)) * (active + _ID_LEAD)).astype(np.int64)


def _recent_auction(rng: np.random.Generator, event: np.ndarray) -> np.ndarray:
    """``nextBase0AuctionId``: one of the latest 100 auctions in flight, or of the next 10."""
    last = _Timeline.last_auction(event)
    low = np.maximum(last - _NUM_IN_FLIGHT_AUCTIONS, 0)
    return low + (rng.random(len(event)) * (last - low + 1 + _ID_LEAD)).astype(np.int64)


def _prices(rng: np.random.Generator, n: int) -> np.ndarray:
    """``PriceGenerator.nextPrice``: log-uniform from $1 to $1,000,000, in cents."""
    return np.round(10.0 ** (rng.random(n) * 6.0) * 100.0).astype(np.int64)


# ================================================================ strings


def _random_strings(rng: np.random.Generator, n: int, max_length: int, special: str = " ") -> list[str]:
    """``nextString``: 3 to ``max_length - 1`` letters, one in 13 replaced by ``special``, trimmed."""
    lengths = _MIN_STRING + rng.integers(0, max_length - _MIN_STRING, n)
    total = int(lengths.sum())
    codes = (rng.integers(0, 26, total) + ord("a")).astype(np.uint8)
    codes[rng.integers(0, 13, total) == 0] = ord(special)
    text = codes.tobytes().decode("ascii")
    ends = np.cumsum(lengths).tolist()
    starts = [0, *ends[:-1]]
    return [text[a:b].strip() for a, b in zip(starts, ends)]


@dataclass(frozen=True)
class _Extra:
    """``nextExtra``: filler that brings a record to its average size, cut from one reusable string."""

    pool: str

    @classmethod
    def of(cls, seed: int) -> _Extra:
        rng = _rng(seed, _KEY_EXTRA)
        return cls((rng.integers(0, 26, 1 << 20) + ord("a")).astype(np.uint8).tobytes().decode("ascii"))

    def fill(self, rng: np.random.Generator, current: np.ndarray, average: int) -> list[str]:
        wanted = np.maximum(average - current, 0)
        delta = np.round(wanted * 0.2).astype(np.int64)
        low = wanted - delta
        size = low + (rng.random(len(current)) * 2 * delta).astype(np.int64)
        size = np.where(current > average, 0, size)
        offset = (rng.random(len(current)) * (len(self.pool) - size)).astype(np.int64)
        pool = self.pool
        return [pool[o:o + s] for o, s in zip(offset.tolist(), size.tolist())]


# ================================================================ the three streams


def _timestamps(ms: np.ndarray) -> pa.Array:
    return pa.array(ms * 1000, type=pa.timestamp("us", tz="UTC"))


def _table(stream: str, columns: dict[str, object]) -> pa.Table:
    types = {"timestamp": None, "long": pa.int64(), "string": pa.string()}
    arrays = []
    for name, dtype in SCHEMAS[stream]:
        value = columns[name]
        arrays.append(value if isinstance(value, pa.Array) else pa.array(value, type=types[dtype]))
    return pa.Table.from_arrays(arrays, names=[name for name, _ in SCHEMAS[stream]])


def _people(timeline: _Timeline, events: np.ndarray, seed: int, extra: _Extra) -> pa.Table:
    rng = _rng(seed, _KEY_PERSON)
    n = len(events)
    ids = _Timeline.last_person(events) + FIRST_PERSON_ID
    names = np.char.add(np.char.add(np.array(_FIRST_NAMES)[rng.integers(0, len(_FIRST_NAMES), n)], " "),
                        np.array(_LAST_NAMES)[rng.integers(0, len(_LAST_NAMES), n)]).tolist()
    emails = [f"{a}@{b}.com" for a, b in zip(_random_strings(rng, n, 7), _random_strings(rng, n, 5))]
    digits = rng.integers(0, 10_000, (n, 4))
    cards = [" ".join(f"{d:04d}" for d in row) for row in digits.tolist()]
    cities = np.array(_US_CITIES)[rng.integers(0, len(_US_CITIES), n)].tolist()
    states = np.array(_US_STATES)[rng.integers(0, len(_US_STATES), n)].tolist()
    size = 8 + np.array([len(a) + len(b) + len(c) + len(d) + len(e)
                         for a, b, c, d, e in zip(names, emails, cards, cities, states)])
    return _table("Person", {
        "ts": _timestamps(timeline.time_ms(events)), "id": ids, "name": names, "emailAddress": emails,
        "creditCard": cards, "city": cities, "state": states,
        "extra": extra.fill(rng, size, _AVG_PERSON_BYTES), "market": market_of(ids).tolist(),
    })


def _auctions(timeline: _Timeline, events: np.ndarray, seed: int, extra: _Extra, last_person: int) -> pa.Table:
    rng = _rng(seed, _KEY_AUCTION)
    n = len(events)
    ids = _Timeline.last_auction(events) + FIRST_AUCTION_ID
    hot = rng.integers(0, _HOT_SELLERS_RATIO, n) > 0
    seller = np.where(hot, (_Timeline.last_person(events) // _HOT_BATCH) * _HOT_BATCH, _recent_person(rng, events))
    seller = np.minimum(seller, last_person) + FIRST_PERSON_ID
    category = FIRST_CATEGORY_ID + rng.integers(0, _NUM_CATEGORIES, n)
    initial = _prices(rng, n)
    reserve = initial + _prices(rng, n)
    opened = timeline.time_ms(events)
    # nextAuctionLengthMs: on average the time until NUM_IN_FLIGHT_AUCTIONS more auctions exist.
    ahead = (_NUM_IN_FLIGHT_AUCTIONS * _TOTAL) // _AUCTION_PROPORTION
    horizon = timeline.time_ms(events + ahead) - opened
    length = 1 + (rng.random(n) * np.maximum(horizon * 2, 1)).astype(np.int64)
    items = _random_strings(rng, n, 20)
    descriptions = _random_strings(rng, n, 100)
    size = 8 + np.array([len(a) + len(b) for a, b in zip(items, descriptions)]) + 40
    return _table("Auction", {
        "ts": _timestamps(opened), "id": ids, "itemName": items, "description": descriptions,
        "initialBid": initial, "reserve": reserve, "expires": _timestamps(opened + length), "seller": seller,
        "category": category, "extra": extra.fill(rng, size, _AVG_AUCTION_BYTES),
        "market": market_of(seller).tolist(),
    })


def _channel_urls(seed: int) -> tuple[list[str], list[str]]:
    """The hot channels' URLs, and the cache of 10,000 other channels' (``BidGenerator``)."""
    rng = _rng(seed, _KEY_CHANNELS)

    def urls(n: int) -> list[str]:
        parts = [_random_strings(rng, n, 5, "_") for _ in range(3)]
        return [f"https://www.nexmark.com/{a}/{b}/{c}/item.htm?query=1" for a, b, c in zip(*parts)]

    hot = urls(len(_HOT_CHANNELS))
    cache = urls(_CHANNELS)
    tagged = (rng.integers(0, 10, _CHANNELS) > 0).tolist()
    # Java's abs(Integer.reverse(i)): the channel number's 32 bits reversed.
    reversed_ids = [abs(int(f"{i:032b}"[::-1], 2) - (1 << 32 if i & 1 else 0)) for i in range(_CHANNELS)]
    cache = [f"{url}&channel_id={r}" if t else url for url, t, r in zip(cache, tagged, reversed_ids)]
    return hot, cache


def _bids(timeline: _Timeline, events: np.ndarray, seed: int, extra: _Extra, last_person: int,
          auction_market: np.ndarray) -> pa.Table:
    rng = _rng(seed, _KEY_BID)
    n = len(events)
    last_auction = len(auction_market) - 1
    hot = rng.integers(0, _HOT_AUCTION_RATIO, n) > 0
    auction = np.where(hot, (_Timeline.last_auction(events) // _HOT_BATCH) * _HOT_BATCH,
                       _recent_auction(rng, events))
    auction = np.minimum(auction, last_auction)
    hot = rng.integers(0, _HOT_BIDDERS_RATIO, n) > 0
    bidder = np.where(hot, (_Timeline.last_person(events) // _HOT_BATCH) * _HOT_BATCH + 1, _recent_person(rng, events))
    bidder = np.minimum(bidder, last_person) + FIRST_PERSON_ID
    price = _prices(rng, n)
    hot_urls, cache = _channel_urls(seed)
    hot = rng.integers(0, 2, n) > 0
    which = np.where(hot, rng.integers(0, len(_HOT_CHANNELS), n), rng.integers(0, _CHANNELS, n) + len(_HOT_CHANNELS))
    channels = np.array([*_HOT_CHANNELS, *(f"channel-{i}" for i in range(_CHANNELS))], dtype=object)[which]
    urls = np.array([*hot_urls, *cache], dtype=object)[which]
    return _table("Bid", {
        "ts": _timestamps(timeline.time_ms(events)), "auction": auction + FIRST_AUCTION_ID, "bidder": bidder,
        "price": price, "channel": channels.tolist(), "url": urls.tolist(),
        "extra": extra.fill(rng, np.full(n, 32), _AVG_BID_BYTES), "market": auction_market[auction].tolist(),
    })


def nexmark_tables(events: int, *, seed: int = 7, rate: float = DEFAULT_RATE,
                   start: datetime | str = DEFAULT_START) -> dict[str, pa.Table]:
    """The first ``events`` NEXMark events as three Arrow tables, in event-time order.

    ``rate`` is events per second of event time (every ``1 / rate`` s one event, times
    in whole milliseconds as NEXMark's). Deterministic for a seed.

    >>> t = nexmark_tables(100, seed=1, rate=1000)
    >>> t["Person"].column("id").to_pylist(), str(t["Bid"].column("ts")[-1])
    ([1000, 1001], '2026-03-01 10:00:00.099000+00:00')
    """
    if events < 1:
        raise ValueError(f"events must be >= 1, got {events}")
    if not 0 < rate < math.inf:
        raise ValueError(f"rate must be a finite number > 0, got {rate}")
    timeline = _Timeline(events, float(rate), _start_ms(start))
    number = np.arange(events, dtype=np.int64)
    kind = number % _TOTAL
    person = number[kind < _PERSON_PROPORTION]
    auction = number[(kind >= _PERSON_PROPORTION) & (kind < _PERSON_PROPORTION + _AUCTION_PROPORTION)]
    bid = number[kind >= _PERSON_PROPORTION + _AUCTION_PROPORTION]
    extra = _Extra.of(seed)
    people = _people(timeline, person, seed, extra)
    auctions = _auctions(timeline, auction, seed, extra, last_person=len(person) - 1)
    markets = np.array(auctions.column("market").to_pylist(), dtype=object)
    bids = _bids(timeline, bid, seed, extra, last_person=len(person) - 1, auction_market=markets)
    return {"Person": people, "Auction": auctions, "Bid": bids}


# ================================================================ the punctuated Bid stream


def _micros(column: pa.ChunkedArray | pa.Array) -> np.ndarray:
    array = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    return array.cast(pa.int64()).to_numpy()


def _iso(column: pa.ChunkedArray | pa.Array) -> list[str]:
    """ISO-8601 texts as the other generators write them (``.ffffff`` only when not whole seconds)."""
    return _iso_texts(_micros(column)).tolist()


def punctuated_bids(bids: pa.Table, *, seed: int = 7, stream: str = "PunctuatedBid") -> list[dict]:
    """The bids of ``bids`` as a punctuated stream: each bidder's policy inline, ahead of their bids.

    A bidder's first bid is preceded by their policy (:data:`BIDDER_POLICIES`: two in three
    bidders "open", the others "private"), one SP per (attributes, roles) pair, ``sn`` 1..k,
    all with that bid's ``ts``; about one bidder in three switches to the other policy at a
    later bid with a later time (a new policy replaces the old one). Every bid names its
    policy (``sp_ts``, ``sp_csn``). Records are in event-time order, so each bidder's
    sub-stream is in arrival order.

    >>> records = punctuated_bids(nexmark_tables(60)["Bid"])
    >>> first = records[0]
    >>> first["kind"], first["bidder"], first["tuples"], first["roles"]
    ('sp', 1001, '1001', '{Bidder, Auditor}')
    """
    rng = _rng(seed, _KEY_POLICIES)
    columns = bids.drop_columns(["ts"]).to_pydict()  # times as texts below (Arrow's datetimes look up time zones)
    times = _iso(bids.column("ts"))
    micros = _micros(bids.column("ts"))
    bidder = np.asarray(columns["bidder"])
    names = [name for name, _ in SCHEMAS["Bid"] if name != "ts"]
    order = np.argsort(bidder, kind="stable")
    first_of = np.flatnonzero(np.r_[True, bidder[order][1:] != bidder[order][:-1]])
    # Per bidder: the policy it opens with and, for a third of them, the bid it switches at.
    opening = {}
    switch_at: dict[int, int] = {}
    for start, end in zip(first_of.tolist(), [*first_of[1:].tolist(), len(order)]):
        mine = order[start:end]
        who = int(bidder[mine[0]])
        opening[who] = "open" if rng.random() < 2 / 3 else "private"
        later = mine[micros[mine] > micros[mine[0]]]  # a new policy needs a newer ts than the first
        if len(later) and rng.random() < 1 / 3:
            switch_at[int(later[rng.integers(0, len(later))])] = who
    current: dict[int, tuple[str, str]] = {}  # bidder -> (policy name, its ts)
    records: list[dict] = []
    for i in range(bids.num_rows):
        who = int(bidder[i])
        if who not in current or switch_at.get(i) == who:
            name = opening[who] if who not in current else ("private" if current[who][0] == "open" else "open")
            current[who] = (name, times[i])
            for sn, (attributes, roles) in enumerate(BIDDER_POLICIES[name], start=1):
                records.append({"kind": "sp", "streams": stream, "tuples": str(who), "attributes": attributes,
                                "roles": roles, "sign": "+", "immutable": False, "grant": False, "ts": times[i],
                                "sn": sn, "bidder": who})
        name, policy_ts = current[who]
        record = {"ts": times[i], **{n: columns[n][i] for n in names}}
        record.update(sp_ts=policy_ts, sp_csn=len(BIDDER_POLICIES[name]))
        records.append(record)
    return records


# ================================================================ writing


@dataclass(frozen=True)
class NexmarkSummary:
    """What :func:`generate_nexmark` wrote: rows per stream and the files."""

    out_dir: Path
    fmt: str
    seed: int
    events: int
    rows: Mapping[str, int]
    paths: Mapping[str, Path]
    first_ts: str
    last_ts: str

    def describe(self) -> str:
        """One line for humans, e.g. for the command line."""
        counts = " ".join(f"{name}={count}" for name, count in self.rows.items())
        return (f"{counts} records from {self.events} events ({self.first_ts}..{self.last_ts}); seed {self.seed}; "
                f"{self.fmt} in {self.out_dir}")


#: Rows per Parquet row group: several per file, so Spark can split a stream over its cores.
ROW_GROUP = 64 * 1024


def generate_nexmark(out_dir: str | Path, *, events: int, fmt: Format = "parquet", seed: int = 7,
                     rate: float = DEFAULT_RATE, start: datetime | str = DEFAULT_START,
                     punctuated: bool = True) -> NexmarkSummary:
    """Write ``out_dir/<stream>/part-00000.<fmt>`` for Person, Auction and Bid, and with
    ``punctuated`` ``out_dir/PunctuatedBid/part-00000.jsonl`` (JSON lines whatever ``fmt``:
    punctuated streams are read line by line). Earlier ``part-*`` files there are replaced.

    >>> import tempfile
    >>> s = generate_nexmark(tempfile.mkdtemp(), events=500, fmt="jsonl")
    >>> dict(s.rows)
    {'Person': 10, 'Auction': 30, 'Bid': 460, 'PunctuatedBid': 480}
    """
    if fmt not in ("jsonl", "parquet"):
        raise ValueError(f"fmt must be jsonl or parquet, got {fmt!r}")
    tables = nexmark_tables(events, seed=seed, rate=rate, start=start)
    root = Path(out_dir)
    paths: dict[str, Path] = {}
    rows: dict[str, int] = {}
    for name, table in tables.items():
        folder = _fresh_folder(root / name)
        path = folder / f"part-00000.{fmt}"
        writer = partial(pq.write_table, table, row_group_size=ROW_GROUP) if fmt == "parquet" else \
            partial(_write_jsonl, table)
        _write_atomically(path, writer)
        paths[name], rows[name] = path, table.num_rows
    if punctuated:
        records = punctuated_bids(tables["Bid"], seed=seed)
        paths["PunctuatedBid"] = write_jsonl(records, _fresh_folder(root / "PunctuatedBid") / "part-00000.jsonl")
        rows["PunctuatedBid"] = len(records)
    micros = np.concatenate([_micros(tables[n].column("ts")) for n in STREAMS])
    first, last = _iso_texts(np.array([micros.min(), micros.max()])).tolist()
    return NexmarkSummary(root, fmt, seed, events, MappingProxyType(rows), MappingProxyType(paths), first, last)


def _fresh_folder(folder: Path) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    for old in folder.glob("part-*"):  # a longer earlier run's parts would be read as part of this one
        if old.suffix in (".jsonl", ".parquet"):
            old.unlink()
    return folder
