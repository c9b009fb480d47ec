"""The request log in headless Chromium (Playwright, sync API), run by
tests/dashboard_requests.rs against a real gateway whose first provider fails (every request
fails over to the second) and a fake provider.

The account holder logs in and turns payload logging on from the Requests page; a chat request
is made with its key (outside the browser); the page lists it, filtered by model; opening its
row shows the record with both upstream legs (the failover and the one that served) and its
payloads, the key redacted from the request body; the JSON-lines export link answers one
parsable line per request. Any console error, uncaught exception, failed request or 4xx/5xx
fails it.

Environment: TOLLGATE_URL, TOLLGATE_CHROMIUM, TOLLGATE_PASSWORD, TOLLGATE_MODEL, TOLLGATE_EMAIL
(signed up already), TOLLGATE_KEY (its key), TOLLGATE_SCREENSHOTS. Prints
"dashboard_requests: all passed" at the end; exits non-zero with the story of the first failure
otherwise.
"""

import json
import os
import sys
import time
import traceback
import urllib.error
import urllib.request

from playwright.sync_api import sync_playwright

ENV = os.environ
BASE = ENV["TOLLGATE_URL"].rstrip("/")
PASSWORD = ENV["TOLLGATE_PASSWORD"]
MODEL = ENV["TOLLGATE_MODEL"]
EMAIL = ENV["TOLLGATE_EMAIL"]
KEY = ENV["TOLLGATE_KEY"]
SHOTS = ENV["TOLLGATE_SCREENSHOTS"]


class Failed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failed(message)


def step(message):
    print(f"  {message}", flush=True)


def chat(content):
    body = json.dumps({"model": MODEL, "messages": [{"role": "user", "content": content}]}).encode()
    req = urllib.request.Request(BASE + "/v1/chat/completions", data=body, method="POST",
                                 headers={"Content-Type": "application/json", "Authorization": f"Bearer {KEY}"})
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            return r.status, r.headers.get("x-request-id")
    except urllib.error.HTTPError as e:
        return e.code, e.headers.get("x-request-id")


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
    page.on("requestfailed", lambda r: problems.append(f"request failed: {r.method} {r.url}: {r.failure}"))
    page.on("response", lambda r: r.status >= 400 and problems.append(f"{r.status} for {r.request.method} {r.url}"))

    page.goto(BASE + "/dashboard")
    page.fill("#login-form input[name=email]", EMAIL)
    page.fill("#login-form input[name=password]", PASSWORD)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#logout")
    settled(page)
    page.click("#nav a:text-is('Requests')")
    settled(page)
    check("Off" in page.inner_text("#payload-state"), "payload logging is on by default")
    page.click("#toggle-payloads")
    page.wait_for_function("() => (document.querySelector('#payload-state') || {}).textContent?.startsWith('On')")
    step("payload logging turned on")

    status, request_id = chat(f"hello from the browser test, my key is {KEY}")
    check(status == 200 and request_id, f"a request: {status} {request_id}")
    # The writer is a moment behind the answer.
    row = f"#requests-list tr.request-row[data-request-id='{request_id}']"
    for _ in range(50):
        page.fill("#request-filters input[name=model]", MODEL)
        page.click("#request-filters button[type=submit]")
        time.sleep(0.2)
        if page.locator(row).count() == 1:
            break
    check(page.locator(row).count() == 1, f"the request is not listed: {page.inner_text('#requests-list')!r}")
    step("the request is listed")

    page.click(f"{row} button.open-request")
    page.wait_for_selector(f"#request-detail[data-request-id='{request_id}']")
    legs = page.locator("#request-detail tr.leg").all_inner_texts()
    check(len(legs) == 2 and "failover" in legs[0] and "served" in legs[1], f"legs: {legs}")
    body = page.inner_text("#request-payload")
    check("hello from the browser test" in body and "[redacted]" in body, f"request payload: {body[:300]!r}")
    check(KEY not in page.inner_text("body"), "the key is on the page")
    check(page.locator("#response-payload").count() == 1, "no response payload shown")
    step("the record opens with its legs and payloads")

    href = page.get_attribute("#export-jsonl", "href")
    check(href and "format=jsonl" in href, f"export link: {href!r}")
    text = page.evaluate("async (h) => (await fetch(h, {credentials: 'same-origin'})).text()", href)
    lines = [json.loads(line) for line in text.splitlines() if line]
    check(any(r["id"] == request_id for r in lines), f"the export lacks the request: {text[:300]!r}")
    step("the JSON-lines export parses")

    page.screenshot(path=os.path.join(SHOTS, "requests.png"), full_page=True)
    check(not problems, "; ".join(problems))
    return ctx


def main():
    started = time.time()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=ENV["TOLLGATE_CHROMIUM"], args=["--no-sandbox"])
        try:
            journey(browser)
        except Exception as e:  # noqa: BLE001 — any failure ends the run with its story
            for ctx in browser.contexts:
                for page in ctx.pages:
                    try:
                        page.screenshot(path=os.path.join(SHOTS, "failed-requests.png"), full_page=True)
                        print(f"  page {page.url}:\n{page.inner_text('body')[:1500]}")
                    except Exception:  # noqa: BLE001
                        pass
            print(f"FAILED: {'' if isinstance(e, Failed) else type(e).__name__ + ': '}{e}")
            if not isinstance(e, Failed):
                traceback.print_exc(file=sys.stdout)
            sys.exit(1)
        finally:
            browser.close()
    print(f"dashboard_requests: all passed ({time.time() - started:.1f}s)")


if __name__ == "__main__":
    main()
