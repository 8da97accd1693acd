// Artifacts page: highlight each judge quote (and the graded TLDR) in the rendered artifact it
// refers to. Matching ignores case, runs of whitespace and markdown punctuation, so a quote taken
// from the markdown source is found in the rendered text even across bold or code spans. Only
// text nodes are split and wrapped in <mark>; no HTML is parsed.
"use strict";
(function () {
  var SKIP = /[*_`#>~]/;

  function index(root) {
    // norm: the normalised text; map[i] = [text node, offset] of norm[i]
    var walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT), node, norm = "", map = [], space = true;
    while ((node = walker.nextNode())) {
      var s = node.nodeValue;
      for (var i = 0; i < s.length; i++) {
        var c = s[i];
        if (SKIP.test(c)) continue;
        if (/\s/.test(c)) {
          if (space) continue;
          c = " "; space = true;
        } else space = false;
        norm += c.toLowerCase();
        map.push([node, i]);
      }
      if (!space) { norm += " "; map.push([node, s.length]); space = true; }   // block boundaries count as a space
    }
    return {norm: norm, map: map};
  }

  function normalise(q) {
    return q.replace(/[*_`#>~]/g, "").replace(/\s+/g, " ").trim().replace(/^["'“”‘’]+|["'“”‘’.…]+$/g, "").toLowerCase();
  }

  function wrap(idx, start, end, id) {
    // split the text nodes covering norm[start, end) and wrap each piece
    var pieces = [], i = start;
    while (i < end) {
      var node = idx.map[i][0], a = idx.map[i][1], b = a;
      while (i < end && idx.map[i][0] === node) { b = idx.map[i][1] + 1; i++; }
      pieces.push([node, a, Math.min(b, node.nodeValue.length)]);
    }
    var marks = [];
    pieces.reverse().forEach(function (p) {          // from the end, so earlier offsets stay valid
      var node = p[0], text = node.nodeValue;
      if (p[2] <= p[1]) return;
      var mark = document.createElement("mark");
      mark.className = "quote-hl";
      mark.dataset.for = id;
      mark.textContent = text.slice(p[1], p[2]);
      var after = document.createTextNode(text.slice(p[2]));
      node.nodeValue = text.slice(0, p[1]);
      node.parentNode.insertBefore(after, node.nextSibling);
      node.parentNode.insertBefore(mark, after);
      marks.push(mark);
    });
    return marks;
  }

  var indexes = {};
  document.querySelectorAll("[data-quote][data-target]").forEach(function (item) {
    var doc = document.getElementById(item.dataset.target + "-doc");
    if (!doc) return;
    var q = normalise(item.dataset.quote);
    if (!q) return;
    var idx = indexes[item.dataset.target] = index(doc);   // re-index: earlier marks split nodes
    var at = idx.norm.indexOf(q);
    if (at < 0) { item.classList.add("quote-missing"); return; }
    var marks = wrap(idx, at, at + q.length, item.dataset.id);
    item.classList.add("quote-found");
    item.addEventListener("click", function () {
      document.querySelectorAll("mark.quote-hl.on").forEach(function (m) { m.classList.remove("on"); });
      marks.forEach(function (m) { m.classList.add("on"); });
      if (marks.length) marks[marks.length - 1].scrollIntoView({block: "center"});
    });
  });
})();
