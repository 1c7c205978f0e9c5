// The cluster GPU dashboard: per node and GPU, memory and cores allocated as bars, the slices
// on each GPU, health and cordon; filter by type and node; refreshes itself.

const $ = (id) => document.getElementById(id);
let data = null;
let timer = null;

function el(tag, attrs = {}, ...children) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) {
    if (k === 'class') e.className = v;
    else e.setAttribute(k, v);
  }
  for (const c of children) e.append(c);
  return e;
}

// A name that breaks only after its own separators ('-', '.', '/'): <wbr> after each, and CSS
// (style.css) that does not break words elsewhere.
function breakable(text) {
  const frag = document.createDocumentFragment();
  for (const part of String(text).split(/(?<=[-./])/)) {
    if (frag.childNodes.length) frag.append(el('wbr'));
    frag.append(part);
  }
  return frag;
}

function bar(label, used, total, unit) {
  const pct = total > 0 ? Math.min(100, Math.round((used * 100) / total)) : 0;
  const level = pct >= 90 ? 'high' : pct >= 60 ? 'mid' : 'low';
  const text = `${label}: ${used.toLocaleString()} / ${total.toLocaleString()} ${unit} (${pct} %)`;
  const fill = el('div', { class: `fill ${level}` });
  fill.style.width = `${pct}%`;
  return el('div', { class: 'bar-row' },
    el('span', { class: 'bar-label' }, text),
    el('div', { class: 'bar', role: 'meter', 'aria-label': label, 'aria-valuemin': '0',
                'aria-valuemax': String(total), 'aria-valuenow': String(used), 'aria-valuetext': text }, fill));
}

// A duration in seconds as people read it: "45 s", "12 min", "3 h 10 min", "2 d 4 h".
function duration(s) {
  if (s < 60) return `${s} s`;
  const m = Math.floor(s / 60);
  if (m < 60) return `${m} min`;
  const h = Math.floor(m / 60);
  if (h < 24) return `${h} h ${m % 60} min`;
  return `${Math.floor(h / 24)} d ${h % 24} h`;
}

const gib = (mib) => `${(mib / 1024).toFixed(1)} GiB`;

// Pods holding memory on the GPU while idle (docs/ui.md "Idle holders"): a badge with the
// count, the memory held and the longest idle time, and the pods the viewer may see by name.
function idleHolders(g) {
  const idle = g.idle_holders;
  if (!idle || idle.count === 0) return null;
  const text = `idle: ${idle.count} slice${idle.count === 1 ? '' : 's'}, ${gib(idle.held_mib)} held, ` +
    `longest ${duration(idle.longest_idle_s)}`;
  const hidden = idle.count - idle.pods.length;
  const title = 'pods holding GPU memory without launching a kernel for the node agent\'s idle time' +
    (hidden > 0 ? `; ${hidden} in namespaces you may not see` : '');
  const badge = el('span', { class: 'badge idle', title }, text);
  const list = idle.pods.length
    ? el('ul', { class: 'idle-holders', 'aria-label': 'Idle holders' }, ...idle.pods.map((p) =>
        el('li', {}, breakable(`${p.namespace}/${p.pod}`),
           ` ${gib(p.mib)}, idle ${duration(p.idle_s)}`)))
    : null;
  return { badge, list };
}

// A slice of a namespace the viewer may not list notebooks in comes without pod and namespace
// (docs/ui.md "What a viewer sees of other namespaces"): its size and cores only.
const ANON_TITLE = 'a pod of a namespace whose notebooks you may not list: its size and cores only';

function gpuCard(g) {
  const badges = el('span', { class: 'badges' });
  badges.append(el('span', { class: `badge ${g.health ? 'ok' : 'no'}` }, g.health ? 'healthy' : 'unhealthy'));
  if (g.cordoned) badges.append(el('span', { class: 'badge no' }, 'cordoned'));
  // DRA mode: a shared device has no share limit, only capacity.
  badges.append(el('span', { class: 'badge' },
    data.mode === 'dra' ? `${g.used} claim${g.used === 1 ? '' : 's'}` : `${g.used}/${g.count} slices`));
  // Lending (docs/reclaim.md "Lending"); absent in DRA mode.
  if (g.lent_mib > 0) {
    badges.append(el('span', { class: 'badge', title: 'memory of parked slices lent to borrower pods' },
      `lends ${g.lent_mib.toLocaleString()} MiB`));
  }
  if (g.borrowed_mib > 0) {
    badges.append(el('span', { class: 'badge', title: 'memory borrower pods hold on this GPU' },
      `borrowed ${g.borrowed_mib.toLocaleString()} MiB`));
  }
  const idle = idleHolders(g);
  if (idle) badges.append(idle.badge);
  const slices = g.slices.length
    ? el('table', { class: 'slices' },
        el('thead', {}, el('tr', {}, ...['Pod', 'Namespace', 'Memory', 'Cores'].map((h) => el('th', { scope: 'col' }, h)))),
        el('tbody', {}, ...g.slices.map((s) =>
          el('tr', s.pod === null ? { class: 'anon', title: ANON_TITLE } : {},
             ...(s.pod === null
               ? [el('td', {}, 'not shown'), el('td', {}, 'not shown')]
               : [el('td', {}, breakable(s.pod)), el('td', {}, breakable(s.namespace))]),
             el('td', { class: 'num' }, `${s.mem_mib.toLocaleString()} MiB`),
             // cores 0: no SM limit, the card's cores are time-shared (docs/design/CONTRACT.md §1).
             el('td', { class: 'num', title: s.cores === 0 ? 'no SM limit: time-shared' : 'SM share' },
                s.cores === 0 ? 'time-shared' : `${s.cores} %`)))))
    : el('p', { class: 'help empty-state' }, 'No slices: nothing runs on this GPU.');
  return el('article', { class: 'gpu', 'aria-label': `GPU ${g.index} ${g.uuid}` },
    el('h4', {}, el('span', { class: 'name' }, `#${g.index} `, breakable(g.type)), badges),
    el('p', { class: 'uuid' }, breakable(g.uuid)),
    bar('Memory', g.used_mem_mib, g.devmem_mib, 'MiB'),
    bar('Cores', g.used_cores, g.devcore, '%'),
    ...(idle?.list ? [idle.list] : []),
    slices);
}

function render() {
  if (!data) return;
  const type = $('filter-type').value;
  const nodeFilter = $('filter-node').value.trim().toLowerCase();
  const out = [];
  let gpus = 0;
  for (const n of data.nodes) {
    if (nodeFilter && !n.name.toLowerCase().includes(nodeFilter)) continue;
    const shown = n.gpus.filter((g) => !type || g.type === type);
    if (type && shown.length === 0) continue;
    gpus += shown.length;
    const head = el('h3', {}, el('span', { class: 'name' }, breakable(n.name)));
    if (n.unschedulable) head.append(el('span', { class: 'badge no' }, 'node cordoned'));
    if (!n.gpu_ready) head.append(el('span', { class: 'badge' }, 'no GPUs registered'));
    const none = data.mode === 'dra' ? 'No ResourceSlice of fracgpu\'s DRA driver lists GPUs of this node.'
                                     : 'No fracgpu device plugin has registered GPUs on this node.';
    out.push(el('section', { class: 'card node', 'aria-label': `Node ${n.name}` }, head,
                n.gpu_ready ? el('div', { class: 'gpus' }, ...shown.map(gpuCard))
                            : el('p', { class: 'help' }, none)));
  }
  if (out.length === 0) {
    // Every list has an empty state: no nodes at all, or none left by the filters.
    const why = data.nodes.length === 0
      ? 'No nodes in the cluster yet.'
      : 'No node matches the filters' + (type ? ` (GPU type ${type}` : ' (') +
        (type && nodeFilter ? ', ' : '') + (nodeFilter ? `name contains "${nodeFilter}"` : '') + ').';
    out.push(el('section', { class: 'card empty-state', id: 'nodes-empty' }, el('p', { class: 'help' }, why)));
  }
  $('nodes').replaceChildren(...out);
  const t = data.totals;
  const shownNodes = out.filter((s) => s.classList.contains('node')).length;
  $('summary').textContent = `${shownNodes} node(s), ${gpus} GPU(s) shown; cluster memory allocated ` +
    `${t.used_mem_mib.toLocaleString()} of ${t.devmem_mib.toLocaleString()} MiB.`;
}

function fillTypes() {
  const select = $('filter-type');
  const current = select.value;
  const types = [...new Set(data.nodes.flatMap((n) => n.gpus.map((g) => g.type)))].sort();
  select.replaceChildren(el('option', { value: '' }, 'all types'), ...types.map((t) => el('option', { value: t }, t)));
  if (types.includes(current)) select.value = current;
}

async function load() {
  try {
    const r = await fetch('api/cluster');
    const body = await r.json();
    if (!r.ok) throw new Error(body.error ?? `HTTP ${r.status}`);
    data = body;
    // DRA mode: slices and claims that could not be read are left out, and said.
    // Problems naming claims of namespaces the viewer may not see are only counted.
    const problems = [...(body.problems ?? [])];
    if (body.problems_hidden > 0) {
      problems.push(`${body.problems_hidden} about ResourceClaims of namespaces you may not see`);
    }
    $('error').textContent = problems.length ? `Left out: ${problems.join('; ')}` : '';
    fillTypes();
    render();
  } catch (e) {
    $('error').textContent = `Cannot load the cluster: ${e.message ?? e}`;
  }
}

function schedule() {
  clearInterval(timer);
  const s = Number($('refresh').value);
  if (s > 0) timer = setInterval(load, s * 1000);
}

// `fracgpu ui --dashboard-only` creates no notebooks: the link to the form goes.
async function mode() {
  try {
    const r = await fetch('api/options');
    const o = await r.json();
    if (r.ok && o.dashboard_only) document.querySelector('nav a[href="index.html"]')?.remove();
  } catch (e) {
    $('error').textContent = `Cannot load the options: ${e.message ?? e}`;
  }
}

$('filter-type').addEventListener('change', render);
$('filter-node').addEventListener('input', render);
$('refresh').addEventListener('change', schedule);
mode();
load();
schedule();
