"""The browser playground at / in headless Chromium (Debian's package, driven by Playwright): a text streamed word by
word is heard as it arrives, its words light up in order, and a barge-in shows what was said and what was not.
PLAYGROUND_SCREENSHOT=docs/playground.png saves the page after the barge-in."""
import os
import shutil

import pytest

from engine import Engine
from gateway.app_state import GatewayConfig
from server_thread import ServerThread
from integration_helpers import KEY
from stand_in_aligner import StandIn

pytestmark = pytest.mark.slow                # Chromium

CHROMIUM = shutil.which("chromium")
if not CHROMIUM:
    pytest.skip("needs Debian's chromium (tests/run.sh installs it)", allow_module_level=True)
sync_playwright = pytest.importorskip("playwright.sync_api").sync_playwright

FLAGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--autoplay-policy=no-user-gesture-required"]
TEXT = "Hello there! This is the playground, speaking each word as a language model writes it, until you interrupt."


@pytest.fixture(scope="module")
def server():
    # the stand-in aligner times words along the audio (the tiny random aligner puts every word at its end)
    engine = Engine.load(dummy="tiny", device="cpu", max_active=2).start()
    srv = ServerThread(engine, GatewayConfig(api_keys=(KEY,), max_frames=75), aligner=StandIn()).start()
    yield srv
    srv.stop()


@pytest.fixture(scope="module")
def browser():
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=CHROMIUM, args=FLAGS)
        yield browser
        browser.close()


@pytest.fixture
def page(browser):
    page = browser.new_page(viewport={"width": 1000, "height": 620})
    yield page
    page.close()


def playground(page) -> dict:
    return page.evaluate("window.playground")


def test_streams_plays_lights_words_in_order_and_barge_in_splits_the_text(server, page):
    page.goto(f"{server.url}/?api_key={KEY}")
    page.wait_for_function("window.playground.ready", timeout=10_000)
    page.fill("#text", TEXT)
    page.fill("#pace", "20")
    page.click("#speak")
    page.wait_for_function("window.playground.played > 0.5 && window.playground.lit.length >= 4", timeout=20_000)
    state = playground(page)
    assert state["sent"] == TEXT and state["samples"] > 0.5 * 24000 and state["ttfaMs"] is not None
    assert state["rtf"] > 0
    page.wait_for_timeout(200)
    later = playground(page)
    assert later["played"] > state["played"], "the audio clock does not advance"
    assert later["lit"] == sorted(set(later["lit"])), later["lit"]       # each word lit once, in the text's order

    page.click("#barge-in")
    page.wait_for_function("window.playground.cancelled", timeout=10_000)
    cancelled = playground(page)["cancelled"]
    assert abs(cancelled["played_ms"] / 1000 - later["played"]) < 1.0
    assert cancelled["spoken_text"] and cancelled["unspoken_text"]
    assert cancelled["spoken_text"] + cancelled["unspoken_text"] == TEXT
    assert page.inner_text("#split .spoken") + page.inner_text("#split .unspoken") == TEXT
    assert page.is_enabled("#speak") and not page.is_enabled("#barge-in")
    if os.environ.get("PLAYGROUND_SCREENSHOT"):
        page.screenshot(path=os.environ["PLAYGROUND_SCREENSHOT"], full_page=True)


def test_asks_for_the_key_a_server_needs(server, page):
    page.goto(server.url)
    page.wait_for_selector("#key-field", state="visible", timeout=10_000)
    assert "unauthorized" in page.inner_text("#status")
    page.fill("#api-key", KEY)
    page.dispatch_event("#api-key", "change")
    page.wait_for_function("window.playground.ready", timeout=10_000)
