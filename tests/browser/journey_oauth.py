"""Journey o: an MCP client's OAuth sign-in seen from the browser. The consent page (signed out:
log in first, the request kept), deny and approve, the code caught at the client's redirect URI
and exchanged with its PKCE verifier, then Connected apps lists the grant and disconnects it, and
its token stops working. Run from journeys.py."""

import base64
import hashlib
import json
import urllib.parse

from support import BASE, PASSWORD, check, http, nav, open_page, settled, shoot, signup_api, unique_email

REDIRECT = "http://127.0.0.1:9/oauth-callback"
VERIFIER = "browser-journey-verifier-0123456789-abcdefghijklmnop"


def form_post(path, fields):
    body = urllib.parse.urlencode(fields).encode()
    return http("POST", path, body, {"Content-Type": "application/x-www-form-urlencoded"})


def mcp_status(token):
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    return http("POST", "/mcp", body, {"Authorization": f"Bearer {token}"})[0]


def journey_o_an_mcp_client_is_approved_connected_and_disconnected(browser):
    email = unique_email("oauth")
    signup_api(email)
    status, client, _ = http("POST", "/oauth/register", {"client_name": "Journey Desktop", "redirect_uris": [REDIRECT]})
    check(status == 201, f"register: {status} {client}")
    challenge = base64.urlsafe_b64encode(hashlib.sha256(VERIFIER.encode()).digest()).rstrip(b"=").decode()
    query = urllib.parse.urlencode({
        "response_type": "code", "client_id": client["client_id"], "redirect_uri": REDIRECT,
        "code_challenge": challenge, "code_challenge_method": "S256", "state": "journey-o",
        "resource": BASE + "/mcp",
    })
    ctx, page, w = open_page(browser, "o: an MCP client's sign-in")
    # The client's own address: answered in the browser, as a native client's listener would.
    page.route(REDIRECT + "**", lambda route: route.fulfill(status=200, content_type="text/plain", body="back in the app"))
    page.goto(BASE + "/oauth/authorize?" + query)
    page.wait_for_selector("#login-form")
    check(page.url.startswith(BASE + "/dashboard/authorize?"), f"not on the consent page: {page.url}")
    page.fill("#login-form input[name=email]", email)
    page.fill("#login-form input[name=password]", PASSWORD)
    page.click("#login-form button[type=submit]")
    page.wait_for_selector("#consent-form")
    settled(page)
    check("Journey Desktop" in page.inner_text("#consent-client"), "the consent page does not name the client")
    check(page.inner_text("#consent-redirect") == REDIRECT, "the consent page does not show the redirect URI")
    check(page.inner_text("#consent-resource") == BASE + "/mcp", "the consent page does not show the resource")
    shoot(page, "oauth-consent")
    # Deny: the client is told so, with its state.
    page.click("#consent-deny")
    page.wait_for_url(REDIRECT + "**")
    back = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    check(back.get("error") == ["access_denied"] and back.get("state") == ["journey-o"], f"deny: {page.url}")
    # Again, signed in now: straight to the consent form; approve as a new key.
    page.goto(BASE + "/oauth/authorize?" + query)
    page.wait_for_selector("#consent-form")
    settled(page)
    page.click("#consent-form button[type=submit]")
    page.wait_for_url(REDIRECT + "**")
    back = urllib.parse.parse_qs(urllib.parse.urlparse(page.url).query)
    check("code" in back and back.get("state") == ["journey-o"], f"approve: {page.url}")
    status, tokens, _ = form_post("/oauth/token", {
        "grant_type": "authorization_code", "code": back["code"][0], "code_verifier": VERIFIER,
        "client_id": client["client_id"], "redirect_uri": REDIRECT,
    })
    check(status == 200, f"token: {status} {tokens}")
    check(mcp_status(tokens["access_token"]) == 200, "the access token does not open /mcp")
    # Connected apps: the grant, and disconnecting it.
    page.goto(BASE + "/dashboard")
    settled(page)
    nav(page, "Connected apps")
    row = "#grants-list tr.grant-row:has(.grant-client:text-is('Journey Desktop'))"
    page.wait_for_selector(row)
    check("OAuth: Journey Desktop" in page.inner_text(row), "the grant's key is not shown")
    shoot(page, "oauth-apps")
    page.click(f"{row} button:text-is('Disconnect')")
    page.wait_for_selector(row, state="detached")
    check(mcp_status(tokens["access_token"]) == 401, "a disconnected app's token still works")
    status, body, _ = form_post("/oauth/token", {
        "grant_type": "refresh_token", "refresh_token": tokens["refresh_token"], "client_id": client["client_id"],
    })
    check(status == 400 and body["error"] == "invalid_grant", f"refresh after disconnect: {status} {json.dumps(body)}")
    w.verify()
    ctx.close()
