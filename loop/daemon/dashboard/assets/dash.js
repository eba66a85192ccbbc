// theloop dashboard: live row updates over Server-Sent Events. Data from
// the server is only ever written with textContent / setAttribute on known
// attributes: nothing is parsed as HTML.
(function () {
  'use strict';
  var STATES = ['working', 'waiting', 'blocked', 'parked', 'done', 'closed', 'pending', 'awaiting-start', 'queued', 'spawn-failed'];
  var LABEL = { waiting: 'waiting on a human', 'awaiting-start': 'awaiting start', 'spawn-failed': 'spawn failed' };

  function dur(ms) {
    if (ms < 0) ms = 0;
    var s = Math.floor(ms / 1000), m = Math.floor(s / 60), h = Math.floor(m / 60), d = Math.floor(h / 24);
    if (ms < 1000) return ms + 'ms';
    if (s < 60) return s + 's';
    if (m < 60) return m + 'm';
    if (h < 48) return h + 'h' + String(m % 60).padStart(2, '0') + 'm';
    return d + 'd' + String(h % 24).padStart(2, '0') + 'h';
  }
  function tick() {
    document.querySelectorAll('[data-since]').forEach(function (el) {
      var t = Date.parse(el.getAttribute('data-since'));
      if (!isNaN(t)) el.textContent = dur(Date.now() - t);
    });
  }
  setInterval(tick, 15000);

  function field(tr, name) { return tr.querySelector('[data-f="' + name + '"]'); }
  function setText(tr, name, v) { var el = field(tr, name); if (el) el.textContent = v == null ? '' : String(v); }
  function safeURL(u) { return typeof u === 'string' && /^https?:\/\//i.test(u) ? u : ''; }
  function safePage(p) { return typeof p === 'string' && /^\/item\?ref=/.test(p) ? p : '/'; }

  function update(board, r) {
    if (!r || typeof r.ref !== 'string') return;
    var state = STATES.indexOf(r.state) >= 0 ? r.state : 'pending';
    var tr = null;
    board.querySelectorAll('tbody tr').forEach(function (x) { if (x.getAttribute('data-ref') === r.ref) tr = x; });
    if (!tr) {
      var tpl = document.getElementById('row-template');
      if (!tpl) return;
      tr = tpl.content.firstElementChild.cloneNode(true);
      board.tBodies[0].appendChild(tr);
    }
    tr.setAttribute('data-ref', r.ref);
    tr.setAttribute('data-repo', String(r.repo || ''));
    tr.setAttribute('data-state', state);
    tr.className = 'state-' + state;
    setText(tr, 'repo', r.repo);
    var t = field(tr, 'ticket');
    if (t) { t.textContent = r.ref; t.setAttribute('href', safeURL(r.url) || safePage(r.page)); }
    var ti = field(tr, 'title');
    if (ti) { ti.textContent = r.title || '(untitled)'; ti.setAttribute('href', safePage(r.page)); }
    setText(tr, 'node', r.node);
    setText(tr, 'phase', r.phase);
    setText(tr, 'state', LABEL[state] || state);
    setText(tr, 'finding', r.finding);
    var age = field(tr, 'age');
    if (age) { age.setAttribute('data-since', String(r.since || '')); age.textContent = r.age || ''; }
    var live = field(tr, 'live');
    if (live) { live.textContent = r.live ? 'live' : 'dead'; live.className = r.live ? 'up' : 'down'; }
    var at = field(tr, 'attach');
    if (at) { at.setAttribute('data-copy', String(r.attach || '')); at.setAttribute('title', String(r.attach || '')); }
    setText(tr, 'cost', r.cost);
    setText(tr, 'last', r.lastEvent);
    setText(tr, 'ci', r.ci);
    var cf = field(tr, 'cifail');
    if (cf) { cf.textContent = r.ciFail || ''; cf.setAttribute('href', safeURL(r.ciFailUrl) || '#'); }
    var fr = board.getAttribute('data-repo'), fs = board.getAttribute('data-state');
    tr.hidden = (fr && fr !== r.repo) || (fs && fs !== state);
    var count = document.getElementById('count');
    if (count && !fr && !fs) {
      var rows = board.querySelectorAll('tbody tr');
      var shown = 0;
      rows.forEach(function (x) { if (!x.hidden) shown++; });
      count.textContent = shown + ' of ' + rows.length + ' work items';
    }
    tr.setAttribute('data-updated-at', String(Date.now()));
    tr.classList.remove('flash'); void tr.offsetWidth; tr.classList.add('flash');
  }

  // The item page's pull requests, rebuilt from each row event of the item
  // (the same facts the server renders into #pull-requests).
  function updatePRs(prs) {
    var table = document.getElementById('pull-requests');
    var none = document.getElementById('no-prs');
    if (!table || !Array.isArray(prs)) return;
    var body = table.tBodies[0];
    while (body.firstChild) body.removeChild(body.firstChild);
    function td(tr, f, text) {
      var c = document.createElement('td');
      if (f) c.setAttribute('data-f', f);
      if (text != null) c.textContent = String(text);
      tr.appendChild(c);
      return c;
    }
    function check(cell, c) {
      var url = safeURL(c && c.url), e = document.createElement(url ? 'a' : 'span');
      e.className = 'cifail';
      e.setAttribute('data-check', String(c && c.name || ''));
      if (url) { e.setAttribute('href', url); e.setAttribute('rel', 'noopener noreferrer'); }
      e.textContent = String(c && c.name || '');
      cell.appendChild(e);
    }
    prs.forEach(function (p) {
      if (!p || typeof p.number !== 'number') return;
      var tr = document.createElement('tr');
      tr.setAttribute('data-pr', String(p.number));
      var first = td(tr, '', null), url = safeURL(p.url);
      if (url) {
        var a = document.createElement('a');
        a.setAttribute('href', url); a.setAttribute('rel', 'noopener noreferrer');
        a.textContent = '#' + p.number;
        first.appendChild(a);
      } else first.textContent = '#' + p.number;
      td(tr, 'pr-state', p.state || 'unknown');
      var rv = td(tr, 'pr-review', p.review || 'none yet');
      rv.className = 'review-' + String(p.review || '').replace(/[^a-z]/g, '_');
      var checks = td(tr, 'pr-checks', (p.passing | 0) + ' passing');
      if (p.failing > 0) {
        checks.appendChild(document.createTextNode(', '));
        var f = document.createElement('span'); f.className = 'cifail'; f.textContent = (p.failing | 0) + ' failing';
        checks.appendChild(f);
      }
      if (p.pending > 0) checks.appendChild(document.createTextNode(', ' + (p.pending | 0) + ' pending'));
      var failing = td(tr, 'pr-failing', null);
      (Array.isArray(p.failed) ? p.failed : []).forEach(function (c, i) {
        if (i) failing.appendChild(document.createTextNode(', '));
        check(failing, c);
      });
      var waiting = Array.isArray(p.waiting) ? p.waiting.filter(function (n) { return typeof n === 'string'; }) : [];
      if (waiting.length) {
        failing.appendChild(document.createTextNode((failing.childNodes.length ? '; ' : '') + 'pending: ' + waiting.join(', ')));
      }
      body.appendChild(tr);
    });
    table.hidden = body.childNodes.length === 0;
    if (none) none.hidden = !table.hidden;
    table.setAttribute('data-updated-at', String(Date.now()));
  }

  // Zoom for the item page's graph: in, out and fit, the current node
  // scrolled into the middle of the view after each change. The scale is
  // kept for the tab (the page reloads itself when the item moves on).
  function graphZoom() {
    var view = document.getElementById('graph-view'), svg = document.getElementById('graph');
    var bar = document.getElementById('graph-zoom'), level = document.getElementById('zoom-level');
    if (!view || !svg || !bar || !level) return;
    var W = parseFloat(svg.getAttribute('width')), H = parseFloat(svg.getAttribute('height'));
    if (!(W > 0 && H > 0)) return;
    bar.hidden = false;
    var scale = 1, fitted = true, KEY = 'theloop.graph-zoom';
    function fitScale() {
      var availW = view.parentNode ? view.parentNode.clientWidth : view.clientWidth;
      var availH = Math.max(200, window.innerHeight * 0.85 - 4);
      return Math.min(1, availW / W, availH / H);
    }
    function centreCurrent() {
      var cur = svg.querySelector('g[data-mark="current"] rect') || svg.querySelector('g[data-mark="blocked"] rect');
      if (!cur) return;
      var x = parseFloat(cur.getAttribute('x')) + parseFloat(cur.getAttribute('width')) / 2;
      var y = parseFloat(cur.getAttribute('y')) + parseFloat(cur.getAttribute('height')) / 2;
      view.scrollLeft = Math.max(0, x * scale - view.clientWidth / 2);
      view.scrollTop = Math.max(0, y * scale - view.clientHeight / 2);
    }
    function apply(s, fit) {
      fitted = !!fit;
      scale = Math.max(0.1, Math.min(4, s));
      svg.style.width = (W * scale) + 'px';
      svg.style.height = (H * scale) + 'px';
      view.classList.toggle('zoomed', !fitted);
      view.setAttribute('data-scale', scale.toFixed(3));
      // The readout is the scale, fitted or not: "fit" is a button, not a size.
      level.textContent = Math.round(scale * 100) + '%';
      level.setAttribute('data-fitted', fitted ? 'yes' : 'no');
      try { sessionStorage.setItem(KEY, fitted ? 'fit' : String(scale)); } catch (e) { /* storage off */ }
      centreCurrent();
    }
    document.getElementById('zoom-in').addEventListener('click', function () { apply(scale * 1.25, false); });
    document.getElementById('zoom-out').addEventListener('click', function () { apply(scale / 1.25, false); });
    document.getElementById('zoom-fit').addEventListener('click', function () { apply(fitScale(), true); });
    document.addEventListener('keydown', function (ev) {
      var t = ev.target && ev.target.tagName;
      if (t === 'TEXTAREA' || t === 'INPUT' || ev.ctrlKey || ev.metaKey || ev.altKey) return;
      if (ev.key === '+' || ev.key === '=') apply(scale * 1.25, false);
      else if (ev.key === '-') apply(scale / 1.25, false);
      else if (ev.key === '0') apply(fitScale(), true);
    });
    window.addEventListener('resize', function () { if (fitted) apply(fitScale(), true); });
    var kept = null;
    try { kept = sessionStorage.getItem(KEY); } catch (e) { /* storage off */ }
    var k = parseFloat(kept);
    if (kept && kept !== 'fit' && k > 0) apply(k, false); else apply(fitScale(), true);
  }

  // The agent's pane: frames of changed rows, each row a list of
  // [class, text] spans written with textContent (ansi.go renders them).
  function livePane(ref) {
    var pane = document.getElementById('pane');
    if (!pane || !ref) return;
    var state = document.getElementById('pane-state');
    var es = new EventSource('/item/pane?ref=' + encodeURIComponent(ref));
    var frames = 0;
    es.onopen = function () { if (state) state.textContent = 'live'; };
    es.onerror = function () { if (state) state.textContent = 'reconnecting…'; };
    es.addEventListener('gone', function () { if (state) state.textContent = 'session ended'; es.close(); });
    es.addEventListener('screen', function (ev) {
      var f;
      try { f = JSON.parse(ev.data); } catch (e) { return; }
      if (!f || typeof f.rows !== 'number' || f.rows < 0 || f.rows > 500) return;
      var atBottom = pane.scrollTop + pane.clientHeight >= pane.scrollHeight - 4;
      while (pane.childNodes.length > f.rows) pane.removeChild(pane.lastChild);
      while (pane.childNodes.length < f.rows) { var d = document.createElement('div'); d.className = 'ln'; pane.appendChild(d); }
      Object.keys(f.set || {}).forEach(function (k) {
        var i = parseInt(k, 10), line = pane.childNodes[i], spans = f.set[k];
        if (!line || !Array.isArray(spans)) return;
        line.textContent = '';
        spans.forEach(function (sp) {
          if (!Array.isArray(sp) || typeof sp[1] !== 'string') return;
          var e = document.createElement('span');
          if (typeof sp[0] === 'string' && /^[a-z0-9 ]*$/.test(sp[0])) e.className = sp[0];
          e.textContent = sp[1];
          line.appendChild(e);
        });
      });
      frames++;
      pane.setAttribute('data-frames', String(frames));
      pane.setAttribute('data-frame-at', String(Date.now()));
      if (atBottom) pane.scrollTop = pane.scrollHeight;
    });
  }

  // "Needs you": rebuilt from each list the server sends.
  function needsYou(l) {
    var badge = document.getElementById('needs-badge');
    var table = document.getElementById('needs-you');
    var tpl = document.getElementById('attention-template');
    if (!badge || !table || !tpl) return;
    badge.textContent = String(l.count);
    badge.setAttribute('data-count', String(l.count));
    document.title = (l.count > 0 ? '(' + l.count + ') ' : '') + 'Board · theloop';
    var none = document.getElementById('needs-none');
    if (none) none.hidden = l.count > 0;
    var more = document.getElementById('needs-more'), mc = document.getElementById('needs-more-count');
    if (more && mc) { more.hidden = !(l.more > 0); mc.textContent = String(l.more || 0); }
    var body = table.tBodies[0];
    while (body.firstChild) body.removeChild(body.firstChild);
    (Array.isArray(l.rows) ? l.rows : []).forEach(function (r) {
      if (!r || typeof r.ref !== 'string') return;
      var tr = tpl.content.firstElementChild.cloneNode(true);
      var kind = /^[a-z-]+$/.test(r.kind) ? r.kind : 'other';
      tr.className = 'needs-' + kind;
      tr.setAttribute('data-needs-ref', r.ref);
      tr.setAttribute('data-kind', kind);
      var age = tr.querySelector('[data-f=age]');
      age.setAttribute('data-since', String(r.since || '')); age.textContent = r.age || '';
      tr.querySelector('[data-f=label]').textContent = r.label || kind;
      var a = tr.querySelector('[data-f=item]');
      a.textContent = r.ref; a.setAttribute('href', safePage(r.page));
      tr.querySelector('[data-f=title]').textContent = r.title || '';
      tr.querySelector('[data-f=why]').textContent = r.why || '';
      body.appendChild(tr);
    });
  }

  // The item moved on (its node or state changed): the page reloads to
  // show it — unless the operator is writing a reply, whose draft a reload
  // would throw away; then the page says it is behind and keeps the draft
  // (sending it loads the new page). A reload keeps the notice of the
  // operator's last reply (replied, reply-error), which is what they did.
  function itemMoved(r) {
    var draft = document.getElementById('reply-message');
    if (draft && (draft.value !== '' || document.activeElement === draft)) {
      document.body.setAttribute('data-stale', 'yes');
      var note = document.getElementById('item-moved');
      if (!note) {
        note = document.createElement('p');
        note.id = 'item-moved';
        note.className = 'notice';
        var form = document.getElementById('reply-form');
        form.parentNode.insertBefore(note, form);
      }
      note.textContent = 'This item moved on while you were writing (now ' + (r.node || 'no node') + ', ' + (r.state || '') + '); your draft is kept — send it, or reload the page to see where it stands.';
      return;
    }
    var was = new URLSearchParams(window.location.search), q = new URLSearchParams();
    q.set('ref', r.ref);
    ['replied', 'reply-error'].forEach(function (k) { if (was.has(k)) q.set(k, was.get(k)); });
    // No fragment: a URL that differs from this one only by its fragment
    // (after a reply, #pane-section) would scroll, not reload.
    window.location.replace(window.location.pathname + '?' + q.toString());
  }

  function start() {
    var page = document.body.getAttribute('data-page');
    var board = document.getElementById('board');
    // Copy buttons, also on rows added live: one listener on the document.
    document.addEventListener('click', function (ev) {
      var b = ev.target && ev.target.closest ? ev.target.closest('button.copy') : null;
      if (!b) return;
      var text = b.getAttribute('data-copy') || '';
      var done = function () { b.setAttribute('data-copied', 'yes'); b.textContent = 'copied'; setTimeout(function () { b.textContent = b.classList.contains('attach') ? 'copy attach' : 'copy'; }, 1500); };
      if (navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(text).then(done, function () { b.setAttribute('data-copied', 'refused'); });
    });
    if (page === 'item') graphZoom();
    if (!window.EventSource || (page !== 'board' && page !== 'item')) return;
    if (page === 'item') livePane(document.body.getAttribute('data-ref'));
    var es = new EventSource('/events');
    var dot = document.getElementById('live');
    es.onopen = function () { if (dot) dot.classList.add('on'); document.body.setAttribute('data-live', 'on'); };
    es.onerror = function () { if (dot) dot.classList.remove('on'); document.body.setAttribute('data-live', 'off'); };
    es.addEventListener('attention', function (ev) {
      var l;
      try { l = JSON.parse(ev.data); } catch (e) { return; }
      if (l && typeof l.count === 'number') needsYou(l);
    });
    es.addEventListener('row', function (ev) {
      var r;
      try { r = JSON.parse(ev.data); } catch (e) { return; }
      if (board) update(board, r);
      if (page === 'item' && r && r.ref === document.body.getAttribute('data-ref')) {
        if (r.node !== document.body.getAttribute('data-node') || r.state !== document.body.getAttribute('data-state')) {
          itemMoved(r);
          return;
        }
        updatePRs(r.prs || []);
      }
    });
  }
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start); else start();
})();
