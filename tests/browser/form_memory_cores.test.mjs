// The notebook form in Chromium, slicing by memory and by cores: fill it, see the YAML preview
// and "fits now on N GPUs of M nodes" (N, M from an independent fit on seed.json), create,
// check the Notebook the fake API server received (docs/design/CONTRACT.md §1); then the notebook list.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  checkPreview, createAndCheck, createdNotebooks, expectedFit, fillForm, launch, openForm, waitFor,
} from './lib.mjs';

const T4 = 'NVIDIA-Tesla T4';

let browser;
before(async () => { browser = await launch({ user: 'alice' }); });
after(async () => { await browser?.close(); });

test('memory: 8 GiB with 30 % of the cores, never a T4, binpack GPUs', async () => {
  const page = await openForm(browser.context);
  const spec = { name: 'nb-mem', namespace: 'team-a', image: 'jupyter-scipy:v1', cpu: '1', memory: '2Gi', gpus: 1,
                 mode: 'memory', memValue: 8, memUnit: 'GiB', memCores: 30, nouseTypes: [T4], gpuPolicy: 'binpack' };
  await fillForm(page, spec);
  await checkPreview(page, {
    yamlLines: ['nvidia.com/gpumem: "8192"', 'nvidia.com/gpucores: "30"', `nvidia.com/nouse-gputype: ${T4}`,
                'hami.io/gpu-scheduler-policy: binpack'],
    fit: expectedFit({ gpus: 1, memMiB: 8 * 1024, cores: 30, nouseTypes: [T4] }),
  });
  await createAndCheck(page, spec, { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '8192', 'nvidia.com/gpucores': '30' },
                       { 'nvidia.com/nouse-gputype': T4, 'hami.io/gpu-scheduler-policy': 'binpack' });
});

test('memory: MiB without cores is time-shared (no gpucores)', async () => {
  const page = await openForm(browser.context);
  const spec = { name: 'nb-mib', namespace: 'team-a', image: 'jupyter-scipy:v1', cpu: '1', memory: '2Gi', gpus: 1,
                 mode: 'memory', memValue: 3000, memUnit: 'MiB', useUuids: ['GPU-a1', 'GPU-c0'] };
  await fillForm(page, spec);
  await checkPreview(page, {
    yamlLines: ['nvidia.com/gpumem: "3000"', 'nvidia.com/use-gpuuuid: GPU-a1,GPU-c0'],
    fit: expectedFit({ gpus: 1, memMiB: 3000, useUuids: ['GPU-a1', 'GPU-c0'] }),
  });
  assert.ok(!(await page.locator('#yaml').textContent()).includes('gpucores'));
  await createAndCheck(page, spec, { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '3000' },
                       { 'nvidia.com/use-gpuuuid': 'GPU-a1,GPU-c0' });
});

test('cores: 40 % with 4096 MiB, not GPU-a0, spread nodes', async () => {
  const page = await openForm(browser.context);
  const spec = { name: 'nb-cores', namespace: 'team-a', image: 'jupyter-scipy:v1', cpu: '500m', memory: '1Gi', gpus: 1,
                 mode: 'cores', coresValue: 40, coresMem: 4096, nouseUuids: ['GPU-a0'], nodePolicy: 'spread' };
  await fillForm(page, spec);
  await checkPreview(page, {
    yamlLines: ['nvidia.com/gpucores: "40"', 'nvidia.com/gpumem: "4096"', 'nvidia.com/nouse-gpuuuid: GPU-a0',
                'hami.io/node-scheduler-policy: spread'],
    fit: expectedFit({ gpus: 1, memMiB: 4096, cores: 40, nouseUuids: ['GPU-a0'] }),
  });
  await createAndCheck(page, spec, { 'nvidia.com/gpu': '1', 'nvidia.com/gpucores': '40', 'nvidia.com/gpumem': '4096' },
                       { 'nvidia.com/nouse-gpuuuid': 'GPU-a0', 'hami.io/node-scheduler-policy': 'spread' });
});

test('cores alone take the whole card\'s memory', async () => {
  const page = await openForm(browser.context);
  const spec = { name: 'nb-cores-only', namespace: 'team-a', image: 'jupyter-scipy:v1', cpu: '1', memory: '2Gi', gpus: 1,
                 mode: 'cores', coresValue: 30 };
  await fillForm(page, spec);
  await checkPreview(page, {
    yamlLines: ['nvidia.com/gpucores: "30"'],
    fit: expectedFit({ gpus: 1, cores: 30 }),
  });
  assert.ok(!(await page.locator('#yaml').textContent()).includes('gpumem'));
  await createAndCheck(page, spec, { 'nvidia.com/gpu': '1', 'nvidia.com/gpucores': '30' }, {});
});

test('the notebook list shows what was created, with its state', async () => {
  const page = await openForm(browser.context);
  await fillForm(page, { namespace: 'team-a' });
  await page.click('#refresh-notebooks');
  const names = (await createdNotebooks('team-a')).map((nb) => nb.metadata.name);
  assert.equal(names.length, 4);  // the four created above
  await waitFor(page, (n) => document.querySelectorAll('#notebooks tbody tr:not(.empty)').length === n, names.length,
                'one row per created notebook');
  const rows = await page.locator('#notebooks tbody tr').evaluateAll((trs) =>
    trs.map((tr) => Array.from(tr.cells).map((td) => td.textContent)));
  assert.deepEqual(rows.map((r) => r[0]).sort(), [...names].sort());
  for (const r of rows) assert.equal(r[1], 'Pending');
  assert.deepEqual(rows.find((r) => r[0] === 'nb-mem').slice(2),
                   ['jupyter-scipy:v1', 'gpu=1 gpucores=30 gpumem=8192']);
});
