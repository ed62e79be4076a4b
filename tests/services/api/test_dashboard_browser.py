"""The dashboard in a real headless Chromium (Debian's ``chromium`` and ``chromium-driver``, driven by
Selenium): every chart draws data points with labelled axes, the page follows new steps live, a seed
submitted through the form shows the executor's verdict and appears among the user seeds, and the page
fits a phone-width window. Screenshots are saved under ``test-artifacts/``."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
import redis
from selenium import webdriver
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.support.ui import WebDriverWait

from azr.services.store.keys import Keys
from azr.services.store.metrics import MetricsStream
from tests.services.api.conftest import REPO, TOKEN, ApiProcess
from tests.services.api.run_data import fill_run, step_values

pytestmark = pytest.mark.slow

ARTIFACTS = Path(os.environ.get("AZR_TEST_ARTIFACTS", REPO / "test-artifacts"))
CHROMIUM = shutil.which("chromium") or "/usr/bin/chromium"
CHROMEDRIVER = shutil.which("chromedriver") or "/usr/bin/chromedriver"
CHARTS = [
    "buffers", "solve", "valid", "errors", "learnability", "complexity", "diversity", "reward", "kl",
    "length", "throughput", "step-time", "policy",
]  # fmt: skip
WAIT_S = 30


@pytest.fixture
def browser() -> Iterator[webdriver.Chrome]:
    if not (Path(CHROMIUM).exists() and Path(CHROMEDRIVER).exists()):
        pytest.fail(
            "the browser tests need Debian's chromium and chromium-driver (run scripts/host-setup.sh)"
        )
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage"):
        options.add_argument(flag)
    options.add_argument("--window-size=1366,900")
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    yield driver
    driver.quit()


def _wait(driver: webdriver.Chrome, condition: Callable[[webdriver.Chrome], Any], what: str) -> Any:
    return WebDriverWait(driver, WAIT_S, poll_frequency=0.2).until(condition, message=f"waiting for {what}")


def _points(driver: webdriver.Chrome) -> dict[str, int]:
    """Drawn data points (plotly's SVG markers and bars) per chart."""
    counts: dict[str, int] = driver.execute_script(
        "return Object.fromEntries([...document.querySelectorAll('.chart')]"
        ".map((c) => [c.id.replace('chart-', ''), c.querySelectorAll('.point').length]))"
    )
    return counts


def _full_page_screenshot(driver: webdriver.Chrome, width: int, name: str, *, mobile: bool) -> Path:
    """Emulate a screen ``width`` CSS pixels wide and as tall as the page, then save a screenshot."""
    metrics = {"width": width, "height": 900, "deviceScaleFactor": 1, "mobile": mobile}
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", metrics)
    height = driver.execute_script("return document.documentElement.scrollHeight")
    driver.execute_cdp_cmd("Emulation.setDeviceMetricsOverride", {**metrics, "height": height})
    driver.execute_script("window.scrollTo(0, 0)")
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    path = ARTIFACTS / name
    driver.save_screenshot(str(path))
    return path


def _phone_overflow_px(driver: webdriver.Chrome) -> int:
    """How much wider than a 390 px phone screen the page lays out, once the charts have re-drawn."""
    driver.execute_cdp_cmd(
        "Emulation.setDeviceMetricsOverride",
        {"width": 390, "height": 844, "deviceScaleFactor": 2, "mobile": True},
    )
    driver.refresh()
    _wait(driver, lambda d: all(n > 0 for n in _points(d).values()), "the charts at phone width")
    overflow: int = driver.execute_script(
        "return document.documentElement.scrollWidth - document.documentElement.clientWidth"
    )
    return overflow


def test_dashboard_draws_follows_and_takes_a_seed(
    browser: webdriver.Chrome, store: redis.Redis, keys: Keys
) -> None:
    fill_run(store, keys, steps=40, tasks_per_type=15)
    server = ApiProcess(keys).start()
    try:
        browser.get(server.url + "/")
        _wait(browser, lambda d: all(n > 0 for n in _points(d).values()), "every chart to draw points")
        points = _points(browser)
        assert sorted(points) == sorted(CHARTS)
        assert points["solve"] >= 3 * 40, points
        titles = browser.execute_script(
            "const text = (c, s) => c.querySelector(s)?.textContent || '';"
            "return [...document.querySelectorAll('.chart')].map((c) => ["
            "text(c, '.g-xtitle'), text(c, '.g-ytitle'), c.querySelectorAll('.legend .traces').length])"
        )
        for chart, (x_title, y_title, legend_entries) in zip(CHARTS, titles, strict=True):
            assert x_title and y_title, f"chart {chart} lacks an axis title"
            assert legend_entries >= 1, f"chart {chart} has no legend"
        assert any("(%)" in y for _, y, _ in titles) and any("(s)" in y for _, y, _ in titles)
        assert titles[CHARTS.index("kl")][2] == 3, "KL, entropy and the imitation loss"

        _wait(browser, lambda d: d.find_element(By.ID, "live").text == "connected", "the event stream")
        MetricsStream(store, keys).publish(40, step_values(40))
        _wait(browser, lambda d: d.find_element(By.ID, "step").text == "40", "the new step to show")

        program = browser.find_element(By.ID, "seed-program")
        program.clear()
        program.send_keys("def f(x):\n    return x * x + 1")
        inputs = browser.find_element(By.ID, "seed-inputs")
        inputs.clear()
        inputs.send_keys("7")
        browser.find_element(By.ID, "seed-token").send_keys(TOKEN)
        browser.find_element(By.ID, "seed-submit").click()
        verdict = _wait(
            browser, lambda d: d.find_element(By.ID, "seed-verdict").text.startswith("added"), "verdict"
        )
        assert verdict
        text = browser.find_element(By.ID, "seed-verdict").text
        assert "gold outputs: 50" in text
        task_id = text.split("task ")[1].split()[0]
        _wait(
            browser,
            lambda d: d.find_elements(By.CSS_SELECTOR, f'#seeds-table tr[data-task-id="{task_id}"]'),
            "the seed among the user seeds",
        )

        program.clear()
        program.send_keys("import os\ndef f(x):\n    return x")
        browser.find_element(By.ID, "seed-submit").click()
        _wait(browser, lambda d: "forbidden" in d.find_element(By.ID, "seed-verdict").text, "a refusal")

        laptop = _full_page_screenshot(browser, 1366, "dashboard-laptop.png", mobile=False)
        overflow = _phone_overflow_px(browser)
        assert overflow <= 1, f"the page is {overflow}px wider than a phone screen"
        phone = _full_page_screenshot(browser, 390, "dashboard-phone.png", mobile=True)
        assert laptop.stat().st_size > 50_000 and phone.stat().st_size > 20_000
    finally:
        server.stop()
