// The notebook form: builds the request body from the inputs, asks /api/preview as the user
// types (debounced), shows validation, fit and YAML, creates through /api/notebooks, and
// lists the user's notebooks. No framework, no build step.

const $ = (id) => document.getElementById(id);
const DEBOUNCE_MS = 250;

function selected(select) {
  return Array.from(select.selectedOptions).map((o) => o.value).filter((v) => v !== '');
}

function intOrNull(input) {
  const v = input.value.trim();
  return v === '' ? null : Number(v);
}

function mode() {
  return document.querySelector('input[name="mode"]:checked').value;
}

/** The JSON body of /api/preview and /api/notebooks (schema: docs/ui.md). */
export function formBody() {
  const body = {
    name: $('name').value.trim(),
    namespace: $('namespace').value.trim(),
    image: $('image').value,
    cpu: $('cpu').value.trim(),
    memory: $('memory').value.trim(),
    gpus: intOrNull($('gpus')) ?? 0,
    node_policy: $('node-policy').value,
    gpu_policy: $('gpu-policy').value,
    use_types: selected($('use-types')),
    nouse_types: selected($('nouse-types')),
    use_uuids: selected($('use-uuids')),
    nouse_uuids: selected($('nouse-uuids')),
  };
  const m = mode();
  if (m === 'fraction') {
    body.slice = { mode: 'fraction', memory_percent: intOrNull($('frac-mem')), cores_percent: intOrNull($('frac-cores')) };
  } else if (m === 'memory') {
    body.slice = { mode: 'memory', memory_value: intOrNull($('mem-value')), memory_unit: $('mem-unit').value,
                   cores_percent: intOrNull($('mem-cores')) };
  } else if (m === 'cores') {
    body.slice = { mode: 'cores', cores_percent: intOrNull($('cores-value')), memory_value: intOrNull($('cores-mem')),
                   memory_unit: 'MiB' };
  } else {
    body.slice = { mode: 'whole' };
  }
  return body;
}

function showModes() {
  for (const m of ['fraction', 'memory', 'cores']) $(`mode-${m}`).hidden = mode() !== m;
  const frac = document.querySelector('input[name="fraction"]:checked').value;
  const custom = frac === 'custom';
  if (!custom) {
    $('frac-mem').value = frac;
    $('frac-cores').value = frac;
  }
  $('frac-mem').readOnly = !custom;
  $('frac-cores').readOnly = !custom;
}

function setList(el, items) {
  el.replaceChildren(...items.map((text) => {
    const li = document.createElement('li');
    li.textContent = text;
    return li;
  }));
}

// MiB as people read it: "20480 MiB (20 GiB)".
function mib(n) {
  return n >= 1024 && n % 1024 === 0 ? `${n} MiB (${n / 1024} GiB)` : `${n} MiB`;
}

/** One per-node line of the fit: where it fits and what the slice means on each candidate. */
export function nodeLine(n) {
  if (!n.fits) return `${n.node}: does not fit — ${n.reason}`;
  const cands = (n.candidates ?? []).map((c) => `${c.uuid} ${mib(c.mem_mib)} of ${c.devmem_mib} MiB`);
  // A fragmentation-aware pod also gets /prioritize's score (10: the node FGD would choose).
  const score = typeof n.priority === 'number' ? `; scheduler score ${n.priority}/10` : '';
  return `${n.node}: fits — would take ${n.gpus.join(', ')}; candidates: ${cands.join(', ')}${score}`;
}

// Which input a validation message is about, and that input's label: the message is shown
// next to it ("Cores %: must be …") as well as in the list.
function fieldOf(message) {
  const m = mode();
  const rules = [
    [/gpumem-percentage|memory_percent/, 'frac-mem'],
    [/nvidia\.com\/gpumem\b|memory_value/, m === 'cores' ? 'cores-mem' : 'mem-value'],
    [/gpucores|cores_percent/, m === 'fraction' ? 'frac-cores' : (m === 'memory' ? 'mem-cores' : 'cores-value')],
    [/nvidia\.com\/gpu\b|^gpus\b/, 'gpus'],
    [/^namespace\b/, 'namespace'],
    [/^name\b/, 'name'],
    [/^cpu\b/, 'cpu'],
    [/^memory\b/, 'memory'],
  ];
  for (const [re, id] of rules) if (re.test(message)) return id;
  return null;
}

function showFieldErrors(messages) {
  for (const old of document.querySelectorAll('.field-error')) {
    const input = $(old.dataset.for);
    if (input) {
      input.removeAttribute('aria-invalid');
      input.setAttribute('aria-describedby', (input.getAttribute('aria-describedby') ?? '')
        .split(' ').filter((d) => d && d !== old.id).join(' '));
    }
    old.remove();
  }
  for (const message of messages) {
    const id = fieldOf(message);
    const input = id && $(id);
    if (!input || $(`${id}-error`)) continue;
    const label = document.querySelector(`label[for="${id}"]`)?.textContent.trim() ?? id;
    const small = document.createElement('small');
    small.className = 'field-error';
    small.id = `${id}-error`;
    small.dataset.for = id;
    small.setAttribute('role', 'alert');
    small.textContent = `${label}: ${message}`;
    input.insertAdjacentElement('afterend', small);
    input.setAttribute('aria-invalid', 'true');
    input.setAttribute('aria-describedby', `${input.getAttribute('aria-describedby') ?? ''} ${small.id}`.trim());
  }
}

function render(preview) {
  $('yaml').textContent = preview.yaml ?? '';
  setList($('errors'), preview.errors ?? []);
  $('errors').classList.toggle('empty', !(preview.errors ?? []).length);
  showFieldErrors(preview.errors ?? []);
  setList($('warnings'), preview.warnings ?? []);
  const fit = preview.fit;
  const fitEl = $('fit');
  fitEl.className = 'fit';
  if (!fit) {
    fitEl.textContent = 'Fix the values above to see where it fits.';
    fitEl.classList.add('unknown');
    setList($('fit-nodes'), []);
    return;
  }
  fitEl.textContent = fit.message;
  fitEl.classList.add(fit.fits ? 'ok' : 'no');
  setList($('fit-nodes'), (fit.per_node ?? []).map(nodeLine));
  $('fit-details').open = !fit.fits;
}

function showError(message) {
  setList($('errors'), [message]);
  $('errors').classList.remove('empty');
  showFieldErrors([message]);
}

let timer = null;
let seq = 0;
async function preview() {
  const mine = ++seq;
  try {
    const r = await fetch('api/preview', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                           body: JSON.stringify(formBody()) });
    const body = await r.json();
    if (mine !== seq) return;  // a newer preview is on its way
    if (!r.ok) {
      showError(body.error ?? `preview failed (HTTP ${r.status})`);
      $('yaml').textContent = '';
      $('fit').textContent = '';
      return;
    }
    render(body);
  } catch (e) {
    if (mine === seq) showError(`preview failed: ${e}`);
  }
}

function schedulePreview() {
  showModes();
  clearTimeout(timer);
  timer = setTimeout(preview, DEBOUNCE_MS);
}

async function loadNotebooks() {
  const ns = $('namespace').value.trim();
  $('notebooks-error').textContent = '';
  const tbody = $('notebooks').querySelector('tbody');
  try {
    const r = await fetch(`api/notebooks?namespace=${encodeURIComponent(ns)}`);
    const body = await r.json();
    if (!r.ok) {
      $('notebooks-error').textContent = body.error ?? `HTTP ${r.status}`;
      tbody.replaceChildren();
      return;
    }
    if (body.notebooks.length === 0) {
      const td = document.createElement('td');
      td.colSpan = 4;
      td.className = 'help';
      td.textContent = `No notebooks in ${ns} yet.`;
      const tr = document.createElement('tr');
      tr.className = 'empty';
      tr.append(td);
      tbody.replaceChildren(tr);
      return;
    }
    tbody.replaceChildren(...body.notebooks.map((nb) => {
      const tr = document.createElement('tr');
      const gpu = Object.entries(nb.limits).filter(([k]) => k.startsWith('nvidia.com/'))
        .map(([k, v]) => (k === 'nvidia.com/gpucores' && String(v) === '0'
          ? 'gpucores=0 (time-shared)' : `${k.replace('nvidia.com/', '')}=${v}`)).join(' ');
      for (const text of [nb.name, nb.state, nb.image, gpu || '—']) {
        const td = document.createElement('td');
        td.textContent = text;
        tr.append(td);
      }
      return tr;
    }));
  } catch (e) {
    $('notebooks-error').textContent = `cannot list notebooks: ${e}`;
  }
}

async function create(event) {
  event.preventDefault();
  const out = $('create-result');
  out.className = '';
  out.textContent = 'Creating…';
  $('create').disabled = true;
  try {
    const r = await fetch('api/notebooks', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                             body: JSON.stringify(formBody()) });
    const body = await r.json();
    if (r.ok) {
      out.textContent = `Created ${body.notebook.metadata.namespace}/${body.notebook.metadata.name}.`;
      out.classList.add('ok');
      loadNotebooks();
    } else {
      out.textContent = `Not created: ${body.error}`;
      out.classList.add('no');
    }
  } catch (e) {
    out.textContent = `Not created: ${e}`;
    out.classList.add('no');
  } finally {
    $('create').disabled = false;
  }
}

function fill(select, values, labelOf = (v) => v) {
  select.replaceChildren(...values.map((v) => {
    const o = document.createElement('option');
    o.value = typeof v === 'string' ? v : v.uuid;
    o.textContent = labelOf(v);
    o.title = o.textContent;  // the whole label when the list is narrower than it
    return o;
  }));
}

async function init() {
  try {
    const r = await fetch('api/options');
    const o = await r.json();
    fill($('image'), o.images ?? []);
    fill($('use-types'), o.gpu_types ?? []);
    fill($('nouse-types'), o.gpu_types ?? []);
    const gpuLabel = (g) => `${g.node} #${g.index} ${g.type.replace(/^NVIDIA-/, '')} — ${g.uuid}`;
    fill($('use-uuids'), o.gpus ?? [], gpuLabel);
    fill($('nouse-uuids'), o.gpus ?? [], gpuLabel);
    $('user').textContent = o.user ? `Signed in as ${o.user}` : `Not signed in (no ${o.user_header} header)`;
    if (o.dra_mode) {
      // DRA capacity requests are absolute MiB: a memory percentage cannot be expressed.
      const fraction = document.querySelector('input[name="mode"][value="fraction"]');
      fraction.disabled = true;
      fraction.parentElement.title = 'DRA mode: ask for memory in MiB or GiB';
      if (fraction.checked) document.querySelector('input[name="mode"][value="memory"]').checked = true;
    }
  } catch (e) {
    showError(`cannot load options: ${e}`);
  }
  const form = $('form');
  form.addEventListener('input', schedulePreview);
  form.addEventListener('change', schedulePreview);
  form.addEventListener('submit', create);
  $('refresh-notebooks').addEventListener('click', loadNotebooks);
  $('namespace').addEventListener('change', loadNotebooks);
  showModes();
  await preview();
  await loadNotebooks();
}

init();
