// clipdb serve: the search page. Plain JavaScript, no build step: it talks to the
// JSON API of the same server (/api/search, /api/thumb/ID, /api/file/ID,
// /api/preview/ID, /api/stats, /api/folders, /api/duplicates) and keeps its state in the
// URL's hash (#dups: the duplicates view),
// so Back and reload work.
'use strict';

const $ = (id) => document.getElementById(id);
const PAGE = 40;           // hits per request; more are fetched as the grid scrolls
const MORE_MARGIN = 800;   // px below the view at which the next page is fetched
const ROW = () => parseFloat(getComputedStyle(document.documentElement).getPropertyValue('--row')) || 200;

const S = {
  mode: 'none',            // 'text' | 'like' | 'image' | 'none'
  q: '', likeId: 0, likeDb: 0, likeName: '', likeThumb: '', image: null, imageUrl: '',
  min: '', under: '', sort: 'score', collapse: true,
  hits: [], offset: 0, done: false, loading: false, seq: 0, model: '',
};

// ---- the API ------------------------------------------------------------------------

async function api(path, opts = {}) {
  const r = await fetch(path, { credentials: 'same-origin', ...opts });
  if (r.status === 401) {
    await login();
    return api(path, opts);
  }
  let body = null;
  try { body = await r.json(); } catch (_) { body = null; }
  if (!r.ok) {
    const e = new Error(body && body.error ? body.error.message : `HTTP ${r.status}`);
    e.code = body && body.error ? body.error.code : 'http';
    throw e;
  }
  return body;
}

function login() {
  const d = $('login');
  if (d.open) return new Promise((ok) => d.addEventListener('close', ok, { once: true }));
  return new Promise((ok) => {
    $('login-err').hidden = true;
    d.showModal();
    $('token').focus();
    $('login-form').onsubmit = async (ev) => {
      ev.preventDefault();
      const r = await fetch('/api/login', {
        method: 'POST', credentials: 'same-origin',
        headers: { 'Content-Type': 'application/json' },
        body: JSON.stringify({ token: $('token').value }),
      });
      if (r.ok) { d.close(); $('signout').hidden = false; ok(); return; }
      $('login-err').hidden = false;
      $('token').select();
    };
  });
}

// The sign-in is a session cookie (HttpOnly: the page cannot read it), so the server
// says whether one is needed and held; "Sign out" ends it there.
async function showSession() {
  try {
    const r = await fetch('/api/session', { credentials: 'same-origin' });
    const j = await r.json();
    $('signout').hidden = !(j.token_required && j.signed_in);
  } catch (_) { $('signout').hidden = true; }
}

async function signOut() {
  await fetch('/api/logout', { method: 'POST', credentials: 'same-origin' }).catch(() => {});
  $('signout').hidden = true;
  S.hits = [];
  $('grid').replaceChildren();
  await login();
  if (S.mode === 'none') showWelcome(); else search();
}

// A message about something else than the results (an image that cannot be used, a
// list that did not load): it goes after 5 s or with the next search, whichever
// comes first. A failed search says so in the status line only, once.
function toast(msg) {
  const t = $('toast');
  t.textContent = msg;
  t.hidden = false;
  clearTimeout(toast.timer);
  toast.timer = setTimeout(hideToast, 5000);
}

function hideToast() {
  clearTimeout(toast.timer);
  $('toast').hidden = true;
}

// ---- state <-> URL --------------------------------------------------------------------

function toHash() {
  const p = new URLSearchParams();
  if (S.mode === 'text' && S.q) p.set('q', S.q);
  if (S.mode === 'like' && S.likeId) p.set('like', String(S.likeId));
  if (S.mode === 'like' && S.likeDb) p.set('db', String(S.likeDb));
  if (S.min !== '') p.set('min', S.min);
  if (S.under) p.set('under', S.under);
  if (S.sort !== 'score') p.set('sort', S.sort);
  if (!S.collapse) p.set('copies', '1');
  const h = p.toString();
  if (location.hash.slice(1) !== h) history.pushState(null, '', h ? '#' + h : location.pathname);
}

function fromHash() {
  const p = new URLSearchParams(location.hash.slice(1));
  S.q = p.get('q') || '';
  S.likeId = parseInt(p.get('like') || '0', 10) || 0;
  S.likeDb = parseInt(p.get('db') || '0', 10) || 0;
  S.min = p.get('min') || '';
  S.under = p.get('under') || '';
  S.sort = SORTS.includes(p.get('sort')) ? p.get('sort') : 'score';
  S.collapse = p.get('copies') !== '1';
  S.mode = S.likeId ? 'like' : S.q ? 'text' : 'none';
  if (S.mode !== 'image') S.image = null;
  $('q').value = S.mode === 'text' ? S.q : '';
  $('min').value = S.min;
  $('under').value = S.under;
  $('sort').value = S.sort;
  $('collapse').checked = S.collapse;
}

// ---- searching ------------------------------------------------------------------------

function request(offset) {
  // collapse: copies are one hit (the server's default); offset counts such hits
  const common = { k: PAGE, offset, collapse: S.collapse ? 1 : 0 };
  if (S.min !== '' && !Number.isNaN(parseFloat(S.min))) common.min_score = parseFloat(S.min);
  if (S.under) common.under = S.under;
  if (S.sort !== 'score') common.sort = S.sort;
  if (S.mode === 'image') {
    return api('/api/search', {
      method: 'POST', headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ image: S.image, ...common }),
    });
  }
  const p = new URLSearchParams();
  if (S.mode === 'like') p.set('image_id', String(S.likeId)); else p.set('q', S.q);
  if (S.mode === 'like') p.set('image_db', String(S.likeDb));
  for (const [k, v] of Object.entries(common)) p.set(k, String(v));
  return api('/api/search?' + p.toString());
}

async function search(reset = true) {
  if (S.mode === 'none') { showWelcome(); return; }
  if (S.loading && !reset) { // the next page, asked for while one loads: fetched after it
    if (!S.loadingFirst) S.wantMore = true;
    return;
  }
  const seq = ++S.seq;
  S.loadingFirst = reset;
  if (reset) {
    hideToast();
    S.hits = []; S.offset = 0; S.done = false; S.wantMore = false;
    $('grid').replaceChildren(...skeletons(12));
    $('welcome').hidden = true;
  }
  S.loading = true;
  const t0 = performance.now();
  let ok = false;
  try {
    const r = await request(S.offset);
    if (seq !== S.seq) return; // a newer search started meanwhile
    if (reset) $('grid').replaceChildren();
    S.model = r.model;
    const start = S.hits.length;
    S.hits.push(...r.results);
    S.offset += r.results.length;
    S.done = r.results.length < PAGE;
    append(r.results, start);
    status(r, performance.now() - t0);
    ok = true;
  } catch (e) {
    if (seq !== S.seq) return;
    if (reset) $('grid').replaceChildren();
    status(null, 0, e.message); // there only: not in a toast as well
  } finally {
    if (seq === S.seq) S.loading = false;
  }
  // The observer below fires only when #more starts or stops being near the view: if
  // it still is (a tall window), or it came near while this page was loading (wantMore:
  // the observer's call was held), the next page is fetched now, or it never would be
  // (not after a failure: no retry loop).
  if (ok && seq === S.seq && !S.done && S.mode !== 'none' && (S.wantMore || moreNearView())) {
    S.wantMore = false;
    search(false);
  }
}

function moreNearView() {
  return $('more').getBoundingClientRect().top < window.innerHeight + MORE_MARGIN;
}

function status(r, ms, err) {
  const el = $('status');
  el.replaceChildren();
  const b = (t) => { const x = document.createElement('b'); x.textContent = t; return x; };
  if (err) { el.append('Search failed: ', b(err)); return; }
  const n = S.hits.length;
  const what = S.mode === 'like' ? ['Photos like ', b(S.likeName || '#' + S.likeId)]
    : S.mode === 'image' ? ['Photos like the image you gave']
    : ['Results for ', b(S.q)];
  el.append(...what, ` \u00b7 ${n}${S.done ? '' : '+'} photo${n === 1 ? '' : 's'}`);
  if (S.under) el.append(' in ', b(S.under));
  if (S.min !== '') el.append(` scoring \u2265 ${S.min}`);
  el.append(` \u00b7 ${Math.round(ms)} ms`);
  if (r.copies_truncated) { // the servers' search for copies stopped at a bound
    el.append(` \u00b7 copies on other servers may be missing (the ${r.copies_bound} bound)`);
  }
  if (!n) el.append(' \u00b7 try other words, or a lower minimum score');
}

function skeletons(n) {
  const out = [];
  for (let i = 0; i < n; i++) {
    const s = document.createElement('div');
    s.className = 'skeleton';
    s.style.flexBasis = `${Math.round(ROW() * (0.7 + ((i * 37) % 10) / 10))}px`;
    out.push(s);
  }
  return out;
}

function baseName(p) { return p.split('/').pop(); }

// The orders the page offers: by score, or by capture time (the server's sort=taken: the
// file time where a photo has none), newest or oldest first; 'time' (file time) from
// older links still works.
const SORTS = ['score', 'taken', 'taken-asc', 'time'];

// The day a hit was taken, as its time says it (the camera's own date; UTC for a file
// time): 'YYYY-MM-DD', or '' when unknown.
function dayOf(h) { return h && typeof h.taken === 'string' ? h.taken.slice(0, 10) : ''; }

// A heading across the grid where the day changes, in the orders by capture time.
function dayHeading(day) {
  const d = document.createElement('h2');
  d.className = 'day';
  const [y, m, dd] = day.split('-').map(Number);
  d.textContent = new Date(Date.UTC(y, m - 1, dd)).toLocaleDateString(undefined,
    { timeZone: 'UTC', weekday: 'short', year: 'numeric', month: 'long', day: 'numeric' });
  return d;
}

// What the viewer says of a photo: when it was taken (and whether that is only the file's
// time), its camera and lens, where.
function photoMeta(h) {
  const out = [];
  if (h.taken) out.push(h.taken_source === 'file' ? `file time ${h.taken}` : `taken ${h.taken}`);
  const cam = [h.make, h.model].filter(Boolean).join(' ');
  if (cam) out.push(cam + (h.lens ? `, ${h.lens}` : ''));
  if (typeof h.lat === 'number') out.push(`${h.lat.toFixed(5)}, ${h.lon.toFixed(5)}`);
  return out;
}

function append(hits, start) {
  const grid = $('grid');
  const row = ROW();
  const byDay = S.sort === 'taken' || S.sort === 'taken-asc';
  let day = start > 0 ? dayOf(S.hits[start - 1]) : null;
  hits.forEach((h, i) => {
    if (byDay && dayOf(h) && dayOf(h) !== day) grid.append(dayHeading(dayOf(h)));
    day = dayOf(h);
    const ar = h.width > 0 && h.height > 0 ? Math.min(3, Math.max(0.4, h.width / h.height)) : 1;
    const t = document.createElement('div');
    t.className = 'tile';
    t.tabIndex = 0;
    t.dataset.i = String(start + i);
    t.style.flexBasis = `${Math.round(ar * row)}px`;
    t.style.flexGrow = String(ar);
    t.setAttribute('role', 'button');
    const prob = typeof h.probability === 'number'
      ? `, match probability ${(100 * h.probability).toFixed(1)}%` : '';
    const dups = h.duplicates > 0
      ? `, and ${h.duplicates} cop${h.duplicates === 1 ? 'y' : 'ies'}` : '';
    t.setAttribute('aria-label', `${baseName(h.path)}, score ${h.score.toFixed(3)}${prob}${dups}`);
    const img = document.createElement('img');
    img.alt = '';
    img.loading = 'lazy';
    img.decoding = 'async';
    img.width = Math.round(ar * row);
    img.height = row;
    img.addEventListener('load', () => img.classList.add('loaded'));
    // a peer's thumbnail gets a 503 while the server's share of threads for peers is taken
    // (README, "A slow peer"): asked again a few times, further apart each time
    let tries = 0;
    img.addEventListener('error', () => {
      if (h.peer && tries < 4) setTimeout(() => { img.src = `${h.thumb}&try=${++tries}`; },
                                          1000 * (tries + 1));
    });
    img.src = h.thumb;
    const score = document.createElement('span');
    score.className = 'score';
    score.textContent = h.score.toFixed(3);
    const bar = document.createElement('i');
    bar.style.width = `${Math.round(28 * Math.max(0, Math.min(1, h.score)))}px`;
    score.append(bar);
    const ov = document.createElement('div');
    ov.className = 'overlay';
    const name = document.createElement('span');
    name.className = 'name';
    name.textContent = baseName(h.path);
    const like = document.createElement('button');
    like.className = 'like';
    like.type = 'button';
    like.textContent = 'More like this';
    like.title = 'Find photos like this one';
    like.addEventListener('click', (ev) => { ev.stopPropagation(); moreLike(h); });
    ov.append(name);
    if (!h.peer) ov.append(like); // a peer's photo id is the peer's: not searchable here
    t.append(img, score, ov);
    if (h.duplicates > 0) { // copies collapsed into this tile: a badge with their count
      const badge = document.createElement('span');
      badge.className = 'dups';
      badge.textContent = `+${h.duplicates}`;
      badge.title = `${h.duplicates} more cop${h.duplicates === 1 ? 'y' : 'ies'} of this photo `
        + '(untick "Group copies" to see them)';
      t.append(badge);
    }
    t.addEventListener('click', () => openViewer(start + i));
    t.addEventListener('keydown', (ev) => {
      if (ev.key === 'Enter' || ev.key === ' ') { ev.preventDefault(); openViewer(start + i); }
    });
    grid.append(t);
  });
}

function moreLike(h) {
  if (!h || h.peer) return;
  closeViewer();
  S.mode = 'like';
  S.likeId = h.id;
  S.likeDb = h.db || 0;
  S.likeName = baseName(h.path);
  S.likeThumb = h.thumb;
  showChip(h.thumb, baseName(h.path));
  toHash();
  search();
  window.scrollTo({ top: 0 });
}

function showChip(src, text) {
  $('chip-img').src = src;
  $('chip-text').textContent = text;
  $('chip').hidden = false;
  $('q').value = '';
  $('q').placeholder = 'or type to search by words instead';
}

function clearChip() {
  $('chip').hidden = true;
  $('q').placeholder = 'Search your photos: a dog on a beach, sunset + sea - people';
  if (S.imageUrl) URL.revokeObjectURL(S.imageUrl);
  S.imageUrl = '';
}

function showWelcome() {
  S.seq++;
  $('grid').replaceChildren();
  $('status').textContent = '';
  $('welcome').hidden = false;
}

// ---- the duplicates view (#dups): GET /api/duplicates, one row per group ----------------

async function showDuplicates() {
  const seq = ++S.seq;
  $('welcome').hidden = true;
  $('grid').replaceChildren();
  $('status').textContent = 'Looking for duplicates\u2026';
  let d;
  try {
    d = await api('/api/duplicates');
  } catch (e) {
    if (seq === S.seq) $('status').textContent = e.message;
    return;
  }
  if (seq !== S.seq) return;
  const n = d.groups.length;
  $('status').textContent = `${n} group${n === 1 ? '' : 's'} among ${d.files.toLocaleString()} ` +
    'photos. Nothing is deleted: \u201ckeep\u201d is only a suggestion.';
  for (const g of d.groups) {
    const sec = document.createElement('section');
    sec.className = 'dup-group';
    const h = document.createElement('h2');
    h.textContent = `${g.kind} \u00b7 ${g.files.length} files`;
    const row = document.createElement('div');
    row.className = 'dup-row';
    for (const f of g.files) {
      const a = document.createElement('a');
      a.className = 'dup-file' + (f.id === g.keep ? ' keep' : '');
      a.href = `/api/file/${f.id}?db=0`; // the groups are the first database's
      a.target = '_blank';
      a.rel = 'noopener';
      a.title = `${f.path}\n${f.width}\u00d7${f.height}, ${f.bytes.toLocaleString()} bytes` +
        (f.taken ? `, taken ${f.taken}` : '');
      const img = document.createElement('img');
      img.src = f.thumb;
      img.alt = baseName(f.path);
      img.loading = 'lazy';
      const cap = document.createElement('span');
      cap.textContent = (f.id === g.keep ? 'keep \u00b7 ' : '') + baseName(f.path);
      a.append(img, cap);
      row.append(a);
    }
    sec.append(h, row);
    $('grid').append(sec);
  }
}

// ---- search by an image: pick, drop, paste ---------------------------------------------

function byImage(file) {
  if (!file || !file.type.startsWith('image/')) { toast('That is not an image.'); return; }
  if (file.size > 24 * 1024 * 1024) { toast('That image is over 24 MB.'); return; }
  const rd = new FileReader();
  rd.onload = () => {
    const url = String(rd.result);
    S.image = url.slice(url.indexOf(',') + 1);
    S.mode = 'image';
    clearChip();
    S.imageUrl = URL.createObjectURL(file);
    showChip(S.imageUrl, file.name || 'pasted image');
    history.pushState(null, '', location.pathname);
    search();
  };
  rd.readAsDataURL(file);
}

// ---- the viewer -------------------------------------------------------------------------

let viewing = -1;

function openViewer(i) {
  const h = S.hits[i];
  if (!h) return;
  viewing = i;
  const v = $('viewer');
  const img = $('v-img');
  img.src = h.thumb;           // at once, then the original (or its preview) replaces it
  // Browsers show JPEG, PNG, WebP and GIF themselves; HEIC, TIFF and RAW get the
  // server's large JPEG preview. An original the browser fails on (a HEIC named .jpg)
  // gets the preview too.
  const big = h.browser_shows === false && h.preview ? h.preview : h.file;
  const full = new Image();
  full.onload = () => { if (viewing === i) img.src = full.src; };
  full.onerror = () => { if (big === h.file && h.preview && viewing === i) full.src = h.preview; };
  full.src = big;
  $('v-path').textContent = h.path;
  const when = h.taken ? photoMeta(h) : h.mtime ? [new Date(h.mtime * 1000).toLocaleString()] : [];
  $('v-meta').textContent = [`score ${h.score.toFixed(3)}`, `${h.width}\u00d7${h.height}`, ...when]
    .join(' \u00b7 ');
  $('v-open').href = h.file;
  v.hidden = false;
  $('v-like').focus();
  if (i >= S.hits.length - 3 && !S.done) search(false);
}

function closeViewer() {
  if ($('viewer').hidden) return;
  $('viewer').hidden = true;
  const t = document.querySelector(`.tile[data-i="${viewing}"]`);
  if (t) t.focus();
  viewing = -1;
}

// ---- wiring ----------------------------------------------------------------------------

function nudgeMin(d) {
  const cur = S.min === '' ? 0 : parseFloat(S.min);
  const next = Math.max(-1, Math.min(1, Math.round((cur + d) * 100) / 100));
  S.min = next.toFixed(2);
  $('min').value = S.min;
  toHash();
  search();
}

// The banner for a library of real photos searched with the bundled model (GET
// /api/stats: bundled_model, real_photos); static text, dismissed for this browser.
const NOTICE_KEY = 'clipdb.notice.bundled';
function showNotice(show) {
  let gone = false;
  try { gone = localStorage.getItem(NOTICE_KEY) === '1'; } catch (e) { /* no storage */ }
  $('notice').hidden = !show || gone;
}

async function loadLibrary() {
  try {
    const s = await api('/api/stats');
    const n = s.files.ok;
    S.model = s.model;
    showNotice(s.bundled_model && s.real_photos);
    $('library').textContent = `${n.toLocaleString()} photo${n === 1 ? '' : 's'} in ${s.folders} folder${s.folders === 1 ? '' : 's'} \u00b7 model ${s.model}`;
    const ex = /^shapes/.test(s.model)
      ? ['a red circle', 'a blue square', 'a green triangle', 'star + yellow', 'a circle - red']
      : ['a dog on the beach', 'sunset over the sea', 'snowy mountains', 'a birthday cake', 'city at night - people'];
    $('examples').replaceChildren(...ex.map((q) => {
      const b = document.createElement('button');
      b.type = 'button';
      b.textContent = q;
      b.addEventListener('click', () => { $('q').value = q; submit(); });
      return b;
    }));
  } catch (e) { toast(e.message); }
  try {
    const f = await api('/api/folders');
    const sel = $('under');
    for (const x of f.folders) {
      if (x.kind !== 'folder') continue;
      sel.append(folderOption(x.path, x.path, 0, x.files, false));
    }
    sel.value = S.under;
  } catch (e) { toast(e.message); }
  if (S.under) openFolder(S.under);
}

// ---- the folder filter: the roots, and inside the folder picked, its folders ---------

function folderOption(path, label, depth, files, more) {
  const o = document.createElement('option');
  o.value = path;
  o.dataset.depth = String(depth);
  o.textContent = '\u00a0\u00a0\u00a0'.repeat(depth) + label + (more ? '/\u2026' : '') +
    (files == null ? '' : `  (${files.toLocaleString()})`);
  return o;
}

// Lists the folders inside path (GET /api/folders?under=, from the catalog) below its
// option, one level deeper: picking one of them lists its own, and so on down.
async function openFolder(path) {
  const sel = $('under');
  let at = [...sel.options].find((o) => o.value === path);
  if (!at) { // from the URL: a folder not listed yet
    at = folderOption(path, path, 0, null, false);
    sel.append(at);
  }
  sel.value = S.under;
  if (at.dataset.opened) return;
  at.dataset.opened = '1';
  let f;
  try {
    f = await api('/api/folders?under=' + encodeURIComponent(path));
  } catch (e) {
    if (e.code !== 'not_found') toast(e.message); // not_found: no recorded folder holds it
    return;
  }
  const depth = parseInt(at.dataset.depth || '0', 10) + 1;
  const have = new Set([...sel.options].map((o) => o.value));
  let after = at;
  for (const x of f.folders) {
    if (have.has(x.path)) continue;
    const o = folderOption(x.path, baseName(x.path), depth, x.files, x.subfolders);
    after.after(o);
    after = o;
  }
  sel.value = S.under;
}

function submit() {
  const q = $('q').value.trim();
  if (!q) {
    if (S.mode === 'like' || S.mode === 'image') { search(); return; }
    S.mode = 'none'; toHash(); showWelcome(); return;
  }
  clearChip();
  S.mode = 'text';
  S.q = q;
  S.image = null;
  toHash();
  search();
}

function init() {
  fromHash();
  if (S.mode === 'like') {
    showChip(`/api/thumb/${S.likeId}?db=${S.likeDb}`, `#${S.likeId}`);
  }
  $('search').addEventListener('submit', (ev) => { ev.preventDefault(); submit(); });
  $('chip-clear').addEventListener('click', () => {
    clearChip(); S.mode = 'none'; S.image = null; toHash(); showWelcome(); $('q').focus();
  });
  $('min').addEventListener('change', () => { S.min = $('min').value.trim(); toHash(); search(); });
  $('under').addEventListener('change', () => {
    S.under = $('under').value;
    toHash();
    search();
    if (S.under) openFolder(S.under);
  });
  $('sort').addEventListener('change', () => { S.sort = $('sort').value; toHash(); search(); });
  $('collapse').addEventListener('change', () => {
    S.collapse = $('collapse').checked; toHash(); search();
  });
  $('signout').addEventListener('click', signOut);
  $('pick').addEventListener('click', () => $('file').click());
  $('file').addEventListener('change', () => { byImage($('file').files[0]); $('file').value = ''; });
  $('v-close').addEventListener('click', closeViewer);
  $('v-prev').addEventListener('click', () => openViewer(Math.max(0, viewing - 1)));
  $('v-next').addEventListener('click', () => openViewer(Math.min(S.hits.length - 1, viewing + 1)));
  $('v-like').addEventListener('click', () => moreLike(S.hits[viewing]));
  $('viewer').addEventListener('click', (ev) => { if (ev.target === $('viewer')) closeViewer(); });
  window.addEventListener('popstate', () => {
    if (location.hash === '#dups') { showDuplicates(); return; }
    fromHash();
    if (S.under) openFolder(S.under);
    if (S.mode !== 'like') clearChip();
    search();
  });

  // drop anywhere, paste anywhere
  let depth = 0;
  window.addEventListener('dragenter', (ev) => {
    if ([...(ev.dataTransfer?.types || [])].includes('Files')) { depth++; $('drop').hidden = false; }
  });
  window.addEventListener('dragleave', () => { if (--depth <= 0) { depth = 0; $('drop').hidden = true; } });
  window.addEventListener('dragover', (ev) => ev.preventDefault());
  window.addEventListener('drop', (ev) => {
    ev.preventDefault();
    depth = 0;
    $('drop').hidden = true;
    const f = ev.dataTransfer?.files?.[0];
    if (f) byImage(f);
  });
  window.addEventListener('paste', (ev) => {
    const item = [...(ev.clipboardData?.items || [])].find((x) => x.type.startsWith('image/'));
    if (item) { ev.preventDefault(); byImage(item.getAsFile()); }
  });

  // the keyboard
  document.addEventListener('keydown', (ev) => {
    const typing = ['INPUT', 'SELECT', 'TEXTAREA'].includes(document.activeElement?.tagName);
    if (!$('viewer').hidden) {
      if (ev.key === 'Escape') closeViewer();
      else if (ev.key === 'ArrowRight') openViewer(Math.min(S.hits.length - 1, viewing + 1));
      else if (ev.key === 'ArrowLeft') openViewer(Math.max(0, viewing - 1));
      else if (ev.key === 'l') moreLike(S.hits[viewing]);
      else return;
      ev.preventDefault();
      return;
    }
    if (ev.key === 'Escape') {
      if (document.activeElement === $('q') && $('q').value) { $('q').value = ''; return; }
      if (!$('chip').hidden) { $('chip-clear').click(); return; }
      document.activeElement?.blur();
      return;
    }
    if (typing || ev.ctrlKey || ev.metaKey || ev.altKey) return;
    if (ev.key === '/') { ev.preventDefault(); $('q').focus(); $('q').select(); }
    else if (ev.key === '[') { ev.preventDefault(); nudgeMin(-0.01); }
    else if (ev.key === ']') { ev.preventDefault(); nudgeMin(0.01); }
    else if (ev.key === 'f') { ev.preventDefault(); $('under').focus(); }
  });

  // more as the grid scrolls
  new IntersectionObserver((entries) => {
    if (entries.some((e) => e.isIntersecting) && !S.done && S.mode !== 'none') search(false);
  }, { rootMargin: MORE_MARGIN + 'px' }).observe($('more'));

  $('notice-close').addEventListener('click', () => {
    try { localStorage.setItem(NOTICE_KEY, '1'); } catch (e) { /* no storage: this visit */ }
    $('notice').hidden = true;
  });

  showSession();
  loadLibrary();
  if (location.hash === '#dups') showDuplicates();
  else if (S.mode === 'none') showWelcome(); else search();
  if (S.mode === 'none') $('q').focus();
}

document.addEventListener('DOMContentLoaded', init);
