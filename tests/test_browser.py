"""The Chat tab in a real browser (Debian chromium driven by Playwright)."""

import os
import shutil

from app_server import AppServer
from browser_support import ARGS, chromium


def test_chat_in_the_browser(tmp_path):
    executable = chromium()  # before the app starts: a skip outside CI, a failure in CI
    from playwright.sync_api import sync_playwright

    with AppServer(tmp_path / "browser.db") as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1000})
            dialogs = []
            page.on("dialog", lambda d: (dialogs.append(d.message), d.dismiss()))
            page.goto(server.url, wait_until="load")
            # quiet: the page and each answer below appear in 1-3 s (the whole test: 15 s); bounds are 10x or more
            page.locator("#roles-notice").wait_for(timeout=30_000)
            assert "135M" in page.locator("#roles-notice").inner_text()
            box = page.get_by_placeholder("Tell the system what you would like to watch…")
            box.fill('<img src=x onerror="alert(1)"><script>alert(2)</script> a space adventure?')
            page.get_by_role("button", name="Send").click()
            # the user's text appears literally, then an answer and the items table
            page.get_by_text("<script>alert(2)</script>", exact=False).first.wait_for(timeout=30_000)
            page.locator(".message.bot, [data-testid='bot']").last.wait_for(timeout=30_000)
            page.wait_for_function("() => document.querySelectorAll('table tbody tr').length > 0", timeout=30_000)
            page.screenshot(path=str(tmp_path / "chat.png"), full_page=True)
            shutil.copy(tmp_path / "chat.png", "/tmp/crs_chat.png") if os.environ.get("CRS_KEEP_SCREENSHOT") else None
            assert dialogs == []  # no injected script ran
            rows = page.locator("table tbody tr").count()
            assert rows >= 1
            # an empty message shows a warning and sends nothing
            box.fill("   ")
            page.get_by_role("button", name="Send").click()
            page.get_by_text("empty message", exact=False).first.wait_for(timeout=10_000)
        finally:
            browser.close()
