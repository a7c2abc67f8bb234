"""The toy in a real browser, used the way a person uses it.

Voilà serves a two-cell notebook (a FloatToy and a FormatCompare) on 127.0.0.1 with a real
kernel; Playwright drives Debian's chromium (/usr/bin/chromium, no browser download): it types
3.141, reads 0x4248 and 3.140625 off the page, clicks the lowest mantissa bit, walks the bits
with the keyboard, switches to E4M3FN and checks 500 -> NaN, and 448 with saturate on.

Screenshots go to a pytest tmp dir (the path is printed). ``FLOATLAB_DOCS_SCREENSHOT=1`` also
writes docs/floattoy.png, the README's picture.

On a machine without /usr/bin/chromium (or without the test extra) the test skips, saying why;
in CI (``CI`` set) it fails instead, so the browser test can never silently stop running.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
    "--disable-background-networking", "--disable-component-update", "--disable-sync",
]
ROOT = Path(__file__).resolve().parents[1]
IN_CI = bool(os.environ.get("CI"))
TIMEOUT_MS = 20_000  # one round trip browser -> kernel -> browser; generous for a busy CI box


def _unavailable(reason: str):
    if IN_CI:
        pytest.fail(f"{reason} -- CI must run the browser test (.ci/run installs it)")
    pytest.skip(reason)


def _require_tools():
    if not os.access(CHROMIUM, os.X_OK):
        _unavailable(f"no {CHROMIUM}: install Debian's chromium (apt-get install chromium)")
    for module, extra in (("playwright", "playwright"), ("voila", "voila")):
        try:
            __import__(module)
        except ImportError:
            _unavailable(f"{module} is not installed: pip install -e '.[test]' ({extra})")


NOTEBOOK = {
    "cells": [
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": ["from floatlab.widgets import FloatToy, FormatCompare\n",
                    "FloatToy('fp16', 1.0)"]},
        {"cell_type": "code", "execution_count": None, "metadata": {}, "outputs": [],
         "source": ["FormatCompare(1.0, formats=['fp32', 'bf16', 'fp16', 'e4m3fn'])"]},
    ],
    "metadata": {"kernelspec": {"display_name": "Python 3", "language": "python",
                                "name": "python3"}},
    "nbformat": 4,
    "nbformat_minor": 5,
}


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="module")
def voila_url(tmp_path_factory):
    _require_tools()
    folder = tmp_path_factory.mktemp("voila")
    (folder / "toy.ipynb").write_text(json.dumps(NOTEBOOK), encoding="utf-8")
    port = _free_port()
    env = dict(os.environ)
    # The kernel imports this checkout's floatlab, installed or not.
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    log = (folder / "voila.log").open("w")
    server = subprocess.Popen(
        [sys.executable, "-m", "voila", "--no-browser", f"--port={port}",
         "--Voila.ip=127.0.0.1", "--show_tracebacks=True", "toy.ipynb"],
        cwd=folder, env=env, stdout=log, stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the kernel goes down with it
    )
    url = f"http://127.0.0.1:{port}/"
    try:
        deadline = time.monotonic() + 90
        while True:
            if server.poll() is not None:
                pytest.fail(f"voila exited: {(folder / 'voila.log').read_text()[-2000:]}")
            try:
                urllib.request.urlopen(url + "voila/static/", timeout=2)  # noqa: S310
                break
            except OSError as err:
                if getattr(err, "code", None):  # an HTTP error is an answer: it is up
                    break
                if time.monotonic() > deadline:
                    pytest.fail(f"voila did not start: {(folder / 'voila.log').read_text()}")
                time.sleep(0.3)
        yield url
    finally:
        os.killpg(server.pid, signal.SIGTERM)  # the group of the server we started
        try:
            server.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(server.pid, signal.SIGKILL)
            server.wait()
        log.close()


@pytest.fixture(scope="module")
def page(voila_url):
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
        page = browser.new_page(viewport={"width": 1100, "height": 900},
                                device_scale_factor=2)
        # Nothing leaves the machine: the page's CDN fetches (fonts, MathJax) are refused.
        page.route("**/*", lambda route: route.continue_()
                   if route.request.url.startswith(voila_url) else route.abort())
        page.set_default_timeout(TIMEOUT_MS)
        page.goto(voila_url, timeout=120_000)  # Voilà runs the notebook before answering
        page.wait_for_selector(".floatlab-toy-widget [data-bit]", timeout=120_000)
        yield page
        browser.close()


@pytest.fixture(scope="module")
def shots(tmp_path_factory):
    folder = tmp_path_factory.mktemp("screenshots")
    print(f"\nscreenshots: {folder}")
    return folder


def test_the_toy_in_a_browser(page, shots):
    from playwright.sync_api import expect

    toy = page.locator(".floatlab-toy-widget")
    stored, hex_code = toy.locator(".flt-stored"), toy.locator(".flt-hex")
    value = toy.locator("input.flt-value")

    # Type 3.141 into the fp16 toy.
    value.fill("3.141")
    value.press("Enter")
    expect(hex_code).to_have_text("0x4248")
    expect(stored).to_have_text("3.140625")
    expect(toy.locator(".flt-group-exponent .flt-caption")).to_contain_text("10000 = 16")
    expect(toy.locator(".flt-group-mantissa .flt-caption")).to_contain_text("584")
    toy.screenshot(path=shots / "1_fp16_3.141.png")
    if os.environ.get("FLOATLAB_DOCS_SCREENSHOT"):
        toy.screenshot(path=ROOT / "docs" / "floattoy.png")

    # Click the lowest mantissa bit: one ulp up.
    toy.locator("[data-bit='0']").click()
    expect(stored).to_have_text("3.142578125")
    expect(hex_code).to_have_text("0x4249")
    expect(toy.locator("[data-bit='0']")).to_have_attribute("aria-checked", "true")

    # The keyboard: the clicked bit has focus; ArrowLeft moves to bit 1, Space flips it.
    expect(toy.locator("[data-bit='0']")).to_be_focused()
    page.keyboard.press("ArrowLeft")
    expect(toy.locator("[data-bit='1']")).to_be_focused()
    page.keyboard.press("Space")
    expect(hex_code).to_have_text("0x424b")
    expect(stored).to_have_text("3.146484375")
    expect(toy.locator("[data-bit='1']")).to_be_focused()  # focus survives the redraw
    page.keyboard.press("Space")
    expect(hex_code).to_have_text("0x4249")
    toy.screenshot(path=shots / "2_flipped.png")

    # E4M3FN: 500 overflows to NaN, or saturates to 448.
    toy.locator("select.flt-format-select").select_option("float8_e4m3fn")
    expect(toy.locator(".flt-format")).to_contain_text("float8_e4m3fn")
    value.fill("500")
    value.press("Enter")
    expect(stored).to_have_text("NaN")
    expect(hex_code).to_have_text("0x7f")
    toy.screenshot(path=shots / "3_e4m3fn_500_nan.png")
    toy.locator("input.flt-saturate").check()
    expect(stored).to_have_text("448")
    expect(hex_code).to_have_text("0x7e")
    toy.screenshot(path=shots / "4_e4m3fn_500_saturated.png")

    # A typo: the message is shown and nothing else changes.
    value.fill("3.14.1")
    value.press("Enter")
    expect(toy.locator(".flt-message")).to_contain_text("cannot read '3.14.1' as a number")
    expect(stored).to_have_text("448")
    toy.screenshot(path=shots / "5_typo.png")

    # A custom format by its spec.
    spec = toy.locator("input.flt-spec")
    spec.fill("e3m4")
    spec.press("Enter")
    expect(toy.locator(".flt-format")).to_contain_text("float8_e3m4")
    expect(toy.locator(".flt-message")).to_have_text("")


def test_format_compare_in_a_browser(page, shots):
    from playwright.sync_api import expect

    table = page.locator(".floatlab-compare-widget")
    value = table.locator("input.flt-value")
    value.fill("1e6")
    value.press("Enter")
    rows = table.locator("tr.flt-row")
    expect(rows).to_have_count(4)
    expect(table.locator("tr[data-format='float16'] .flt-stored")).to_have_text("inf")
    expect(table.locator("tr[data-format='float8_e4m3fn'] .flt-stored")).to_have_text("NaN")
    expect(table.locator("tr[data-format='bfloat16'] .flt-hex")).to_have_text("0x4974")
    table.screenshot(path=shots / "6_compare_1e6.png")
    assert (shots / "6_compare_1e6.png").stat().st_size > 5_000


def test_missing_chromium_skips_on_a_laptop_and_fails_in_ci(monkeypatch):
    this = sys.modules[__name__]
    monkeypatch.setattr(this, "CHROMIUM", "/nonexistent/chromium")
    monkeypatch.setattr(this, "IN_CI", False)
    with pytest.raises(pytest.skip.Exception, match=r"apt-get install chromium"):
        _require_tools()
    monkeypatch.setattr(this, "IN_CI", True)
    with pytest.raises(pytest.fail.Exception, match=r"CI must run the browser test"):
        _require_tools()
