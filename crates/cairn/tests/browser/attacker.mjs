// A web page against `cairn serve` in headless Chromium (DESIGN §8, "What
// a web page can do: nothing"). This script serves the attacker's page from
// another loopback port, as both a same-site origin (127.0.0.1:OTHER) and a
// cross-site one (localhost:OTHER); the page tries every state-changing
// route with fetch (simple, no-cors, JSON), form posts (text/plain,
// urlencoded, multipart) into frames and at the top level, an <img>, a
// <script>, a frame of the viewer, and reads; a rebinding name
// (127.0.0.1.evil.example, mapped to 127.0.0.1 by the browser's resolver
// rules) is navigated to. It fails if any response was readable, and prints
// one JSON line of what it saw; the Rust test then checks through the API
// that nothing changed (CAIRN_ATTACK_DUMP=1 prints what each page saw). Usage:
//   node attacker.mjs TARGET_BASE SESSION_ID CHECKPOINT_ID
import http from "node:http";
import { launch } from "./chromium.mjs";

const [target, id, cp] = process.argv.slice(2);
const port = new URL(target).port;
const fail = (msg) => { console.error("attacker test: " + msg); process.exit(1); };

const routes = [
  `/v1/sessions/${id}/fork`, `/v1/sessions/${id}/checkpoints`, `/v1/checkpoints/${cp}/restore`,
  `/v1/sessions/${id}/resume`, `/v1/sessions/${id}/suspend`, `/v1/sessions/${id}/rewind`, `/v1/sessions`,
];

// The attacker's page. Everything it learns goes into window.results.
const attackPage = `<!doctype html><html><body><script>
"use strict";
const T = ${JSON.stringify(target)}, routes = ${JSON.stringify(routes)};
window.results = [];
const note = (name, outcome) => window.results.push(Object.assign({name}, outcome));
async function attempt(name, f) {
  try { note(name, {read: await f()}); } catch (e) { note(name, {error: String(e)}); }
}
// Waits for an element's load or error, up to 10 s (a frame's load fires
// for an error page too).
const settled = (el) => new Promise(res => {
  const t = setTimeout(() => res("timeout"), 10000);
  el.addEventListener("load", () => { clearTimeout(t); res("load"); });
  el.addEventListener("error", () => { clearTimeout(t); res("error"); });
});
(async () => {
  for (const r of routes) {
    await attempt("fetch text/plain POST " + r, async () => (await fetch(T + r, {method: "POST", body: '{"at": 1}'})).text());
    await attempt("fetch no-cors POST " + r, async () => {
      const res = await fetch(T + r, {method: "POST", mode: "no-cors", body: '{"at": 1}'});
      return {type: res.type, status: res.status, body: await res.text()};
    });
    await attempt("fetch no-cors POST with a JSON type (the browser drops it) " + r, async () => {
      const res = await fetch(T + r, {method: "POST", mode: "no-cors", headers: {"content-type": "application/json"}, body: '{"at": 1}'});
      return {type: res.type, status: res.status, body: await res.text()};
    });
    await attempt("fetch JSON POST (needs a preflight) " + r, async () =>
      (await fetch(T + r, {method: "POST", headers: {"content-type": "application/json"}, body: '{"at": 1}'})).text());
    for (const enc of ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data"]) {
      const name = "f" + Math.random().toString(36).slice(2);
      const frame = document.createElement("iframe"); frame.name = name; document.body.append(frame);
      const loaded = settled(frame);
      const form = document.createElement("form");
      form.method = "POST"; form.action = T + r; form.enctype = enc; form.target = name;
      const input = document.createElement("input"); input.name = '{"at": 1, "x": "'; input.value = '"}';
      form.append(input); document.body.append(form); form.submit();
      note("form " + enc + " " + r, {frame: await loaded});
    }
  }
  await attempt("fetch GET list", async () => (await fetch(T + "/v1/sessions")).text());
  await attempt("fetch GET list with credentials", async () => (await fetch(T + "/v1/sessions", {credentials: "include"})).text());
  await attempt("fetch no-cors GET list", async () => {
    const res = await fetch(T + "/v1/sessions", {mode: "no-cors"});
    return {type: res.type, status: res.status, body: await res.text()};
  });
  const img = new Image(); const imgDone = settled(img); img.src = T + "/v1/sessions";
  note("img", {outcome: await imgDone, width: img.naturalWidth});
  const script = document.createElement("script"); const scriptDone = settled(script);
  script.src = T + "/v1/sessions"; document.body.append(script);
  note("script", {outcome: await scriptDone});
  const viewer = document.createElement("iframe"); const viewerDone = settled(viewer);
  viewer.src = T + "/"; document.body.append(viewer);
  let inside = null;
  try { inside = viewer.contentDocument && viewer.contentDocument.body && viewer.contentDocument.body.innerText; } catch (e) { inside = null; }
  note("frame of the viewer", {frame: await viewerDone, inside});
  window.done = true;
})();
</script></body></html>`;

// A page whose form posts at the top level, as a link could make a user do.
const topPage = (route, enc) => `<!doctype html><html><body>
<form id="f" method="POST" action="${target}${route}" enctype="${enc}"><input name='{"at": 1, "x": "' value='"}'></form>
<script>document.getElementById("f").submit();</script></body></html>`;

const server = http.createServer((req, res) => {
  const url = new URL(req.url, "http://x");
  const body = url.pathname === "/top" ? topPage(url.searchParams.get("route"), url.searchParams.get("enc")) : attackPage;
  res.writeHead(200, {"content-type": "text/html"});
  res.end(body);
});
await new Promise(r => server.listen(0, "127.0.0.1", r));
const other = server.address().port;

// A rebinding domain: these names resolve to the server's address.
const browser = await launch(["--host-resolver-rules=MAP evil.example 127.0.0.1, MAP *.evil.example 127.0.0.1"]);
const seen = {};
try {
  for (const origin of [`http://127.0.0.1:${other}`, `http://localhost:${other}`]) {
    const page = await browser.newPage();
    await page.goto(origin + "/");
    await page.waitForFunction(() => window.done === true, null, { timeout: 120000 });
    const results = await page.evaluate(() => window.results);
    for (const r of results) {
      const text = JSON.stringify(r);
      const got = JSON.stringify(Object.assign({}, r, {name: undefined}));
      if (got.includes(id)) fail(`${origin}: ${r.name} read a session: ${text}`);
      if (r.read !== undefined && typeof r.read === "string") fail(`${origin}: ${r.name} read a response: ${text}`);
      if (r.read && r.read.body) fail(`${origin}: ${r.name} read a body: ${text}`);
      if (r.frame === "timeout") fail(`${origin}: ${r.name} never settled`);
      if (r.inside) fail(`${origin}: the viewer's frame was readable: ${text}`);
    }
    // What the frames hold, as the browser (not the attacker) sees them:
    // the refusals, never the viewer or a session.
    for (const f of page.frames()) {
      if (f === page.mainFrame()) continue;
      const content = await f.content().catch(() => "");
      if (content.includes(id) || content.includes("cairn sessions")) fail(`${origin}: a frame shows the server: ${f.url()}`);
    }
    seen[origin] = results.length;
    if (process.env.CAIRN_ATTACK_DUMP) console.error(JSON.stringify(results, null, 1));
    await page.close();
  }
  // Top-level form posts: the server answers them with its refusal.
  for (const enc of ["text/plain", "application/x-www-form-urlencoded"]) {
    const page = await browser.newPage();
    const route = `/v1/sessions/${id}/fork`;
    const done = page.waitForURL(target + route, { timeout: 20000 });
    await page.goto(`http://localhost:${other}/top?route=${encodeURIComponent(route)}&enc=${encodeURIComponent(enc)}`);
    await done;
    const text = await page.locator("body").innerText();
    if (!text.includes("cairn_cross_site")) fail(`a top-level ${enc} form post was not refused as another site's: ${text}`);
    await page.close();
  }
  // A rebinding name reaches the server's socket and is refused.
  for (const host of [`127.0.0.1.evil.example:${port}`, `localhost.evil.example:${port}`, `evil.example:${port}`]) {
    const page = await browser.newPage();
    const resp = await page.goto(`http://${host}/`);
    if (resp.status() !== 403) fail(`http://${host}/ answered ${resp.status()}`);
    const inPage = await page.evaluate(async () => {
      try { return await (await fetch("/v1/sessions")).text(); } catch (e) { return String(e); }
    });
    if (inPage.includes(id)) fail(`a page at ${host} read the sessions: ${inPage}`);
    if (!inPage.includes("cairn_host")) fail(`a page at ${host} got ${inPage}`);
    seen[host] = resp.status();
    await page.close();
  }
  console.log(JSON.stringify(seen));
} finally {
  await browser.close();
  server.close();
}
