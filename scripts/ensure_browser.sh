#!/bin/sh
# The web console's test (tests/service/test_console.py) drives Debian's Chromium with Selenium.
# Install chromium and chromium-driver when missing and we can (root with apt-get); otherwise
# say so: the browser test is then skipped with this reason, the rest of the suite runs.
if [ -x /usr/bin/chromium ] && [ -x /usr/bin/chromedriver ]; then
    exit 0
fi
if [ "$(id -u)" = "0" ] && command -v apt-get >/dev/null 2>&1; then
    echo "installing Debian's chromium and chromium-driver for the console's browser test"
    (apt-get update -q >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y -q chromium chromium-driver >/dev/null) \
        || echo "warning: could not install chromium; the console's browser test will be skipped" >&2
else
    echo "warning: /usr/bin/chromium or /usr/bin/chromedriver missing (apt-get install chromium chromium-driver); the console's browser test will be skipped" >&2
fi
exit 0
