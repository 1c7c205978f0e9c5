// Accessibility in Chromium: every control of both pages has a label, and the form can be
// filled and submitted with the keyboard only (Tab, arrows, typing, Enter), the focus always
// visible; the Notebook created that way is checked like the mouse-driven ones.
import assert from 'node:assert/strict';
import { after, before, test } from 'node:test';

import { createdNotebooks, expectedNotebook, launch, open, openForm, waitFor, waitForText } from './lib.mjs';

let browser;
before(async () => { browser = await launch({ user: 'alice' }); });
after(async () => { await browser?.close(); });

// Controls without an accessible name: <label for>, a wrapping <label>, aria-label(ledby), or a button's text.
function unlabelled() {
  const named = (el) => {
    if (el.getAttribute('aria-label')?.trim()) return true;
    const by = el.getAttribute('aria-labelledby');
    if (by && by.split(/\s+/).every((id) => document.getElementById(id)?.textContent.trim())) return true;
    if (el.labels && Array.from(el.labels).some((l) => l.textContent.trim())) return true;
    return el.tagName === 'BUTTON' && el.textContent.trim() !== '';
  };
  const controls = Array.from(document.querySelectorAll('input, select, textarea, button, [role="radiogroup"], [role="meter"]'));
  return { count: controls.length, missing: controls.filter((el) => !named(el)).map((el) => el.outerHTML.slice(0, 120)) };
}

test('every control of the form and the dashboard has a label', async () => {
  const form = await openForm(browser.context);
  const f = await form.evaluate(unlabelled);
  assert.ok(f.count >= 25, `only ${f.count} controls on the form`);
  assert.deepEqual(f.missing, []);
  const dash = await open(browser.context, 'dashboard.html');
  await waitFor(dash, () => document.querySelectorAll('[role="meter"]').length > 0, null, 'the dashboard bars');
  const d = await dash.evaluate(unlabelled);
  assert.deepEqual(d.missing, []);
});

test('the form is filled and submitted by keyboard only', async () => {
  const page = await openForm(browser.context);
  const k = page.keyboard;
  const visited = [];
  // Tab until the focused element matches `selector` (at most 40 presses); the focus must show.
  async function tabTo(selector) {
    for (let i = 0; i < 40; i += 1) {
      await k.press('Tab');
      const state = await page.evaluate((s) => {
        const el = document.activeElement;
        const style = getComputedStyle(el);
        return { hit: el.matches(s), id: el.id || el.tagName, outline: style.outlineStyle !== 'none' && parseFloat(style.outlineWidth) >= 2 };
      }, selector);
      visited.push(state.id);
      if (state.hit) {
        assert.ok(state.outline, `no visible focus outline on ${selector}`);
        return;
      }
    }
    assert.fail(`Tab never reached ${selector}; visited ${visited.join(' → ')}`);
  }
  async function typeInto(selector, text) {
    await tabTo(selector);
    await k.press('Control+A');
    await k.type(text);
  }
  await typeInto('#name', 'nb-keys');
  await typeInto('#namespace', 'team-a');
  await tabTo('#image');
  await k.press('ArrowDown');  // the second image
  await typeInto('#cpu', '1');
  await typeInto('#memory', '2Gi');
  await typeInto('#gpus', '1');
  await tabTo('input[name="mode"]:checked');  // the radio group: arrows move the choice
  await k.press('ArrowRight');
  assert.equal(await page.locator('input[name="mode"]:checked').getAttribute('value'), 'memory');
  await typeInto('#mem-value', '6');
  await tabTo('#mem-unit');  // GiB stays
  await typeInto('#mem-cores', '25');
  await tabTo('#advanced > summary');
  await k.press('Enter');  // opens "Scheduling and GPU choice"
  await tabTo('#node-policy');
  await k.press('ArrowDown');  // binpack
  await waitFor(page, () => document.getElementById('yaml').textContent.includes('hami.io/node-scheduler-policy: binpack'),
                null, 'the preview of the keyboard-filled form', async () => page.locator('#yaml').textContent());
  await tabTo('#create');
  await k.press('Enter');
  await waitForText(page, '#create-result', 'Created team-a/nb-keys.');
  const got = (await createdNotebooks('team-a')).find((nb) => nb.metadata.name === 'nb-keys');
  assert.deepEqual(got, expectedNotebook({
    name: 'nb-keys', namespace: 'team-a', image: 'jupyter-pytorch-cuda:v1', cpu: '1', memory: '2Gi',
    gpuLimits: { 'nvidia.com/gpu': '1', 'nvidia.com/gpumem': '6144', 'nvidia.com/gpucores': '25' },
    annotations: { 'hami.io/node-scheduler-policy': 'binpack' },
  }));
  assert.deepEqual(page.problems, []);
});
