// `fracgpu ui --dashboard-only` shows only the dashboard (issue 38 item 3): "/" is the
// dashboard, its navigation offers no "New notebook", and the form's page sends the browser to
// the dashboard; at phone and desktop widths, with screenshots.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import { UI_URL, expectedSliceRows, launch, open, screenshot, seedGpus, waitFor } from './lib.mjs';

const allGpus = seedGpus().flatMap((n) => n.gpus);
const browsers = [];
after(async () => { for (const b of browsers) await b.close(); });

for (const [width, height] of [[390, 844], [1280, 900]]) {
  test(`${width} px: only the dashboard`, async () => {
    const b = await launch({ user: 'alice', width, height });
    browsers.push(b);
    const page = await open(b.context, '');
    await waitFor(page, (n) => document.querySelectorAll('article.gpu').length === n, allGpus.length, 'the GPU cards');
    assert.equal(await page.title(), 'GPU dashboard · fracgpu');
    await waitFor(page, () => !document.querySelector('nav a[href="index.html"]'), null, 'no link to the notebook form',
                  async () => page.locator('nav').textContent());
    assert.deepEqual(await page.locator('nav a').allTextContents(), ['GPU dashboard']);
    // --dashboard-only reads no identity: no slice is named, even to alice.
    for (const g of allGpus) {
      const rows = await page.locator(`article[aria-label="GPU ${g.index} ${g.uuid}"] table.slices tbody tr`)
        .evaluateAll((trs) => trs.map((tr) => Array.from(tr.cells, (td) => td.textContent)));
      assert.deepEqual(rows.sort(), expectedSliceRows(g, null), g.uuid);
    }
    await screenshot(page, `ui-dashboard-only-${width}px.png`);
    // The form's address leads to the dashboard.
    await page.goto(`${UI_URL}/index.html`);
    await page.waitForURL(/dashboard\.html$/);
    await waitFor(page, (n) => document.querySelectorAll('article.gpu').length === n, allGpus.length, 'the GPU cards');
    assert.equal(await page.locator('#form').count(), 0);
    // The notebook API says why it is not there (404 with the server's message).
    const r = await fetch(`${UI_URL}/api/notebooks?namespace=team-a`, { headers: { 'kubeflow-userid': 'alice' } });
    assert.equal(r.status, 404);
    assert.deepEqual(page.problems, []);
  });
}
