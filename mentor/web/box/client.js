// The box's side of the HTTP API: who the learner is, the chat stream, feedback and calculator runs.
// Every failure becomes an ApiError with a plain message a learner can read; nothing here touches the page.

export class ApiError extends Error {
  constructor(message, { status = 0, retryAfter = null } = {}) {
    super(message);
    this.status = status; // 0: the mentor could not be reached (network, or this page's origin not allowed)
    this.retryAfter = retryAfter; // seconds, for a 429
  }
}

// Storage may be missing or throw (a sandboxed frame, blocked cookies): the box then works without memory.
function storage(kind) {
  try {
    const store = window[kind];
    store.getItem('mentor.probe');
    return store;
  } catch {
    return null;
  }
}

function uuid() {
  if (globalThis.crypto?.randomUUID) return crypto.randomUUID(); // secure contexts only (https, localhost)
  const bytes = crypto.getRandomValues(new Uint8Array(16));
  bytes[6] = (bytes[6] & 0x0f) | 0x40;
  bytes[8] = (bytes[8] & 0x3f) | 0x80;
  const hex = [...bytes].map((b) => b.toString(16).padStart(2, '0')).join('');
  return `${hex.slice(0, 8)}-${hex.slice(8, 12)}-${hex.slice(12, 16)}-${hex.slice(16, 20)}-${hex.slice(20)}`;
}

const LEARNER_KEY = 'mentor.learner';
let memoryLearner = null;

// Without a learner token, this browser's anonymous learner: "anon-<uuid>", kept in localStorage so the same
// learner is recognised across visits (and can be erased as one), never a name the page could claim.
export function anonymousLearner() {
  const local = storage('localStorage');
  let id = local?.getItem(LEARNER_KEY);
  if (!id || !/^anon-[0-9a-f-]{36}$/.test(id)) {
    id = memoryLearner || `anon-${uuid()}`;
    memoryLearner = id;
    try {
      local?.setItem(LEARNER_KEY, id);
    } catch {
      /* quota or privacy mode: this page view keeps the id in memory */
    }
  }
  return id;
}

// One conversation per API and module, kept for the tab (sessionStorage): a reload continues it, a new tab does not.
// It keeps the conversation id, the finished turns (to show them again) and the chosen answer style.
export class Transcript {
  static MAX_TURNS = 20;

  constructor(api, module) {
    this.key = `mentor.chat:${api}:${module || ''}`;
    this.store = storage('sessionStorage');
    let saved = {};
    try {
      saved = JSON.parse(this.store?.getItem(this.key) || '{}') || {};
    } catch {
      saved = {};
    }
    this.conversationId = typeof saved.conversationId === 'string' ? saved.conversationId : null;
    this.turns = Array.isArray(saved.turns) ? saved.turns : [];
    this.style = ['explain', 'hint', 'brief'].includes(saved.style) ? saved.style : 'explain';
  }

  add(turn) {
    this.turns = [...this.turns, turn].slice(-Transcript.MAX_TURNS);
    this.save();
  }

  clear() {
    this.conversationId = null; // the answer style is kept: it is the learner's preference, not the conversation's
    this.turns = [];
    this.save();
  }

  save() {
    try {
      this.store?.setItem(this.key, JSON.stringify({ conversationId: this.conversationId, turns: this.turns, style: this.style }));
    } catch {
      /* full storage: the conversation goes on, a reload forgets it */
    }
  }
}

export class Client {
  // api: base URL without a trailing slash; token: a learner token (JWT) from the host platform, or empty.
  constructor(api, token) {
    this.api = api;
    this.token = token || '';
  }

  headers(hasBody, accept) {
    const headers = { Accept: accept };
    if (hasBody) headers['Content-Type'] = 'application/json';
    if (this.token) headers.Authorization = `Bearer ${this.token}`;
    return headers;
  }

  // The identity part of a body: nothing with a token (the token says who), the anonymous id without one.
  identity() {
    return this.token ? {} : { learner_id: anonymousLearner() };
  }

  // `signal` (an AbortSignal) ends the request and the reading of its body: the box's Stop button.
  async request(path, { method = 'GET', body, accept = 'application/json', signal } = {}) {
    let response;
    try {
      response = await fetch(`${this.api}${path}`, {
        method,
        headers: this.headers(body !== undefined, accept),
        body: body === undefined ? undefined : JSON.stringify(body),
        credentials: 'omit',
        mode: 'cors',
        signal,
      });
    } catch (error) {
      if (signal?.aborted) throw error; // stopped by the learner: not a failure to explain
      // fetch rejects alike for a network failure and a CORS refusal; the page cannot tell them apart.
      throw new ApiError(
        `The mentor at ${this.api} cannot be reached from this page. It may be down, or this site may not be ` +
          'allowed to use it. Please try again later.',
      );
    }
    if (!response.ok) throw await failure(response);
    return response;
  }

  async json(path, options) {
    const response = await this.request(path, options);
    try {
      return await response.json();
    } catch {
      throw new ApiError('The mentor sent an answer this page cannot read.', { status: response.status });
    }
  }

  // Yields [event, data] pairs of /v1/chat/stream: meta, delta, tool_call, done, error. Aborting `signal` closes
  // the connection (the server stops answering and logs the question as abandoned) and throws an AbortError.
  async *chat(body, { signal } = {}) {
    const response = await this.request('/v1/chat/stream', { method: 'POST', body, accept: 'text/event-stream', signal });
    yield* readEvents(response);
  }

  feedback(questionId, rating, comment) {
    const body = { rating, ...this.identity() };
    if (comment) body.comment = comment;
    return this.json(`/v1/questions/${encodeURIComponent(questionId)}/feedback`, { method: 'POST', body });
  }

  runTool(name, args) {
    return this.json(`/v1/tools/${encodeURIComponent(name)}`, { method: 'POST', body: args });
  }
}

async function failure(response) {
  let message = '';
  try {
    message = (await response.json()).message || '';
  } catch {
    /* not JSON: a proxy's page */
  }
  if (response.status === 429) {
    // Retry-After is read when the server exposes it to this origin; the message names the seconds as well.
    const header = Number(response.headers.get('Retry-After'));
    const said = Number(/(\d+)\s*s\b/.exec(message)?.[1]);
    const wait = Number.isFinite(header) && header > 0 ? header : Number.isFinite(said) && said > 0 ? said : 30;
    return new ApiError(`You have asked a lot in a short time. You can ask again in ${wait} seconds.`, {
      status: 429,
      retryAfter: wait,
    });
  }
  if (response.status === 401) {
    return new ApiError('The mentor could not confirm who you are. Reload the page to sign in again.', { status: 401 });
  }
  if (response.status >= 500) {
    return new ApiError(message || 'The mentor is not available right now. Please try again in a moment.', {
      status: response.status,
    });
  }
  return new ApiError(message || `The mentor refused the request (HTTP ${response.status}).`, {
    status: response.status,
  });
}

// Server-sent events from a fetch body (EventSource cannot POST): blocks separated by a blank line, each with an
// `event:` line and `data:` lines (JSON).
async function* readEvents(response) {
  const reader = response.body.pipeThrough(new TextDecoderStream()).getReader();
  let buffer = '';
  for (;;) {
    const { value, done } = await reader.read();
    if (done) break;
    buffer += value;
    for (let end = buffer.search(/\r?\n\r?\n/); end >= 0; end = buffer.search(/\r?\n\r?\n/)) {
      const block = buffer.slice(0, end);
      buffer = buffer.slice(end).replace(/^\r?\n\r?\n/, '');
      const event = parseBlock(block);
      if (event) yield event;
    }
  }
  const last = parseBlock(buffer);
  if (last) yield last;
}

function parseBlock(block) {
  let kind = 'message';
  const data = [];
  for (const line of block.split(/\r?\n/)) {
    if (line.startsWith('event:')) kind = line.slice(6).trim();
    else if (line.startsWith('data:')) data.push(line.slice(5).replace(/^ /, ''));
  }
  if (!data.length) return null;
  try {
    return [kind, JSON.parse(data.join('\n'))];
  } catch {
    return null;
  }
}
