// The viewer behind a token in headless Chromium (DESIGN §8): a browser
// without the token gets the login form; a wrong token is said so; the
// right one (the form, or `?token=` in the first URL, which is then removed
// from the address) becomes an HttpOnly, SameSite=Strict session cookie
// that is not the token; the viewer then lists the sessions, starts a run
// and follows it live; without the cookie it goes back to the form. Usage:
//   node login.mjs BASE_URL TOKEN WORKSPACE SLOW_SCRIPT
import { launch } from "./chromium.mjs";

const [base, token, workspace, slowScript] = process.argv.slice(2);
const fail = (msg) => { console.error("login test: " + msg); process.exit(1); };

const browser = await launch();

// The session cookie a context holds, checked.
async function cookieOf(context) {
  const cookies = await context.cookies(base);
  if (cookies.length !== 1) fail("expected one cookie, got " + JSON.stringify(cookies));
  const c = cookies[0];
  if (!c.httpOnly) fail("the cookie is not HttpOnly");
  if (c.sameSite !== "Strict") fail("the cookie is not SameSite=Strict: " + c.sameSite);
  if (c.value.includes(token)) fail("the cookie holds the token");
  return c;
}

try {
  // 1. The form.
  const formContext = await browser.newContext();
  const page = await formContext.newPage();
  page.on("pageerror", (e) => fail("page error: " + e.message));
  const first = await page.goto(base + "/");
  if (first.status() !== 401) fail("without the token / answered " + first.status());
  await page.fill("#token", "not-the-token");
  await page.click("button[type=submit]");
  await page.waitForFunction(() => document.getElementById("problem").textContent.length > 0, null, { timeout: 15000 });
  if ((await formContext.cookies(base)).length) fail("a wrong token got a cookie");
  await page.fill("#token", token);
  await page.click("button[type=submit]");
  await page.waitForSelector(".session", { timeout: 15000 });
  await cookieOf(formContext);
  if (await page.evaluate(() => document.cookie) !== "") fail("the page can read its cookie");
  // Logged out (the cookie gone, as after a restart): the viewer goes back
  // to the login form at its next request.
  await formContext.clearCookies();
  await page.waitForSelector("#token", { timeout: 15000 });

  // 2. `?token=` on the first load: exchanged, and gone from the address.
  const urlContext = await browser.newContext();
  const viewer = await urlContext.newPage();
  viewer.on("pageerror", (e) => fail("page error: " + e.message));
  await viewer.goto(base + "/?token=" + encodeURIComponent(token));
  if (viewer.url() !== base + "/") fail("the token stayed in the address: " + viewer.url());
  await viewer.waitForSelector(".session", { timeout: 15000 });
  await cookieOf(urlContext);

  // 3. A session being written, followed live with the cookie alone.
  const started = await viewer.evaluate(async ([ws, script]) => {
    const r = await fetch("/v1/sessions", { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ task: "count slowly", workspace: ws, model: "script:" + script }) });
    return r.json();
  }, [workspace, slowScript]);
  if (!started.id) fail("the run did not start: " + JSON.stringify(started));
  await viewer.evaluate(() => loadSessions());
  await viewer.locator(`.session[data-id="${started.id}"]`).click();
  await viewer.waitForFunction(() => document.getElementById("live") && document.getElementById("live").textContent === "following", null, { timeout: 20000 });
  const atOpen = await viewer.locator("#timeline").innerText();
  if (atOpen.includes("terminal: completed")) fail("the run ended before it was followed; nothing arrived live");
  await viewer.waitForFunction(() => document.querySelector("#timeline").textContent.includes("terminal: completed"), null, { timeout: 30000 });
  const after = await viewer.locator("#timeline").innerText();
  const arrived = after.split("\n").filter((l) => l.startsWith("#")).length - atOpen.split("\n").filter((l) => l.startsWith("#")).length;
  if (arrived < 1) fail("no record arrived live");
  if (await viewer.locator("#live").innerText() !== "following") fail("the live stream did not follow");
  console.log(`login test: ok (${arrived} records arrived live)`);
} finally {
  await browser.close();
}
