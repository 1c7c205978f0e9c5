// The notebook form: builds the request body from the inputs, asks /api/preview as the user
// types (debounced), shows validation, fit and YAML, creates through /api/notebooks, and
// lists the user's notebooks. No framework, no build step.

const $ = (id) => document.getElementById(id);
const DEBOUNCE_MS = 250;
const NAMESPACE_DEBOUNCE_MS = 400;

// The rules the server applies before anything reaches the API server (src/ui/form.cc
// NotebookFormErrors); the messages are the server's, so the page and a client that skips
// this script read the same words.
//
// Kubernetes quantity, k8s.io/apimachinery resource.Quantity (src/core/quantity.h):
// [+-] (digits | digits.digits | digits. | .digits) then m k M G T P E Ki Mi Gi Ti Pi Ei,
// nothing, or e/E<signed integer> (|e| <= 1000), at most 128 characters, no spaces.
const QUANTITY = /^[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[KMGTPE]i|[eE][+-]?\d+|[mkMGTPE])?$/;
const DNS_LABEL = /^[a-z0-9](?:[-a-z0-9]*[a-z0-9])?$/;
const MAX_NOTEBOOK_NAME = 52;  // the StatefulSet's controller-revision-hash label: name + 11 <= 63

/** The quantity error for `field` ("cpu" or "memory") and its text, or null when it is fine. */
export function quantityError(field, value) {
  const shown = `"${value.length > 40 ? `${value.slice(0, 40)}…` : value}"`;
  const m = QUANTITY.exec(value);
  const exp = m && /[eE]([+-]?\d+)$/.exec(value);
  if (!m || value.length > 128 || (exp && Math.abs(Number(exp[1])) > 1000)) {
    return `${field} must be a Kubernetes quantity (a number with an optional suffix m, k, M, G, T, P, E, ` +
      `Ki, Mi, Gi, Ti, Pi, Ei or e<exponent>, no spaces; e.g. ${field === 'cpu' ? '500m or 2' : '2Gi or 1.5G'}), got ${shown}`;
  }
  if (value.startsWith('-') && /[1-9]/.test(value.replace(/[eE][+-]?\d+$/, ''))) {
    return `${field} must not be negative, got ${shown}`;
  }
  return null;
}

/** Every field error of the body, as [{id, message}] in field order (empty when valid). */
export function fieldErrors(body) {
  const out = [];
  if (body.name === '') {
    out.push({ id: 'name', message: 'name is required' });
  } else if (!(DNS_LABEL.test(body.name) && /^[a-z]/.test(body.name) && body.name.length <= MAX_NOTEBOOK_NAME)) {
    out.push({ id: 'name', message: 'name must start with a lower-case letter and hold only lower-case letters, ' +
      'digits and \'-\', not end with \'-\', at most 52 characters (Kubeflow names the notebook\'s Service and ' +
      `StatefulSet after it), got "${body.name.slice(0, 80)}"` });
  }
  const nsError = namespaceError(body.namespace);
  if (nsError) out.push({ id: 'namespace', message: nsError });
  if (body.image === '') out.push({ id: 'image', message: 'image is required' });
  for (const field of ['cpu', 'memory']) {
    const e = body[field] === '' ? null : quantityError(field, body[field]);
    if (e) out.push({ id: field, message: e });
  }
  return out;
}

function namespaceError(ns) {
  if (ns === '') return 'namespace is required';
  if (!(DNS_LABEL.test(ns) && ns.length <= 63)) {
    return `namespace must be a DNS-1123 label (lower-case letters, digits and '-', at most 63), got "${ns.slice(0, 80)}"`;
  }
  return null;
}

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

// errors: [{id, message}] (id: the input, or null when no single input is at fault).
function showFieldErrors(errors) {
  for (const old of document.querySelectorAll('.field-error')) {
    const input = $(old.dataset.for);
    if (input) {
      input.removeAttribute('aria-invalid');
      input.setAttribute('aria-describedby', (input.getAttribute('aria-describedby') ?? '')
        .split(' ').filter((d) => d && d !== old.id).join(' '));
    }
    old.remove();
  }
  for (const { id, message } of errors) {
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

// The server's messages, each with the input it is about.
const located = (messages) => messages.map((message) => ({ id: fieldOf(message), message }));

let invalid = true;   // anything on the form the server would refuse
let creating = false;
function updateCreate() {
  $('create').disabled = invalid || creating;
  $('create').title = invalid ? 'Fix the fields marked in red first' : '';
}

function showErrors(errors) {
  setList($('errors'), errors.map((e) => e.message));
  $('errors').classList.toggle('empty', errors.length === 0);
  showFieldErrors(errors);
  invalid = errors.length > 0;
  updateCreate();
}

// No fit and no Notebook while a field is wrong: a grey line and a YAML box that says why,
// never an empty green bar or an empty box.
function showNoPreview(errors) {
  const fitEl = $('fit');
  fitEl.className = 'fit unknown';
  fitEl.textContent = 'Fix the values above to see where it fits.';
  setList($('fit-nodes'), []);
  const fields = [...new Set(errors.map((e) => e.id).filter((id) => id))]
    .map((id) => document.querySelector(`label[for="${id}"]`)?.textContent.trim() ?? id);
  $('yaml').textContent = '# The Notebook appears here once every field is valid.' +
    (fields.length ? `\n# Fix: ${fields.join(', ')}.` : '');
}

function render(preview, local, renamed) {
  // A placeholder name was sent for a bad one: the webhook's messages name the container after it.
  const strip = (m) => (renamed ? m.replace(/^container "[^"]*": /, '') : m);
  const errors = [...local, ...located((preview.errors ?? []).map(strip))];
  showErrors(errors);
  setList($('warnings'), (preview.warnings ?? []).map(strip));
  const fit = preview.fit;
  if (local.length || !fit) {
    showNoPreview(errors);
    // The Notebook of values the webhook refuses is still worth reading; of placeholders, not.
    if (!local.length && preview.yaml) $('yaml').textContent = preview.yaml;
    return;
  }
  $('yaml').textContent = preview.yaml ?? '';
  const fitEl = $('fit');
  fitEl.className = 'fit';
  fitEl.textContent = fit.message;
  fitEl.classList.add(fit.fits ? 'ok' : 'no');
  const lines = (fit.per_node ?? []).map(nodeLine);
  setList($('fit-nodes'), lines.length ? lines : ['No node with GPUs to check.']);
  $('fit-details').open = !fit.fits;
}

function showError(message) {
  showErrors(located([message]));
  setList($('warnings'), []);
  showNoPreview(located([message]));
}

let timer = null;
let seq = 0;
async function preview() {
  const mine = ++seq;
  const body = formBody();
  const local = fieldErrors(body);
  // With a field the server refuses, the GPU part is still checked (every error at once):
  // the bad fields are replaced by placeholders the server accepts, and only errors are shown.
  const bad = new Set(local.map((e) => e.id));
  const sent = { ...body };
  if (bad.has('name')) sent.name = 'notebook';
  if (bad.has('namespace')) sent.namespace = 'default';
  if (bad.has('image')) sent.image = 'image';
  if (bad.has('cpu')) sent.cpu = '';
  if (bad.has('memory')) sent.memory = '';
  try {
    const r = await fetch('api/preview', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                           body: JSON.stringify(sent) });
    const answer = await r.json();
    if (mine !== seq) return;  // a newer preview is on its way
    if (!r.ok) {
      const errors = [...local, ...located([answer.error ?? `preview failed (HTTP ${r.status})`])];
      showErrors(errors);
      setList($('warnings'), []);
      showNoPreview(errors);
      return;
    }
    render(answer, local, bad.has('name'));
  } catch (e) {
    if (mine === seq) showError(`preview failed: ${e}`);
  }
}

let lastBody = null;
function schedulePreview() {
  showModes();
  // A "change" after the "input" of the same value (a field losing focus, e.g. to a click on
  // Create) asks nothing new and must not disable Create under the pointer.
  const text = JSON.stringify(formBody());
  if (text === lastBody) return;
  lastBody = text;
  // The form's own checks are instant (Create is disabled at once); the server's follow, and
  // until they come Create keeps the server's last answer (create is checked again there).
  const local = fieldErrors(formBody());
  if (local.length) {
    showErrors(local);
    showNoPreview(local);
  }
  clearTimeout(timer);
  timer = setTimeout(preview, DEBOUNCE_MS);
}

// A name that breaks only after its own separators ('-', '.', '/', ':'), never mid-word.
function breakable(text) {
  const frag = document.createDocumentFragment();
  for (const part of String(text).split(/(?<=[-./:])/)) {
    if (frag.childNodes.length) frag.append(document.createElement('wbr'));
    frag.append(part);
  }
  return frag;
}

function notebooksMessage(text) {
  const td = document.createElement('td');
  td.colSpan = 4;
  td.className = 'help';
  td.textContent = text;
  const tr = document.createElement('tr');
  tr.className = 'empty';
  tr.append(td);
  $('notebooks').querySelector('tbody').replaceChildren(tr);
}

let listSeq = 0;
async function loadNotebooks() {
  const mine = ++listSeq;
  const ns = $('namespace').value.trim();
  $('notebooks-error').textContent = '';
  $('nb-namespace').textContent = namespaceError(ns) ? '…' : ns;
  const tbody = $('notebooks').querySelector('tbody');
  if (namespaceError(ns)) {
    $('notebooks').setAttribute('aria-busy', 'false');
    notebooksMessage('Type a valid namespace to see its notebooks.');
    return;
  }
  // The rows of the previous namespace go at once: nothing on screen belongs to another one.
  $('notebooks').setAttribute('aria-busy', 'true');
  notebooksMessage(`Loading the notebooks of ${ns}…`);
  try {
    const r = await fetch(`api/notebooks?namespace=${encodeURIComponent(ns)}`);
    const body = await r.json();
    if (mine !== listSeq) return;  // the namespace changed meanwhile
    $('notebooks').setAttribute('aria-busy', 'false');
    if (!r.ok) {
      $('notebooks-error').textContent = body.error ?? `HTTP ${r.status}`;
      notebooksMessage(`Cannot list the notebooks of ${ns}.`);
      return;
    }
    if (body.notebooks.length === 0) {
      notebooksMessage(`No notebooks in ${ns} yet.`);
      return;
    }
    tbody.replaceChildren(...body.notebooks.map((nb) => {
      const tr = document.createElement('tr');
      const gpu = Object.entries(nb.limits).filter(([k]) => k.startsWith('nvidia.com/'))
        .map(([k, v]) => (k === 'nvidia.com/gpucores' && String(v) === '0'
          ? 'gpucores=0 (time-shared)' : `${k.replace('nvidia.com/', '')}=${v}`)).join(' ');
      for (const text of [nb.name, nb.state, nb.image, gpu || '—']) {
        const td = document.createElement('td');
        td.append(breakable(text));
        tr.append(td);
      }
      return tr;
    }));
  } catch (e) {
    if (mine === listSeq) {
      $('notebooks').setAttribute('aria-busy', 'false');
      $('notebooks-error').textContent = `cannot list notebooks: ${e}`;
    }
  }
}

let nsTimer = null;
function scheduleNotebooks() {
  clearTimeout(nsTimer);
  nsTimer = setTimeout(loadNotebooks, NAMESPACE_DEBOUNCE_MS);
}

/** The create refusal as a sentence (status: the HTTP status; error: the server's message). */
export function createRefusal(status, error, { name, namespace }) {
  if (status === 409) return `a notebook named ${name} already exists in ${namespace}; pick another name.`;
  if (status === 404) return 'this fracgpu ui serves the GPU dashboard only (--dashboard-only).';
  if (status >= 500) return `the cluster did not take it (HTTP ${status})${error ? `: ${error}` : ''}; try again in a moment.`;
  return error || `the server refused it (HTTP ${status}).`;
}

async function create(event) {
  event.preventDefault();
  const out = $('create-result');
  const body = formBody();
  const local = fieldErrors(body);
  if (local.length || invalid || creating) {
    if (local.length) showErrors(local);
    return;
  }
  out.className = '';
  out.textContent = 'Creating…';
  creating = true;
  updateCreate();
  try {
    const r = await fetch('api/notebooks', { method: 'POST', headers: { 'Content-Type': 'application/json' },
                                             body: JSON.stringify(body) });
    let answer = {};
    try {
      answer = await r.json();
    } catch {
      answer = {};  // not JSON (a proxy's page): the status says enough
    }
    if (r.ok) {
      out.textContent = `Created ${answer.notebook.metadata.namespace}/${answer.notebook.metadata.name}.`;
      out.classList.add('ok');
      loadNotebooks();
    } else {
      out.textContent = `Not created: ${createRefusal(r.status, answer.error, body)}`;
      out.classList.add('no');
    }
  } catch (e) {
    out.textContent = `Not created: the server did not answer (${e.message ?? e}).`;
    out.classList.add('no');
  } finally {
    creating = false;
    updateCreate();
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
    if (o.dashboard_only) {
      // `fracgpu ui --dashboard-only` creates no notebooks: only the dashboard is offered.
      window.location.replace('dashboard.html');
      return;
    }
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
  // The list follows the namespace as it is typed (debounced), no Refresh needed.
  $('namespace').addEventListener('input', scheduleNotebooks);
  showModes();
  await preview();
  await loadNotebooks();
}

init();
