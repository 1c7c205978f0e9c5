// The GPU dashboard in Chromium: every node and GPU of seed.json with its memory and cores
// bars (values, texts and drawn widths computed here from the seed), the slices on each GPU,
// health and cordon badges, the filters; a screenshot for people to look at.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { SEED, expectedSliceRows, launch, open, screenshot, seedGpus, seedTypes, waitFor } from './lib.mjs';

let browser;
before(async () => { browser = await launch({ user: 'alice', width: 1366, height: 900 }); });
after(async () => { await browser?.close(); });

const nodes = seedGpus();
const allGpus = nodes.flatMap((n) => n.gpus);
const fmt = (n) => n.toLocaleString('en-US');
const pct = (used, total) => Math.min(100, Math.round((used * 100) / total));

async function openDashboard() {
  const page = await open(browser.context, 'dashboard.html');
  await waitFor(page, (n) => document.querySelectorAll('article.gpu').length === n, allGpus.length,
                `${allGpus.length} GPU cards`);
  return page;
}

test('every GPU of the seeded cluster with its bars and slices', async () => {
  const page = await openDashboard();
  // Node sections in name order, each with its GPUs.
  const sections = await page.locator('section.node').evaluateAll((ss) => ss.map((s) => s.getAttribute('aria-label')));
  assert.deepEqual(sections, nodes.map((n) => `Node ${n.name}`));
  for (const n of nodes) {
    const head = await page.locator(`section[aria-label="Node ${n.name}"] h3`).textContent();
    assert.equal(head.includes('node cordoned'), n.unschedulable, `${n.name} heading: ${head}`);
    assert.equal(head.includes('no GPUs registered'), !n.gpuReady, `${n.name} heading: ${head}`);
    for (const g of n.gpus) {
      const card = page.locator(`section[aria-label="Node ${n.name}"] article[aria-label="GPU ${g.index} ${g.uuid}"]`);
      assert.equal(await card.count(), 1, `card of ${g.uuid}`);
      for (const [label, used, total, unit] of [['Memory', g.usedMem, g.devmem, 'MiB'], ['Cores', g.usedCores, g.devcore, '%']]) {
        const meter = card.locator(`[role="meter"][aria-label="${label}"]`);
        const text = `${label}: ${fmt(used)} / ${fmt(total)} ${unit} (${pct(used, total)} %)`;
        assert.equal(await meter.getAttribute('aria-valuenow'), String(used), `${g.uuid} ${label}`);
        assert.equal(await meter.getAttribute('aria-valuemax'), String(total), `${g.uuid} ${label}`);
        assert.equal(await card.locator('.bar-label', { hasText: `${label}:` }).textContent(), text);
        // The drawn bar: fill width / track width = used / total (within a pixel).
        const { fill, track } = await meter.evaluate((m) => ({
          fill: m.firstElementChild.getBoundingClientRect().width, track: m.clientWidth }));
        assert.ok(Math.abs(fill - (track * pct(used, total)) / 100) <= 1,
                  `${g.uuid} ${label} bar ${fill}px of ${track}px, want ${pct(used, total)} %`);
      }
      const badges = await card.locator('.badge').allTextContents();
      assert.deepEqual(badges, [g.health ? 'healthy' : 'unhealthy', ...(g.cordoned ? ['cordoned'] : []),
                                `${g.used}/${g.count} slices`]);
      // alice sees the pods of the namespaces she may list notebooks in; the others' slices
      // show their size and cores only.
      const rows = await card.locator('table.slices tbody tr').evaluateAll((trs) =>
        trs.map((tr) => Array.from(tr.cells, (td) => td.textContent)));
      assert.deepEqual(rows.sort(), expectedSliceRows(g, 'alice'));
    }
  }
  const total = allGpus.reduce((s, g) => s + g.devmem, 0);
  const used = allGpus.reduce((s, g) => s + g.usedMem, 0);
  assert.equal(await page.locator('#summary').textContent(),
               `${nodes.length} node(s), ${allGpus.length} GPU(s) shown; cluster memory allocated ${fmt(used)} of ${fmt(total)} MiB.`);
  await screenshot(page, 'ui-dashboard.png');
  assert.deepEqual(page.problems, []);
});

test('nobody signed in: every slice without pod and namespace, the figures whole', async () => {
  const anonymous = await launch({ user: null, width: 1366, height: 900 });
  try {
    const page = await open(anonymous.context, 'dashboard.html');
    await waitFor(page, (n) => document.querySelectorAll('article.gpu').length === n, allGpus.length,
                  `${allGpus.length} GPU cards`);
    for (const g of allGpus) {
      const card = page.locator(`article[aria-label="GPU ${g.index} ${g.uuid}"]`);
      const rows = await card.locator('table.slices tbody tr').evaluateAll((trs) =>
        trs.map((tr) => Array.from(tr.cells, (td) => td.textContent)));
      assert.deepEqual(rows.sort(), expectedSliceRows(g, null), g.uuid);
      assert.equal(await card.locator('tr.anon').count(), g.slices.length, `${g.uuid}: every row marked anonymous`);
    }
    // No pod or namespace of the seed anywhere on the page.
    const text = await page.locator('body').textContent();
    for (const pod of SEED.pods) {
      assert.ok(!text.includes(pod.metadata.name), `${pod.metadata.name} on the page`);
      assert.ok(!text.includes(pod.metadata.namespace), `${pod.metadata.namespace} on the page`);
    }
    assert.deepEqual(page.problems, []);
  } finally {
    await anonymous.close();
  }
});

test('filters by GPU type and by node name', async () => {
  const page = await openDashboard();
  const options = await page.locator('#filter-type option').allTextContents();
  assert.deepEqual(options, ['all types', ...seedTypes()]);
  const h100 = seedTypes().find((t) => t.includes('H100'));
  await page.selectOption('#filter-type', h100);
  const want = nodes.filter((n) => n.gpus.some((g) => g.type === h100));
  await waitFor(page, (n) => document.querySelectorAll('section.node').length === n, want.length, 'the type filter');
  assert.equal(await page.locator('article.gpu').count(), want.reduce((s, n) => s + n.gpus.filter((g) => g.type === h100).length, 0));
  await page.selectOption('#filter-type', '');
  await page.fill('#filter-node', 'node-b');
  await waitFor(page, () => document.querySelectorAll('section.node').length === 1, null, 'the node filter');
  assert.equal(await page.locator('section.node').getAttribute('aria-label'), 'Node node-b');
});
