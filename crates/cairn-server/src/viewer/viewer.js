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

async function loadSessions() {
  all = await api("/v1/sessions");
  const box = document.getElementById("sessions");
  box.textContent = "";
  if (!all.length) box.textContent = "no sessions yet";
  // Grouped by workspace, the group of the newest session first.
  const groups = new Map();
  for (const s of all) {
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

// Renders the records of one session as a conversation, in journal order.
class Conversation {
  constructor(list) { this.list = list; this.calls = new Map(); }

  add(r) {
    let e;
    switch (r.kind) {
      case "user": e = this.user(r); break;
      case "assistant": e = this.assistant(r); break;
      case "tool_result": e = this.result(r); break;
      case "tool_start": {
        // Its call's cell says it: the start is shown only without one.
        const cell = this.calls.get(r.call);
        if (cell) { cell.classList.add("started"); e = $("span", "rec tool_start hidden"); } else e = this.marker(r);
        break;
      }
      case "terminal": e = $("div", "rec terminal end", describe(r)); e.prepend(anchor(r), " "); break;
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
    }
    return e;
  }

  // A result fills in its call's cell; one without a call stands alone.
  result(r) {
    const cell = this.calls.get(r.call);
    const out = folded(r.output || "", "output");
    const label = { ok: "ok", error: "error", unknown: "unknown: in flight at a crash, not run again", refused: "refused: declined, not run" }[r.outcome] || r.outcome;
    if (cell) {
      cell.classList.remove("pending");
      cell.classList.add(r.outcome);
      const o = cell.querySelector(".outcome");
      o.textContent = label;
      o.className = "outcome " + r.outcome;
      cell.append(out);
      return $("span", "rec tool_result hidden");
    }
    const e = $("div", "rec tool_result tool " + r.outcome);
    e.append(anchor(r), " ", $("span", "outcome " + r.outcome, label + " (" + r.call + ")"), out);
    return e;
  }

  // Bookkeeping: a small marker in the margin, its record folded inside.
  marker(r) {
    const d = $("details", "rec marker " + r.kind);
    const s = $("summary");
    s.append(anchor(r), " ", describe(r));
    const fields = Object.assign({}, r); delete fields.html;
    d.append(s, $("pre", null, JSON.stringify(fields, null, 2)));
    return d;
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

async function showDiff(id, from, to, box) {
  box.textContent = "loading…";
  const files = await api(`/v1/sessions/${encodeURIComponent(id)}/diff?from=${encodeURIComponent(from)}&to=${encodeURIComponent(to)}`);
  box.textContent = "";
  box.append($("div", "id", `${from} → ${to}`));
  if (!files.length) box.append($("div", null, "no file changed"));
  for (const f of files) {
    box.append($("div", "file", `${f.path}  ${f.change} +${f.added} -${f.removed}${f.binary ? " (binary)" : ""}`));
    if (f.unified) {
      const pre = $("pre", "diff");
      for (const line of f.unified.split("\n")) pre.append($("span", line.startsWith("+") ? "add" : line.startsWith("-") ? "del" : null, line + "\n"));
      box.append(pre);
    }
  }
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
  if (q.get("from") && q.get("to")) {
    const box = document.getElementById("diff");
    await showDiff(id, q.get("from"), q.get("to"), box);
    box.scrollIntoView();
  }
  target();
}

// Marks and scrolls to the record the address's fragment names.
function target() {
  document.querySelectorAll(".targeted").forEach(e => e.classList.remove("targeted"));
  const m = location.hash.match(/^#seq-(\d+)$/);
  if (!m) return;
  const e = document.getElementById("seq-" + m[1]);
  if (e) { e.classList.add("targeted"); e.scrollIntoView({block: "center"}); }
}

async function open(id) {
  current = id;
  if (source) { source.close(); source = null; }
  document.querySelectorAll(".session").forEach(e => e.classList.toggle("on", e.dataset.id === id));
  const d = document.getElementById("detail");
  d.textContent = "";
  const path = `/v1/sessions/${encodeURIComponent(id)}`;
  const s = await api(path);
  document.title = (s.name || s.id) + " · cairn";
  d.append($("h1", null, (s.name || "(unnamed)") + " "), $("div", "id", s.id + " · " + s.status + " · " + s.workspace + " · " + cost(s.cost)));
  const fork = $("button", null, "fork"); fork.id = "fork";
  fork.onclick = async () => { const f = await post(`${path}/fork`); await loadSessions(); go("/s/" + encodeURIComponent(f.id)); };
  const say = $("input"); say.id = "say"; say.placeholder = "a follow-up message"; say.setAttribute("aria-label", "a follow-up message");
  const resume = $("button", null, "resume"); resume.id = "resume";
  resume.onclick = async () => { try { await post(`${path}/resume`, {text: say.value || null}); say.value = ""; } catch (e) { alert(e.message); } };
  const suspend = $("button", null, "suspend"); suspend.id = "suspend";
  suspend.onclick = async () => { try { await post(`${path}/suspend`); } catch (e) { alert(e.message); } };
  const node = $("input"); node.id = "node"; node.placeholder = "turn:1"; node.size = 8; node.setAttribute("aria-label", "the turn to rewind to");
  const rewind = $("button", null, "rewind"); rewind.id = "rewind";
  rewind.onclick = async () => {
    try {
      const r = await post(`${path}/rewind`, {to: node.value || "turn:1", scope: "run"});
      alert(`restored ${r.target}: ${r.written.length} written, ${r.deleted.length} deleted; banked as ${r.bank.snapshot}`);
      open(id);
    } catch (e) { alert(e.message); }
  };
  const live = $("span", null, ""); live.id = "live"; live.setAttribute("aria-live", "polite");
  const bar = $("div", "actions");
  bar.append(say, resume, suspend, fork, $("span", null, " "), node, rewind, $("span", null, " live: "), live);
  d.append(bar);
  d.append($("h2", null, "lineage"), $("div", "tree", tree(id)));
  d.append($("h2", null, "snapshots"));
  const snaps = await api(`${path}/snapshots`);
  const diffBox = $("div"); diffBox.id = "diff";
  const sl = $("div");
  snaps.forEach((x, i) => {
    const row = $("div", null, x.id + "  " + (x.labels || []).join(" ") + "  " + x.files + " files ");
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
  const cps = await api(`${path}/checkpoints`);
  d.append($("div", null, cps.length ? cps.map(c => c.id + " seq " + c.seq).join("\n") : "none"));
  d.append($("h2", null, "conversation"));
  const list = $("div"); list.id = "timeline"; d.append(list);
  const talk = new Conversation(list);
  let after = 0;
  for (;;) {
    const page = await api(`${path}/records?after=${after}&limit=1000&render=html`);
    page.records.forEach(r => talk.add(r));
    if (page.records.length) after = page.records[page.records.length - 1].seq;
    if (page.next_after === null) break;
  }
  if (current !== id) return;
  // Live: subscribe, fill the gap up to the watermark, then take frames, in
  // order (each rendered record is fetched before the next is shown).
  let last = after, queue = Promise.resolve();
  // Every step below runs on `queue`, one after another, so the page shows
  // records in journal order whatever order the fetches finish in.
  const take = async r => {
    if (r.seq <= last) return;
    last = r.seq;
    if (r.kind === "user" || r.kind === "assistant") {
      const page = await api(`${path}/records?after=${r.seq - 1}&limit=1&render=html`).catch(() => null);
      r = page && page.records[0] && page.records[0].seq === r.seq ? page.records[0] : r;
    }
    if (current === id) talk.add(r);
  };
  source = new EventSource(`${path}/events`);
  source.addEventListener("subscribed", ev => {
    const w = JSON.parse(ev.data).watermark;
    queue = queue.then(async () => {
      while (last < w) {
        const page = await api(`${path}/records?after=${last}&limit=1000&render=html`);
        page.records.filter(r => r.seq <= w).forEach(r => { talk.add(r); last = r.seq; });
        if (!page.records.length) break;
      }
      live.textContent = "following";
    });
  });
  source.addEventListener("record", ev => {
    const m = JSON.parse(ev.data);
    const r = m.record;
    if (r && typeof r.seq === "number") queue = queue.then(() => take(r));
  });
  source.addEventListener("error", () => { live.textContent = "reconnecting…"; });
}

window.addEventListener("popstate", () => route().catch(e => { document.getElementById("detail").textContent = "error: " + e.message; }));
window.addEventListener("hashchange", target);
loadSessions().then(route).catch(e => { document.getElementById("sessions").textContent = "error: " + e.message; });
setInterval(() => loadSessions().catch(() => {}), 5000);
