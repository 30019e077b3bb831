"""The whole product in a real browser: chat, judge (12 factors and a debate), arena battle, vote, ratings,
leaderboard.

The judge and the debaters answer from the local fake OpenAI-compatible server (fast and deterministic): this test
is about the page, not the model. The embedded model judges all twelve factors and debates in its own tests, with no
page deadline (tests/test_factor_judge.py, tests/test_debate.py, tests/test_pipeline.py).
"""

import os
import shutil

from app_server import AppServer
from browser_support import ARGS, chromium
from fake_openai import FakeOpenAI, Reply

from evaluators.factors import LABELS
from storage.db import open_db

# one default answer serves both roles: a factor's reasoned rating and a debater's JSON (as tests/test_judge_app.py);
# 4, a rating every factor of the default rubric accepts (core-v3's Appropriateness is 4 or 0)
JUDGE_ANSWER = '{"evaluator": "x", "statement": "Fine. <rating>4</rating>", "score": 70}'


def _judge_env(fake: FakeOpenAI) -> dict[str, str]:
    """The judge and the four debaters on ``fake``, which answers every call with :data:`JUDGE_ANSWER`."""
    fake.default = Reply(JUDGE_ANSWER)
    return {
        f"CRS_LLM_{role}_{key}": value
        for role in ("JUDGE", "DEBATE")
        for key, value in (("MODEL", "fake-judge"), ("BASE_URL", fake.base_url), ("API_KEY", "sk-test"))
    }


def test_chat_judge_arena_vote_leaderboard(tmp_path):
    executable = chromium()  # before the app starts: a skip outside CI, a failure in CI
    from playwright.sync_api import sync_playwright

    shots = tmp_path / "screenshots"
    shots.mkdir()
    db_path = tmp_path / "flow.db"
    with FakeOpenAI() as fake, AppServer(db_path, env=_judge_env(fake)) as server, sync_playwright() as p:
        browser = p.chromium.launch(executable_path=executable, args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1400, "height": 1100})
            page.set_default_timeout(60_000)
            page.goto(server.url, wait_until="load")
            page.locator("#roles-notice").wait_for()

            # chat one turn and see items
            page.get_by_placeholder("Tell the system what you would like to watch…").fill("A funny animated movie?")
            page.locator("button:visible", has_text="Send").first.click()
            page.wait_for_function("() => document.querySelectorAll('table tbody tr').length > 0")

            # judge with the LLM judge (the fake endpoint) and a one-round debate: 12 factor calls and 4 personas
            # on loopback, about 2 s quiet; the page's 60 s default deadline is thirty times that
            page.get_by_text("Judge settings").click()
            page.get_by_label("Scorer").click()
            page.get_by_role("option", name="LLM judge (+ debate)").click()
            page.locator("#judge-button").click()
            page.wait_for_function("() => (document.querySelector('#judge-status')?.innerText || '').includes('/100')")
            status = page.locator("#judge-status").inner_text()
            assert "not validated" not in status  # a configured judge, not the embedded demo model
            assert any((r["json"] or {}).get("model") == "fake-judge" for r in fake.requests)
            factors_text = page.locator("#judge-factors").inner_text()
            for label in LABELS.values():
                assert label in factors_text, label
            page.screenshot(path=str(shots / "judged.png"), full_page=True)

            # an arena battle: names hidden, vote, rate both sides in eight taps, names revealed
            page.get_by_role("tab", name="Arena").click()
            page.get_by_placeholder("Ask both systems for a movie recommendation…").fill("Something exciting?")
            page.locator("button:visible", has_text="Send").first.click()
            vote = page.get_by_role("button", name="👈 A is better")
            page.wait_for_function(
                "() => [...document.querySelectorAll('button')]"
                ".some(b => b.innerText.includes('A is better') && !b.disabled)",
                timeout=120_000,
            )
            assert page.locator("#arena-name-a").inner_text().strip() == ""
            vote.click()
            page.locator("#arena-rate").first.wait_for(state="visible", timeout=60_000)
            assert page.locator("#arena-name-a").inner_text().strip() == ""  # no names before the ratings
            for side, values in (("a", "4323"), ("b", "1010")):
                for item, value in zip(
                    ("understanding", "task_completion", "interest_arousal", "dialogue_overall"), values, strict=True
                ):
                    page.locator(f"#rate-{side}-{item} label", has_text=value).first.click()
            page.screenshot(path=str(shots / "rating.png"), full_page=True)
            page.locator("#arena-rate").first.click()
            # the name itself, not any text: while the event runs, Gradio shows its timer inside the output
            page.wait_for_function(
                "() => (document.querySelector('#arena-name-a')?.innerText || '').includes('System A was')"
            )
            labels = list(open_db(db_path).query("select side, understanding, dialogue_overall from human_labels"))
            assert sorted((r["side"], r["understanding"], r["dialogue_overall"]) for r in labels) == [
                ("a", 4.0, 3.0),
                ("b", 1.0, 0.0),
            ]
            revealed = page.locator("#arena-name-a").inner_text()
            page.screenshot(path=str(shots / "voted.png"), full_page=True)

            # the vote is on the leaderboard as soon as its tab is opened (no Refresh click)
            page.get_by_role("tab", name="Leaderboard").click()
            page.wait_for_function(
                "() => (document.querySelector('#leaderboard-table')?.innerText || '').includes('chatcrs')",
                timeout=60_000,
            )
            page.screenshot(path=str(shots / "leaderboard.png"), full_page=True)

            # the judge-versus-people panel: one rated battle is too few for a figure, and it says so
            page.get_by_role("tab", name="Judge vs people").click()
            page.wait_for_function(
                "() => (document.querySelector('#agreement-table')?.innerText || '').includes('too few')",
                timeout=60_000,
            )
            page.screenshot(path=str(shots / "agreement.png"), full_page=True)
            assert revealed
            if os.environ.get("CRS_KEEP_SCREENSHOT"):
                shutil.copytree(shots, "/tmp/crs_flow_shots", dirs_exist_ok=True)
        finally:
            browser.close()
