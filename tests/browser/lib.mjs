// Shared helpers of the browser tests (run by ui_browser_harness, see harness.cc):
//  * launch(): Debian's Chromium through playwright-core (never a downloaded browser), fresh profile;
//  * the seeded cluster (seed.json) and an independent fit of a request on it, written from
//    docs/design/CONTRACT.md §1 and HAMi's per-GPU checks (docs/design/hami-behaviour.md §3.6), not from src/: the
//    browser tests compare the UI's "fits now on N GPUs of M nodes" with these numbers;
//  * what the fake API side received (Notebooks, SubjectAccessReviews);
//  * waits on conditions (no sleeps) and screenshots.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import os from 'node:os';
import path from 'node:path';

let chromium;
try {
  ({ chromium } = await import('playwright-core'));
} catch (e) {
  console.error('FAIL: cannot load npm package playwright-core (run scripts/deps/ui-npm.sh): ' + e.message);
  process.exit(1);
}

function env(name) {
  const v = process.env[name];
  if (!v) {
    console.error(`FAIL: ${name} is not set: run this test through ctest (ui_browser_harness)`);
    process.exit(1);
  }
  return v;
}

export const UI_URL = env('FRACGPU_UI_URL');
export const API_URL = env('FRACGPU_API_URL');
export const ARTIFACT_DIR = env('FRACGPU_ARTIFACT_DIR');
export const SEED = JSON.parse(fs.readFileSync(env('FRACGPU_SEED'), 'utf8'));
const CHROMIUM = env('FRACGPU_CHROMIUM');

/** Generous: two busy cores, ASan builds of `fracgpu ui`. */
export const TIMEOUT_MS = 30000;
/**
 * Chromium's own start (a cold profile, its zygote and GPU-less renderer processes) took longer
 * than 30 s once in five ASan suite runs while heavy tests shared the two cores; the ctest
 * timeout (240 s) still bounds the whole test.
 */
const LAUNCH_TIMEOUT_MS = 120000;

/**
 * Starts headless Chromium with a fresh profile; returns {context, close}. Every page of the
 * context sends `kubeflow-userid: <user>` (as Kubeflow's gateway would) unless user is null.
 */
export async function launch({ user = 'alice', width = 1366, height = 900 } = {}) {
  const profile = fs.mkdtempSync(path.join(process.env.FRACGPU_TMP ?? os.tmpdir(), 'chromium-profile-'));
  const context = await chromium.launchPersistentContext(profile, {
    executablePath: CHROMIUM,
    headless: true,
    args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run',
           '--disable-background-networking', '--disable-component-update', '--disable-sync',
           '--disable-dev-shm-usage'],
    viewport: { width, height },
    extraHTTPHeaders: user ? { 'kubeflow-userid': user } : {},
    timeout: LAUNCH_TIMEOUT_MS,
  });
  context.setDefaultTimeout(TIMEOUT_MS);
  const close = async () => {
    await context.close();
    fs.rmSync(profile, { recursive: true, force: true });
  };
  return { context, close };
}

/** Opens `page` (e.g. "index.html") in a new tab, failing on any page error or failed request. */
export async function open(context, page) {
  const tab = await context.newPage();
  const problems = [];
  tab.on('pageerror', (e) => problems.push(`page error: ${e.message}`));
  // Chromium logs every 4xx fetch as a console error; 400 and 403 are answers the page shows
  // (a bad value, a refused user), anything else is a problem.
  tab.on('console', (m) => {
    if (m.type() === 'error' && !/status of 40[03] /.test(m.text())) problems.push(`console error: ${m.text()}`);
  });
  tab.problems = problems;
  await tab.goto(`${UI_URL}/${page}`);
  return tab;
}

/** Waits until `fn()` (run in the page) returns a truthy value; on timeout fails with `what` and `describe()`. */
export async function waitFor(page, fn, arg, what, describe = null) {
  try {
    await page.waitForFunction(fn, arg, { timeout: TIMEOUT_MS, polling: 'raf' });
  } catch (e) {
    const now = describe ? await describe() : '';
    assert.fail(`timed out waiting for ${what}${now ? `; page shows: ${now}` : ''}`);
  }
}

/** Waits until the element's textContent equals `expected` exactly. */
export async function waitForText(page, selector, expected) {
  await waitFor(page, ([s, t]) => document.querySelector(s)?.textContent === t, [selector, expected],
                `${selector} to read ${JSON.stringify(expected)}`,
                async () => JSON.stringify(await page.locator(selector).textContent()));
}

/** Waits until the element's textContent contains every string of `parts`. */
export async function waitForTextParts(page, selector, parts) {
  await waitFor(page, ([s, ps]) => { const t = document.querySelector(s)?.textContent ?? ''; return ps.every((p) => t.includes(p)); },
                [selector, parts], `${selector} to contain ${JSON.stringify(parts)}`,
                async () => JSON.stringify(await page.locator(selector).textContent()));
}

/** Saves a full-page screenshot as <artifacts>/<name>; returns its path. */
export async function screenshot(page, name) {
  fs.mkdirSync(ARTIFACT_DIR, { recursive: true });
  const file = path.join(ARTIFACT_DIR, name);
  await page.screenshot({ path: file, fullPage: true });
  assert.ok(fs.statSync(file).size > 10000, `${file} is suspiciously small`);
  return file;
}

// ---------------------------------------------------------------- what the API side received

async function getJson(url) {
  const r = await fetch(url);
  assert.equal(r.status, 200, `GET ${url} → ${r.status}`);
  return r.json();
}

/** The Notebooks the fake API server holds in `ns` (what `fracgpu ui` created). */
export async function createdNotebooks(ns) {
  return (await getJson(`${API_URL}/apis/kubeflow.org/v1/namespaces/${ns}/notebooks`)).items;
}

/** Every SubjectAccessReview the fake API server answered. */
export async function reviews() {
  return getJson(`${API_URL}/test/reviews`);
}

// ---------------------------------------------------------------- the seeded cluster

/**
 * The namespaces whose pods the dashboard names to `user` (null: nobody signed in): those where
 * seed.json's "allow" lets the user list notebooks (docs/ui.md "What a viewer sees of other
 * namespaces").
 */
export function namedNamespaces(user) {
  return new Set(SEED.allow.filter((a) => user && a.user === user && a.verb === 'list').map((a) => a.namespace));
}

/**
 * The rows of a GPU's slice table as `user` sees them: [pod, namespace, memory, cores], the pod
 * and namespace "not shown" outside namedNamespaces(user); sorted.
 */
export function expectedSliceRows(g, user) {
  const named = namedNamespaces(user);
  const fmt = (n) => n.toLocaleString('en-US');
  return g.slices.map((s) => [...(named.has(s.namespace) ? [s.pod, s.namespace] : ['not shown', 'not shown']),
                              `${fmt(s.mem)} MiB`, s.cores === 0 ? 'time-shared' : `${s.cores} %`]).sort();
}

/** GPUs of the seed, with usage summed from the pods' hami.io/vgpu-devices-allocated. */
export function seedGpus() {
  const usage = new Map();
  for (const pod of SEED.pods) {
    const alloc = pod.metadata.annotations['hami.io/vgpu-devices-allocated'];
    for (const part of alloc.split(';')) {
      for (const dev of part.split(':').filter((d) => d !== '')) {
        const [uuid, , mem, cores] = dev.split(',');
        const u = usage.get(uuid) ?? { used: 0, mem: 0, cores: 0, slices: [] };
        u.used += 1;
        u.mem += Number(mem);
        u.cores += Number(cores);
        u.slices.push({ pod: pod.metadata.name, namespace: pod.metadata.namespace, mem: Number(mem), cores: Number(cores) });
        usage.set(uuid, u);
      }
    }
  }
  const nodes = [];
  for (const n of SEED.nodes) {
    const ann = n.metadata.annotations ?? {};
    const reg = ann['hami.io/node-nvidia-register'];
    const cordon = (ann['hami.io/device-cordon'] ?? '').split(',').filter((s) => s);
    const gpus = (reg ? JSON.parse(reg) : []).map((g) => {
      const u = usage.get(g.id) ?? { used: 0, mem: 0, cores: 0, slices: [] };
      return { uuid: g.id, index: g.index, type: g.type, count: g.count, devmem: g.devmem, devcore: g.devcore,
               health: g.health, cordoned: cordon.includes(g.id), used: u.used, usedMem: u.mem,
               usedCores: u.cores, slices: u.slices };
    });
    nodes.push({ name: n.metadata.name, unschedulable: n.spec?.unschedulable === true,
                 gpuReady: Boolean(reg) && Number(n.status?.allocatable?.['nvidia.com/gpu'] ?? 0) > 0, gpus });
  }
  return nodes.sort((a, b) => a.name.localeCompare(b.name));
}

// docs/design/CONTRACT.md §1: type entries match on case-insensitive tokens (split on space, '-', '_'), in order.
function typeMatches(entry, type) {
  const tok = (s) => s.toLowerCase().split(/[ _-]+/).filter((t) => t);
  const want = tok(entry);
  const have = tok(type);
  let i = 0;
  for (const t of have) if (i < want.length && t === want[i]) i += 1;
  return want.length > 0 && i === want.length;
}

/**
 * An independent fit of a one-container request on the seed: {gpus, nodes, perNode: {name:
 * reason|null}, eligible: {name: GPUs passing every per-GPU check}}.
 * request: {gpus, memMiB?, memPercent?, cores?, useTypes, nouseTypes, useUuids, nouseUuids}; memory
 * absent = the whole card; cores absent = 100 for a whole card, else 0 (docs/design/CONTRACT.md §1 defaults).
 * Per GPU the first failing check in HAMi's order; a node fits when enough GPUs pass; its
 * reason is "<count>/<gpus> <Reason>" per reason, passing GPUs counted as
 * AllocatedCardsInsufficientRequest. A cordoned node (spec.unschedulable) takes no new pod.
 */
export function expectedFit(req) {
  const order = ['CardNotHealth', 'CardCordoned', 'CardTypeMismatch', 'CardUuidMismatch', 'CardTimeSlicingExhausted',
                 'CardInsufficientMemory', 'CardInsufficientCore', 'ExclusiveDeviceAllocateConflict',
                 'CardComputeUnitsExhausted', 'AllocatedCardsInsufficientRequest'];
  const wholeCard = req.memMiB == null && (req.memPercent == null || req.memPercent === 100);
  const cores = req.cores ?? (wholeCard ? 100 : 0);
  let gpus = 0;
  let nodes = 0;
  const perNode = {};
  const eligible = {};
  const candidates = {};
  let total = 0;
  for (const n of seedGpus()) {
    if (!n.gpuReady) continue;
    total += 1;
    const reasons = n.gpus.map((g) => {
      const need = req.memMiB ?? Math.floor((g.devmem * (req.memPercent ?? 100)) / 100);
      if (!g.health) return 'CardNotHealth';
      if (g.cordoned) return 'CardCordoned';
      if ((req.useTypes ?? []).length && !req.useTypes.some((t) => typeMatches(t, g.type))) return 'CardTypeMismatch';
      if ((req.nouseTypes ?? []).some((t) => typeMatches(t, g.type))) return 'CardTypeMismatch';
      if ((req.useUuids ?? []).length && !req.useUuids.includes(g.uuid)) return 'CardUuidMismatch';
      if ((req.nouseUuids ?? []).includes(g.uuid)) return 'CardUuidMismatch';
      if (g.used >= g.count) return 'CardTimeSlicingExhausted';
      if (g.devmem - g.usedMem < need) return 'CardInsufficientMemory';
      if (g.devcore - g.usedCores < cores) return 'CardInsufficientCore';
      if (cores === 100 && g.used > 0) return 'ExclusiveDeviceAllocateConflict';
      if (cores === 0 && g.usedCores === g.devcore) return 'CardComputeUnitsExhausted';
      return null;
    });
    const passing = reasons.filter((r) => r === null).length;
    eligible[n.name] = passing;
    // What the slice takes on each passing card, in MiB (the UI shows it per candidate).
    candidates[n.name] = n.gpus.filter((g, i) => reasons[i] === null).map((g) => ({
      uuid: g.uuid, mem: req.memMiB ?? Math.floor((g.devmem * (req.memPercent ?? 100)) / 100), devmem: g.devmem }));
    if (n.unschedulable) {
      perNode[n.name] = 'node is cordoned (spec.unschedulable): no new pods are scheduled there';
    } else if (req.gpus > n.gpus.length) {
      perNode[n.name] = `${req.gpus}/${n.gpus.length} NodeInsufficientDevice`;
    } else if (passing >= req.gpus) {
      perNode[n.name] = null;
      gpus += passing;
      nodes += 1;
    } else {
      const all = reasons.map((r) => r ?? 'AllocatedCardsInsufficientRequest');
      perNode[n.name] = order.filter((r) => all.includes(r))
        .map((r) => `${all.filter((x) => x === r).length}/${all.length} ${r}`).join(', ');
    }
  }
  return { gpus, nodes, perNode, eligible, candidates, total, takes: req.gpus };
}

/**
 * The UI's sentence for a fit, which says what the pod takes apart from where it could go:
 * "fits now: takes 1 GPU on one node; 2 nodes of 3 can take it (4 candidate GPUs)" / "fits on no node".
 */
export function fitMessage({ gpus, nodes, total, takes }) {
  if (nodes === 0) return 'fits on no node';
  const pl = (n, w) => `${n} ${w}${n === 1 ? '' : 's'}`;
  return `fits now: takes ${pl(takes, 'GPU')} on one node; ${pl(nodes, 'node')} of ${total} can take it ` +
         `(${pl(gpus, 'candidate GPU')})`;
}

/** "20480 MiB (20 GiB)" as the UI writes MiB. */
function mibText(n) {
  return n >= 1024 && n % 1024 === 0 ? `${n} MiB (${n / 1024} GiB)` : `${n} MiB`;
}

/** The GPU types present in the seed, sorted (what the form offers). */
export function seedTypes() {
  return [...new Set(seedGpus().flatMap((n) => n.gpus.map((g) => g.type)))].sort();
}

// ---------------------------------------------------------------- the notebook form

/** Opens the form and waits until the options (images, GPU types, GPUs) from the cluster are in. */
export async function openForm(context) {
  const page = await open(context, 'index.html');
  const gpuCount = seedGpus().reduce((s, n) => s + n.gpus.length, 0);
  await waitFor(page, ([i, g]) => document.querySelectorAll('#image option').length === i &&
                                   document.querySelectorAll('#use-uuids option').length === g,
                [SEED.images.length, gpuCount], 'the form options from /api/options');
  return page;
}

/**
 * Fills the form with the mouse-and-keyboard actions Playwright simulates (fill, check,
 * selectOption). spec: {name, namespace, image, cpu, memory, gpus, mode, fraction, fracMem,
 * fracCores, memValue, memUnit, memCores, coresValue, coresMem, nodePolicy, gpuPolicy,
 * useTypes, nouseTypes, useUuids, nouseUuids}; absent keys keep the form's value.
 */
export async function fillForm(page, spec) {
  const set = async (sel, v) => { if (v !== undefined) await page.fill(sel, String(v)); };
  await set('#name', spec.name);
  await set('#namespace', spec.namespace);
  if (spec.image !== undefined) await page.selectOption('#image', spec.image);
  await set('#cpu', spec.cpu);
  await set('#memory', spec.memory);
  await set('#gpus', spec.gpus);
  if (spec.mode) await page.check(`input[name="mode"][value="${spec.mode}"]`);
  if (spec.fraction) await page.check(`input[name="fraction"][value="${spec.fraction}"]`);
  await set('#frac-mem', spec.fracMem);
  await set('#frac-cores', spec.fracCores);
  await set('#mem-value', spec.memValue);
  if (spec.memUnit) await page.selectOption('#mem-unit', spec.memUnit);
  await set('#mem-cores', spec.memCores);
  await set('#cores-value', spec.coresValue);
  await set('#cores-mem', spec.coresMem);
  const advanced = ['nodePolicy', 'gpuPolicy', 'useTypes', 'nouseTypes', 'useUuids', 'nouseUuids'];
  if (advanced.some((k) => spec[k] !== undefined)) {
    if (!(await page.locator('#advanced').evaluate((d) => d.open))) await page.click('#advanced > summary');
    if (spec.nodePolicy !== undefined) await page.selectOption('#node-policy', spec.nodePolicy);
    if (spec.gpuPolicy !== undefined) await page.selectOption('#gpu-policy', spec.gpuPolicy);
    if (spec.useTypes !== undefined) await page.selectOption('#use-types', spec.useTypes);
    if (spec.nouseTypes !== undefined) await page.selectOption('#nouse-types', spec.nouseTypes);
    if (spec.useUuids !== undefined) await page.selectOption('#use-uuids', spec.useUuids);
    if (spec.nouseUuids !== undefined) await page.selectOption('#nouse-uuids', spec.nouseUuids);
  }
}

/**
 * The Notebook `fracgpu ui` must post for a form (docs/ui.md; docs/design/CONTRACT.md §1 resource and
 * annotation names; Kubeflow: GPU limits in spec.template.spec.containers[0].resources.limits,
 * the choices as Notebook annotations, which the notebook controller copies to the pod).
 */
export function expectedNotebook({ name, namespace, image, cpu, memory, gpuLimits, annotations }) {
  const metadata = { name, namespace, labels: { app: name } };
  if (Object.keys(annotations).length) metadata.annotations = annotations;
  return {
    apiVersion: 'kubeflow.org/v1', kind: 'Notebook', metadata,
    spec: { template: { spec: { containers: [{ name, image, resources: {
      requests: { cpu, memory }, limits: { cpu, memory, ...gpuLimits } } }] } } },
  };
}

// ---------------------------------------------------------------- checks shared by the form tests

/** The per-node lines the preview must list for `fit` (node order: by name, GPU nodes only). */
export function expectedNodeLines(fit) {
  return seedGpus().filter((n) => n.gpuReady).map((n) => {
    const reason = fit.perNode[n.name];
    // Which GPUs the policy picks is the scheduler's business; how many pass is checked.
    if (reason !== null) return `${n.name}: does not fit — ${reason}`;
    const cands = fit.candidates[n.name].map((c) => `${c.uuid} ${mibText(c.mem)} of ${c.devmem} MiB`).join(', ');
    const esc = (t) => t.replace(/[.*+?^${}()|[\]\\]/g, '\\$&');
    return new RegExp(`^${n.name}: fits — would take GPU-[a-z0-9]+(, GPU-[a-z0-9]+)*; candidates: ${esc(cands)}$`);
  });
}

export async function checkPreview(page, { yamlLines, fit }) {
  await waitForTextParts(page, '#yaml', yamlLines);
  await waitForText(page, '#fit', fitMessage(fit));
  const lines = await page.locator('#fit-nodes li').allTextContents();
  const expected = expectedNodeLines(fit);
  assert.equal(lines.length, expected.length, `per-node lines: ${JSON.stringify(lines)}`);
  expected.forEach((e, i) => (typeof e === 'string' ? assert.equal(lines[i], e) : assert.match(lines[i], e)));
  assert.equal(await page.locator('#errors li').count(), 0, 'no validation errors');
  assert.equal(await page.locator('#fit').getAttribute('class'), fit.nodes > 0 ? 'fit ok' : 'fit no');
}

export async function createAndCheck(page, spec, gpuLimits, annotations) {
  await page.click('#create');
  await waitForText(page, '#create-result', `Created ${spec.namespace}/${spec.name}.`);
  const got = (await createdNotebooks(spec.namespace)).find((nb) => nb.metadata.name === spec.name);
  assert.ok(got, `the fake API server has no notebook ${spec.name}`);
  assert.deepEqual(got, expectedNotebook({ ...spec, gpuLimits, annotations }));
  assert.deepEqual(page.problems, []);
}

// ---------------------------------------------------------------- layout checks (issue 38)

/**
 * Where the text of the elements matching `selector` wraps to a new line after a character that
 * is not one of its own separators ('-', '.', '/', ':') or a space: a list of
 * "<text>: broken after <char>" (empty when every break is at a separator). Measured per
 * character with DOM Ranges, so it sees what Chromium drew.
 */
export async function badLineBreaks(page, selector) {
  return page.evaluate((sel) => {
    const bad = [];
    for (const cell of document.querySelectorAll(sel)) {
      const walker = document.createTreeWalker(cell, NodeFilter.SHOW_TEXT);
      let prevTop = null;
      let prevChar = '';
      for (let n = walker.nextNode(); n; n = walker.nextNode()) {
        for (let i = 0; i < n.data.length; i += 1) {
          const r = document.createRange();
          r.setStart(n, i);
          r.setEnd(n, i + 1);
          const rects = r.getClientRects();
          if (!rects.length) continue;
          const top = rects[0].top;
          if (prevTop !== null && top > prevTop + 2 && !/[-./: ]/.test(prevChar)) {
            bad.push(`${cell.textContent}: broken after ${JSON.stringify(prevChar)}`);
          }
          prevTop = top;
          prevChar = n.data[i];
        }
      }
    }
    return bad;
  }, selector);
}

/**
 * Elements matching `inner` that stick out of their closest `outer` ancestor (by more than half
 * a pixel) or scroll inside themselves: a list of descriptions (empty when all fit).
 */
export async function overflowing(page, inner, outer) {
  return page.evaluate(([i, o]) => {
    const out = [];
    for (const e of document.querySelectorAll(i)) {
      const box = e.closest(o);
      if (!box) continue;
      const a = e.getBoundingClientRect();
      const b = box.getBoundingClientRect();
      const what = `${i} in ${box.getAttribute('aria-label') ?? o}`;
      if (a.left < b.left - 0.5 || a.right > b.right + 0.5) {
        out.push(`${what}: ${Math.round(a.left)}..${Math.round(a.right)} px outside ${Math.round(b.left)}..${Math.round(b.right)} px`);
      }
      if (e.scrollWidth > e.clientWidth + 1) out.push(`${what}: scrolls (${e.scrollWidth} px in ${e.clientWidth} px)`);
    }
    return out;
  }, [inner, outer]);
}
