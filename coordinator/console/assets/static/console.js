// capgate console: the live timeline, the grid refresh, and the actions
// with confirmation. Plain JavaScript, loaded from the binary; the page
// works without it except for live updates and actions.
'use strict';

(() => {
  const csrf = document.querySelector('meta[name="csrf-token"]')?.content || '';
  const enc = encodeURIComponent;
  const body = document.body;
  const groupName = body.dataset.group || '';
  const maxLines = 300;
  // Events after which the group's members and grid are read again.
  const gridKinds = new Set(['join', 'leave', 'fence', 'ack', 'commit', 'release', 'grant', 'unowned',
    'revoked', 'member_revoked', 'lease', 'config', 'qos']);

  // ---- a tab in the background ----------------------------------------
  // A hidden page (another tab in front, the window minimized) re-read as
  // often as a visible one: the group's grid every 5 s and after every
  // event that changes it, the groups and overrides pages every 5 s, the
  // gateways page every second — for nobody, from every forgotten tab.
  // Now a re-read that falls due while the page is hidden is not made:
  // the page notes it and makes it once, at once, when it is shown again
  // (the Page Visibility API). The event stream stays open, so the
  // timeline is current when the page comes back.
  const missed = new Set();

  function whenShown(read) {
    if (document.hidden) missed.add(read); else read();
  }

  document.addEventListener('visibilitychange', () => {
    if (document.hidden) return;
    const due = [...missed];
    missed.clear();
    for (const read of due) read();
  });

  // ---- live timeline -------------------------------------------------
  let shown = Number(body.dataset.last || 0);

  function clock(at) {
    return new Date(at).toISOString().slice(11, 23);
  }

  function eventLine(e) {
    const li = document.createElement('li');
    li.className = 'ev fresh k-' + e.kind;
    li.dataset.kind = e.kind;
    li.dataset.id = e.id;
    const parts = [['time', clock(e.at)], ['span', e.kind, 'kind'], ['span', '', 'grp'], ['span', e.text, 'text']];
    if (e.moved) parts.push(['span', (e.pause_ms || 0) + ' ms', 'pause']);
    for (const [tag, text, cls] of parts) {
      const el = document.createElement(tag);
      el.textContent = text;
      if (cls) el.className = cls;
      li.appendChild(el);
    }
    // The group, on the Timeline page (console.css hides it on a group's).
    if (e.group) {
      const a = document.createElement('a');
      a.href = '/console/groups/' + enc(e.group);
      a.textContent = e.group;
      li.querySelector('.grp').appendChild(a);
    }
    return li;
  }

  function addEvent(e) {
    if (e.id <= shown) return;
    shown = e.id;
    const list = document.getElementById('timeline');
    if (!list) return;
    list.insertBefore(eventLine(e), list.firstChild);
    while (list.children.length > maxLines) list.removeChild(list.lastChild);
  }

  function setLive(state, text) {
    const el = document.getElementById('live');
    if (!el) return;
    el.hidden = false;
    el.className = 'live ' + state;
    el.textContent = text;
  }

  // A refused stream (429: this session's share of streams is taken by
  // its other tabs; 503: every stream is taken; or the coordinator is
  // unreachable) is not retried by EventSource: it closes. The page says
  // so and opens a new one with backoff, from the last event it shows.
  const retryFirstMs = 1000, retryMaxMs = 30000;
  let retryMs = retryFirstMs, retryTimer = 0;

  function startStream() {
    if (!body.dataset.stream) return;
    const q = (groupName ? 'group=' + enc(groupName) + '&' : '') + 'after=' + shown;
    const es = new EventSource('/console/events?' + q);
    es.onopen = () => {
      retryMs = retryFirstMs;
      setLive('on', 'live');
      readOK();
    };
    es.onerror = () => {
      if (es.readyState !== EventSource.CLOSED) {
        setLive('off', 'reconnecting'); // the browser reconnects by itself
        unread(); // the stream's own end every minute: still the leader, nothing said
        return;
      }
      es.close();
      unread(); // a standby's 421, a stopped coordinator; or the shares (429, 503): then as below
      const wait = Math.round(retryMs * (0.8 + 0.4 * Math.random()));
      retryMs = Math.min(retryMs * 2, retryMaxMs);
      setLive('off', 'live updates paused — retrying in ' + Math.ceil(wait / 1000) + ' s');
      clearTimeout(retryTimer);
      retryTimer = setTimeout(() => {
        setLive('off', 'live updates paused — retrying now');
        startStream();
        if (groupName) whenShown(refresh); // events missed are replayed; the grid is read anyway
      }, wait);
    };
    es.onmessage = (m) => {
      const e = JSON.parse(m.data);
      addEvent(e);
      if (groupName && gridKinds.has(e.kind)) whenShown(refresh);
    };
    es.addEventListener('lagged', () => {
      setLive('off', 'some events skipped');
      if (groupName) whenShown(refresh);
    });
  }

  // ---- keeping the keyboard's place across a re-read -------------------
  // A re-read replaces the nodes of the grid, the members table or the
  // page's main part (every commit, every 5 s; the gateways page every
  // second): the element that had focus would go with them and the
  // keyboard's place fall back to the top of the page. It is found again
  // in the new content by what it is (its id, its action and target, its
  // link) and focused.
  function focusKey(el) {
    if (!el || el === document.body || !el.matches) return null;
    if (el.id) return '#' + CSS.escape(el.id);
    const d = el.dataset || {};
    if (d.action) {
      let sel = '[data-action="' + CSS.escape(d.action) + '"]';
      for (const k of ['topic', 'partition', 'member', 'group', 'id']) {
        if (d[k] !== undefined) sel += '[data-' + k + '="' + CSS.escape(d[k]) + '"]';
      }
      return sel;
    }
    if (el.matches('a[href]')) return 'a[href="' + CSS.escape(el.getAttribute('href')) + '"]';
    return null;
  }

  function keepFocus(container, swap) {
    const had = document.activeElement;
    const key = container.contains(had) ? focusKey(had) : null;
    swap();
    if (key && !had.isConnected) container.querySelector(key)?.focus({ preventScroll: true });
  }

  // ---- a coordinator that no longer serves the console -----------------
  // With replicas the console is the leader's: a standby sends a page to
  // the leader (307) and answers its data and actions 421 not_leader. A
  // page open at a leader that stopped, or that a takeover made a
  // standby, kept its last grid with "offline" in the header at most —
  // read as the group's state — and an action said "421 not_leader". Now
  // a read that fails asks the coordinator's /readyz (public, same
  // origin, on every replica) what it is; unless it still leads, the
  // page says so above its content, greyed, with when it was last read
  // and, when a leader is known, a link to this page there.
  let lastRead = new Date();

  function readOK() {
    lastRead = new Date();
    const banner = document.getElementById('elsewhere');
    if (!banner) return;
    banner.remove();
    document.querySelector('main')?.classList.remove('stale');
  }

  // serving asks /readyz: 'leader' (it serves: a read failed for another
  // reason), or {standby, leader} / {busy, message} / {gone}.
  async function serving() {
    try {
      const r = await fetch('/readyz', { redirect: 'error', cache: 'no-store', credentials: 'omit' });
      const j = await r.json().catch(() => ({}));
      if (r.ok && j.status === 'standby') return { standby: true, leader: j.leader || '' };
      if (r.ok) return 'leader';
      return { busy: true, message: j.error?.message || 'status ' + r.status };
    } catch (err) {
      return { gone: true };
    }
  }

  // atLeader is this page at the leader's advertised URL (an http(s)
  // origin only), or '' .
  function atLeader(base) {
    try {
      const u = new URL(base);
      if (u.protocol !== 'http:' && u.protocol !== 'https:') return '';
      return u.origin + location.pathname + location.search;
    } catch (err) {
      return '';
    }
  }

  // unread is called after a read failed; it reports whether the page
  // now says the coordinator does not serve it.
  async function unread() {
    const s = await serving();
    if (s === 'leader') return false;
    const since = 'This page is not updated since ' + clock(lastRead) + ' UTC. ';
    let text, href = '';
    if (s.standby && (href = atLeader(s.leader))) {
      text = 'This coordinator no longer leads: replica ' + new URL(href).origin + ' does, and serves the console (log in there). ' + since;
    } else if (s.standby) {
      text = 'This coordinator is a standby and no replica leads right now (a takeover may be under way). ' + since + 'It asks again every few seconds.';
    } else if (s.busy) {
      text = 'This coordinator does not serve the console now (' + s.message + '). ' + since;
    } else {
      text = 'This coordinator does not answer (stopped, or the network). ' + since +
        'With replicas, the console is the leader\'s: any replica\'s /console sends you there.';
    }
    // The other replicas (replica.peers, from the server's config): a
    // standby sends this page on to the leader, so a page left at a
    // replica that stopped for good still has a way there.
    const peers = href ? [] : (document.body.dataset.peers || '').split(' ').map(atLeader).filter(Boolean);
    let banner = document.getElementById('elsewhere');
    const main = document.querySelector('main');
    if (!banner) {
      banner = document.createElement('div');
      banner.id = 'elsewhere';
      banner.className = 'banner bad';
      banner.setAttribute('role', 'alert');
      main.parentNode.insertBefore(banner, main);
    }
    banner.textContent = text;
    if (href) {
      const a = document.createElement('a');
      a.id = 'at-leader';
      a.href = href;
      a.textContent = 'Open this page at the leader';
      banner.appendChild(a);
    } else if (peers.length && !s.standby) {
      const list = document.createElement('span');
      list.id = 'peers';
      list.append('Open this page at another replica (a standby sends you on to the leader; log in there): ');
      peers.forEach((p, i) => {
        const a = document.createElement('a');
        a.className = 'peer';
        a.href = p;
        a.textContent = new URL(p).host;
        if (i) list.append(' · ');
        list.appendChild(a);
      });
      banner.appendChild(list);
    }
    main.classList.add('stale');
    setLive('off', 'not updated');
    return true;
  }

  // ---- grid refresh: one request at a time, one more if events came meanwhile
  let refreshing = false, again = false;

  async function refresh() {
    const region = document.getElementById('live-region');
    if (!region) return;
    if (refreshing) { again = true; return; }
    refreshing = true;
    try {
      do {
        again = false;
        // Not followed: only a standby redirects it (to the leader, another
        // origin, which connect-src 'self' refuses).
        const r = await fetch('/console/groups/' + enc(groupName) + '/live' + location.search, { credentials: 'same-origin', redirect: 'manual' });
        if (r.status === 401) { sessionEnded(); return; }
        if (r.ok) {
          const html = await r.text();
          keepFocus(region, () => { region.innerHTML = html; });
          readOK();
        } else if (r.type === 'opaqueredirect' || r.status === 421 || r.status >= 500) {
          await unread();
        }
      } while (again);
    } catch (err) {
      if (!await unread()) setLive('off', 'offline');
    } finally {
      refreshing = false;
    }
  }

  // ---- the session ending under an open dialog ------------------------
  // A session ends by itself (session_ttl, an IdP token's exp, a deny)
  // or elsewhere (Log out in another tab). A re-read that finds it gone
  // used to send the page to the login page at once: an open dialog and
  // what was typed in it vanished without a word. Now, with a dialog
  // open, the page stays and the dialog says what happened — nothing in
  // it was sent — with the way back to the login page; closing it goes
  // there. An action sent after the end is told the same (its 401).
  let sessionGone = false;

  function sessionEnded() {
    sessionGone = true;
    if (!dialog?.open) { location.href = '/console/login'; return; }
    setLive('off', 'session ended — log in again');
    const out = document.getElementById('confirm-outcome');
    // An outcome already shown (the action was done) stays: it is true.
    if (!out.hidden && !out.className.includes('bad') && !out.className.includes('wait')) return;
    if (!out.className.includes('wait')) ended(out, 'Your console session has ended (it expired, or was logged out in another tab): nothing in this dialog was sent. ');
  }

  // ended says in out that nothing was done, with a link to log in again
  // (or, after a newer login elsewhere, to reload this page; after a
  // takeover, to this page at the leader).
  function ended(out, text, href = '/console/login', label = 'Log in again') {
    out.hidden = false; out.className = 'outcome bad';
    out.textContent = text;
    const a = document.createElement('a');
    a.id = 'login-again';
    a.href = href;
    a.textContent = label;
    out.appendChild(a);
    out.appendChild(document.createTextNode(', then do it again.'));
    document.getElementById('confirm-ok').disabled = true;
  }

  // ---- actions ---------------------------------------------------------
  // Each action: the dialog's text and fields, the admin route, the body,
  // and how to say what happened from the admin API's answer.
  const actions = {
    // A revoke fences the partition; the assignor then places it by the
    // group's members and their shares, not by the revoke: in a balanced
    // group it goes back to the same member (console5 saw "fenced at
    // epoch 3: A → A" and took the revoke for broken). The dialog says
    // so, and what moves it elsewhere.
    'revoke-partition': (d, from) => {
      const name = d.topic + '/' + d.partition;
      const holder = from.closest('.cell')?.dataset.holder || '';
      const again = 'The group\'s assignor (' + (document.getElementById('live-region')?.dataset.assignor || 'sticky') +
        ') then places it by the members and their shares, not by the revoke: in a balanced group it goes back to ' +
        (holder ? holder : 'the member that would have it') + ', under the new epoch (the old capabilities stay refused).';
      return {
        title: 'Revoke partition ' + name,
        text: 'Fence ' + name + ' of group ' + groupName + ' under a new epoch. ' + (holder ? 'Its holder, ' + holder + ', is' : 'Its capabilities are') +
          ' refused at once, on every gateway; the answer comes when every gateway is safe. ' + again +
          ' To move it to another holder, use Lease… on this partition; to take a consumer out, Revoke member in the members table.',
        fields: [{ name: 'reason', label: 'Reason (recorded)', value: 'console' }],
        method: 'POST',
        path: 'groups/' + enc(groupName) + '/partitions/' + enc(d.topic) + '/' + enc(d.partition) + '/revoke',
        body: (f) => ({ reason: f.reason }),
        outcome: (r) => 'Every gateway is safe: ' + name + ' is fenced at epoch ' + r.epoch + ' and being reassigned' +
          (holder ? ' — in a balanced group, to ' + holder + ' again (Lease… moves it elsewhere).' : '.'),
      };
    },
    'lease-partition': (d) => {
      const name = d.topic + '/' + d.partition;
      return {
        title: 'Lease partition ' + name,
        text: 'Pin ' + name + ' to a holder through the normal handoff. A holder that is not a member gets the capability here. ' +
          'A lease another holder has is moved only when asked (its capability is fenced); else the coordinator refuses, naming it.',
        fields: [{ name: 'holder', label: 'Holder (member id or a name)' }, { name: 'ttl', label: 'For (seconds)', type: 'number', value: '300' },
          { name: 'force', label: 'Move a lease another holder has', options: ['no', 'yes'] }],
        method: 'POST',
        path: 'groups/' + enc(groupName) + '/partitions/' + enc(d.topic) + '/' + enc(d.partition) + '/lease',
        body: (f) => ({ holder: f.holder, ttl_ms: Number(f.ttl) * 1000, force: f.force === 'yes' }),
        outcome: (r) => r.holder + ' holds ' + name + ' at epoch ' + r.epoch + ' until ' + r.until + ', from offset ' + r.offset + '.' +
          (r.capability ? ' Its capability (id ' + r.jti + '), to hand to the holder: ' + r.capability : ''),
      };
    },
    // An offset reset: kafka-consumer-groups --reset-offsets for one
    // partition (capgate admin offsets reset), on a live group too — its
    // holder is moved through a handoff and resumes at the new offset.
    'reset-offset': (d) => {
      const name = d.topic + '/' + d.partition;
      return {
        title: 'Reset the offset of ' + name,
        text: 'Commit a new offset for ' + name + ' in group ' + groupName + '. A member holding it is fenced and the partition handed over again: ' +
          'its next holder reads from the new offset. An outside lease on it is ended only when asked.',
        fields: [{ name: 'to', label: 'Reset to', options: ['earliest', 'latest', 'offset'] },
          { name: 'offset', label: 'Offset (with "offset")', type: 'number', min: '0' },
          { name: 'force', label: 'End an outside lease on it', options: ['no', 'yes'] }],
        method: 'PUT',
        path: 'groups/' + enc(groupName) + '/partitions/' + enc(d.topic) + '/' + enc(d.partition) + '/offset',
        // "offset" with no number is said here: sent as -1 it came back
        // "offset must be >= 0, got -1", naming a value nobody typed.
        problem: (f) => (f.to === 'offset' && f.offset.trim() === '' ? 'Enter the offset to reset to, or choose earliest or latest.' : ''),
        body: (f) => Object.assign(f.to === 'offset' ? { offset: f.offset.trim() === '' ? -1 : Number(f.offset) } : { to: f.to },
          f.force === 'yes' ? { force: true } : {}),
        outcome: (r) => 'Group ' + groupName + ' is at offset ' + r.offset + ' on ' + name + ': its holder reads from there.' +
          (r.lease_ended ? ' The lease of ' + r.lease_ended.holder + ' ended.' : ''),
      };
    },
    // A revoked member is removed, not stopped: like a Kafka consumer after
    // RemoveMembersFromConsumerGroup, the consumer joins again at once
    // with its credential. The dialog and the outcome say so, and name
    // the credential to deny to stop it.
    'revoke-member': (d) => ({
      title: 'Revoke member',
      text: 'Fence every partition of ' + d.member + ', refuse all its capabilities on every gateway until they expire, and remove it from ' + groupName + '. ' +
        rejoins(d.credential),
      fields: [],
      method: 'POST',
      path: 'groups/' + enc(groupName) + '/members/' + enc(d.member) + '/revoke',
      body: () => ({}),
      outcome: (r) => r.member_id + ' revoked: ' + r.fenced + ' partitions fenced; its capabilities are refused until ' + r.until + '. ' +
        rejoins(d.credential),
    }),
    'deny-credential': (d) => ({
      title: 'Deny credential ' + d.credential,
      text: 'Every gateway and the coordinator refuse credential ' + d.credential + (d.name ? ' (' + d.name + ')' : '') +
        ' and every capability attenuated from it: every member it opened, in every group (' + d.member + ' here), is revoked, and it cannot join again until the deny expires.' +
        oauthNote(d.name),
      fields: [{ name: 'reason', label: 'Reason (recorded)', value: 'console' }],
      method: 'POST',
      path: 'capabilities/' + enc(d.credential) + '/revoke',
      body: (f) => ({ reason: f.reason }),
      outcome: (r) => 'Denied ' + r.jti + ' until ' + new Date(r.exp * 1000).toISOString() + ': its members are revoked and its joins refused.',
    }),
    'deny-capability': () => ({
      title: 'Deny a capability id',
      text: 'Every gateway and the coordinator refuse this capability, and every capability attenuated from it.',
      fields: [{ name: 'jti', label: 'Capability id (jti)' }, { name: 'reason', label: 'Reason', value: 'console' }],
      method: 'POST',
      path: null,
      pathOf: (f) => 'capabilities/' + enc(f.jti) + '/revoke',
      body: (f) => ({ reason: f.reason }),
      outcome: (r) => 'Denied ' + r.jti + ' until ' + new Date(r.exp * 1000).toISOString() + '.',
    }),
    'qos': () => ({
      title: 'Set a QoS override',
      text: 'Pushed to every gateway on the sync channel. Leave a selector field empty to match any. ' +
        'The same selector changes its override: what you leave empty stays as it is.',
      fields: [
        { name: 'group', label: 'Group' }, { name: 'topic', label: 'Topic' }, { name: 'partition', label: 'Partition', type: 'number' },
        { name: 'holder', label: 'Holder' },
        { name: 'log_level', label: 'Log level', options: ['', 'debug', 'info', 'warn', 'error', ['clear', 'none (clear it)']] },
        { name: 'monitor', label: 'Monitor tag (empty: unchanged)' },
        { name: 'monitor_clear', label: 'Clear the monitor tag', options: ['no', 'yes'] },
        { name: 'max_bytes_per_sec', label: 'Max bytes per second (empty: unchanged; 0 lifts the limit)', type: 'number', min: '0' },
        { name: 'ttl', label: 'For (seconds)', type: 'number', value: '600' },
      ],
      method: 'PUT',
      path: 'qos',
      problem: (f) => (f.monitor_clear === 'yes' && f.monitor !== '' ? 'Either set a monitor tag or clear it, not both.' : ''),
      body: (f) => {
        const selector = {};
        for (const k of ['group', 'topic', 'holder']) if (f[k]) selector[k] = f[k];
        if (f.partition !== '') selector.partition = Number(f.partition);
        // An empty log level or monitor keeps the override's; clear
        // empties them.
        const clear = [];
        if (f.log_level === 'clear') clear.push('log_level');
        if (f.monitor_clear === 'yes') clear.push('monitor');
        return { selector, log_level: f.log_level === 'clear' ? undefined : f.log_level || undefined, monitor: f.monitor || undefined,
          // "" keeps the override's rate; 0 is sent: it lifts the limit.
          max_bytes_per_sec: f.max_bytes_per_sec === '' ? undefined : Number(f.max_bytes_per_sec), ttl_ms: Number(f.ttl) * 1000,
          clear: clear.length ? clear : undefined };
      },
      outcome: (r) => 'Override ' + r.id + ' is on every gateway until ' + new Date(r.until * 1000).toISOString() + ': ' +
        (r.max_bytes_per_sec > 0 ? 'at most ' + r.max_bytes_per_sec + ' B/s' : 'no byte rate') +
        (r.log_level ? ', log level ' + r.log_level : '') + (r.monitor ? ', monitor ' + r.monitor : '') + '.',
    }),
    // End an override now: the admin API has no delete; the same id with
    // ttl_ms 1 ends it on the coordinator and every gateway (what
    // capgate admin qos end sends).
    'qos-end': (d) => ({
      title: 'End QoS override ' + d.id,
      text: 'Stop the override of ' + d.what + ' now: its byte rate, log level and monitor tag no longer apply on any gateway.',
      fields: [],
      method: 'PUT',
      path: 'qos',
      body: () => ({ id: d.id, selector: JSON.parse(d.selector), ttl_ms: 1 }),
      outcome: (r) => 'Override ' + r.id + ' of ' + d.what + ' ended: pushed to every gateway, which drop it.',
    }),
    'group-config': (d) => {
      const moves = document.getElementById('max-moves')?.value || '0';
      return {
        title: 'Change the creeping rate of ' + groupName,
        text: 'At most ' + moves + ' partition moves per second away from live members (0 = unlimited).',
        fields: [],
        method: 'PUT',
        path: 'groups/' + enc(groupName) + '/config',
        body: () => ({ max_moves_per_second: Number(moves) }),
        outcome: (r) => 'Group ' + groupName + ' now moves at most ' + (r.max_moves_per_second || 'unlimited') + ' partitions per second.',
      };
    },
  };

  function rejoins(credential) {
    return 'A consumer joins again at once with its credential, as a Kafka consumer does after it is removed from its group: to stop it, deny its credential' +
      (credential ? ' ' + credential + ' (Deny credential, in the members table).' : ' (Deny a capability id, on the Overrides page).');
  }

  // An OAuth client's credentials are tokens of /oauth/token (subject
  // "oauth:<client_id>"): the client obtains another.
  function oauthNote(name) {
    if (!name || !name.startsWith('oauth:')) return '';
    const id = name.slice('oauth:'.length);
    return ' If it is a token of OAuth client ' + id + ', the client can obtain another: revoke the client (capgate admin oauth-client revoke ' + id + ') to stop it.';
  }

  const dialog = document.getElementById('confirm');
  let current = null;

  function field(f) {
    const label = document.createElement('label');
    label.textContent = f.label;
    let input;
    if (f.options) {
      input = document.createElement('select');
      for (const o of f.options) {
        const [value, text] = Array.isArray(o) ? o : [o, o || '(unchanged)'];
        const opt = document.createElement('option');
        opt.value = value; opt.textContent = text;
        input.appendChild(opt);
      }
    } else {
      input = document.createElement('input');
      input.type = f.type || 'text';
      input.value = f.value || '';
      if (f.min !== undefined) input.min = f.min;
    }
    input.name = f.name;
    label.appendChild(input);
    return label;
  }

  let opener = null; // focusKey of the button that opened the dialog

  function open(spec, from) {
    current = spec;
    opener = focusKey(from);
    document.getElementById('confirm-title').textContent = spec.title;
    document.getElementById('confirm-text').textContent = spec.text;
    const fields = document.getElementById('confirm-fields');
    fields.replaceChildren(...spec.fields.map(field));
    const out = document.getElementById('confirm-outcome');
    out.hidden = true; out.className = 'outcome'; out.textContent = '';
    const ok = document.getElementById('confirm-ok');
    ok.hidden = false; ok.disabled = false;
    document.getElementById('confirm-cancel').textContent = 'Cancel';
    dialog.showModal();
  }

  async function confirmed(ev) {
    ev.preventDefault();
    if (!current) return;
    const spec = current;
    const values = {};
    for (const el of document.getElementById('confirm-fields').querySelectorAll('input, select')) values[el.name] = el.value;
    const out = document.getElementById('confirm-outcome');
    const ok = document.getElementById('confirm-ok');
    // A spec may name what is missing before anything is sent (problem).
    const problem = spec.problem?.(values);
    if (problem) {
      out.hidden = false; out.className = 'outcome bad'; out.textContent = problem;
      return;
    }
    ok.disabled = true;
    out.hidden = false; out.className = 'outcome wait'; out.textContent = 'Working… waiting for the coordinator';
    const path = spec.path ?? spec.pathOf(values);
    try {
      const r = await fetch('/console/api/v1/admin/' + path, {
        method: spec.method,
        credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': csrf },
        body: JSON.stringify(spec.body(values)),
      });
      const answer = await r.json().catch(() => ({}));
      if (r.ok) {
        out.className = 'outcome';
        out.textContent = spec.outcome(answer);
        ok.hidden = true;
        document.getElementById('confirm-cancel').textContent = 'Close';
        // The page shows what changed: a group's grid, else the page
        // itself (the Overrides page lists the override just set).
        if (groupName) refresh(); else reread();
      } else if (r.status === 401) {
        sessionGone = true;
        setLive('off', 'session ended — log in again');
        ended(out, 'Your console session has ended (it expired, or was logged out in another tab): this was not done. ');
      } else if (r.status === 403 && answer.error?.message === 'missing or wrong CSRF token') {
        // The cookie is a newer session's (a login in another tab) than
        // the page's: the page's token is not that session's.
        ended(out, 'This page belongs to an earlier console session (you logged in again, perhaps in another tab): this was not done. ',
          location.pathname + location.search, 'Reload this page');
      } else if (r.status === 421 && answer.error?.code === 'not_leader') {
        // A takeover since the page was read: the action reached a standby.
        const href = atLeader(answer.error.leader || '');
        unread();
        if (href) {
          ended(out, 'This coordinator no longer leads: this was not done. ', href, 'Open this page at the leader');
        } else {
          out.className = 'outcome bad';
          out.textContent = 'This coordinator no longer leads and no replica leads right now (a takeover may be under way): this was not done. Try again in a few seconds.';
          ok.disabled = false;
        }
      } else {
        out.className = 'outcome bad';
        out.textContent = r.status + ' ' + (answer.error?.code || '') + ': ' + (answer.error?.message || 'refused');
        ok.disabled = false;
      }
    } catch (err) {
      out.className = 'outcome bad';
      out.textContent = 'No answer: ' + err;
      ok.disabled = false;
    }
  }

  document.addEventListener('click', (ev) => {
    const button = ev.target.closest('[data-action]');
    if (!button || !dialog) return;
    const make = actions[button.dataset.action];
    if (make) open(make(button.dataset, button), button);
  });
  if (dialog) {
    // Closed (Cancel, Close, Escape): the keyboard is back on the button
    // that opened it — the one now in the page if a re-read replaced it.
    dialog.addEventListener('close', () => {
      if (sessionGone) { location.href = '/console/login'; return; }
      const key = opener;
      opener = null;
      if (!key) return;
      const el = document.activeElement;
      if (el && el !== document.body && el.isConnected && !dialog.contains(el)) return;
      document.querySelector('main')?.querySelector(key)?.focus({ preventScroll: true });
    });
    document.getElementById('confirm-form').addEventListener('submit', confirmed);
    document.getElementById('confirm-cancel').addEventListener('click', () => { current = null; dialog.close(); });
  }

  // Pages without a stream (groups, gateways) re-read their main part,
  // the same page of the same filter; not while a field in it is being
  // edited (the re-read would replace what is typed).
  function editing() {
    const main = document.querySelector('main');
    const el = document.activeElement;
    if (main && el && main.contains(el) && el.matches('input, select, textarea')) return true;
    return [...(main?.querySelectorAll('input') || [])].some((i) => i.value !== i.defaultValue);
  }

  async function reread() {
    if (editing()) return;
    try {
      // A redirect is not followed: 303 to the login page (the session
      // ended) or, at a standby, 307 to the leader (another origin).
      const r = await fetch(location.pathname + location.search, { credentials: 'same-origin', redirect: 'manual' });
      if (r.type === 'opaqueredirect') {
        if ((await serving()).standby) await unread(); else sessionEnded();
        return;
      }
      if (r.status === 401) { sessionEnded(); return; }
      if (!r.ok) {
        if (r.status === 421 || r.status >= 500) await unread();
        return;
      }
      const fresh = new DOMParser().parseFromString(await r.text(), 'text/html').querySelector('main');
      const main = document.querySelector('main');
      if (fresh && !editing()) keepFocus(main, () => main.replaceChildren(...fresh.childNodes));
      readOK();
    } catch (err) {
      if (!await unread()) setLive('off', 'offline');
    }
  }

  startStream();
  if (groupName) setInterval(() => whenShown(refresh), 5000); // contact times and lag drift without events
  const poll = Number(body.dataset.poll || 0);
  if (poll > 0) setInterval(() => whenShown(reread), poll);
})();
