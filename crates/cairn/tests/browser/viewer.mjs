// Drives the web viewer in headless Chromium (DESIGN §8): the list shows
// sessions; clicking one shows its timeline; a live scripted run appears
// turn by turn; the fork button creates a child shown in the tree; a
// snapshot diff shows the changed lines; every session, record and diff
// has an address that back, forward and a reload keep; model text is
// Markdown made safe. Usage:
//   node viewer.mjs BASE_URL WORKSPACE SLOW_SCRIPT SCREENSHOT MARKDOWN_SESSION ASKING_SCRIPT
import { launch, require } from "./chromium.mjs";

const [base, workspace, slowScript, shot, mdId, asksScript] = process.argv.slice(2);
const fail = (msg) => { console.error("viewer test: " + msg); process.exit(1); };

const browser = await launch();
try {
  const page = await browser.newPage({ viewport: { width: 1280, height: 860 } });
  page.on("pageerror", (e) => fail("page error: " + e.message));
  page.on("console", (m) => { if (/Content Security Policy/i.test(m.text())) fail("a policy violation: " + m.text()); });
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

  // Its address names it.
  const firstId = await first.getAttribute("data-id");
  if (!page.url().endsWith("/s/" + firstId)) fail("the address is not the session's: " + page.url());

  // A record's address opens the session at that record; Markdown is
  // rendered, and nothing the model wrote runs or loads.
  await page.goto(base + "/s/" + mdId + "#seq-2");
  await page.waitForSelector("#timeline .turn.assistant .text strong", { timeout: 15000 });
  const targeted = await page.locator(".targeted").getAttribute("id");
  if (targeted !== "seq-2") fail("the record the address names is not marked: " + targeted);
  if (await page.locator("#timeline pre code.language-rust").count() !== 1) fail("the code block is not rendered with its language");
  if (await page.locator("#timeline pre code.language-rust span[class^=hl-]").count() < 2) fail("the code block is not highlighted");
  const fnColor = await page.locator("#timeline pre code.language-rust span.hl-storage").first().evaluate(e => getComputedStyle(e).color);
  const plain = await page.locator("#timeline .turn.assistant .text p").first().evaluate(e => getComputedStyle(e).color);
  if (fnColor === plain) fail("a keyword is not coloured apart from the text");
  if (await page.locator("#timeline table td").count() < 2) fail("the table is not rendered");
  if (await page.locator("#timeline script, #timeline img, #timeline [onerror]").count()) fail("the model's markup reached the page");
  if (await page.evaluate(() => window.pwned)) fail("the model's script ran");
  const hrefs = await page.locator("#timeline .text a").evaluateAll(as => as.map(a => a.getAttribute("href")));
  if (hrefs.some(h => h && /^\s*javascript:/i.test(h))) fail("a javascript: link survived: " + hrefs);
  const shown = await page.locator("#timeline").innerText();
  if (!shown.includes("<script>window.pwned=2</script>")) fail("the model's raw HTML is not shown as text: " + shown);
  // The tool call is a cell with its arguments and its outcome.
  const cell = page.locator("#timeline .tool").first();
  if ((await cell.locator(".tool-name").innerText()) !== "write_file") fail("the tool cell lacks its name");
  if ((await cell.locator(".outcome").innerText()) !== "ok") fail("the tool cell lacks its outcome");
  if (!(await cell.locator(".args").innerText()).includes("notes.md")) fail("the tool cell lacks its arguments");
  // Bookkeeping is a folded marker, not a turn.
  const marker = page.locator("#timeline .marker.snapshot details").first();
  if (await marker.count() !== 1 || await marker.evaluate(d => d.open)) fail("a snapshot is not a folded marker");
  await page.screenshot({ path: shot.replace(/\.png$/, "-conversation.png"), fullPage: false });

  // What each turn did to the files: a folded cell after the turn, its
  // stat read when it comes into view; each file's diff, unified or side
  // by side. The operator's edit while the session was paused is its own
  // cell, said to be theirs.
  const turnFiles = page.locator("#timeline details.files.run").first();
  await turnFiles.scrollIntoViewIfNeeded();
  await page.waitForFunction(() => /1 file\(s\) \+1 -0/.test(document.querySelector("#timeline details.files.run summary").textContent), null, { timeout: 15000 });
  await turnFiles.locator("summary").first().click();
  const fileRow = turnFiles.locator("details.file").first();
  if ((await fileRow.locator(".path").innerText()) !== "notes.md") fail("the turn's file is not notes.md");
  await fileRow.locator("summary").click();
  if (!(await fileRow.locator("pre.diff").innerText()).includes("+notes")) fail("the unified diff lacks the line");
  await fileRow.locator("button.mode").click();
  if ((await fileRow.locator("table.sbs td.add").first().innerText()) !== "notes") fail("the side-by-side diff lacks the line");
  const yours = page.locator("#timeline details.files.operator").first();
  await yours.scrollIntoViewIfNeeded();
  await page.waitForFunction(() => { const s = document.querySelector("#timeline details.files.operator summary"); return s && /yours/.test(s.textContent) && /1 file\(s\)/.test(s.textContent); }, null, { timeout: 15000 });
  await yours.locator("summary").first().click();
  if ((await yours.locator(".path").first().innerText()) !== "operator.txt") fail("the operator's edit is not operator.txt");
  await turnFiles.scrollIntoViewIfNeeded();
  await page.screenshot({ path: shot.replace(/\.png$/, "-diff.png"), fullPage: false });

  // A snapshot's tree and one file as it holds it, each with an address.
  await page.locator(".treebtn").first().click();
  await page.waitForSelector("ul.tree-files a", { timeout: 15000 });
  if (!/\?snap=/.test(page.url())) fail("the tree has no address: " + page.url());
  await page.locator("ul.tree-files a", { hasText: "notes.md" }).click();
  await page.waitForSelector("#file-content", { timeout: 15000 });
  if ((await page.locator("#file-content").innerText()).trim() !== "notes") fail("the file's content is not what the snapshot holds");
  await page.reload();
  await page.waitForSelector("#file-content", { timeout: 15000 });
  if (!/&path=notes\.md/.test(page.url())) fail("the file has no address: " + page.url());

  // What a session said is found from the filter, and its hit opens the
  // session at that record.
  await page.locator("#filter").fill("after your edit");
  await page.waitForSelector("#found a.hit", { timeout: 15000 });
  const hitHref = await page.locator("#found a.hit").first().getAttribute("href");
  if (!hitHref.startsWith("/s/" + mdId + "#seq-")) fail("the search hit is not the markdown session's record: " + hitHref);
  await page.locator("#found a.hit").first().click();
  await page.waitForSelector(".targeted", { timeout: 15000 });
  if (!/after your edit/.test(await page.locator(".targeted").innerText())) fail("the hit does not open at the record that says it");
  await page.locator("#filter").fill("");

  // Back and forward move between addresses.
  await page.locator(`.session[data-id="${firstId}"]`).click();
  await page.waitForFunction((id) => location.pathname === "/s/" + id && document.querySelector("#timeline .rec.user"), firstId, { timeout: 15000 });
  await page.goBack();
  await page.waitForFunction((id) => location.pathname === "/s/" + id && document.querySelector("#timeline .text strong"), mdId, { timeout: 15000 });
  await page.goForward();
  await page.waitForFunction((id) => location.pathname === "/s/" + id && document.querySelector("#timeline .rec.user") && !document.querySelector("#timeline .text strong"), firstId, { timeout: 15000 });

  // The rewind of the TUI, from the page: pick a message, choose code only,
  // see the files that go back and your edit left alone, confirm, undo;
  // then go back in the conversation and land in the fork.
  await page.goto(base + "/s/" + mdId);
  await page.waitForSelector("#timeline .turn.assistant", { timeout: 15000 });
  await page.locator("#rewind").click();
  await page.waitForSelector("#rewind-dialog[open] label.point", { timeout: 15000 });
  if (await page.locator("#rewind-dialog label.point").count() !== 2) fail("the dialog does not list the two messages");
  await page.locator("#rewind-dialog label.point", { hasText: "write notes" }).locator("input").check();
  await page.locator("#rewind-dialog input[name=rewind-action][value=code]").check();
  await page.waitForSelector("#rewind-preview ul.changes li", { timeout: 15000 });
  const preview = await page.locator("#rewind-preview").innerText();
  if (!/notes\.md/.test(preview)) fail("the preview does not name the file that goes back: " + preview);
  if (!/operator\.txt/.test(await page.locator("#rewind-preview ul.left-alone").innerText())) fail("the preview does not say your edit is left alone: " + preview);
  await page.screenshot({ path: shot.replace(/\.png$/, "-rewind.png"), fullPage: false });
  await page.locator("#rewind-confirm").click();
  await page.waitForSelector("#rewind-undo", { timeout: 15000 });
  if (!/1 deleted/.test(await page.locator("#rewind-result").innerText())) fail("the rewind did not delete notes.md: " + await page.locator("#rewind-result").innerText());
  await page.locator("#rewind-undo").click();
  await page.waitForSelector("#rewind-result .done", { timeout: 15000 });
  if (!/1 written/.test(await page.locator("#rewind-result .done").innerText())) fail("the undo did not write notes.md back");
  await page.locator("#rewind-dialog input[name=rewind-action][value=conversation]").check();
  await page.locator("#rewind-confirm").click();
  await page.waitForSelector("#rewind-result a.fork-link", { timeout: 15000 });
  await page.locator("#rewind-result a.fork-link").click();
  await page.waitForFunction((id) => location.pathname.startsWith("/s/") && location.pathname !== "/s/" + id && /fork of markdown/.test((document.querySelector("#detail h1") || {}).textContent || ""), mdId, { timeout: 15000 });

  // A snapshot diff shows the changed lines.
  await page.goto(base + "/s/" + firstId);
  await page.waitForSelector("#timeline .rec.user", { timeout: 15000 });
  await page.locator(".diffbtn").first().click();
  await page.waitForSelector("#diff pre.diff", { timeout: 15000 });
  const diff = await page.locator("#diff").innerText();
  if (!diff.includes("+hello, world")) fail("the diff lacks the added line: " + diff);
  // The diff has an address: a reload shows it again.
  if (!/\?from=.+&to=.+/.test(page.url())) fail("the diff has no address: " + page.url());
  await page.reload();
  await page.waitForSelector("#diff pre.diff", { timeout: 15000 });
  if (!(await page.locator("#diff").innerText()).includes("+hello, world")) fail("the diff's address does not show it");

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
  // Streamed text appears as it arrives, then gives way to its turn.
  await page.waitForFunction(() => { const e = document.querySelector("#timeline .streaming"); return e && /step two of/.test(e.textContent); }, null, { timeout: 20000 });
  await page.waitForFunction(() => !document.querySelector("#timeline .streaming") && /word by word as the model writes it/.test([...document.querySelectorAll("#timeline .turn.assistant .text")].map(e => e.textContent).join(" ")), null, { timeout: 20000 });
  const seen = [];
  for (const step of ["step one", "step two", "step three"]) {
    await page.waitForFunction((t) => document.querySelector("#timeline") && document.querySelector("#timeline").textContent.includes(t), step, { timeout: 20000 });
    seen.push(step);
  }
  await page.waitForFunction(() => document.querySelector("#timeline").textContent.includes("terminal: completed"), null, { timeout: 20000 });
  const live = await page.locator("#live").innerText();
  if (live !== "following") fail("the live stream did not follow: " + live);
  await page.screenshot({ path: shot, fullPage: false });

  // Approvals from the page: a run started with approve=writes waits; its
  // call is shown with its diff, run from the page; the next is declined.
  const asking = await page.evaluate(async ([ws, script]) => {
    const r = await fetch("/v1/sessions", { method: "POST", headers: { "content-type": "application/json" },
      body: JSON.stringify({ task: "write two files", workspace: ws, model: "script:" + script, approve: "writes" }) });
    return r.json();
  }, [workspace, asksScript]);
  if (!asking.id) fail("the asking run did not start: " + JSON.stringify(asking));
  await page.goto(base + "/s/" + asking.id);
  await page.waitForSelector("#approval:not([hidden]) #approve-run", { timeout: 20000 });
  const question = await page.locator("#approval").innerText();
  if (!/write_file/.test(question) || !/approved\.txt/.test(question) || !/\+yes/.test(question)) fail("the question lacks the call or its diff: " + question);
  await page.screenshot({ path: shot.replace(/\.png$/, "-approval.png"), fullPage: false });
  await page.locator("#approve-run").click();
  await page.waitForFunction(() => [...document.querySelectorAll("#timeline .tool .outcome")].some(o => o.textContent === "ok"), null, { timeout: 20000 });
  await page.waitForFunction(() => { const b = document.querySelector("#approval:not([hidden])"); return b && /declined\.txt/.test(b.textContent); }, null, { timeout: 20000 });
  await page.locator("#approve-decline").click();
  await page.waitForFunction(() => [...document.querySelectorAll("#timeline .tool .outcome")].some(o => /^refused/.test(o.textContent)), null, { timeout: 20000 });
  await page.waitForFunction(() => /terminal: completed/.test(document.querySelector("#timeline").textContent), null, { timeout: 20000 });

  // Accessibility: axe-core finds nothing serious on the list or on a
  // conversation, in the light scheme and the dark one. (axe is injected
  // into a context that lets a test script in; the viewer's own policy
  // allows none.)
  for (const colorScheme of ["light", "dark"]) {
    const ctx = await browser.newContext({ bypassCSP: true, colorScheme, viewport: { width: 1280, height: 860 } });
    const p = await ctx.newPage();
    for (const where of ["/s/" + mdId, "/"]) {
      await p.goto(base + where);
      await p.waitForSelector(where === "/" ? ".session" : "#timeline .turn.assistant", { timeout: 15000 });
      await p.addScriptTag({ path: require.resolve("axe-core/axe.min.js") });
      const found = await p.evaluate(async () => (await axe.run(document, { resultTypes: ["violations"] })).violations
        .filter(v => v.impact === "serious" || v.impact === "critical")
        .map(v => `${v.id} (${v.impact}): ${v.help} — ${v.nodes.slice(0, 3).map(n => n.target.join(" ")).join("; ")}`));
      if (found.length) fail(`accessibility, ${colorScheme} scheme, ${where}:\n  ` + found.join("\n  "));
    }
    await ctx.close();
  }
  // Keyboard: Tab reaches the filter, then the sessions; focus is visible.
  await page.goto(base + "/");
  await page.waitForSelector(".session", { timeout: 15000 });
  await page.keyboard.press("Tab");
  if (await page.evaluate(() => document.activeElement.id) !== "filter") fail("Tab does not reach the filter first");
  for (let i = 0; i < 5 && !(await page.evaluate(() => document.activeElement.classList.contains("session"))); i++) await page.keyboard.press("Tab");
  const outline = await page.evaluate(() => getComputedStyle(document.activeElement).outlineStyle);
  if (outline === "none") fail("the focused session shows no focus");
  await page.keyboard.press("Enter");
  await page.waitForFunction(() => location.pathname.startsWith("/s/") && document.querySelector("#timeline .rec"), null, { timeout: 15000 });
  console.log("viewer test: ok (" + seen.join(", ") + ")");
} finally {
  await browser.close();
}
