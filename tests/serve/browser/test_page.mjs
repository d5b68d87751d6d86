// test_page.mjs: the search page of `clipdb serve` in a real browser (Debian's
// chromium, headless, driven by playwright-core). Usage:
//   node test_page.mjs BASE_URL OUT_DIR
// Checks the bundled model's banner (the library has real photos) and dismisses it.
// Types a query and waits for the thumbnails to load, checks the scores against the
// API, clicks "more like this" on a hit, opens the viewer, filters by minimum score
// and folder from the keyboard (and by a folder inside the root), searches by a
// dropped image, checks that a toast goes with the next search and that a failed
// search says so once, opens a TIFF and a HEIC in the viewer (the server's JPEG
// preview, not the thumbnail); shows a photo and its exact copy as one tile with a
// count, both with "Group copies" off, and the duplicates view's groups as the API
// gives them; and saves screenshots (welcome.png, results.png, copies-grouped.png,
// duplicates.png,
// more-like-this.png, viewer.png, folder.png, dropped.png, search-failed.png,
// viewer-tiff.png) in OUT_DIR.
// Exits non-zero with a message on the first thing that does not work.
import { chromium } from 'playwright-core';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';

const [base, out] = process.argv.slice(2);
if (!base || !out) {
  console.error('usage: node test_page.mjs BASE_URL OUT_DIR');
  process.exit(2);
}
const exe = process.env.CLIPDB_CHROMIUM || '/usr/bin/chromium';
const profile = mkdtempSync(join(tmpdir(), 'clipdb-chromium-'));
let failed = 0;
const check = (ok, what) => {
  console.log(`${ok ? 'ok  ' : 'FAIL'} ${what}`);
  if (!ok) failed++;
  return ok;
};

const ctx = await chromium.launchPersistentContext(profile, {
  executablePath: exe,
  headless: true,
  args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
    '--disable-background-networking', '--disable-component-update', '--disable-sync'],
  viewport: { width: 1360, height: 860 },
  deviceScaleFactor: 1,
});
const page = ctx.pages()[0] || await ctx.newPage();
const errors = [];
page.on('pageerror', (e) => errors.push(String(e)));
let expect400 = false; // a failed search on purpose: the browser logs its 400
page.on('console', (m) => {
  if (m.type() !== 'error') return;
  if (expect400 && /status of 400/.test(m.text())) return;
  errors.push(m.text());
});

const baseName = (p) => p.split('/').pop();

async function thumbsLoaded(min) {
  await page.waitForFunction((n) => {
    const imgs = [...document.querySelectorAll('.tile img')];
    return imgs.length >= n && imgs.slice(0, n).every((i) => i.complete && i.naturalWidth > 0);
  }, min, { timeout: 20000 });
}

try {
  await page.goto(base + '/', { waitUntil: 'networkidle' });
  await page.waitForFunction(() => document.getElementById('library').textContent.includes('photos'));
  check(await page.locator('#welcome').isVisible(), 'the welcome page shows the library');
  await page.screenshot({ path: join(out, 'welcome.png') });

  // 0. the bundled model's banner: the library holds real photos (a TIFF, a HEIC), the
  // API says so, and the banner says what to do; it is announced, and dismissed for good
  const stats = await (await page.request.get(base + '/api/stats')).json();
  check(stats.bundled_model === true && stats.real_photos === true,
    `/api/stats: bundled_model ${stats.bundled_model}, real_photos ${stats.real_photos}`);
  const notice = page.locator('#notice');
  check(await notice.isVisible(), 'the banner shows');
  check((await notice.textContent()).includes('clipdb models get ViT-B-16-SigLIP2'),
    'the banner names the command that gets a real model');
  check(await notice.getAttribute('role') === 'status', 'the banner is announced (role=status)');
  check(await page.locator('#notice code').count() === 1 &&
    await page.locator('#notice *').count() === 3, 'the banner holds its static markup only');
  await page.locator('#notice-close').click();
  check(!(await notice.isVisible()), 'the banner is dismissed');
  await page.reload({ waitUntil: 'networkidle' });
  await page.waitForFunction(
    () => document.getElementById('library').textContent.includes('photos'));
  check(!(await notice.isVisible()), 'and stays dismissed after a reload');

  // 1. a query typed into the box (it has the focus at first: Esc leaves it, / comes back)
  check(await page.evaluate(() => document.activeElement.id === 'q'), 'the search box has the focus');
  await page.keyboard.press('Escape');
  await page.keyboard.press('/');
  check(await page.evaluate(() => document.activeElement.id === 'q'), '"/" focuses the search box');
  await page.keyboard.type('a red circle');
  await page.keyboard.press('Enter');
  await thumbsLoaded(8);
  const tiles = await page.locator('.tile').count();
  check(tiles >= 8, `results: ${tiles} tiles with their thumbnails loaded`);
  const api = await (await page.request.get(base + '/api/search?q=a%20red%20circle&k=40')).json();
  const shown = await page.$$eval('.tile .score', (s) => s.map((x) => x.textContent));
  check(shown[0] === api.results[0].score.toFixed(3), `the first score ${shown[0]} is the API's (${api.results[0].score})`);
  const hash = await page.evaluate(() => location.hash);
  check(hash.includes('q=a+red+circle'), `the query is in the URL (${hash})`);
  await page.mouse.move(5, 5);
  await page.waitForTimeout(600); // the tiles' fade-in
  await page.screenshot({ path: join(out, 'results.png') });
  await page.emulateMedia({ colorScheme: 'dark' });
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(out, 'results-dark.png') });
  await page.emulateMedia({ colorScheme: 'light' });

  // 1b. Newest: the same query by capture time (the file time where a photo has none),
  // a heading where the day changes; then back to the best match, without headings
  await page.selectOption('#sort', 'taken');
  await page.waitForFunction(() => location.hash.includes('sort=taken'));
  await thumbsLoaded(8);
  const days = await page.$$eval('.day', (d) => d.map((x) => x.textContent));
  check(days.length >= 1, `Newest: a date heading over the hits (${days.join(', ')})`);
  await page.selectOption('#sort', 'score');
  await page.waitForFunction(() => !location.hash.includes('sort='));
  await thumbsLoaded(8);
  check(await page.locator('.day').count() === 0, 'Best match: no date headings');

  // 1c. copies: the photo that has an exact copy (scans/copy_of_6) is one tile with a
  // count badge; "Group copies" off shows both tiles (and puts copies=1 in the URL), as
  // the API's collapse=0 gives them; on again, one tile
  const full = await (await page.request.get(base + '/api/search?q=a%20shape&k=200&collapse=0')).json();
  const copy = full.results.find((h) => h.path.includes('/copy_of_6.'));
  const orig = copy && full.results.find((h) => /\/img_0000006\./.test(h.path));
  check(copy && orig, 'the API (collapse=0) lists the photo and its copy');
  if (copy && orig) {
    await page.goto(`${base}/#like=${orig.id}`, { waitUntil: 'networkidle' });
    await thumbsLoaded(2);
    const kept = await (await page.request.get(`${base}/api/search?image_id=${orig.id}&k=5`)).json();
    const first = kept.results[0];
    check(first.duplicates === 1 && first.copies.length === 1 &&
      [orig.id, copy.id].includes(first.id) && [orig.id, copy.id].includes(first.copies[0]),
      `the API collapses the two into one hit (${first.id}, copies ${JSON.stringify(first.copies)})`);
    const srcs = await page.$$eval('.tile img', (t) => t.map((x) => x.getAttribute('src')));
    const both = srcs.filter((x) => x === `/api/thumb/${orig.id}` || x === `/api/thumb/${copy.id}`);
    check(both.length === 1, `grouped: one tile for the two (${both.join(', ')})`);
    check(await page.locator('.tile').first().locator('.dups').textContent() === '+1',
      'its tile has a badge: +1');
    await page.waitForTimeout(600);
    await page.screenshot({ path: join(out, 'copies-grouped.png') });
    await page.locator('#collapse').uncheck();
    await page.waitForFunction(() => location.hash.includes('copies=1'));
    await page.waitForFunction((ids) => {
      const s = [...document.querySelectorAll('.tile img')].map((x) => x.getAttribute('src'));
      return ids.every((id) => s.includes('/api/thumb/' + id));
    }, [orig.id, copy.id], { timeout: 20000 });
    check(await page.locator('.tile .dups').count() === 0,
      '"Group copies" off: both tiles, no badge');
    await page.locator('#collapse').check();
    await page.waitForFunction(() => !location.hash.includes('copies='));
    await page.waitForFunction(() => document.querySelectorAll('.tile .dups').length === 1,
      null, { timeout: 20000 });
    check(true, '"Group copies" on again: one tile with its badge');
  }

  // 1d. the duplicates view (#dups): one row per group of /api/duplicates, the copy and
  // its original together, the suggested keeper marked
  const dups = await (await page.request.get(base + '/api/duplicates')).json();
  await page.goto('about:blank'); // a fresh load: #dups is read when the page starts
  await page.goto(`${base}/#dups`, { waitUntil: 'networkidle' });
  await page.waitForFunction(() => document.querySelectorAll('.dup-group').length > 0,
    null, { timeout: 30000 });
  const groups = await page.locator('.dup-group').count();
  check(groups === dups.groups.length && groups >= 1,
    `the duplicates view shows the ${dups.groups.length} group(s) of /api/duplicates (${groups})`);
  if (copy && orig) {
    const hrefs = await page.$$eval('.dup-group', (g) => g.map((x) =>
      [...x.querySelectorAll('a.dup-file')].map((a) => a.getAttribute('href'))));
    const route = (h, id) => h.some((x) => x.split('?')[0] === `/api/file/${id}`); // ?db=0
    check(hrefs.some((h) => route(h, orig.id) && route(h, copy.id)),
      'a group holds the photo and its copy');
    check(await page.locator('.dup-file.keep').count() === groups, 'each group marks one keeper');
  }
  await page.screenshot({ path: join(out, 'duplicates.png') });
  await page.goto('about:blank');
  await page.goto(`${base}/#q=a+red+circle`, { waitUntil: 'networkidle' });
  await thumbsLoaded(8);

  // 2. more like this, on the third hit
  const third = page.locator('.tile').nth(2);
  const thirdId = (await third.locator('img').getAttribute('src')).split('/').pop();
  await third.hover();
  await third.locator('.like').click();
  await page.waitForFunction(() => document.getElementById('status').textContent.startsWith('Photos like'));
  await thumbsLoaded(6);
  const firstSrc = await page.locator('.tile img').first().getAttribute('src');
  check(firstSrc === `/api/thumb/${thirdId}`, `"more like this" puts the photo itself first (${firstSrc})`);
  const firstScore = parseFloat(await page.locator('.tile .score').first().textContent());
  check(firstScore > 0.99, `... at a score of ${firstScore}`);
  check(await page.locator('#chip').isVisible(), 'the example photo shows in the search box');
  await page.waitForTimeout(600);
  await page.screenshot({ path: join(out, 'more-like-this.png') });

  // 3. the viewer: the original, keyboard navigation
  await page.locator('.tile').nth(1).click();
  await page.waitForFunction(() => /\/api\/file\/\d+$/.test(document.getElementById('v-img').src), null, { timeout: 10000 });
  check(await page.locator('#viewer').isVisible(), 'a click opens the original in the viewer');
  await page.waitForFunction(() => document.getElementById('v-img').complete && document.getElementById('v-img').naturalWidth > 0);
  await page.waitForTimeout(300);
  await page.screenshot({ path: join(out, 'viewer.png') });
  await page.keyboard.press('ArrowRight');
  await page.waitForFunction(() => document.getElementById('v-path').textContent.length > 0);
  await page.keyboard.press('Escape');
  check(!(await page.locator('#viewer').isVisible()), 'Esc closes the viewer');

  // 4. filters from the keyboard: a minimum score, a folder
  await page.keyboard.press('Escape'); // the example chip: back to text
  await page.locator('#q').fill('a blue square');
  await page.keyboard.press('Enter');
  await thumbsLoaded(4);
  await page.locator('#min').focus();
  await page.keyboard.type('0.3');
  await page.keyboard.press('Tab');
  await page.waitForFunction(() => document.getElementById('status').textContent.includes('0.3'));
  await page.waitForTimeout(300);
  const scores = await page.$$eval('.tile .score', (s) => s.map((x) => parseFloat(x.textContent)));
  check(scores.every((x) => x >= 0.3), `min score 0.3: ${scores.length} hits, all >= 0.3`);
  await page.locator('#min').fill('');
  await page.locator('#min').dispatchEvent('change');
  await page.keyboard.press('Escape');
  await page.keyboard.press('f');
  check(await page.evaluate(() => document.activeElement.id === 'under'), '"f" focuses the folder filter');
  const folder = await page.$$eval('#under option', (o) => o.map((x) => x.value).filter(Boolean)[0]);
  await page.selectOption('#under', folder);
  await page.waitForFunction((f) => document.getElementById('status').textContent.includes(f), folder);
  await thumbsLoaded(2);
  const paths = await page.$$eval('.tile', (t) => t.length);
  check(paths > 0, `folder filter ${folder}: ${paths} hits`);

  // ... and the folders inside it (from the catalog), one level at a time
  const trips = folder + '/trips';
  const hasOption = (v) => page.waitForFunction(
    (x) => [...document.querySelectorAll('#under option')].some((o) => o.value === x), v, { timeout: 10000 });
  await hasOption(trips);
  let opts = await page.$$eval('#under option', (o) => o.map((x) => x.value));
  check(opts.includes(folder + '/scans') && !opts.includes(trips + '/2024'),
    `picking the root lists the folders in it (${opts.filter((x) => x.startsWith(folder + '/')).join(', ')})`);
  await page.selectOption('#under', trips);
  await page.waitForFunction((f) => document.getElementById('status').textContent.includes(f), trips);
  await thumbsLoaded(3);
  const inTrips = await page.$$eval('.tile img', (t) => t.map((x) => x.getAttribute('src').split('/').pop()));
  const apiTrips = await (await page.request.get(
    `${base}/api/search?q=a%20blue%20square&k=40&under=${encodeURIComponent(trips)}`)).json();
  check(inTrips.length === 3 && inTrips.join() === apiTrips.results.map((h) => String(h.id)).join(),
    `folder filter ${trips}: the 3 photos in it and below, as the API gives them (${inTrips.join()})`);
  await hasOption(trips + '/2024');
  const sub = await page.$$eval('#under option', (o) => o.map((x) => x.textContent));
  check(sub.some((t) => /^\u00a0+2023\/\u2026/.test(t)) && sub.some((t) => /^\u00a0+2024 /.test(t)),
    'picking trips lists 2023 (with folders below it) and 2024, indented');
  await page.waitForTimeout(600);
  await page.screenshot({ path: join(out, 'folder.png') });
  await page.selectOption('#under', '');

  // 5. an image dropped on the page
  await page.evaluate(async () => {
    const blob = await (await fetch('/api/file/1')).blob();
    const file = new File([blob], 'dropped.jpg', { type: blob.type || 'image/jpeg' });
    const dt = new DataTransfer();
    dt.items.add(file);
    for (const type of ['dragenter', 'dragover', 'drop'])
      window.dispatchEvent(new DragEvent(type, { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  await page.waitForFunction(() => document.getElementById('status').textContent.includes('the image you gave'));
  await thumbsLoaded(4);
  const dropped = await page.locator('.tile img').first().getAttribute('src');
  check(dropped === '/api/thumb/1', `a dropped image finds itself first (${dropped})`);
  await page.waitForTimeout(600);
  await page.screenshot({ path: join(out, 'dropped.png') });

  // 6. infinite scroll: more tiles arrive at the bottom
  // (The count is taken once the new query's first page is shown: the dropped image's
  // 40 tiles are still there until then, and a scroll to their bottom would be undone
  // when the grid is replaced. The page is scrolled to its bottom again on every poll,
  // as a user would keep scrolling: the bottom moves while the thumbnails lay out.)
  await page.locator('#q').fill('a shape');
  await page.keyboard.press('Enter');
  await page.waitForFunction(
    () => document.getElementById('status').textContent.includes('a shape'));
  await thumbsLoaded(8);
  const before = await page.locator('.tile').count();
  await page.waitForFunction((n) => {
    window.scrollTo(0, document.body.scrollHeight);
    return document.querySelectorAll('.tile').length > n;
  }, before, { timeout: 60000 }) // a loaded CI machine: the next page can take long
    .then(() => check(true, 'scrolling down loads the next page'),
      async () => {
        const why = await page.evaluate(() => `status "${document.getElementById('status').textContent}"`
          + `, ${document.querySelectorAll('.tile').length} tiles, scrollY ${Math.round(scrollY)}`
          + ` of ${document.body.scrollHeight}, #more at ${Math.round(document.getElementById('more')
            .getBoundingClientRect().top)} in ${innerHeight}`);
        check(before < 40, `scrolling: ${before} hits (all of them on the first page); ${why}`);
      });

  // 7. a toast goes with the next search; a failed search says so once
  await page.evaluate(() => {
    const dt = new DataTransfer();
    dt.items.add(new File(['not a photo'], 'notes.txt', { type: 'text/plain' }));
    window.dispatchEvent(new DragEvent('drop', { dataTransfer: dt, bubbles: true, cancelable: true }));
  });
  check(await page.locator('#toast').isVisible(), 'a text file dropped on the page gets a toast');
  await page.locator('#q').fill('a green triangle');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.getElementById('status').textContent.includes('a green triangle'));
  check(!(await page.locator('#toast').isVisible()), 'the next search takes the toast away');
  expect400 = true;
  await page.locator('#q').fill('a - a');
  await page.keyboard.press('Enter');
  await page.waitForFunction(() => document.getElementById('status').textContent.startsWith('Search failed'));
  await page.waitForTimeout(300);
  const failMsg = (await page.locator('#status b').textContent()).trim();
  const shownTimes = await page.evaluate((m) => document.body.innerText.split(m).length - 1, failMsg);
  check(failMsg.length > 0 && shownTimes === 1 && !(await page.locator('#toast').isVisible()),
    `a failed search shows its error once, in the status line ("${failMsg}": ${shownTimes}x, no toast)`);
  await page.screenshot({ path: join(out, 'search-failed.png') });
  expect400 = false;

  // 8. photos browsers cannot show: the viewer shows the server's JPEG preview of the
  // original (2048 px long side at most), not the thumbnail scaled up
  const all = await (await page.request.get(base + '/api/search?q=a%20red%20circle&k=100')).json();
  const tif = all.results.find((h) => h.path.endsWith('/scan.tif'));
  const heic = all.results.find((h) => h.path.endsWith('/phone.heic'));
  check(tif && heic && !tif.browser_shows && !heic.browser_shows && tif.preview === `/api/preview/${tif.id}`,
    'the TIFF and the HEIC are hits, with a preview and browser_shows false');
  for (const [h, w, ht, shot] of [[tif, 2048, 1365, 'viewer-tiff.png'], [heic, 90, 120, '']]) {
    if (!h) continue;
    await page.goto('about:blank');
    await page.goto(`${base}/#like=${h.id}`, { waitUntil: 'networkidle' }); // the photo itself first
    await thumbsLoaded(1);
    await page.locator('.tile').first().click();
    await page.waitForFunction((id) => {
      const v = document.getElementById('v-img');
      return v.src.endsWith('/api/preview/' + id) && v.complete && v.naturalWidth > 0;
    }, h.id, { timeout: 30000 });
    const dims = await page.evaluate(() => {
      const v = document.getElementById('v-img');
      return [v.naturalWidth, v.naturalHeight];
    });
    check(dims[0] === w && dims[1] === ht, `${baseName(h.path)} in the viewer: its ${dims.join('x')} preview (want ${w}x${ht})`);
    if (shot) {
      await page.waitForTimeout(300);
      await page.screenshot({ path: join(out, shot) });
    }
    await page.keyboard.press('Escape');
  }

  check(errors.length === 0, `no script errors${errors.length ? ': ' + errors.join(' | ') : ''}`);
} catch (e) {
  check(false, `the page: ${e.message}`);
  await page.screenshot({ path: join(out, 'failure.png') }).catch(() => {});
} finally {
  await ctx.close();
  rmSync(profile, { recursive: true, force: true });
}
process.exit(failed ? 1 : 0);
