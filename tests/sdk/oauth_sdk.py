"""Signs the official `mcp` Python SDK (1.x) in to a running Tollgate with OAuth, as an MCP
client such as Claude Desktop would: `OAuthClientProvider` gets a 401 from /mcp, discovers the
protected-resource and authorization-server metadata, registers itself (RFC 7591), and hands
the authorization URL (PKCE S256) to its redirect handler. That handler drives Chromium through
Playwright: the consent page asks the account holder to log in, shows the client, and is
approved; the browser returns to a small local callback server, which catches the code. The SDK
exchanges it and lists and calls a tool through /mcp with the access token; a refresh follows.

Usage: TOLLGATE_BASE_URL=http://127.0.0.1:PORT TOLLGATE_EMAIL=… TOLLGATE_PASSWORD=…
       TOLLGATE_SLUG=… TOLLGATE_CHROMIUM=/usr/bin/chromium
Prints `sdk-oauth: all passed` and the grant's client name on success.
"""
import asyncio
import os
import threading
import urllib.parse
from http.server import BaseHTTPRequestHandler, HTTPServer

from mcp import ClientSession
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamablehttp_client
from mcp.shared.auth import OAuthClientInformationFull, OAuthClientMetadata, OAuthToken
from playwright.async_api import async_playwright

BASE = os.environ["TOLLGATE_BASE_URL"]
EMAIL = os.environ["TOLLGATE_EMAIL"]
PASSWORD = os.environ["TOLLGATE_PASSWORD"]
SLUG = os.environ["TOLLGATE_SLUG"]
CHROMIUM = os.environ["TOLLGATE_CHROMIUM"]
CLIENT_NAME = "Tollgate SDK test"


class Memory(TokenStorage):
    def __init__(self):
        self.tokens = None
        self.client = None

    async def get_tokens(self):
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken):
        self.tokens = tokens

    async def get_client_info(self):
        return self.client

    async def set_client_info(self, info: OAuthClientInformationFull):
        self.client = info


class Callback:
    """A local HTTP server on the loopback that catches the authorization response."""

    def __init__(self):
        self.query = None
        self.arrived = threading.Event()
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_GET(self):
                # Only the redirect counts: the browser asks for /favicon.ico afterwards, which
                # would otherwise overwrite the code before the SDK reads it.
                parsed = urllib.parse.urlparse(self.path)
                if parsed.path != "/callback":
                    self.send_response(404)
                    self.end_headers()
                    return
                if outer.arrived.is_set():
                    self.send_response(409)
                    self.end_headers()
                    return
                outer.query = urllib.parse.parse_qs(parsed.query)
                self.send_response(200)
                self.send_header("Content-Type", "text/plain")
                self.end_headers()
                self.wfile.write(b"You can close this window.")
                outer.arrived.set()

            def log_message(self, *args):
                pass

        self.server = HTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/callback"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    async def wait(self):
        for _ in range(600):
            if self.arrived.is_set():
                break
            await asyncio.sleep(0.05)
        assert self.arrived.is_set(), "the browser never came back to the callback"
        q = self.query
        assert "code" in q, f"no code in the callback: {q}"
        return q["code"][0], (q.get("state") or [None])[0]


async def main():
    callback = Callback()
    seen = {}
    async with async_playwright() as pw:
        browser = await pw.chromium.launch(executable_path=CHROMIUM, args=["--no-sandbox"])
        page = await browser.new_page()
        errors = []
        page.on("pageerror", lambda e: errors.append(str(e)))

        async def redirect_handler(url: str):
            seen["authorize_url"] = url
            q = urllib.parse.parse_qs(urllib.parse.urlparse(url).query)
            assert q["code_challenge_method"] == ["S256"], q
            assert q["resource"] == [f"{BASE}/mcp"], q
            await page.goto(url)
            # Not signed in: the consent page shows the log-in form first, and keeps the request.
            await page.wait_for_selector("#login-form")
            assert page.url.startswith(f"{BASE}/dashboard/authorize?"), page.url
            await page.fill("#login-form input[name=email]", EMAIL)
            await page.fill("#login-form input[name=password]", PASSWORD)
            await page.click("#login-form button[type=submit]")
            await page.wait_for_selector("#consent-form")
            seen["client_text"] = await page.inner_text("#consent-client")
            seen["resource"] = await page.inner_text("#consent-resource")
            await page.click("#consent-form button[type=submit]")

        provider = OAuthClientProvider(
            server_url=f"{BASE}/mcp",
            client_metadata=OAuthClientMetadata(
                client_name=CLIENT_NAME,
                redirect_uris=[callback.url],
                grant_types=["authorization_code", "refresh_token"],
                response_types=["code"],
                token_endpoint_auth_method="none",
            ),
            storage=Memory(),
            redirect_handler=redirect_handler,
            callback_handler=callback.wait,
        )
        async with streamablehttp_client(f"{BASE}/mcp", auth=provider) as (read, write, _):
            async with ClientSession(read, write) as s:
                await s.initialize()
                names = {t.name for t in (await s.list_tools()).tools}
                assert f"{SLUG}__echo" in names, names
                r = await s.call_tool(f"{SLUG}__echo", {"text": "signed in"})
                assert not r.isError, r
                assert r.content[0].text == "signed in", r
        await browser.close()
    assert CLIENT_NAME in seen["client_text"], seen
    assert seen["resource"] == f"{BASE}/mcp", seen
    assert not errors, errors
    tokens = provider.context.current_tokens
    assert tokens.access_token.startswith("tga_") and tokens.refresh_token.startswith("tgr_"), tokens
    # The SDK refreshes an expired token by itself: make it think so, and call again.
    provider.context.token_expiry_time = 1
    old_refresh = tokens.refresh_token
    async with streamablehttp_client(f"{BASE}/mcp", auth=provider) as (read, write, _):
        async with ClientSession(read, write) as s:
            await s.initialize()
            r = await s.call_tool(f"{SLUG}__echo", {"text": "refreshed"})
            assert r.content[0].text == "refreshed", r
    assert provider.context.current_tokens.refresh_token != old_refresh, "the refresh token did not rotate"
    print("old refresh token:", old_refresh)
    print("sdk-oauth: all passed")


asyncio.run(main())
