// The browser side of `toolweave ui`: the inbox, the runs list and a run's page, drawn from the JSON API.
// Every string that comes from a store (step ids, arguments, outputs, errors, run ids, names) is inserted as
// text (`textContent`, text nodes, SVG text): this file never builds markup from strings.
import dagre from '@dagrejs/dagre';

const state = { csrf: null, user: null, caps: {}, store: '', view: null, refreshing: false, again: false };
const NAME_KEY = 'toolweave-ui-name';
const SVG = 'http://www.w3.org/2000/svg';

// --- DOM helpers -------------------------------------------------------------------------------------------

function h(tag, attrs, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === undefined || value === null || value === false) continue;
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else if (key === 'class') el.className = value;
    else if (key === 'dataset') Object.assign(el.dataset, value);
    else if (key === 'value') el.value = value;
    else el.setAttribute(key, value === true ? '' : String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function add(el, ...children) {
  for (const child of children.flat()) {
    if (child === null || child === undefined || child === false) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

function fill(el, ...children) {
  el.replaceChildren();
  return add(el, ...children);
}

function s(tag, attrs, ...children) {
  const el = document.createElementNS(SVG, tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (key.startsWith('on')) el.addEventListener(key.slice(2), value);
    else el.setAttribute(key, String(value));
  }
  for (const child of children.flat()) {
    if (child === null || child === undefined) continue;
    el.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return el;
}

const pretty = (value) => (typeof value === 'string' ? value : JSON.stringify(value, null, 2));
const pill = (status) => h('span', { class: `pill s-${status}`, 'data-status': status }, status);
const runHref = (runId) => `#/runs/${encodeURIComponent(runId)}`;

function when(seconds) {
  if (seconds === null || seconds === undefined) return '';
  const d = new Date(seconds * 1000);
  const pad = (n) => String(n).padStart(2, '0');
  return `${d.getFullYear()}-${pad(d.getMonth() + 1)}-${pad(d.getDate())} ${pad(d.getHours())}:${pad(d.getMinutes())}:${pad(d.getSeconds())}`;
}

function ago(seconds) {
  const diff = Date.now() / 1000 - seconds;
  if (diff < 60) return `${Math.max(0, Math.round(diff))} s ago`;
  if (diff < 3600) return `${Math.round(diff / 60)} min ago`;
  if (diff < 86400) return `${Math.round(diff / 3600)} h ago`;
  return `${Math.round(diff / 86400)} days ago`;
}

function took(start, end) {
  if (start === null || start === undefined) return '';
  const ms = ((end ?? Date.now() / 1000) - start) * 1000;
  return ms < 1000 ? `${ms.toFixed(0)} ms` : `${(ms / 1000).toFixed(ms < 10000 ? 2 : 1)} s`;
}

function notice(text, kind = '') {
  const el = document.getElementById('notice');
  el.textContent = text;
  el.className = `notice ${kind}`;
  el.hidden = !text;
  clearTimeout(notice.timer);
  if (text && kind === 'ok') notice.timer = setTimeout(() => { el.hidden = true; }, 6000);
}

// --- the API -----------------------------------------------------------------------------------------------

async function get(path) {
  const response = await fetch(path, { credentials: 'same-origin', headers: { Accept: 'application/json' } });
  const data = await response.json().catch(() => ({ error: `HTTP ${response.status}` }));
  if (!response.ok) throw new Error(data.error || `HTTP ${response.status}`);
  return data;
}

async function post(path, body) {
  const response = await fetch(path, {
    method: 'POST', credentials: 'same-origin',
    headers: { 'Content-Type': 'application/json', 'X-CSRF-Token': state.csrf || '' },
    body: JSON.stringify(body || {}),
  });
  const data = await response.json().catch(() => ({ ok: false, error: `HTTP ${response.status}` }));
  data.status = response.status;
  return data;
}

function who() {
  if (state.user) return state.user;
  return document.getElementById('who').value.trim();
}

async function act(path, body, button) {
  const name = who();
  if (!name && !state.user && body && body.needsName !== false) {
    notice('Say who decides: type your name at the top right first.', 'error');
    document.getElementById('who').focus();
    return null;
  }
  if (button) button.disabled = true;
  const result = await post(path, { ...body, by: name });
  if (button) button.disabled = false;
  if (result.ok) notice(result.message || 'Done.', 'ok');
  else notice(result.error || (result.steps ? Object.entries(result.steps).filter(([, r]) => !r.ok)
    .map(([id, r]) => `${id}: ${r.error}`).join('\n') : 'Refused.'), 'error');
  refresh();
  return result;
}

// --- the JSON editor: parsed as you type, then checked by the server against the tool's input schema ---------

function jsonEditor(tool, initial, onState) {
  const area = h('textarea', { class: 'editor', spellcheck: 'false', 'aria-label': `Arguments for ${tool}` });
  area.value = pretty(initial ?? {});
  const problems = h('div', { class: 'problems', 'aria-live': 'polite' });
  let timer = null;
  let generation = 0;
  const editor = { element: h('div', { class: 'json-editor' }, area, problems), valid: false, value: null };
  async function check() {
    const mine = ++generation;
    let value;
    try {
      value = JSON.parse(area.value);
    } catch (error) {
      editor.valid = false;
      area.classList.add('bad');
      problems.className = 'problems';
      problems.textContent = `Not JSON: ${error.message}`;
      onState(editor);
      return;
    }
    const answer = await post('/api/validate', { tool, arguments: value });
    if (mine !== generation) return;
    editor.valid = Boolean(answer.ok);
    editor.value = value;
    area.classList.toggle('bad', !answer.ok);
    problems.className = answer.ok ? 'problems ok' : 'problems';
    problems.textContent = answer.ok
      ? (answer.checked ? `Valid arguments for ${tool}: checked as its call will check them.` : 'A JSON object (no schema known: start the UI with --tools to check it).')
      : (answer.problems || [answer.error]).join('\n');
    onState(editor);
  }
  area.addEventListener('input', () => {
    editor.valid = false;
    ++generation;  // an answer about the text before this change no longer counts
    problems.className = 'problems checking';
    problems.textContent = 'Checking…';  // never a stale "fits" beside text that was not checked
    onState(editor);
    clearTimeout(timer);
    timer = setTimeout(check, 200);
  });
  area.addEventListener('keydown', (event) => {
    if (event.key === 'Tab') {
      event.preventDefault();
      area.setRangeText('  ', area.selectionStart, area.selectionEnd, 'end');
    }
  });
  check();
  return editor;
}

// --- the inbox -----------------------------------------------------------------------------------------------

async function showInbox(main) {
  const data = await get('/api/inbox');
  setCount(data.total);
  const list = [h('h1', {}, 'Inbox', h('span', { class: 'muted' }, ` · ${data.total} waiting`))];
  if (!data.items.length) list.push(h('div', { class: 'empty' }, 'Nothing waits for a decision.'));
  if (data.total > data.shown) list.push(h('p', { class: 'muted' }, `Showing the oldest ${data.shown} of ${data.total}.`));
  for (const item of data.items) list.push(item.kind === 'plan' ? planCard(item) : stepCard(item));
  fill(main, ...list);
}

function setCount(total) {
  document.getElementById('inbox-count').textContent = total ? String(total) : '';
}

function stepCard(item) {
  const base = `/api/runs/${encodeURIComponent(item.run_id)}/steps/${encodeURIComponent(item.step_id)}`;
  const card = h('section', { class: 'card inbox-step', dataset: { run: item.run_id, step: item.step_id } });
  const reason = h('input', { type: 'text', placeholder: 'why (shown to the run)', class: 'reject-reason', maxlength: 2000 });
  const editSlot = h('div');
  let editor = null;
  const save = h('button', { class: 'primary save-edit', hidden: true, disabled: true,
    onclick: (e) => act(`${base}/decision`, { action: 'edit', arguments: editor.value }, e.target) }, 'Approve with these arguments');
  const edit = h('button', { class: 'edit', onclick: () => {
    if (editor) return;
    editor = jsonEditor(item.tool, item.arguments, (ed) => { save.disabled = !ed.valid; });
    editSlot.replaceChildren(editor.element);
    save.hidden = false;
  } }, 'Edit');
  const where = [`step ${item.position} of ${item.of}`];
  if (item.depends_on.length) where.push(`after ${item.depends_on.join(', ')}`);
  if (item.dependents.length) where.push(`before ${item.dependents.join(', ')}`);
  const resolveOutput = h('input', { type: 'text', placeholder: 'what it did', class: 'resolve-output' });
  add(card,
    h('h3', {}, h('span', { class: 'tool' }, item.tool || '?'), ' · ', h('span', { class: 'step-id' }, item.step_id)),
    h('div', { class: 'meta' },
      h('span', {}, 'run ', h('a', { href: runHref(item.run_id), class: 'run-link' }, item.run_id)),
      h('span', {}, where.join(', ')),
      h('span', { title: when(item.parked_at) }, `waiting since ${when(item.parked_at)} (${ago(item.parked_at)})`),
      item.deadline ? h('span', { class: 'deadline' }, `deadline ${when(item.deadline)}`) : null,
      item.unknown_after_crash ? h('strong', {}, 'unknown after a crash') : null),
    item.description ? h('div', { class: 'muted' }, item.description) : null,
    item.reason ? h('div', { class: 'reason' }, item.reason) : null,
    h('div', { class: 'muted' }, `Arguments as ${item.arguments_as}:`),
    h('pre', { class: 'json arguments' }, pretty(item.arguments)),
    editSlot,
    h('div', { class: 'actions' },
      h('button', { class: 'primary approve', onclick: (e) => act(`${base}/decision`, { action: 'approve' }, e.target) }, 'Approve'),
      edit, save,
      reason,
      h('button', { class: 'danger reject', onclick: (e) => act(`${base}/decision`, { action: 'reject', reason: reason.value }, e.target) }, 'Reject'),
      state.caps.resolve ? [resolveOutput, h('button', { class: 'resolve',
        onclick: (e) => act(`${base}/decision`, { action: 'resolve', output: resolveOutput.value }, e.target) }, 'Resolve as done')] : null));
  return card;
}

function planCard(item) {
  const card = h('section', { class: 'card inbox-plan', dataset: { run: item.run_id } });
  const choices = {};
  const submit = h('button', { class: 'primary decide-plan', onclick: (e) => {
    const decisions = {};
    for (const [stepId, choice] of Object.entries(choices)) {
      const kind = choice.kind();
      if (kind === 'edit' && !(choice.editor && choice.editor.valid)) {
        notice(`The arguments of ${stepId} do not fit its tool's schema yet.`, 'error');
        return;
      }
      decisions[stepId] = kind === 'edit' ? { action: 'edit', arguments: choice.editor.value }
        : kind === 'reject' ? { action: 'reject', reason: choice.reason.value } : { action: 'approve' };
    }
    act(`/api/runs/${encodeURIComponent(item.run_id)}/review`, { decisions }, e.target);
  } }, 'Decide the plan');
  const rejectReason = h('input', { type: 'text', placeholder: 'why', class: 'plan-reject-reason' });
  const rejectAll = h('button', { class: 'danger reject-plan', onclick: (e) => {
    const decisions = {};
    for (const stepId of item.gated) decisions[stepId] = { action: 'reject', reason: rejectReason.value || 'plan rejected' };
    act(`/api/runs/${encodeURIComponent(item.run_id)}/review`, { decisions }, e.target);
  } }, 'Reject every gated step');
  const rows = item.steps.map((step) => {
    const gated = item.gated.includes(step.id);
    const row = h('div', { class: gated ? 'plan-step gated' : 'plan-step', dataset: { step: step.id } },
      h('div', {}, gated ? h('strong', {}, '● ') : null, h('span', { class: 'step-id' }, step.id), ' · ',
        h('span', { class: 'tool' }, step.tool || 'select'),
        step.depends_on.length ? h('span', { class: 'muted' }, ` after ${step.depends_on.join(', ')}`) : null,
        step.for_each !== null && step.for_each !== undefined ? h('span', { class: 'muted' }, ` for each of ${pretty(step.for_each)}`) : null),
      step.description ? h('div', { class: 'muted' }, step.description) : null,
      h('pre', { class: 'json arguments' }, pretty(step.arguments)));
    if (gated) {
      const name = `choice-${item.run_id}-${step.id}`;
      const radio = (value, label, checked) => h('label', {}, h('input', { type: 'radio', name, value, checked, class: `choice-${value}`,
        onchange: () => update() }), ` ${label}`);
      const reason = h('input', { type: 'text', placeholder: 'why', class: 'step-reason', hidden: true });
      const slot = h('div');
      const choice = { editor: null, reason, kind: () => row.querySelector(`input[type=radio]:checked`).value };
      const update = () => {
        const kind = choice.kind();
        reason.hidden = kind !== 'reject';
        if (kind === 'edit' && !choice.editor) {
          choice.editor = jsonEditor(step.tool, step.arguments, () => {});
          slot.replaceChildren(choice.editor.element);
        }
        slot.hidden = kind !== 'edit';
      };
      choices[step.id] = choice;
      add(row, h('div', { class: 'choice' }, radio('approve', 'approve', true), radio('edit', 'edit', false),
        radio('reject', 'reject', false), reason), slot);
    }
    return row;
  });
  add(card,
    h('h3', {}, 'Plan review · ', h('a', { href: runHref(item.run_id), class: 'run-link' }, item.run_id)),
    h('div', { class: 'meta' }, h('span', {}, `${item.steps.length} steps, ${item.gated.length} to decide`),
      h('span', {}, `waiting since ${when(item.parked_at)} (${ago(item.parked_at)})`)),
    item.goal ? h('div', { class: 'reason' }, item.goal) : null,
    ...rows,
    h('div', { class: 'actions' }, submit, rejectReason, rejectAll));
  return card;
}

// --- the runs list -------------------------------------------------------------------------------------------

const STATUSES = ['running', 'crashed', 'suspended', 'finished', 'stopped', 'cancelled'];

async function showRuns(main, params) {
  const query = new URLSearchParams(params);
  const data = await get(`/api/runs?${query}`);
  const form = h('form', { class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    const next = new URLSearchParams();
    for (const [key, value] of new FormData(e.target)) if (value) next.set(key, value);
    location.hash = `#/runs?${next}`;
  } },
  h('label', {}, 'Status', h('select', { name: 'status', class: 'f-status' }, h('option', { value: '' }, 'any'),
    STATUSES.map((st) => h('option', { value: st, selected: params.get('status') === st },
      st in data.counts ? `${st} (${data.counts[st]})` : st)))),
  h('label', {}, 'Name', h('input', { type: 'search', name: 'name', class: 'f-name', value: params.get('name') || '' })),
  h('label', {}, 'Updated from', h('input', { type: 'datetime-local', name: 'since', value: params.get('since') || '' })),
  h('label', {}, 'until', h('input', { type: 'datetime-local', name: 'until', value: params.get('until') || '' })),
  h('label', { class: 'check' }, 'Waiting for a decision', h('input', { type: 'checkbox', name: 'waiting', value: '1',
    class: 'f-waiting', checked: params.get('waiting') === '1' })),
  h('button', { type: 'submit' }, 'Filter'));
  const open = h('form', { class: 'filters', onsubmit: (e) => {
    e.preventDefault();
    const runId = new FormData(e.target).get('run');
    if (runId) location.hash = runHref(String(runId).trim());
  } }, h('label', {}, 'Run id', h('input', { type: 'search', name: 'run', class: 'f-run' })), h('button', { type: 'submit' }, 'Open'));
  const total = Object.values(data.counts).reduce((a, b) => a + b, 0);
  const rows = data.runs.map((run) => h('tr', { class: 'run-row', dataset: { run: run.run_id } },
    h('td', {}, h('a', { href: runHref(run.run_id), class: 'run-link' }, run.run_id)),
    h('td', {}, run.name || ''),
    h('td', {}, pill(run.status)),
    h('td', {}, String(run.steps)),
    h('td', {}, run.waiting ? h('a', { href: '#/inbox' }, String(run.waiting)) : ''),
    h('td', {}, when(run.created_at)),
    h('td', { title: when(run.updated_at) }, ago(run.updated_at))));
  const pager = h('div', { class: 'pager' },
    params.get('after') ? h('a', { href: `#/runs?${withParam(params, 'after', null)}` }, 'First page') : null,
    data.after ? h('a', { href: `#/runs?${withParam(params, 'after', data.after)}`, class: 'next-page' }, 'Next page') : null,
    h('span', { class: 'muted' }, `${data.runs.length} shown of ${total} runs in ${state.store}`));
  fill(main, h('h1', {}, 'Runs'), form, open,
    data.runs.length ? h('table', { class: 'runs' }, h('thead', {}, h('tr', {}, ['run', 'name', 'status', 'steps', 'waiting', 'started', 'updated']
      .map((t) => h('th', {}, t)))), h('tbody', {}, rows)) : h('div', { class: 'empty' }, 'No run matches.'),
    pager);
}

function withParam(params, key, value) {
  const next = new URLSearchParams(params);
  if (value === null) next.delete(key); else next.set(key, value);
  return next.toString();
}

// --- a run ---------------------------------------------------------------------------------------------------

async function showRun(main, runId) {
  const run = await get(`/api/runs/${encodeURIComponent(runId)}`);
  const open = new Set([...main.querySelectorAll('details.step[open]')].map((d) => d.dataset.step));
  const base = `/api/runs/${encodeURIComponent(run.run_id)}`;
  const actions = h('div', { class: 'actions run-actions' });
  const resumable = ['suspended', 'stopped', 'running'].includes(run.status);
  if (resumable && state.caps.resume) {
    add(actions, h('button', { class: 'resume', onclick: (e) => act(`${base}/resume`, { needsName: false }, e.target) }, 'Resume'));
  }
  if (state.caps.cancel && !['finished', 'cancelled'].includes(run.status)) {
    add(actions, h('button', { class: 'danger cancel', onclick: (e) => act(`${base}/cancel`, {}, e.target) }, 'Cancel run'));
  }
  const resume = run.resume ? h('div', { class: `reason resume-state ${run.resume.state}` },
    `Resumed from this page: ${run.resume.state}${run.resume.error ? ` (${run.resume.error})` : ''}`) : null;
  const cli = resumable && !state.caps.resume ? h('div', {}, h('div', { class: 'muted' }, 'To go on with it (this UI was started without --tools):'),
    h('code', { class: 'cmd' }, `toolweave runs resume ${run.run_id} --store ${state.store} --tools MODULE:ATTRIBUTE`)) : null;
  const counts = {};
  for (const step of run.steps) counts[step.status] = (counts[step.status] || 0) + 1;
  fill(main, 
    h('h1', {}, 'Run ', h('span', { class: 'run-id' }, run.run_id), ' ', pill(run.status)),
    h('div', { class: 'meta' },
      run.name ? h('span', {}, run.name) : null,
      run.goal ? h('span', {}, run.goal) : null,
      h('span', {}, `started ${when(run.created_at)}`), h('span', {}, `updated ${when(run.updated_at)}`),
      run.owner ? h('span', {}, `held by ${run.owner}`) : null,
      h('span', {}, Object.entries(counts).map(([k, v]) => `${v} ${k}`).join(', '))),
    actions, resume, cli,
    h('h2', {}, 'Plan'), graph(run),
    h('h2', {}, 'Timeline', h('span', { class: 'muted' }, ' (critical path in bold)')), timeline(run),
    h('h2', {}, 'Steps'), ...run.steps.map((step) => stepDetails(run, step, open.has(step.id))));
}

function graph(run) {
  const g = new dagre.graphlib.Graph();
  g.setGraph({ rankdir: 'LR', nodesep: 18, ranksep: 50, marginx: 12, marginy: 12 });
  g.setDefaultEdgeLabel(() => ({}));
  for (const step of run.steps) {
    const label = `${step.id} · ${step.tool || 'select'}`;
    const width = Math.min(260, Math.max(110, label.length * 7 + 20));
    g.setNode(step.id, { width, height: step.items.length ? 52 : 36, step, label });
  }
  for (const [from, to] of run.edges) g.setEdge(from, to);
  dagre.layout(g);
  const size = g.graph();
  const critical = new Set(run.critical_path);
  const svg = s('svg', { width: Math.max(size.width, 200), height: Math.max(size.height, 60), role: 'img', 'aria-label': 'The plan as a graph' });
  svg.append(s('defs', {}, s('marker', { id: 'arrow', viewBox: '0 0 10 10', refX: 9, refY: 5, markerWidth: 7, markerHeight: 7, orient: 'auto-start-reverse' },
    s('path', { d: 'M 0 0 L 10 5 L 0 10 z', fill: '#9aa1b1' }))));
  for (const e of g.edges()) {
    const points = g.edge(e).points;
    const d = points.map((p, i) => `${i ? 'L' : 'M'} ${p.x} ${p.y}`).join(' ');
    const onPath = critical.has(e.v) && critical.has(e.w);
    svg.append(s('path', { d, class: onPath ? 'edge critical' : 'edge', 'marker-end': 'url(#arrow)' }));
  }
  for (const id of g.nodes()) {
    const node = g.node(id);
    const step = node.step;
    const classes = ['node', step.status, critical.has(id) ? 'critical' : ''].join(' ');
    const group = s('g', { class: classes, transform: `translate(${node.x - node.width / 2}, ${node.y - node.height / 2})`,
      'data-step': id, onclick: () => focusStep(id) });
    const title = s('title', {}, `${step.id} (${step.tool || 'select'}): ${step.status}`);
    group.append(title, s('rect', { width: node.width, height: node.height, rx: 6, fill: `var(--${step.status}, var(--pending))` }));
    const text = node.label.length > 36 ? `${node.label.slice(0, 35)}…` : node.label;
    group.append(s('text', { x: 10, y: 22 }, text));
    if (step.items.length) {
      const shown = step.items.slice(0, 24);
      shown.forEach((item, i) => group.append(s('rect', { class: 'element', x: 10 + i * 10, y: 32, width: 8, height: 10,
        fill: `var(--${item.status}, var(--pending))` }, s('title', {}, `element ${item.index}: ${item.status}`))));
      if (step.items.length > shown.length) group.append(s('text', { x: 14 + shown.length * 10, y: 41 }, `+${step.items.length - shown.length}`));
    }
    svg.append(group);
  }
  return h('div', { class: 'graph' }, svg);
}

function timeline(run) {
  const ran = run.steps.filter((step) => step.started_at !== null);
  if (!ran.length) return h('div', { class: 'timeline muted' }, 'No step has started yet.');
  const now = Date.now() / 1000;
  const start = Math.min(...ran.map((step) => step.started_at));
  const end = Math.max(...ran.map((step) => step.ended_at ?? now));
  const span = Math.max(end - start, 1e-6);
  return h('div', { class: 'timeline' }, ran.sort((a, b) => a.started_at - b.started_at).map((step) => {
    const left = ((step.started_at - start) / span) * 100;
    const width = (((step.ended_at ?? now) - step.started_at) / span) * 100;
    const bar = h('div', { class: `tl-bar s-${step.status}` });
    bar.style.left = `${left}%`;
    bar.style.width = `${Math.max(width, 0.3)}%`;
    return h('div', { class: step.critical ? 'tl-row critical' : 'tl-row', dataset: { step: step.id } },
      h('span', { class: 'label', title: step.id }, step.id), h('div', { class: 'tl-track' }, bar),
      h('span', { class: 'took' }, took(step.started_at, step.ended_at)));
  }));
}

function focusStep(id) {
  const el = [...document.querySelectorAll('details.step')].find((d) => d.dataset.step === id);
  if (!el) return;
  el.open = true;
  el.scrollIntoView({ behavior: 'smooth', block: 'center' });
  el.classList.add('flash');
  setTimeout(() => el.classList.remove('flash'), 1200);
}

function stepDetails(run, step, open) {
  const rows = [];
  const kv = (key, value) => { if (value !== null && value !== undefined && value !== '') rows.push(h('span', {}, key), h('span', {}, value)); };
  kv('tool', step.tool || 'select');
  kv('attempts', String(step.attempts));
  kv('started', when(step.started_at));
  kv('ended', when(step.ended_at));
  kv('took', step.ended_at ? took(step.started_at, step.ended_at) : '');
  kv('after', step.depends_on.join(', '));
  if (step.decision) kv('decision', `${step.decision.kind}${step.decision.reason ? ` (${step.decision.reason})` : ''} by ${step.decision.by || 'someone'}${step.decision.via ? ` in the ${step.decision.via}` : ''} at ${when(step.decision.at)}`);
  const parts = [h('div', { class: 'kv' }, rows)];
  parts.push(h('div', { class: 'muted' }, 'Arguments as written'), h('pre', { class: 'json arguments' }, pretty(step.arguments)));
  if (step.given !== null) parts.push(h('div', { class: 'muted' }, 'Arguments it ran with (edited)'), h('pre', { class: 'json given' }, pretty(step.given)));
  if (step.output !== null) parts.push(h('div', { class: 'muted' }, 'Output'), h('pre', { class: 'json output' }, step.output));
  if (step.error) parts.push(h('div', { class: 'muted' }, step.status === 'parked' ? 'Why it waits' : 'Error'), h('pre', { class: 'json error' }, step.error));
  if (step.items.length) {
    parts.push(h('div', { class: 'muted' }, `Elements (${step.items.length})`), h('table', { class: 'items' },
      h('tbody', {}, step.items.map((item) => h('tr', {}, h('td', {}, String(item.index)), h('td', {}, pill(item.status)),
        h('td', {}, item.error || item.output || ''))))));
  }
  const actions = h('div', { class: 'actions' });
  if (step.status === 'failed' && state.caps.retry) {
    add(actions, h('button', { class: 'retry', onclick: (e) => act(`/api/runs/${encodeURIComponent(run.run_id)}/steps/${encodeURIComponent(step.id)}/retry`, { needsName: false }, e.target) }, 'Retry this step'));
  }
  if (step.status === 'parked') add(actions, h('a', { href: '#/inbox' }, 'Decide it in the inbox'));
  parts.push(actions);
  parts.push(h('details', { class: 'journal' }, h('summary', {}, `Journal (${step.journal.length} entries)`),
    h('table', {}, h('tbody', {}, step.journal.map((t) => h('tr', {}, h('td', {}, when(t.at)), h('td', {}, pill(t.status)),
      h('td', {}, t.item !== null ? `element ${t.item}` : ''), h('td', {}, t.error || (t.detail ? pretty(t.detail) : ''))))))));
  return h('details', { class: 'step', open, dataset: { step: step.id } },
    h('summary', {}, pill(step.status), h('span', { class: 'id' }, step.id), h('span', { class: 'muted' }, step.tool || 'select'),
      step.critical ? h('strong', {}, 'critical path') : null), ...parts);
}

// --- routing and live updates --------------------------------------------------------------------------------

function route() {
  const hash = location.hash || '#/inbox';
  const [path, query] = hash.slice(1).split('?');
  const params = new URLSearchParams(query || '');
  if (path.startsWith('/runs/')) return { name: 'run', runId: decodeURIComponent(path.slice(6)), params };
  if (path === '/runs') return { name: 'runs', params };
  return { name: 'inbox', params };
}

async function render() {
  const main = document.getElementById('main');
  const view = state.view = route();
  for (const a of document.querySelectorAll('[data-nav]')) {
    a.classList.toggle('active', a.dataset.nav === (view.name === 'run' ? 'runs' : view.name));
  }
  try {
    if (view.name === 'run') await showRun(main, view.runId);
    else if (view.name === 'runs') await showRuns(main, view.params);
    else await showInbox(main);
    main.dataset.rendered = String(Date.now());
  } catch (error) {
    fill(main, h('div', { class: 'empty error' }, String(error.message || error)));
  }
}

function busy() {
  // A person typing in an editor or a reason keeps the page as it is (a live update would wipe what they typed).
  const active = document.activeElement;
  return active && active.closest && active.closest('#main') && ['TEXTAREA', 'INPUT', 'SELECT'].includes(active.tagName);
}

async function refresh() {
  if (state.refreshing) { state.again = true; return; }
  state.refreshing = true;
  try {
    if (state.view && state.view.name === 'inbox' && busy()) {
      const data = await get('/api/inbox');
      setCount(data.total);
    } else {
      await render();
      if (state.view.name !== 'inbox') setCount((await get('/api/inbox')).total);
    }
  } catch (error) {
    notice(String(error.message || error), 'error');
  } finally {
    state.refreshing = false;
    if (state.again) { state.again = false; refresh(); }
  }
}

function listen() {
  const live = document.getElementById('live');
  const source = new EventSource('/api/events');
  source.addEventListener('hello', () => { live.classList.add('on'); });
  source.addEventListener('change', (event) => {
    const runs = JSON.parse(event.data);
    const view = state.view;
    if (view && view.name === 'run' && !runs.includes(view.runId)) {
      get('/api/inbox').then((data) => setCount(data.total)).catch(() => {});
      return;
    }
    refresh();
  });
  source.onerror = () => { live.classList.remove('on'); };
}

async function start() {
  const session = await get('/api/session');
  Object.assign(state, { csrf: session.csrf, user: session.user, caps: session.capabilities, store: session.store });
  const input = document.getElementById('who');
  if (state.user) {
    input.replaceWith(h('span', { class: 'fixed' }, state.user));
  } else {
    input.value = localStorage.getItem(NAME_KEY) || '';
    input.addEventListener('input', () => localStorage.setItem(NAME_KEY, input.value.trim()));
  }
  window.addEventListener('hashchange', render);
  await render();
  if (route().name !== 'inbox') setCount((await get('/api/inbox')).total);
  listen();
}

start().catch((error) => {
  fill(document.getElementById('main'), h('div', { class: 'empty error' }, String(error.message || error)));
});
