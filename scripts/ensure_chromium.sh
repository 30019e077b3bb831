#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through Playwright (Playwright's
# own browser download is not used). Install it when missing and possible.
set -uo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian chromium for the browser tests"
    { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } >/tmp/crs-arena-chromium.log 2>&1 \
        || echo "setup: could not install chromium (see /tmp/crs-arena-chromium.log); browser tests will be skipped"
else
    echo "setup: chromium not found and not root; browser tests will be skipped"
fi
exit 0
