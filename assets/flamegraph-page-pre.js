var jpZoomRestore = null;
(function () {
  try {
    var p = new URLSearchParams(window.location.search);
    if (p.has("x") && p.has("y")) {
      jpZoomRestore = { x: p.get("x"), y: p.get("y") };
      p.delete("x"); p.delete("y");
      var s = p.toString();
      history.replaceState(null, "", s ? "?" + s : window.location.pathname);
    }
  } catch (e) { /* no history API (e.g. sandboxed): start unzoomed */ }
})();
