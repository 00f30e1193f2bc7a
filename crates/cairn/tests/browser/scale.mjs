// The viewer at scale, in headless Chromium (issue 29, item 6): a session
// of 100,000 records opens at its end, drawing a window of it, and reads
// backwards a page at a time; an address deep inside it opens there; a
// store of thousands of sessions lists a page of rows, filters and shows
// more. Prints the times it measured (the note quotes them; nothing here
// asserts a time). Usage:
//   node scale.mjs BASE_URL BIG_SESSION_ID SESSION_COUNT
import { launch } from "./chromium.mjs";

const [base, big, count] = process.argv.slice(2);
const fail = (msg) => { console.error("scale test: " + msg); process.exit(1); };
const median = (xs) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor(s.length / 2)]; };

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.on("pageerror", (e) => fail("page error: " + e.message));

  // The long session opens at its end.
  const opens = [];
  for (let i = 0; i < 3; i++) {
    const t = Date.now();
    await page.goto(base + "/s/" + big);
    await page.waitForFunction(() => document.querySelector("#timeline") && document.querySelector("#timeline").textContent.includes("THE-LAST-ANSWER"), null, { timeout: 30000 });
    opens.push(Date.now() - t);
  }
  const drawn = await page.locator("#timeline .rec").count();
  if (drawn > 400) fail(`the whole session was drawn (${drawn} records), not a window of it`);
  // Reading backwards: earlier pages join above.
  const lo = Number(await page.locator("#timeline .rec").first().getAttribute("data-seq"));
  await page.locator("#earlier").click();
  await page.waitForFunction((n) => Number(document.querySelector("#timeline .rec").dataset.seq) < n, lo, { timeout: 30000 });
  if (await page.locator(`#seq-${lo - 1}`).count() !== 1) fail("the page before the window did not join it");

  // An address deep inside opens there.
  const deep = [];
  for (let i = 0; i < 3; i++) {
    await page.goto("about:blank");
    const t = Date.now();
    await page.goto(base + "/s/" + big + "#seq-501");
    await page.waitForSelector("#seq-501.targeted", { timeout: 30000 });
    deep.push(Date.now() - t);
  }
  // A tool result's address marks its call's cell, where it is shown.
  await page.evaluate(() => { location.hash = "#seq-503"; });
  await page.waitForSelector(".tool.targeted", { timeout: 10000 });
  const cellCall = await page.locator(".tool.targeted").getAttribute("data-call");
  const resultCall = await page.locator("#seq-503").getAttribute("data-call");
  if (!cellCall || cellCall !== resultCall) fail(`#seq-503 marks the cell of ${cellCall}, not of its call ${resultCall}`);

  // The list: a page of rows, a filter, more.
  const lists = [];
  for (let i = 0; i < 3; i++) {
    await page.goto("about:blank");
    const t = Date.now();
    await page.goto(base + "/");
    await page.waitForSelector(".session", { timeout: 60000 });
    lists.push(Date.now() - t);
  }
  const rows = await page.locator(".session").count();
  if (rows !== Math.min(200, Number(count))) fail(`${rows} rows drawn of ${count}`);
  const said = await page.locator("#count").innerText();
  if (!said.includes(count)) fail("the count does not say how many: " + said);
  const someId = await page.locator(".session").nth(150).getAttribute("data-id");
  await page.locator("#filter").fill(someId.toLowerCase());
  await page.waitForFunction((id) => document.querySelectorAll(".session").length === 1 && document.querySelector(".session").dataset.id === id, someId, { timeout: 10000 });
  await page.locator("#status-filter").selectOption("running");
  await page.waitForFunction(() => document.querySelectorAll(".session").length === 0, null, { timeout: 10000 });
  await page.locator("#status-filter").selectOption("");
  await page.locator("#filter").fill("");
  await page.waitForFunction(() => document.querySelectorAll(".session").length === 200, null, { timeout: 10000 });
  await page.locator("#more-sessions").click();
  await page.waitForFunction(() => document.querySelectorAll(".session").length === 400, null, { timeout: 10000 });
  // Keyboard: a row is a link reached with Tab and opened with Enter.
  await page.locator(".session").nth(1).focus();
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => location.pathname.startsWith("/s/"), null, { timeout: 10000 });

  console.log(`open of a 100,000-record session, to its last answer drawn: median ${median(opens)} ms (${opens.join(", ")})`);
  console.log(`open at #seq-501 of it: median ${median(deep)} ms (${deep.join(", ")})`);
  console.log(`list of ${count} sessions, to the first row drawn: median ${median(lists)} ms (${lists.join(", ")})`);
  console.log(`records drawn on opening: ${drawn}`);
} finally {
  await browser.close();
}
