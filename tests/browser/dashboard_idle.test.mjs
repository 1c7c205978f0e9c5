// The dashboard's idle holders in Chromium (docs/ui.md "Idle holders"): fresh
// `fracgpu.io/idle-holders` records written on two seeded nodes (as the node agent writes them,
// pods named by UID), then per GPU the badge (count, GiB held, longest idle) and, for the
// signed-in alice, the holders of team-a by name (she may list notebooks there) but not team-b's;
// the badge and list stay inside their GPU card at 390 and 1280 px. Expected texts are computed
// here from the seed and the record, not read from the UI.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { API_URL, launch, open, overflowing, screenshot, seedGpus, waitFor } from './lib.mjs';

const FAKE_API_URL = process.env.FRACGPU_FAKE_API_URL;

let browser;
before(async () => { browser = await launch({ user: 'alice', width: 1280, height: 900 }); });
after(async () => { await browser?.close(); });

// The seeded GPU (node and UUID) where `ns/pod` holds its slice.
function gpuOf(ns, pod) {
  for (const n of seedGpus()) {
    for (const g of n.gpus) {
      if (g.slices.some((s) => s.pod === pod && s.namespace === ns)) return { node: n.name, gpu: g };
    }
  }
  assert.fail(`${ns}/${pod} holds no slice in seed.json`);
}

async function uidOf(ns, pod) {
  const r = await fetch(`${API_URL}/api/v1/namespaces/${ns}/pods/${pod}`);
  assert.equal(r.status, 200, `GET pod ${ns}/${pod}`);
  return (await r.json()).metadata.uid;
}

async function annotate(node, value) {
  const r = await fetch(`${FAKE_API_URL}/api/v1/nodes/${node}`, {
    method: 'PATCH',
    headers: { 'content-type': 'application/merge-patch+json' },
    body: JSON.stringify({ metadata: { annotations: { 'fracgpu.io/idle-holders': value } } }),
  });
  assert.equal(r.status, 200, `PATCH node ${node}: ${await r.text()}`);
}

test('idle holders: a badge per GPU, names only in the namespaces the viewer may see', async () => {
  assert.ok(FAKE_API_URL, 'FRACGPU_FAKE_API_URL is set by ui_browser_harness');
  const infer = gpuOf('team-a', 'infer');
  const train = gpuOf('team-b', 'train');
  const now = Math.floor(Date.now() / 1000);
  // infer: 10 GiB idle 3 h 10 min (11400 s); train: 4 GiB idle 10 min. Entries per node.
  const entries = new Map();
  const add = (node, e) => entries.set(node, [...(entries.get(node) ?? []), e]);
  add(infer.node, `${await uidOf('team-a', 'infer')}:${infer.gpu.uuid}:10240:11400`);
  add(train.node, `${await uidOf('team-b', 'train')}:${train.gpu.uuid}:4096:600`);
  for (const [node, list] of entries) await annotate(node, `${now};${list.join(',')}`);

  const card = (g) => `article[aria-label="GPU ${g.gpu.index} ${g.gpu.uuid}"]`;
  for (const width of [390, 1280]) {
    const page = await open(browser.context, 'dashboard.html');
    await page.setViewportSize({ width, height: 900 });
    await waitFor(page, (sel) => document.querySelector(`${sel} .badge.idle`) !== null, card(infer),
                  'the idle badge of infer\'s GPU');
    // Less than a minute passes between the write and the listing: the minutes do not change.
    assert.equal(await page.locator(`${card(infer)} .badge.idle`).textContent(),
                 'idle: 1 slice, 10.0 GiB held, longest 3 h 10 min');
    assert.deepEqual(await page.locator(`${card(infer)} ul.idle-holders li`).allTextContents(),
                     ['team-a/infer 10.0 GiB, idle 3 h 10 min']);
    assert.equal(await page.locator(`${card(train)} .badge.idle`).textContent(),
                 'idle: 1 slice, 4.0 GiB held, longest 10 min');
    assert.equal(await page.locator(`${card(train)} ul.idle-holders`).count(), 0, 'team-b is not named to alice');
    assert.match(await page.locator(`${card(train)} .badge.idle`).getAttribute('title'), /1 in namespaces you may not see/);
    // GPUs the records do not name carry no idle badge.
    const gpus = seedGpus().flatMap((n) => n.gpus);
    assert.equal(await page.locator('.badge.idle').count(), new Set([infer.gpu.uuid, train.gpu.uuid]).size);
    assert.equal(await page.locator('article.gpu').count(), gpus.length);
    assert.deepEqual(await overflowing(page, '.badge.idle', 'article.gpu'), []);
    assert.deepEqual(await overflowing(page, 'ul.idle-holders', 'article.gpu'), []);
    if (width === 1280) await screenshot(page, 'ui-dashboard-idle.png');
    assert.deepEqual(page.problems, []);
    await page.close();
  }
});
