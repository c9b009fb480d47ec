"""Single sign-on in a real browser: Playwright (sync API) driving headless Chromium through an
OpenID provider's login (testkit/oidc/provider.mjs: oidc-provider's development interactions)
for the gateway's SSO tests.

    sso_login.py --chromium PATH --start URL --email EMAIL [--password PW]
                 [--stop-at-callback] [--timeout SECONDS]

Goes to --start (the gateway's /api/v1/sso/{org}/start, or the provider's authorization URL
itself), fills the provider's login form with --email and any password, confirms the consent
screen if one is shown, then:

- by default follows the provider's redirect to the gateway's callback and waits until the page
  is at /dashboard; prints one JSON line
  {"final_url": ..., "cookies": [names of the cookies of the gateway's host, any path, sorted],
   "console_errors": [console errors and uncaught exceptions of the gateway's pages]}
- with --stop-at-callback, stops the navigation to the first URL containing
  /api/v1/sso/callback before it reaches the gateway (Chromium's DevTools Fetch interception
  records its URL and aborts it: Playwright's route() does not see redirect hops) and prints one
  JSON line
  {"callback_url": ..., "cookies": {"tg_sso": value}}  ("cookies" is {} without a tg_sso cookie:
  the cookies the browser would have sent with the callback, only tg_sso)
  so that the test can replay or tamper with the callback itself.

Cookies are per host, not per port: the provider's own cookies (oidc_provider_session,
oidc_provider_session.sig…) on 127.0.0.1 are sent to a gateway on 127.0.0.1 too; "cookies" of
the default mode leaves them out.

Exits non-zero with a message on stderr on any failure (timeout, an error page from the
provider, a 4xx/5xx answer to the callback).
"""

import argparse
import json
import sys
import time
from urllib.parse import urlsplit

from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import sync_playwright

CALLBACK = "/api/v1/sso/callback"
# testkit/oidc/provider.mjs names its cookies so.
PROVIDER_COOKIES = "oidc_provider_"


class Failed(Exception):
    pass


def origin(url):
    u = urlsplit(url)
    return f"{u.scheme}://{u.netloc}"


def at_dashboard(url):
    path = urlsplit(url).path
    return path == "/dashboard" or path.startswith("/dashboard/")


def visible(page, selector):
    try:
        return page.locator(selector).first.is_visible()
    except PlaywrightError:
        return False  # the page is navigating


def text(page, selector):
    try:
        return page.locator(selector).first.inner_text(timeout=1000)
    except PlaywrightError:
        return ""


def run(args, browser):
    ctx = browser.new_context()
    page = ctx.new_page()
    # (text, the page's URL when it was logged): only the gateway's pages count in the end (the
    # provider's login page loads web fonts from the internet, which fail offline).
    console, callback = [], {}

    page.on("console", lambda m: m.type == "error" and console.append((m.text, page.url)))
    page.on("pageerror", lambda e: console.append((f"uncaught: {e}", page.url)))

    def callback_answered(resp):
        if CALLBACK not in resp.url:
            return
        if args.stop_at_callback:
            callback["failed"] = f"{resp.status}: the callback reached the gateway"
        elif resp.status >= 400:
            try:
                body = resp.text()
            except PlaywrightError:
                body = ""
            callback["failed"] = f"{resp.status} {body[:500]}"

    page.on("response", callback_answered)

    if args.stop_at_callback:
        # Playwright's route() never sees the hops of a redirect chain, and the provider reaches
        # the callback by a 303: Chromium's own interception (DevTools Fetch domain) does.
        cdp = ctx.new_cdp_session(page)

        def paused(event):
            callback.setdefault("url", event["request"]["url"])
            cdp.send("Fetch.failRequest", {"requestId": event["requestId"], "errorReason": "Aborted"})

        cdp.on("Fetch.requestPaused", paused)
        cdp.send("Fetch.enable", {"patterns": [{"urlPattern": f"*{CALLBACK}*", "requestStage": "Request"}]})

    deadline = time.monotonic() + args.timeout
    try:
        page.goto(args.start, wait_until="commit")
    except PlaywrightError as e:
        # An aborted callback (--start may redirect straight to it with a live session) or a
        # navigation the loop below judges.
        if not callback:
            raise Failed(f"goto {args.start}: {e}") from e

    logged_in = consented = 0
    while True:
        if args.stop_at_callback and "url" in callback:
            break
        if "failed" in callback:
            raise Failed(f"the callback answered {callback['failed']} (at {page.url})")
        if not args.stop_at_callback and at_dashboard(page.url):
            try:
                page.wait_for_load_state("load", timeout=max(1, deadline - time.monotonic()) * 1000)
                page.wait_for_timeout(500)  # the dashboard's first requests: their errors count
            except PlaywrightError:
                pass
            break
        if time.monotonic() > deadline:
            want = "callback" if args.stop_at_callback else "/dashboard"
            raise Failed(
                f"no {want} within {args.timeout}s: at {page.url}\n"
                f"page text: {text(page, 'body')[:1000]!r}\nconsole errors: {[t for t, _ in console]}"
            )
        if visible(page, "#error_description"):
            raise Failed(f"the provider shows an error at {page.url}: {text(page, 'body')[:1000]!r}")
        try:
            if visible(page, "form input[name=login]"):
                if logged_in >= 3:
                    raise Failed(f"the login form came back {logged_in} times: {text(page, 'body')[:500]!r}")
                logged_in += 1
                page.fill("form input[name=login]", args.email)
                page.fill("form input[name=password]", args.password)
                page.click("form button[type=submit]", no_wait_after=True)
                page.wait_for_timeout(200)
                continue
            if visible(page, "form input[name=prompt][value=consent]"):
                if consented >= 3:
                    raise Failed(f"the consent form came back {consented} times")
                consented += 1
                page.click("form button[type=submit]", no_wait_after=True)
                page.wait_for_timeout(200)
                continue
        except PlaywrightError as e:
            # The page navigated away under the action: look again.
            if "Execution context was destroyed" not in str(e) and "navigat" not in str(e).lower():
                print(f"sso_login.py: retrying after: {e}", file=sys.stderr)
        page.wait_for_timeout(100)

    if args.stop_at_callback:
        cb = callback["url"]
        # The cookies the browser would send with the callback (tg_sso may be path-scoped).
        cookies = {c["name"]: c["value"] for c in ctx.cookies([cb]) if c["name"] == "tg_sso"}
        out = {"callback_url": cb, "cookies": cookies}
    else:
        final = page.url
        gateway, host = origin(final), urlsplit(final).hostname
        out = {
            "final_url": final,
            # Every cookie of the gateway's host, whatever its path, but the provider's own
            # (cookies ignore ports: on 127.0.0.1 the provider's are the gateway's host's too).
            "cookies": sorted({
                c["name"] for c in ctx.cookies()
                if c["domain"].lstrip(".") == host and not c["name"].startswith(PROVIDER_COOKIES)
            }),
            "console_errors": [msg for msg, at in console if origin(at) == gateway],
        }
    ctx.close()
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--chromium", required=True, help="the Chromium executable")
    ap.add_argument("--start", required=True, help="the gateway's SSO start URL (or the provider's authorization URL)")
    ap.add_argument("--email", required=True, help="the login entered at the provider")
    ap.add_argument("--password", default="any password", help="the password entered (any)")
    ap.add_argument("--stop-at-callback", action="store_true", help="stop before the callback reaches the gateway")
    ap.add_argument("--timeout", type=float, default=20.0, help="seconds for the whole sign-in")
    args = ap.parse_args()
    try:
        with sync_playwright() as p:
            browser = p.chromium.launch(executable_path=args.chromium, headless=True, args=["--no-sandbox"])
            try:
                out = run(args, browser)
            finally:
                browser.close()
    except Failed as e:
        print(f"sso_login.py: {e}", file=sys.stderr)
        sys.exit(1)
    except PlaywrightError as e:
        print(f"sso_login.py: playwright: {e}", file=sys.stderr)
        sys.exit(1)
    print(json.dumps(out), flush=True)


if __name__ == "__main__":
    main()
