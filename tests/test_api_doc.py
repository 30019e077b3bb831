"""docs/api.md is what the app itself lists as its API (`python -m ui.api_doc check`)."""

from __future__ import annotations

from ui import api_doc


def test_docs_api_md_matches_the_apps_own_listing(monkeypatch):
    monkeypatch.delenv("CRS_SYSTEMS_FILE", raising=False)
    info = api_doc.api_info()
    assert api_doc.render(info) == api_doc.DOC.read_text(encoding="utf-8"), (
        "docs/api.md differs from the app's API: run `python -m ui.api_doc write` and commit the file"
    )
    # every endpoint the app exposes is documented, the arena's too
    documented = api_doc.DOC.read_text(encoding="utf-8")
    for name in info["named_endpoints"]:
        assert f"## `{name}`" in documented
    expected = {"/chat", "/judge", "/evaluate", "/leaderboard", "/arena_send", "/arena_vote_a"}
    assert expected <= set(info["named_endpoints"])


def test_the_check_fails_on_a_stale_file(tmp_path, monkeypatch):
    monkeypatch.delenv("CRS_SYSTEMS_FILE", raising=False)
    stale = tmp_path / "api.md"
    stale.write_text(api_doc.DOC.read_text(encoding="utf-8").replace("## `/chat`", "## `/talk`"), encoding="utf-8")
    monkeypatch.setattr(api_doc, "DOC", stale)
    assert api_doc.main(["check"]) == 1
    assert api_doc.main(["write"]) == 0 and api_doc.main(["check"]) == 0
