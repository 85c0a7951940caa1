(function () {
  // The function table and the callers / callees ("sandwich") of a picked
  // function, from the stacks embedded as #jp-fn-data (src/output/render/
  // functions.rs: a preorder prefix tree of interned names). A function's
  // total counts each stack once however often the function recurses in
  // it (perf report --children); callers and callees are merged from the
  // function's outermost frames (speedscope's sandwich), so their roots
  // are that same total.
  var data = document.getElementById("jp-fn-data");
  var aside = document.getElementById("jp-fn");
  if (!data || !aside) return;
  var info = document.getElementById("jp-fn-info");
  var table = document.getElementById("jp-fn-table");
  var tbody = table.querySelector("tbody");
  var unitName = aside.getAttribute("data-unit");
  var ROWS = 200, KIDS = 100;
  var M = null;
  var st = { key: "self", desc: true, filter: "", picked: -1, shown: [] };

  function build() {
    var D = JSON.parse(data.textContent);
    if (D.v !== 1) throw new Error("function data of version " + D.v + " is not known");
    var names = D.names, NN = names.length, R = D.nodes, N = R.length >> 1, S = D.self, unit = D.unit;
    var parent = new Int32Array(N), name = new Int32Array(N), size = new Int32Array(N);
    var self = new Float64Array(N), tot = new Float64Array(N), outer = new Uint8Array(N), dep = new Int32Array(N);
    var path = new Int32Array(N + 1), onPath = new Int32Array(NN), depth = 0, i, k;
    for (i = 0; i < N; i++) {
      for (k = R[2 * i]; k > 0; k--) onPath[name[path[--depth]]]--;
      var f = R[2 * i + 1];
      name[i] = f;
      parent[i] = depth > 0 ? path[depth - 1] : -1;
      dep[i] = depth;
      if (onPath[f] === 0) outer[i] = 1;
      onPath[f]++;
      path[depth++] = i;
    }
    for (k = 0, i = -1; k < S.length; k += 2) { i += S[k]; self[i] = S[k + 1]; }
    tot.set(self);
    size.fill(1);
    var total = 0;
    for (i = N - 1; i >= 0; i--) {
      var p = parent[i];
      if (p >= 0) { tot[p] += tot[i]; size[p] += size[i]; } else total += tot[i];
    }
    var fSelf = new Float64Array(NN), fTotal = new Float64Array(NN), fPaths = new Int32Array(NN);
    for (i = 0; i < N; i++) {
      var n = name[i];
      fSelf[n] += self[i];
      fPaths[n]++;
      if (outer[i]) fTotal[n] += tot[i];
    }
    var ids = new Map();
    for (i = 0; i < NN; i++) ids.set(names[i], i);
    M = { names: names, NN: NN, N: N, parent: parent, name: name, size: size, tot: tot,
      outer: outer, depth: dep, total: total, unit: unit, fSelf: fSelf, fTotal: fTotal, fPaths: fPaths, ids: ids,
      lower: null, map: new Int32Array(N) };
  }

  // Counts are kept in the data's unit (their sums are exact: the writer
  // keeps them under 2^53) and multiplied out only to be shown.
  function abs(v) { return v * M.unit; }
  function num(v) { return Math.round(abs(v)).toLocaleString("en-US"); }
  function pct(v) { return M.total > 0 ? (100 * v / M.total).toFixed(2) + "%" : "0%"; }
  function td(text, cls, title) {
    var c = document.createElement("td");
    c.textContent = text;
    if (cls) c.className = cls;
    if (title) c.title = title;
    return c;
  }

  // ---- the table ----------------------------------------------------------
  function matching() {
    var out = [], i;
    if (!st.filter) { for (i = 0; i < M.NN; i++) out.push(i); return out; }
    if (!M.lower) M.lower = M.names.map(function (s) { return s.toLowerCase(); });
    var q = st.filter.toLowerCase();
    for (i = 0; i < M.NN; i++) if (M.lower[i].indexOf(q) >= 0) out.push(i);
    return out;
  }
  function sorted(list) {
    var key = st.key, sign = st.desc ? -1 : 1, names = M.names;
    var col = key === "self" ? M.fSelf : key === "total" ? M.fTotal : key === "paths" ? M.fPaths : null;
    return list.sort(function (a, b) {
      if (col) {
        var d = col[a] - col[b];
        if (d !== 0) return sign * d;
      } else if (names[a] !== names[b]) return sign * (names[a] < names[b] ? -1 : 1);
      return names[a] < names[b] ? -1 : names[a] > names[b] ? 1 : a - b;
    });
  }
  function drawTable() {
    var list = sorted(matching());
    st.shown = list.slice(0, ROWS);
    var frag = document.createDocumentFragment();
    st.shown.forEach(function (f, r) {
      var tr = document.createElement("tr");
      tr.tabIndex = r === 0 ? 0 : -1;
      tr.setAttribute("data-f", f);
      tr.setAttribute("data-self", abs(M.fSelf[f]));
      tr.setAttribute("data-total", abs(M.fTotal[f]));
      tr.setAttribute("data-paths", M.fPaths[f]);
      if (f === st.picked) tr.className = "jp-fn-picked";
      tr.appendChild(td(M.names[f], "jp-fn-n", M.names[f]));
      tr.appendChild(td(pct(M.fSelf[f]), "jp-fn-num", num(M.fSelf[f]) + " " + unitName));
      tr.appendChild(td(pct(M.fTotal[f]), "jp-fn-num", num(M.fTotal[f]) + " " + unitName));
      tr.appendChild(td(String(M.fPaths[f]), "jp-fn-num"));
      frag.appendChild(tr);
    });
    tbody.textContent = "";
    tbody.appendChild(frag);
    var ths = table.querySelectorAll("thead th");
    for (var i = 0; i < ths.length; i++) {
      var k = ths[i].querySelector("button").getAttribute("data-key");
      if (k === st.key) ths[i].setAttribute("aria-sort", st.desc ? "descending" : "ascending");
      else ths[i].removeAttribute("aria-sort");
    }
    info.textContent = (list.length > ROWS ? "the first " + ROWS + " of " : "") + list.length +
      (st.filter ? " matching" : "") + " functions, " + M.N + " call paths";
  }
  function sortBy(key) {
    if (st.key === key) st.desc = !st.desc;
    else { st.key = key; st.desc = key !== "name"; }
    drawTable();
  }
  function rowOf(el) {
    while (el && el !== tbody) { if (el.parentNode === tbody) return el; el = el.parentNode; }
    return null;
  }
  function focusRow(tr) {
    if (!tr) return;
    var rows = tbody.children;
    for (var i = 0; i < rows.length; i++) rows[i].tabIndex = -1;
    tr.tabIndex = 0;
    tr.focus();
  }

  // ---- callers and callees ------------------------------------------------
  // A merged tree: node k is a name under parent par[k] with value v[k];
  // node 0 is the picked function. Children are found by (parent, name)
  // in an open-addressing table of node numbers (typed arrays: a Map of
  // millions of number keys is several times slower).
  function newTree(f, most) {
    var cap = 1024;
    while (cap < most) cap *= 2;
    var t = { n: 1, name: new Int32Array(cap), par: new Int32Array(cap), v: new Float64Array(cap),
      slots: new Int32Array(2 * cap).fill(-1), kids: null, kidStart: null };
    t.name[0] = f; t.par[0] = -1;
    return t;
  }
  function slot(t, c, f) {
    var mask = t.slots.length - 1, h = (Math.imul(c, 0x9e3779b1) ^ Math.imul(f, 0x85ebca77)) & mask;
    for (;;) {
      var k = t.slots[h];
      if (k < 0 || (t.par[k] === c && t.name[k] === f)) return h;
      h = (h + 1) & mask;
    }
  }
  function grow(t) {
    var cap = t.name.length * 2, name = new Int32Array(cap), par = new Int32Array(cap), v = new Float64Array(cap);
    name.set(t.name); par.set(t.par); v.set(t.v);
    t.name = name; t.par = par; t.v = v;
    t.slots = new Int32Array(cap * 2).fill(-1);
    for (var k = 1; k < t.n; k++) t.slots[slot(t, t.par[k], t.name[k])] = k;
  }
  function child(t, c, f) {
    var h = slot(t, c, f), k = t.slots[h];
    if (k >= 0) return k;
    if (t.n === t.name.length) { grow(t); h = slot(t, c, f); }
    k = t.n++;
    t.name[k] = f; t.par[k] = c; t.v[k] = 0;
    t.slots[h] = k;
    return k;
  }
  // Both trees of f, from each outermost frame of f: the path up to the
  // root (callers) and the frame's subtree (callees), weighted by the
  // frame's total.
  function sandwich(f) {
    var name = M.name, parent = M.parent, outer = M.outer, tot = M.tot, size = M.size, map = M.map;
    // The outermost frames of f, and how many nodes each tree can have at
    // most (sized once: growing a table of millions is slow).
    var at = [], up = 1, down = 1, i;
    for (i = 0; i < M.N; i++) {
      if (name[i] === f && outer[i]) { at.push(i); up += M.depth[i]; down += size[i]; i += size[i] - 1; }
    }
    var callers = newTree(f, Math.min(up, M.N + 1)), callees = newTree(f, Math.min(down, M.N + 1));
    for (var a = 0; a < at.length; a++) {
      i = at[a];
      var w = tot[i], c = 0;
      callers.v[0] += w;
      for (var p = parent[i]; p >= 0; p = parent[p]) { c = child(callers, c, name[p]); callers.v[c] += w; }
      callees.v[0] += w;
      map[i] = 0;
      var end = i + size[i];
      for (var j = i + 1; j < end; j++) {
        c = child(callees, map[parent[j]], name[j]);
        map[j] = c;
        callees.v[c] += tot[j];
      }
    }
    return { callers: callers, callees: callees };
  }
  // Children of n, largest first (by name on ties); all nodes' lists are
  // made at the first call.
  function kidsOf(t, n) {
    csr(t);
    var list = Array.prototype.slice.call(t.kids.subarray(t.kidStart[n], t.kidStart[n + 1]));
    list.sort(function (a, b) {
      return t.v[b] - t.v[a] || (M.names[t.name[a]] < M.names[t.name[b]] ? -1 : 1);
    });
    return list;
  }
  function csr(t) {
    if (!t.kids) {
      var start = new Int32Array(t.n + 1), kids = new Int32Array(Math.max(0, t.n - 1)), k;
      for (k = 1; k < t.n; k++) start[t.par[k] + 1]++;
      for (k = 0; k < t.n; k++) start[k + 1] += start[k];
      var at = start.slice(0, t.n);
      for (k = 1; k < t.n; k++) kids[at[t.par[k]]++] = k;
      t.kids = kids; t.kidStart = start;
    }
  }
  function hasKids(t, n) { csr(t); return t.kidStart[n + 1] > t.kidStart[n]; }
  function item(t, n, root) {
    var li = document.createElement("li");
    li.setAttribute("role", "treeitem");
    li.tabIndex = -1;
    li.setAttribute("data-v", abs(t.v[n]));
    li.jpTree = t; li.jpNode = n;
    var row = document.createElement("div");
    row.className = "jp-fn-node";
    var tog = document.createElement("span");
    tog.className = "jp-fn-tog";
    tog.setAttribute("aria-hidden", "true");
    var bar = document.createElement("span");
    bar.className = "jp-fn-share";
    bar.style.width = (t.v[0] > 0 ? 100 * t.v[n] / t.v[0] : 0).toFixed(1) + "%";
    var v = document.createElement("span");
    v.className = "jp-fn-pct";
    v.textContent = pct(t.v[n]);
    v.title = num(t.v[n]) + " " + unitName;
    var nm = document.createElement("span");
    nm.className = "jp-fn-n";
    nm.textContent = M.names[t.name[n]];
    nm.title = M.names[t.name[n]] + (root ? "" : " (click: show its callers and callees)");
    row.appendChild(tog); row.appendChild(bar); row.appendChild(v); row.appendChild(nm);
    li.appendChild(row);
    if (hasKids(t, n)) {
      li.setAttribute("aria-expanded", "false");
      tog.textContent = "\u25b8";
    }
    return li;
  }
  function expand(li, open) {
    if (!li.hasAttribute("aria-expanded")) return;
    var sub = li.querySelector(":scope > ul");
    if (open && !sub) {
      var t = li.jpTree, kids = kidsOf(t, li.jpNode);
      sub = document.createElement("ul");
      sub.setAttribute("role", "group");
      for (var i = 0; i < kids.length && i < KIDS; i++) sub.appendChild(item(t, kids[i], false));
      if (kids.length > KIDS) {
        var rest = 0;
        for (i = KIDS; i < kids.length; i++) rest += t.v[kids[i]];
        var more = document.createElement("li");
        more.className = "jp-fn-more";
        more.textContent = (kids.length - KIDS) + " more, " + pct(rest);
        sub.appendChild(more);
      }
      li.appendChild(sub);
    }
    if (sub) sub.hidden = !open;
    li.setAttribute("aria-expanded", open ? "true" : "false");
    li.querySelector(".jp-fn-tog").textContent = open ? "\u25be" : "\u25b8";
  }
  // Opens the root and, below it, the callers or callees that make up
  // most of their parent (the dominant paths), a few levels deep.
  function openDominant(li, level) {
    expand(li, true);
    var sub = li.querySelector(":scope > ul");
    if (!sub || level >= 6) return;
    var v = +li.getAttribute("data-v");
    for (var c = sub.firstChild; c; c = c.nextSibling) {
      if (c.jpTree && +c.getAttribute("data-v") >= 0.5 * v) openDominant(c, level + 1);
    }
  }
  function drawTree(ul, t) {
    ul.textContent = "";
    var li = item(t, 0, true);
    li.tabIndex = 0;
    ul.appendChild(li);
    openDominant(li, 0);
  }
  function pick(f, focus) {
    if (f < 0 || f >= M.NN) return;
    st.picked = f;
    var t0 = performance.now();
    var s = sandwich(f);
    var t1 = performance.now();
    var h = document.getElementById("jp-fn-name");
    h.textContent = M.names[f];
    h.setAttribute("data-self", abs(M.fSelf[f]));
    h.setAttribute("data-total", abs(M.fTotal[f]));
    h.setAttribute("data-paths", M.fPaths[f]);
    document.getElementById("jp-fn-facts").textContent =
      "self " + num(M.fSelf[f]) + " " + unitName + " (" + pct(M.fSelf[f]) + "), total " +
      num(M.fTotal[f]) + " " + unitName + " (" + pct(M.fTotal[f]) + "), " + M.fPaths[f] +
      " call path" + (M.fPaths[f] === 1 ? "" : "s") + " in the graph";
    drawTree(document.getElementById("jp-fn-callers"), s.callers);
    drawTree(document.getElementById("jp-fn-callees"), s.callees);
    document.getElementById("jp-fn-pick").hidden = false;
    st.timing = { mergeMs: t1 - t0, drawMs: performance.now() - t1,
      callers: s.callers.n, callees: s.callees.n };
    var rows = tbody.children;
    for (var i = 0; i < rows.length; i++) {
      rows[i].className = +rows[i].getAttribute("data-f") === f ? "jp-fn-picked" : "";
    }
    try {
      // inferno's own reader and writer of the query, as its zoom uses.
      var p = get_params();
      p.fn = M.names[f];
      history.replaceState(null, "", parse_params(p) + window.location.hash);
    } catch (e) { /* no history API: the pick is not kept */ }
    if (focus) h.focus();
  }
  function treeItems(ul) {
    return Array.prototype.filter.call(ul.querySelectorAll("li[role=treeitem]"), function (li) {
      return li.offsetParent !== null || li.getClientRects().length > 0;
    });
  }
  function onTreeKey(e) {
    var li = e.target.closest && e.target.closest("li[role=treeitem]");
    if (!li) return;
    var ul = li.closest("ul[role=tree]"), items, i;
    if (e.key === "ArrowDown" || e.key === "ArrowUp") {
      items = treeItems(ul);
      i = items.indexOf(li) + (e.key === "ArrowDown" ? 1 : -1);
      if (items[i]) { li.tabIndex = -1; items[i].tabIndex = 0; items[i].focus(); }
    } else if (e.key === "ArrowRight") expand(li, true);
    else if (e.key === "ArrowLeft") expand(li, false);
    else if (e.key === "Enter" || e.key === " ") {
      if (li.jpNode === 0) expand(li, li.getAttribute("aria-expanded") !== "true");
      else pick(li.jpTree.name[li.jpNode], true);
    } else return;
    e.preventDefault();
  }
  function onTreeClick(e) {
    var li = e.target.closest && e.target.closest("li[role=treeitem]");
    if (!li) return;
    if (e.target.classList.contains("jp-fn-n") && li.jpNode !== 0) pick(li.jpTree.name[li.jpNode], true);
    else expand(li, li.getAttribute("aria-expanded") !== "true");
  }

  // ---- the flamegraph and the search box ----------------------------------
  function frameName(g) {
    var t = find_child(g, "title");
    t = t && t.textContent || "";
    var i = t.lastIndexOf(" (");
    return i > 0 ? t.slice(0, i) : t;
  }
  function pickFrame(g) {
    if (!M || !g) return;
    var n = frameName(g), f = M.ids.get(n);
    if (f === undefined) f = M.ids.get(n.replace(/\u00a0/g, " "));
    if (f !== undefined) pick(f, false);
  }
  function searched(term) {
    st.filter = term;
    drawTable();
    if (!term) return;
    var q = term.toLowerCase(), exact = -1;
    for (var i = 0; i < st.shown.length; i++) if (M.names[st.shown[i]].toLowerCase() === q) exact = st.shown[i];
    if (exact < 0 && st.shown.length === 1) exact = st.shown[0];
    if (exact >= 0) pick(exact, false);
  }

  function wire() {
    table.querySelector("thead").addEventListener("click", function (e) {
      var b = e.target.closest("button");
      if (b) sortBy(b.getAttribute("data-key"));
    });
    tbody.addEventListener("click", function (e) {
      var tr = rowOf(e.target);
      if (tr) { focusRow(tr); pick(+tr.getAttribute("data-f"), false); }
    });
    tbody.addEventListener("keydown", function (e) {
      var tr = rowOf(e.target);
      if (!tr) return;
      var to = null;
      if (e.key === "ArrowDown") to = tr.nextElementSibling;
      else if (e.key === "ArrowUp") to = tr.previousElementSibling;
      else if (e.key === "Home") to = tbody.firstElementChild;
      else if (e.key === "End") to = tbody.lastElementChild;
      else if (e.key === "Enter" || e.key === " ") { pick(+tr.getAttribute("data-f"), false); e.preventDefault(); return; }
      else return;
      e.preventDefault();
      focusRow(to);
    });
    ["jp-fn-callers", "jp-fn-callees"].forEach(function (id) {
      var ul = document.getElementById(id);
      ul.addEventListener("keydown", onTreeKey);
      ul.addEventListener("click", onTreeClick);
    });
    var fr = document.getElementById("frames");
    if (fr) {
      fr.addEventListener("click", function (e) { pickFrame(find_group(e.target)); });
      fr.addEventListener("keydown", function (e) { if (e.key === "Enter") pickFrame(find_group(e.target)); });
    }
    var form = document.getElementById("jp-search-form");
    if (form) form.addEventListener("submit", function () { searched(document.getElementById("jp-search").value); });
    var clear = document.getElementById("jp-clear");
    if (clear) clear.addEventListener("click", function () { searched(""); });
  }

  // ---- the browser test's hook --------------------------------------------
  function selfTest(name, frame, t) {
    var out = { buildMs: t.build, readyAtMs: t.ready };
    var box = document.getElementById("jp-search");
    box.value = name;
    var t0 = performance.now();
    document.getElementById("jp-search-form").requestSubmit();
    out.searchMs = performance.now() - t0;
    var tr = null, rows = tbody.children;
    for (var i = 0; i < rows.length; i++) if (M.names[+rows[i].getAttribute("data-f")] === name) tr = rows[i];
    out.rowFound = !!tr;
    if (tr) {
      st.picked = -1;
      document.getElementById("jp-fn-pick").hidden = true;
      focusRow(tr);
      out.rowFocused = document.activeElement === tr && tr.tabIndex === 0;
      t0 = performance.now();
      tr.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
      out.pickMs = performance.now() - t0;
    }
    out.picked = st.picked >= 0 ? M.names[st.picked] : null;
    out.pickTiming = st.timing;
    var h = document.getElementById("jp-fn-name");
    out.self = +h.getAttribute("data-self");
    out.total = +h.getAttribute("data-total");
    out.paths = +h.getAttribute("data-paths");
    function dump(id) {
      var res = {};
      (function walk(ul, path) {
        for (var li = ul.firstChild; li; li = li.nextSibling) {
          if (!li.jpTree) continue;
          expand(li, true);
          var p = path.concat([li.querySelector(":scope > .jp-fn-node > .jp-fn-n").textContent]);
          res[p.join(";")] = +li.getAttribute("data-v");
          var sub = li.querySelector(":scope > ul");
          if (sub) walk(sub, p);
        }
      })(document.getElementById(id), []);
      return res;
    }
    if (out.picked !== null && M.N < 10000) {
      out.callers = dump("jp-fn-callers");
      out.callees = dump("jp-fn-callees");
    }
    box.value = "";
    document.getElementById("jp-clear").click();
    function column(key) {
      if (key) sortBy(key);
      return Array.prototype.map.call(tbody.children, function (r) {
        return [M.names[+r.getAttribute("data-f")], +r.getAttribute("data-self"),
          +r.getAttribute("data-total"), +r.getAttribute("data-paths")];
      });
    }
    out.table = column(null);
    out.tableSortKey = st.key;
    out.byTotal = column("total").map(function (r) { return r[0]; });
    out.byName = column("name").map(function (r) { return r[0]; });
    sortBy("self");
    if (frame) {
      var el = document.getElementById("frames").children, g = null;
      for (i = 0; i < el.length && !g; i++) if (frameName(el[i]) === frame) g = el[i];
      out.frameFound = !!g;
      if (g) {
        find_child(g, "rect").dispatchEvent(
          new MouseEvent("click", { bubbles: true, cancelable: true, view: window }));
        out.frameClickPicked = st.picked >= 0 ? M.names[st.picked] : null;
        out.frameWidthAfterClick = find_child(g, "rect").getAttribute("width");
        out.url = window.location.search;
      }
    }
    var pre = document.createElement("pre");
    pre.id = "jp-fn-selftest";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }

  function start() {
    var t0 = performance.now();
    try {
      build();
    } catch (e) {
      info.textContent = "cannot read the stacks: " + e.message;
      return;
    }
    wire();
    drawTable();
    var t = { build: performance.now() - t0, ready: performance.now() };
    var fn = get_params().fn, p = new URLSearchParams(window.location.search);
    if (fn !== undefined && !M.ids.has(fn)) fn = fn.replace(/\+/g, " ");
    if (fn !== undefined && M.ids.has(fn)) pick(M.ids.get(fn), false);
    if (p.get("jobprof-fn-selftest") !== null) selfTest(p.get("jobprof-fn-selftest"), p.get("jobprof-fn-frame"), t);
  }
  // After the flamegraph's own start-up, so that it is drawn first.
  function later() { setTimeout(start, 0); }
  if (document.readyState === "complete") later();
  else window.addEventListener("load", later);
})();
