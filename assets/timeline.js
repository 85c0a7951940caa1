(function () {
  var data = document.getElementById("jp-tl-data");
  if (!data) return;
  var D = JSON.parse(data.textContent);
  var ROWS = Math.round(1000 / D.cellMs), N = D.nodes.length / 2 + 1, C = D.counts;
  var parent = new Int32Array(N), frame = new Int32Array(N);
  parent[0] = -1; frame[0] = -1;
  for (var i = 1; i < N; i++) { parent[i] = D.nodes[2 * i - 2]; frame[i] = D.nodes[2 * i - 1]; }
  // Children of each node, by frame name (as flamegraphs order them).
  var kids = new Array(N);
  for (var i = 1; i < N; i++) (kids[parent[i]] = kids[parent[i]] || []).push(i);
  for (var i = 0; i < N; i++) if (kids[i]) kids[i].sort(function (a, b) {
    var x = D.frames[frame[a]], y = D.frames[frame[b]]; return x < y ? -1 : x > y ? 1 : 0; });
  var cols = Math.max(1, Math.ceil(D.cells / ROWS));
  // A second is a column 100 px tall (2 px a cell); the columns share the
  // section's width (at least 4 px each; a long capture's map is scaled
  // down to fit), so the map leaves no empty space beside it and the
  // flamegraph starts high on the page.
  var cw = 4, ch = 2, AXIS = 14;
  var canvas = document.getElementById("jp-tl-heat"), flame = document.getElementById("jp-tl-flame");
  var info = document.getElementById("jp-tl-info"), pick = document.getElementById("jp-tl-thread");
  function fit() {
    cw = Math.max(4, Math.floor((canvas.parentNode.clientWidth - 2) / cols));
    canvas.width = cols * cw; canvas.height = ROWS * ch + AXIS;
  }
  fit();
  var st = { a: -1, b: -1, thread: -1, zoom: 0 }, totals = null;
  function svg() { return document.querySelector("#jp-main > svg"); }
  function cellTotals() {
    var t = new Float64Array(D.cells);
    for (var i = 0; i < C.length; i += 4) if (st.thread < 0 || C[i + 2] === st.thread) t[C[i]] += C[i + 3];
    return t;
  }
  function heat() {
    var g = canvas.getContext("2d"), max = 0;
    g.clearRect(0, 0, canvas.width, canvas.height);
    for (var c = 0; c < D.cells; c++) if (totals[c] > max) max = totals[c];
    for (var c = 0; c < D.cells; c++) {
      var v = max > 0 ? totals[c] / max : 0, x = Math.floor(c / ROWS) * cw, y = (c % ROWS) * ch;
      g.fillStyle = v > 0 ? "hsl(" + (45 - 45 * v) + ",100%," + (92 - 52 * v) + "%)" : "#f5f5f5";
      g.fillRect(x, y, cw - 1, ch);
      if (st.a >= 0 && c >= st.a && c <= st.b) {
        g.fillStyle = "rgba(0,80,255,0.45)"; g.fillRect(x, y, cw - 1, ch);
      }
    }
    g.fillStyle = "#444"; g.font = "10px sans-serif";
    var every = Math.max(1, Math.ceil(40 / cw));
    for (var s = 0; s < cols; s += every) g.fillText(s + "s", s * cw, ROWS * ch + 11);
  }
  function secs(c) { return (c * D.cellMs / 1000).toFixed(3); }
  function writeHash() {
    var parts = [];
    if (st.a >= 0) parts.push("t=" + st.a * D.cellMs + "-" + (st.b + 1) * D.cellMs);
    if (st.thread >= 0) parts.push("thread=" + encodeURIComponent(D.threads[st.thread]));
    try {
      history.replaceState(null, "", window.location.pathname + window.location.search +
        (parts.length ? "#" + parts.join("&") : ""));
    } catch (e) { /* no history API: the selection is not kept */ }
  }
  function readHash() {
    var p = new URLSearchParams(window.location.hash.replace(/^#/, ""));
    var th = p.get("thread");
    if (th !== null) st.thread = D.threads.indexOf(th);
    var t = /^(\d+(?:\.\d+)?)-(\d+(?:\.\d+)?)$/.exec(p.get("t") || "");
    if (t) {
      var a = Math.floor(+t[1] / D.cellMs), b = Math.ceil(+t[2] / D.cellMs) - 1;
      if (b >= a && a < D.cells) { st.a = Math.max(0, a); st.b = Math.min(D.cells - 1, b); }
    }
  }
  function colour(name) {
    var h = 0;
    for (var i = 0; i < name.length; i++) h = (h * 31 + name.charCodeAt(i)) >>> 0;
    return "hsl(" + (h % 55) + ",85%," + (55 + (h >> 8) % 15) + "%)";
  }
  function range() {
    var v = new Float64Array(N);
    for (var i = 0; i < C.length; i += 4) {
      if (C[i] < st.a) continue;
      if (C[i] > st.b) break;
      if (st.thread < 0 || C[i + 2] === st.thread) v[C[i + 1]] += C[i + 3];
    }
    for (var i = N - 1; i > 0; i--) v[parent[i]] += v[i];
    return v;
  }
  function box(node, x, w, depth, v, total) {
    var d = document.createElement("div"), name = D.frames[frame[node]];
    d.className = "jp-tl-f";
    d.style.left = (x * 100) + "%"; d.style.width = (w * 100) + "%";
    d.style.bottom = (depth * 17) + "px"; d.style.background = colour(name);
    d.title = name + " (" + v[node] + " samples, " + (100 * v[node] / total).toFixed(2) + "%)";
    d.textContent = name;
    d.setAttribute("data-node", node);
    return d;
  }
  function flameOf() {
    var v = range(), total = v[0], out = document.createDocumentFragment(), depth = 0;
    flame.textContent = "";
    info.textContent = "selected " + secs(st.a) + " s to " + secs(st.b + 1) + " s: " + total + " samples" +
      (st.thread >= 0 ? " of " + D.threads[st.thread] : "");
    if (!total) return;
    var chain = [];
    for (var n = st.zoom; n > 0; n = parent[n]) chain.unshift(n);
    chain.forEach(function (n, i) { out.appendChild(box(n, 0, 1, i, v, total)); });
    var maxDepth = chain.length, scale = v[st.zoom] || 1;
    (function walk(node, x, depth) {
      var k = kids[node] || [];
      for (var i = 0; i < k.length; i++) {
        var w = v[k[i]] / scale;
        if (w * scale / total >= 0.001 && w >= 0.0005) {
          out.appendChild(box(k[i], x, w, depth, v, total));
          if (depth + 1 > maxDepth) maxDepth = depth + 1;
          walk(k[i], x, depth + 1);
        }
        x += w;
      }
    })(st.zoom, 0, chain.length);
    flame.style.height = (maxDepth * 17 + 2) + "px";
    flame.appendChild(out);
  }
  function show() {
    var s = svg(), on = st.a >= 0;
    if (s) s.style.display = on ? "none" : "";
    flame.hidden = !on;
    document.getElementById("jp-tl-clear").disabled = !on;
    if (on) flameOf(); else info.textContent = "drag or click to select a time range";
    heat();
  }
  function select(a, b) {
    st.a = Math.min(a, b); st.b = Math.max(a, b); st.zoom = 0; writeHash(); show();
  }
  function cellAt(ev) {
    var r = canvas.getBoundingClientRect();
    var x = (ev.clientX - r.left) * canvas.width / r.width, y = (ev.clientY - r.top) * canvas.height / r.height;
    var col = Math.min(cols - 1, Math.max(0, Math.floor(x / cw)));
    var row = Math.min(ROWS - 1, Math.max(0, Math.floor(y / ch)));
    return Math.min(D.cells - 1, col * ROWS + row);
  }
  var drag = -1;
  canvas.addEventListener("mousedown", function (e) { drag = cellAt(e); st.a = st.b = drag; heat(); e.preventDefault(); });
  canvas.addEventListener("mousemove", function (e) {
    if (drag < 0) return;
    var c = cellAt(e); st.a = Math.min(drag, c); st.b = Math.max(drag, c); heat();
  });
  window.addEventListener("mouseup", function (e) {
    if (drag < 0) return;
    var c = e.target === canvas ? cellAt(e) : st.b;
    select(drag, c); drag = -1;
  });
  flame.addEventListener("click", function (e) {
    var n = e.target.getAttribute && e.target.getAttribute("data-node");
    if (n !== null && n !== undefined) { st.zoom = +n === st.zoom ? 0 : +n; flameOf(); }
  });
  document.getElementById("jp-tl-clear").addEventListener("click", function () {
    st.a = st.b = -1; st.zoom = 0; writeHash(); show();
  });
  var order = D.threads.map(function (_, i) { return i; });
  order.sort(function (a, b) { return D.threadSamples[b] - D.threadSamples[a]; });
  order.forEach(function (i) {
    var o = document.createElement("option");
    o.value = i; o.textContent = D.threads[i] + " (" + D.threadSamples[i] + ")";
    pick.appendChild(o);
  });
  pick.addEventListener("change", function () {
    st.thread = +pick.value; totals = cellTotals(); writeHash(); show();
  });
  readHash();
  pick.value = st.thread;
  totals = cellTotals();
  var t0 = performance.now();
  show();
  // When the timeline (and a selection's flamegraph) was drawn, and how long
  // that draw took, for benches/pprof-timeline.sh.
  document.documentElement.setAttribute("data-jp-tl-ready-ms", performance.now().toFixed(0));
  document.documentElement.setAttribute("data-jp-tl-draw-ms", (performance.now() - t0).toFixed(0));
  // `?jobprof-tl-drag=A-B` (cell numbers): the browser test drags from
  // cell A to cell B with real mouse events and records the outcome.
  var drill = new URLSearchParams(window.location.search).get("jobprof-tl-drag");
  if (drill) {
    var ab = drill.split("-").map(Number), r = canvas.getBoundingClientRect();
    var at = function (c) {
      return { bubbles: true, view: window,
        clientX: r.left + (Math.floor(c / ROWS) * cw + cw / 2) * r.width / canvas.width,
        clientY: r.top + ((c % ROWS) * ch + ch / 2) * r.height / canvas.height };
    };
    canvas.dispatchEvent(new MouseEvent("mousedown", at(ab[0])));
    canvas.dispatchEvent(new MouseEvent("mousemove", at(ab[1])));
    canvas.dispatchEvent(new MouseEvent("mouseup", at(ab[1])));
    var pre = document.createElement("pre");
    pre.id = "jp-tl-selftest";
    pre.textContent = JSON.stringify({ hash: window.location.hash, a: st.a, b: st.b,
      svgHidden: !!(svg() && svg().style.display === "none") });
    document.body.appendChild(pre);
  }
  window.addEventListener("resize", function () { fit(); heat(); });
  window.addEventListener("hashchange", function () {
    st.a = st.b = st.thread = -1; readHash(); pick.value = st.thread; totals = cellTotals(); show();
  });
})();
