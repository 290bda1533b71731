"""Load and validate a catalog YAML file.

Every problem is reported as one :class:`CatalogError` (or a syntax/bind error inside a
policy expression) naming the file, line and column. A catalog that does not load gives
nobody access to anything: there is no partial catalog.

    >>> cat = load_catalog_text('''
    ... streams:
    ...   Position: {schema: {ts: timestamp, SID: int, Pos: double, Platoon: string}}
    ... roles: {Doctor: {}}
    ... users: {paul: {roles: [Doctor], profile: {Platoon: X}}}
    ... policies:
    ...   - {id: p1, subject: Doctor, streams: [Position], attributes: [Pos, SID],
    ...      where: "Position.Platoon = self.Platoon", privilege: read}
    ... ''')
    >>> [p.id for p in cat.policies_for("paul")]
    ['p1']
"""

from __future__ import annotations

import math
import re
from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any, NoReturn

import yaml

from streamwarden.catalog.lattice import Lattice, LevelError, LevelSource
from streamwarden.catalog.model import PRIVILEGES, TYPES, Action, Catalog, Policy, Role, StreamDef, TimeBound, User
from streamwarden.catalog.punctuations import SP_FIELDS, sp_from_record
from streamwarden.catalog.sources import BOOTSTRAP, FORMATS, RESERVED_OPTIONS, STARTING, TIMES, TOPIC, KafkaSource
from streamwarden.errors import CatalogError, SourceError, SourceText, Span, StreamwardenError
from streamwarden.records import text_problem
from streamwarden.language import ast
from streamwarden.language.expressions import Scope, bind_expression, parse_timestamp
from streamwarden.language.parser import (MAX_DURATION_SECONDS, MAX_WINDOWS_PER_TUPLE, MIN_DURATION_SECONDS,
                                          parse_duration, parse_expression, seconds_text, windows_per_tuple)
from streamwarden.names import check_catalog_names

Path_ = tuple[object, ...]


#: Names a punctuated stream's records give a meaning of their own (besides ``ts``): SP fields,
#: the policy a tuple names, the arrival stamp.
_SP_RECORD_FIELDS = frozenset(SP_FIELDS) - {"ts"} | {"sp_ts", "sp_csn", "seq"}


def level_text(raw: Any) -> str:
    """A level as written: ``"[1, ⊥]"``, or unquoted YAML ``[1, ⊥]`` (which YAML reads as a list)."""
    return "[" + ", ".join(str(v) for v in raw) + "]" if isinstance(raw, list) else str(raw)


def _finite_number(value: Any) -> bool:
    """An int or float that a double holds (not a bool, NaN, an infinity or a 400-digit integer)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    try:
        return math.isfinite(float(value))
    except OverflowError:
        return False


def _shown(value: Any) -> str:
    """A value for an error message: short, whatever it is."""
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


_STREAM_KEYS = {"schema", "key", "punctuated_by", "server_policies", "combine", "level", "source"}
_POLICY_KEYS = {"id", "subject", "streams", "attributes", "where", "privilege", "time", "window",
                "group_by", "aggregate_args", "min_group"}


# -- Bounds on what a YAML file may make us do ---------------------------------------------
# A YAML file is small on disk but not necessarily when read: aliases share nodes, so nine
# levels of ten aliases each ("billion laughs") stand for 10^9 nodes, and an alias inside
# its own anchor is a cycle. Catalogs and query files are refused, with the position of
# the offending alias, before anything walks them expanded.
MAX_FILE_BYTES = 10 * 1024 * 1024  # 10 MiB: a catalog of thousands of policies is a few hundred KiB
MAX_YAML_NODES = 100_000  # nodes of the document with every alias expanded
MAX_YAML_DEPTH = 64  # nesting of mappings and lists, aliases expanded


def read_text_file(path: str | Path, what: str) -> str:
    """The text of a UTF-8 file of at most :data:`MAX_FILE_BYTES`, or a :class:`CatalogError`
    naming the file (and, for invalid UTF-8, the line and column of the first bad byte)."""
    path = Path(path)
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_FILE_BYTES + 1)  # never more, whatever the file (or device) holds
    except OSError as exc:
        raise CatalogError(f"cannot read {what} {path}: {exc.strerror or exc}") from None
    if len(data) > MAX_FILE_BYTES:
        raise CatalogError(f"cannot read {what} {path}: it is larger than {MAX_FILE_BYTES // 2**20} MiB")
    return decode_utf8(data, str(path))


def decode_utf8(data: bytes, name: str) -> str:
    r"""``data`` decoded as UTF-8, or a :class:`CatalogError` at the first byte that is not UTF-8.

    >>> decode_utf8(b"a: 1\nb: \xff", "c.yaml")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    streamwarden.errors.CatalogError: c.yaml:2:4: invalid UTF-8 (byte 0xff): save the file as UTF-8
    ...
    """
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        good = data[: exc.start].decode("utf-8")  # everything before the first bad byte is valid
        text = good + data[exc.start :].decode("utf-8", errors="replace")
        raise CatalogError(f"invalid UTF-8 (byte 0x{data[exc.start]:02x}): save the file as UTF-8",
                           SourceText(name, text), Span(len(good), len(good) + 1)) from None


class _BoundedComposer(yaml.SafeLoader):
    """PyYAML's composer, counting nodes and nesting as it goes and noting where each alias is.

    The composer shares a node for every alias of its anchor (no expansion happens here),
    but it recurses per level of nesting, so depth is bounded before it recurses.
    ``aliases`` maps (parent node, slot) -> the alias's position, slot being the list index
    or the key node of a mapping value (None for an alias used as a key).
    """

    def __init__(self, text: str):
        super().__init__(text)
        self.nodes = 0
        self.depth = 0
        self.aliases: dict[tuple[int, object], yaml.Mark] = {}

    # index: PyYAML passes a list index, or a mapping value's key node (its stubs say int only).
    def compose_node(self, parent: yaml.Node | None, index: Any) -> yaml.Node | None:
        mark = self.peek_event().start_mark
        if self.check_event(yaml.AliasEvent):
            node = super().compose_node(parent, index)
            self.aliases[(id(parent), id(index) if isinstance(index, yaml.Node) else index)] = mark
            return node
        self.nodes += 1
        if self.nodes > MAX_YAML_NODES:
            raise _YamlLimit(f"more than {MAX_YAML_NODES:,} YAML nodes", mark.index)
        self.depth += 1
        if self.depth > MAX_YAML_DEPTH:
            raise _YamlLimit(f"lists and mappings nested more than {MAX_YAML_DEPTH} deep", mark.index)
        try:
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


class _YamlLimit(Exception):
    def __init__(self, message: str, offset: int):
        super().__init__(message)
        self.offset = offset


def compose_yaml(source: SourceText) -> yaml.Node | None:
    """The YAML node graph of ``source`` (None when empty), checked so that walking it with
    every alias expanded is bounded: at most :data:`MAX_YAML_NODES` nodes and
    :data:`MAX_YAML_DEPTH` levels, no alias inside its own anchor (a cycle), and keys that are
    plain values. Raises one :class:`CatalogError` at the position of what is refused (for
    an expansion, the outermost alias being expanded)."""
    def error(message: str, offset: int) -> CatalogError:
        return CatalogError(message, source, Span(offset, offset + 1))

    loader = None
    try:
        loader = _BoundedComposer(source.text)  # PyYAML checks the characters here
        root = loader.get_single_node()
    except _YamlLimit as exc:
        raise error(f"the file has {exc}", exc.offset) from None
    except yaml.reader.ReaderError as exc:
        character = ord(exc.character) if isinstance(exc.character, str) else int(exc.character)
        raise error(f"invalid YAML: unacceptable character #x{character:04x}", exc.position) from None
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        offset = mark.index if mark is not None else 0
        problem = getattr(exc, "problem", None) or str(exc).splitlines()[0]
        raise error(f"invalid YAML: {problem}", offset) from None
    finally:
        if loader is not None:
            loader.dispose()
    if root is None:
        return None
    visited = 0
    ancestors: set[int] = set()

    def walk(node: yaml.Node, depth: int, via: yaml.Mark | None) -> None:
        nonlocal visited
        visited += 1
        if visited > MAX_YAML_NODES:
            raise error(f"YAML aliases expand to more than {MAX_YAML_NODES:,} nodes (an alias bomb?)",
                        via.index if via else node.start_mark.index)
        if depth > MAX_YAML_DEPTH:
            raise error(f"YAML aliases nest lists and mappings more than {MAX_YAML_DEPTH} deep",
                        via.index if via else node.start_mark.index)
        if isinstance(node, yaml.ScalarNode):
            return
        ancestors.add(id(node))
        if isinstance(node, yaml.SequenceNode):
            children = [(child, loader.aliases.get((id(node), i))) for i, child in enumerate(node.value)]
        else:
            children = []
            for key, value in node.value:
                if not isinstance(key, yaml.ScalarNode):
                    raise error("a key must be a plain value, not a list or a mapping", key.start_mark.index)
                children.append((value, loader.aliases.get((id(node), id(key)))))
        for child, alias in children:
            if id(child) in ancestors:
                at = alias.index if alias else child.start_mark.index
                raise error("this alias refers to a list or mapping that contains it (a recursive alias)", at)
            walk(child, depth + 1, via or alias)
        ancestors.discard(id(node))

    walk(root, 1, None)
    return root


def load_catalog(path: str | Path) -> Catalog:
    """Read and validate a catalog file. Raises :class:`CatalogError` naming line and column."""
    return load_catalog_text(read_text_file(path, "catalog"), str(path))


def load_catalog_text(text: str, name: str = "<catalog>") -> Catalog:
    """Validate catalog YAML given as text (see :func:`load_catalog`)."""
    return _Loader(SourceText(name, text)).load()


class _Loader:
    def __init__(self, source: SourceText):
        self.source = source
        self.marks: dict[Path_, tuple[int, int]] = {}  # path -> (start, end) offsets of the value
        self.key_marks: dict[Path_, tuple[int, int]] = {}
        self.styles: dict[Path_, str | None] = {}
        self.constructor = yaml.constructor.SafeConstructor()  # turns plain scalars into values

    # -- YAML with positions ----------------------------------------------------------
    def load(self) -> Catalog:
        node = compose_yaml(self.source)
        if node is None:
            raise CatalogError("the catalog is empty", self.source)
        data = self.to_python(node, ())
        if not isinstance(data, dict):
            self.fail((), "the catalog must be a mapping with streams, roles, users, actions and policies")
        unknown = set(data) - {"streams", "roles", "users", "actions", "policies", "lattice"}
        for key in sorted(unknown, key=str):
            self.fail((key,), f"unknown catalog section {key!r}", key=True)
        check_catalog_names(data, self.fail)  # one identifier grammar (streamwarden.names), at file:line:col
        lattice = self.lattice(data.get("lattice"))
        streams = self.streams(data.get("streams"), lattice)
        roles = self.roles(data.get("roles"))
        users = self.users(data.get("users"), roles, lattice)
        actions = self.actions(data.get("actions"))
        policies = self.policies(data.get("policies"), streams, roles, actions)
        return Catalog(
            MappingProxyType(streams), MappingProxyType(roles), MappingProxyType(users),
            MappingProxyType(actions), policies, self.source.name, self.source.text, lattice,
        )

    def to_python(self, node: yaml.Node, path: Path_) -> Any:
        self.marks[path] = (node.start_mark.index, node.end_mark.index)
        if isinstance(node, yaml.MappingNode):
            result: dict[Any, Any] = {}
            for key_node, value_node in node.value:
                key = self.scalar(key_node)  # compose_yaml allows only scalar keys
                if key in result:
                    self.marks[path + (key,)] = (key_node.start_mark.index, key_node.end_mark.index)
                    self.fail(path + (key,), f"duplicate key {key!r}")
                self.key_marks[path + (key,)] = (key_node.start_mark.index, key_node.end_mark.index)
                result[key] = self.to_python(value_node, path + (key,))
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.to_python(item, path + (i,)) for i, item in enumerate(node.value)]
        assert isinstance(node, yaml.ScalarNode)  # YAML's third and last kind of node
        self.styles[path] = node.style
        return self.scalar(node)

    def scalar(self, node: yaml.ScalarNode) -> Any:
        """A plain scalar's value as YAML types it (int, float, bool, null, timestamp); a quoted one's text.

        A tag no safe loader knows (``!!python/object``), or a value its tag cannot hold
        (``!!int abc``, a date such as ``2026-02-30``, an integer of thousands of digits), is a
        CatalogError at the value."""
        if node.style is not None:
            problem = text_problem(node.value)  # "\ud800" in double quotes: not a character any store holds
            if problem is not None:
                start = node.start_mark.index
                raise CatalogError(f"this text {problem}", self.source,
                                   Span(start, max(node.end_mark.index, start + 1)))
            return node.value
        try:
            return self.constructor.construct_object(node, deep=True)
        except (yaml.YAMLError, ValueError, TypeError, OverflowError) as exc:
            start = node.start_mark.index
            problem = getattr(exc, "problem", None) or (str(exc).splitlines() or [type(exc).__name__])[0]
            raise CatalogError(f"cannot read the value {node.value[:40]!r} ({problem})", self.source,
                               Span(start, max(node.end_mark.index, start + 1))) from None

    def fail(self, path: Path_, message: str, *, key: bool = False) -> NoReturn:
        marks = self.key_marks if key else self.marks
        while path and path not in marks:
            path = path[:-1]
        start, end = marks.get(path, (0, 0))
        raise CatalogError(message, self.source, Span(start, max(end, start + 1)))

    def subsource(self, path: Path_, text: str) -> SourceText:
        """A SourceText for a scalar inside the file, so expression errors point into it."""
        start, _ = self.marks[path]
        if self.styles.get(path) in ("'", '"'):
            start += 1
        line, column = self.source.line_col(start)
        return SourceText(self.source.name, text, line - 1, column - 1)

    # -- sections ---------------------------------------------------------------------
    def mapping(self, value: Any, path: Path_, what: str) -> dict[Any, Any]:
        if value is None:
            return {}
        if not isinstance(value, dict):
            self.fail(path, f"{what} must be a mapping")
        return value

    def name(self, value: Any, path: Path_, what: str) -> str:
        """A single name (a string; a plain number such as an id 7 is read as its text)."""
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            self.fail(path, f"{what} must be a name, not {_shown(value)}")
        return str(value)

    def names(self, value: Any, path: Path_, what: str) -> list[str]:
        if isinstance(value, str):
            return [value]
        if not isinstance(value, list) or not all(isinstance(v, str) for v in value):
            self.fail(path, f"{what} must be a list of names")
        return list(value)

    def lattice(self, raw: Any) -> Lattice | None:
        """``lattice: {classes: {COI1: ["1", "2"], COI2: [A, B, C]}}`` (Ray et al., Definition 1)."""
        if raw is None:
            return None
        spec = self.mapping(raw, ("lattice",), "lattice")
        for key in spec:
            if key != "classes":
                self.fail(("lattice", key), f"unknown key {key!r} in lattice (it has classes)", key=True)
        classes = self.mapping(spec.get("classes"), ("lattice", "classes"), "lattice classes")
        for name, companies in classes.items():
            if not isinstance(companies, list):
                self.fail(("lattice", "classes", name), f"class {name} must list its companies")
        try:
            return Lattice.of(classes)
        except LevelError as exc:
            self.fail(("lattice", "classes"), str(exc))
            raise

    def level_source(self, raw: Any, schema: dict[str, str], lattice: Lattice | None, path: Path_,
                     name: str) -> LevelSource:
        if lattice is None:
            self.fail(path, f"stream {name} has a level but the catalog declares no lattice")
            raise AssertionError
        if isinstance(raw, dict):
            if set(raw) != {"from"}:
                self.fail(path, f"the level of {name} is {{from: <attribute>}} or a fixed level like \"[1, ⊥]\"")
            attribute = self.name(raw["from"], path + ("from",), "the level's source attribute")
            if attribute not in schema:
                self.fail(path + ("from",), f"level source {attribute!r} is not an attribute of {name}")
            return LevelSource(attribute=attribute)
        try:
            return LevelSource(fixed=lattice.parse(level_text(raw)))
        except LevelError as exc:
            self.fail(path, str(exc))
            raise

    def streams(self, raw: Any, lattice: Lattice | None = None) -> dict[str, StreamDef]:
        streams: dict[str, StreamDef] = {}
        for name, spec in self.mapping(raw, ("streams",), "streams").items():
            path = ("streams", name)
            spec = self.mapping(spec, path, f"stream {name}")
            for key in spec:
                if key not in _STREAM_KEYS:
                    self.fail(path + (key,), f"unknown key {key!r} in stream {name}", key=True)
            schema_raw = self.mapping(spec.get("schema"), path + ("schema",), f"schema of {name}")
            if not schema_raw:
                self.fail(path, f"stream {name} needs a schema")
            schema = []
            for attr, dtype in schema_raw.items():
                if str(dtype) not in TYPES:
                    self.fail(path + ("schema", attr),
                              f"unknown type {dtype!r} for {name}.{attr} (use {', '.join(TYPES)})")
                schema.append((str(attr), str(dtype)))
            if dict(schema).get("ts") != "timestamp":
                self.fail(path + ("schema",), f"stream {name} needs an event-time attribute 'ts: timestamp'")
            key = spec.get("key")
            if key is not None:
                key = self.name(key, path + ("key",), f"the key of {name}")
            if key is not None and key not in dict(schema):
                self.fail(path + ("key",), f"key {key!r} is not an attribute of {name}")
            options = {k: v for k, v in spec.items() if k not in ("schema", "key")}
            self.punctuation_options(options, dict(schema), key, path, str(name))
            if lattice is not None and "level" in dict(schema):
                self.fail(path + ("schema", "level"), f"stream {name} cannot declare 'level': with a lattice, every "
                          "tuple's level is a system attribute the stream shepherd sets")
            if "level" in options:
                options["level"] = self.level_source(options["level"], dict(schema), lattice, path + ("level",),
                                                     str(name))
            if "source" in options:
                options["source"] = self.stream_source(options["source"], path + ("source",), str(name), key)
            streams[str(name)] = StreamDef(str(name), tuple(schema), key, MappingProxyType(options))
        return streams

    def stream_source(self, raw: Any, path: Path_, name: str, key: str | None) -> KafkaSource | None:
        """A stream's ``source``: ``files`` (given on the command line, the default) or
        ``{kafka: {...}}`` (:mod:`streamwarden.catalog.sources`)."""
        if raw == "files":
            return None
        spec = self.mapping(raw, path, f"the source of {name}")
        if set(spec) != {"kafka"}:
            self.fail(path, f"the source of {name} must be 'files' or {{kafka: {{bootstrap, topic, ...}}}}")
        path = path + ("kafka",)
        spec = self.mapping(spec["kafka"], path, f"the Kafka source of {name}")
        unknown = sorted(set(spec) - {"bootstrap", "topic", "pattern", "format", "time", "starting_offsets",
                                      "options"})
        if unknown:
            self.fail(path + (unknown[0],), f"unknown key {unknown[0]!r} in the Kafka source of {name} (use "
                      "bootstrap, topic or pattern, format, time, starting_offsets, options)", key=True)
        if key is not None:
            self.fail(path, f"stream {name} is punctuated: security punctuations over Kafka are not supported yet "
                      "(declare its source as files)")
        bootstrap = spec.get("bootstrap")
        if not isinstance(bootstrap, str) or not BOOTSTRAP.fullmatch(bootstrap):
            self.fail(path + (("bootstrap",) if "bootstrap" in spec else ()),
                      f"the Kafka source of {name} needs bootstrap: host:port[,host:port...]")
        if ("topic" in spec) == ("pattern" in spec):
            self.fail(path, f"the Kafka source of {name} needs exactly one of topic or pattern")
        topic = spec.get("topic")
        if topic is not None and (not isinstance(topic, str) or not TOPIC.fullmatch(topic)):
            self.fail(path + ("topic",), f"topic {_shown(topic)} is not a Kafka topic name (letters, digits, '.', "
                      "'_', '-', at most 249)")
        pattern = spec.get("pattern")
        if pattern is not None:
            try:
                if not isinstance(pattern, str):
                    raise re.error("not a string")
                re.compile(pattern)
            except re.error as exc:
                self.fail(path + ("pattern",), f"pattern {_shown(pattern)} is not a regular expression ({exc})")
        choices = {"format": FORMATS, "time": TIMES, "starting_offsets": STARTING}
        chosen = {}
        for option, allowed in choices.items():
            value = spec.get(option, allowed[0])
            if value not in allowed:
                self.fail(path + (option,), f"{option} of the Kafka source of {name} must be "
                          f"{' or '.join(allowed)}, not {_shown(value)}")
            chosen[option] = str(value)
        options = self.mapping(spec.get("options"), path + ("options",), f"options of the Kafka source of {name}")
        passed = {}
        for option, value in options.items():
            where = path + ("options", option)
            if not isinstance(option, str) or not re.fullmatch(r"[a-z][a-z0-9.\-]*", option):
                self.fail(where, f"{_shown(option)} is not a Kafka consumer setting", key=True)
            if option in RESERVED_OPTIONS or option.startswith("kafka."):
                self.fail(where, f"{option} is set by streamwarden and Spark's connector, not by the catalog",
                          key=True)
            if isinstance(value, (dict, list)) or value is None:
                self.fail(where, f"the value of {option} must be a single value")
            passed[option] = str(value).lower() if isinstance(value, bool) else str(value)
        return KafkaSource(bootstrap, topic=topic, pattern=pattern, options=MappingProxyType(passed), **chosen)

    def punctuation_options(self, options: dict[str, Any], schema: dict[str, str], key: str | None, path: Path_,
                            name: str) -> None:
        """Check punctuated_by, combine and server_policies; parse server policies into SPs."""
        punctuated = ("punctuated_by", "server_policies", "combine")
        if key is None:
            for option in punctuated:
                if option in options:
                    self.fail(path + (option,), f"stream {name}: {option} needs a key (the attribute SP tuple "
                                                f"patterns match)", key=True)
            return
        for attribute in schema:  # the reader parses SP fields and attributes as one record: one type each
            if attribute in _SP_RECORD_FIELDS:
                self.fail(path + ("schema", attribute), f"stream {name} is punctuated: its attribute {attribute!r} "
                          f"would share a name with a field of its SP records or tuples; rename it", key=True)
        provider = options.get("punctuated_by")
        if provider is not None:
            provider = self.name(provider, path + ("punctuated_by",), f"punctuated_by of {name}")
            options["punctuated_by"] = provider
        if provider is not None and provider not in schema:
            self.fail(path + ("punctuated_by",), f"punctuated_by {provider!r} is not an attribute of {name}")
        mode = options.get("combine", "intersect")
        if mode not in ("intersect", "union"):
            self.fail(path + ("combine",), f"combine must be intersect or union, not {mode!r}")
        raw = options.get("server_policies") or []
        if not isinstance(raw, list):
            self.fail(path + ("server_policies",), "server_policies must be a list of {streams, tuples, attributes, "
                                                   "roles, sign}")
        parsed = []
        for i, entry in enumerate(raw):
            where = path + ("server_policies", i)
            if not isinstance(entry, dict):
                self.fail(where, "a server policy must be a mapping {streams, tuples, attributes, roles, sign}")
            unknown = sorted(set(entry) - {"streams", "tuples", "attributes", "roles", "sign"})
            if unknown:
                self.fail(where + (unknown[0],), f"unknown key {unknown[0]!r} in a server policy", key=True)
            if "roles" not in entry:
                self.fail(where, "a server policy needs roles")
            record = {"kind": "sp", "ts": "1970-01-01T00:00:00Z", "sn": i + 1, **{k: str(v) for k, v in entry.items()}}
            try:
                parsed.append(sp_from_record(record, f"server policy {i + 1} of {name}"))
            except StreamwardenError as exc:
                self.fail(where, str(exc))
        options["server_policies"] = tuple(parsed)
        options["combine"] = mode

    def roles(self, raw: Any) -> dict[str, Role]:
        roles: dict[str, Role] = {}
        raw = self.mapping(raw, ("roles",), "roles")
        for name, spec in raw.items():
            spec = self.mapping(spec, ("roles", name), f"role {name}")
            inherits = self.names(spec.get("inherits", []), ("roles", name, "inherits"), "inherits")
            for i, parent in enumerate(inherits):
                if parent not in raw:
                    self.fail(("roles", name, "inherits", i), f"role {name} inherits unknown role {parent!r}")
            roles[str(name)] = Role(str(name), tuple(inherits))
        self.check_acyclic(roles)
        return roles

    def check_acyclic(self, roles: dict[str, Role]) -> None:
        state: dict[str, int] = {}

        def visit(role: str, trail: list[str]) -> None:
            if state.get(role) == 2:
                return
            if state.get(role) == 1:
                cycle = " -> ".join(trail[trail.index(role):] + [role])
                self.fail(("roles", role), f"role inheritance has a cycle: {cycle}")
            state[role] = 1
            for parent in roles[role].inherits:
                visit(parent, trail + [role])
            state[role] = 2

        for role in roles:
            visit(role, [])

    def users(self, raw: Any, roles: dict[str, Role], lattice: Lattice | None = None) -> dict[str, User]:
        users: dict[str, User] = {}
        for name, spec in self.mapping(raw, ("users",), "users").items():
            path = ("users", name)
            spec = self.mapping(spec, path, f"user {name}")
            for key in spec:
                if key not in ("roles", "profile", "clearance"):
                    self.fail(path + (key,), f"unknown key {key!r} in user {name} (roles, profile, clearance)",
                              key=True)
            clearance = None
            if spec.get("clearance") is not None:
                if lattice is None:
                    self.fail(path + ("clearance",), f"user {name} has a clearance but the catalog declares no lattice")
                try:
                    clearance = lattice.parse(level_text(spec["clearance"]))
                except LevelError as exc:
                    self.fail(path + ("clearance",), str(exc))
            user_roles = self.names(spec.get("roles", []), path + ("roles",), "roles")
            for i, role in enumerate(user_roles):
                if role not in roles:
                    self.fail(path + ("roles", i), f"user {name} has unknown role {role!r}")
            profile = self.mapping(spec.get("profile"), path + ("profile",), "profile")
            for attr, value in profile.items():
                # A plain value, or null: unknown, and the policies that use it do not apply.
                if isinstance(value, (list, dict)):
                    self.fail(path + ("profile", attr), f"profile value {attr} of {name} must be a plain value "
                                                        f"(text, number, boolean, timestamp) or null")
            users[str(name)] = User(str(name), tuple(user_roles), MappingProxyType(dict(profile)), clearance)
        return users

    def actions(self, raw: Any) -> dict[str, Action]:
        actions: dict[str, Action] = {}
        for name, spec in self.mapping(raw, ("actions",), "actions").items():
            path = ("actions", name)
            spec = self.mapping(spec, path, f"action {name}")
            start = self.timestamp(spec.get("start"), path + ("start",))
            end = self.timestamp(spec.get("end"), path + ("end",))
            target = spec.get("target")
            if target is not None and not _finite_number(target):
                self.fail(path + ("target",), f"target of action {name} must be a finite number")
            if start and end and end < start:
                self.fail(path + ("end",), f"action {name} ends before it starts")
            actions[str(name)] = Action(str(name), start, end, None if target is None else float(target))
        return actions

    def timestamp(self, value: Any, path: Path_) -> datetime | None:
        if value is None:
            return None
        try:
            return parse_timestamp(value.isoformat() if isinstance(value, datetime) else str(value))
        except ValueError as exc:
            why = f" ({exc})" if "outside years" in str(exc) else ""
            self.fail(path, f"{_shown(value)} is not an ISO-8601 timestamp{why}")
            raise AssertionError from None

    def policies(self, raw: Any, streams: dict[str, StreamDef], roles: dict[str, Role],
                 actions: dict[str, Action]) -> tuple[Policy, ...]:
        if raw is None:
            return ()
        if not isinstance(raw, list):
            self.fail(("policies",), "policies must be a list")
        seen: set[str] = set()
        policies = []
        for i, spec in enumerate(raw):
            policy = self.policy(i, spec, streams, roles, actions)
            if policy.id in seen:
                self.fail(("policies", i, "id"), f"duplicate policy id {policy.id!r}")
            seen.add(policy.id)
            policies.append(policy)
        return tuple(policies)

    def policy(self, i: int, spec: Any, streams: dict[str, StreamDef], roles: dict[str, Role],
               actions: dict[str, Action]) -> Policy:
        path: Path_ = ("policies", i)
        spec = self.mapping(spec, path, "a policy")
        for key in spec:
            if key not in _POLICY_KEYS:
                self.fail(path + (key,), f"unknown key {key!r} in policy", key=True)
        for required in ("id", "subject", "streams", "privilege"):
            if required not in spec:
                self.fail(path, f"policy is missing {required!r}")
        pid = self.name(spec["id"], path + ("id",), "a policy id")
        subject = self.name(spec["subject"], path + ("subject",), "a policy's subject")
        if subject not in roles:
            self.fail(path + ("subject",), f"policy {pid}: unknown role {subject!r}")
        names = self.names(spec["streams"], path + ("streams",), "streams")
        if not names:
            self.fail(path + ("streams",), f"policy {pid} names no stream")
        for j, stream in enumerate(names):
            if stream not in streams:
                self.fail(path + ("streams", j), f"policy {pid}: unknown stream {stream!r}")
        privilege = str(spec["privilege"]).lower()
        if privilege not in PRIVILEGES:
            self.fail(path + ("privilege",), f"policy {pid}: privilege must be one of {', '.join(PRIVILEGES)}")
        attributes = self.policy_attributes(pid, spec.get("attributes", "*"), path, names, streams)
        scope = Scope({s: streams[s] for s in names}, allow_profile=True, actions=frozenset(actions))
        where, where_text = None, None
        if spec.get("where") not in (None, ""):
            if isinstance(spec["where"], (list, dict)):
                self.fail(path + ("where",), f"policy {pid}: where must be a condition written as text")
            where_text = str(spec["where"])
            sub = self.subsource(path + ("where",), where_text)
            where = bind_expression(parse_expression(sub), scope, sub)
            if where.dtype not in ("boolean", "unknown"):
                self.fail(path + ("where",), f"policy {pid}: where must be a condition")
        time = self.time_constraint(pid, spec.get("time"), path + ("time",), actions)
        window = self.window_constraint(pid, spec.get("window"), path + ("window",))
        line = self.source.line_col(self.marks[path][0])[0]
        group_by, aggregate_args, min_group = self.inference_control(pid, spec, path, privilege, names, streams)
        return Policy(pid, subject, tuple(names), attributes, privilege, where, where_text, time, window,
                      self.source, line, group_by, aggregate_args, min_group)

    def inference_control(self, pid: str, spec: dict[str, Any], path: Path_, privilege: str, names: list[str],
                          streams: dict[str, StreamDef]) -> tuple[tuple[str, ...], str, int | None]:
        """``group_by``, ``aggregate_args`` and ``min_group`` of an aggregate policy
        (docs/semantics.md, "Inference control"); a read policy may not carry them."""
        keys = [k for k in ("group_by", "aggregate_args", "min_group") if k in spec]
        if privilege == "read" and keys:
            self.fail(path + (keys[0],), f"policy {pid}: {keys[0]} applies to aggregate privileges only", key=True)
        group_by = self.names(spec.get("group_by", []), path + ("group_by",), "group_by")
        known = {a for s in names for a in streams[s].attributes}
        for j, attr in enumerate(group_by):
            if attr not in known:
                self.fail(path + ("group_by", j), f"policy {pid}: no stream in {names} has attribute {attr!r}")
        aggregate_args = spec.get("aggregate_args", "attributes")
        if aggregate_args not in ("attributes", "expressions"):
            self.fail(path + ("aggregate_args",), f"policy {pid}: aggregate_args is attributes or expressions")
        min_group = spec.get("min_group")
        if min_group is not None and (isinstance(min_group, bool) or not isinstance(min_group, int)
                                      or not 1 <= min_group <= 1_000_000_000):
            self.fail(path + ("min_group",), f"policy {pid}: min_group must be a whole number from 1 to 1,000,000,000")
        return tuple(group_by), str(aggregate_args), min_group

    def policy_attributes(self, pid: str, raw: Any, path: Path_, names: list[str],
                          streams: dict[str, StreamDef]) -> tuple[str, ...] | None:
        """The policy's ATTs: ``"*"`` (None), or names, each either bare (``Pos``: that attribute
        of every stream of the policy that has it, as in Definition 4.2) or qualified
        (``Position.Pos``: that stream's attribute only, kept qualified so that
        :func:`streamwarden.security.rewrite.instantiate.granted_attributes` grants nothing else).

        A qualified name whose stream is not one of the policy's streams, or whose attribute
        that stream does not have, is an error: it never falls back to the bare name."""
        if raw == "*":
            return None
        attributes = self.names(raw, path + ("attributes",), "attributes")
        known = {a for s in names for a in streams[s].attributes}
        granted: list[str] = []
        for j, attr in enumerate(attributes):
            where = path + ("attributes", j)
            qualifier, _, bare = attr.partition(".")
            if not bare:  # no '.': a bare attribute name
                if attr not in known:
                    self.fail(where, f"policy {pid}: no stream in {names} has attribute {attr!r}")
                granted.append(attr)
                continue
            distinct = list(dict.fromkeys(names))
            matches = [s for s in distinct if s == qualifier] or [s for s in distinct if s.lower() == qualifier.lower()]
            if len(matches) != 1:
                self.fail(where, f"policy {pid}: {attr!r} names stream {qualifier!r}, which is not one of the "
                                 f"policy's streams ({', '.join(names)})")
            stream = matches[0]
            if streams[stream].type_of(bare) is None:
                self.fail(where, f"policy {pid}: stream {stream} has no attribute {bare!r} (it has "
                                 f"{', '.join(streams[stream].attributes)})")
            granted.append(f"{stream}.{bare}")
        return tuple(dict.fromkeys(granted))  # once each, in the order written

    def time_constraint(self, pid: str, raw: Any, path: Path_,
                        actions: dict[str, Action]) -> tuple[TimeBound, TimeBound] | None:
        if raw is None:
            return None
        if not isinstance(raw, list) or len(raw) != 2:
            self.fail(path, f"policy {pid}: time must be [begin, end]")
        return (self.time_bound(pid, raw[0], path + (0,), actions), self.time_bound(pid, raw[1], path + (1,), actions))

    def time_bound(self, pid: str, raw: Any, path: Path_, actions: dict[str, Action]) -> TimeBound:
        if isinstance(raw, str) and "(" in raw:
            sub = self.subsource(path, raw)
            try:
                node = parse_expression(sub)
            except StreamwardenError:
                node = None
            if not (isinstance(node, ast.Call) and node.name in ("START", "END") and len(node.args) == 1
                    and isinstance(node.args[0], ast.Name)):
                self.fail(path, f"policy {pid}: a time bound is a timestamp, start(action) or end(action)")
                raise AssertionError
            action = str(node.args[0])
            if action not in actions:
                self.fail(path, f"policy {pid}: unknown action {action!r}")
            return TimeBound(None, node.name.lower(), action)
        value = self.timestamp(raw, path)
        if value is None:
            self.fail(path, f"policy {pid}: a time bound cannot be empty")
        return TimeBound(value)

    def window_constraint(self, pid: str, raw: Any, path: Path_) -> tuple[float, float] | None:
        if raw is None:
            return None
        spec = self.mapping(raw, path, "window")
        values = []
        for key in ("size", "offset"):
            value = spec.get(key, 0)
            if isinstance(value, (int, float)) and not isinstance(value, bool):
                # Plain numbers are seconds, within the bounds a written duration has (parser.py).
                seconds = float(value)
                if not 0 <= seconds <= MAX_DURATION_SECONDS or 0 < seconds < MIN_DURATION_SECONDS:
                    self.fail(path + (key,), f"policy {pid}: window {key} must be between 1 microsecond and "
                                             f"100 years (or 0), not {value!r} seconds")
                values.append(seconds)
                continue
            try:
                values.append(parse_duration(str(value), zero=True))
            except StreamwardenError as exc:
                problem = exc.message if isinstance(exc, SourceError) else str(exc)
                self.fail(path + (key,), f"policy {pid}: window {key} must be a duration like '1 hour' ({problem})")
        for key in spec:
            if key not in ("size", "offset"):
                self.fail(path + (key,), f"policy {pid}: unknown window key {key!r}", key=True)
        self.check_grid(pid, values[0], values[1], path)
        return values[0], values[1]

    def check_grid(self, pid: str, size: float, offset: float, path: Path_) -> None:
        """A policy's grid is a window the engine runs (a query's window snaps up onto it): it may put
        each tuple in at most MAX_WINDOWS_PER_TUPLE windows, as a query's own may (parser.py)."""
        count = windows_per_tuple(size, offset or size) if size else 1
        if count > MAX_WINDOWS_PER_TUPLE:
            self.fail(path, f"policy {pid}: a window of {seconds_text(size)} on a grid of {seconds_text(offset)} puts "
                            f"each tuple in {count:,} windows (at most {MAX_WINDOWS_PER_TUPLE} are allowed): make the "
                            f"offset at least {seconds_text(size / MAX_WINDOWS_PER_TUPLE)} or the size smaller")
