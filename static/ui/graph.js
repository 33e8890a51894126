// MemoryHub memory graph: fetch one end user's nodes and edges, lay them out with a
// small force simulation, draw them as SVG. No library; readable up to a few thousand nodes
// because repulsion only looks at neighbouring grid cells (O(n) per step, not O(n^2)).
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  // Same order as memories_ui.PALETTE so list badges and graph nodes agree.
  var PALETTE = ["#1f6feb", "#d1242f", "#1a7f37", "#8250df", "#bc4c00", "#0a7b83", "#bf3989", "#6e7781", "#9a6700"];
  var EDGE_STYLE = {
    related: { colour: "#8c959f", dash: "" },
    refines: { colour: "#1f6feb", dash: "" },
    contradicts: { colour: "#d1242f", dash: "6 3" },
    supersedes: { colour: "#6e7781", dash: "2 3" },
    derived_from: { colour: "#1a7f37", dash: "8 3 2 3" }
  };
  var FADED = { superseded: true, archived: true };

  var svg = document.getElementById("graph");
  if (!svg) return;
  var status = document.getElementById("graph-status");
  var taxonomy = (svg.dataset.taxonomy || "").split(",").filter(Boolean);

  function count(n, one, many) {
    return n + " " + (n === 1 ? one : many);
  }

  function colour(category) {
    var i = taxonomy.indexOf(category);
    return i < 0 ? "#57606a" : PALETTE[i % PALETTE.length];
  }

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (parent) parent.appendChild(node);
    return node;
  }

  // Grouping: each category gets a centre on a circle and pulls its nodes towards it.
  function groupCentres(nodes, width, height, spread) {
    var names = {}, centres = {};
    nodes.forEach(function (p) { names[p.category || ""] = true; });
    var list = Object.keys(names).sort(), r = list.length > 1 ? spread * 1.1 + 60 : 0;
    list.forEach(function (name, i) {
      var a = 2 * Math.PI * i / list.length - Math.PI / 2;
      centres[name] = { x: width / 2 + r * Math.cos(a), y: height / 2 + r * Math.sin(a), name: name };
    });
    return centres;
  }

  function layout(nodes, edges, width, height, gap, grouped) {
    var n = nodes.length, byId = {};
    var spread = Math.sqrt(n) * gap * 0.7 + 40;
    var centres = grouped ? groupCentres(nodes, width, height, spread) : null;
    nodes.forEach(function (node, i) {
      // Sunflower seeds: an even, deterministic start, so the same data draws the same way.
      var r = spread * Math.sqrt((i + 0.5) / n), a = i * 2.399963;
      node.x = width / 2 + r * Math.cos(a); node.y = height / 2 + r * Math.sin(a);
      node.vx = 0; node.vy = 0; byId[node.id] = node;
    });
    var links = edges.map(function (e) { return { s: byId[e.source], t: byId[e.target], rel: e.relationship }; })
      .filter(function (l) { return l.s && l.t; });
    var cell = gap, steps = n > 1500 ? 120 : 260;
    for (var step = 0; step < steps; step++) {
      var heat = 1 - step / steps, grid = {};
      nodes.forEach(function (p) {
        var key = Math.floor(p.x / cell) + ":" + Math.floor(p.y / cell);
        (grid[key] = grid[key] || []).push(p);
      });
      nodes.forEach(function (p) {
        var cx = Math.floor(p.x / cell), cy = Math.floor(p.y / cell);
        for (var dx = -1; dx <= 1; dx++) for (var dy = -1; dy <= 1; dy++) {
          var bucket = grid[(cx + dx) + ":" + (cy + dy)];
          if (!bucket) continue;
          for (var k = 0; k < bucket.length; k++) {
            var q = bucket[k];
            if (q === p) continue;
            var ddx = p.x - q.x, ddy = p.y - q.y, d2 = ddx * ddx + ddy * ddy + 0.01;
            if (d2 > cell * cell) continue;
            var f = gap * 1.5 / d2;
            p.vx += ddx * f; p.vy += ddy * f;
          }
        }
        var home = centres ? centres[p.category || ""] : { x: width / 2, y: height / 2 };
        var pull = centres ? 0.03 : 0.004;
        p.vx += (home.x - p.x) * pull; p.vy += (home.y - p.y) * pull;
      });
      links.forEach(function (l) {
        var dx = l.t.x - l.s.x, dy = l.t.y - l.s.y, d = Math.sqrt(dx * dx + dy * dy) || 1;
        var f = (d - gap * 1.1) * 0.03 / d;
        l.s.vx += dx * f; l.s.vy += dy * f; l.t.vx -= dx * f; l.t.vy -= dy * f;
      });
      nodes.forEach(function (p) {
        var limit = 12 * heat + 0.5;
        p.vx = Math.max(-limit, Math.min(limit, p.vx)); p.vy = Math.max(-limit, Math.min(limit, p.vy));
        p.x += p.vx; p.y += p.vy; p.vx *= 0.5; p.vy *= 0.5;
      });
    }
    links.centres = centres;
    return links;
  }

  function bounds(nodes) {
    var b = { x0: Infinity, y0: Infinity, x1: -Infinity, y1: -Infinity };
    nodes.forEach(function (p) {
      b.x0 = Math.min(b.x0, p.x); b.y0 = Math.min(b.y0, p.y); b.x1 = Math.max(b.x1, p.x); b.y1 = Math.max(b.y1, p.y);
    });
    return b;
  }

  var controls = {
    linked: document.getElementById("graph-linked-only"),
    grouped: document.getElementById("graph-group"),
    search: document.getElementById("graph-search")
  };
  var data = null, view = null;

  function visibleNodes() {
    if (!controls.linked || !controls.linked.checked) return data.nodes.slice();
    var linked = {};
    data.edges.forEach(function (e) { linked[e.source] = true; linked[e.target] = true; });
    return data.nodes.filter(function (p) { return linked[p.id]; });
  }

  function matcher() {
    var words = (controls.search ? controls.search.value : "").toLowerCase().split(/\s+/).filter(Boolean);
    if (!words.length) return null;
    return function (p) {
      var text = (p.label + " " + (p.category || "")).toLowerCase();
      return words.every(function (w) { return text.indexOf(w) >= 0; });
    };
  }

  function draw() {
    var nodes = visibleNodes(), width = 1000, height = 700;
    svg.textContent = "";
    if (!nodes.length) {
      status.textContent = data.nodes.length ? "No memory of this end user has a link." : "This end user has no memories yet.";
      return;
    }
    var small = nodes.length <= 80, grouped = !!(controls.grouped && controls.grouped.checked);
    // Labelled graphs need room between nodes for their text.
    var links = layout(nodes, data.edges, width, height, small ? 110 : 40, grouped);
    var b = bounds(nodes), pad = small ? 160 : 30;
    view = { x: b.x0 - pad, y: b.y0 - 30, w: b.x1 - b.x0 + 2 * pad, h: b.y1 - b.y0 + 60 };
    // Never zoom a small graph in so far that nodes and labels become huge.
    var minW = 900, minH = 600;
    if (view.w < minW) { view.x -= (minW - view.w) / 2; view.w = minW; }
    if (view.h < minH) { view.y -= (minH - view.h) / 2; view.h = minH; }
    applyView();
    var edgeLayer = el("g", { class: "edges" }, svg), nodeLayer = el("g", { class: "nodes" }, svg);
    var labelLayer = el("g", { class: "labels" }, svg);
    links.forEach(function (l) {
      var style = EDGE_STYLE[l.rel] || EDGE_STYLE.related;
      var line = el("line", { x1: l.s.x, y1: l.s.y, x2: l.t.x, y2: l.t.y, stroke: style.colour,
        "stroke-width": 1.5, "stroke-dasharray": style.dash, "class": "edge" }, edgeLayer);
      el("title", {}, line).textContent = l.rel;
    });
    var match = matcher(), found = [];
    nodes.forEach(function (p) {
      var hit = match ? match(p) : false;
      if (hit) found.push(p);
      var cls = "node" + (FADED[p.status] ? " faded" : "") + (hit ? " match" : match ? " dim" : "");
      var link = el("a", { href: p.url, "class": cls, "data-id": p.id }, nodeLayer);
      el("circle", { cx: p.x, cy: p.y, r: hit ? 9 : p.status === "pending_review" ? 7 : 6, fill: colour(p.category),
        stroke: p.scope === "project" ? "#24292f" : "#fff", "stroke-width": 1.5 }, link);
      el("title", {}, link).textContent = p.label + " — " + (p.category || "no category") + ", " +
        p.status.replace("_", " ") + ", v" + p.version;
    });
    // Search matches are labelled first (in any graph); other nodes only in small graphs.
    placeLabels(found.concat(small && !match ? nodes : []), labelLayer);
    if (links.centres) groupLabels(links.centres, nodes, labelLayer);
    status.textContent = count(nodes.length, "memory", "memories") + ", " + count(links.length, "link", "links") +
      (match ? "; " + found.length + " match “" + controls.search.value.trim() + "”." : ".");
    legend(nodes);
  }

  // Labels never overlap: each tries four spots around its node and is dropped (its node
  // keeps the tooltip) when all four collide with a label already placed or another node.
  // A spot's box is the label's rendered one: a width guessed from the number of characters
  // was sometimes narrower than the text, and two labels touched.
  function placeLabels(nodes, layer) {
    var placed = [], seen = {};
    var dots = nodes.map(function (p) { return { x0: p.x - 7, y0: p.y - 7, x1: p.x + 7, y1: p.y + 7, id: p.id }; });
    function clear(box, id) {
      return placed.every(function (o) { return box.x1 < o.x0 || box.x0 > o.x1 || box.y1 < o.y0 || box.y0 > o.y1; }) &&
        dots.every(function (d) { return d.id === id || box.x1 < d.x0 || box.x0 > d.x1 || box.y1 < d.y0 || box.y0 > d.y1; });
    }
    nodes.forEach(function (p) {
      if (seen[p.id]) return;
      seen[p.id] = true;
      var text = p.label.length > 30 ? p.label.slice(0, 29) + "…" : p.label, w = text.length * 6.2, h = 13;
      var label = el("text", { "class": "node-label", "data-id": p.id }, layer);
      label.textContent = text;
      var spots = [[p.x + 9, p.y + 4, "start"], [p.x - 9, p.y + 4, "end"], [p.x, p.y - 10, "middle"], [p.x, p.y + 18, "middle"]];
      for (var i = 0; i < spots.length; i++) {
        var s = spots[i];
        label.setAttribute("x", s[0]);
        label.setAttribute("y", s[1]);
        label.setAttribute("text-anchor", s[2]);
        var b = label.getBBox(), box;
        if (b.width > 0) {
          box = { x0: b.x - 1, y0: b.y - 1, x1: b.x + b.width + 1, y1: b.y + b.height + 1 };
        } else {  // not rendered (a hidden page): the guess
          var x0 = s[2] === "start" ? s[0] : s[2] === "end" ? s[0] - w : s[0] - w / 2;
          box = { x0: x0 - 1, y0: s[1] - h + 2, x1: x0 + w + 1, y1: s[1] + 3 };
        }
        if (!clear(box, p.id)) continue;
        placed.push(box);
        return;
      }
      layer.removeChild(label);
    });
  }

  function groupLabels(centres, nodes, layer) {
    Object.keys(centres).forEach(function (name) {
      var members = nodes.filter(function (p) { return (p.category || "") === name; });
      if (!members.length) return;
      var top = Math.min.apply(null, members.map(function (p) { return p.y; }));
      var x = members.reduce(function (sum, p) { return sum + p.x; }, 0) / members.length;
      el("text", { x: x, y: top - 22, "text-anchor": "middle", "class": "group-label" }, layer).textContent =
        name || "no category";
    });
  }

  function applyView() { svg.setAttribute("viewBox", [view.x, view.y, view.w, view.h].join(" ")); }

  function enablePanZoom() {
    var apply = applyView;
    svg.addEventListener("wheel", function (event) {
      event.preventDefault();
      var rect = svg.getBoundingClientRect(), k = event.deltaY > 0 ? 1.15 : 1 / 1.15;
      var fx = (event.clientX - rect.left) / rect.width, fy = (event.clientY - rect.top) / rect.height;
      var w = view.w * k, h = view.h * k;
      view.x += (view.w - w) * fx; view.y += (view.h - h) * fy; view.w = w; view.h = h; apply();
    }, { passive: false });
    var drag = null;
    svg.addEventListener("pointerdown", function (event) {
      if (event.target.closest("a")) return;
      drag = { x: event.clientX, y: event.clientY }; svg.setPointerCapture(event.pointerId);
    });
    svg.addEventListener("pointermove", function (event) {
      if (!drag) return;
      var rect = svg.getBoundingClientRect();
      view.x -= (event.clientX - drag.x) * view.w / rect.width;
      view.y -= (event.clientY - drag.y) * view.h / rect.height;
      drag = { x: event.clientX, y: event.clientY }; apply();
    });
    svg.addEventListener("pointerup", function () { drag = null; });
  }

  function legend(nodes) {
    var box = document.getElementById("graph-legend");
    if (!box) return;
    var seen = {};
    nodes.forEach(function (p) { seen[p.category || ""] = true; });
    var parts = Object.keys(seen).sort().map(function (c) {
      return '<span class="key"><span class="swatch" style="background:' + colour(c) + '"></span>' +
        (c || "no category").replace(/[<&>]/g, "") + "</span>";
    });
    Object.keys(EDGE_STYLE).forEach(function (rel) {
      var s = EDGE_STYLE[rel];
      parts.push('<span class="key"><svg width="26" height="8" aria-hidden="true"><line x1="0" y1="4" x2="26" y2="4" stroke="' +
        s.colour + '" stroke-width="2" stroke-dasharray="' + s.dash + '"/></svg>' + rel.replace("_", " ") + "</span>");
    });
    box.innerHTML = parts.join("");
  }

  fetch(svg.dataset.url, { headers: { Accept: "application/json" }, credentials: "same-origin" })
    .then(function (response) {
      if (!response.ok) throw new Error("the server answered " + response.status);
      return response.json();
    })
    .then(function (body) {
      data = body;
      draw();
      enablePanZoom();
      [controls.linked, controls.grouped].forEach(function (c) { if (c) c.addEventListener("change", draw); });
      var timer = null;  // a redraw lays the graph out again: wait until typing pauses
      if (controls.search) controls.search.addEventListener("input", function () {
        clearTimeout(timer);
        timer = setTimeout(draw, 200);
      });
    })
    .catch(function (error) { status.textContent = "Could not load the graph: " + error.message; });
})();
