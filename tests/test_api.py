"""The API as the command line and the service use it, without Spark: what ``run_network``
refuses before Spark starts, ``keep_running``'s loop, and ``forget_query`` removing one
query's folders and nothing else."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest

from streamwarden import api
from streamwarden.errors import StreamwardenError
from streamwarden.names import UnsafePath

CATALOG = "streams: {S: {schema: {ts: timestamp, v: int}}, T: {schema: {ts: timestamp, w: int}}}\nusers: {ann: {}}"


# -- run_network: every refusal before Spark starts ---------------------------------------------------
@pytest.fixture
def no_spark(monkeypatch: pytest.MonkeyPatch) -> None:
    def started(*args: object, **kwargs: object) -> None:
        raise AssertionError("Spark was started before the network's inputs and store were checked")

    monkeypatch.setattr("streamwarden.api.network.get_spark", started)


def refusal(tmp_path: Path, **kwargs: object) -> str:
    (tmp_path / "in").mkdir(exist_ok=True)
    arguments: dict = {"store_url": api.CatalogStore(f"sqlite:///{tmp_path / 'state' / 'c.db'}").url, **kwargs}
    inputs = arguments.pop("inputs", {"S": str(tmp_path / "in")})
    with pytest.raises(StreamwardenError) as refused:
        api.run_network(inputs, arguments.pop("output_dir", str(tmp_path / "out")), **arguments)
    return str(refused.value)


def test_run_network_refuses_before_spark_starts(tmp_path: Path, no_spark: None) -> None:
    catalog = api.load_catalog_text(CATALOG)
    q1 = api.RegisteredQuery("q1", ("ann",), "SELECT v FROM S")
    assert "lies inside the output folder" in refusal(tmp_path, store_url=f"sqlite:///{tmp_path / 'out' / 'c.db'}")
    assert "holds no catalog" in refusal(tmp_path)
    assert "has no registered query" in refusal(tmp_path, catalog=catalog)
    # from here on q1 and q2 are registered in the store
    assert "stream T" in refusal(tmp_path, catalog=catalog,  # a query reads T: no input for it
                                 queries=[q1, api.RegisteredQuery("q2", ("ann",), "SELECT w FROM T")])
    assert "not found" in refusal(tmp_path, inputs={"S": str(tmp_path / "missing"), "T": str(tmp_path / "in")})
    assert "overlap" in refusal(tmp_path, inputs={"S": str(tmp_path / "in"), "T": str(tmp_path / "in")},
                                checkpoint_root=str(tmp_path / "out" / "cp"))
    assert not (tmp_path / "out").exists()  # nothing was written into the output folder


# -- keep_running ---------------------------------------------------------------------------------
class FakeRunner:
    """A runner that ends after ``batches`` waits (never, with None) and is in a batch for ``busy`` checks."""

    def __init__(self, *, batches: int | None = None, available_now: bool = False, busy: int = 0) -> None:
        self.available_now = available_now
        self.batches, self.busy = batches, busy
        self.polls = self.waits = 0
        self.stopped = False

    def wait(self, timeout: float | None) -> bool:
        time.sleep(0.005)
        self.waits += 1
        return self.batches is not None and self.waits >= self.batches

    def check(self) -> None:
        pass

    def poll(self) -> bool:
        self.polls += 1
        return False

    def process_all_available(self) -> None:
        pass

    def in_batch(self) -> bool:
        self.busy -= 1
        return self.busy >= 0

    def stop(self) -> None:
        self.stopped = True

    @property
    def streams(self) -> list:
        return []


def test_keep_running_returns_when_an_available_now_run_ends_without_polling() -> None:
    runner = FakeRunner(batches=3, available_now=True)
    api.keep_running(runner, threading.Event(), poll_seconds=0)
    assert runner.waits == 3 and runner.polls == 0 and not runner.stopped  # the caller stops it


def test_keep_running_polls_until_stopped_and_lets_the_batch_under_way_finish() -> None:
    runner = FakeRunner(busy=3)
    stop = threading.Event()
    threading.Timer(0.1, stop.set).start()
    api.keep_running(runner, stop, poll_seconds=0)
    assert runner.polls > 0 and runner.busy < 0  # waited for the batch under way, not cut
    slow = FakeRunner(busy=1_000_000)
    api.keep_running(slow, stop, poll_seconds=0, batch_grace=0.2)  # stopped already: the grace bounds the wait
    assert 0 < 1_000_000 - slow.busy <= 4
    hurry = threading.Event()
    hurry.set()  # a second signal: no wait at all
    hurried = FakeRunner(busy=1_000_000)
    api.keep_running(hurried, stop, hurry=hurry, poll_seconds=0)
    assert hurried.busy == 1_000_000


# -- forget_query ---------------------------------------------------------------------------------
def test_forget_query_removes_one_query_of_the_listed_users_and_nothing_else(tmp_path: Path) -> None:
    out, root = tmp_path / "out", tmp_path / "cp"
    for folder in (out / "ann" / "q1", out / "bob" / "q1", out / "ann" / "q2", out / "eve" / "q1", root / "q1" / "f",
                   root / "q2" / "f"):
        folder.mkdir(parents=True)
    api.forget_query(out, "q1", ("ann", "bob"), root)
    left = sorted(str(p.relative_to(tmp_path)) for p in tmp_path.glob("*/*/*"))
    assert left == ["cp/q2/f", "out/ann/q2", "out/eve/q1"]
    api.forget_query(out, "q2", ("ann",))  # no network: the rows only
    assert (root / "q2").exists() and not (out / "ann" / "q2").exists()


def test_forget_query_refuses_a_name_that_leaves_its_folder(tmp_path: Path) -> None:
    (tmp_path / "out").mkdir()
    (tmp_path / "keep").mkdir()
    for query, users in (("..", ("keep",)), ("q1", ("../keep",)), ("/tmp", ("ann",))):
        with pytest.raises(UnsafePath):
            api.forget_query(tmp_path / "out", query, users, tmp_path / "out")
    assert (tmp_path / "keep").is_dir()


# -- the package: every public name, each from its module, loaded on first use ----------------------
def test_every_public_name_resolves_to_its_modules_own() -> None:
    import ast
    import importlib

    tree = ast.parse(Path(api.__file__).read_text())
    declared = {alias.name: node.module for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
                and (node.module or "").startswith("streamwarden.api.") for alias in node.names}
    assert sorted(declared) == sorted(api.__all__)  # what type checkers see is what programs get
    for name, module in declared.items():
        assert name in importlib.import_module(module).__all__ and getattr(api, name) is \
            getattr(importlib.import_module(module), name), name
    with pytest.raises(AttributeError):
        api.no_such_name  # noqa: B018


def test_the_store_help_loads_no_spark() -> None:
    import subprocess
    import sys

    code = "import sys; from streamwarden import api; api.STORE_HELP; print('pyspark' in sys.modules)"
    shown = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert shown.stdout.strip() == "False"  # `streamwarden --help` and usage errors stay quick
