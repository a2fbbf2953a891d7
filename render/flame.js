/* SPDX-License-Identifier: MIT */
/*
 * Interaction for dlflame's SVG flame graphs; render/svg.c embeds this file.
 *
 * Each frame is <g class="f" data-s data-w> holding <title>, <rect>, <text>.
 * data-s and data-w are its start and width in weight units, so zooming and
 * "Matched" are exact rather than derived from rounded pixels. Names are read
 * from the <title> text and only ever written back as textContent or tested
 * with a RegExp: nothing from the file is evaluated or parsed as markup.
 */
(function () {
  'use strict';

  var FONT_SIZE = 12;
  var FONT_WIDTH = 0.59;
  var MATCH_FILL = 'rgb(230,0,230)';

  var frames = [];
  var byNode = new Map();
  var left = 0;
  var width = 0;
  var total = 0;
  var zoomed = null;
  var searching = false;
  var lastTerm = '';
  var el = {};

  function num(node, name) {
    var v = Number(node.getAttribute(name));
    return isFinite(v) ? v : 0;
  }

  /* The title is "NAME (N samples, P%)"; the name is all before the last " (". */
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

  function place(f, x, w, extra) {
    f.rect.setAttribute('x', x.toFixed(2));
    f.rect.setAttribute('width', w.toFixed(2));
    if (f.text) {
      f.text.setAttribute('x', (x + 3).toFixed(2));
      f.text.textContent = label(f, w);
    }
    setClass(f.g, extra ? 'f ' + extra : 'f');
  }

  function unzoom() {
    zoomed = null;
    for (var i = 0; i < frames.length; i++) {
      place(frames[i], frames[i].x, frames[i].width, '');
    }
    setClass(el.unzoom, 'hide');
  }

  /*
   * Intervals of a tree nest or are disjoint: a frame above z (smaller y)
   * inside z's interval is a descendant, one below it that covers z's
   * interval is an ancestor, anything else is hidden.
   */
  function zoom(z) {
    if (z === frames[0]) {
      unzoom();
      return;
    }
    zoomed = z;
    var scale = width / z.w;
    var end = z.s + z.w;
    for (var i = 0; i < frames.length; i++) {
      var f = frames[i];
      if (f === z || (f.y < z.y && f.s >= z.s && f.s + f.w <= end)) {
        place(f, left + (f.s - z.s) * scale, f.w * scale, '');
      } else if (f.y > z.y && f.s <= z.s && f.s + f.w >= end) {
        place(f, left, width, 'dim');
      } else {
        setClass(f.g, 'f hide');
      }
    }
    setClass(el.unzoom, '');
  }

  function clearSearch() {
    searching = false;
    for (var i = 0; i < frames.length; i++) {
      frames[i].rect.setAttribute('fill', frames[i].fill);
    }
    el.matched.textContent = ' ';
    setClass(el.clear, 'hide');
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

  function search(term) {
    if (term === undefined) {
      term = window.prompt('Search frames for a regular expression ' +
                           '(start with (?i) to ignore case)', lastTerm);
      if (term === null) {
        return;
      }
    }
    if (term === '') {
      clearSearch();
      return;
    }
    var flags = '';
    var source = term;
    if (source.slice(0, 4) === '(?i)') {
      flags = 'i';
      source = source.slice(4);
    }
    var re;
    try {
      re = new RegExp(source, flags);
    } catch (e) {
      el.matched.textContent = 'Invalid regular expression';
      return;
    }
    lastTerm = term;
    searching = true;
    var spans = [];
    for (var i = 0; i < frames.length; i++) {
      var f = frames[i];
      if (re.test(f.name)) {
        f.rect.setAttribute('fill', MATCH_FILL);
        spans.push([f.s, f.s + f.w]);
      } else {
        f.rect.setAttribute('fill', f.fill);
      }
    }
    var pct = total > 0 ? 100 * matchedWeight(spans) / total : 0;
    el.matched.textContent = 'Matched: ' + pct.toFixed(1) + '%';
    setClass(el.clear, '');
  }

  function frameOf(node) {
    while (node && !byNode.has(node)) {
      node = node.parentNode;
    }
    return node ? byNode.get(node) : null;
  }

  function init() {
    var ids = ['frames', 'details', 'matched', 'unzoom', 'search', 'clear'];
    for (var i = 0; i < ids.length; i++) {
      el[ids[i]] = document.getElementById(ids[i]);
      if (!el[ids[i]]) {
        return;
      }
    }
    var gs = el.frames.getElementsByTagName('g');
    for (var j = 0; j < gs.length; j++) {
      var g = gs[j];
      var title = g.getElementsByTagName('title')[0];
      var rect = g.getElementsByTagName('rect')[0];
      if (!title || !rect) {
        continue;
      }
      var f = {
        g: g,
        rect: rect,
        text: g.getElementsByTagName('text')[0] || null,
        title: title.textContent,
        name: nameOf(title.textContent),
        chars: null,
        s: num(g, 'data-s'),
        w: num(g, 'data-w'),
        x: num(rect, 'x'),
        y: num(rect, 'y'),
        width: num(rect, 'width'),
        fill: rect.getAttribute('fill')
      };
      frames.push(f);
      byNode.set(g, f);
    }
    if (frames.length) {
      /* svg.c writes frames in preorder: the first is the root, "all" */
      left = frames[0].x;
      width = frames[0].width;
      total = frames[0].w;
    }

    el.frames.addEventListener('mouseover', function (e) {
      var f = frameOf(e.target);
      if (f) {
        el.details.textContent = f.title;
      }
    });
    el.frames.addEventListener('mouseout', function () {
      el.details.textContent = ' ';
    });
    el.frames.addEventListener('click', function (e) {
      var f = frameOf(e.target);
      if (f) {
        zoom(f);
      }
    });
    el.unzoom.addEventListener('click', unzoom);
    el.search.addEventListener('click', function () { search(); });
    el.clear.addEventListener('click', clearSearch);
    window.addEventListener('keydown', function (e) {
      var key = e.key;
      if (((e.ctrlKey || e.metaKey) && (key === 'f' || key === 'F')) || key === 'F3') {
        e.preventDefault();
        search();
      } else if (key === 'Escape') {
        if (zoomed) {
          unzoom();
        }
        if (searching) {
          clearSearch();
        }
      }
    });
  }

  if (document.readyState === 'loading') {
    document.addEventListener('DOMContentLoaded', init);
  } else {
    init();
  }
})();
