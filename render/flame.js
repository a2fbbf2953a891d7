/* SPDX-License-Identifier: MIT */
/*
 * Interaction for dlflame's SVG flame graphs; render/svg.c embeds this file.
 *
 * Each frame is <g class="f" data-s data-w> holding <title>, <rect>, <text>.
 * data-s and data-w are its start and width in weight units, so zooming and
 * "Matched" are exact rather than derived from rounded pixels. Names are read
 * from the <title> text and only ever written back as textContent or tested
 * with a RegExp: nothing from the file is evaluated or parsed as markup.
 *
 * Big graphs (100k frames) stay responsive because a zoom touches only the
 * frames it shows and the ones the previous zoom showed: frames are indexed
 * by row and sorted by start, so a zoomed frame's descendants are a range
 * of each row above it and its ancestors one binary search per row below.
 * Everything else is hidden by one class on the frames' parent. Search tests
 * every name (that is the query) but repaints only frames whose match
 * changed. Zoom and search live in the URL fragment, so a view can be shared
 * and survives a reload: #zoom=ROW,START&search=REGEX. The index is built
 * when the browser is idle after loading (or by the first zoom or search):
 * a big graph opens as fast as the browser parses it.
 */
(function () {
  'use strict';

  var FONT_SIZE = 12;
  var FONT_WIDTH = 0.59;
  var FRAME_HEIGHT = 16;
  var MATCH_FILL = 'rgb(230,0,230)';

  var frames = null; /* built by index() on first use */
  var rows = [];
  var byNode = new Map();
  var left = 0;
  var width = 0;
  var total = 0;
  var zoomed = null;
  var shown = [];
  var hits = [];
  var term = '';
  var el = {};

  function num(node, name) {
    var v = Number(node.getAttribute(name));
    return isFinite(v) ? v : 0;
  }

  /* The title is "NAME (N samples, P%...)"; the name is all before the last " (". */
  function nameOf(title) {
    var i = title.lastIndexOf(' (');
    return i < 0 ? title : title.slice(0, i);
  }

  function setClass(node, cls) {
    node.setAttribute('class', cls);
  }

  function label(f, px) {
    var fit = Math.floor(px / (FONT_SIZE * FONT_WIDTH));
    if (fit < 3) {
      return '';
    }
    if (!f.chars) {
      f.chars = Array.from(f.name); /* code points, as svg.c counts them */
    }
    if (f.chars.length <= fit) {
      return f.name;
    }
    return f.chars.slice(0, fit - 2).join('') + '..';
  }

  function parts(f) {
    if (!f.rect) {
      var kids = f.g.children;
      f.rect = kids[1];
      f.text = kids[2] && kids[2].localName === 'text' ? kids[2] : null;
      f.fill = f.rect.getAttribute('fill');
    }
    return f;
  }

  function nameOfFrame(f) {
    if (f.name === null) {
      f.title = f.g.children[0].textContent;
      f.name = nameOf(f.title);
    }
    return f.name;
  }

  function place(f, x, w, cls) {
    parts(f);
    if (f.x0 === null) {
      f.x0 = f.rect.getAttribute('x');
      f.w0 = f.rect.getAttribute('width');
      f.tx0 = f.text ? f.text.getAttribute('x') : null;
      f.label0 = f.text ? f.text.textContent : '';
    }
    nameOfFrame(f);
    f.rect.setAttribute('x', x.toFixed(2));
    f.rect.setAttribute('width', w.toFixed(2));
    if (f.text) {
      f.text.setAttribute('x', (x + 3).toFixed(2));
      f.text.textContent = label(f, w);
    }
    setClass(f.g, cls);
    shown.push(f);
  }

  /* Back to the layout svg.c wrote, for the frames the last zoom moved. */
  function restore() {
    for (var i = 0; i < shown.length; i++) {
      var f = shown[i];
      f.rect.setAttribute('x', f.x0);
      f.rect.setAttribute('width', f.w0);
      if (f.text) {
        f.text.setAttribute('x', f.tx0);
        f.text.textContent = f.label0;
      }
      setClass(f.g, 'f');
    }
    shown = [];
  }

  /* Index of the first frame of row with start >= s. */
  function lowerBound(row, s) {
    var lo = 0;
    var hi = row.length;
    while (lo < hi) {
      var mid = (lo + hi) >> 1;
      if (row[mid].s < s) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    return lo;
  }

  function unzoom(keepUrl) {
    restore();
    zoomed = null;
    setClass(el.frames, '');
    setClass(el.unzoom, 'hide');
    if (!keepUrl) {
      saveState();
    }
  }

  function zoom(z, keepUrl) {
    index();
    if (z === frames[0]) {
      unzoom(keepUrl);
      return;
    }
    restore();
    zoomed = z;
    var scale = width / z.w;
    var end = z.s + z.w;
    /* ancestors: on each row below, the frame that covers z */
    for (var d = 0; d < z.d; d++) {
      var row = rows[d];
      var i = lowerBound(row, z.s + 1) - 1;
      if (i >= 0 && row[i].s + row[i].w >= end) {
        place(row[i], left, width, 'f z dim');
      }
    }
    /* z and its descendants: on each row from z's up, those inside z */
    for (var r = z.d; r < rows.length; r++) {
      var cells = rows[r];
      for (var j = lowerBound(cells, z.s); j < cells.length && cells[j].s < end; j++) {
        var f = cells[j];
        place(f, left + (f.s - z.s) * scale, f.w * scale, 'f z');
      }
    }
    setClass(el.frames, 'zoomed');
    setClass(el.unzoom, '');
    if (!keepUrl) {
      saveState();
    }
  }

  function clearSearch(keepUrl) {
    for (var i = 0; i < hits.length; i++) {
      hits[i].rect.setAttribute('fill', hits[i].fill);
      hits[i].hit = false;
    }
    hits = [];
    term = '';
    el.matched.textContent = ' ';
    setClass(el.clear, 'hide');
    if (!keepUrl) {
      saveState();
    }
  }

  /* Weight under matching frames; a match nested in another counts once. */
  function matchedWeight(spans) {
    spans.sort(function (a, b) { return a[0] - b[0]; });
    var sum = 0;
    var reach = -Infinity;
    for (var i = 0; i < spans.length; i++) {
      var s = Math.max(spans[i][0], reach);
      if (spans[i][1] > s) {
        sum += spans[i][1] - s;
        reach = spans[i][1];
      }
    }
    return sum;
  }

  function compile(t) {
    var flags = '';
    if (t.slice(0, 4) === '(?i)') {
      flags = 'i';
      t = t.slice(4);
    }
    try {
      return new RegExp(t, flags);
    } catch (e) {
      return null;
    }
  }

  function search(t, keepUrl) {
    if (t === undefined) {
      t = window.prompt('Search frames for a regular expression ' +
                        '(start with (?i) to ignore case)', term);
      if (t === null) {
        return;
      }
    }
    if (t === '') {
      clearSearch(keepUrl);
      return;
    }
    var re = compile(t);
    if (!re) {
      el.matched.textContent = 'Invalid regular expression';
      return;
    }
    index();
    term = t;
    var next = [];
    var spans = [];
    for (var i = 0; i < frames.length; i++) {
      var f = frames[i];
      var hit = re.test(nameOfFrame(f));
      if (hit !== f.hit) {
        parts(f).rect.setAttribute('fill', hit ? MATCH_FILL : f.fill);
        f.hit = hit;
      }
      if (hit) {
        next.push(f);
        spans.push([f.s, f.s + f.w]);
      }
    }
    hits = next;
    var pct = total > 0 ? 100 * matchedWeight(spans) / total : 0;
    el.matched.textContent = 'Matched: ' + pct.toFixed(1) + '%';
    setClass(el.clear, '');
    if (!keepUrl) {
      saveState();
    }
  }

  function saveState() {
    var parts = [];
    if (zoomed) {
      parts.push('zoom=' + zoomed.d + ',' + zoomed.s);
    }
    if (term) {
      parts.push('search=' + encodeURIComponent(term));
    }
    var hash = parts.length ? '#' + parts.join('&') : '';
    if (hash === window.location.hash) {
      return;
    }
    try {
      var url = window.location.href.split('#')[0] + hash;
      window.history.replaceState(null, '', url);
    } catch (e) {
      /* no history API (some viewers): the fragment alone still works */
      window.location.hash = hash;
    }
  }

  function loadState() {
    var h = window.location.hash.replace(/^#/, '');
    var z = null;
    var t = '';
    if (!h && !zoomed && !term) {
      return;
    }
    index();
    h.split('&').forEach(function (kv) {
      var i = kv.indexOf('=');
      var k = i < 0 ? kv : kv.slice(0, i);
      var v = i < 0 ? '' : kv.slice(i + 1);
      if (k === 'zoom') {
        var m = /^(\d+),(\d+)$/.exec(v);
        if (m && Number(m[1]) < rows.length) {
          var row = rows[Number(m[1])];
          var j = lowerBound(row, Number(m[2]));
          if (j < row.length && row[j].s === Number(m[2])) {
            z = row[j];
          }
        }
      } else if (k === 'search') {
        try {
          t = decodeURIComponent(v);
        } catch (e) {
          t = '';
        }
      }
    });
    if (z) {
      zoom(z, true);
    } else if (zoomed) {
      unzoom(true);
    }
    if (t) {
      search(t, true);
    } else if (term) {
      clearSearch(true);
    }
  }

  /* The <g> of a frame from any node inside it. */
  function groupOf(node) {
    while (node && node.parentNode !== el.frames) {
      node = node.parentNode;
    }
    return node;
  }

  /*
   * Frames by row, sorted by start. svg.c writes the root, "all", first;
   * rows count from it, up or down (icicle).
   */
  function index() {
    if (frames) {
      return;
    }
    frames = [];
    var gs = el.frames.children;
    var y0 = 0;
    for (var j = 0; j < gs.length; j++) {
      var g = gs[j];
      var rect = g.children[1];
      if (!rect || rect.localName !== 'rect') {
        continue;
      }
      var f = {
        g: g, rect: null, text: null, fill: null, title: null, name: null,
        chars: null, hit: false, x0: null, w0: null, tx0: null, label0: null,
        s: num(g, 'data-s'),
        w: num(g, 'data-w'),
        d: 0
      };
      var y = num(rect, 'y');
      if (!frames.length) {
        y0 = y;
        left = num(rect, 'x');
        width = num(rect, 'width');
        total = f.w;
      }
      f.d = Math.round(Math.abs(y - y0) / FRAME_HEIGHT);
      while (rows.length <= f.d) {
        rows.push([]);
      }
      rows[f.d].push(f);
      frames.push(f);
      byNode.set(g, f);
    }
    for (var r = 0; r < rows.length; r++) {
      rows[r].sort(function (a, b) { return a.s - b.s; });
    }
  }

  /*
   * A flame graph grows up from its root at the bottom: a tall one (deep
   * but thin towers, such as import's dlopen stacks) would open on empty
   * space above the work. Open on the root and the wide frames over it, or
   * on the frame a URL zooms to; an icicle graph's root is at the top
   * already, and a page the browser scrolled itself (a reload) stays put.
   */
  function reveal() {
    var g = zoomed ? zoomed.g : el.frames.children[0];
    var rect = g && g.children[1];
    if (!rect || rect.localName !== 'rect') {
      return;
    }
    /*
     * From the attributes (svg.c draws one unit a pixel), not from the
     * layout: a graph that fits, such as a wide one of 100k frames, opens
     * without waiting for one.
     */
    var bottom = num(rect, 'y') + num(rect, 'height') +
        (zoomed ? FRAME_HEIGHT : 3 * FRAME_HEIGHT); /* the details line under the root */
    var view = window.innerHeight || document.documentElement.clientHeight;
    if (bottom > view && window.pageYOffset === 0) {
      window.scrollTo(0, bottom - view);
    }
  }

  function init() {
    var ids = ['frames', 'details', 'matched', 'unzoom', 'search', 'clear'];
    for (var i = 0; i < ids.length; i++) {
      el[ids[i]] = document.getElementById(ids[i]);
      if (!el[ids[i]]) {
        return;
      }
    }
    el.frames.addEventListener('mouseover', function (e) {
      var g = groupOf(e.target);
      if (g && g.children[0]) {
        el.details.textContent = g.children[0].textContent;
      }
    });
    el.frames.addEventListener('mouseout', function () {
      el.details.textContent = ' ';
    });
    el.frames.addEventListener('click', function (e) {
      var g = groupOf(e.target);
      if (g) {
        index();
        if (byNode.has(g)) {
          zoom(byNode.get(g));
        }
      }
    });
    el.unzoom.addEventListener('click', function () { unzoom(); });
    el.search.addEventListener('click', function () { search(); });
    el.clear.addEventListener('click', function () { clearSearch(); });
    window.addEventListener('keydown', function (e) {
      var key = e.key;
      if (((e.ctrlKey || e.metaKey) && (key === 'f' || key === 'F')) || key === 'F3') {
        e.preventDefault();
        search();
      } else if (key === 'Escape') {
        if (zoomed) {
          unzoom();
        }
        if (term) {
          clearSearch();
        }
      }
    });
    window.addEventListener('hashchange', loadState);
    loadState();
    reveal();
    /* index while the user looks, so that the first click is quick too */
    if (window.requestIdleCallback) {
      window.requestIdleCallback(index, { timeout: 3000 });
    }
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', init);
  } else {
    init();
  }
})();
