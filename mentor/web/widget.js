// <mentor-chat>: the "Ask the mentor" box as a web component. Embed it with two lines:
//
//   <script type="module" src="https://mentor.example/widget.js"></script>
//   <mentor-chat api="https://mentor.example" module="P10.llm-systems-frontier.02" token="…"></mentor-chat>
//
// Attributes: api (the mentor's base URL; default: where this file was loaded from), module (the module being
// read; optional when the mentor serves one), token (a learner token the host platform's server minted; without
// it the box uses this browser's anonymous learner), mode ("inline", the default; "launcher": a floating button
// that opens the box; "auto": the launcher in a window narrower than 60rem, where a page usually turns to one
// column and an inline box would sit below all of it, inline otherwise). Events (bubbling, composed):
// mentor-answer {detail: the ChatResponse}, mentor-error {detail: {status, message}},
// mentor-feedback {detail: {question_id, rating}}, mentor-toggle {detail: {open}}.
//
// Plain ES modules, no build step: the Markdown renderer and the sanitizer are vendored next to this file.

import { answerActions, starterList } from './static/box/actions.js';
import { ApiError, Client, Transcript } from './static/box/client.js';
import { computationCard, condensed } from './static/box/cards.js';
import { el } from './static/box/dom.js';
import { renderMarkdown, SECTION_ID, speakable } from './static/box/markdown.js';

const HERE = new URL('.', import.meta.url);
const STYLES = new URL('static/box/widget.css', HERE).href;
const STYLES_CHOICES = [
  ['explain', 'Explain'],
  ['hint', 'Hint'],
  ['brief', 'Brief'],
];
// mode="auto" floats the box as a launcher below this width (the demo page's one-column layout, demo.css).
const NARROW = '(max-width: 60rem)';
// Streamed text is announced a sentence or so at a time: per token would flood a screen reader.
const ANNOUNCE_MIN_CHARS = 40;
const ANNOUNCE_MAX_CHARS = 300;

let boxCount = 0;

class MentorChat extends HTMLElement {
  static observedAttributes = ['module', 'api', 'token'];

  constructor() {
    super();
    boxCount += 1;
    this.uid = `m${boxCount}`;
    this.busy = false;
    this.waitUntil = 0;
    this.attachShadow({ mode: 'open' });
  }

  get api() {
    const given = (this.getAttribute('api') || '').trim();
    return (given ? new URL(given, document.baseURI).href : HERE.href).replace(/\/+$/, '');
  }

  get module() {
    return (this.getAttribute('module') || '').trim();
  }

  get mode() {
    const mode = this.getAttribute('mode');
    return mode === 'launcher' || mode === 'auto' ? mode : 'inline';
  }

  // Whether the box floats behind a launcher button now (always in launcher mode; in auto mode, in a narrow window).
  get launcher() {
    return this.mode === 'launcher' || (this.mode === 'auto' && this.narrow.matches);
  }

  connectedCallback() {
    if (this.panel) return; // moved in the page: keep what is shown
    this.client = new Client(this.api, this.getAttribute('token'));
    this.transcript = new Transcript(this.api, this.module);
    this.narrow = window.matchMedia(NARROW);
    this.narrow.addEventListener('change', () => this.layout());
    this.build();
    this.catalog = this.loadCatalog();
    this.restore().then(() => this.offerStarters());
  }

  attributeChangedCallback(name, before, after) {
    if (!this.panel || before === after) return;
    this.client = new Client(this.api, this.getAttribute('token'));
    if (name !== 'token') {
      this.transcript = new Transcript(this.api, this.module);
      this.catalog = this.loadCatalog();
      this.log.replaceChildren();
      this.restore().then(() => this.offerStarters());
    }
  }

  // Section ids (links and footnotes may point there), starter questions (from the module's headings) and calculator
  // schemas (for the cards' inputs). Optional: without them links become text, an empty box offers no questions,
  // and cards show their inputs as plain text fields.
  async loadCatalog() {
    const [modules, tools] = await Promise.all([
      this.client.json('/v1/modules').catch(() => []),
      this.client.json('/v1/tools').catch(() => []),
    ]);
    const module = modules.find((m) => m.id === this.module) || (modules.length === 1 ? modules[0] : null);
    return {
      sections: new Set((module?.sections || []).map((s) => s.id)),
      starters: module?.starters || [],
      tools: new Map(tools.map((t) => [t.name, t])),
    };
  }

  build() {
    const id = (name) => `${this.uid}-${name}`;
    const root = this.shadowRoot;
    // The styles are a file, not an inline <style>, so a host page's CSP needs no 'unsafe-inline' for the box.
    // The box stays hidden until they load (or fail), so it never flashes unstyled.
    const sheet = el('link', { rel: 'stylesheet', href: STYLES });
    const shell = el('div', { class: 'shell', hidden: true });
    this.shell = shell;
    const reveal = () => shell.removeAttribute('hidden');
    sheet.addEventListener('load', reveal);
    sheet.addEventListener('error', reveal);

    this.titleEl = el('h2', { id: id('title'), text: 'Ask the mentor' });
    const fresh = el('button', { type: 'button', class: 'quiet', text: 'New conversation' });
    fresh.addEventListener('click', () => this.startOver());
    const head = el('div', { class: 'head' }, this.titleEl, fresh);
    if (this.mode !== 'inline') {
      this.closer = el('button', { type: 'button', class: 'quiet close', 'aria-label': 'Close the mentor', text: '×' });
      this.closer.addEventListener('click', () => this.toggle(false));
      head.append(this.closer);
    }
    const notice = el('p', { class: 'notice', text: 'Asking is recorded as a learning signal, not a grade.' });
    this.log = el('div', { class: 'log', id: id('log'), 'aria-label': 'Conversation', role: 'region', tabindex: '-1' });
    this.live = el('div', { class: 'sr-only', 'aria-live': 'polite', 'aria-atomic': 'false' });

    this.input = el('textarea', {
      id: id('q'),
      rows: '2',
      maxlength: '4000',
      placeholder: 'Ask about this module…',
      'aria-describedby': id('keys'),
    });
    this.input.addEventListener('keydown', (event) => {
      if (event.key === 'Enter' && !event.shiftKey && !event.isComposing) {
        event.preventDefault();
        this.form.requestSubmit();
      }
    });
    const keys = el('small', { id: id('keys'), class: 'keys', text: 'Enter sends; Shift+Enter starts a new line.' });
    const styles = el('fieldset', { class: 'styles' }, el('legend', { text: 'Answer style' }));
    for (const [value, text] of STYLES_CHOICES) {
      const radio = el('input', { type: 'radio', name: 'style', value, id: id(`style-${value}`) });
      radio.checked = value === (this.transcript.style || 'explain');
      radio.addEventListener('change', () => {
        this.transcript.style = value;
        this.transcript.save();
      });
      styles.append(el('span', { class: 'choice' }, radio, el('label', { for: id(`style-${value}`), text })));
    }
    this.send = el('button', { type: 'submit', class: 'send', text: 'Ask' });
    // Beside Ask, not in its place: a double click on Ask must not land on Stop.
    this.stopper = el('button', { type: 'button', class: 'stop', hidden: true, text: 'Stop' });
    this.stopper.addEventListener('click', () => this.controller?.abort());
    this.form = el(
      'form',
      { class: 'ask', 'aria-label': 'Ask a question' },
      el('label', { for: id('q'), text: 'Your question' }),
      this.input,
      keys,
      el('div', { class: 'row' }, styles, el('span', { class: 'buttons' }, this.stopper, this.send)),
    );
    this.form.addEventListener('submit', (event) => {
      event.preventDefault();
      this.ask(this.input.value);
    });

    this.panel = el(
      'section',
      { class: 'panel', id: id('panel'), 'aria-labelledby': id('title') },
      head,
      notice,
      this.log,
      this.form,
      this.live,
    );
    if (this.mode !== 'inline') {
      this.opener = el('button', {
        type: 'button',
        class: 'launcher',
        'aria-expanded': 'false',
        'aria-controls': id('panel'),
        text: 'Ask the mentor',
      });
      this.opener.addEventListener('click', () => this.toggle(this.panel.hidden));
      this.panel.addEventListener('keydown', (event) => {
        if (event.key === 'Escape') {
          event.stopPropagation();
          this.toggle(false);
        }
      });
      shell.append(this.panel, this.opener);
    } else {
      shell.append(this.panel);
    }
    root.replaceChildren(sheet, shell);
    this.layout();
  }

  // Inline, or floating behind the launcher button (closed until opened); auto mode switches as the window does.
  layout() {
    if (!this.opener) return;
    const floating = this.launcher;
    this.shell.classList.toggle('floating', floating);
    this.opener.hidden = !floating;
    this.closer.hidden = !floating;
    this.opener.setAttribute('aria-expanded', String(floating && Boolean(this.open)));
    this.panel.hidden = floating && !this.open;
    if (floating) this.panel.setAttribute('role', 'dialog');
    else this.panel.removeAttribute('role');
  }

  toggle(open) {
    if (!this.launcher) return;
    this.open = open;
    this.layout();
    (open ? this.input : this.opener).focus();
    this.emit('mentor-toggle', { open });
  }

  emit(type, detail) {
    this.dispatchEvent(new CustomEvent(type, { detail, bubbles: true, composed: true }));
  }

  get style() {
    return this.form.querySelector('input[name="style"]:checked')?.value || 'explain';
  }

  startOver() {
    this.controller?.abort();
    this.transcript.clear();
    this.log.replaceChildren();
    this.say('Started a new conversation.');
    this.input.focus();
    this.offerStarters();
  }

  // An empty conversation offers the module's starter questions; the first question asked takes their place.
  async offerStarters() {
    const { starters } = await this.catalog;
    if (this.log.children.length || !starters.length) return;
    this.log.append(
      starterList(`${this.uid}-starters`, starters.slice(0, 3), (question) => {
        this.input.focus(); // the button goes with the list: the keyboard stays in the box
        this.ask(question);
      }),
    );
  }

  // The conversation this tab had before a reload, re-rendered from what the answers said.
  async restore() {
    if (!this.transcript.turns.length) return;
    const catalog = await this.catalog;
    for (const saved of this.transcript.turns) {
      const turn = this.addTurn(saved.question);
      this.finish(turn, saved.response, catalog);
    }
    this.log.scrollTop = this.log.scrollHeight;
  }

  addTurn(question) {
    this.log.querySelector('.starters')?.remove();
    for (const old of this.log.querySelectorAll('.actions .retry')) old.remove(); // "Ask again" is for the last question
    const answer = el('div', { class: 'answer' });
    const body = el('div', { class: 'md' });
    answer.append(body);
    const turn = el(
      'article',
      { class: 'turn', 'aria-label': `Question: ${question.slice(0, 80)}` },
      el('p', { class: 'question' }, el('span', { class: 'who', text: 'You: ' }), document.createTextNode(question)),
      answer,
    );
    this.log.append(turn);
    return { element: turn, question, answer, body, text: '', cards: el('div', { class: 'cards' }) };
  }

  async ask(raw) {
    const question = raw.trim();
    if (!question || this.busy) return;
    if (Date.now() < this.waitUntil) {
      this.say(`Please wait ${Math.ceil((this.waitUntil - Date.now()) / 1000)} seconds before asking again.`);
      return;
    }
    this.busy = true;
    this.send.setAttribute('aria-disabled', 'true');
    this.form.setAttribute('aria-busy', 'true');
    this.input.value = '';
    const turn = this.addTurn(question);
    turn.body.append(el('p', { class: 'pending', text: 'Thinking…' }));
    this.scroll(true);
    const controller = new AbortController();
    this.controller = controller;
    this.stopper.hidden = false;
    try {
      await this.stream(turn, question, true, controller.signal);
    } finally {
      const stopFocused = this.shadowRoot.activeElement === this.stopper;
      this.stopper.hidden = true;
      if (stopFocused) this.input.focus();
      if (this.controller === controller) this.controller = null;
      this.busy = false;
      this.form.removeAttribute('aria-busy');
      if (Date.now() >= this.waitUntil) this.send.removeAttribute('aria-disabled');
    }
  }

  async stream(turn, question, mayRetry, signal) {
    const body = { message: question, style: this.style, ...this.client.identity() };
    if (this.module) body.module_id = this.module;
    if (this.transcript.conversationId) body.conversation_id = this.transcript.conversationId;
    const announcer = this.announcer();
    try {
      for await (const [kind, data] of this.client.chat(body, { signal })) {
        if (kind === 'meta') {
          this.transcript.conversationId = data.conversation_id;
          this.transcript.save();
        } else if (kind === 'delta') {
          turn.text += data.text || '';
          announcer.add(data.text || '');
          this.scheduleRender(turn);
        } else if (kind === 'done') {
          // Calculator cards come from `done`, not from the earlier tool_call events: `done` carries the calls as
          // the learner may see them (a hint names the calculator but withholds its result).
          announcer.flush();
          const catalog = await this.catalog;
          this.finish(turn, data, catalog);
          if (!turn.text) this.say(speakable(data.answer));
          this.transcript.add({ question, response: data });
          this.emit('mentor-answer', data);
          return;
        } else if (kind === 'error') {
          throw new ApiError(data.message || 'The answer could not be finished. Please ask again.');
        }
      }
      throw new ApiError('The answer was cut off. Please ask again.');
    } catch (error) {
      if (signal.aborted) return this.stopped(turn);
      // A conversation the server no longer knows (expired, or the server restarted) is started afresh, once.
      if (mayRetry && error.status === 404 && body.conversation_id) {
        this.transcript.conversationId = null;
        this.transcript.save();
        return this.stream(turn, question, false, signal);
      }
      this.fail(turn, error);
    }
  }

  fail(turn, error) {
    turn.body.querySelector('.pending')?.remove();
    const message = error instanceof ApiError ? error.message : 'Something went wrong in this page. Please ask again.';
    turn.answer.append(el('p', { class: 'error', role: 'alert', text: message }));
    turn.answer.append(this.actions(turn.question, null));
    if (error.retryAfter) this.wait(error.retryAfter);
    this.emit('mentor-error', { status: error.status || 0, message });
  }

  // Stopped by the learner: what had arrived stays, marked unfinished (it is not kept for a reload).
  stopped(turn) {
    turn.done = true;
    if (turn.frame) cancelAnimationFrame(turn.frame);
    turn.body.replaceChildren(turn.text ? renderMarkdown(turn.text) : '');
    turn.answer.append(el('p', { class: 'stopped', text: turn.text ? 'Stopped: the answer above is unfinished.' : 'Stopped.' }));
    turn.answer.append(this.actions(turn.question, null));
    this.say('Stopped.');
    this.scroll();
  }

  actions(question, response) {
    return answerActions({
      question,
      response,
      root: this.shadowRoot,
      say: (text) => this.say(text),
      again: (asked) => {
        this.input.focus(); // the button goes with the turn's actions: the keyboard stays in the box
        this.ask(asked);
      },
    });
  }

  // After a 429: the Ask button counts down the seconds the server asked for.
  wait(seconds) {
    this.waitUntil = Date.now() + seconds * 1000;
    this.send.setAttribute('aria-disabled', 'true');
    const tick = () => {
      const left = Math.ceil((this.waitUntil - Date.now()) / 1000);
      if (left <= 0) {
        this.send.textContent = 'Ask';
        this.send.removeAttribute('aria-disabled');
        return;
      }
      this.send.textContent = `Wait ${left} s`;
      setTimeout(tick, 1000);
    };
    tick();
  }

  scheduleRender(turn) {
    if (turn.frame) return;
    turn.frame = requestAnimationFrame(() => {
      turn.frame = null;
      if (turn.done) return;
      turn.body.replaceChildren(renderMarkdown(turn.text));
      this.scroll();
    });
  }

  // The finished answer: Markdown with footnotes, the redirect, cards, the grounding mark and feedback.
  finish(turn, response, catalog) {
    turn.done = true;
    const citations = new Map((response.citations || []).map((c) => [c.n, c]));
    const sections = new Set([...catalog.sections, ...[...citations.values()].map((c) => c.section_id)]);
    const notes = el('ol', { class: 'notes' });
    const noteFor = new Map();
    const marker = (n, citation) => {
      if (!noteFor.has(n)) {
        const note = this.note(n, citation);
        noteFor.set(n, note);
        notes.append(note);
      }
      return this.footnoteButton(n, citation, noteFor.get(n));
    };
    // A calculation is said once: by its card, with one line of prose (the API's text keeps the figures).
    const calls = response.tool_calls || [];
    const shown = condensed(response.answer || '', calls);
    turn.body.replaceChildren(renderMarkdown(shown, { sections, citations, marker }));
    const answer = turn.answer;
    answer.classList.toggle('redirect', Boolean(response.out_of_scope));
    if (response.out_of_scope) answer.prepend(el('p', { class: 'badge', text: 'Outside this module' }));
    if (notes.children.length) answer.append(notes);
    if (calls.length) {
      for (const call of calls) {
        turn.cards.append(computationCard(call, catalog.tools.get(call.name), { client: this.client, announce: (t) => this.say(t) }));
      }
      answer.append(turn.cards);
    }
    // The check's verdict where there was something of the module to check (a reply to "thanks" has none).
    const checked = citations.size || calls.length || response.grounding?.grounded === false;
    if (!response.out_of_scope && checked) answer.append(this.verdict(response.grounding));
    answer.append(this.actions(turn.question, response));
    if (response.question_id) answer.append(this.feedback(response.question_id));
    this.scroll();
  }

  footnoteButton(n, citation, note) {
    const button = el('button', {
      type: 'button',
      class: 'cite',
      'aria-expanded': 'false',
      'aria-controls': note.id,
      'aria-label': `Source ${n}: ${citation.section_title}`,
      text: `[${n}]`,
    });
    button.addEventListener('click', () => {
      const open = note.hidden;
      note.hidden = !open;
      for (const other of this.shadowRoot.querySelectorAll(`[aria-controls="${note.id}"]`)) {
        other.setAttribute('aria-expanded', String(open));
      }
    });
    return button;
  }

  // The quoted passage, its section title, and a link to the section in the host page (#section-id).
  note(n, citation) {
    this.noteCount = (this.noteCount || 0) + 1;
    const title = SECTION_ID.test(citation.section_id)
      ? el('a', { href: `#${citation.section_id}`, text: citation.section_title })
      : el('span', { text: citation.section_title });
    // Floating over the page, the box steps aside when the learner follows a source to its section.
    title.addEventListener('click', () => {
      if (title.tagName !== 'A' || !this.launcher) return;
      this.open = false;
      this.layout();
      this.emit('mentor-toggle', { open: false });
    });
    return el(
      'li',
      { id: `${this.uid}-note-${this.noteCount}`, class: 'note', value: String(n), hidden: true },
      el('p', { class: 'note-title' }, el('span', { text: `[${n}] ` }), title),
      el('blockquote', { text: citation.quote }),
    );
  }

  verdict(grounding) {
    if (!grounding || grounding.grounded) {
      return el('p', { class: 'verdict ok', text: '✓ Checked against the module' });
    }
    const box = el('div', { class: 'verdict warn' });
    box.append(el('p', { text: 'Parts of this answer could not be found in the module:' }));
    const list = el('ul');
    for (const sentence of grounding.unsupported_sentences || []) list.append(el('li', { text: sentence }));
    for (const number of grounding.untraced_numbers || []) list.append(el('li', { text: `the number ${number}` }));
    box.append(list);
    return box;
  }

  feedback(questionId) {
    const group = el('div', { class: 'feedback', role: 'group', 'aria-label': 'Was this answer helpful?' });
    const status = el('p', { class: 'feedback-status', role: 'status' });
    const comment = el('textarea', { rows: '2', maxlength: '2000', id: `${this.uid}-c-${questionId}` });
    const submit = el('button', { type: 'submit', text: 'Send feedback' });
    const form = el(
      'form',
      { class: 'comment', hidden: true },
      el('label', { for: comment.id, text: 'Comment (optional)' }),
      comment,
      submit,
    );
    let rating = null;
    const choose = (value) => {
      rating = value;
      for (const button of group.querySelectorAll('button[data-rating]')) {
        button.setAttribute('aria-pressed', String(button.dataset.rating === value));
      }
      form.hidden = false;
      comment.focus();
    };
    const up = el('button', { type: 'button', 'data-rating': 'up', 'aria-pressed': 'false', text: 'Yes' });
    const down = el('button', { type: 'button', 'data-rating': 'down', 'aria-pressed': 'false', text: 'No' });
    up.addEventListener('click', () => choose('up'));
    down.addEventListener('click', () => choose('down'));
    form.addEventListener('submit', async (event) => {
      event.preventDefault();
      if (!rating || form.getAttribute('aria-busy') === 'true') return;
      form.setAttribute('aria-busy', 'true');
      try {
        await this.client.feedback(questionId, rating, comment.value.trim());
        form.hidden = true;
        for (const button of group.querySelectorAll('button[data-rating]')) button.disabled = true;
        status.textContent = 'Thank you: your feedback is recorded.';
        status.classList.remove('error');
        this.emit('mentor-feedback', { question_id: questionId, rating });
      } catch (error) {
        status.textContent = error.message;
        status.classList.add('error');
      } finally {
        form.removeAttribute('aria-busy');
      }
    });
    group.append(el('span', { class: 'ask-rate', text: 'Helpful?' }), up, down, form, status);
    return group;
  }

  announcer() {
    let pending = '';
    const flush = () => {
      const text = speakable(pending);
      pending = '';
      if (text) this.say(text);
    };
    return {
      add: (text) => {
        pending += text;
        const settled = /[.!?:;]\s*$|\n/.test(pending) && pending.length >= ANNOUNCE_MIN_CHARS;
        if (settled || pending.length >= ANNOUNCE_MAX_CHARS) flush();
      },
      flush,
    };
  }

  // Polite announcement: a new paragraph in the live region (the last few kept, older ones dropped).
  say(text) {
    this.live.append(el('p', { text }));
    while (this.live.children.length > 3) this.live.firstElementChild.remove();
  }

  scroll(force = false) {
    const log = this.log;
    const nearBottom = log.scrollHeight - log.scrollTop - log.clientHeight < 120;
    if (force || nearBottom) log.scrollTop = log.scrollHeight;
  }
}

if (!customElements.get('mentor-chat')) customElements.define('mentor-chat', MentorChat);

export { MentorChat };
