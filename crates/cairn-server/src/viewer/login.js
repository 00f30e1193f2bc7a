"use strict";
// The token is sent once, as JSON; the server answers with a session cookie
// (HttpOnly: this page never sees it) and the viewer loads.
document.getElementById("login").addEventListener("submit", async ev => {
  ev.preventDefault();
  const problem = document.getElementById("problem");
  problem.textContent = "";
  try {
    const r = await fetch("/v1/login", {method: "POST", headers: {"content-type": "application/json"},
      body: JSON.stringify({token: document.getElementById("token").value})});
    if (r.ok) { location.reload(); return; }
    const body = await r.json().catch(() => ({}));
    problem.textContent = (body.error && body.error.message) || r.statusText;
  } catch (e) { problem.textContent = e.message; }
});
