// Drives the web viewer in headless Chromium (DESIGN §8): the list shows
// sessions; clicking one shows its timeline; a live scripted run appears
// turn by turn; the fork button creates a child shown in the tree; a
// snapshot diff shows the changed lines. Usage:
//   node viewer.mjs BASE_URL WORKSPACE SLOW_SCRIPT SCREENSHOT
import { createRequire } from "node:module";
const require = createRequire(process.env.CAIRN_PLAYWRIGHT_DIR + "/");
const { chromium } = require("playwright-core");

const [base, workspace, slowScript, shot] = process.argv.slice(2);
const fail = (msg) => { console.error("viewer test: " + msg); process.exit(1); };

const browser = await chromium.launch({
  executablePath: "/usr/bin/chromium",
  args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run", "--disable-quic"],
});
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.on("pageerror", (e) => fail("page error: " + e.message));
  await page.goto(base + "/");
  // The list shows the session made before the test.
  await page.waitForSelector(".session", { timeout: 15000 });
  // Sessions are grouped under their workspace.
  const heading = await page.locator(".group h2.repo").first().innerText();
  const leaf = workspace.split("/").filter(Boolean).pop();
  if (!heading.includes(leaf)) fail("the session list is not grouped by workspace: " + heading);
  const first = page.locator(".session").first();
  await first.click();
  await page.waitForSelector("#timeline .rec.user", { timeout: 15000 });
  const timeline = await page.locator("#timeline").innerText();
  if (!timeline.includes("write hello.txt")) fail("the timeline lacks the user's message: " + timeline);

  // A snapshot diff shows the changed lines.
  await page.locator(".diffbtn").first().click();
  await page.waitForSelector("#diff pre.diff", { timeout: 15000 });
  const diff = await page.locator("#diff").innerText();
  if (!diff.includes("+hello, world")) fail("the diff lacks the added line: " + diff);

  // The fork button creates a child shown in the tree.
  const before = await page.locator(".session").count();
  await page.locator("#fork").click();
  await page.waitForFunction((n) => document.querySelectorAll(".session").length > n, before, { timeout: 15000 });
  await page.waitForFunction(() => document.querySelector(".tree") && document.querySelector(".tree").textContent.includes("└─"), null, { timeout: 15000 });

  // A live scripted run appears turn by turn.
  const started = await page.evaluate(async ([ws, script]) => {
    const r = await fetch("/v1/sessions", { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ task: "count slowly", workspace: ws, model: "script:" + script }) });
    return r.json();
  }, [workspace, slowScript]);
  if (!started.id) fail("the run did not start: " + JSON.stringify(started));
  await page.evaluate(() => loadSessions());
  await page.locator(`.session[data-id="${started.id}"]`).click();
  await page.waitForSelector("#timeline", { timeout: 15000 });
  const seen = [];
  for (const step of ["step one", "step two", "step three"]) {
    await page.waitForFunction((t) => document.querySelector("#timeline") && document.querySelector("#timeline").textContent.includes(t), step, { timeout: 20000 });
    seen.push(step);
  }
  await page.waitForFunction(() => document.querySelector("#timeline").textContent.includes("terminal: completed"), null, { timeout: 20000 });
  const live = await page.locator("#live").innerText();
  if (live !== "following") fail("the live stream did not follow: " + live);
  await page.screenshot({ path: shot, fullPage: false });
  console.log("viewer test: ok (" + seen.join(", ") + ")");
} finally {
  await browser.close();
}
