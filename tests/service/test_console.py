"""The web console (``GET /``) in a real headless Chromium against a real ``streamwarden serve``.

One service (Spark starts once) and one browser for the module; the tests run in order and
sign in and out as different users: a bad token stays signed out; ann checks and registers
queries through the form and watches rows arrive over the SSE stream (read with fetch, the
token in a header), a row carrying HTML is shown as text; eve is told nothing is authorized;
bob sees only his rows (value < 50); root sees the admin tabs. No token ever shows in the
page, its URL, a request URL or the service's log.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any, Iterator

import pytest

CHROMIUM = Path("/usr/bin/chromium")
CHROMEDRIVER = Path("/usr/bin/chromedriver")
if not (CHROMIUM.exists() and CHROMEDRIVER.exists()):
    pytest.skip(f"the console's browser test needs Debian's Chromium: {CHROMIUM} and {CHROMEDRIVER} "
                "(apt-get install chromium chromium-driver)", allow_module_level=True)
pytest.importorskip("selenium", reason="the console's browser test needs Selenium 4 (the test extra)")

from selenium import webdriver  # noqa: E402
from selenium.common.exceptions import NoAlertPresentException, StaleElementReferenceException  # noqa: E402
from selenium.webdriver.chrome.options import Options  # noqa: E402
from selenium.webdriver.chrome.service import Service  # noqa: E402
from selenium.webdriver.common.by import By  # noqa: E402
from selenium.webdriver.support import expected_conditions as EC  # noqa: E402
from selenium.webdriver.support.ui import WebDriverWait  # noqa: E402

from .served import Served  # noqa: E402

pytestmark = pytest.mark.spark
Q1 = "SELECT sensor, value FROM Readings"
Q2 = "SELECT sensor, site, value FROM Readings"
XSS = "<img src=x onerror=alert(1)>"
ROWS_TIMEOUT = 120.0  # seconds for the network's micro-batches on a loaded machine
CHROMIUM_ARGS = ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage", "--disable-quic",
                 "--no-first-run", "--disable-background-networking", "--disable-component-update", "--disable-sync",
                 "--window-size=1400,1000")


def records(*rows: tuple[int, float, str]) -> str:
    """JSON lines of Readings: (sensor, value, site)."""
    return "".join(json.dumps({"ts": f"2026-03-01T10:00:{sensor % 60:02d}Z", "sensor": sensor, "site": site,
                               "value": value}) + "\n" for sensor, value, site in rows)


# -- fixtures --------------------------------------------------------------------------------------
@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    with Served.start(tmp_path_factory.mktemp("console")) as running:
        yield running


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[webdriver.Chrome]:
    options = Options()
    for argument in CHROMIUM_ARGS:
        options.add_argument(argument)
    options.add_argument(f"--user-data-dir={tmp_path_factory.mktemp('chromium-profile')}")
    options.binary_location = str(CHROMIUM)
    options.set_capability("goog:loggingPrefs", {"performance": "ALL", "browser": "ALL"})
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


@pytest.fixture(autouse=True)
def evidence(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[None]:
    """On a failure: a screenshot, the page's DOM, the browser's console and the service's log in tmp_path."""
    failed = request.session.testsfailed
    yield
    if request.session.testsfailed == failed or "browser" not in request.fixturenames:
        return
    driver: webdriver.Chrome = request.getfixturevalue("browser")
    try:
        driver.save_screenshot(str(tmp_path / "console.png"))
        (tmp_path / "console.html").write_text(driver.page_source, encoding="utf-8")
        (tmp_path / "browser.log").write_text("\n".join(str(e) for e in driver.get_log("browser")), encoding="utf-8")
    except Exception as exc:  # the evidence is best effort: the failure itself is what counts
        (tmp_path / "evidence-failed.txt").write_text(repr(exc), encoding="utf-8")
    running: Served = request.getfixturevalue("served")
    if running.log is not None and running.log.exists():
        shutil.copy(running.log, tmp_path / "serve.log")
    print(f"console evidence in {tmp_path}")


# -- driving the page --------------------------------------------------------------------------------
def wait(driver: webdriver.Chrome, timeout: float = 30.0) -> WebDriverWait:
    return WebDriverWait(driver, timeout, poll_frequency=0.2, ignored_exceptions=(StaleElementReferenceException,))


def text_of(driver: webdriver.Chrome, element_id: str) -> str:
    return driver.execute_script("return document.getElementById(arguments[0]).textContent", element_id)


def sign_in(driver: webdriver.Chrome, served: Served, holder: str) -> None:
    field = driver.find_element(By.ID, "token")
    field.clear()
    field.send_keys(served.tokens[holder])
    driver.find_element(By.ID, "signin").click()
    wait(driver).until(EC.visibility_of_element_located((By.ID, "app")))
    wait(driver).until(lambda d: d.find_element(By.ID, "queries").get_attribute("data-loaded") == "true")
    assert "Signed in" in driver.find_element(By.ID, "whoami").text
    assert_no_token(driver, served)


def sign_out(driver: webdriver.Chrome) -> None:
    driver.find_element(By.ID, "signout").click()
    wait(driver).until(EC.visibility_of_element_located((By.ID, "token")))
    assert not driver.find_element(By.ID, "app").is_displayed()
    assert driver.execute_script("return sessionStorage.length") == 0


def fill_and_check(driver: webdriver.Chrome, query_id: str, text: str) -> None:
    for element_id, value in (("query-id", query_id), ("query-text", text)):
        field = driver.find_element(By.ID, element_id)
        field.clear()
        field.send_keys(value)
    driver.find_element(By.ID, "check").click()


def register(driver: webdriver.Chrome, query_id: str, text: str, policy: str) -> None:
    """Check (the explanation names ``policy``), then confirm; the query is listed and selected."""
    fill_and_check(driver, query_id, text)
    wait(driver).until(lambda d: d.find_element(By.ID, "confirm").is_enabled())
    explained = text_of(driver, "explanation")
    assert "1 part(s) authorized" in explained and "0 withheld" in explained, explained
    deployed = driver.find_elements(By.CSS_SELECTOR, "#explanation .graph.deployed .policy")
    assert [e.text for e in deployed] == [policy]  # the authorized graph names its policy
    assert not driver.find_elements(By.CSS_SELECTOR, "#explanation .graph.withheld")
    driver.find_element(By.ID, "confirm").click()
    wait(driver).until(lambda d: d.find_elements(By.CSS_SELECTOR, f'#queries tbody tr[data-id="{query_id}"]'))
    wait(driver).until(lambda d: text_of(d, "selected-id") == query_id)
    assert not driver.find_element(By.ID, "error").is_displayed(), text_of(driver, "error")


def shown_rows(driver: webdriver.Chrome) -> list[dict[str, str]]:
    """The rows table as {column: cell text}."""
    return driver.execute_script("""
        const heads = [...document.querySelectorAll('#rows thead th')].map((th) => th.textContent);
        return [...document.querySelectorAll('#rows tbody tr')].map(
            (tr) => Object.fromEntries([...tr.cells].map((td, i) => [heads[i], td.textContent])));""")


def wait_rows(driver: webdriver.Chrome, served: Served, until: Any) -> list[dict[str, str]]:
    try:
        return wait(driver, ROWS_TIMEOUT).until(lambda d: (rows := shown_rows(d)) and until(rows) and rows)
    except Exception:
        print(served.log_tail())
        raise


def assert_no_token(driver: webdriver.Chrome, served: Served) -> None:
    visible = driver.find_element(By.TAG_NAME, "body").text
    source = driver.page_source
    for token in served.tokens.values():
        assert token not in visible and token not in source and token not in driver.current_url


def assert_no_alert(driver: webdriver.Chrome) -> None:
    with pytest.raises(NoAlertPresentException):
        driver.switch_to.alert.text  # noqa: B018


# -- the tests ----------------------------------------------------------------------------------------
def test_a_bad_token_stays_signed_out(served: Served, browser: webdriver.Chrome) -> None:
    browser.get(served.url + "/")
    assert browser.title == "streamwarden console"
    browser.find_element(By.ID, "token").send_keys("sw_0123456789abcdef_not-a-real-token")
    browser.find_element(By.ID, "signin").click()
    wait(browser).until(lambda d: "invalid token" in d.find_element(By.ID, "error").text)
    assert not browser.find_element(By.ID, "app").is_displayed()
    assert browser.execute_script("return sessionStorage.length") == 0
    csp = browser.find_element(By.CSS_SELECTOR, 'meta[http-equiv="Content-Security-Policy"]').get_attribute("content")
    assert "connect-src 'self'" in csp and "object-src 'none'" in csp


def test_ann_checks_registers_and_watches_her_rows_arrive(served: Served, browser: webdriver.Chrome) -> None:
    sign_in(browser, served, "ann")
    assert browser.find_element(By.ID, "queries-empty").is_displayed()
    assert not browser.find_element(By.ID, "tab-audit").is_displayed()  # not an admin

    fill_and_check(browser, "q1", "SELECT sensor,\n FROM Readings")  # bad CQL: its position is shown
    wait(browser).until(lambda d: "line 2, column 2" in d.find_element(By.ID, "error").text)
    assert not browser.find_element(By.ID, "confirm").is_enabled()

    register(browser, "q1", Q1, "doctors_read")
    assert "Signed in as ann" in browser.find_element(By.ID, "whoami").text
    register(browser, "q2", Q2, "doctors_read")  # q2 is selected: its rows will arrive live

    answer = served.post("/v1/streams/Readings/records", "readings",
                         content=records((1, 20.0, XSS), (2, 70.0, "a")))
    assert answer.status_code == 201, answer.text
    rows = wait_rows(browser, served, lambda rows: len(rows) >= 2)
    assert sorted(r["sensor"] for r in rows) == ["1", "2"]
    assert next(r for r in rows if r["sensor"] == "1")["site"] == XSS  # shown as text
    assert browser.find_elements(By.CSS_SELECTOR, "#rows img") == []
    assert browser.execute_script("return document.images.length") == 0
    assert_no_alert(browser)
    assert browser.find_element(By.ID, "stream-state").text == "live"

    browser.find_element(By.CSS_SELECTOR, '#queries tbody tr[data-id="q1"] td.query').click()
    wait(browser).until(lambda d: text_of(d, "selected-id") == "q1")
    rows = wait_rows(browser, served, lambda rows: len(rows) >= 2)
    assert sorted((r["sensor"], r["value"]) for r in rows) == [("1", "20"), ("2", "70")]
    assert all("site" not in r for r in rows)
    wait(browser).until(lambda d: d.find_element(
        By.CSS_SELECTOR, '#queries tbody tr[data-id="q1"] td.rows-delivered').text == "2")  # live counts
    assert_no_token(browser, served)


def test_eve_is_told_nothing_is_authorized(served: Served, browser: webdriver.Chrome) -> None:
    sign_out(browser)
    assert browser.find_elements(By.CSS_SELECTOR, "#queries tbody tr") == []  # nothing of ann's stays
    sign_in(browser, served, "eve")
    assert browser.find_elements(By.CSS_SELECTOR, "#queries tbody tr") == []
    assert browser.find_element(By.ID, "queries-empty").is_displayed()
    assert not browser.find_element(By.ID, "selected-panel").is_displayed()

    fill_and_check(browser, "q1", Q1)
    wait(browser).until(lambda d: "nothing of this query is authorized" in d.find_element(By.ID, "error").text)
    assert not browser.find_element(By.ID, "confirm").is_enabled()
    explained = text_of(browser, "explanation")
    assert "0 part(s) authorized" in explained and "Analyst" in explained, explained
    assert browser.find_elements(By.CSS_SELECTOR, "#queries tbody tr") == []


def test_bob_sees_only_the_rows_his_policy_allows(served: Served, browser: webdriver.Chrome) -> None:
    sign_out(browser)
    sign_in(browser, served, "bob")
    assert browser.find_elements(By.CSS_SELECTOR, "#queries tbody tr") == []  # ann's q1 is hers alone
    register(browser, "q1", Q1, "nurses_low")
    answer = served.post("/v1/streams/Readings/records", "readings", content=records((11, 20.0, "b"), (12, 70.0, "b")))
    assert answer.status_code == 201, answer.text
    rows = wait_rows(browser, served, lambda rows: any(r.get("sensor") == "11" for r in rows))
    assert all(float(r["value"]) < 50 for r in rows), rows  # 12 came in the same batch as 11: it is not there
    assert {r["sensor"] for r in rows} <= {"1", "11"}
    assert all(r["_policies"] == '["nurses_low"]' for r in rows)


def test_bob_finds_what_he_may_query_and_registers_it_from_the_console_alone(served: Served,
                                                                           browser: webdriver.Chrome) -> None:
    """No catalog at hand: the console lists the streams his policies open, with a query that
    works, and says in words what he would receive before he registers it."""
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, '#openings-table tr[data-stream="Readings"]'))
    readings = browser.find_element(By.CSS_SELECTOR, '#openings-table tr[data-stream="Readings"]').text
    assert "nurses_low" in readings and "value < 50" in readings and "site" not in readings, readings
    assert browser.find_elements(By.CSS_SELECTOR, '#openings-table tr[data-stream="Vitals"]')  # providers decide
    browser.find_element(By.CSS_SELECTOR, '#openings-table tr[data-stream="Readings"] button.use-example').click()
    assert browser.find_element(By.ID, "query-text").get_attribute("value") == "SELECT sensor, value FROM Readings"
    assert browser.find_element(By.ID, "query-id").get_attribute("value") == "readings"
    browser.find_element(By.ID, "check").click()
    wait(browser).until(lambda d: d.find_element(By.ID, "confirm").is_enabled())
    words = text_of(browser, "in-words")
    assert "You will receive sensor and value of Readings" in words and "value < 50" in words, words
    browser.find_element(By.ID, "confirm").click()
    wait(browser).until(lambda d: d.find_elements(By.CSS_SELECTOR, '#queries tbody tr[data-id="readings"]'))
    assert not browser.find_element(By.ID, "error").is_displayed(), text_of(browser, "error")


def test_root_sees_users_policies_grants_network_and_audit(served: Served, browser: webdriver.Chrome,
                                                          tmp_path: Path) -> None:
    sign_out(browser)
    sign_in(browser, served, "root")
    assert "admin" in browser.find_element(By.ID, "whoami").text

    browser.find_element(By.ID, "tab-users").click()
    # Read inside the waits: the console re-renders its tables as answers arrive, so an element
    # found a moment ago may be stale (the wait retries on StaleElementReferenceException).
    wait(browser).until(lambda d: [e.get_attribute("data-user") for e in d.find_elements(
        By.CSS_SELECTOR, "#users tbody tr")] == ["ann", "bob", "eve", "root"])
    browser.find_element(By.ID, "tab-policies").click()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#policies tbody tr")) == 2)
    wait(browser).until(lambda d: "value < 50" in d.find_element(
        By.CSS_SELECTOR, '#policies tr[data-policy="nurses_low"]').text)

    browser.find_element(By.ID, "tab-grants").click()  # one lane per (query, user), each granted for good
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#grants svg g.lane rect.granted")) == 4)
    wait(browser).until(lambda d: {(g.get_attribute("data-query"), g.get_attribute("data-user"))
                                   for g in d.find_elements(By.CSS_SELECTOR, "#grants svg g.lane")}
                        == {("ann/q1", "ann"), ("ann/q2", "ann"), ("bob/q1", "bob"), ("bob/readings", "bob")})

    browser.find_element(By.ID, "tab-network").click()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#network svg g.pipeline")) == 4)
    wait(browser).until(lambda d: {g.get_attribute("data-active") for g in d.find_elements(
        By.CSS_SELECTOR, "#network svg g.pipeline")} == {"true"})
    wait(browser).until(lambda d: {g.get_attribute("data-user") for g in d.find_elements(
        By.CSS_SELECTOR, "#network svg g.user")} == {"ann", "bob"})
    # each pipeline's box says what it delivered to whom (edge labels crossing mid-canvas did not)
    wait(browser).until(lambda d: {e.text.split(" ")[1] for e in d.find_elements(
        By.CSS_SELECTOR, "#network svg text.delivered")} == {"ann", "bob"})
    browser.find_element(By.ID, "network").screenshot(str(tmp_path / "network.png"))  # kept for a person to look at
    print(f"the network view: {tmp_path / 'network.png'}")

    browser.find_element(By.ID, "tab-audit").click()
    wait(browser).until(lambda d: len(d.find_elements(By.CSS_SELECTOR, "#audit tbody tr")) > 10)
    seqs = wait(browser).until(lambda d: [int(e.get_attribute("data-seq"))
                                          for e in d.find_elements(By.CSS_SELECTOR, "#audit tbody tr")] or None)
    assert seqs == sorted(seqs, reverse=True)  # newest first
    audit = text_of(browser, "audit")
    assert "query.create" in audit and "user:ann" in audit and "user:eve" in audit
    browser.find_element(By.ID, "audit-principal").send_keys("user:eve")
    browser.find_element(By.ID, "audit-apply").click()
    wait(browser).until(lambda d: "of user:eve" in d.find_element(By.ID, "audit-count").text)
    wait(browser).until(lambda d: {e.text for e in d.find_elements(By.CSS_SELECTOR, "#audit tbody td.principal")}
                        == {"user:eve"})
    assert_no_token(browser, served)


def test_root_reads_a_five_minute_grant_at_a_readable_width(served: Served, browser: webdriver.Chrome,
                                                            tmp_path: Path) -> None:
    """Grants are in event time (here March), far from the wall clock: the timeline spans the
    grants' own instants, so five minutes are not a two-pixel sliver. The screenshot is kept."""
    answer = served.post("/v1/queries", "root", json={"id": "shared5", "query": Q1, "users": ["ann"]})
    assert answer.status_code == 201, answer.text
    answer = served.post("/v1/grants", "root", json={"query": "shared5", "user": "ann", "sign": "+",
                                                      "ts": "2026-03-01T10:00:00Z", "until": "2026-03-01T10:05:00Z"})
    assert answer.status_code == 201, answer.text
    browser.find_element(By.ID, "tab-grants").click()
    browser.find_element(By.CSS_SELECTOR, '[data-refresh="grants"]').click()
    lane = '#grants svg g.lane[data-query="shared5"] rect.granted'
    width = wait(browser).until(lambda d: (bars := d.find_elements(By.CSS_SELECTOR, lane))
                                and float(bars[0].get_attribute("width")))
    assert width > 300, width  # of the 620 pixels the lanes have
    axis = [e.text for e in browser.find_elements(By.CSS_SELECTOR, "#grants svg text.small")]
    assert any(t.startswith("2026-03-01 09:5") for t in axis) and any(t.startswith("2026-03-01 10:0") for t in axis)
    browser.find_element(By.ID, "grants").screenshot(str(tmp_path / "grants.png"))
    print(f"the grants view: {tmp_path / 'grants.png'}")


def test_no_token_in_any_request_url_or_the_log(served: Served, browser: webdriver.Chrome) -> None:
    urls = set()
    for entry in browser.get_log("performance"):
        message = json.loads(entry["message"])["message"]
        if message.get("method") == "Network.requestWillBeSent":
            urls.add(message["params"]["request"]["url"])
    assert any("/stream" in u for u in urls) and any("/v1/audit" in u for u in urls)
    for token in served.tokens.values():
        assert not any(token in u for u in urls)
        assert token not in served.log.read_text(errors="replace")
    sign_out(browser)
