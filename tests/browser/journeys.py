"""The dashboard's journeys in headless Chromium (Playwright), run by tests/dashboard.rs against
a real gateway with a fake provider, a fake Stripe and fake tool servers. Exits non-zero with a
clear message on the first failed assertion; prints "journeys: all passed" at the end."""

import calendar
import os
import re
import sys
import time
import traceback

from playwright.sync_api import sync_playwright

from journey_oauth import journey_o_an_mcp_client_is_approved_connected_and_disconnected

from support import (
    BASE, DESKTOP, ENV, OPEN, PASSWORD, PHONE, STRIPE, JourneyFailed, chat, check, cost_micros,
    credits_text, deliver_webhook, http, login_ui, nav, open_page, settled, shoot, signup_api, unique_email,
)

MODEL = ENV["TOLLGATE_MODEL"]
ALIAS, ALIAS_TO = ENV["TOLLGATE_ALIAS"], ENV["TOLLGATE_ALIAS_TO"]
ALIAS_AT = int(ENV["TOLLGATE_ALIAS_AT"])
FUNDED_KEY = ENV["TOLLGATE_FUNDED_KEY"]


def visible_error(page, form, field):
    return page.wait_for_selector(f"{form} [data-error-for={field}]:not([hidden])").inner_text()


def journey_c_the_changelog_announces_the_alias_change(browser):
    ctx, page, w = open_page(browser, "c: pricing and changelog")
    page.goto(BASE + "/")
    settled(page)
    check(time.time() < ALIAS_AT, "the alias change happened before the changelog was seen")
    entry = page.locator("#changelog li.change-alias_change")
    check(entry.count() == 1, f"{entry.count()} alias changes in the changelog")
    text = entry.inner_text()
    check(ALIAS in text and ALIAS_TO in text and "scheduled" in text, f"changelog entry: {text!r}")
    check("deprecated" in page.inner_text("#changelog"), "no deprecation in the changelog")
    row = page.inner_text(f"#model-{MODEL}")
    check("Deprecated from 2030-01-01" in row and f"alias: {ALIAS}" in row, f"model row: {row!r}")
    check("$20 / month" in page.inner_text("#plan-pro"), "the pro plan's price is missing")
    check(page.is_visible("#buy-pro"), "no Buy button for pro")
    check(page.locator("#models tbody tr").count() == 3, "not every model is listed")
    shoot(page, "pricing")
    w.verify()
    ctx.close()


def journey_a_sign_up_use_and_buy_pro(browser):
    ctx, page, w = open_page(browser, "a: sign up, usage, buy pro")
    email = unique_email("buyer")
    # Buy from the pricing page while signed out: log in (here: sign up) first.
    page.goto(BASE + "/pricing")
    settled(page)
    page.click("#buy-pro")
    page.wait_for_selector("#login-form")
    check(page.url.endswith("/dashboard/billing?buy=pro"), f"Buy led to {page.url}")
    check("buy the pro plan" in page.inner_text("#main"), "the log-in screen does not say what is bought")
    page.click("#tab-signup")
    page.fill("#signup-form input[name=email]", email)
    page.fill("#signup-form input[name=password]", "short")
    w.expect(400, "/api/v1/auth/signup")
    page.click("#signup-form button[type=submit]")
    err = visible_error(page, "#signup-form", "password")
    check("at least 8 characters" in err, f"short password error: {err!r}")
    page.fill("#signup-form input[name=password]", PASSWORD)
    page.click("#signup-form button[type=submit]")
    page.wait_for_selector("#new-key")
    key = page.inner_text("#new-key").strip()
    check(re.fullmatch(r"tg_[0-9A-Za-z]{40}", key) is not None, f"not a key: {key!r}")
    check("shown only this once" in page.inner_text("#new-key-panel"), "no warning that the key is shown once")
    check(page.is_visible("#continue-checkout"), "no way on to the checkout after signing up")
    # The billing view is still loading its data behind the key: a reload now would abort
    # those requests (the browser's ERR_ABORTED, which the journey's watch counts as a failure).
    settled(page)
    page.reload()
    settled(page)
    check(page.locator("#new-key").count() == 0, "the key is shown again after a reload")
    check(key not in page.content(), "the key is still in the page")

    status, reply, _ = chat(key, MODEL)
    check(status == 200, f"chat with the new key: {status} {reply}")
    cost = cost_micros(reply["usage"])
    nav(page, "Usage")
    row = page.locator("#recent tbody tr").first
    check(MODEL in row.inner_text(), f"recent request: {row.inner_text()!r}")
    shown = row.locator("td.credits").inner_text()
    check(shown == credits_text(cost), f"cost shown {shown!r}, charged {credits_text(cost)}")
    check(page.locator("#usage-chart-svg rect.bar").count() == 30, "the chart has not 30 days")
    check(credits_text(cost) in page.inner_text("#usage-total"), "the 30-day total is not the cost")
    with page.expect_download() as dl:
        page.click("#export-csv")
    with open(dl.value.path(), encoding="utf-8") as f:
        csv = f.read()
    check(csv.startswith("time_utc,request_id,model_requested") and f",{MODEL},{MODEL}," in csv, f"CSV: {csv!r}")
    # The same question twice through the response cache: the second is a free hit, and the
    # page shows what it saved.
    ask = {"model": MODEL, "messages": [{"role": "user", "content": "Cache this answer"}]}
    cache = {"Authorization": f"Bearer {key}", "X-Tollgate-Cache": "on"}
    status, first, _ = http("POST", "/v1/chat/completions", ask, cache)
    check(status == 200, f"cached chat: {status} {first}")
    status, second, _ = http("POST", "/v1/chat/completions", ask, cache)
    check(status == 200 and cost_micros(second["usage"]) == cost_micros(first["usage"]), f"hit: {second}")
    nav(page, "Overview")
    nav(page, "Usage")
    saved = page.inner_text("#usage-saved")
    check(credits_text(cost_micros(first["usage"])) in saved and "1 response cache hits" in saved, f"saved: {saved!r}")
    check(page.locator("#recent tbody tr").first.locator(".cache-hit").count() == 1, "the hit is not marked")
    cost += cost_micros(first["usage"])  # what the account has spent: the miss (the hit was free)
    shoot(page, "usage")

    # Buy pro: Stripe's (fake) page, the signed webhook, back to the dashboard.
    nav(page, "Billing")
    page.click("#billing-buy-pro")
    page.wait_for_url(re.compile(re.escape(STRIPE) + r"/c/pay/"))
    sid = page.inner_text("#session").strip()
    auth = {"Authorization": f"Bearer {ENV['TOLLGATE_STRIPE_KEY']}"}
    status, session, _ = http("GET", f"{STRIPE}/v1/checkout/sessions/{sid}", headers=auth)
    check(status == 200 and session["client_reference_id"], f"checkout session {sid}: {status} {session}")
    obj = {"id": sid, "object": "checkout.session", "payment_status": "paid", "status": "complete",
           "mode": session["mode"], "client_reference_id": session["client_reference_id"],
           "metadata": session["metadata"], "customer": f"cus_{sid}", "subscription": f"sub_{sid}",
           "customer_email": session.get("customer_email"), "amount_total": 2000, "currency": "usd"}
    event = {"id": f"evt_browser_{time.time_ns()}", "object": "event", "type": "checkout.session.completed",
             "api_version": "2024-06-20", "created": int(time.time()), "livemode": False, "data": {"object": obj}}
    status, body, _ = deliver_webhook(event)
    check(status == 200 and body.get("duplicate") is False, f"webhook: {status} {body}")
    page.click("#paid")
    page.wait_for_url("**/dashboard/billing?paid=1")
    settled(page)
    check(page.inner_text("#billing-plan .stat-value") == "Pro", "billing does not show pro")
    check(page.inner_text("#billing-subscription .stat-value") == "active", "no active subscription shown")
    check("10,000" in page.inner_text("#main table"), "the payment is not in the history")
    check(page.is_visible("#manage-subscription"), "no way to manage the subscription")
    shoot(page, "billing")
    # "Manage subscription" opens the Stripe portal session the gateway made (Stripe's host is
    # answered here: the fake's portal URL names a host that does not exist).
    page.route("https://billing.stripe.test/**", lambda route: route.fulfill(
        status=200, content_type="text/html",
        body="<!doctype html><title>Portal</title><link rel=icon href='data:,'><p>Fake portal</p>"))
    page.click("#manage-subscription")
    page.wait_for_url(f"https://billing.stripe.test/p/session/cus_{sid}")

    page.goto(BASE + "/dashboard")
    settled(page)
    check(page.inner_text("#stat-plan .stat-value") == "Pro", "the overview does not show pro")
    balance = credits_text(100_000_000 + 10_000_000_000 - cost)
    shown = page.inner_text("#stat-balance .stat-value")
    check(shown == f"{balance} credits", f"balance shown {shown!r}, expected {balance}")
    check(credits_text(cost) in page.inner_text("#stat-month"), "this month's spend is not the chat's cost")
    check("7,200" in page.inner_text("#stat-hour"), f"pro's hourly window: {page.inner_text('#stat-hour')!r}")
    shoot(page, "overview")
    nav(page, "API keys")
    shoot(page, "keys")
    w.verify()
    ctx.close()
    return {"email": email, "key": key}


def journey_b_issue_and_revoke_a_key(browser, _buyer):
    # A fresh account (journey a's already subscribes to pro, and a second subscription is
    # refused), made through the API.
    email = unique_email("keys")
    user = {"email": email, "key": signup_api(email)["api_key"]}
    ctx, page, w = open_page(browser, "b: issue and revoke a key")
    # Buy while signed out, then log in: the checkout follows the log-in at once.
    page.goto(BASE + "/pricing")
    settled(page)
    page.click("#buy-pro")
    page.fill("#login-form input[name=email]", user["email"])
    page.fill("#login-form input[name=password]", PASSWORD)
    page.click("#login-form button[type=submit]")
    page.wait_for_url(re.compile(re.escape(STRIPE) + r"/c/pay/"))
    page.goto(BASE + "/dashboard/keys")
    settled(page)
    page.fill("#issue-key-form input[name=name]", "ci")
    page.click("#issue-key-form button[type=submit]")
    page.wait_for_selector("#new-key")
    key = page.inner_text("#new-key").strip()
    check(key.startswith("tg_") and key != user["key"], f"issued: {key!r}")
    check(chat(key, MODEL)[0] == 200, "the issued key does not work")
    row = "#keys-list tr:has(.key-name:text-is('ci'))"
    page.wait_for_selector(row)
    check(page.inner_text(f"{row} td:nth-child(2)") == key[:8] + "…", "the list does not show the key's prefix")
    # The confirmation can be cancelled, and the whole thing done with the keyboard.
    page.click(f"{row} button[aria-label='Revoke key ci']")
    page.click(f"{row} button:text-is('Cancel')")
    check(page.inner_text(f"{row} .badge") == "active", "cancel revoked the key")
    page.focus(f"{row} button[aria-label='Revoke key ci']")
    page.keyboard.press("Enter")
    check(page.evaluate("() => document.activeElement.textContent") == "Yes, revoke", "focus is not on the confirmation")
    page.keyboard.press("Enter")
    page.wait_for_selector(f"{row} .badge-off")
    status, body, _ = chat(key, MODEL)
    check(status == 401 and body["error"]["type"] == "authentication_error", f"revoked key: {status} {body}")
    check(chat(user["key"], MODEL)[0] == 200, "revoking one key stopped another")
    w.verify()
    ctx.close()


def journey_k_a_key_gets_a_budget_models_expiry_limits_and_a_successor(browser):
    email = unique_email("controls")
    auth = {"Authorization": f"Bearer {signup_api(email)['api_key']}"}

    def agent_keys():
        """The account's live keys named "agent", as the API lists them."""
        status, body, _ = http("GET", "/api/v1/keys", headers=auth)
        check(status == 200, f"list keys: {status} {body}")
        return [k for k in body["data"] if k["name"] == "agent" and not k["revoked"]]

    def settings(k):
        names = ["budget_credits", "budget_period", "allowed_models", "expires_at",
                 "requests_per_minute", "tokens_per_minute", "concurrent_requests"]
        return {n: k.get(n) for n in names}

    ctx, page, w = open_page(browser, "k: key controls")
    login_ui(page, email)
    nav(page, "API keys")
    # Issued with every control set.
    form = "#issue-key-form"
    expiry = time.strftime("%Y-%m-%d", time.gmtime(time.time() + 30 * 86_400))
    page.fill(f"{form} input[name=name]", "agent")
    page.click(f"{form} summary:text-is('Budget, models, expiry and limits (optional)')")
    page.fill(f"{form} input[name=budget_credits]", "50")
    page.select_option(f"{form} select[name=budget_period]", "day")
    page.fill(f"{form} input[name=allowed_models]", MODEL)
    page.fill(f"{form} input[name=expires_at]", expiry)
    page.fill(f"{form} input[name=requests_per_minute]", "60")
    page.fill(f"{form} input[name=tokens_per_minute]", "10000")
    page.fill(f"{form} input[name=concurrent_requests]", "3")
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector("#new-key")
    key = page.inner_text("#new-key").strip()
    [k] = agent_keys()
    issued = {"budget_credits": 50, "budget_period": "day", "allowed_models": [MODEL],
              "expires_at": calendar.timegm(time.strptime(expiry, "%Y-%m-%d")),
              "requests_per_minute": 60, "tokens_per_minute": 10_000, "concurrent_requests": 3}
    check(settings(k) == issued, f"issued with {settings(k)}, asked for {issued}")
    status, reply, _ = chat(key, MODEL)
    check(status == 200, f"chat with the agent's key: {status} {reply}")
    cost = cost_micros(reply["usage"])
    status, body, _ = chat(key, "g-2024-01-01")
    check(status == 404 and body["error"]["type"] == "model_not_found", f"a model outside the allowlist: {status} {body}")
    page.reload()
    settled(page)
    row = f"#key-{k['id']}"
    cell = lambda name: page.inner_text(f"{row} td.key-{name}")  # noqa: E731
    check(page.locator("#new-key").count() == 0 and key not in page.content(), "the key is shown again")
    check(cell("budget").startswith(f"{credits_text(cost)} / 50") and "per day, resets" in cell("budget"),
          f"budget shown as {cell('budget')!r}, spent {credits_text(cost)}")
    for want in ("60 requests/min", "10,000 tokens/min", "3 at once"):
        check(want in cell("limits"), f"limits shown as {cell('limits')!r}")
    check(cell("models") == MODEL and cell("expires") == f"{expiry} 00:00 UTC",
          f"models {cell('models')!r}, expiry {cell('expires')!r}")

    # Edited: another budget and period, one limit cleared, two changed, a tier allowed, no expiry.
    page.click(f"{row} button[aria-label='Settings of key agent']")
    form = "#key-settings-form"
    check(page.input_value(f"{form} input[name=budget_credits]") == "50", "the settings do not start from the key's")
    check(page.input_value(f"{form} input[name=expires_at]") == expiry, "the expiry is not in the settings")
    page.fill(f"{form} input[name=budget_credits]", "75")
    page.select_option(f"{form} select[name=budget_period]", "week")
    page.fill(f"{form} input[name=allowed_models]", f"{MODEL}, economy")
    page.fill(f"{form} input[name=expires_at]", "")
    page.fill(f"{form} input[name=requests_per_minute]", "")
    page.fill(f"{form} input[name=tokens_per_minute]", "20000")
    page.fill(f"{form} input[name=concurrent_requests]", "2")
    page.click(f"{form} button[type=submit]")
    page.wait_for_selector("#key-settings", state="detached")
    page.wait_for_selector(".notice:has-text('Settings of “agent” saved')")
    edited = {"budget_credits": 75, "budget_period": "week", "allowed_models": [MODEL, "economy"], "expires_at": None,
              "requests_per_minute": None, "tokens_per_minute": 20_000, "concurrent_requests": 2}
    [k] = agent_keys()
    check(settings(k) == edited, f"edited to {settings(k)}, asked for {edited}")
    check(cell("budget").startswith(f"{credits_text(cost)} / 75") and "per week" in cell("budget"), f"budget {cell('budget')!r}")
    check(cell("limits").split("\n") == ["20,000 tokens/min", "2 at once"], f"limits {cell('limits')!r}")
    check(cell("models") == f"{MODEL}, economy" and cell("expires") == "Never", f"{cell('models')!r}, {cell('expires')!r}")

    # Bad values are refused by name, next to their field, and change nothing.
    w.expect(400, "/api/v1/keys/")
    page.click(f"{row} button[aria-label='Settings of key agent']")
    page.fill(f"{form} input[name=budget_credits]", "-5")
    page.fill(f"{form} input[name=concurrent_requests]", "1")
    page.click(f"{form} button[type=submit]")
    err = visible_error(page, form, "budget_credits")
    check("budget_credits" in err, f"a negative budget refused as {err!r}")
    page.fill(f"{form} input[name=budget_credits]", "75")
    page.fill(f"{form} input[name=allowed_models]", f"{MODEL}, no-such-model")
    page.click(f"{form} button[type=submit]")
    err = visible_error(page, form, "allowed_models")
    check("no-such-model" in err, f"an unknown model refused as {err!r}")
    page.keyboard.press("Escape")
    page.wait_for_selector("#key-settings", state="detached")
    [k] = agent_keys()
    check(settings(k) == edited, f"a refused change changed {settings(k)}")

    # At phone width the dialog fits.
    page.set_viewport_size(PHONE)
    page.click(f"{row} button[aria-label='Settings of key agent']")
    box = page.locator("#key-settings").bounding_box()
    width = page.evaluate("() => document.documentElement.scrollWidth")
    check(box["width"] <= PHONE["width"] and width <= PHONE["width"] + 1, f"settings at phone width: {box}, page {width}px")
    page.screenshot(path=os.path.join(ENV["TOLLGATE_SCREENSHOTS"], "key-settings-phone.png"))
    page.click("#key-settings button:text-is('Cancel')")
    page.set_viewport_size(DESKTOP)

    # Rotated: the successor is shown once and has the same settings; the old key works for an hour.
    page.click(f"{row} button[aria-label='Rotate key agent']")
    page.select_option("#rotate-key-form select[name=grace_seconds]", "3600")
    page.click("#rotate-key-form button[type=submit]")
    page.wait_for_selector("#new-key")
    successor = page.inner_text("#new-key").strip()
    panel = page.inner_text("#new-key-panel")
    check(re.fullmatch(r"tg_[0-9A-Za-z]{40}", successor) and successor != key, f"rotated to {successor!r}")
    check("shown only this once" in panel and f"{key[:8]}… keeps working until" in panel, f"rotation panel: {panel!r}")
    keys = {x["id"]: x for x in agent_keys()}
    check(len(keys) == 2 and k["id"] in keys, f"after rotating: {list(keys.values())}")
    old = keys.pop(k["id"])
    [new] = keys.values()
    check(settings(new) == edited, f"the successor has {settings(new)}, the key had {edited}")
    check(abs(old["expires_at"] - (time.time() + 3600)) < 60, f"the old key expires at {old['expires_at']}")
    page.wait_for_selector(f"#key-{new['id']}")
    check(page.inner_text(f"#key-{new['id']} td.key-limits").split("\n") == ["20,000 tokens/min", "2 at once"],
          "the successor's limits are not shown")
    check(page.inner_text(f"{row} td.key-expires") == time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(old["expires_at"])),
          "the old key's end is not shown")
    check(chat(successor, MODEL)[0] == 200 and chat(key, MODEL)[0] == 200, "a key of the rotation does not work")
    page.reload()
    settled(page)
    check(page.locator("#new-key").count() == 0 and successor not in page.content(), "the successor is shown again")
    shoot(page, "key-controls")
    w.verify()
    ctx.close()


def journey_d_a_tool_server_is_registered_approved_and_earns(browser):
    dev_email = unique_email("dev")
    dev = signup_api(dev_email)
    # A payment no account can be found for (no reference, an unknown payer): unclaimed.
    payer = unique_email("payer")
    obj = {"id": f"cs_elsewhere_{time.time_ns()}", "object": "checkout.session", "payment_status": "paid",
           "status": "complete", "mode": "payment", "metadata": {"plan": "pro"},
           "customer_details": {"email": payer}, "amount_total": 2000, "currency": "usd"}
    status, body, _ = deliver_webhook({"id": f"evt_browser_{time.time_ns()}", "object": "event",
                                       "type": "checkout.session.completed", "created": int(time.time()),
                                       "livemode": False, "data": {"object": obj}})
    check(status == 200, f"unclaimed payment's webhook: {status} {body}")
    ctx, page, w = open_page(browser, "d: developer")
    login_ui(page, dev_email)
    nav(page, "Developer")
    slug = f"wx{time.time_ns() % 10**9}"
    form = "#register-form"
    page.fill(f"{form} input[name=slug]", slug)
    page.fill(f"{form} input[name=upstream_url]", ENV["TOLLGATE_NO_TOOLS_URL"])
    page.fill(f"{form} input[name=default_credits]", "5")
    page.fill(f"{form} input[name=name]", "Weather")
    w.expect(422, "/api/v1/mcp/services")
    page.click(f"{form} button[type=submit]")
    err = visible_error(page, form, "upstream_url")
    check("live check" in err, f"failed check shown as {err!r}")
    page.fill(f"{form} input[name=upstream_url]", ENV["TOLLGATE_TOOLS_URL"])
    page.click(f"{form} button[type=submit]")
    found = page.wait_for_selector("#register-result .tools-found").inner_text()
    check("echo" in found and "add" in found, f"tools found: {found!r}")
    check(page.inner_text(f"#service-{slug} .badge") == "pending", "the new service is not pending")

    octx, opage, ow = open_page(browser, "d: operator")
    login_ui(opage, ENV["TOLLGATE_OPERATOR_EMAIL"])
    nav(opage, "Operator")
    card = opage.wait_for_selector(f"#ops-service-{slug}")
    check("echo, add" in card.inner_text(), f"pending service: {card.inner_text()!r}")
    opage.click(f"#approve-{slug}")
    opage.wait_for_selector(f"#ops-tools .notice:has-text('{slug} is now live')")
    opage.click("#filter-live")
    opage.wait_for_selector(f"#ops-service-{slug} #suspend-{slug}")
    opage.fill("#find-account-form input[name=q]", dev_email)
    opage.click("#find-account-form button[type=submit]")
    opage.wait_for_selector("#ops-account")
    check(opage.inner_text("#ops-balance .stat-value") == "100 credits", "the account's balance")
    opage.fill("#adjust-credits-form input[name=delta]", "25")
    opage.fill("#adjust-credits-form input[name=reason]", "browser test")
    opage.click("#adjust-credits-form button[type=submit]")
    opage.wait_for_selector("#ops-account .notice:has-text('is now 125 credits')")
    check(opage.inner_text("#ops-balance .stat-value") == "125 credits", "the adjusted balance")
    unclaimed = f"#ops-unclaimed tr:has-text('{payer}')"
    opage.wait_for_selector(unclaimed)
    shoot(opage, "operator")
    opage.fill(f"{unclaimed} input[name=user_id]", dev["user_id"])
    opage.click(f"{unclaimed} button[type=submit]")
    opage.wait_for_selector(f".notice:has-text('Assigned to {dev['user_id']}')")
    check(opage.locator(unclaimed).count() == 0, "the assigned payment is still listed")
    status, me, _ = http("GET", "/api/v1/auth/me", headers={"Authorization": f"Bearer {dev['api_key']}"})
    check(me["plan"] == "pro" and credits_text(round(me["credits"] * 1e6)) == "10,125", f"after assigning: {me}")
    ow.expect(404, "/api/v1/admin/accounts")
    opage.fill("#find-account-form input[name=q]", unique_email("nobody"))
    opage.click("#find-account-form button[type=submit]")
    visible_error(opage, "#find-account-form", "q")
    ow.verify()
    octx.close()

    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": f"{slug}__echo", "arguments": {"text": "hi"}}}
    status, body, _ = http("POST", "/mcp", call, {"Authorization": f"Bearer {FUNDED_KEY}"})
    check(status == 200 and "result" in body, f"tools/call: {status} {body}")
    page.reload()
    settled(page)
    check(page.inner_text(f"#service-{slug} .badge") == "live", "the service is not live for its developer")
    check(page.inner_text("#earned-total .stat-value") == "4", f"earned: {page.inner_text('#earned-total')!r}")
    check(page.inner_text(f"#earned-{slug} td:nth-child(2)") == "1", "the call is not counted")
    shoot(page, "developer")
    w.verify()
    ctx.close()


def journey_e_log_out_ends_the_session(browser, user):
    ctx, page, w = open_page(browser, "e: log out")
    page.goto(BASE + "/dashboard")
    settled(page)
    # With the keyboard alone.
    page.focus("#login-form input[name=email]")
    page.keyboard.type(user["email"])
    page.keyboard.press("Tab")
    page.keyboard.type(PASSWORD)
    page.keyboard.press("Enter")
    page.wait_for_selector("#logout")
    cookie = next(c for c in ctx.cookies() if c["name"] == "tg_session")
    check(cookie["httpOnly"], "the session cookie is readable by scripts")
    page.click("#logout")
    page.wait_for_selector("#login-form")
    check(page.url == BASE + "/dashboard", f"after logging out: {page.url}")
    status, _, _ = http("GET", "/api/v1/auth/me", headers={"Cookie": f"tg_session={cookie['value']}"})
    check(status == 401, f"the old session still works: {status}")
    check(page.request.get(BASE + "/api/v1/auth/me").status == 401, "the browser is still signed in")
    page.reload()
    settled(page)
    check(page.is_visible("#login-form"), "a reload shows more than the log-in screen")
    page.click("#tab-signup")
    page.fill("#signup-form input[name=email]", user["email"])
    page.fill("#signup-form input[name=password]", PASSWORD)
    w.expect(409, "/api/v1/auth/signup")
    page.click("#signup-form button[type=submit]")
    check("exists" in visible_error(page, "#signup-form", "email"), "no word of the taken e-mail")
    page.click("#tab-login")
    page.fill("#login-form input[name=email]", user["email"])
    page.fill("#login-form input[name=password]", "not the password")
    w.expect(401, "/api/v1/auth/login")
    page.click("#login-form button[type=submit]")
    check("wrong" in visible_error(page, "#login-form", "password"), "no word of the wrong password")
    w.verify()
    ctx.close()


def journey_c_the_alias_switches_on_time(browser):
    wait = ALIAS_AT + 1 - time.time()
    if wait > 0:
        time.sleep(wait)
    status, reply, _ = chat(FUNDED_KEY, ALIAS)
    check(status == 200 and reply["model"] == ALIAS_TO, f"{ALIAS} after its change: {status} {reply}")
    ctx, page, w = open_page(browser, "c: the change is in effect")
    page.goto(BASE + "/pricing")
    settled(page)
    text = page.inner_text("#changelog li.change-alias_change")
    check("in effect" in text, f"changelog entry after the change: {text!r}")
    w.verify()
    ctx.close()


def run(name, fn, *args):
    started = time.time()
    try:
        result = fn(*args)
    except Exception as e:  # noqa: BLE001 — any failure ends the run with its story
        for i, ctx in enumerate(OPEN):
            for j, page in enumerate(ctx.pages):
                try:
                    path = os.path.join(ENV["TOLLGATE_SCREENSHOTS"], f"failed-{fn.__name__}-{i}-{j}.png")
                    page.screenshot(path=path, full_page=True)
                    print(f"  page {page.url} (screenshot {path}):\n{page.inner_text('body')[:1500]}")
                except Exception:  # noqa: BLE001
                    pass
        kind = "" if isinstance(e, JourneyFailed) else f"{type(e).__name__}: "
        print(f"FAILED {name}: {kind}{e}")
        if not isinstance(e, JourneyFailed):
            traceback.print_exc(file=sys.stdout)
        sys.exit(1)
    finally:
        for ctx in OPEN:
            try:
                ctx.close()
            except Exception:  # noqa: BLE001
                pass
        OPEN.clear()
    print(f"ok {name} ({time.time() - started:.1f}s)")
    return result


def main():
    with sync_playwright() as p:
        browser = p.chromium.launch(executable_path=ENV["TOLLGATE_CHROMIUM"], args=["--no-sandbox"])
        try:
            run("c1. the changelog lists a scheduled alias change", journey_c_the_changelog_announces_the_alias_change, browser)
            user = run("a. sign up, key once, usage, buy pro", journey_a_sign_up_use_and_buy_pro, browser)
            run("b. issue and revoke a key", journey_b_issue_and_revoke_a_key, browser, user)
            run("k. a key's budget, models, expiry and limits; rotation",
                journey_k_a_key_gets_a_budget_models_expiry_limits_and_a_successor, browser)
            run("d. register, approve, call, earn", journey_d_a_tool_server_is_registered_approved_and_earns, browser)
            run("e. log out ends the session", journey_e_log_out_ends_the_session, browser, user)
            run("o. an MCP client signs in with OAuth; connected apps", journey_o_an_mcp_client_is_approved_connected_and_disconnected, browser)
            run("c2. the alias switches at its time", journey_c_the_alias_switches_on_time, browser)
        finally:
            browser.close()
    print("journeys: all passed")


if __name__ == "__main__":
    main()
