// promptfoo test cases from eval/golden.jsonl: one test per case of the default corpus, its assertions written
// from the case's expectations (eval/README.md, "promptfoo"). MENTOR_GOLDEN_SPLIT picks dev (default), heldout
// or all. mentor's own `mentor eval` stays the reference; these assertions are the subset promptfoo can express.
const fs = require("fs");
const path = require("path");

const GOLDEN = path.join(__dirname, "..", "golden.jsonl");
// As in mentor's coverage_accuracy: attack cases are not scored on coverage.
const ATTACKS = new Set(["injection", "poisoned", "extraction"]);

function mentorCheck(expression, metric) {
  // The route's extension field, kept by transformResponse in the provider response's metadata.
  return { type: "javascript", value: `const mentor = context.metadata.mentor;\nreturn ${expression};`, metric };
}

function caseTest(c) {
  const e = c.expect;
  const outOfScope = Boolean(e.out_of_scope);
  const assert = [mentorCheck(`mentor.out_of_scope === ${outOfScope}`, "scope")];
  for (const fact of e.facts || []) assert.push({ type: "icontains", value: fact, metric: "facts" });
  for (const renderings of e.numbers || []) {
    assert.push({ type: "contains-any", value: [].concat(renderings), metric: "numbers" });
  }
  if (e.tool) {
    const name = JSON.stringify(e.tool);
    assert.push(mentorCheck(`mentor.tool_calls.some((call) => call.name === ${name})`, "tool"));
  }
  for (const text of [...(e.forbidden || []), ...(e.pii || [])]) {
    assert.push({ type: "not-icontains", value: text, metric: "forbidden" });
  }
  if (!ATTACKS.has(c.category)) {
    const coverage = e.coverage || (outOfScope ? "none" : "full");
    assert.push(mentorCheck(`mentor.coverage === ${JSON.stringify(coverage)}`, "coverage"));
  }
  // Earlier turns go as user messages without answers: the route reads them as the conversation so far.
  const messages = c.turns.map((content) => ({ role: "user", content }));
  return {
    description: c.id,
    vars: { case_id: c.id, model: c.module_id, messages: JSON.stringify(messages) },
    assert,
    metadata: { category: c.category, split: c.split },
  };
}

module.exports = function goldenTests() {
  const split = process.env.MENTOR_GOLDEN_SPLIT || "dev";
  const lines = fs.readFileSync(GOLDEN, "utf8").split("\n").filter((line) => line.trim());
  return lines
    .slice(1) // the header
    .map((line) => JSON.parse(line))
    // Poisoned cases need the fixture corpus (eval/fixtures/poisoned), which a running mentor does not serve;
    // the route has no answer style, so the few hint/brief cases are left to `mentor eval`.
    .filter((c) => c.corpus === "default" && c.style === "explain")
    .filter((c) => split === "all" || c.split === split)
    .map(caseTest);
};
