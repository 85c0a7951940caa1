(function () {
  function key(td, num) {
    var v = td.getAttribute("data-v");
    if (v === null) v = td.textContent;
    if (!num) return v.toLowerCase();
    var n = parseFloat(v);
    return isNaN(n) ? -Infinity : n;
  }
  function sortBy(table, col, desc) {
    var ths = table.tHead.rows[0].cells;
    var num = ths[col].hasAttribute("data-num");
    var body = table.tBodies[0];
    var rows = Array.prototype.slice.call(body.rows);
    rows.sort(function (a, b) {
      var x = key(a.cells[col], num), y = key(b.cells[col], num);
      var c = x < y ? -1 : x > y ? 1 : 0;
      return desc ? -c : c;
    });
    rows.forEach(function (r) { body.appendChild(r); });
    for (var i = 0; i < ths.length; i++) ths[i].removeAttribute("aria-sort");
    ths[col].setAttribute("aria-sort", desc ? "descending" : "ascending");
  }
  function column(table, name) {
    var ths = table.tHead.rows[0].cells;
    for (var i = 0; i < ths.length; i++) if (ths[i].getAttribute("data-key") === name) return i;
    return -1;
  }
  function wire(table) {
    var ths = table.tHead.rows[0].cells;
    Array.prototype.forEach.call(ths, function (th, i) {
      th.tabIndex = 0;
      function go() {
        var desc = th.getAttribute("aria-sort") === "ascending" ||
          (th.getAttribute("aria-sort") === null && th.hasAttribute("data-num"));
        sortBy(table, i, desc);
      }
      th.addEventListener("click", go);
      th.addEventListener("keydown", function (e) { if (e.key === "Enter") go(); });
    });
  }
  function selfTest(table) {
    var out = [];
    var ths = table.tHead.rows[0].cells;
    for (var i = 0; i < ths.length; i++) {
      var k = ths[i].getAttribute("data-key");
      for (var n = 0; n < 2; n++) {
        ths[i].dispatchEvent(new MouseEvent("click", { bubbles: true }));
        var vals = Array.prototype.map.call(table.tBodies[0].rows, function (r) {
          var td = r.cells[i];
          var v = td.getAttribute("data-v");
          return v === null ? td.textContent : v;
        });
        out.push({ key: k, sort: ths[i].getAttribute("aria-sort"), values: vals });
      }
    }
    var pre = document.createElement("pre");
    pre.id = "jp-selftest";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }
  var tables = document.querySelectorAll("table.jp-sortable");
  Array.prototype.forEach.call(tables, wire);
  var p = new URLSearchParams(window.location.search);
  var s = p.get("sort");
  if (s) {
    var desc = s.charAt(0) === "-";
    var name = desc ? s.slice(1) : s;
    Array.prototype.forEach.call(tables, function (t) {
      var c = column(t, name);
      if (c >= 0) sortBy(t, c, desc);
    });
  }
  if (p.get("jobprof-selftest") === "sort" && tables.length) {
    selfTest(document.getElementById(p.get("table") || "") || tables[0]);
  }
})();
