// Run page: expand long outputs, deep links (#seq=N), lane filters, loading more of the timeline,
// and following a run in progress over server-sent events. HTML inserted here comes from this
// server's templates (every agent-written value escaped there); nothing is built from agent text.
"use strict";
(function () {
  document.addEventListener("click", function (e) {
    var t = e.target;
    if (t.classList && t.classList.contains("expand")) t.parentElement.classList.add("open");
  });

  var tl = document.getElementById("timeline");
  if (!tl) return;
  var run = tl.dataset.run, attempt = tl.dataset.attempt;
  var events = document.getElementById("events");
  var first = +tl.dataset.first, last = +tl.dataset.last, total = +tl.dataset.total;
  var pending = tl.dataset.pending === "1";   // served while indexing: total is a lower bound, no minimap yet
  var later = document.getElementById("load-later"), earlier = document.getElementById("load-earlier");
  var q = attempt ? "&attempt=" + encodeURIComponent(attempt) : "";

  function wantedSeq() {
    var m = /^#seq=(\d+)$/.exec(location.hash);
    return m ? +m[1] : null;
  }
  function showTarget() {
    var seq = wantedSeq();
    if (seq === null) return;
    var el = document.getElementById("seq-" + seq);
    if (!el) {                       // not in this window: ask the server for the window around it
      var u = new URL(location.href);
      if (u.searchParams.get("at") === String(seq)) {   // the server had no such event: say so, don't loop
        var n = document.getElementById("missing-seq");
        if (n) { n.hidden = false; n.textContent = "There is no event #" + seq + " in this transcript."; }
        return;
      }
      u.searchParams.set("at", seq);
      location.replace(u.pathname + u.search + "#seq=" + seq);
      return;
    }
    var old = document.querySelector(".ev.target");
    if (old) old.classList.remove("target");
    el.classList.add("target");
    el.scrollIntoView({block: "center"});
  }
  window.addEventListener("hashchange", showTarget);
  showTarget();

  document.querySelectorAll("#lanes input[data-lane]").forEach(function (box) {
    box.addEventListener("change", function () { tl.classList.toggle("hide-" + box.dataset.lane, !box.checked); });
  });

  function fetchLines(a, b) {
    return fetch("/run/" + encodeURIComponent(run) + "/events?from=" + a + "&to=" + b + q).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      total = +r.headers.get("x-total") || total;
      return r.text();
    });
  }
  function updateLater() {
    if (!later) return;
    later.hidden = last >= total && !pending;
    later.textContent = "load later events" + (pending ? "" : " (" + (total - last) + " after)");
  }
  if (later) later.addEventListener("click", function () {
    var b = last + 200;
    fetchLines(last, b).then(function (html) {
      events.insertAdjacentHTML("beforeend", html);
      last = Math.min(b, total);
      updateLater();
    });
  });
  if (earlier) earlier.addEventListener("click", function () {
    var a = Math.max(0, first - 200);
    fetchLines(a, first).then(function (html) {
      var h = document.documentElement.scrollHeight;
      events.insertAdjacentHTML("afterbegin", html);
      window.scrollBy(0, document.documentElement.scrollHeight - h);   // keep what the reader was looking at
      first = a;
      if (first === 0) earlier.hidden = true;
      else earlier.textContent = "load earlier events (" + first + " before)";
    });
  });

  // The parts of the page that need the whole index (minimap, phase links) come from
  // /run/<id>/overview, drawn by the server's one minimap template, and replace theirs (matched
  // by id): once for a page served while its transcript was being indexed, and again after each
  // batch of live events, so the minimap grows with the run. One request at a time; events that
  // arrive meanwhile are drawn by one more request when it returns. Resolves to the event count.
  var overviewBusy = false, overviewAgain = false;
  function loadOverview() {
    overviewBusy = true;
    return fetch("/run/" + encodeURIComponent(run) + "/overview?first=" + first + "&last=" + last + q).then(function (r) {
      if (!r.ok) throw new Error("HTTP " + r.status);
      var n = +r.headers.get("x-total");
      return r.text().then(function (html) {
        var box = document.createElement("template");
        box.innerHTML = html;
        Array.prototype.slice.call(box.content.children).forEach(function (el) {
          var old = document.getElementById(el.id);
          if (old) old.replaceWith(el);
        });
        return n;
      });
    }).finally(function () {
      overviewBusy = false;
      if (overviewAgain) { overviewAgain = false; redrawOverview(); }
    });
  }
  function redrawOverview() {           // live: a failed redraw leaves the last minimap; the next batch retries
    if (overviewBusy) { overviewAgain = true; return; }
    loadOverview().catch(function () {});
  }

  if (pending) {
    loadOverview().then(function (n) {
      total = n;
      pending = false;
      updateLater();
      goLive();
    }).catch(function (err) {
      var mm = document.querySelector("#minimap .note");
      if (mm) mm.textContent = "could not load the minimap (" + err.message + "): reload the page";
    });
  } else {
    goLive();
  }

  function goLive() {
    if (tl.dataset.live !== "1" || !window.EventSource) return;
    var note = document.getElementById("live-note"), follow = document.getElementById("follow");
    var counter = document.getElementById("new-count"), unseen = 0;
    var src = new EventSource("/run/" + encodeURIComponent(run) + "/stream?after=" + total + q);
    src.addEventListener("events", function (e) {
      var html = JSON.parse(e.data), sent = +e.lastEventId;
      if (last >= total) {             // the window reaches the end: append
        events.insertAdjacentHTML("beforeend", html);
        last = sent;
        if (follow && follow.checked) window.scrollTo(0, document.documentElement.scrollHeight);
      } else {                         // reading older events: just count
        unseen += sent - total;
        counter.textContent = unseen + " new events below";
      }
      total = sent;
      updateLater();
      redrawOverview();
    });
    src.addEventListener("stats", function (e) {
      var s = JSON.parse(e.data);
      ["elapsed", "turns", "tokens", "cost"].forEach(function (k) {
        var el = document.querySelector('#facts [data-f="' + k + '"]');
        if (el && s[k] !== undefined) el.textContent = s[k];
      });
    });
    src.addEventListener("end", function (e) {
      var s = JSON.parse(e.data), st = document.getElementById("run-status");
      src.close();
      if (st) { st.textContent = s.status; st.className = "status st-" + s.status; }
      if (note) note.textContent = "The run finished: " + s.status + ". Reload for its final figures.";
    });
  }
})();
