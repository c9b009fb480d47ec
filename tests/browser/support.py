"""What the browser journeys share: the environment the Rust test passes, plain HTTP calls
(urllib), signed Stripe webhooks, and a watch on each page that fails the journey on a console
error, an uncaught exception, a failed request, a 5xx, or a 4xx the journey did not expect."""

import hashlib
import hmac
import json
import os
import time
import urllib.error
import urllib.request
from decimal import Decimal
from urllib.parse import urlparse

ENV = os.environ
BASE = ENV["TOLLGATE_URL"].rstrip("/")
STRIPE = ENV["TOLLGATE_STRIPE_URL"].rstrip("/")
SHOTS = ENV["TOLLGATE_SCREENSHOTS"]
PASSWORD = ENV["TOLLGATE_PASSWORD"]
DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}


class JourneyFailed(Exception):
    pass


def check(cond, message):
    if not cond:
        raise JourneyFailed(message)


def http(method, url, body=None, headers=None):
    """(status, parsed JSON or text, headers); never raises on an HTTP status."""
    if not url.startswith("http"):
        url = BASE + url
    data = None
    hdrs = dict(headers or {})
    if body is not None:
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
    req = urllib.request.Request(url, data=data, method=method, headers=hdrs)
    try:
        with urllib.request.urlopen(req, timeout=15) as r:
            status, raw, h = r.status, r.read(), r.headers
    except urllib.error.HTTPError as e:
        status, raw, h = e.code, e.read(), e.headers
    try:
        parsed = json.loads(raw) if raw else None
    except ValueError:
        parsed = raw.decode(errors="replace")
    return status, parsed, h


def chat(key, model):
    return http(
        "POST",
        "/v1/chat/completions",
        {"model": model, "messages": [{"role": "user", "content": "Hello from the browser test"}]},
        {"Authorization": f"Bearer {key}"},
    )


def signup_api(email):
    status, body, _ = http("POST", "/api/v1/auth/signup", {"email": email, "password": PASSWORD})
    check(status == 201, f"signup {email}: {status} {body}")
    return body


def unique_email(tag):
    return f"{tag}-{os.getpid()}-{time.time_ns() % 10**12}@example.com"


def deliver_webhook(event):
    """Posts `event` signed as Stripe signs: HMAC-SHA256 of `t.payload` with the secret."""
    payload = json.dumps(event).encode()
    t = int(time.time())
    mac = hmac.new(ENV["TOLLGATE_WEBHOOK_SECRET"].encode(), f"{t}.".encode() + payload, hashlib.sha256)
    sig = f"t={t},v1={mac.hexdigest()}"
    return http("POST", "/api/v1/billing/webhook", payload, {"Stripe-Signature": sig})


def credits_text(micros):
    """Credits as the page shows them (en-US, up to 6 decimals, no trailing zeros)."""
    d = (Decimal(micros) / Decimal(1_000_000)).quantize(Decimal("0.000001"))
    s = f"{d:,f}"
    return s.rstrip("0").rstrip(".") if "." in s else s


def cost_micros(usage, input_per_1k=1, output_per_1k=2):
    """The charge for `usage` at the testkit's model() rates, in micro-credits."""
    return usage["prompt_tokens"] * input_per_1k * 1000 + usage["completion_tokens"] * output_per_1k * 1000


class Watch:
    """Everything that went wrong on a page, checked at the end of each journey."""

    def __init__(self, page, name):
        self.page, self.name = page, name
        self.console, self.errors, self.failed, self.bad = [], [], [], []
        self.allowed = []  # (status, path) a journey expects to see
        page.on("console", self._console)
        page.on("pageerror", lambda e: self.errors.append(str(e)))
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _console(self, msg):
        if msg.type == "error":
            self.console.append((msg.text, (msg.location or {}).get("url", "")))

    def _failed(self, req):
        failure = req.failure or ""
        # A download through a blob: link is reported as an aborted request; that is its nature.
        if req.url.startswith("blob:") and "ERR_ABORTED" in failure:
            return
        self.failed.append(f"{req.method} {req.url}: {failure}")

    def _response(self, res):
        if res.status >= 400:
            self.bad.append((res.status, res.url, res.request.method))

    def expect(self, status, path):
        """The journey expects `status` from a URL whose path starts with `path`."""
        self.allowed.append((status, path))

    def _is_allowed(self, status, url):
        path = urlparse(url).path
        return any(status == s and path.startswith(p) for s, p in self.allowed)

    def verify(self):
        problems = []
        problems += [f"uncaught exception: {e}" for e in self.errors]
        problems += [f"request failed: {f}" for f in self.failed]
        for status, url, method in self.bad:
            if status >= 500 or not self._is_allowed(status, url):
                problems.append(f"unexpected {status} for {method} {url}")
        for text, url in self.console:
            if text.startswith("Failed to load resource") and any(
                u == url and self._is_allowed(s, u) for s, u, _ in self.bad
            ):
                continue
            problems.append(f"console error: {text} ({url})")
        check(not problems, f"{self.name}: " + "; ".join(problems))


# Contexts of the running journey, for screenshots when it fails.
OPEN = []


def open_page(browser, name, viewport=DESKTOP):
    ctx = browser.new_context(viewport=viewport, accept_downloads=True)
    OPEN.append(ctx)
    page = ctx.new_page()
    page.set_default_timeout(10_000)
    return ctx, page, Watch(page, name)


def settled(page):
    """Waits until the view has rendered and nothing is loading."""
    page.wait_for_function(
        "() => !document.querySelector('#main [aria-live=polite].muted') && document.querySelector('#main h1')"
    )


def shoot(page, name):
    """Screenshots of the current page at desktop width, then rendered afresh at phone width. A
    page that renders next to nothing, or overflows a phone's width, fails the journey. The
    page is left reloaded at desktop width."""
    for label, size in (("desktop", DESKTOP), ("phone", PHONE)):
        if label == "phone":
            page.set_viewport_size(size)
            page.reload()
        settled(page)
        text = page.evaluate("() => document.body.innerText.trim()")
        check(len(text) >= 40, f"{name} ({label}) renders almost nothing: {text!r}")
        if label == "phone":
            width = page.evaluate("() => document.documentElement.scrollWidth")
            check(width <= size["width"] + 1, f"{name} is {width}px wide on a {size['width']}px phone")
        page.screenshot(path=os.path.join(SHOTS, f"{name}-{label}.png"), full_page=True)
    page.set_viewport_size(DESKTOP)
    page.reload()
    settled(page)


def login_ui(page, email, password=PASSWORD):
    page.goto(BASE + "/dashboard")
    page.fill("#login-form input[name=email]", email)
    page.fill("#login-form input[name=password]", password)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#logout")
    settled(page)


def nav(page, label):
    page.click(f"#nav a:text-is('{label}')")
    settled(page)
