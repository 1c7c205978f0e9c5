// The notebook form in Chromium, slicing by fraction (a preset and a custom one): fill it, see
// the YAML preview and "fits now on N GPUs of M nodes" with N and M from an independent fit on
// seed.json (lib.mjs expectedFit), create, and check the Notebook the fake API server received:
// resources and annotations exactly per docs/design/CONTRACT.md §1.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import {
  checkPreview, createAndCheck, expectedFit, fillForm, launch, openForm, screenshot,
} from './lib.mjs';

const A100 = 'NVIDIA-A100-SXM4-40GB';

let browser;
before(async () => { browser = await launch({ user: 'alice' }); });
after(async () => { await browser?.close(); });

test('fraction: ¼ of an A100', async () => {
  const page = await openForm(browser.context);
  const spec = { name: 'nb-frac', namespace: 'team-a', image: 'jupyter-pytorch-cuda:v1', cpu: '2', memory: '4Gi',
                 gpus: 1, mode: 'fraction', fraction: '75' };
  await fillForm(page, spec);
  // A preset fraction fills memory % and cores % with its value, read-only.
  assert.equal(await page.inputValue('#frac-mem'), '75');
  assert.equal(await page.inputValue('#frac-cores'), '75');
  assert.equal(await page.locator('#frac-mem').evaluate((i) => i.readOnly), true);
  await fillForm(page, { fraction: '25', useTypes: [A100] });
  assert.equal(await page.inputValue('#frac-mem'), '25');
  const fit = expectedFit({ gpus: 1, memPercent: 25, cores: 25, useTypes: [A100] });
  assert.equal(fit.nodes, 1);  // sanity of the seed: only node-a has A100s
  await checkPreview(page, {
    yamlLines: ['apiVersion: kubeflow.org/v1', 'kind: Notebook', 'nvidia.com/gpu: "1"',
                'nvidia.com/gpumem-percentage: "25"', 'nvidia.com/gpucores: "25"', `nvidia.com/use-gputype: ${A100}`],
    fit,
  });
  await screenshot(page, 'ui-form.png');
  await createAndCheck(page, spec,
                       { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem-percentage': '25', 'nvidia.com/gpucores': '25' },
                       { 'nvidia.com/use-gputype': A100 });
});

test('fraction: custom memory % and cores %', async () => {
  const page = await openForm(browser.context);
  const spec = { name: 'nb-custom', namespace: 'team-a', image: 'jupyter-scipy:v1', cpu: '1', memory: '2Gi', gpus: 2,
                 mode: 'fraction', fraction: 'custom' };
  await fillForm(page, spec);
  assert.equal(await page.locator('#frac-mem').evaluate((i) => i.readOnly), false);
  await fillForm(page, { fracMem: 20, fracCores: 10 });
  await checkPreview(page, {
    yamlLines: ['nvidia.com/gpu: "2"', 'nvidia.com/gpumem-percentage: "20"', 'nvidia.com/gpucores: "10"'],
    fit: expectedFit({ gpus: 2, memPercent: 20, cores: 10 }),
  });
  await createAndCheck(page, spec,
                       { 'nvidia.com/gpu': '2', 'nvidia.com/gpumem-percentage': '20', 'nvidia.com/gpucores': '10' }, {});
});
