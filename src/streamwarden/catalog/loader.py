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

from datetime import datetime
from pathlib import Path
from types import MappingProxyType
from typing import Any

import yaml

from streamwarden.catalog.model import PRIVILEGES, TYPES, Action, Catalog, Policy, Role, StreamDef, TimeBound, User
from streamwarden.errors import CatalogError, SourceText, Span, StreamwardenError
from streamwarden.language import ast
from streamwarden.language.expressions import Scope, bind_expression, parse_timestamp
from streamwarden.language.parser import parse_duration, parse_expression
from streamwarden.levels.lattice import Lattice, LevelError, LevelSource
from streamwarden.punctuation.model import sp_from_record

Path_ = tuple[object, ...]


def level_text(raw: Any) -> str:
    """A level as written: ``"[1, ⊥]"``, or unquoted YAML ``[1, ⊥]`` (which YAML reads as a list)."""
    return "[" + ", ".join(str(v) for v in raw) + "]" if isinstance(raw, list) else str(raw)

_STREAM_KEYS = {"schema", "key", "punctuated_by", "server_policies", "combine", "level"}
_POLICY_KEYS = {"id", "subject", "streams", "attributes", "where", "privilege", "time", "window",
                "group_by", "aggregate_args", "min_group"}


def load_catalog(path: str | Path) -> Catalog:
    """Read and validate a catalog file. Raises :class:`CatalogError` naming line and column."""
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise CatalogError(f"cannot read catalog {path}: {exc.strerror or exc}") from None
    return load_catalog_text(text, str(path))


def load_catalog_text(text: str, name: str = "<catalog>") -> Catalog:
    """Validate catalog YAML given as text (see :func:`load_catalog`)."""
    return _Loader(SourceText(name, text)).load()


class _Loader:
    def __init__(self, source: SourceText):
        self.source = source
        self.marks: dict[Path_, tuple[int, int]] = {}  # path -> (start, end) offsets of the value
        self.key_marks: dict[Path_, tuple[int, int]] = {}
        self.styles: dict[Path_, str | None] = {}

    # -- YAML with positions ----------------------------------------------------------
    def load(self) -> Catalog:
        try:
            node = yaml.compose(self.source.text)
        except yaml.YAMLError as exc:
            mark = getattr(exc, "problem_mark", None)
            offset = mark.index if mark is not None else 0
            problem = getattr(exc, "problem", None) or str(exc)
            raise CatalogError(f"invalid YAML: {problem}", self.source, Span(offset, offset + 1)) from None
        if node is None:
            raise CatalogError("the catalog is empty", self.source)
        data = self.to_python(node, ())
        if not isinstance(data, dict):
            self.fail((), "the catalog must be a mapping with streams, roles, users, actions and policies")
        unknown = set(data) - {"streams", "roles", "users", "actions", "policies", "lattice"}
        for key in sorted(unknown, key=str):
            self.fail((key,), f"unknown catalog section {key!r}", key=True)
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
                key = yaml.safe_load(yaml.serialize(key_node)) if not isinstance(key_node, yaml.ScalarNode) else self.scalar(key_node)
                if key in result:
                    self.marks[path + (key,)] = (key_node.start_mark.index, key_node.end_mark.index)
                    self.fail(path + (key,), f"duplicate key {key!r}")
                self.key_marks[path + (key,)] = (key_node.start_mark.index, key_node.end_mark.index)
                result[key] = self.to_python(value_node, path + (key,))
            return result
        if isinstance(node, yaml.SequenceNode):
            return [self.to_python(item, path + (i,)) for i, item in enumerate(node.value)]
        self.styles[path] = node.style
        return self.scalar(node)

    @staticmethod
    def scalar(node: yaml.ScalarNode) -> Any:
        return yaml.safe_load(yaml.serialize(node)) if node.style is None else node.value

    def fail(self, path: Path_, message: str, *, key: bool = False) -> None:
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
            attribute = str(raw["from"])
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
                    self.fail(path + ("schema", attr), f"unknown type {dtype!r} for {name}.{attr} (use {', '.join(TYPES)})")
                schema.append((str(attr), str(dtype)))
            if dict(schema).get("ts") != "timestamp":
                self.fail(path + ("schema",), f"stream {name} needs an event-time attribute 'ts: timestamp'")
            key = spec.get("key")
            if key is not None and key not in dict(schema):
                self.fail(path + ("key",), f"key {key!r} is not an attribute of {name}")
            options = {k: v for k, v in spec.items() if k not in ("schema", "key")}
            self.punctuation_options(options, dict(schema), key, path, str(name))
            if lattice is not None and "level" in dict(schema):
                self.fail(path + ("schema", "level"), f"stream {name} cannot declare 'level': with a lattice, every "
                          "tuple's level is a system attribute the stream shepherd sets")
            if "level" in options:
                options["level"] = self.level_source(options["level"], dict(schema), lattice, path + ("level",), str(name))
            streams[str(name)] = StreamDef(str(name), tuple(schema), key, MappingProxyType(options))
        return streams

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
        provider = options.get("punctuated_by")
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
                    clearance = lattice.parse(level_text(spec["clearance"]))  # type: ignore[union-attr]
                except LevelError as exc:
                    self.fail(path + ("clearance",), str(exc))
            user_roles = self.names(spec.get("roles", []), path + ("roles",), "roles")
            for i, role in enumerate(user_roles):
                if role not in roles:
                    self.fail(path + ("roles", i), f"user {name} has unknown role {role!r}")
            profile = self.mapping(spec.get("profile"), path + ("profile",), "profile")
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
            if target is not None and not isinstance(target, (int, float)):
                self.fail(path + ("target",), f"target of action {name} must be a number")
            if start and end and end < start:
                self.fail(path + ("end",), f"action {name} ends before it starts")
            actions[str(name)] = Action(str(name), start, end, None if target is None else float(target))
        return actions

    def timestamp(self, value: Any, path: Path_) -> datetime | None:
        if value is None:
            return None
        if isinstance(value, datetime):
            return parse_timestamp(value.isoformat())
        try:
            return parse_timestamp(str(value))
        except ValueError:
            self.fail(path, f"{value!r} is not an ISO-8601 timestamp")
            raise AssertionError

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
        pid = str(spec["id"])
        subject = spec["subject"]
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
        if raw == "*":
            return None
        attributes = self.names(raw, path + ("attributes",), "attributes")
        known = {a for s in names for a in streams[s].attributes}
        for j, attr in enumerate(attributes):
            bare = attr.split(".", 1)[1] if "." in attr else attr
            if bare not in known:
                self.fail(path + ("attributes", j), f"policy {pid}: no stream in {names} has attribute {attr!r}")
        return tuple(a.split(".", 1)[1] if "." in a else a for a in attributes)

    def time_constraint(self, pid: str, raw: Any, path: Path_, actions: dict[str, Action]) -> tuple[TimeBound, TimeBound] | None:
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
            if isinstance(value, (int, float)):
                values.append(float(value))  # plain numbers are seconds
                continue
            try:
                values.append(parse_duration(str(value)))
            except StreamwardenError:
                self.fail(path + (key,), f"policy {pid}: window {key} must be a duration like '1 hour'")
        for key in spec:
            if key not in ("size", "offset"):
                self.fail(path + (key,), f"policy {pid}: unknown window key {key!r}", key=True)
        return values[0], values[1]
