"""The organizations journey in headless Chromium (Playwright, sync API), run by
tests/dashboard_orgs.rs against a real gateway and a fake provider.

The owner logs in and creates an organization (its page survives a reload); the operator funds
it (admin API); the owner invites a member and reads the link from the page; in a second browser
context the member opens the link, signs up there, lands back on the join page, joins, creates
an organization key and reads it from the page (the owner has limited the organization's keys
to the test's model); a chat request with it succeeds; the owner sees
it in the organization's usage and caps the member at 0 credits per day; the member's next
request is 402 `insufficient_credits` naming the member cap. Each page fails the journey on a
console error, an uncaught exception, a failed request or a 4xx/5xx answer.

Environment: TOLLGATE_URL, TOLLGATE_CHROMIUM, TOLLGATE_PASSWORD, TOLLGATE_MODEL,
TOLLGATE_ADMIN_TOKEN, TOLLGATE_OWNER_EMAIL (signed up already), TOLLGATE_MEMBER_EMAIL (not),
TOLLGATE_SCREENSHOTS. Prints "dashboard_orgs: all passed" at the end; exits non-zero with the
story of the first failure otherwise.
"""

import json
import os
import re
import sys
import time
import traceback
import urllib.error
import urllib.request
from urllib.parse import parse_qs, urlsplit

from playwright.sync_api import sync_playwright

ENV = os.environ
BASE = ENV["TOLLGATE_URL"].rstrip("/")
PASSWORD = ENV["TOLLGATE_PASSWORD"]
MODEL = ENV["TOLLGATE_MODEL"]
ADMIN_TOKEN = ENV["TOLLGATE_ADMIN_TOKEN"]
OWNER = ENV["TOLLGATE_OWNER_EMAIL"]
MEMBER = ENV["TOLLGATE_MEMBER_EMAIL"]
SHOTS = ENV["TOLLGATE_SCREENSHOTS"]
ORG_NAME = "Acme Browser Test"


class Failed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise Failed(message)


def step(message):
    print(f"  {message}", flush=True)


def http(method, path, body=None, headers=None):
    """(status, parsed JSON or text); never raises on an HTTP status."""
    hdrs = dict(headers or {})
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        hdrs["Content-Type"] = "application/json"
    req = urllib.request.Request(BASE + path, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            status, raw = r.status, r.read()
    except urllib.error.HTTPError as e:
        status, raw = e.code, e.read()
    try:
        return status, json.loads(raw) if raw else None
    except ValueError:
        return status, raw.decode(errors="replace")


def chat(key):
    return http(
        "POST",
        "/v1/chat/completions",
        {"model": MODEL, "messages": [{"role": "user", "content": "Hello from the organizations test"}]},
        {"Authorization": f"Bearer {key}"},
    )


class Watch:
    """What went wrong on a page: console errors, uncaught exceptions, failed requests, 4xx/5xx."""

    def __init__(self, page, name):
        self.name, self.problems = name, []
        page.on("console", lambda m: m.type == "error" and self.problems.append(f"console error: {m.text}"))
        page.on("pageerror", lambda e: self.problems.append(f"uncaught exception: {e}"))
        page.on("requestfailed", lambda r: self.problems.append(f"request failed: {r.method} {r.url}: {r.failure}"))
        page.on("response", lambda r: r.status >= 400 and self.problems.append(f"{r.status} for {r.request.method} {r.url}"))

    def verify(self):
        check(not self.problems, f"{self.name}: " + "; ".join(self.problems))


def settled(page):
    """Waits until the view has rendered and nothing is loading."""
    page.wait_for_function(
        "() => !document.querySelector('#main [aria-live=polite].muted') && document.querySelector('#main h1')"
    )


def open_page(browser, name):
    ctx = browser.new_context(viewport={"width": 1280, "height": 800})
    page = ctx.new_page()
    page.set_default_timeout(10_000)
    return ctx, page, Watch(page, name)


def journey(browser):
    # ---- the owner: log in, create an organization -------------------------------------
    octx, owner, ow = open_page(browser, "owner")
    owner.goto(BASE + "/dashboard")
    owner.fill("#login-form input[name=email]", OWNER)
    owner.fill("#login-form input[name=password]", PASSWORD)
    owner.click("#login-form button[type=submit]")
    owner.wait_for_selector("#logout")
    settled(owner)
    owner.click("#nav a:text-is('Organizations')")
    settled(owner)
    check("no organization" in owner.inner_text("#orgs-list"), "a new account lists organizations")
    owner.fill("#create-org-form input[name=name]", ORG_NAME)
    owner.click("#create-org-form button[type=submit]")
    owner.wait_for_selector("#org-name")
    settled(owner)
    org = parse_qs(urlsplit(owner.url).query).get("id", [""])[0]
    check(org.startswith("org_"), f"the organization's page is at {owner.url}")
    check(owner.inner_text("#org-name") == ORG_NAME, f"heading: {owner.inner_text('#org-name')!r}")
    check("Owner" in owner.inner_text("#org-role"), "the owner's role is not shown")
    owner.reload()
    settled(owner)
    check(owner.inner_text("#org-name") == ORG_NAME, "the organization's page does not survive a reload")
    check(owner.eval_on_selector("#org-switcher", "s => s.value") == org, "the switcher does not show the organization")
    for section in ("members", "invitations", "caps", "models", "usage", "keys", "sso", "billing"):
        check(owner.locator(f"#org-{section}-section").count() == 1, f"the owner sees no {section} section")
    check(owner.locator("#org-leave").count() == 0, "the owner is offered to leave")
    step(f"owner created {org}")

    # ---- the operator funds it ---------------------------------------------------------
    status, body = http("POST", f"/api/v1/admin/accounts/{org}/credits", {"delta": 10, "reason": "test"},
                        {"Authorization": f"Bearer {ADMIN_TOKEN}"})
    check(status == 200, f"admin credits: {status} {body}")
    owner.reload()
    settled(owner)
    check("10" in owner.inner_text("#org-credits"), f"credits: {owner.inner_text('#org-credits')!r}")

    # ---- the owner limits the organization's keys to the test's model -------------------
    owner.fill("#org-models-form input[name=allowed_models]", MODEL)
    owner.click("#org-models-form button[type=submit]")
    saved = owner.wait_for_selector("#org-models-section .notice-ok").inner_text()
    check(MODEL in saved, f"models saved: {saved!r}")

    # ---- the owner invites the member ----------------------------------------------------
    owner.fill("#invite-form input[name=email]", MEMBER)
    owner.select_option("#invite-form select[name=role]", "member")
    owner.click("#invite-form button[type=submit]")
    owner.wait_for_selector("#invite-link")
    link = owner.inner_text("#invite-link").strip()
    check("/dashboard/join?token=inv_" in link, f"invitation link: {link!r}")
    try:  # the list is fetched again after the link is shown, as the keys' below
        owner.locator("#org-invitations", has_text=MEMBER).wait_for()
    except Exception:
        pass
    check(MEMBER in owner.inner_text("#org-invitations"), "the open invitation is not listed")
    step("owner invited the member")

    # ---- the member: opens the link signed out, signs up, joins -------------------------
    mctx, member, mw = open_page(browser, "member")
    u = urlsplit(link)
    member.goto(BASE + u.path + "?" + u.query)
    member.wait_for_selector("#login-form")
    check("invited to an organization" in member.inner_text("#main"), "the log-in screen does not mention the invitation")
    member.click("#tab-signup")
    member.fill("#signup-form input[name=email]", MEMBER)
    member.fill("#signup-form input[name=password]", PASSWORD)
    member.click("#signup-form button[type=submit]")
    member.wait_for_selector("#join-button")
    settled(member)
    check(urlsplit(member.url).path == "/dashboard/join" and u.query in member.url,
          f"after signing up the member is at {member.url}")
    member.click("#join-button")
    member.wait_for_selector("#org-name")
    settled(member)
    check(f"id={org}" in member.url, f"after joining the member is at {member.url}")
    check("Member" in member.inner_text("#org-role"), "the member's role is not shown")
    check(member.locator("#org-members-section").count() == 0, "a member sees the members section")
    check(member.locator("#org-caps-section").count() == 0, "a member sees the caps section")
    check(member.locator("#org-leave").count() == 1, "a member cannot leave")
    step("member joined")

    # ---- the member's organization key --------------------------------------------------
    member.fill("#org-key-form input[name=name]", "member-key")
    member.click("#org-key-form button[type=submit]")
    member.wait_for_selector("#new-key")
    key = member.inner_text("#new-key").strip()
    check(re.fullmatch(r"tg_[0-9A-Za-z]{40}", key) is not None, f"not a key: {key!r}")
    settled(member)
    # The list is fetched again after the new key is shown, with no loading placeholder in
    # between: wait for it (a loaded machine answers that fetch after `settled` returns).
    try:
        member.locator("#org-keys", has_text="member-key").wait_for()
    except Exception:
        pass
    check("member-key" in member.inner_text("#org-keys"), "the new key is not listed")
    status, reply = chat(key)
    check(status == 200, f"a request with the organization key: {status} {reply}")
    step("member's key works")

    # ---- the owner: usage, then a cap below one request's cost --------------------------
    owner.reload()
    settled(owner)
    row = owner.locator(f"#org-usage tr.usage-member[data-email='{MEMBER}']")
    check(row.count() == 1, f"the member is not in the usage: {owner.inner_text('#org-usage')!r}")
    cells = row.locator("td").all_inner_texts()
    check(cells[1].strip() == "1", f"the member's usage row: {cells}")
    check("member-key" in owner.inner_text("#org-usage"), "the key is not in the usage per key")
    saved = owner.inner_text("#org-usage-saved")
    check(saved.startswith("Saved by caching: 0 credits") and "0 response cache hits" in saved, f"savings: {saved!r}")
    check(owner.get_attribute("#org-usage-csv", "href").endswith(f"/api/v1/orgs/{org}/usage?format=csv"), "no CSV link")
    check(MEMBER in owner.inner_text("#org-members"), "the member is not listed")
    check(owner.input_value("#org-models-form input[name=allowed_models]") == MODEL, "the allowlist is not shown")
    owner.select_option("#cap-form select[name=account_id]", label=f"{MEMBER} (Member)")
    owner.fill("#cap-form input[name=cap_credits]", "0")
    owner.select_option("#cap-form select[name=period]", "day")
    owner.click("#cap-form button[type=submit]")
    owner.wait_for_selector("#org-caps-section .notice-ok")
    owner.wait_for_function(
        "(m) => { const r = document.querySelector(`#org-members tr[data-email='${m}'] .member-cap`);"
        " return r && r.textContent.includes('per day'); }", arg=MEMBER)
    step("owner capped the member")

    status, reply = chat(key)
    err = (reply or {}).get("error", {}) if isinstance(reply, dict) else {}
    check(status == 402 and err.get("type") == "insufficient_credits" and "member cap" in err.get("message", ""),
          f"a request over the member cap: {status} {reply}")
    step("the member's next request is refused by the cap")

    owner.screenshot(path=os.path.join(SHOTS, "orgs-owner.png"), full_page=True)
    member.screenshot(path=os.path.join(SHOTS, "orgs-member.png"), full_page=True)
    ow.verify()
    mw.verify()
    return [octx, mctx]


def main():
    started = time.time()
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=ENV["TOLLGATE_CHROMIUM"], args=["--no-sandbox"])
        try:
            journey(browser)
        except Exception as e:  # noqa: BLE001 — any failure ends the run with its story
            for i, ctx in enumerate(browser.contexts):
                for j, page in enumerate(ctx.pages):
                    try:
                        path = os.path.join(SHOTS, f"failed-orgs-{i}-{j}.png")
                        page.screenshot(path=path, full_page=True)
                        print(f"  page {page.url} (screenshot {path}):\n{page.inner_text('body')[:1500]}")
                    except Exception:  # noqa: BLE001
                        pass
            print(f"FAILED: {'' if isinstance(e, Failed) else type(e).__name__ + ': '}{e}")
            if not isinstance(e, Failed):
                traceback.print_exc(file=sys.stdout)
            sys.exit(1)
        finally:
            browser.close()
    print(f"dashboard_orgs: all passed ({time.time() - started:.1f}s)")


if __name__ == "__main__":
    main()
