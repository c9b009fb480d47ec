"""The Webhooks page in headless Chromium (Playwright, sync API), run by
tests/dashboard_webhooks.rs against a real gateway and a real receiver.

The account holder logs in, opens Webhooks, adds an endpoint for `balance.low` (the event's
checkbox ticked), reads its signing secret from the page once (a reload shows it no more),
clicks "Send test event" and sees the delivery in the endpoint's log as delivered. Each page
fails the journey on a console error, an uncaught exception, a failed request or a 4xx/5xx.

Environment: TOLLGATE_URL, TOLLGATE_CHROMIUM, TOLLGATE_PASSWORD, TOLLGATE_EMAIL (signed up
already), TOLLGATE_RECEIVER_URL, TOLLGATE_SCREENSHOTS. Prints the secret as `secret: …` and
"dashboard_webhooks: all passed" at the end; exits non-zero with the story of the first failure.
"""

import os
import sys
import time
import traceback

from playwright.sync_api import sync_playwright

ENV = os.environ
BASE = ENV["TOLLGATE_URL"].rstrip("/")
SHOTS = ENV["TOLLGATE_SCREENSHOTS"]


class Failed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failed(message)


def settled(page):
    page.wait_for_function(
        "() => !document.querySelector('#main [aria-live=polite].muted') && document.querySelector('#main h1')"
    )


def journey(browser):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    page.set_default_timeout(10_000)
    problems = []
    page.on("console", lambda m: m.type == "error" and problems.append(f"console error: {m.text}"))
    page.on("pageerror", lambda e: problems.append(f"uncaught exception: {e}"))
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.method} {r.url}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} for {r.request.method} {r.url}"))

    page.goto(BASE + "/dashboard")
    page.fill("#login-form input[name=email]", ENV["TOLLGATE_EMAIL"])
    page.fill("#login-form input[name=password]", ENV["TOLLGATE_PASSWORD"])
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#logout")
    settled(page)
    page.click("#nav a:text-is('Webhooks')")
    settled(page)
    check("No endpoint yet" in page.inner_text("#webhooks-list"), "a new account lists endpoints")

    page.fill("#webhook-form input[name=url]", ENV["TOLLGATE_RECEIVER_URL"])
    page.fill("#webhook-form input[name=balance_threshold]", "5")
    page.check("#event-balance-low")
    page.click("#webhook-form button[type=submit]")
    secret = page.wait_for_selector("#webhook-secret").inner_text().strip()
    check(secret.startswith("whsec_"), f"the secret shown: {secret!r}")
    print(f"secret: {secret}", flush=True)
    page.wait_for_selector("#webhooks-list article.webhook")
    settled(page)
    check("balance.low" in page.inner_text("#webhooks-list"), "the endpoint's events are not listed")
    page.screenshot(path=os.path.join(SHOTS, "webhooks-created.png"), full_page=True)

    page.reload()
    settled(page)
    page.wait_for_selector("#webhooks-list article.webhook")
    check(secret not in page.content(), "the secret is shown again after a reload")

    page.click("#webhooks-list .webhook-test")
    page.wait_for_selector("#webhooks-list .notice-ok")
    deadline = time.time() + 20
    while True:
        page.click("#webhooks-list .webhook-refresh")
        page.wait_for_timeout(300)
        rows = page.locator("#webhooks-list tr.delivery")
        if rows.count() and rows.first.get_attribute("data-status") == "delivered":
            text = rows.first.inner_text()
            check("webhook.test" in text and "HTTP 200" in text, f"the log row: {text!r}")
            break
        check(time.time() < deadline, "the test event was never shown delivered")
    page.screenshot(path=os.path.join(SHOTS, "webhooks-delivered.png"), full_page=True)
    check(not problems, "; ".join(problems))


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=ENV["TOLLGATE_CHROMIUM"], args=["--no-sandbox"])
        try:
            journey(browser)
        finally:
            browser.close()
    print("dashboard_webhooks: all passed", flush=True)


if __name__ == "__main__":
    try:
        main()
    except Exception:
        traceback.print_exc()
        sys.exit(1)
