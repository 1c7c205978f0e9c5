// The dashboard at phone, tablet and desktop widths (issue 38 item 3): every slice table stays
// inside its GPU card and every card inside the page; pod, namespace, node and GPU names wrap
// only after their own separators ('-', '.', '/'), never mid-word ("trai / n"); every list has
// an empty state. Screenshots per width under the test artifacts.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { badLineBreaks, launch, open, overflowing, screenshot, seedGpus, waitFor } from './lib.mjs';

const allGpus = seedGpus().flatMap((n) => n.gpus);
const longPod = 'llama-finetune.trainer-7f9c4b-0';
const browsers = [];
after(async () => { for (const b of browsers) await b.close(); });

async function openAt(width, height) {
  const b = await launch({ user: 'alice', width, height });
  browsers.push(b);
  const page = await open(b.context, 'dashboard.html');
  await waitFor(page, (n) => document.querySelectorAll('article.gpu').length === n, allGpus.length,
                `${allGpus.length} GPU cards`);
  return page;
}

for (const [width, height] of [[390, 844], [768, 1024], [1280, 900]]) {
  test(`${width} px: tables inside their cards, names broken only at separators`, async () => {
    const page = await openAt(width, height);
    // The seed's long pod name is on the page, so the breaks below are exercised.
    assert.ok((await page.locator('table.slices td').allTextContents()).includes(longPod));
    const pageWidth = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(pageWidth <= width, `the page is ${pageWidth} px wide at a ${width} px viewport`);
    assert.deepEqual(await overflowing(page, 'table.slices', 'article.gpu'), []);
    assert.deepEqual(await overflowing(page, 'article.gpu', 'section.node'), []);
    assert.deepEqual(await overflowing(page, '.bar', 'article.gpu'), []);
    assert.deepEqual(await badLineBreaks(page, 'table.slices td, table.slices th, section.node h3 > .name, article.gpu h4 > .name, p.uuid'), []);
    await screenshot(page, `ui-dashboard-${width}px.png`);
    assert.deepEqual(page.problems, []);
  });
}

test('a narrow card breaks the long pod name at its separators only', async () => {
  // 300 px of card: the name cannot stay on one line, so it must wrap, and only after '-' or '.'.
  const page = await openAt(390, 844);
  await page.addStyleTag({ content: 'article.gpu { width: 300px; }' });
  const cell = page.locator('table.slices td', { hasText: longPod });
  const lines = await cell.evaluate((td) => {
    const tops = new Set();
    const walker = document.createTreeWalker(td, NodeFilter.SHOW_TEXT);
    for (let n = walker.nextNode(); n; n = walker.nextNode()) {
      for (let i = 0; i < n.data.length; i += 1) {
        const r = document.createRange();
        r.setStart(n, i);
        r.setEnd(n, i + 1);
        tops.add(Math.round(r.getClientRects()[0].top));
      }
    }
    return tops.size;
  });
  assert.ok(lines > 1, `the long pod name should wrap in a 300 px card, it takes ${lines} line(s)`);
  assert.deepEqual(await badLineBreaks(page, 'table.slices td'), []);
  assert.deepEqual(await overflowing(page, 'table.slices', 'article.gpu'), []);
});

test('every list has an empty state', async () => {
  const page = await openAt(1280, 900);
  // A GPU with no slices says so.
  const free = allGpus.filter((g) => g.slices.length === 0);
  assert.ok(free.length > 0, 'the seed has a GPU without slices');
  for (const g of free) {
    const card = page.locator(`article[aria-label="GPU ${g.index} ${g.uuid}"]`);
    assert.equal(await card.locator('p.empty-state').textContent(), 'No slices: nothing runs on this GPU.');
  }
  // Filters that leave nothing say which filters.
  await page.fill('#filter-node', 'no-such-node');
  await waitFor(page, () => document.getElementById('nodes-empty') !== null, null, 'the empty state of the node list');
  assert.equal(await page.locator('#nodes-empty').textContent(), 'No node matches the filters (name contains "no-such-node").');
  assert.equal(await page.locator('section.node').count(), 0);
  assert.match(await page.locator('#summary').textContent(), /^0 node\(s\), 0 GPU\(s\) shown/);
  await screenshot(page, 'ui-dashboard-empty.png');
  await page.fill('#filter-node', '');
  await waitFor(page, () => document.getElementById('nodes-empty') === null, null, 'the nodes back');
});
