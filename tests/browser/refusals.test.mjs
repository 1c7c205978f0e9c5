// What the form refuses, in Chromium: a user the API server's SubjectAccessReview denies sees
// the reason and nothing is created; a request that fits nowhere says why per node (reasons
// from an independent fit on seed.json); out-of-range values show the webhook's message.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  createdNotebooks, expectedFit, fillForm, launch, openForm, reviews, screenshot, seedGpus, waitFor, waitForText,
} from './lib.mjs';

let bob;  // allowed nothing (seed.json "allow" lists only alice)
before(async () => { bob = await launch({ user: 'bob' }); });
after(async () => { await bob?.close(); });

test('a user the SubjectAccessReview denies sees why, and nothing is created', async () => {
  const page = await openForm(bob.context);
  await waitForText(page, '#user', 'Signed in as bob');
  const spec = { name: 'nb-bob', namespace: 'team-a', gpus: 1, mode: 'fraction', fraction: '50' };
  await fillForm(page, spec);
  // The preview is for everyone: it reads the cluster, creates nothing.
  await waitFor(page, () => document.getElementById('fit').textContent.startsWith('fits now:'), null,
                'the fit preview');
  await page.click('#create');
  const refusal = 'Not created: user "bob" may not create notebooks (kubeflow.org) in namespace "team-a": no RBAC policy matched';
  await waitForText(page, '#create-result', refusal);
  assert.equal(await page.locator('#create-result').getAttribute('class'), 'no');
  // Listing is refused the same way, and shown.
  await page.click('#refresh-notebooks');
  await waitForText(page, '#notebooks-error',
                    'user "bob" may not list notebooks (kubeflow.org) in namespace "team-a": no RBAC policy matched');
  await screenshot(page, 'ui-form-refused.png');
  assert.deepEqual(await createdNotebooks('team-a'), []);
  const asked = (await reviews()).filter((r) => r.spec.resourceAttributes.verb === 'create');
  assert.equal(asked.length, 1);
  assert.deepEqual(asked[0].spec, { user: 'bob', resourceAttributes: { namespace: 'team-a', verb: 'create',
                                                                       group: 'kubeflow.org', resource: 'notebooks' } });
  assert.deepEqual(page.problems.filter((p) => !p.includes('403')), []);
});

test('a request that fits nowhere shows the reason of every node', async () => {
  const page = await openForm(bob.context);
  // 64 GiB of one GPU: more than any card has free (A100s 40 GiB; GPU-c0 52 GiB free).
  await fillForm(page, { name: 'nb-big', namespace: 'team-a', gpus: 1, mode: 'memory', memValue: 64, memUnit: 'GiB' });
  const fit = expectedFit({ gpus: 1, memMiB: 64 * 1024 });
  assert.equal(fit.nodes, 0);
  await waitForText(page, '#fit', 'fits on no node');
  assert.equal(await page.locator('#fit').getAttribute('class'), 'fit no');
  // The per-node reasons open by themselves when nothing fits.
  assert.equal(await page.locator('#fit-details').evaluate((d) => d.open), true);
  const expected = seedGpus().filter((n) => n.gpuReady).map((n) => `${n.name}: does not fit — ${fit.perNode[n.name]}`);
  await waitFor(page, (want) => JSON.stringify(Array.from(document.querySelectorAll('#fit-nodes li'), (li) => li.textContent)) === want,
                JSON.stringify(expected), `per-node reasons ${JSON.stringify(expected)}`,
                async () => JSON.stringify(await page.locator('#fit-nodes li').allTextContents()));
  assert.ok(await page.locator('#fit-nodes li').first().isVisible());
  await screenshot(page, 'ui-form-fits-nowhere.png');
});

test('more GPUs than any node has: NodeInsufficientDevice', async () => {
  const page = await openForm(bob.context);
  await fillForm(page, { gpus: 4, mode: 'whole' });
  const fit = expectedFit({ gpus: 4 });
  const expected = seedGpus().filter((n) => n.gpuReady).map((n) => `${n.name}: does not fit — ${fit.perNode[n.name]}`);
  await waitForText(page, '#fit', 'fits on no node');
  assert.deepEqual(await page.locator('#fit-nodes li').allTextContents(), expected);
});

test('out-of-range values show the webhook\'s message and no fit', async () => {
  const page = await openForm(bob.context);
  await fillForm(page, { name: 'nb1', gpus: 1, mode: 'cores', coresValue: 150 });
  await waitForText(page, '#errors', 'container "nb1": nvidia.com/gpucores must be an integer 0..100, got "150"');
  // The same message sits next to the field it is about, with that field's label.
  await waitForText(page, '#cores-value-error', 'Cores %: container "nb1": nvidia.com/gpucores must be an integer 0..100, got "150"');
  assert.equal(await page.locator('#cores-value').getAttribute('aria-invalid'), 'true');
  assert.match(await page.locator('#cores-value').getAttribute('aria-describedby'), /cores-value-error/);
  await waitForText(page, '#fit', 'Fix the values above to see where it fits.');
  assert.equal(await page.locator('#fit-nodes li').count(), 0);
  // A bad name is the form's own check (the API answers 400 naming the field).
  await fillForm(page, { name: 'Bad_Name', coresValue: 30 });
  await waitFor(page, () => document.getElementById('errors').textContent.includes('name'), null,
                'an error naming the field "name"', async () => page.locator('#errors').textContent());
  assert.match(await page.locator('#errors').textContent(), /Bad_Name/);
  await waitFor(page, () => (document.getElementById('name-error')?.textContent ?? '').startsWith('Name: name'), null,
                'the name error next to the Name field', async () => page.locator('#errors').textContent());
  assert.equal(await page.locator('#cores-value-error').count(), 0, 'the fixed cores error is gone');
});

test('the form fits a 420 px wide screen', async () => {
  const narrow = await launch({ user: 'bob', width: 420, height: 800 });
  try {
    const page = await openForm(narrow.context);
    await waitFor(page, () => document.getElementById('fit').textContent.startsWith('fits now:'), null, 'the fit preview');
    for (const m of ['fraction', 'memory', 'cores', 'whole']) {
      await page.check(`input[name="mode"][value="${m}"]`);
      const width = await page.evaluate(() => document.documentElement.scrollWidth);
      assert.ok(width <= 420, `mode ${m}: the page is ${width} px wide at a 420 px viewport`);
    }
    await page.click('#advanced summary');
    const width = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(width <= 420, `advanced open: the page is ${width} px wide`);
    await screenshot(page, 'ui-form-420px.png');
  } finally {
    await narrow.close();
  }
});
