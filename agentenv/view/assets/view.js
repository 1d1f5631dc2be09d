// agentenv view: sort and filter the job's table. No network, no eval, no innerHTML.
"use strict";
document.addEventListener("DOMContentLoaded", () => {
  const table = document.getElementById("episodes");
  if (!table) return;
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const status = document.getElementById("status");
  const outcome = document.getElementById("outcome");
  const text = document.getElementById("text");
  const shown = document.getElementById("shown");
  function filter() {
    const s = status.value, o = outcome.value, t = text.value.trim().toLowerCase();
    let n = 0;
    for (const row of rows) {
      const keep = (!s || row.dataset.status === s) && (!o || row.dataset.outcome === o) &&
        (!t || row.dataset.text.includes(t));
      row.classList.toggle("hidden", !keep);
      if (keep) n++;
    }
    shown.textContent = n + " of " + rows.length + " episodes";
  }
  // the filters live in the address's #fragment too, so a reload (a running job's page
  // reloads itself) keeps them
  const saved = new URLSearchParams(location.hash.slice(1));
  status.value = saved.get("status") || "";
  outcome.value = saved.get("outcome") || "";
  text.value = saved.get("text") || "";
  function remember() {
    const state = new URLSearchParams();
    if (status.value) state.set("status", status.value);
    if (outcome.value) state.set("outcome", outcome.value);
    if (text.value) state.set("text", text.value);
    history.replaceState(null, "", "#" + state.toString());
  }
  for (const control of [status, outcome, text]) {
    control.addEventListener("change", remember);
    control.addEventListener("input", remember);
    control.addEventListener("input", filter);
    control.addEventListener("change", filter);
  }
  table.tHead.addEventListener("click", (event) => {
    const th = event.target.closest("th");
    if (!th) return;
    const col = Number(th.dataset.col);
    const desc = th.classList.contains("asc");
    for (const other of table.tHead.rows[0].cells) other.classList.remove("asc", "desc");
    th.classList.add(desc ? "desc" : "asc");
    const key = (row) => row.cells[col].dataset.sort;
    const numeric = rows.every((row) => key(row) !== "" && !isNaN(Number(key(row))));
    rows.sort((a, b) => {
      const x = key(a), y = key(b);
      const c = numeric ? Number(x) - Number(y) : x.localeCompare(y, undefined, {numeric: true});
      return desc ? -c : c;
    });
    for (const row of rows) body.appendChild(row);
  });
  filter();
});
