// Run page: expand long outputs, deep links (#seq=N), lane filters (remembered in localStorage),
// loading more of the timeline as the reader scrolls, following a run in progress over
// server-sent events, and what it is waiting for. HTML inserted here comes from this server's
// templates (every agent-written value escaped there); nothing is built from agent text.
"use strict";
(function () {
  document.addEventListener("click", function (e) {
    var t = e.target;
    if (t.classList && t.classList.contains("expand")) t.parentElement.classList.add("open");
  });

  var tl = document.getElementById("timeline");
  if (!tl) return;
  var run = tl.dataset.run, attempt = tl.dataset.attempt, mode = tl.dataset.mode;
  var events = document.getElementById("events");
  var first = +tl.dataset.first, last = +tl.dataset.last, total = +tl.dataset.total;
  var pending = tl.dataset.pending === "1";   // served while indexing: total is a lower bound, no minimap yet
  var later = document.getElementById("load-later"), earlier = document.getElementById("load-earlier");
  var q = (attempt ? "&attempt=" + encodeURIComponent(attempt) : "") + (mode === "conversation" ? "&view=conversation" : "");
  var WINDOW = 200, MARGIN = 1500;          // px from the edge of the screen at which the next window is fetched

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
    var old = document.querySelector(".target");
    if (old) old.classList.remove("target");
    el.classList.add("target");
    el.scrollIntoView({block: "center"});
  }

  // Lanes: which kinds of events are hidden, remembered across pages and runs.
  var LANES_KEY = "benchctl-view:hidden-lanes";
  function hiddenLanes() {
    try { return JSON.parse(localStorage.getItem(LANES_KEY) || "[]"); } catch (err) { return []; }
  }
  document.querySelectorAll("#lanes input[data-lane]").forEach(function (box) {
    if (hiddenLanes().indexOf(box.dataset.lane) >= 0) {
      box.checked = false;
      tl.classList.add("hide-" + box.dataset.lane);
    }
    box.addEventListener("change", function () {
      tl.classList.toggle("hide-" + box.dataset.lane, !box.checked);
      var hidden = hiddenLanes().filter(function (l) { return l !== box.dataset.lane; });
      if (!box.checked) hidden.push(box.dataset.lane);
      try { localStorage.setItem(LANES_KEY, JSON.stringify(hidden)); } catch (err) { /* storage off: not remembered */ }
    });
  });
  window.addEventListener("hashchange", showTarget);
  showTarget();

  // Conversation mode: a tool result whose call is in an earlier window (or arrived earlier on a
  // live page) comes as an orphan block; it joins its call's block. A turn's reasoning shown with
  // a model call is hidden when the assistant turn after it repeats it.
  function settle() {
    if (mode !== "conversation") return;
    var orphans = events.querySelectorAll("article[data-result-for]");
    if (orphans.length) {
      var homes = {};
      events.querySelectorAll("article.conv-tool").forEach(function (b) {
        if (b.dataset.resultFor === undefined && !b.classList.contains("has-result")) homes[b.dataset.toolId] = b;
        if (b.dataset.resultFor !== undefined) {
          var home = homes[b.dataset.resultFor];
          if (!home) return;
          var body = home.querySelector(".body");
          Array.prototype.slice.call(b.querySelector(".body").children).forEach(function (c) { body.appendChild(c); });
          if (b.classList.contains("has-result")) { home.classList.add("has-result"); delete homes[b.dataset.resultFor]; }
          b.remove();
        }
      });
    }
    events.querySelectorAll("article.conv-turn.cat-assistant[data-rsig]").forEach(function (turn) {
      var prev = turn.previousElementSibling;
      if (prev && prev.classList.contains("conv-turn") && prev.dataset.rsig === turn.dataset.rsig) {
        var r = prev.querySelector(".turn-reasoning");
        if (r) r.hidden = true;
      }
    });
  }
  settle();

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
    later.textContent = (pending ? "" : (total - last) + " later events: ") + "loading as you scroll…";
  }

  // Loading on scroll: when the end (or the start) of what is shown comes within MARGIN px of the
  // screen, the next window is fetched and added; one request at a time.
  var busy = false;
  function near(el, below) {           // within MARGIN of the screen, or passed (scrolled beyond it)
    if (!el || el.hidden) return false;
    var r = el.getBoundingClientRect();
    return below ? r.top < window.innerHeight + MARGIN : r.bottom > -MARGIN;
  }
  function firstVisible() {
    var kids = events.children;
    for (var i = 0; i < kids.length; i++) if (kids[i].getBoundingClientRect().bottom > 0) return kids[i];
    return null;
  }
  function loadMore() {
    if (busy) return;
    if (!pending && last < total && near(later, true)) {
      busy = true;
      var b = last + WINDOW;
      fetchLines(last, b).then(function (html) {
        events.insertAdjacentHTML("beforeend", html);
        last = Math.min(b, total);
        updateLater();
        settle();
      }).catch(function (err) {
        later.textContent = "could not load more events (" + err.message + "): scroll again to retry";
      }).finally(function () { busy = false; setTimeout(loadMore, 0); });
    } else if (earlier && near(earlier, false) && first > 0) {
      busy = true;
      var a = Math.max(0, first - WINDOW);
      fetchLines(a, first).then(function (html) {
        // keep what the reader is looking at in place (Chromium's scroll anchoring may do it already)
        var anchor = firstVisible(), top = anchor ? anchor.getBoundingClientRect().top : 0;
        events.insertAdjacentHTML("afterbegin", html);
        if (anchor) window.scrollBy(0, anchor.getBoundingClientRect().top - top);
        first = a;
        if (first === 0) earlier.hidden = true;
        else earlier.textContent = first + " earlier events: scroll up to load them";
        settle();
      }).catch(function (err) {
        earlier.textContent = "could not load earlier events (" + err.message + "): scroll again to retry";
      }).finally(function () { busy = false; setTimeout(loadMore, 0); });
    }
  }
  // Looked at on scroll (once a frame), and when an end comes near without a scroll (the page
  // grew or shrank). Events off screen are laid out at an estimated height until scrolled to
  // (content-visibility), so a jump to the end can land short of it once they are laid out: the
  // next scroll looks again.
  var looking = false;
  window.addEventListener("scroll", function () {
    if (looking) return;
    looking = true;
    requestAnimationFrame(function () { looking = false; loadMore(); });
  }, {passive: true});
  if (window.IntersectionObserver) {
    var watch = new IntersectionObserver(function () { loadMore(); }, {rootMargin: MARGIN + "px 0px"});
    if (later) watch.observe(later);
    if (earlier) watch.observe(earlier);
  }

  // What a live run waits for (a model call in flight, a tool running), with its age.
  var flight = document.getElementById("in-flight");
  var skew = flight && flight.dataset.now ? Date.now() / 1000 - +flight.dataset.now : 0;
  function showFlight(f, now) {
    if (!flight) return;
    if (now) skew = Date.now() / 1000 - now;
    flight.hidden = !f;
    flight.dataset.what = f ? f.what : "";
    flight.dataset.since = f && typeof f.since === "number" ? f.since : "";
    flight.querySelector(".label").textContent = f ? f.label : "";
    tickFlight();
  }
  function tickFlight() {
    if (!flight || flight.hidden || !flight.dataset.since) return;
    var s = Math.max(0, Date.now() / 1000 - skew - +flight.dataset.since);
    flight.querySelector(".age").textContent = "for " + (s < 60 ? s.toFixed(0) + "s" : Math.floor(s / 60) + "m" + ("0" + Math.floor(s % 60)).slice(-2) + "s");
  }
  if (flight && tl.dataset.live === "1") { tickFlight(); setInterval(tickFlight, 1000); }

  // The parts of the page that need the whole index (minimap, phase links) come from
  // /run/<id>/overview, drawn by the server's one minimap template, and replace theirs (matched
  // by id): once for a page served while its transcript was being indexed, and again after each
  // batch of live events, so the minimap grows with the run. One request at a time; events that
  // arrive meanwhile are drawn by one more request when it returns. Resolves to the event count.
  var overviewBusy = false, overviewAgain = false;
  function loadOverview() {
    overviewBusy = true;
    var aq = attempt ? "&attempt=" + encodeURIComponent(attempt) : "";
    return fetch("/run/" + encodeURIComponent(run) + "/overview?first=" + first + "&last=" + last + aq).then(function (r) {
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
      loadMore();
      goLive();
    }).catch(function (err) {
      var mm = document.querySelector("#minimap .note");
      if (mm) mm.textContent = "could not load the minimap (" + err.message + "): reload the page";
    });
  } else {
    loadMore();
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
        settle();
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
      if (s.flight !== undefined) showFlight(s.flight, s.now);
    });
    src.addEventListener("end", function (e) {
      var s = JSON.parse(e.data), st = document.getElementById("run-status");
      src.close();
      showFlight(null);
      if (st) { st.textContent = s.status; st.className = "status st-" + s.status; }
      if (note) note.textContent = "The run finished: " + s.status + ". Reload for its final figures.";
    });
  }
})();
