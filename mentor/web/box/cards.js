// Computation cards: one calculator run shown as its formula, inputs and result with units. The learner may change
// an input and run it again (POST /v1/tools/{name}); the card then shows the calculator's exact new result, without
// a new question. Everything is built as DOM nodes with textContent: a card carries no HTML from the server.

import { el } from './dom.js';

let cardCount = 0;

function label(key) {
  return key.replace(/_/g, ' ');
}

// Integers exactly and grouped; other numbers as JavaScript prints them (the shortest text that reads back the same).
function exact(value) {
  return Number.isSafeInteger(value) ? value.toLocaleString('en-US') : String(value);
}

function significant(value, digits = 4) {
  return Number(value.toPrecision(digits)).toLocaleString('en-US', { maximumFractionDigits: 3 });
}

// Decimal units, as the calculators' explanations use them (GB = 10^9 bytes).
function bytes(value) {
  const units = ['bytes', 'kB', 'MB', 'GB', 'TB', 'PB'];
  let scaled = value;
  let unit = 0;
  while (Math.abs(scaled) >= 1000 && unit < units.length - 1) {
    scaled /= 1000;
    unit += 1;
  }
  return `${significant(scaled)} ${units[unit]}`;
}

// A result value with its unit, read from the key's name (the calculators name units: total_bytes, compute_flops).
export function describeValue(key, value) {
  if (typeof value === 'boolean') return value ? 'yes' : 'no';
  if (typeof value !== 'number') return String(value);
  if (/bytes$/.test(key)) return Math.abs(value) >= 1000 ? `${exact(value)} bytes (${bytes(value)})` : `${exact(value)} bytes`;
  if (/flops$/.test(key)) return `${value.toExponential()} FLOPs`;
  if (key === 'seconds' || key.endsWith('_s')) return `${exact(value)} s (${significant(value / 86400)} days)`;
  if (key === 'days') return `${exact(value)} days`;
  if (/fraction$/.test(key)) return `${exact(value)} (${significant(value * 100, 3)} %)`;
  return exact(value);
}

function resultList(result) {
  const list = el('dl', { class: 'result' });
  for (const [key, value] of Object.entries(result || {})) {
    const term = el('dt', { text: label(key) });
    const detail = el('dd', { 'data-key': key });
    if (value && typeof value === 'object' && !Array.isArray(value)) {
      detail.append(resultList(value));
    } else {
      detail.textContent = describeValue(key, value);
      if (typeof value === 'number') detail.dataset.value = String(value);
    }
    list.append(term, detail);
  }
  return list;
}

function allowsString(schema) {
  return schema.type === 'string' || (schema.anyOf || []).some((option) => option.type === 'string');
}

function field(prefix, name, schema, value) {
  const id = `${prefix}-${name}`;
  const hint = schema.description ? el('small', { id: `${id}-hint`, text: schema.description }) : null;
  let control;
  if (schema.type === 'boolean') {
    control = el('input', { type: 'checkbox', id, name, 'aria-describedby': hint && hint.id });
    control.checked = value === undefined ? Boolean(schema.default) : Boolean(value);
    return el('div', { class: 'field check' }, control, el('label', { for: id, text: label(name) }), ...(hint ? [hint] : []));
  }
  if (Array.isArray(schema.enum)) {
    control = el('select', { id, name, 'aria-describedby': hint && hint.id });
    const chosen = value === undefined ? schema.default : value;
    for (const option of schema.enum) {
      control.append(el('option', { value: String(option), text: String(option), selected: option === chosen }));
    }
  } else {
    control = el('input', { type: 'text', id, name, inputmode: allowsString(schema) ? 'text' : 'decimal', spellcheck: 'false', 'aria-describedby': hint && hint.id });
    control.value = value === undefined || value === null ? '' : typeof value === 'object' ? JSON.stringify(value) : String(value);
    if (schema.default !== undefined) control.placeholder = String(schema.default);
  }
  return el('div', { class: 'field' }, el('label', { for: id, text: label(name) }), control, ...(hint ? [hint] : []));
}

// The arguments object the form now says, typed as the calculator's schema wants them; blank fields are left out
// (the calculator's default applies). Text fields that allow strings are sent as typed ("7B", "1e23"): the server
// parses them exactly, where a JavaScript number would already be rounded.
function readArguments(form, properties) {
  const args = {};
  for (const control of form.querySelectorAll('input, select')) {
    const schema = properties[control.name] || { type: 'string' };
    if (control.type === 'checkbox') {
      args[control.name] = control.checked;
    } else if (control.tagName === 'SELECT') {
      const numeric = (schema.enum || []).every((option) => typeof option === 'number');
      args[control.name] = numeric ? Number(control.value) : control.value;
    } else {
      const text = control.value.trim();
      if (!text) continue;
      const number = Number(text);
      args[control.name] = !allowsString(schema) && Number.isFinite(number) ? number : text;
    }
  }
  return args;
}

// A card for one tool call ({name, arguments, result, explanation}); `info` is its GET /v1/tools entry, if known.
export function computationCard(call, info, { client, announce }) {
  cardCount += 1;
  const prefix = `card${cardCount}`;
  const properties = info?.parameters?.properties || Object.fromEntries(Object.keys(call.arguments || {}).map((k) => [k, { type: 'string' }]));
  const title = info?.title || label(call.name).replace(/^./, (c) => c.toUpperCase());
  const hasResult = call.result !== null && call.result !== undefined;

  const heading = el('h3', { id: `${prefix}-title`, text: `Calculation: ${title}` });
  const formula = el('p', { class: 'formula', text: hasResult ? call.explanation : 'Work it out yourself first, then run the calculator to check.' });
  const results = el('div', { class: 'results' }, hasResult ? resultList(call.result) : '');
  const status = el('p', { class: 'card-status', role: 'status' });
  const form = el('form', { class: 'inputs', 'aria-label': `Inputs of ${title}` });
  const fieldset = el('fieldset', {}, el('legend', { text: 'Inputs (change any and run again)' }));
  for (const [name, schema] of Object.entries(properties)) fieldset.append(field(prefix, name, schema, call.arguments?.[name]));
  const run = el('button', { type: 'submit', class: 'rerun', text: hasResult ? 'Re-run' : 'Run' });
  form.append(fieldset, run);

  form.addEventListener('submit', async (event) => {
    event.preventDefault();
    if (form.getAttribute('aria-busy') === 'true') return;
    form.setAttribute('aria-busy', 'true');
    status.textContent = 'Running…';
    status.classList.remove('error');
    try {
      const ran = await client.runTool(call.name, readArguments(form, properties));
      formula.textContent = ran.explanation;
      results.replaceChildren(resultList(ran.result));
      for (const [name, value] of Object.entries(ran.arguments || {})) {
        const control = form.elements.namedItem(name);
        if (control && control.type !== 'checkbox' && control.tagName !== 'SELECT') control.value = String(value);
      }
      run.textContent = 'Re-run';
      status.textContent = 'Updated with your inputs.';
      announce(`Recalculated. ${ran.explanation}`);
    } catch (error) {
      status.textContent = error.message;
      status.classList.add('error');
    } finally {
      form.removeAttribute('aria-busy');
    }
  });

  return el('section', { class: 'card', 'aria-labelledby': heading.id, 'data-tool': call.name }, heading, formula, results, form, status);
}

// The answer's text with each calculation its cards show said once: where the text restates a card's worked formula
// (the offline engine writes "**Training memory:** <the calculator's explanation>"; a model may copy it too), the
// formula gives way to one line: the explanation's first sentence when that is a verdict in words ("No: … 32 GB
// short."), else a pointer to the card. The API's text keeps every number: the grounding check and the eval read it.
export function condensed(text, calls) {
  let out = String(text);
  for (const call of calls || []) {
    const said = call.explanation;
    if (said && out.includes(said)) out = out.replace(said, oneLine(said));
  }
  return out;
}

function oneLine(explanation) {
  // A sentence ends at . ! or ? before a capital ("… 32 GB short. Model state = …"), not inside "et al. 2022" or 1.12.
  const first = /^.*?[.!?](?=\s+[A-Z])/s.exec(explanation)?.[0] || explanation;
  return first.includes('=') ? 'worked out in the card below.' : `${first} The figures are in the card below.`;
}
