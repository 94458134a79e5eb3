// Live updates for the Federation Autoscaler pages.
// The server pushes HTML fragments over a websocket; every top-level element
// of a message that has an id replaces the element with the same id. No JSON,
// no client-side templating. Reconnects with exponential backoff and shows
// the connection state in #conn-state.
(function () {
  'use strict';
  var path = document.body.getAttribute('data-ws');
  var state = document.getElementById('conn-state');
  if (!path || !state) { return; }
  var csrfMeta = document.querySelector('meta[name="csrf-token"]');
  var csrf = csrfMeta ? csrfMeta.getAttribute('content') : '';
  var minDelay = 500, maxDelay = 10000, delay = minDelay;

  function setState(s, text) {
    state.setAttribute('data-state', s);
    state.textContent = text;
  }

  function swap(html) {
    var t = document.createElement('template');
    t.innerHTML = html;
    var focusedId = document.activeElement && document.activeElement.id;
    var nodes = Array.prototype.slice.call(t.content.children);
    nodes.forEach(function (el) {
      if (!el.id) { return; }
      var old = document.getElementById(el.id);
      if (!old) { return; }
      // Forms rendered for everyone carry an empty CSRF field: fill in ours.
      if (csrf) {
        el.querySelectorAll('input[name="_csrf"]').forEach(function (i) { i.value = csrf; });
      }
      // Keep the explanations the user opened open.
      old.querySelectorAll('details[id][open]').forEach(function (d) {
        var n = el.querySelector('#' + CSS.escape(d.id));
        if (n) { n.open = true; }
      });
      old.replaceWith(el);
    });
    applyFilters();
    if (focusedId) {
      var f = document.getElementById(focusedId);
      if (f && f !== document.activeElement) { f.focus(); }
    }
    document.body.setAttribute('data-updated', String(Date.now()));
  }

  function connect() {
    var proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    var ws = new WebSocket(proto + '//' + location.host + path);
    ws.onopen = function () { delay = minDelay; setState('live', 'live'); };
    ws.onmessage = function (ev) { if (typeof ev.data === 'string') { swap(ev.data); } };
    ws.onclose = function () {
      setState('reconnecting', 'reconnecting\u2026');
      var wait = delay + Math.floor(Math.random() * delay * 0.3);
      delay = Math.min(delay * 2, maxDelay);
      setTimeout(connect, wait);
    };
    ws.onerror = function () { /* onclose follows */ };
  }

  // Show the value of range inputs next to them (<output id="<id>-out">).
  document.addEventListener('input', function (ev) {
    var el = ev.target;
    if (el && el.type === 'range' && el.id) {
      var out = document.getElementById(el.id + '-out');
      if (out) { out.textContent = el.value; }
    }
  });

  // Filters: <input data-filter-for="<list id>" data-filter-attr="<a>">
  // hides the list's rows (tr[data-filterable]) whose data-<a> differs
  // from the input's non-empty value.
  function applyFilters() {
    var groups = {};
    document.querySelectorAll('input[data-filter-for]').forEach(function (i) {
      var id = i.getAttribute('data-filter-for');
      (groups[id] = groups[id] || []).push(i);
    });
    Object.keys(groups).forEach(function (id) {
      var box = document.getElementById(id);
      if (!box) { return; }
      box.querySelectorAll('tr[data-filterable]').forEach(function (tr) {
        tr.hidden = !groups[id].every(function (i) {
          var v = i.value.trim();
          return !v || tr.getAttribute('data-' + i.getAttribute('data-filter-attr')) === v;
        });
      });
    });
  }
  document.addEventListener('input', function (ev) {
    if (ev.target && ev.target.hasAttribute && ev.target.hasAttribute('data-filter-for')) { applyFilters(); }
  });

  setState('connecting', 'connecting\u2026');
  connect();
})();
