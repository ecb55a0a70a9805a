// Answers are Markdown written by a model (or quoted from a module someone else wrote): render them with a real
// Markdown parser, then keep only inert formatting. Nothing from an answer may become live in the page: no HTML
// (shown as text), no image, no script, no style, and no link except to the module's own sections (#section-id).

import { Marked } from '../vendor/marked/marked.esm.js';
import DOMPurify from '../vendor/dompurify/purify.es.mjs';

// A section id as module files write it ({#id}); the same pattern as mentor/corpus.py SECTION_ID.
export const SECTION_ID = /^[a-z0-9][a-z0-9._-]*$/;

export function escapeHtml(text) {
  return String(text).replace(/[&<>"']/g, (c) => ({ '&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;', "'": '&#39;' })[c]);
}

// Raw HTML is escaped (shown, not dropped: a learner sees what the model wrote), images become their alt text,
// and headings become bold paragraphs so an answer cannot break the host page's heading outline.
const marked = new Marked({
  gfm: true,
  breaks: false,
  renderer: {
    html({ text, block }) {
      return block ? `<p>${escapeHtml(text)}</p>\n` : escapeHtml(text);
    },
    image({ text }) {
      return escapeHtml(text || '');
    },
    heading({ tokens }) {
      return `<p><strong>${this.parser.parseInline(tokens)}</strong></p>\n`;
    },
  },
});

// DOMPurify is the second wall, for anything the renderer lets through: an allow-list of tags, href the only
// attribute (no style, no on*, no src), and a fragment of inert nodes (parsed in a document that runs nothing).
const PURIFY = {
  ALLOWED_TAGS: [
    'p', 'br', 'strong', 'em', 'b', 'i', 'del', 's', 'code', 'pre', 'ul', 'ol', 'li', 'blockquote', 'hr', 'a',
    'table', 'thead', 'tbody', 'tr', 'th', 'td',
  ],
  ALLOWED_ATTR: ['href'],
  ALLOW_DATA_ATTR: false,
  ALLOW_ARIA_ATTR: false,
  RETURN_DOM_FRAGMENT: true,
};

// Render `text` into a fragment of safe nodes. `sections` is the set of section ids links may point to;
// `citations` maps n -> citation, and `marker(n, citation)` builds the element that replaces "[n]".
export function renderMarkdown(text, { sections = new Set(), citations = new Map(), marker = null } = {}) {
  const fragment = DOMPurify.sanitize(marked.parse(String(text)), PURIFY);
  for (const link of [...fragment.querySelectorAll('a')]) {
    const href = link.getAttribute('href') || '';
    const id = href.startsWith('#') ? href.slice(1) : '';
    if (SECTION_ID.test(id) && sections.has(id)) continue;
    link.replaceWith(document.createTextNode(link.textContent)); // a foreign link is plain text
  }
  if (marker && citations.size) replaceMarkers(fragment, citations, marker);
  return fragment;
}

// "[n]" markers in text (not in code or links) become the element `marker` builds, for known citations only.
function replaceMarkers(root, citations, marker) {
  const walker = document.createTreeWalker(root, NodeFilter.SHOW_TEXT);
  const found = [];
  for (let node = walker.nextNode(); node; node = walker.nextNode()) {
    if (/\[\d+\]/.test(node.data) && !node.parentElement?.closest('code, pre, a')) found.push(node);
  }
  for (const node of found) {
    const parts = node.data.split(/(\[\d+\])/);
    const replacement = document.createDocumentFragment();
    for (const part of parts) {
      const n = /^\[(\d+)\]$/.exec(part)?.[1];
      const citation = n && citations.get(Number(n));
      replacement.append(citation ? marker(Number(n), citation) : document.createTextNode(part));
    }
    node.replaceWith(replacement);
  }
}

// What a screen reader should hear of a piece of Markdown: the words, without markers and punctuation marks.
export function speakable(text) {
  return String(text)
    .replace(/\[\d+\]/g, '')
    .replace(/[*_`#>|]+/g, ' ')
    .replace(/\s+/g, ' ')
    .trim();
}

// An answer as plain text for the clipboard: its blocks as paragraphs, list items on their own lines, table rows with
// tabs between cells, emphasis dropped; "[n]" markers kept (the copied sources list says what they point to).
export function plainText(text) {
  const blocks = [];
  for (const node of renderMarkdown(text).childNodes) {
    if (node.nodeType !== Node.ELEMENT_NODE) {
      if (node.textContent.trim()) blocks.push(node.textContent.trim());
    } else if (node.tagName === 'UL' || node.tagName === 'OL') {
      const items = [...node.children].map((li, i) => `${node.tagName === 'OL' ? `${i + 1}.` : '-'} ${li.textContent.trim()}`);
      blocks.push(items.join('\n'));
    } else if (node.tagName === 'TABLE') {
      blocks.push([...node.querySelectorAll('tr')].map((row) => [...row.cells].map((c) => c.textContent.trim()).join('\t')).join('\n'));
    } else {
      blocks.push(node.textContent.trim());
    }
  }
  return blocks.filter(Boolean).join('\n\n');
}
