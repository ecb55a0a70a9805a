// The box's small controls around a conversation: starter questions while it is empty, and under an answer "Copy"
// (the answer and its sources, as plain text) and "Ask again" (the last question, asked anew). Built with el(): text,
// never HTML.

import { el } from './dom.js';
import { plainText, SECTION_ID } from './markdown.js';

const COPIED_MS = 2000; // how long "Copy" reads "Copied"

// The questions GET /v1/modules offers for the module (made from its section headings), as buttons that ask them.
export function starterList(id, starters, ask) {
  const list = el('ul');
  for (const { question } of starters) {
    const button = el('button', { type: 'button', class: 'starter', text: question });
    button.addEventListener('click', () => ask(question));
    list.append(el('li', {}, button));
  }
  return el(
    'div',
    { class: 'starters', role: 'group', 'aria-labelledby': id },
    el('p', { id, text: 'Not sure where to start? Try one of these:' }),
    list,
  );
}

// What "Copy" puts on the clipboard: the answer as plain text, then its sources by section title, each with a link
// to its section when this page has it (the demo page does; another site may not).
export function copyText(response) {
  const parts = [plainText(response.answer || '')];
  const citations = response.citations || [];
  if (citations.length) {
    const page = `${location.origin}${location.pathname}${location.search}`;
    const source = (c) => {
      const here = SECTION_ID.test(c.section_id) && document.getElementById(c.section_id);
      return `[${c.n}] ${c.section_title}${here ? ` (${page}#${c.section_id})` : ''}`;
    };
    parts.push(['Sources:', ...citations.map(source)].join('\n'));
  }
  return parts.join('\n\n');
}

// Put `text` on the clipboard. The Clipboard API needs a secure context (https, localhost); elsewhere a selected
// textarea and the older copy command do it. Resolves true when copied.
export async function toClipboard(text, root) {
  try {
    if (navigator.clipboard && window.isSecureContext) {
      await navigator.clipboard.writeText(text);
      return true;
    }
  } catch {
    /* refused (permissions, an unfocused page): try the older way */
  }
  const area = el('textarea', { class: 'sr-only', readonly: true, 'aria-hidden': 'true', tabindex: '-1' });
  area.value = text;
  root.append(area);
  area.select();
  let copied = false;
  try {
    copied = document.execCommand('copy');
  } catch {
    copied = false;
  }
  area.remove();
  return copied;
}

// The row under an answer: Copy (when there is an answer to copy) and Ask again. `say` announces the outcome.
export function answerActions({ question, response, root, say, again }) {
  const row = el('div', { class: 'actions' });
  if (response) {
    const copy = el('button', { type: 'button', class: 'copy', text: 'Copy' });
    copy.addEventListener('click', async () => {
      const copied = await toClipboard(copyText(response), root);
      copy.textContent = copied ? 'Copied' : 'Copy failed';
      say(copied ? 'Copied the answer and its sources.' : 'The answer could not be copied: this page may not allow it.');
      setTimeout(() => {
        copy.textContent = 'Copy';
      }, COPIED_MS);
    });
    row.append(copy);
  }
  const retry = el('button', {
    type: 'button',
    class: 'retry',
    text: 'Ask again',
    'aria-label': `Ask again: ${question.slice(0, 80)}`,
  });
  retry.addEventListener('click', () => again(question));
  row.append(retry);
  return row;
}
