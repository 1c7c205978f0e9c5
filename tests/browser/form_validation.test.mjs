// The notebook form checks every field as the API server would before preview and create
// (issue 38 item 2), at phone (390 px) and desktop (1280 px) widths: Kubernetes quantities for
// CPU and memory ("lots" and "2 GB" refused; "500m", "2", "2Gi", "1.5G" accepted), the notebook
// name and the namespace; every error at once beside its field; Create disabled while anything
// is wrong; no empty green fit bar or empty YAML box; the server refuses the same values when
// the script is skipped; a duplicate name reads as a sentence; the notebook list follows the
// namespace field; the preview stays in its own grid cell.
import assert from 'node:assert/strict';
import { after, test } from 'node:test';

import {
  UI_URL, createdNotebooks, fillForm, launch, openForm, overflowing, screenshot, waitFor, waitForText,
} from './lib.mjs';

const browsers = [];
after(async () => { for (const b of browsers) await b.close(); });
async function formAt(width, height, user = 'alice') {
  const b = await launch({ user, width, height });
  browsers.push(b);
  return openForm(b.context);
}

const QUANTITY_HELP = 'must be a Kubernetes quantity (a number with an optional suffix m, k, M, G, T, P, E, Ki, Mi, ' +
  'Gi, Ti, Pi, Ei or e<exponent>, no spaces; e.g. ';
const NAME_RULE = 'name must start with a lower-case letter and hold only lower-case letters, digits and \'-\', not ' +
  'end with \'-\', at most 52 characters (Kubeflow names the notebook\'s Service and StatefulSet after it), got ';
const BAD = {
  name: `Name: ${NAME_RULE}"Bad_Name"`,
  namespace: 'Namespace: namespace must be a DNS-1123 label (lower-case letters, digits and \'-\', at most 63), got "Team A"',
  cpu: `CPU: cpu ${QUANTITY_HELP}500m or 2), got "lots"`,
  memory: `Memory: memory ${QUANTITY_HELP}2Gi or 1.5G), got "2 GB"`,
};

for (const [width, height] of [[390, 844], [1280, 900]]) {
  test(`${width} px: every bad field at once, beside its field, Create disabled, no empty preview`, async () => {
    const page = await formAt(width, height);
    await waitFor(page, () => document.getElementById('fit').textContent.startsWith('fits now:'), null, 'the first fit');
    await fillForm(page, { name: 'Bad_Name', namespace: 'Team A', cpu: 'lots', memory: '2 GB', gpus: 1, mode: 'cores', coresValue: 150 });
    for (const [id, text] of Object.entries(BAD)) {
      await waitForText(page, `#${id}-error`, text);
      assert.equal(await page.locator(`#${id}`).getAttribute('aria-invalid'), 'true');
    }
    // The webhook's GPU check still runs (the placeholder name it was asked with is not shown).
    await waitForText(page, '#cores-value-error', 'Cores %: nvidia.com/gpucores must be an integer 0..100, got "150"');
    assert.equal(await page.locator('#errors li').count(), 5);
    assert.equal(await page.locator('#create').isDisabled(), true);
    // Each message sits beside its field: just below it, inside the same column.
    for (const id of Object.keys(BAD)) {
      const [input, error] = [await page.locator(`#${id}`).boundingBox(), await page.locator(`#${id}-error`).boundingBox()];
      assert.ok(error.y >= input.y + input.height - 1 && error.y < input.y + input.height + 40,
                `#${id}-error at y=${error.y}, its input ends at ${input.y + input.height}`);
      assert.ok(error.x >= input.x - 1 && error.x + error.width <= input.x + input.width + 1, `#${id}-error beside #${id}`);
    }
    // No green bar, no empty box: a grey line and a YAML box that says what to fix.
    assert.equal(await page.locator('#fit').getAttribute('class'), 'fit unknown');
    assert.equal(await page.locator('#fit').textContent(), 'Fix the values above to see where it fits.');
    assert.equal(await page.locator('#yaml').textContent(),
                 '# The Notebook appears here once every field is valid.\n# Fix: Name, Namespace, CPU, Memory, Cores %.');
    const pageWidth = await page.evaluate(() => document.documentElement.scrollWidth);
    assert.ok(pageWidth <= width, `the page is ${pageWidth} px wide at ${width} px`);
    await screenshot(page, `ui-form-errors-${width}px.png`);
    // Pressing Enter in a field does not create anything either.
    await page.press('#cpu', 'Enter');
    assert.deepEqual((await createdNotebooks('team-a')).filter((nb) => nb.metadata.name === 'bad_name'), []);

    // Fixed one by one: the errors go, and with the last one Create comes back.
    await fillForm(page, { name: `ok-${width}`, namespace: 'team-a', cpu: '500m', memory: '1.5G', coresValue: 30 });
    await waitFor(page, () => /^fit (ok|no)$/.test(document.getElementById('fit').className), null, 'the fit',
                  async () => page.locator('#errors').textContent());
    assert.equal(await page.locator('.field-error').count(), 0);
    assert.equal(await page.locator('#errors li').count(), 0);
    await waitFor(page, () => !document.getElementById('create').disabled, null, 'Create enabled');
    const yaml = await page.locator('#yaml').textContent();
    assert.match(yaml, /\n +cpu: "500m"\n/);
    assert.match(yaml, /\n +memory: "1\.5G"\n/);
    // What the API server accepts is accepted (resource.Quantity's grammar).
    for (const [cpu, memory] of [['2', '2Gi'], ['0.5', '512Mi'], ['1e3', '1e9']]) {
      await fillForm(page, { cpu, memory });
      await waitFor(page, ([c, m]) => { const y = document.getElementById('yaml').textContent;
                                       return y.includes(`cpu: "${c}"\n`) && y.includes(`memory: "${m}"\n`); },
                    [cpu, memory], `the YAML with cpu ${cpu} and memory ${memory}`,
                    async () => page.locator('#errors').textContent());
      assert.equal(await page.locator('.field-error').count(), 0, `${cpu} / ${memory}`);
      assert.equal(await page.locator('#create').isDisabled(), false, `${cpu} / ${memory}`);
    }
    assert.deepEqual(page.problems, []);
  });
}

test('the server refuses the same values when the script is skipped', async () => {
  const body = { name: 'nb-raw', namespace: 'team-a', image: 'jupyter-scipy:v1', cpu: 'lots', memory: '2 GB', gpus: 0 };
  const headers = { 'Content-Type': 'application/json', 'kubeflow-userid': 'alice' };
  for (const path of ['api/preview', 'api/notebooks']) {
    const r = await fetch(`${UI_URL}/${path}`, { method: 'POST', headers, body: JSON.stringify(body) });
    assert.equal(r.status, 400, path);
    const { error } = await r.json();
    assert.equal(error, `cpu ${QUANTITY_HELP}500m or 2), got "lots"; memory ${QUANTITY_HELP}2Gi or 1.5G), got "2 GB"`);
  }
  assert.deepEqual((await createdNotebooks('team-a')).filter((nb) => nb.metadata.name === 'nb-raw'), []);
});

test('a duplicate name reads as a sentence, not the API\'s 409', async () => {
  const page = await formAt(1280, 900);
  await fillForm(page, { name: 'nb-twice', namespace: 'team-a', gpus: 1, mode: 'fraction', fraction: '25' });
  await waitFor(page, () => document.getElementById('yaml').textContent.includes('name: nb-twice') &&
                            !document.getElementById('create').disabled, null, 'the preview of nb-twice');
  await page.click('#create');
  await waitForText(page, '#create-result', 'Created team-a/nb-twice.');
  await page.click('#create');
  await waitForText(page, '#create-result', 'Not created: a notebook named nb-twice already exists in team-a; pick another name.');
  assert.equal(await page.locator('#create-result').getAttribute('class'), 'no');
  await screenshot(page, 'ui-form-409.png');
  assert.deepEqual(page.problems.filter((p) => !p.includes('409')), []);
});

test('the notebook list follows the namespace field, without Refresh', async () => {
  const page = await formAt(1280, 900);
  // The default namespace is not alice's: the list says so.
  await waitFor(page, () => document.getElementById('notebooks-error').textContent.includes('may not list') &&
                            document.getElementById('notebooks').getAttribute('aria-busy') === 'false', null,
                'the refusal for the default namespace');
  await page.fill('#namespace', 'team-a');  // typed, not committed with Enter or Tab
  await waitFor(page, () => document.getElementById('nb-namespace').textContent === 'team-a' &&
                            document.getElementById('notebooks').getAttribute('aria-busy') === 'false' &&
                            document.getElementById('notebooks-error').textContent === '', null,
                'the list of team-a', async () => page.locator('#notebooks').textContent());
  const want = (await createdNotebooks('team-a')).map((nb) => nb.metadata.name).sort();
  const rows = await page.locator('#notebooks tbody tr').evaluateAll((trs) => trs.map((tr) => tr.cells[0].textContent));
  assert.deepEqual(rows.sort(), want.length ? want : ['No notebooks in team-a yet.']);
  // A namespace that is not a DNS label is not asked for.
  await page.fill('#namespace', 'Team A');
  await waitForText(page, '#notebooks tbody', 'Type a valid namespace to see its notebooks.');
  assert.deepEqual(page.problems.filter((p) => !p.includes('403')), []);
});

for (const [width, height] of [[390, 844], [1280, 900]]) {
  test(`${width} px: the preview stays in its own cell with "Per node" open`, async () => {
    const page = await formAt(width, height);
    await fillForm(page, { name: 'nb-wide', namespace: 'team-a', gpus: 1, mode: 'fraction', fraction: '25' });
    await waitFor(page, () => document.getElementById('fit').textContent.startsWith('fits now:') &&
                              document.querySelectorAll('#fit-nodes li').length > 0, null, 'the fit');
    if (!(await page.locator('#fit-details').evaluate((d) => d.open))) await page.click('#fit-details > summary');
    const max = await page.evaluate(() => document.documentElement.scrollHeight - window.innerHeight);
    for (let y = 0; y <= max + 100; y += 100) {
      const boxes = await page.evaluate((top) => {
        window.scrollTo(0, top);
        const r = (s) => document.querySelector(s).getBoundingClientRect().toJSON();
        return { preview: r('.preview'), form: r('#form'), notebooks: r('.notebooks'), layout: r('.layout') };
      }, y);
      const meet = (a, b) => a.left < b.right && b.left < a.right && a.top < b.bottom && b.top < a.bottom;
      assert.ok(!meet(boxes.preview, boxes.notebooks), `scrolled to ${y}: the preview covers "Your notebooks" ${JSON.stringify(boxes)}`);
      assert.ok(!meet(boxes.preview, boxes.form), `scrolled to ${y}: the preview covers the form ${JSON.stringify(boxes)}`);
      assert.ok(boxes.preview.bottom <= boxes.layout.bottom + 0.5, `scrolled to ${y}: the preview leaves its grid`);
    }
    assert.deepEqual(await overflowing(page, '#fit-nodes', '.preview'), []);
    await page.evaluate(() => window.scrollTo(0, 0));
    await screenshot(page, `ui-form-per-node-${width}px.png`);
  });
}
