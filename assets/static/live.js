// Live updates for the Federation Autoscaler pages.
// The server pushes HTML fragments over a websocket; every top-level element
// of a message that has an id replaces the element with the same id, and
// every row of a top-level <table data-patch> the row with its id. No JSON,
// no client-side templating. Reconnects with exponential backoff and shows
// the connection state in #conn-state.
//
// Ages (<span data-at="<Unix ms>">) are counted here, every second,
// against the broker's clock: the live summary's data-now is its render's
// moment in Unix ms. A publication carries moments, never ages, so a row
// whose values did not change is not sent again as time passes.
//
// Sessions that end are explained, not shown as live: the server closes the
// socket with code 4001 at a logout or expiry, and before every reconnect
// and every form the script asks GET <data-session> (204 alive, 401 ended).
// An ended session stops the updates, says so (#session-ended) and links to
// the login page, which returns here; a form sent after the end is kept in
// sessionStorage and filled in again after the login (never re-sent).
(function () {
  'use strict';
  var body = document.body;
  var path = body.getAttribute('data-ws');
  var sessionPath = body.getAttribute('data-session');
  var loginPath = body.getAttribute('data-login');
  var state = document.getElementById('conn-state');
  var csrfMeta = document.querySelector('meta[name="csrf-token"]');
  var csrf = csrfMeta ? csrfMeta.getAttribute('content') : '';
  var minDelay = 500, maxDelay = 10000, delay = minDelay;
  var ended = false, lastUpdate = new Date();
  var resumeKey = 'fa-resume';
  var SESSION_ENDED = 4001;

  function clock(d) {
    return d.toTimeString().slice(0, 8);
  }

  function setState(s, text) {
    if (!state) { return; }
    state.setAttribute('data-state', s);
    state.textContent = text;
  }

  function notice(kind, text) {
    var n = document.getElementById('client-notice');
    if (!n) { return; }
    n.className = 'alert ' + kind;
    n.setAttribute('role', kind === 'error' ? 'alert' : 'status');
    n.textContent = text;
    n.hidden = false;
  }

  // here is the page to come back to after a login (a same-origin path).
  function here() {
    return location.pathname + location.search;
  }

  function loginURL() {
    return loginPath + '?next=' + encodeURIComponent(here()) + '&ended=1';
  }

  // sessionAlive resolves true (204), false (401) or null (no answer).
  function sessionAlive() {
    if (!sessionPath) { return Promise.resolve(true); }
    return fetch(sessionPath, {credentials: 'same-origin', cache: 'no-store'}).then(function (r) {
      if (r.status === 401) { return false; }
      return r.ok ? true : null;
    }, function () { return null; });
  }

  function sessionEnded() {
    if (ended) { return; }
    ended = true;
    setState('ended', 'session ended');
    body.setAttribute('data-stale', 'true');
    var box = document.getElementById('session-ended');
    if (!box) { return; }
    var since = box.querySelector('[data-testid="stale-since"]');
    if (since) { since.textContent = clock(lastUpdate); }
    var a = box.querySelector('a');
    if (a && loginPath) { a.setAttribute('href', loginURL()); }
    box.hidden = false;
  }

  var skew = 0; // the broker's clock minus this browser's, in ms

  // setClock takes the broker's clock from root's data-now, if it has one.
  function setClock(root) {
    var el = root.querySelector('[data-now]');
    var n = el ? Number(el.getAttribute('data-now')) : NaN;
    if (n > 0) { skew = n - Date.now(); }
  }

  // agoText matches the server's wording of an age (web/format.go ago).
  function agoText(ms) {
    if (ms < 0) { return 'just now'; }
    var s = Math.floor(ms / 1000);
    if (s < 60) { return s + 's ago'; }
    if (s < 3600) { return Math.floor(s / 60) + 'm ago'; }
    if (s < 48 * 3600) { return Math.floor(s / 3600) + 'h ago'; }
    return Math.floor(s / 86400) + 'd ago';
  }

  function tickAges() {
    var now = Date.now() + skew;
    document.querySelectorAll('[data-at]').forEach(function (el) {
      var at = Number(el.getAttribute('data-at'));
      if (!(at > 0)) { return; }
      var text = agoText(now - at);
      if (el.textContent !== text) { el.textContent = text; }
    });
  }

  function swap(html) {
    var t = document.createElement('template');
    t.innerHTML = html;
    setClock(t.content);
    var focusedId = document.activeElement && document.activeElement.id;
    var nodes = Array.prototype.slice.call(t.content.children);
    nodes.forEach(function (el) {
      // A patch carries table rows, each replacing the row with its id.
      if (el.hasAttribute('data-patch')) {
        el.querySelectorAll('tr[id]').forEach(function (row) {
          var was = document.getElementById(row.id);
          if (was) { was.replaceWith(row); }
        });
        return;
      }
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
    tickAges();
    if (focusedId) {
      var f = document.getElementById(focusedId);
      if (f && f !== document.activeElement) { f.focus(); }
    }
    lastUpdate = new Date();
    body.removeAttribute('data-stale');
    body.setAttribute('data-updated', String(Date.now()));
  }

  function retry() {
    if (ended) { return; }
    var wait = delay + Math.floor(Math.random() * delay * 0.3);
    delay = Math.min(delay * 2, maxDelay);
    setTimeout(function () {
      sessionAlive().then(function (alive) {
        if (alive === false) { sessionEnded(); return; }
        if (alive === null) { retry(); return; } // the console is not answering yet
        connect();
      });
    }, wait);
  }

  function connect() {
    var proto = location.protocol === 'https:' ? 'wss:' : 'ws:';
    var ws = new WebSocket(proto + '//' + location.host + path);
    ws.onopen = function () { delay = minDelay; setState('live', 'live'); };
    ws.onmessage = function (ev) { if (typeof ev.data === 'string') { swap(ev.data); } };
    ws.onclose = function (ev) {
      if (ev.code === SESSION_ENDED) { sessionEnded(); return; }
      if (ended) { return; }
      body.setAttribute('data-stale', 'true');
      setState('reconnecting', 'reconnecting\u2026 (shown: ' + clock(lastUpdate) + ')');
      retry();
    };
    ws.onerror = function () { /* onclose follows */ };
  }

  // A form sent after the session ended would land on the login page and
  // lose what was typed: keep it, log in, come back and fill it in again.
  function keep(form) {
    var fields = [];
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.name === '_csrf' || el.type === 'password' || el.type === 'hidden' ||
          el.type === 'submit' || el.type === 'button') { return; }
      if ((el.type === 'checkbox' || el.type === 'radio') && !el.checked) { return; }
      fields.push([el.name, el.value]);
    });
    if (fields.length === 0) { return; }
    try {
      sessionStorage.setItem(resumeKey, JSON.stringify({
        page: location.pathname, action: form.getAttribute('action'), fields: fields
      }));
    } catch (e) { /* storage full or disabled: the login still brings the user back */ }
  }

  function restore() {
    var raw;
    try { raw = sessionStorage.getItem(resumeKey); } catch (e) { return; }
    if (!raw) { return; }
    var saved;
    try { saved = JSON.parse(raw); } catch (e) { saved = null; }
    if (!saved || saved.page !== location.pathname) { return; }
    sessionStorage.removeItem(resumeKey);
    var form = null;
    document.querySelectorAll('form[method="post"]').forEach(function (f) {
      if (!form && f.getAttribute('action') === saved.action) { form = f; }
    });
    if (!form) { return; }
    var first = null;
    var used = {};
    Array.prototype.forEach.call(form.elements, function (el) {
      if (!el.name || el.name === '_csrf' || el.type === 'password' || el.type === 'hidden' ||
          el.type === 'submit' || el.type === 'button') { return; }
      var values = saved.fields.filter(function (f) { return f[0] === el.name; }).map(function (f) { return f[1]; });
      if (el.type === 'checkbox' || el.type === 'radio') {
        el.checked = values.indexOf(el.value) >= 0;
      } else if (values.length > 0) {
        var i = used[el.name] || 0;
        el.value = values[Math.min(i, values.length - 1)];
        used[el.name] = i + 1;
      } else {
        return;
      }
      el.dispatchEvent(new Event('input', {bubbles: true}));
      if (!first) { first = el; }
    });
    form.setAttribute('data-restored', 'true');
    notice('ok', 'Your session had ended before this form was sent, so nothing was changed. ' +
      'What you entered is filled in again: check it and send it once more.');
    if (first) { first.focus(); }
  }

  // sendable copies what a submit of form by submitter sends (its fields,
  // the submitter's name and value, where to) into a new hidden form, taken
  // when the user sends it. The session check that comes first is a round
  // trip, and a live update meanwhile may replace the form (a Release
  // button's row is re-rendered with its table): a form no longer in the
  // page cannot be sent, so the copy is. The pages' forms hold no files.
  function sendable(form, submitter) {
    var copy = document.createElement('form');
    copy.method = 'post';
    copy.action = submitter && submitter.hasAttribute('formaction') ? submitter.formAction : form.action;
    copy.enctype = form.enctype;
    copy.hidden = true;
    var data = new FormData(form);
    if (submitter && submitter.name) { data.append(submitter.name, submitter.value); }
    data.forEach(function (value, name) {
      if (typeof value !== 'string') { return; }
      var i = document.createElement('input');
      i.type = 'hidden';
      i.name = name;
      i.value = value;
      copy.appendChild(i);
    });
    return copy;
  }

  document.addEventListener('submit', function (ev) {
    var form = ev.target;
    if (!sessionPath || !loginPath || !form || (form.getAttribute('method') || '').toLowerCase() !== 'post') { return; }
    ev.preventDefault();
    var copy = sendable(form, ev.submitter || null);
    var go = function () {
      // submit() fires no submit event: the copy is not checked again.
      document.body.appendChild(copy);
      copy.submit();
    };
    if (ended) { keep(form); location.assign(loginURL()); return; }
    sessionAlive().then(function (alive) {
      if (alive === false) { sessionEnded(); keep(form); location.assign(loginURL()); return; }
      if (alive === null) {
        notice('error', 'The console is not answering; nothing was sent. Your input is still here: send it again in a moment.');
        return;
      }
      go();
    });
  }, true);

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

  restore();
  setClock(document);
  tickAges();
  setInterval(tickAges, 1000);
  if (!path || !state) { return; }
  setState('connecting', 'connecting\u2026');
  connect();
})();
