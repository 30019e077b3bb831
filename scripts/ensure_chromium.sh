#!/usr/bin/env bash
# The browser tests drive Debian's Chromium through Playwright (Playwright's
# own browser download is not used). Install it when missing and possible.
# Outside CI a Chromium that cannot be installed is reported and the browser
# tests skip. In CI (CI=true) or with CRS_REQUIRE_BROWSER=1 it is an error:
# this script exits 1, and the browser tests would fail too.
set -uo pipefail
if command -v chromium >/dev/null 2>&1; then
    exit 0
fi
case "${CI:-}" in 1 | true | TRUE | True | yes) required=1 ;; *) required=0 ;; esac
if [ "${CRS_REQUIRE_BROWSER:-}" = "1" ]; then
    required=1
fi
log=/tmp/crs-arena-chromium.log
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "setup: installing Debian chromium for the browser tests"
    if { apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends chromium; } >"$log" 2>&1 \
        && command -v chromium >/dev/null 2>&1; then
        exit 0
    fi
    reason="could not install chromium (see $log)"
elif [ "$(id -u)" = "0" ]; then
    reason="chromium not found and apt-get is not available to install it"
else
    reason="chromium not found and not root (install the Debian package chromium)"
fi
if [ "$required" = "1" ]; then
    echo "setup: $reason; CI (or CRS_REQUIRE_BROWSER=1) requires the browser tests, so this is an error" >&2
    exit 1
fi
echo "setup: $reason; browser tests will be skipped"
exit 0
