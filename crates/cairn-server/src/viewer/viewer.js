"use strict";
// The web viewer (DESIGN §8). Served as /viewer.js under a policy that
// allows no inline script. Model and tool text is inserted as text
// (textContent); the one exception is `html`, which the server renders
// from Markdown and cleans (cairn-server's markdown.rs) before it leaves.
//
// Addresses: /s/ID is a session, /s/ID#seq-N one of its records,
// /s/ID?from=A&to=B a diff between two of its snapshots. Back and forward
// move between them; the page keeps no state the URL does not hold.

const $ = (tag, cls, text) => { const e = document.createElement(tag); if (cls) e.className = cls; if (text !== undefined) e.textContent = text; return e; };
const api = async (path, opts) => {
  const r = await fetch(path, opts);
  // Logged out (the server restarted, or was given a token): the login page.
  if (r.status === 401) { location.reload(); throw new Error("log in again"); }
  const body = await r.json();
  if (!r.ok) throw new Error((body.error && body.error.message) || r.statusText);
  return body;
};
const post = (path, body) => api(path, {method: "POST", headers: {"content-type": "application/json"}, body: JSON.stringify(body || {})});
let all = [], current = null, source = null;

// A tool's output is folded past this many lines.
const FOLD_LINES = 8;
// Records fetched at a time.
const PAGE = 200;

// The session list: at most `shown` rows are drawn (a store of 10,000
// sessions lists without freezing the page); the filter and the status
// narrow it, and "show more" draws the next rows.
const LIST_PAGE = 200;
let shown = LIST_PAGE;

async function loadSessions() {
  all = await api("/v1/sessions");
  drawSessions();
}

function drawSessions() {
  // The lineage is drawn from the list: drawn again with it.
  const lineage = document.querySelector("#detail .tree");
  if (lineage && current) lineage.textContent = tree(current);
  const box = document.getElementById("sessions");
  const words = document.getElementById("filter").value.trim().toLowerCase().split(/\s+/).filter(Boolean);
  const status = document.getElementById("status-filter").value;
  const match = all.filter(s => (!status || s.status === status) &&
    words.every(w => [s.name, s.id, s.workspace, s.status].some(f => f && f.toLowerCase().includes(w))));
  box.textContent = "";
  const count = document.getElementById("count");
  count.textContent = match.length === all.length ? `${all.length} session(s)` : `${match.length} of ${all.length} session(s)`;
  if (!all.length) box.textContent = "no sessions yet";
  // Grouped by workspace, the group of the newest session first.
  const groups = new Map();
  for (const s of match.slice(0, shown)) {
    if (!groups.has(s.workspace)) groups.set(s.workspace, []);
    groups.get(s.workspace).push(s);
  }
  for (const [ws, sessions] of groups) {
    const g = $("div", "group");
    g.append($("h2", "repo", ws || "(no workspace)"));
    for (const s of sessions) {
      // A link: focusable, opens in a new tab, and its address is shareable.
      const row = $("a", "session" + (current === s.id ? " on" : ""));
      row.href = "/s/" + encodeURIComponent(s.id);
      row.dataset.id = s.id;
      row.append($("span", "status " + s.status, s.status), " ", $("b", null, s.name || "(unnamed)"), $("br"), $("span", "id", s.id + " · " + s.turns + " turn(s) · " + cost(s.cost)));
      row.onclick = ev => {
        if (ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey) return;
        ev.preventDefault();
        go("/s/" + encodeURIComponent(s.id));
      };
      g.append(row);
    }
    box.append(g);
  }
  if (match.length > shown) {
    const more = $("button", "more", `show ${Math.min(LIST_PAGE, match.length - shown)} more of ${match.length - shown}`);
    more.id = "more-sessions";
    more.onclick = () => { shown += LIST_PAGE; drawSessions(); };
    box.append(more);
  }
}

function cost(c) {
  if (!c || c.state === "unknown") return "cost unknown";
  if (c.state === "zero") return "free";
  return "$" + Number(c.usd || 0).toFixed(4);
}

function tokens(u) {
  if (!u) return "";
  const i = u.input_tokens || 0, o = u.output_tokens || 0;
  return i || o ? `${i} in / ${o} out` : "";
}

// One line saying what a bookkeeping record is.
function describe(r) {
  switch (r.kind) {
    case "snapshot": return "snapshot " + r.label + " " + r.snapshot;
    case "reconcile": return "changed outside the session: " + (r.changed || []).join(", ");
    case "checkpoint": return "checkpoint " + r.checkpoint;
    case "terminal": return "terminal: " + r.reason + (r.detail ? " — " + r.detail : "");
    case "meta": return "session " + r.run + " in " + r.workspace;
    case "model_call": {
      return (r.replay ? "replayed " : "bought ") + r.endpoint + (r.model ? " " + r.model : "") + (r.answered_by ? " (answered by " + r.answered_by + ")" : "") +
        " → " + r.status + (r.stream ? " streamed" : "") + " · " + tokens(r.usage) + " · " + cost(r.cost);
    }
    case "versioning": return "workspace versioning " + r.state + (r.at ? " at " + r.at : "") + ": " + r.reason;
    case "tool_start": return "started " + r.name + " (" + r.call + ")";
    default: return r.kind;
  }
}

// The record's own address, as a small link.
function anchor(r) {
  const a = $("a", "seq", "#" + r.seq);
  a.href = "#seq-" + r.seq;
  a.title = "link to this record";
  return a;
}

// Text as safe HTML when the server rendered it, else as text.
function body(r) {
  const b = $("div", "text");
  if (typeof r.html === "string") b.innerHTML = r.html; else b.textContent = r.text || "";
  return b;
}

// A block of text, folded past FOLD_LINES lines.
function folded(text, cls) {
  const lines = text.split("\n");
  const pre = $("pre", cls, text);
  if (lines.length <= FOLD_LINES) return pre;
  const d = $("details", "fold");
  d.append($("summary", null, `${lines.length} lines`), pre);
  return d;
}

// A folded list of the files that differ between two snapshots, read
// when it first comes into view.
const filesSeen = new IntersectionObserver(entries => entries.forEach(e => {
  if (!e.isIntersecting) return;
  filesSeen.unobserve(e.target);
  e.target.load();
}), { rootMargin: "300px" });

function filesCell(id, from, to, title, who) {
  const d = $("details", "files " + who);
  const sum = $("summary", null, title);
  const stat = $("span", "stat", " …");
  sum.append(stat);
  d.append(sum);
  d.load = async () => {
    try {
      const list = await diffFiles(id, from, to);
      const rows = list.querySelectorAll("details.file");
      let add = 0, del = 0;
      list.querySelectorAll("summary .add").forEach(x => { add += Number(x.textContent.slice(1)); });
      list.querySelectorAll("summary .del").forEach(x => { del += Number(x.textContent.slice(1)); });
      stat.textContent = ` · ${rows.length} file(s) +${add} -${del}`;
      d.append(list);
    } catch (e) { stat.textContent = " · " + e.message; }
  };
  filesSeen.observe(d);
  return d;
}

function outcomeLabel(o) {
  return { ok: "ok", error: "error", unknown: "unknown: in flight at a crash, not run again", refused: "refused: declined, not run" }[o] || o;
}

// Renders the records of one session as a conversation, in journal order.
class Conversation {
  constructor(list, id) { this.list = list; this.id = id; this.calls = new Map(); this.orphans = new Map(); this.snaps = new Map(); }

  // Records of an earlier page, put above what is shown.
  prepend(records, before) {
    const list = this.list, frag = document.createDocumentFragment();
    this.list = frag;
    try { records.forEach(r => this.add(r)); } finally { this.list = list; }
    list.insertBefore(frag, before);
  }

  add(r) {
    let e;
    switch (r.kind) {
      case "user": e = this.user(r); break;
      case "assistant": e = this.assistant(r); break;
      case "tool_result": e = this.result(r); break;
      case "tool_start": {
        // Its call's cell says it: the start is shown only without one.
        const cell = this.calls.get(r.call);
        if (cell) { cell.classList.add("started"); e = $("span", "rec tool_start hidden"); e.dataset.call = r.call; } else e = this.marker(r);
        break;
      }
      case "terminal": e = $("div", "rec terminal end", describe(r)); e.prepend(anchor(r), " "); break;
      case "snapshot": e = this.snapshot(r); break;
      default: e = this.marker(r);
    }
    if (!e) return;
    e.id = "seq-" + r.seq;
    e.dataset.seq = r.seq;
    this.list.append(e);
  }

  user(r) {
    const who = r.origin === "cairn" || (r.text || "").startsWith("cairn: ") ? "cairn" : "you";
    const e = $("section", "rec user turn " + who);
    e.append($("header", null), body(r));
    e.firstChild.append($("span", "who", who), " ", anchor(r));
    return e;
  }

  assistant(r) {
    const e = $("section", "rec assistant turn");
    const h = $("header");
    h.append($("span", "who", r.model || "assistant"), " ", anchor(r));
    const meta = [tokens(r.usage), r.cost ? cost(r.cost) : "", r.replay ? "replayed" : "", r.stop_reason === "max_tokens" ? "cut off at max_tokens" : ""].filter(Boolean);
    if (meta.length) h.append($("span", "usage", " · " + meta.join(" · ")));
    e.append(h);
    const thinking = (r.thinking || []).map(t => t.thinking || "(encrypted)").join("\n\n") + (r.reasoning && r.reasoning.text ? r.reasoning.text : "");
    if (thinking) { const d = $("details", "thinking"); d.append($("summary", null, "thinking"), $("pre", null, thinking)); e.append(d); }
    if (r.text) e.append(body(r));
    for (const c of r.tool_calls || []) {
      const cell = $("details", "tool pending");
      cell.open = true;
      const sum = $("summary");
      sum.append($("span", "tool-name", c.name), " ", $("span", "outcome", "no result yet"));
      cell.append(sum, $("pre", "args", JSON.stringify(c.arguments, null, 2)));
      cell.dataset.call = c.id;
      this.calls.set(c.id, cell);
      e.append(cell);
      // Its result was shown before the call was (read backwards): it moves in.
      const orphan = this.orphans.get(c.id);
      if (orphan) { this.orphans.delete(c.id); this.fill(cell, orphan.record); orphan.element.classList.add("hidden"); }
    }
    return e;
  }

  // A result fills in its call's cell; one without a call stands alone.
  result(r) {
    const cell = this.calls.get(r.call);
    if (cell) { this.fill(cell, r); const e = $("span", "rec tool_result hidden"); e.dataset.call = r.call; return e; }
    const e = $("div", "rec tool_result tool " + r.outcome);
    e.append(anchor(r), " ", $("span", "outcome " + r.outcome, outcomeLabel(r.outcome) + " (" + r.call + ")"), folded(r.output || "", "output"));
    this.orphans.set(r.call, { record: r, element: e });
    return e;
  }

  fill(cell, r) {
    cell.classList.remove("pending");
    cell.classList.add(r.outcome);
    const o = cell.querySelector(".outcome");
    o.textContent = outcomeLabel(r.outcome);
    o.className = "outcome " + r.outcome;
    cell.append(folded(r.output || "", "output"));
  }

  // A turn's end: its marker, after the files the turn changed. A turn's
  // start after a window: the files changed outside the run first (yours).
  snapshot(r) {
    const m = /^(pre|post):turn:(\d+)$/.exec(r.label || "");
    this.snaps.set(r.label, r.snapshot);
    const marker = this.marker(r);
    if (!m) return marker;
    const n = Number(m[2]);
    const from = m[1] === "post" ? this.snaps.get(`pre:turn:${n}`) : this.snaps.get(`post:turn:${n - 1}`);
    if (!from || from === r.snapshot) return marker;
    const e = $("div", "rec snapshot-with-files");
    e.append(filesCell(this.id, from, r.snapshot, m[1] === "post" ? `files turn ${n} changed` : `edited outside the run, before turn ${n} (yours)`, m[1] === "post" ? "run" : "operator"), marker);
    return e;
  }

  // Bookkeeping: a small marker in the margin, its record folded inside.
  marker(r) {
    // The record's link stays outside the summary: a control is not nested
    // in another.
    const e = $("div", "rec marker " + r.kind);
    const d = $("details");
    const fields = Object.assign({}, r); delete fields.html;
    d.append($("summary", null, describe(r)), $("pre", null, JSON.stringify(fields, null, 2)));
    e.append(anchor(r), " ", d);
    return e;
  }
}

function tree(id) {
  const byId = Object.fromEntries(all.map(s => [s.id, s]));
  let root = id, guard = 0;
  while (byId[root] && byId[root].parent && guard++ < 100) root = byId[root].parent.id;
  const lines = [];
  const walk = (node, depth) => {
    const s = byId[node];
    lines.push((depth ? "   ".repeat(depth - 1) + "└─ " : "") + node + " " + (s ? s.status : "") + (node === id ? "  ← this session" : ""));
    for (const c of all.filter(c => c.parent && c.parent.id === node)) walk(c.id, depth + 1);
  };
  walk(root, 0);
  return lines.join("\n");
}

// The files that differ from snapshot `from` to `to`, each folded with its
// diff, unified or side by side.
async function diffFiles(id, from, to) {
  const files = await api(`/v1/sessions/${encodeURIComponent(id)}/diff?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`);
  const out = $("div", "files-list");
  if (!files.length) out.append($("div", "id", "no file changed"));
  for (const f of files) {
    const d = $("details", "file");
    const sum = $("summary");
    sum.append($("span", "path", f.path), " ", $("span", "add", "+" + f.added), " ", $("span", "del", "-" + f.removed), " ", $("span", "id", f.change + (f.binary ? ", binary" : "")));
    d.append(sum);
    if (f.unified) {
      const view = $("div", "diffview");
      const uni = $("button", "mode", "side by side");
      uni.setAttribute("aria-pressed", "false");
      const show = side => { view.replaceChildren(side ? sideBySide(f.unified) : unified(f.unified)); uni.textContent = side ? "unified" : "side by side"; uni.setAttribute("aria-pressed", String(side)); };
      let side = false;
      uni.onclick = () => { side = !side; show(side); };
      show(false);
      d.append(uni, view);
    }
    out.append(d);
  }
  return out;
}

function unified(text) {
  const pre = $("pre", "diff");
  for (const line of text.split("\n")) pre.append($("span", line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : line.startsWith("@@") ? "hunk" : null, line + "\n"));
  return pre;
}

// A unified diff as two columns: removed lines on the left beside the
// lines that replaced them on the right.
function sideBySide(text) {
  const table = $("table", "sbs");
  let left = [], right = [], l = 0, r = 0;
  const row = (a, b, cls) => {
    const tr = $("tr", cls);
    tr.append($("td", "ln", a ? String(a.n) : ""), $("td", a ? a.cls : "empty", a ? a.text : ""), $("td", "ln", b ? String(b.n) : ""), $("td", b ? b.cls : "empty", b ? b.text : ""));
    table.append(tr);
  };
  const flush = () => { for (let i = 0; i < Math.max(left.length, right.length); i++) row(left[i], right[i]); left = []; right = []; };
  for (const line of text.split("\n")) {
    if (line.startsWith("---") || line.startsWith("+++")) continue;
    const h = line.match(/^@@ -(\d+)(?:,\d+)? \+(\d+)/);
    if (h) { flush(); l = Number(h[1]); r = Number(h[2]); const tr = $("tr", "hunk"); const td = $("td", null, line); td.colSpan = 4; tr.append(td); table.append(tr); continue; }
    if (line.startsWith("-")) left.push({ n: l++, text: line.slice(1), cls: "del" });
    else if (line.startsWith("+")) right.push({ n: r++, text: line.slice(1), cls: "add" });
    else if (line.startsWith(" ")) { flush(); row({ n: l++, text: line.slice(1), cls: "ctx" }, { n: r++, text: line.slice(1), cls: "ctx" }); }
  }
  flush();
  return table;
}

async function showDiff(id, from, to, box) {
  box.textContent = "loading…";
  const files = await diffFiles(id, from, to);
  box.replaceChildren($("h3", null, `${from} → ${to}`), files);
  files.querySelectorAll("details").forEach(d => { d.open = true; });
}

// The files of a snapshot; with `path`, that file as the snapshot holds it.
async function showTree(id, snap, path, box) {
  box.textContent = "loading…";
  const base = `/v1/sessions/${encodeURIComponent(id)}/snapshots/${encodeURIComponent(snap)}`;
  const tree = await api(`${base}/tree`);
  const list = $("ul", "tree-files");
  for (const f of tree) {
    const li = $("li");
    const a = $("a", null, f.path);
    a.href = `/s/${encodeURIComponent(id)}?snap=${encodeURIComponent(snap)}&path=${encodeURIComponent(f.path)}`;
    a.onclick = ev => { ev.preventDefault(); go(a.getAttribute("href")); };
    li.append(a, $("span", "id", ` ${f.size} bytes`));
    list.append(li);
  }
  box.replaceChildren($("h3", null, `snapshot ${snap}: ${tree.length} file(s)`), list);
  if (path) {
    const f = await api(`${base}/file?path=${encodeURIComponent(path)}`);
    const h = $("h3", "path", f.path);
    const body = f.text !== null && f.text !== undefined ? $("pre", "content", f.text)
      : $("p", "id", f.too_large ? `${f.size} bytes: too large to show` : `${f.size} bytes of binary content`);
    body.id = "file-content";
    box.append(h, body);
  }
}

// The rewind of the TUI: pick one of your messages, choose what goes back
// (code, conversation, both), see what the files would do and what is left
// alone (your own edits), confirm; the result offers its undo.
async function rewindDialog(id) {
  const path = `/v1/sessions/${encodeURIComponent(id)}`;
  const dlg = document.getElementById("rewind-dialog");
  const points = await api(`${path}/rewind-points`);
  const list = document.getElementById("rewind-points");
  const previewBox = document.getElementById("rewind-preview");
  const result = document.getElementById("rewind-result");
  const confirm = document.getElementById("rewind-confirm");
  list.replaceChildren(); previewBox.replaceChildren(); result.replaceChildren();
  confirm.disabled = true;
  if (!points.length) list.append($("p", null, "This session has no message of yours to go back to."));
  points.forEach((p, i) => {
    const label = $("label", "point");
    const radio = $("input"); radio.type = "radio"; radio.name = "rewind-point"; radio.value = String(p.seq);
    radio.dataset.turn = p.turn === null || p.turn === undefined ? "" : String(p.turn);
    label.append(radio, " ", $("b", null, `${p.number}. `), $("span", null, p.text.length > 120 ? p.text.slice(0, 120) + "…" : p.text),
      $("span", "id", ` · ${p.name} · ${p.files.length} file(s)${p.files.length ? ": " + p.files.slice(0, 5).join(", ") : ""}`));
    list.append(label);
    if (i === points.length - 1) radio.checked = true;
  });
  const chosen = () => { const r = list.querySelector("input:checked"); return r ? { seq: Number(r.value), turn: r.dataset.turn } : null; };
  const action = () => (dlg.querySelector("input[name=rewind-action]:checked") || {}).value || "both";
  // One request per message, shared by every update that asks for it; and
  // only the latest update shows its outcome (two changes in quick
  // succession must not let the earlier one's answer, or failure, land last).
  const previews = new Map();
  let shown = 0;
  const update = async () => {
    const mine = ++shown;
    const c = chosen();
    result.replaceChildren();
    confirm.disabled = !c;
    previewBox.replaceChildren();
    if (!c) return;
    if (action() === "conversation") { previewBox.append($("p", null, "The files stay as they are; the conversation forks just before this message, for you to send it again or change it.")); return; }
    if (!c.turn) { previewBox.append($("p", "problem", "No model turn ran after this message: there are no files to put back.")); confirm.disabled = true; return; }
    previewBox.append($("p", "id", "reading what would change…"));
    try {
      if (!previews.has(c.seq)) previews.set(c.seq, post(`${path}/rewind-preview`, { seq: c.seq }));
      const pv = await previews.get(c.seq);
      if (mine !== shown) return;
      previewBox.replaceChildren($("p", null, pv.changes.length ? `The files go back: ${pv.changes.length} file(s) change.` : "No file would change."));
      const ul = $("ul", "changes");
      for (const f of pv.changes) { const li = $("li"); li.append($("span", "path", f.path), " ", $("span", "id", f.change), " ", $("span", "add", "+" + f.added), " ", $("span", "del", "-" + f.removed)); ul.append(li); }
      previewBox.append(ul);
      if (pv.left_alone.length) {
        previewBox.append($("p", null, "Left alone:"));
        const la = $("ul", "left-alone");
        for (const l of pv.left_alone) la.append($("li", null, `${l.path}: ${l.reason}`));
        previewBox.append(la);
      }
    } catch (e) {
      previews.delete(c.seq);
      if (mine !== shown) return;
      previewBox.replaceChildren($("p", "problem", e.message)); confirm.disabled = true;
    }
  };
  list.onchange = update;
  dlg.querySelectorAll("input[name=rewind-action]").forEach(r => { r.onchange = update; });
  confirm.onclick = async () => {
    const c = chosen();
    if (!c) return;
    confirm.disabled = true;
    try {
      const r = await post(`${path}/rewind-point`, { seq: c.seq, action: action() });
      result.replaceChildren();
      if (r.report) {
        const rep = r.report;
        result.append($("p", null, `Files put back: ${rep.written.length} written, ${rep.deleted.length} deleted` + (rep.left_alone && rep.left_alone.length ? `, ${rep.left_alone.length} left alone` : "") + `. The state before is banked as ${rep.bank.snapshot}.`));
        const undo = $("button", null, "undo"); undo.id = "rewind-undo";
        undo.onclick = async () => {
          undo.disabled = true;
          try {
            const u = await post(`${path}/rewind`, { snapshot: rep.bank.snapshot });
            result.append($("p", "done", `Undone: ${u.written.length} written, ${u.deleted.length} deleted; the files are as they were before the rewind.`));
          } catch (e) { result.append($("p", "problem", e.message)); undo.disabled = false; }
        };
        result.append(undo);
      }
      if (r.fork) {
        const a = $("a", "fork-link", `continue in the fork ${r.fork}`);
        a.href = "/s/" + encodeURIComponent(r.fork);
        a.onclick = ev => { ev.preventDefault(); dlg.close(); loadSessions().finally(() => go(a.getAttribute("href"))); };
        result.append($("p", null, "The conversation forked before the message: "), a);
      }
      if (r.fork_error) result.append($("p", "problem", "The files were put back, but the fork failed: " + r.fork_error));
      previews.clear();
    } catch (e) { result.replaceChildren($("p", "problem", e.message)); confirm.disabled = false; }
  };
  document.getElementById("rewind-cancel").onclick = () => dlg.close();
  dlg.showModal();
  await update();
}

// The call a run waits on (one this server drives, or `cairn run --approve`
// in a terminal on this host: the first answer wins), with what it would
// change, and the two answers. Everything the model wrote is shown as text.
async function askApproval(id, box) {
  const path = `/v1/sessions/${encodeURIComponent(id)}/approval`;
  const q = await api(path);
  if (current !== id) return;
  if (!q) { box.hidden = true; box.replaceChildren(); return; }
  if (box.dataset.asked === q.asked && !box.hidden) return;
  box.dataset.asked = q.asked;
  const run = $("button", "run", "run it"); run.id = "approve-run";
  const decline = $("button", "decline", "decline"); decline.id = "approve-decline";
  const said = $("p", "id");
  const answer = async decision => {
    run.disabled = decline.disabled = true;
    try {
      await post(path, { call: q.call.id, decision });
      box.hidden = true; box.replaceChildren();
    } catch (e) { said.textContent = e.message; run.disabled = decline.disabled = false; }
  };
  run.onclick = () => answer("run");
  decline.onclick = () => answer("decline");
  box.replaceChildren($("h2", null, "waiting for your yes"), $("p", null, ""), $("pre", "args", JSON.stringify(q.call.arguments, null, 2)));
  box.children[1].append("the model wants to run ", $("b", "tool-name", q.call.name), ":");
  if (q.preview) box.append($("p", null, "what it would change:"), unified(q.preview));
  box.append(run, " ", decline, said);
  box.hidden = false;
  run.focus();
}

// Moves to an address of this page, as a link would.
function go(url) {
  history.pushState(null, "", url);
  route();
}

// Shows what the address names.
async function route() {
  const m = location.pathname.match(/^\/s\/([^/]+)$/);
  if (!m) {
    current = null;
    if (source) { source.close(); source = null; }
    document.getElementById("detail").replaceChildren($("p", null, "Choose a session."));
    document.title = "cairn";
    return;
  }
  const id = decodeURIComponent(m[1]);
  if (id !== current) await open(id);
  const q = new URLSearchParams(location.search);
  const box = document.getElementById("diff");
  if (q.get("from") && q.get("to")) {
    await showDiff(id, q.get("from"), q.get("to"), box);
    box.scrollIntoView();
  } else if (q.get("snap")) {
    await showTree(id, q.get("snap"), q.get("path"), box);
    box.scrollIntoView();
  } else if (box) box.textContent = "";
  target();
}

// Marks and scrolls to the record the address's fragment names.
// A record outside the drawn window: the session opens again around it.
function target(retry = true) {
  document.querySelectorAll(".targeted").forEach(e => e.classList.remove("targeted"));
  const m = location.hash.match(/^#seq-(\d+)$/);
  if (!m) return;
  let e = document.getElementById("seq-" + m[1]);
  // A tool's start or result is shown in its call's cell.
  if (e && e.dataset.call) e = document.querySelector(`.tool[data-call="${CSS.escape(e.dataset.call)}"]`) || e;
  if (e) { e.classList.add("targeted"); e.scrollIntoView({block: "center"}); }
  else if (retry && current) open(current).then(() => target(false)).catch(() => {});
}

// Whether `e` is on screen or within `margin` pixels of it.
function near(e, margin) {
  if (e.hidden) return false;
  const r = e.getBoundingClientRect(), m = document.querySelector("main").getBoundingClientRect();
  return r.bottom >= m.top - margin && r.top <= m.bottom + margin;
}

async function open(id) {
  current = id;
  if (source) { source.close(); source = null; }
  document.querySelectorAll(".session").forEach(e => e.classList.toggle("on", e.dataset.id === id));
  const d = document.getElementById("detail");
  d.textContent = "";
  const path = `/v1/sessions/${encodeURIComponent(id)}`;
  // Everything the page shows of the session is asked for at once.
  const wanted = Number((location.hash.match(/^#seq-(\d+)$/) || [])[1] || 0);
  const [s, snaps, cps, first] = await Promise.all([
    api(path),
    api(`${path}/snapshots`),
    api(`${path}/checkpoints`),
    api(wanted
      ? `${path}/records?after=${Math.max(0, wanted - 50)}&limit=${PAGE}&render=html`
      : `${path}/records?tail=true&limit=${PAGE}&render=html`),
  ]);
  if (current !== id) return;
  document.title = (s.name || s.id) + " · cairn";
  d.append($("h1", null, (s.name || "(unnamed)") + " "), $("div", "id", s.id + " · " + s.status + " · " + s.workspace + " · " + cost(s.cost)));
  const fork = $("button", null, "fork"); fork.id = "fork";
  fork.onclick = async () => { const f = await post(`${path}/fork`); await loadSessions(); go("/s/" + encodeURIComponent(f.id)); };
  const say = $("input"); say.id = "say"; say.placeholder = "a follow-up message"; say.setAttribute("aria-label", "a follow-up message");
  const resume = $("button", null, "resume"); resume.id = "resume";
  resume.onclick = async () => { try { await post(`${path}/resume`, {text: say.value || null}); say.value = ""; } catch (e) { alert(e.message); } };
  const suspend = $("button", null, "suspend"); suspend.id = "suspend";
  suspend.onclick = async () => { try { await post(`${path}/suspend`); } catch (e) { alert(e.message); } };
  const rewind = $("button", null, "rewind…"); rewind.id = "rewind";
  rewind.onclick = () => rewindDialog(id).catch(e => alert(e.message));
  const live = $("span", null, ""); live.id = "live"; live.setAttribute("aria-live", "polite");
  const bar = $("div", "actions");
  bar.append(say, resume, suspend, fork, rewind, $("span", null, " live: "), live);
  d.append(bar);
  d.append($("h2", null, "lineage"), $("div", "tree", tree(id)));
  d.append($("h2", null, "snapshots"));
  const diffBox = $("div"); diffBox.id = "diff";
  const sl = $("div");
  snaps.forEach((x, i) => {
    const row = $("div", null, x.id + "  " + (x.labels || []).join(" ") + "  ");
    const files = $("a", "treebtn", x.files + " files");
    files.href = `/s/${encodeURIComponent(id)}?snap=${encodeURIComponent(x.id)}`;
    files.onclick = ev => { ev.preventDefault(); go(files.getAttribute("href")); };
    row.append(files, " ");
    if (i + 1 < snaps.length) {
      const b = $("a", "diffbtn", "diff from previous");
      b.href = `/s/${encodeURIComponent(id)}?from=${encodeURIComponent(snaps[i + 1].id)}&to=${encodeURIComponent(x.id)}`;
      b.onclick = ev => { ev.preventDefault(); go(b.getAttribute("href")); };
      row.append(b);
    }
    sl.append(row);
  });
  if (!snaps.length) sl.textContent = "none";
  d.append(sl, diffBox);
  d.append($("h2", null, "checkpoints"));
  d.append($("div", null, cps.length ? cps.map(c => c.id + " seq " + c.seq).join("\n") : "none"));
  const approval = $("div", "approval"); approval.id = "approval"; approval.hidden = true;
  approval.setAttribute("role", "region"); approval.setAttribute("aria-label", "a call waiting for your yes");
  d.append(approval);
  const ask = () => askApproval(id, approval).catch(() => {});
  ask();
  // A question is asked just after its pause window is journaled: asked
  // again now and then while the session runs (only a running session asks).
  if (s.status === "running") {
    const asking = setInterval(() => { if (current !== id) clearInterval(asking); else ask(); }, 1500);
  }
  d.append($("h2", null, "conversation"));
  const list = $("div"); list.id = "timeline"; d.append(list);
  const talk = new Conversation(list, id);
  // What is drawn is a window of the journal: it opens at the end (or
  // around the record the address names) and grows a page at a time as the
  // reader scrolls, so a session of 100,000 records opens as fast as one of
  // 100. Live records join it only while it reaches the end.
  const win = { lo: null, hi: 0, end: false };
  const earlier = $("button", "page", "load earlier records"); earlier.id = "earlier";
  const later = $("button", "page", "load later records"); later.id = "later";
  list.append(earlier, later);
  const draw = (page, where) => {
    const recs = page.records;
    if (recs.length) {
      if (where === "start") {
        const main = document.querySelector("main"), h = main.scrollHeight;
        talk.prepend(recs, earlier.nextSibling);
        main.scrollTop += main.scrollHeight - h;
      } else {
        const main = document.querySelector("main");
        const atBottom = main.scrollHeight - main.scrollTop - main.clientHeight < 40;
        const list0 = talk.list, frag = document.createDocumentFragment();
        talk.list = frag; recs.forEach(r => talk.add(r)); talk.list = list0;
        list.insertBefore(frag, later);
        // A reader at the bottom of a live session stays there.
        if (atBottom && where === "end" && win.end) main.scrollTop = main.scrollHeight;
      }
      win.lo = win.lo === null ? recs[0].seq : Math.min(win.lo, recs[0].seq);
      win.hi = Math.max(win.hi, recs[recs.length - 1].seq);
    }
    if (where !== "start") win.end = page.next_after === null;
    if (where !== "end") earlier.hidden = page.prev_before === null;
    later.hidden = win.end;
  };
  draw(first, "both");
  let busy = false;
  const more = async where => {
    if (busy || (where === "start" ? earlier.hidden : later.hidden)) return;
    busy = true;
    try {
      const page = await api(where === "start"
        ? `${path}/records?before=${win.lo}&limit=${PAGE}&render=html`
        : `${path}/records?after=${win.hi}&limit=${PAGE}&render=html`);
      if (current === id) draw(page, where);
    } finally { busy = false; }
    // Still in view (a short page): the next one.
    if (current === id && near(where === "start" ? earlier : later, 400)) await more(where);
  };
  earlier.onclick = () => more("start");
  later.onclick = () => more("end");
  const seen = new IntersectionObserver(entries => entries.forEach(e => {
    if (e.isIntersecting) more(e.target === earlier ? "start" : "end").catch(() => {});
  }), { root: document.querySelector("main"), rootMargin: "400px" });
  seen.observe(earlier); seen.observe(later);
  if (!wanted && later.previousElementSibling) later.previousElementSibling.scrollIntoView({block: "end"});
  // Live: subscribe, fill the gap up to the watermark, then take frames.
  // Every step below runs on `queue`, one after another, so the page shows
  // records in journal order whatever order the fetches finish in.
  let queue = Promise.resolve();
  const take = async r => {
    if (!win.end || r.seq <= win.hi) return;
    if (r.kind === "user" || r.kind === "assistant") {
      const page = await api(`${path}/records?after=${r.seq - 1}&limit=1&render=html`).catch(() => null);
      r = page && page.records[0] && page.records[0].seq === r.seq ? page.records[0] : r;
    }
    if (current !== id || r.seq <= win.hi) return;
    // A pause window may hold a question; a call's start or end answers it.
    if ((r.kind === "snapshot" && /^pause:/.test(r.label || "")) || ["tool_start", "tool_result", "terminal"].includes(r.kind)) ask();
    // The turn's record replaces the text streamed for it.
    if (streaming && (r.kind === "assistant" || r.kind === "terminal")) { streaming.remove(); streaming = null; }
    draw({ records: [r], next_after: null, prev_before: win.lo > 1 ? win.lo : null }, "end");
  };
  // Text as the model streams it (a run this server drives), shown until
  // its turn's record arrives; as text, never as markup.
  let streaming = null;
  const streamed = text => {
    if (!win.end || current !== id) return;
    if (!streaming) {
      streaming = $("section", "rec turn assistant streaming");
      streaming.setAttribute("aria-busy", "true");
      streaming.append($("header", null, "streaming…"), $("div", "text"));
      list.insertBefore(streaming, later);
    }
    streaming.lastChild.textContent += text;
  };
  source = new EventSource(`${path}/events`);
  source.addEventListener("subscribed", ev => {
    const w = JSON.parse(ev.data).watermark;
    queue = queue.then(async () => {
      while (win.end && win.hi < w) {
        const page = await api(`${path}/records?after=${win.hi}&limit=${PAGE}&render=html`);
        const upto = page.records.filter(r => r.seq <= w);
        if (!upto.length || current !== id) break;
        draw({ records: upto, next_after: null, prev_before: null }, "end");
      }
      live.textContent = "following";
    });
  });
  source.addEventListener("delta", ev => {
    let d = null;
    try { d = JSON.parse(ev.data); } catch (e) { return; }
    if (d && typeof d.text === "string") queue = queue.then(() => streamed(d.text));
  });
  source.addEventListener("record", ev => {
    const m = JSON.parse(ev.data);
    const r = m.record;
    if (r && typeof r.seq === "number") queue = queue.then(() => take(r));
  });
  source.addEventListener("error", () => { live.textContent = "reconnecting…"; });
}

for (const id of ["filter", "status-filter"]) {
  document.getElementById(id).addEventListener("input", () => { shown = LIST_PAGE; drawSessions(); });
}

// The filter's words are also looked for in what the sessions say (your
// messages, the model's answers, tool output), a moment after typing stops.
let searching = null;
document.getElementById("filter").addEventListener("input", () => {
  clearTimeout(searching);
  const box = document.getElementById("found");
  const q = document.getElementById("filter").value.trim();
  if (q.length < 3) { box.replaceChildren(); return; }
  searching = setTimeout(async () => {
    try {
      const f = await api(`/v1/search?q=${encodeURIComponent(q)}&limit=20`);
      if (document.getElementById("filter").value.trim() !== q) return;
      box.replaceChildren();
      if (!f.hits.length) { box.append($("p", "id", `no session says “${q}”` + (f.complete ? "" : " (searched the newest only)"))); return; }
      box.append($("h2", "repo", `said in ${f.hits.length} place(s)` + (f.complete ? "" : " (the newest sessions)")));
      for (const h of f.hits) {
        const a = $("a", "hit");
        a.href = `/s/${encodeURIComponent(h.id)}#seq-${h.seq}`;
        a.append($("b", null, h.name || h.id), " ", $("span", "id", `#${h.seq} ${h.kind}`), $("br"), $("span", "excerpt", h.excerpt));
        a.onclick = ev => { if (ev.button !== 0 || ev.ctrlKey || ev.metaKey || ev.shiftKey) return; ev.preventDefault(); go(a.getAttribute("href")); };
        box.append(a);
      }
    } catch (e) { box.replaceChildren($("p", "problem", e.message)); }
  }, 400);
});
window.addEventListener("popstate", () => route().catch(e => { document.getElementById("detail").textContent = "error: " + e.message; }));
window.addEventListener("hashchange", target);
// The session the address names opens first; the list (which may be of
// thousands) loads after it, so the two do not compete.
route().catch(e => { document.getElementById("detail").textContent = "error: " + e.message; })
  .finally(() => loadSessions().catch(e => { document.getElementById("sessions").textContent = "error: " + e.message; }));
// The list is read again every 5 seconds, or less often when reading it
// takes long (a store of many sessions): never more than 5% of the time.
(function refresh(wait) {
  setTimeout(async () => {
    const t = performance.now();
    try { await loadSessions(); } catch (e) { /* shown on the next success */ }
    refresh(Math.max(5000, 20 * (performance.now() - t)));
  }, wait);
})(5000);
