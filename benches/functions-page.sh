#!/usr/bin/env bash
# Measures the flamegraph page's function table and callers/callees view
# on a big profile: a synthetic folded file of STACKS distinct stacks
# (benches/gen-big-folded.py; or FOLDED, any folded file) is rendered to
# HTML, and the page is opened in headless Chromium with its self-test
# hook, which picks each FUNCTION as a user would (search box, its row,
# Enter); a PAGE.html already rendered is measured as it is. Prints the
# page's size, the data block's size and its bytes per
# distinct stack, and from the page: when the table was drawn (ms after
# navigation start), how long reading the stacks took, and how long
# opening each function's callers and callees took.
#
#   bash benches/functions-page.sh [STACKS|FOLDED|PAGE.html] [FUNCTION...]
#
# JOBPROF picks the binary (default: the release build, else the debug).
set -euo pipefail
cd "$(dirname "$0")/.."
arg=${1:-1000000}
shift || true
funcs=("$@")
[ ${#funcs[@]} -gt 0 ] || funcs=(main fn_0)
jobprof=${JOBPROF:-}
for b in target/release/jobprof target/x86_64-unknown-linux-gnu/release/jobprof \
  target/x86_64-unknown-linux-gnu/debug/jobprof target/debug/jobprof; do
  [ -n "$jobprof" ] || { [ -x "$b" ] && jobprof=$b; } || true
done
chromium=$(command -v chromium || command -v chromium-browser || command -v google-chrome)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
page=$work/page.html
if [[ $arg == *.html ]]; then
  page=$arg # a page already rendered: measure it in the browser only
elif [ -f "$arg" ]; then
  folded=$arg
else
  folded=$work/big.folded
  python3 benches/gen-big-folded.py "$arg" > "$folded"
fi
if [[ $arg != *.html ]]; then
  /usr/bin/time -f "render: %e s, %M KiB peak RSS" "$jobprof" render "$folded" -o "$page"
fi
python3 - "$page" <<'PY'
import re, sys
page = open(sys.argv[1], "rb").read()
stacks = int(re.search(rb"in ([0-9,]+) distinct stacks", page).group(1).replace(b",", b""))
open_tag = b'<script type="application/json" id="jp-fn-data">'
a = page.index(open_tag) + len(open_tag)
block = page.index(b"</script>", a) - a
print(f"{stacks} distinct stacks; page {len(page):,} bytes, data block {block:,} bytes, "
      f"{block / stacks:.1f} bytes per distinct stack")
PY
for f in "${funcs[@]}"; do
  q=$(python3 -c 'import sys, urllib.parse; print(urllib.parse.quote(sys.argv[1]))' "$f")
  start=$(date +%s.%N)
  dom=$("$chromium" --headless --no-sandbox --disable-gpu --no-first-run \
    --disable-background-networking --disable-component-update --disable-sync \
    --host-resolver-rules='MAP * ~NOTFOUND' --user-data-dir="$work/chromium" \
    --virtual-time-budget=60000 --dump-dom "file://$(realpath "$page")?jobprof-fn-selftest=$q" 2> /dev/null)
  end=$(date +%s.%N)
  printf '%s\n' "$dom" | python3 -c '
import html, json, re, sys
m = re.search(r"<pre id=\"jp-fn-selftest\">(.*?)</pre>", sys.stdin.read(), re.S)
r = json.loads(html.unescape(m.group(1)))
ready, build, pick = r["readyAtMs"], r["buildMs"], r.get("pickMs", float("nan"))
timing = r.get("pickTiming") or {}
print("%s: table drawn %.0f ms after navigation start (reading the stacks %.0f ms); "
      "callers and callees opened in %.0f ms (%s caller, %s callee nodes); total %.0f, "
      "%s paths; chromium ran %.1f s" % (sys.argv[1], ready, build, pick, timing.get("callers"),
      timing.get("callees"), r["total"], r["paths"], float(sys.argv[2])))
' "$f" "$(echo "$end - $start" | bc)"
done
