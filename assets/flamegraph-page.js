(function () {
  function jpPattern(term) {
    var out = "";
    for (var ch of term) {
      var lo = ch.toLowerCase(), up = ch.toUpperCase();
      if (lo !== up && lo.length === 1 && up.length === 1) {
        out += "[" + lo + up + "]";
      } else {
        out += ch.replace(/[.*+?^${}()|[\]\\\/-]/g, "\\$&");
      }
    }
    return out;
  }
  function jpClearSearch() {
    if (searching) search_prompt(); // with a search active this only resets it
    document.getElementById("jp-matched").textContent = "";
  }
  function jpSearch(term) {
    jpClearSearch();
    if (!term) return;
    search(jpPattern(term));
    document.getElementById("jp-matched").textContent =
      searching ? matchedtxt.firstChild.nodeValue : "no match";
  }
  function jpReset() {
    unzoom();
    try {
      var p = new URLSearchParams(window.location.search);
      p.delete("x"); p.delete("y");
      var s = p.toString();
      history.replaceState(null, "", s ? "?" + s : window.location.pathname);
    } catch (e) { /* not fatal */ }
  }
  function jpZoomTo(g) {
    if (g.classList.contains("parent")) unzoom();
    zoom(g);
  }
  function jpSelfTest(name) {
    var out = { found: false };
    function width(g) { return find_child(g, "rect").getAttribute("width"); }
    function hidden() { return document.querySelectorAll("#frames > g.hide").length; }
    var g = null, el = frames.children;
    for (var i = 0; i < el.length && !g; i++) {
      if (g_to_text(el[i]).indexOf(name + " (") === 0) g = el[i];
    }
    if (g) {
      out.found = true;
      out.initial = width(g);
      out.hiddenInitially = hidden();
      find_child(g, "rect").dispatchEvent(
        new MouseEvent("click", { bubbles: true, cancelable: true, view: window }));
      out.afterClick = width(g);
      out.hiddenAfterClick = hidden();
      document.getElementById("jp-reset").click();
      out.afterReset = width(g);
      out.hiddenAfterReset = hidden();
      g.focus();
      out.focused = document.activeElement === g;
      g.dispatchEvent(new KeyboardEvent("keydown", { key: "Enter", bubbles: true }));
      out.afterEnter = width(g);
      document.getElementById("jp-reset").click();
      document.getElementById("jp-search").value = name.toUpperCase();
      document.getElementById("jp-search-form").requestSubmit();
      out.matched = document.getElementById("jp-matched").textContent;
      out.highlighted = 0;
      var rects = document.querySelectorAll("#frames rect");
      for (var j = 0; j < rects.length; j++) {
        if (rects[j].getAttribute("fill") === searchcolor) out.highlighted++;
      }
    }
    out.pageWidth = document.documentElement.clientWidth;
    out.svgWidth = Math.round(svg.getBoundingClientRect().width);
    out.framesWidth = Math.round(frames.getBoundingClientRect().width);
    var pre = document.createElement("pre");
    pre.id = "jp-selftest";
    pre.textContent = JSON.stringify(out);
    document.body.appendChild(pre);
  }
  // A flamegraph taller than the window (deep stacks: 128 frames of a
  // dwarf capture are 2,000 px) opens on its root, where the wide frames
  // are, not on the empty tips of its deepest stacks; an icicle's root is
  // at its top already.
  function jpShowRoot() {
    if (typeof inverted !== "undefined" && inverted) return;
    var bottom = svg.getBoundingClientRect().bottom;
    if (bottom > window.innerHeight) window.scrollBy(0, bottom - window.innerHeight);
  }
  function ready() {
    // Browsers differ on whether an inline <svg onload> fires; start the
    // SVG's script here if it has not started.
    if (typeof svg === "undefined" || !svg) init(null);
    var el = frames.children;
    for (var i = 0; i < el.length; i++) el[i].setAttribute("tabindex", "0");
    document.getElementById("jp-search-form").addEventListener("submit", function (e) {
      e.preventDefault();
      jpSearch(document.getElementById("jp-search").value);
    });
    document.getElementById("jp-clear").addEventListener("click", function () {
      document.getElementById("jp-search").value = "";
      jpClearSearch();
    });
    document.getElementById("jp-reset").addEventListener("click", jpReset);
    window.addEventListener("keydown", function (e) {
      if (e.key !== "Enter") return;
      var g = find_group(e.target) || (document.activeElement && find_group(document.activeElement));
      if (g) { e.preventDefault(); jpZoomTo(g); }
    });
    // Run after inferno's own deferred start-up (fluid width, unzoom).
    setTimeout(function () {
      if (jpZoomRestore) {
        var rects = document.querySelectorAll("#frames rect");
        for (var i = 0; i < rects.length; i++) {
          if (rects[i].getAttribute("fg:x") === jpZoomRestore.x &&
              rects[i].getAttribute("y") === jpZoomRestore.y) {
            jpZoomTo(find_group(rects[i]));
            break;
          }
        }
      }
      else jpShowRoot();
      // A search restored from the URL (`?s=`) shows its share here too.
      if (searching) document.getElementById("jp-matched").textContent = matchedtxt.firstChild.nodeValue;
      var st = new URLSearchParams(window.location.search).get("jobprof-selftest");
      if (st !== null) jpSelfTest(st);
    }, 0);
  }
  if (document.readyState === "complete") ready();
  else window.addEventListener("load", ready);
})();
