"""Security punctuations, property-tested against an independent oracle (``tests/sp_oracle.py``).

Random punctuated streams over small domains -- lost, duplicated, reordered, stale and late
SPs, tuples with right / wrong / missing ``sp_ts``/``sp_csn``, policy changes mid-stream,
several providers, server policies, random role hierarchies and users -- are replayed on
Spark and the rows must equal, as multisets, the rows the oracle computes from the
contract: the Security Shield's rules, attribute access under the complete policy, server
policy combination and SCJoin pairing.  Before the multiset comparison every delivered
value is checked against the oracle's access decision, so a leak is named precisely.
"""

from __future__ import annotations

import json
import random
import tempfile
from collections import Counter
from dataclasses import dataclass
from datetime import datetime, timedelta, timezone
from pathlib import Path

import pytest
from hypothesis import HealthCheck, Phase, event, given, settings
from hypothesis import strategies as st

import sp_oracle as O
from streamwarden import api
from streamwarden.catalog.loader import load_catalog_text

pytestmark = pytest.mark.spark

BASE = datetime(2026, 3, 1, 10, 0, tzinfo=timezone.utc)
ROLES = ("A", "B", "C")
STRATEGIES = ("adaptive", "probe-and-filter", "filter-and-probe")
# ts is the tuple's timestamp (the paper's t = [sid, tid, A, ts, ts.csn_sp]), not one of its
# attributes A: a delivered tuple always keeps it, as in role-based masking, because windows,
# joins and the watermark need it (docs/semantics.md). test_ts_is_kept_on_every_delivered_tuple.
TS_KEPT = True


def examples(n: int, *, shrink: bool = False):
    """Derandomized, no shrinking by default: every shrink step is a Spark job (~1-5 s) and
    shrinking a failure easily takes many minutes.  Pass shrink=True while debugging. The counts
    below are what make test's 20 minutes on 2 cores allow (the first example is the simplest)."""
    phases = list(Phase) if shrink else [Phase.explicit, Phase.generate]
    return settings(max_examples=n, deadline=None, derandomize=True, report_multiple_bugs=False, phases=phases,
                    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow,
                                           HealthCheck.data_too_large, HealthCheck.large_base_example])


def iso(seconds: int) -> str:
    return (BASE + timedelta(seconds=seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")


# -- streams and catalogs ------------------------------------------------------------------------
@dataclass(frozen=True)
class StreamConf:
    name: str
    schema: tuple[tuple[str, str], ...]  # ts first
    key: str
    keys: tuple  # the key's domain
    punctuated_by: str | None = None
    server: tuple[dict, ...] = ()
    combine: str | None = None

    @property
    def attributes(self) -> tuple[str, ...]:
        return tuple(a for a, _ in self.schema)

    def yaml(self) -> str:
        fields = [f"schema: {{{', '.join(f'{a}: {t}' for a, t in self.schema)}}}", f"key: {self.key}"]
        if self.punctuated_by:
            fields.append(f"punctuated_by: {self.punctuated_by}")
        if self.server:
            entries = ", ".join("{" + ", ".join(f"{k}: {json.dumps(v)}" for k, v in e.items()) + "}"
                                for e in self.server)
            fields.append(f"server_policies: [{entries}]")
        if self.combine:
            fields.append(f"combine: {self.combine}")
        return f"  {self.name}: {{{', '.join(fields)}}}"

    def oracle(self) -> O.Stream:
        return O.Stream(self.name, self.attributes, self.key, self.punctuated_by,
                        tuple(O.server_policy(e, i) for i, e in enumerate(self.server)), self.combine or "intersect")


@dataclass(frozen=True)
class World:
    streams: tuple[StreamConf, ...]
    inherits: tuple[tuple[str, tuple[str, ...]], ...]
    user_roles: tuple[str, ...]

    def yaml(self) -> str:
        streams = "\n".join(s.yaml() for s in self.streams)
        roles = "\n".join(f"  {r}: {{inherits: [{', '.join(i)}]}}" if i else f"  {r}: {{}}" for r, i in self.inherits)
        return f"streams:\n{streams}\nroles:\n{roles}\nusers:\n  u: {{roles: [{', '.join(self.user_roles)}]}}\n"

    def oracle(self) -> O.Catalog:
        return O.Catalog({s.name: s.oracle() for s in self.streams}, dict(self.inherits), {"u": self.user_roles})


@st.composite
def hierarchies(draw) -> tuple[tuple[tuple[str, tuple[str, ...]], ...], tuple[str, ...]]:
    """Roles A, B, C with a random acyclic inheritance (B may inherit A, C may inherit A or B) and a user."""
    edges = draw(st.sets(st.sampled_from([("B", "A"), ("C", "A"), ("C", "B")])))
    inherits = tuple((r, tuple(sorted(p for c, p in edges if c == r))) for r in ROLES)
    user = tuple(sorted(draw(st.sets(st.sampled_from(ROLES), min_size=1, max_size=2))))
    return inherits, user


INT_KEYS = (1, 2, 3, 4, 5, 6)
TEXT_KEYS = ("1", "2", "5", "10", "a", "b")  # numbers and text in one string column


@st.composite
def stream_confs(draw, name: str = "S", *, providers: bool = False, server: str | None = None,
                 extra: tuple[tuple[str, str], ...] = ()) -> StreamConf:
    """server: None (no server policies) or the combine mode ("intersect" / "union")."""
    text_key = draw(st.sampled_from([False, False, True])) and not providers
    schema = [("ts", "timestamp"), ("k", "string" if text_key else "int"), ("a", "int")]
    if draw(st.booleans()):
        schema.append(("b", "int"))
    schema += list(extra)
    punctuated_by = None
    if providers:
        punctuated_by = draw(st.sampled_from(["k", "dev"]))
        if punctuated_by == "dev":
            schema.append(("dev", "int"))
    entries: tuple[dict, ...] = ()
    combine = None
    if server:
        attrs = [a for a, _ in schema]
        keys = TEXT_KEYS if text_key else INT_KEYS
        entries = tuple(draw(st.lists(server_entries(name, attrs, keys), min_size=1, max_size=3)))
        combine = server
    return StreamConf(name, tuple(schema), "k", TEXT_KEYS if text_key else INT_KEYS, punctuated_by, entries, combine)


# -- patterns ----------------------------------------------------------------------------------------
def stream_patterns(name: str):
    return st.sampled_from([name, name, name, name, "*", "*", f"{{{name}, Other}}", "Other", "{}", f"[{name[0]}, Z]"])


def key_patterns(keys: tuple):
    """Tuple patterns over the key's domain.  A range's two bounds are both numbers or both
    text (a mixed range is test_mixed_range_bounds_compare_each_side_on_its_own)."""
    texts = [str(k) for k in keys]
    bounds = texts + (["0", "2.5", "10", "12", "7"] if isinstance(keys[0], int) else ["9", "100", "3", "c"])
    numbers = [b for b in bounds if O.as_number(b) is not None]
    words = [b for b in bounds if O.as_number(b) is None]
    single = st.sampled_from(texts + (["7", "05", "3.0"] if isinstance(keys[0], int) else ["c", "10.0"]))
    same_kind = st.sampled_from([numbers, words] if words else [numbers]).flatmap(
        lambda kind: st.tuples(st.sampled_from(kind), st.sampled_from(kind)))
    ordered = same_kind.map(lambda p: tuple(sorted(p, key=lambda v: (O.as_number(v) or 0, v))))
    return st.one_of(
        st.just("*"), st.just("*"), single, st.just("{}"),
        ordered.map(lambda p: f"({p[0]}, {p[1]})"), ordered.map(lambda p: f"[{p[0]}, {p[1]}]"),
        st.lists(single, min_size=1, max_size=3, unique=True).map(lambda v: "{" + ", ".join(v) + "}"),
    )


def attribute_patterns(attrs: list[str]):
    single = st.sampled_from(attrs)
    return st.one_of(
        st.just("*"), st.just("*"), single, single, st.just("{}"), st.just("[a, b]"),
        st.lists(single, min_size=1, max_size=3, unique=True).map(lambda v: "{" + ", ".join(v) + "}"),
    )


def role_patterns():
    single = st.sampled_from(ROLES)
    return st.one_of(
        st.just("*"), st.just("*"), single, single, single, st.just("{}"), st.just("[A, B]"),
        st.lists(single, min_size=1, max_size=2, unique=True).map(lambda v: "{" + ", ".join(v) + "}"),
    )


def server_entries(name: str, attrs: list[str], keys: tuple):
    return st.fixed_dictionaries({
        "streams": stream_patterns(name), "tuples": key_patterns(keys), "attributes": attribute_patterns(attrs),
        "roles": role_patterns(), "sign": st.sampled_from(["+", "+", "+", "-"]),
    })


# -- punctuated streams --------------------------------------------------------------------------
@st.composite
def scripts(draw, conf: StreamConf, provider=None, *, immutable_share: float = 0.0, span: int = 5,
            clean: bool = False, generous: bool = False) -> list[dict]:
    """One provider's records in arrival order: policies (with distortions) and tuple runs.

    clean: no distortion at all (every tuple is governed by a complete policy);
    generous: each policy's SP 1 grants broadly (any role, any tuple), so joins find pairs."""
    attrs = [a for a in conf.attributes]
    records: list[dict] = []
    clock = draw(st.integers(0, 3))
    sent: list[dict] = []  # every SP sent so far

    def sp(ts_: int, sn: int) -> dict:
        broad = generous and sn == 1
        rec = {"kind": "sp", "streams": conf.name if broad else draw(stream_patterns(conf.name)),
               "tuples": "*" if broad else draw(key_patterns(conf.keys)),
               "attributes": draw(st.sampled_from(["*", "*", "{k, x}", "{x, a}", "{ts, k, a}", "{ts, a}"]) if broad
                                  else attribute_patterns(attrs)),
               "roles": "*" if broad else draw(role_patterns()),
               "sign": "+" if broad else draw(st.sampled_from(["+", "+", "+", "-"])),
               "immutable": bool(immutable_share) and draw(st.integers(0, 99)) < immutable_share * 100,
               "grant": False, "ts": iso(ts_), "sn": sn}
        if conf.punctuated_by:
            rec[conf.punctuated_by] = provider
        return rec

    def tuple_(declared: tuple[int, int] | None, exact: bool = False) -> dict:
        """A tuple whose sp_ts/sp_csn are ``declared`` (exact) or, at random, wrong or missing."""
        nonlocal clock
        clock += draw(st.integers(0, span))
        rec = {"ts": iso(clock)}
        for a, _ in conf.schema[1:]:
            if a == conf.key:
                rec[a] = draw(st.sampled_from(conf.keys))
            else:
                rec[a] = draw(st.integers(0, 9))
        if conf.punctuated_by:
            rec[conf.punctuated_by] = provider
        wrong = ["wrong csn", "wrong ts", "missing", "missing csn"]
        fields = "right" if clean or exact else draw(st.sampled_from(["right"] * 8 + wrong))
        if declared is None:
            declared = (clock, 1)
            fields = draw(st.sampled_from(["right", "missing"]))
        ts_, csn = declared
        if fields == "wrong csn":
            csn = draw(st.sampled_from([c for c in (csn - 1, csn + 1, 0, 1, 2) if c != csn and c >= 0]))
        elif fields == "wrong ts":
            ts_ = draw(st.sampled_from([ts_ - 1, ts_ + 1] + [_secs(s["ts"]) for s in sent[:2]]))
        if fields != "missing":
            rec["sp_ts"] = iso(ts_)
        if fields not in ("missing", "missing csn"):
            rec["sp_csn"] = csn
        return rec

    declared = None
    for _ in range(0 if clean else draw(st.integers(0, 2))):  # tuples before any policy
        records.append(tuple_(None))
    for _ in range(draw(st.integers(3, 6))):
        clock += draw(st.integers(1, span))
        k = draw(st.integers(1, 3))
        batch = [sp(clock, sn) for sn in range(1, k + 1)]
        distortion = "none" if clean else draw(st.sampled_from([
            "none", "none", "lose", "lose", "headless", "headless", "duplicate", "reorder", "stale", "late", "late",
            "replace", "resend"]))
        claimed = k  # the csn the provider's tuples carry
        if distortion == "lose":
            lost = draw(st.integers(0, k - 1))
            batch.pop(lost)
            if lost == 0 and draw(st.booleans()):
                claimed = 0  # SP 1 never came and the tuples say csn 0: still denied
        elif distortion == "headless" and k > 1:  # SP 1 lost, the tuples say csn 0: denied, policy kept
            batch.pop(0)
            claimed = 0
        elif distortion == "duplicate":
            batch.insert(draw(st.integers(0, k)), dict(batch[draw(st.integers(0, k - 1))]))
        elif distortion == "reorder" and k > 1:
            i = draw(st.integers(0, k - 2))
            batch[i], batch[i + 1] = batch[i + 1], batch[i]
        elif distortion == "stale" and sent:
            batch.insert(draw(st.integers(0, k)), dict(draw(st.sampled_from(sent))))
        elif distortion == "replace":
            batch.append(sp(clock, draw(st.integers(1, k))))
        records += batch
        sent += batch
        declared = (clock, claimed)
        run = draw(st.integers(2, 8))
        for i in range(run):
            records.append(tuple_(declared))
            if distortion == "late" and i == 0:  # the provider extends its policy after tuples began
                extra = sp(declared[0], k + 1)
                records.append(extra)
                sent.append(extra)
                if draw(st.booleans()):  # ... and its next tuples say so
                    declared = (declared[0], claimed + 1)
            if distortion == "resend" and i == run // 2:
                # a tuple the shield denies (dropping the policy), then the provider re-sends its
                # whole policy: same ts as the dropped one, so it starts a policy again
                records.append(tuple_((declared[0], declared[1] + 1), exact=True))
                records += [dict(r) for r in batch]
        if not clean and sent and draw(st.integers(0, 2)) == 0:  # a stale SP after the run
            replay = draw(st.booleans())
            firsts = [r for r in sent if r["sn"] == 1]
            stale = dict(draw(st.sampled_from(firsts if replay and firsts else sent)))
            if replay:  # a denied tuple drops the current policy first
                records.append(tuple_((declared[0], declared[1] + 1), exact=True))
            records.append(stale)
            if replay:  # then a tuple claims the old policy the stale SP belonged to
                records.append(tuple_((_secs(stale["ts"]), int(stale["sn"] == 1)), exact=True))
    return records


def _secs(text: str) -> int:
    return int((O.parse_ts(text) - BASE).total_seconds())


@st.composite
def merged(draw, conf: StreamConf, providers: list, **kw) -> list[dict]:
    """Each provider's script, interleaved at random (each provider keeps its own order)."""
    lanes = {p: draw(scripts(conf, p, **kw)) for p in providers}
    order = draw(st.permutations([p for p, recs in lanes.items() for _ in recs]))
    cursors = Counter()
    out = []
    for p in order:
        out.append(lanes[p][cursors[p]])
        cursors[p] += 1
    return out


LAYOUTS = ["one file", "one file", "files", "seq", "partial seq"]


def write_inputs(root: Path, name: str, records: list[dict], layout: str, rnd) -> str:
    """Write records so that their arrival order is the list order; returns the input path."""
    folder = root / name
    folder.mkdir()
    lines = [dict(r) for r in records]
    if layout == "one file" or len(lines) < 3:
        (folder / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
        return str(folder / "in.jsonl")
    if layout == "files":
        cuts = sorted(rnd.sample(range(1, len(lines)), min(2, len(lines) - 1)))
        parts = [lines[i:j] for i, j in zip([0] + cuts, cuts + [len(lines)])]
        for letter, part in zip("abc", parts):
            (folder / f"{letter}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in part))
        return str(folder)
    if layout == "seq":  # explicit seq on every record, lines shuffled
        seqs = sorted(rnd.sample(range(1, 10 * len(lines)), len(lines)))
        for r, s in zip(lines, seqs):
            r["seq"] = s
        rnd.shuffle(lines)
        (folder / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
        return str(folder / "in.jsonl")
    # partial seq: a misleading seq on some records only; line order rules
    for r in lines[1:]:
        if rnd.random() < 0.5:
            r["seq"] = rnd.randint(1, 5)
    (folder / "in.jsonl").write_text("".join(json.dumps(r) + "\n" for r in lines))
    return str(folder / "in.jsonl")


# -- running and comparing ---------------------------------------------------------------------------
def run(world: World, query: str, data: dict[str, tuple[list[dict], str]], spark, seed: int,
        strategy: str = "adaptive") -> list[dict]:
    rnd = random.Random(seed)
    catalog = load_catalog_text(world.yaml(), "sp-random.yaml")
    with tempfile.TemporaryDirectory() as tmp:
        inputs = {name: write_inputs(Path(tmp), name, recs, layout, rnd) for name, (recs, layout) in data.items()}
        return api.replay(catalog, "u", query, inputs, spark=spark, join_strategy=strategy)


def normalize(rows: list[dict]) -> list[str]:
    return sorted(json.dumps({k: v for k, v in r.items() if k not in ("_policies", "_graph")}, sort_keys=True)
                  for r in rows)


def record_events(world: World, stream: str, records: list[dict]) -> None:
    conf = world.oracle().streams[stream]
    roles = O.effective_roles(world.oracle(), "u")
    governed, outcomes, actions = O.shield_trace(conf, records)
    for outcome in set(outcomes):
        event(f"{stream}: tuple {outcome}")
    for action in set(actions):
        event(f"{stream}: SP {action}")
    views = [O.visible(conf, t, p, roles, ts_kept=TS_KEPT) for t, p in governed if p is not None]
    if any(v is None for v in views):
        event(f"{stream}: governed tuple not delivered (no attribute but ts accessible)")
    if any(v is not None and any(x is None for x in v.values()) for v in views):
        event(f"{stream}: delivered tuple with masked attributes")
    if any(v is not None and all(x is not None for x in v.values()) for v in views):
        event(f"{stream}: delivered tuple fully visible")


def assert_no_leak(actual: list[dict], sides: list[tuple[str, list[tuple[dict, dict | None]]]]) -> None:
    """Every non-NULL value the engine delivers must be accessible in the oracle's view of a
    tuple it could come from.  sides: [(column prefix, [(original tuple, oracle view)])];
    a select has one side with prefix "", a join two ("a", "b")."""
    for row in actual:
        for prefix, pairs in sides:
            cols = {k[len(prefix):]: v for k, v in row.items() if k.startswith(prefix) and not k.startswith("_")}
            candidates = [(t, v) for t, v in pairs
                          if all(val is None or _same(val, t.get(attr)) for attr, val in cols.items())]
            if any(v is not None and all(val is None or v.get(attr) is not None for attr, val in cols.items())
                   for _, v in candidates):
                continue
            detail = "; ".join(
                f"tuple {t}: " + ("oracle denies the whole tuple" if v is None else
                                  "oracle masks " + ", ".join(a for a, val in cols.items()
                                                              if val is not None and v.get(a) is None))
                for t, v in candidates) or "no input tuple has these values"
            raise AssertionError(f"engine row {row} reveals what the oracle denies ({prefix or 'select'}): {detail}")


def _same(value, original) -> bool:
    return value == original or (original is not None and str(value) == str(original))


def check(actual: list[dict], expected: list[dict], sides, label: str = "") -> None:
    event("oracle delivers rows" if expected else "oracle delivers nothing")
    assert_no_leak(actual, sides)
    assert normalize(actual) == normalize(expected), label


def pairs_of(world: World, stream: str, records: list[dict]):
    return [(t, v) for t, v, _ in O.views(world.oracle(), "u", stream, records, ts_kept=TS_KEPT)]


# -- 1. shield + access ---------------------------------------------------------------------------
@st.composite
def single_stream_cases(draw, *, server: str | None = None, providers: bool = False, clean: bool = False):
    """(world, records in arrival order, input layout, seed) for one stream S."""
    roles = draw(hierarchies())
    conf = draw(stream_confs(providers=providers, server=server))
    world = World((conf,), *roles)
    kw = {"immutable_share": 0.3 if server else 0.1, "clean": clean}
    if providers:
        ids = [1, 2, 3] if conf.punctuated_by == "dev" else list(draw(st.sets(st.sampled_from(conf.keys),
                                                                           min_size=2, max_size=3)))
        records = draw(merged(conf, sorted(ids), **kw))
    else:
        records = draw(scripts(conf, **kw))
        for _ in range(draw(st.integers(1, 3))):  # another stretch: more policies mid-stream
            more = draw(scripts(conf, **kw))
            shift = _last_time(records) + 1
            records += [_shifted(r, shift) for r in more]
    layout = draw(st.sampled_from(LAYOUTS))
    return world, records, layout, draw(st.integers(0, 2**16))


def _last_time(records: list[dict]) -> int:
    return max([_secs(r["ts"]) for r in records] + [0])


def _shifted(record: dict, shift: int) -> dict:
    out = dict(record)
    for f in ("ts", "sp_ts"):
        if out.get(f) is not None:
            out[f] = iso(_secs(out[f]) + shift)
    return out


def _select_check(spark, world, records, layout, seed, where=None) -> None:
    query = "SELECT * FROM S" + (f" WHERE {where[0]} {where[1]} {where[2]}" if where else "")
    record_events(world, "S", records)
    event(f"layout: {layout}")
    expected = O.select_rows(world.oracle(), "u", "S", records, where, ts_kept=TS_KEPT)
    actual = run(world, query, {"S": (records, layout)}, spark, seed)
    check(actual, expected, [("", pairs_of(world, "S", records))])


@examples(10)
@given(case=single_stream_cases())
def test_shield_and_access_match_oracle(spark, case) -> None:
    _select_check(spark, *case)


@examples(8)
@given(case=single_stream_cases(), data=st.data())
def test_selection_on_masked_attributes_never_holds(spark, case, data) -> None:
    world = case[0]
    delivered = O.select_rows(world.oracle(), "u", "S", case[1], ts_kept=TS_KEPT)
    numeric = [a for a, t in world.streams[0].schema if t == "int"]
    masked = [a for a in numeric if any(r[a] is None for r in delivered)]
    attr = data.draw(st.sampled_from(masked or numeric), label="attr")  # prefer an attribute some row masks
    c = data.draw(st.integers(0, 8), label="c")
    if any(r[attr] is None for r in delivered):
        event("a delivered tuple has the predicate's attribute masked")
    if any(r[attr] is not None and r[attr] > c for r in delivered):
        event("the predicate holds on some delivered tuple")
    _select_check(spark, *case, where=(attr, ">", c))


# -- 2. providers -----------------------------------------------------------------------------------
@examples(8)
@given(case=single_stream_cases(providers=True))
def test_providers_have_their_own_shields(spark, case) -> None:
    event(f"punctuated_by {case[0].streams[0].punctuated_by}")
    _select_check(spark, *case)


# -- 3. server policies -----------------------------------------------------------------------------
def _server_events(world, records) -> None:
    governed, _ = O.shield_records(world.oracle().streams["S"], records)
    if any(p and any(sp.immutable for sp in p) for _, p in governed):
        event("an immutable policy governs some tuple")
    if any(p and not any(sp.immutable for sp in p) for _, p in governed):
        event("a mutable policy governs some tuple")


@examples(7)
@given(case=single_stream_cases(server="intersect"))
def test_server_policies_intersect_and_immutable(spark, case) -> None:
    _server_events(case[0], case[1])
    _select_check(spark, *case)


@examples(6)
@given(case=single_stream_cases(server="union", clean=True))
def test_server_policies_union_over_governed_tuples(spark, case) -> None:
    """union over streams whose every tuple has its complete policy."""
    _server_events(case[0], case[1])
    _select_check(spark, *case)


@examples(4)
@given(case=single_stream_cases(server="union"))
def test_server_policies_union(spark, case) -> None:
    _server_events(case[0], case[1])
    _select_check(spark, *case)


# -- 4. SCJoin --------------------------------------------------------------------------------------
ITEMS = [("A.ts", "ats"), ("A.k", "ak"), ("A.x", "ax"), ("A.a", "aa"),
         ("B.ts", "bts"), ("B.k", "bk"), ("B.x", "bx"), ("B.a", "ba")]


@st.composite
def join_cases(draw):
    roles = draw(hierarchies())
    confs = tuple(StreamConf(name, (("ts", "timestamp"), ("k", "int"), ("x", "int"), ("a", "int")), "k", INT_KEYS)
                  for name in ("A", "B"))
    world = World(confs, *roles)
    # one side often clean (every tuple governed), so that pairs are frequent
    data = {conf.name: [_small_x(r) for r in draw(scripts(conf, span=2, generous=True, clean=draw(st.booleans())))]
            for conf in confs}
    on = draw(st.sampled_from(["x", "x", "k"]))
    wa, wb = draw(st.sampled_from([0, 3, 10])), draw(st.sampled_from([0, 3, 10]))
    layouts = {n: draw(st.sampled_from(LAYOUTS)) for n in data}
    return world, data, on, wa, wb, layouts, draw(st.integers(0, 2**16))


def _small_x(record: dict) -> dict:
    return {**record, "x": record["x"] % 3} if "x" in record else record


def _join_events(world, data, on, wa, wb, expected) -> None:
    event(f"join on {on}")
    event("oracle joins some pair" if expected else "oracle joins nothing")
    if any(v is None for r in expected for v in r.values()):
        event("joined pair with masked attributes")
    a_pairs, b_pairs = pairs_of(world, "A", data["A"]), pairs_of(world, "B", data["B"])
    for a, va in a_pairs:
        for b, vb in b_pairs:
            if va is None or vb is None or a[on] != b[on]:
                continue
            if (va[on] is None or vb[on] is None) and O.parse_ts(a["ts"]) - timedelta(seconds=wb) <= \
                    O.parse_ts(b["ts"]) <= O.parse_ts(a["ts"]) + timedelta(seconds=wa):
                event("a delivered pair is denied because its join attribute is masked")
                return


@examples(3)
@given(case=join_cases())
def test_scjoin_strategies_agree_with_oracle(spark, case) -> None:
    world, data, on, wa, wb, layouts, seed = case
    window = lambda w: "[NOW]" if w == 0 else f"[RANGE {w} seconds]"  # noqa: E731
    query = (f"SELECT {', '.join(f'{c} AS {o}' for c, o in ITEMS)} FROM A {window(wa)}, B {window(wb)} "
             f"WHERE A.{on} = B.{on}")
    for name, records in data.items():
        record_events(world, name, records)
    expected = O.join_rows(world.oracle(), "u", "A", data["A"], float(wa), "B", data["B"], float(wb), (on, on), ITEMS,
                           ts_kept=TS_KEPT)
    _join_events(world, data, on, wa, wb, expected)
    sides = [("a", pairs_of(world, "A", data["A"])), ("b", pairs_of(world, "B", data["B"]))]
    results = {strategy: run(world, query, {n: (r, layouts[n]) for n, r in data.items()}, spark, seed, strategy)
               for strategy in STRATEGIES}
    for strategy, actual in results.items():
        check(actual, expected, sides, strategy)
    assert normalize(results["adaptive"]) == normalize(results["probe-and-filter"]) == normalize(
        results["filter-and-probe"])


# -- engine disagreements, minimal -------------------------------------------------------------------
MINI = """streams:
  S: {schema: {ts: timestamp, k: int, a: int}, key: k%s}
roles: {A: {}}
users: {u: {roles: [A]}}
"""
MINI_SP = {"kind": "sp", "streams": "S", "tuples": "*", "attributes": "*", "roles": "A", "sign": "+",
           "immutable": False, "grant": False, "ts": iso(0), "sn": 1}


def _mini(spark, tmp_path, options: str, records: list[dict]) -> list[dict]:
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    rows = api.replay(load_catalog_text(MINI % options), "u", "SELECT * FROM S", {"S": str(path)}, spark=spark)
    return [{k: v for k, v in r.items() if not k.startswith("_")} for r in rows]


def test_union_server_policy_cannot_grant_a_denied_tuple(spark, tmp_path) -> None:
    options = (', server_policies: [{streams: S, tuples: "*", attributes: "*", roles: A, sign: "+"}], '
               "combine: union")
    tuple_ = {"ts": iso(1), "k": 1, "a": 7}
    cases = {
        "no policy yet": [{**tuple_, "sp_ts": iso(0), "sp_csn": 1}],
        "no sp_ts/sp_csn": [MINI_SP, tuple_],
        "mismatch": [MINI_SP, {**tuple_, "sp_ts": iso(0), "sp_csn": 2}],
        "csn 0": [{**MINI_SP, "sn": 2}, {**tuple_, "sp_ts": iso(0), "sp_csn": 0}],
    }
    assert {name: _mini(spark, tmp_path, options, records) for name, records in cases.items()} == {
        name: [] for name in cases}


def test_ts_is_kept_on_every_delivered_tuple(spark, tmp_path) -> None:
    rows = _mini(spark, tmp_path, "", [{**MINI_SP, "attributes": "a"},
                                       {"ts": iso(1), "k": 1, "a": 7, "sp_ts": iso(0), "sp_csn": 1}])
    assert rows == [{"ts": iso(1), "k": None, "a": 7}]


def test_mixed_range_bounds_compare_each_side_on_its_own(spark, tmp_path) -> None:
    rows = _mini(spark, tmp_path, "", [{**MINI_SP, "tuples": "(5, a)"},
                                       {"ts": iso(1), "k": 10, "a": 7, "sp_ts": iso(0), "sp_csn": 1}])
    assert rows == [{"ts": iso(1), "k": 10, "a": 7}]
