// Runs page: every 2 s while a `benchctl run` works on this directory (every 30 s otherwise),
// refresh the live figures of the runs in progress (elapsed / budget, turns, tokens, cost, what it
// is doing) from /api/live, and pick up runs that started since the page was drawn: their rows
// come from /api/rows (drawn by the server's row template, filtered as this page is) and are put
// in run-id order, or at the top when the page is sorted otherwise. Values arrive preformatted
// and go in as text only.
"use strict";
(function () {
  var table = document.getElementById("runs");
  if (!table) return;
  var body = table.tBodies[0], note = document.getElementById("new-runs");
  var known = +table.dataset.total, asked = {};

  function set(row, key, value) {
    var el = row.querySelector('[data-f="' + key + '"]');
    if (el && value !== undefined) el.textContent = value;
  }
  function rowOf(id) {
    for (var i = 0; i < body.rows.length; i++) if (body.rows[i].id === "run-" + id) return body.rows[i];
    return null;
  }
  function place(tr) {
    if (table.dataset.sorted === "1") {
      var desc = table.dataset.desc === "1", id = tr.id.slice(4);
      for (var i = 0; i < body.rows.length; i++) {
        var other = body.rows[i].id.slice(4);
        if (body.rows[i].id && (desc ? other < id : other > id)) { body.insertBefore(tr, body.rows[i]); return; }
      }
      body.appendChild(tr);
    } else {
      body.insertBefore(tr, body.rows[0] || null);
    }
  }
  function addRows(ids) {
    var u = new URL("/api/rows", location.href);
    new URL(location.href).searchParams.forEach(function (v, k) { if (k !== "page") u.searchParams.set(k, v); });
    u.searchParams.set("ids", ids.join(","));
    return fetch(u.pathname + u.search).then(function (r) { return r.text(); }).then(function (html) {
      var box = document.createElement("template");
      box.innerHTML = html;
      Array.prototype.slice.call(box.content.querySelectorAll("tr")).forEach(function (tr) {
        if (rowOf(tr.id.slice(4))) return;
        var empty = body.querySelector("td.empty");
        if (empty) empty.parentElement.remove();
        tr.classList.add("new");
        place(tr);
      });
    });
  }
  function tick() {
    var live = Array.prototype.slice.call(body.querySelectorAll("tr[data-live]")).map(function (r) { return r.dataset.live; });
    fetch("/api/live?ids=" + encodeURIComponent(live.join(","))).then(function (r) { return r.json(); }).then(function (d) {
      var fresh = [];
      Object.keys(d.runs).forEach(function (id) {
        var s = d.runs[id], row = rowOf(id);
        if (!row) { if (s.status === "running" && !asked[id]) { asked[id] = true; fresh.push(id); } return; }
        ["elapsed", "turns", "tokens", "cost", "doing"].forEach(function (k) { set(row, k, s[k]); });
        var st = row.querySelector('[data-f="status"]');
        if (st && st.textContent !== s.status) { st.textContent = s.status; st.className = "status st-" + s.status; }
        if (s.status !== "running") row.removeAttribute("data-live");
      });
      Object.keys(d.counts).forEach(function (k) {
        var el = document.querySelector('[data-count="' + k + '"]');
        if (el) el.textContent = d.counts[k];
      });
      var done = fresh.length ? addRows(fresh) : Promise.resolve();
      return done.then(function () {
        // runs that started and finished between two looks, or that this page's filters leave out
        var missed = d.total - known - fresh.length;
        known = d.total;
        if (missed > 0 && note) {
          note.hidden = false;
          note.textContent = "More runs have finished since this page was drawn: reload to see them.";
        }
        setTimeout(tick, d.active || body.querySelector("tr[data-live]") ? 2000 : 30000);
      });
    }).catch(function () { setTimeout(tick, 5000); });
  }
  setTimeout(tick, 2000);
})();
