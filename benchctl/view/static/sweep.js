// Sweep page: every 2 s, refresh the live figures of the runs in progress (elapsed / budget,
// turns, tokens, cost, what it is doing) from /api/live. Values arrive preformatted and go in as
// text only.
"use strict";
(function () {
  var rows = Array.prototype.slice.call(document.querySelectorAll("tr[data-live]"));
  if (!rows.length) return;
  var ids = rows.map(function (r) { return r.dataset.live; });
  function set(row, key, value) {
    var el = row.querySelector('[data-f="' + key + '"]');
    if (el && value !== undefined) el.textContent = value;
  }
  function tick() {
    fetch("/api/live?ids=" + encodeURIComponent(ids.join(","))).then(function (r) { return r.json(); }).then(function (d) {
      rows.forEach(function (row) {
        var s = d.runs[row.dataset.live];
        if (!s) return;
        ["elapsed", "turns", "tokens", "cost", "doing"].forEach(function (k) { set(row, k, s[k]); });
        var st = row.querySelector('[data-f="status"]');
        if (st && st.textContent !== s.status) { st.textContent = s.status; st.className = "status st-" + s.status; }
      });
      Object.keys(d.counts).forEach(function (k) {
        var el = document.querySelector('[data-count="' + k + '"]');
        if (el) el.textContent = d.counts[k];
      });
      if (rows.some(function (row) { var s = d.runs[row.dataset.live]; return s && s.status === "running"; }))
        setTimeout(tick, 2000);
    }).catch(function () { setTimeout(tick, 5000); });
  }
  setTimeout(tick, 2000);
})();
