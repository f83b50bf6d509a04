"""The viewer in a real browser: headless Chromium (Debian's chromium + chromium-driver, `make install`) via selenium.

The recorded fast demo run (fixtures/demo_fast: verl main_ppo's trajectory dump and file-logger metrics, the eval
harness's dumps before and after) is filtered to wrong answers, one is opened and read in token mode; the
reasoning-mode view compares eval before and after RL by number of tool calls; an eval's token sidecar is read in token
mode; a program printing <script>/<img onerror> must not run; a 1,024-trajectory step lists in under a second;
--serve reads a trajectory's details lazily.
"""

from __future__ import annotations

import json
import os
import shutil
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from view_fixtures import (
    DEMO_FAST,
    XSS_IMG,
    XSS_SCRIPT,
    eval_record,
    eval_tokens,
    training_record,
    word_tokenizer,
    write_jsonl,
)

from agentrl_recipe.view.build import build_page
from agentrl_recipe.view.serve import make_server
from agentrl_recipe.view.sources import discover

CHROMIUM, DRIVER = shutil.which("chromium"), shutil.which("chromedriver")
webdriver = pytest.importorskip("selenium.webdriver", reason="selenium absent (pip install -e '.[test]')")
pytestmark = pytest.mark.skipif(
    not (CHROMIUM and DRIVER), reason="chromium/chromedriver absent: `make install` installs Debian's packages"
)
LIST_BUDGET_MS = 1000.0


@pytest.fixture(scope="module")
def browser(tmp_path_factory: pytest.TempPathFactory) -> Iterator[object]:
    from selenium.webdriver.chrome.service import Service

    options = webdriver.ChromeOptions()
    options.binary_location = str(CHROMIUM)
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1000",
    ):
        options.add_argument(arg)
    # Chromium's own temp folders (its singleton socket's, left in /tmp by each run otherwise) go to the test's scratch
    scratch = {**os.environ, "TMPDIR": str(tmp_path_factory.mktemp("chromium"))}
    driver = webdriver.Chrome(options=options, service=Service(executable_path=str(DRIVER), env=scratch))
    driver.implicitly_wait(5)
    try:
        yield driver
    finally:
        driver.quit()


def _open(driver, url: str) -> None:
    driver.get(url)
    assert driver.execute_script("return document.body.dataset.ready") == "1"


def _select(driver, element_id: str, value: str) -> None:
    driver.execute_script(
        "const s = document.getElementById(arguments[0]); s.value = arguments[1];s.dispatchEvent(new Event('change'));",
        element_id,
        value,
    )


def test_demo_page_wrong_answer_in_token_mode(browser, tmp_path: Path) -> None:
    page, data = build_page(DEMO_FAST, tmp_path / "view.html")
    _open(browser, page.as_uri())
    reasoning = browser.find_elements("css selector", "#reasoning-table tbody tr")
    assert {(r.get_attribute("data-run"), r.get_attribute("data-step")) for r in reasoning} == {
        ("runs/rl", "1"), ("eval_before", "eval_before"), ("eval_after", "eval_after"),
    }  # fmt: skip
    browser.find_element("css selector", "#tabs button[data-view=list]").click()
    _select(browser, "f-run", "runs/rl")
    _select(browser, "f-correct", "wrong")
    rows = browser.find_elements("css selector", "#list tbody tr")
    wrong = [t for t in data["trajectories"] if t["run"] == "runs/rl" and t["correct"] is False]
    assert len(rows) == len(wrong) > 0
    assert {r.find_elements("tag name", "td")[4].text for r in rows} == {"wrong"}
    first_id = rows[0].get_attribute("data-id")
    rows[0].click()
    assert browser.find_element("css selector", "#view-trajectory h3").text.endswith("· wrong")
    browser.find_element("id", "token-mode").click()
    spans = browser.find_elements("css selector", "#tokens span")
    tokens = data["details"][first_id]["tokens"]
    assert [s.get_attribute("class") for s in spans] == [f"m{m}" for m in tokens["mask"]]
    rendered = browser.execute_script("return document.getElementById('tokens').textContent")
    assert rendered == "".join(tokens["text"])
    assert "<tool_call>" in rendered  # the model's call, as the trainer saw it


def _eval_run(folder: Path, created: str, rows: list[tuple[int, bool]]) -> None:
    records = [eval_record(f"p{i}", 0, correct=c, calls=n) for i, (n, c) in enumerate(rows)]
    write_jsonl(folder / "rollouts.jsonl", records)
    (folder / "report.json").write_text(json.dumps({"created_utc": created}))


def test_reasoning_mode_before_and_after(browser, tmp_path: Path) -> None:
    # named so that their names sort after before: the page orders eval runs by when they ran
    _eval_run(tmp_path / "eval_before", "2026-01-01T00:00:00+00:00", [(0, False), (0, False), (1, True), (2, False)])
    _eval_run(tmp_path / "eval_after", "2026-01-01T01:00:00+00:00", [(1, True), (1, True), (1, True), (2, False)])
    rows = [training_record(s, i, calls=1, acc=True) for s in (1, 2) for i in range(4)]
    write_jsonl(tmp_path / "runs" / "rl" / "trajectories" / "step_000001.jsonl", rows[:4])
    write_jsonl(tmp_path / "runs" / "rl" / "trajectories" / "step_000002.jsonl", rows[4:])
    page, _ = build_page(tmp_path, tmp_path / "view.html")
    _open(browser, page.as_uri())
    browser.find_element("css selector", "#tabs button[data-view=reasoning]").click()
    assert [browser.find_element("id", i).get_attribute("value") for i in ("rm-a", "rm-b")] == [
        "eval_before", "eval_after",
    ]  # fmt: skip
    table = [
        [c.text for c in tr.find_elements("css selector", "th, td")]
        for tr in browser.find_elements("css selector", "#rm-compare-table tr")
    ]
    assert table == [
        ["tool calls", "before: trajectories (share)", "before: accuracy", "after: trajectories (share)",
         "after: accuracy"],
        ["0", "2 (0.50)", "0.00", "0", "–"],
        ["1", "1 (0.25)", "1.00", "3 (0.75)", "1.00"],
        ["2", "1 (0.25)", "0.00", "1 (0.25)", "0.00"],
        ["all: accuracy", "0.250", "0.750"],
        ["calls / trajectory", "0.75", "1.25"],
        ["tool success", "1.000", "1.000"],
        ["trajectories", "4", "4"],
    ]  # fmt: skip
    _select(browser, "rm-a", "runs/rl · step 1")
    one_call = browser.find_element("css selector", "#rm-compare-table tr[data-calls='1'] td:nth-child(2)")
    assert one_call.text == "4 (1.00)"
    order = [r.get_attribute("data-step") for r in browser.find_elements("css selector", "#reasoning-table tbody tr")]
    assert order == ["1", "2", "eval_before", "eval_after"]
    # the same prompt before and after: the Before / after tab opens on the two eval runs
    browser.find_element("css selector", "#tabs button[data-view=compare]").click()
    assert [browser.find_element("id", i).get_attribute("value") for i in ("cmp-a", "cmp-b", "cmp-prompt")] == [
        "eval_before", "eval_after", "p0",
    ]  # fmt: skip
    sides = browser.find_elements("css selector", "#cmp-out > div li")
    assert [s.text for s in sides] == ["wrong, reward -1.000, 0 calls", "correct, reward 1.000, 1 calls"]


def test_eval_token_mode(browser, tmp_path: Path) -> None:
    ev = tmp_path / "eval_after"
    write_jsonl(ev / "rollouts.jsonl", [eval_record("p0", 0, correct=False)])
    write_jsonl(ev / "rollouts.tokens.jsonl", [eval_tokens("p0", 0)])
    (ev / "report.json").write_text(json.dumps({"protocol": {"model": str(word_tokenizer(tmp_path / "model"))}}))
    page, _ = build_page(ev, tmp_path / "view.html")
    _open(browser, page.as_uri())
    browser.execute_script("location.hash = arguments[0]", "t=eval_after/p0/0")
    heading = browser.find_element("css selector", "#view-trajectory h3").text
    assert heading == "eval_after · toy · wrong"
    browser.find_element("id", "token-mode").click()
    spans = browser.find_elements("css selector", "#tokens span")
    assert [(s.text, s.get_attribute("class")) for s in spans] == [
        ("What", "m0"), ("is", "m0"), ("2", "m0"), ("+", "m0"), ("2", "m0"), ("?", "m0"),
        ("<tool_call>", "m1"), ("print", "m1"), ("4", "m0"), ("4", "m1"),
    ]  # fmt: skip


def test_untrusted_text_never_runs(browser, tmp_path: Path) -> None:
    record = eval_record("p<b>0</b>", 0, correct=False, tool_output=XSS_SCRIPT + XSS_IMG)
    record["data_source"] = XSS_IMG
    write_jsonl(tmp_path / "ev" / "rollouts.jsonl", [record])
    page, _ = build_page(tmp_path / "ev", tmp_path / "xss.html")
    _open(browser, page.as_uri())
    browser.find_element("css selector", "#tabs button[data-view=list]").click()
    browser.find_element("css selector", "#list tbody tr").click()
    tool_turn = browser.find_element("css selector", "#turns .turn.tool pre")
    assert tool_turn.text == XSS_SCRIPT + XSS_IMG  # shown as text
    assert browser.execute_script("return window.__xss === undefined && document.querySelectorAll('img').length === 0")


def test_a_1024_trajectory_step_lists_in_under_a_second(browser, tmp_path: Path) -> None:
    rows = [training_record(7, i, calls=i % 4, acc=i % 3 == 0) for i in range(1024)]
    write_jsonl(tmp_path / "run" / "trajectories" / "step_000007.jsonl", rows)
    write_jsonl(
        tmp_path / "run" / "trajectories" / "step_000001.jsonl",
        [training_record(1, i, calls=1, acc=True) for i in range(16)],
    )
    page, _ = build_page(tmp_path / "run", tmp_path / "big.html")
    _open(browser, page.as_uri())
    ms = browser.execute_script(
        "const s = document.getElementById('f-step'); s.value = '7'; const t0 = performance.now();"
        "s.dispatchEvent(new Event('change'));"
        "const n = document.querySelectorAll('#list tbody tr').length; return [performance.now() - t0, n];"
    )
    print(f"1,024-trajectory step listed in {ms[0]:.0f} ms")
    assert ms[1] == 1024
    assert ms[0] < LIST_BUDGET_MS


def test_with_turns_only_lists_the_embedded_trajectories(browser, tmp_path: Path) -> None:
    rows = [training_record(1, i, calls=1, acc=True, pad="x" * 20_000) for i in range(40)]
    write_jsonl(tmp_path / "run" / "trajectories" / "step_000001.jsonl", rows)
    page, data = build_page(tmp_path / "run", tmp_path / "page.html", budget_bytes=300_000)
    embedded = set(data["details"])
    assert 0 < len(embedded) < 40
    _open(browser, page.as_uri())
    browser.find_element("css selector", "#tabs button[data-view=list]").click()
    grey = {r.get_attribute("data-id") for r in browser.find_elements("css selector", "#list tbody tr.nodetail")}
    assert len(grey) == 40 - len(embedded) and not grey & embedded
    browser.find_element("id", "f-detail").click()
    listed = {r.get_attribute("data-id") for r in browser.find_elements("css selector", "#list tbody tr")}
    assert listed == embedded


def test_serve_reads_details_lazily(browser) -> None:
    server = make_server(discover(DEMO_FAST), 0)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        _open(browser, f"http://127.0.0.1:{server.server_address[1]}/")
        data = json.loads(browser.execute_script("return document.getElementById('data').textContent"))
        assert data["lazy"] is True and data["details"] == {}
        first = next(t for t in data["trajectories"] if t["run"] == "runs/rl")
        browser.execute_script("location.hash = arguments[0]", "t=" + first["id"])
        browser.find_element("id", "token-mode").click()
        assert browser.find_elements("css selector", "#tokens span.m1")
    finally:
        server.shutdown()
        server.server_close()
