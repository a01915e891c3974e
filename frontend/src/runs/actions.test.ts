import { compareSide } from "../test/factories";
import { compareParams, editableState, estimateText, forkPatch, jsonPositions, keyPath, nodeDifference, placeOf, retryAdvice, serverProblems, stepEstimateText } from "./actions";

const original = { greeting: "Hi Ada", count: 2, items: [{ sku: "a" }], input: { name: "Ada" } };
const keys = ["greeting", "count", "items", "name"];

describe("forkPatch", () => {
  it("is the keys whose value changed or that were added", () => {
    const text = JSON.stringify({ greeting: "Hello", count: 2, items: [{ sku: "a" }], name: "Bo" }, null, 2);
    const { patch, problems } = forkPatch(text, original, keys);
    expect(patch).toEqual({ greeting: "Hello", name: "Bo" });
    expect(problems).toEqual([]);
  });

  it("is empty for the state as it was (input left out of the editor)", () => {
    const { patch, problems } = forkPatch(editableState(original), original, keys);
    expect(patch).toEqual({});
    expect(problems).toEqual([]);
  });

  it("places an unknown key at its key, by path", () => {
    const text = '{\n  "greeting": "Hi Ada",\n  "grreting": 1\n}';
    const { patch, problems } = forkPatch(text, original, keys);
    expect(patch).toEqual({});
    const unknown = problems.find((p) => p.path === "grreting")!;
    expect(unknown.severity).toBe("error");
    expect(unknown.message).toBe("not a state key of this graph");
    expect(text.slice(unknown.from, unknown.to)).toBe('"grreting"');
  });

  it("refuses an edited input and warns about a removed key", () => {
    const text = JSON.stringify({ greeting: "Hi Ada", count: 2, input: { name: "Eve" } });
    const { problems } = forkPatch(text, original, keys);
    expect(problems.find((p) => p.path === "input")?.severity).toBe("error");
    const removed = problems.find((p) => p.path === "items")!;
    expect(removed.severity).toBe("warning");
    expect(removed.message).toMatch(/cannot remove/);
  });

  it("says what is wrong with text that is not a JSON object", () => {
    expect(forkPatch('{"greeting": }', original, keys).problems[0]!.message).toMatch(/^Not valid JSON/);
    expect(forkPatch("[1, 2]", original, keys)).toMatchObject({ patch: null, problems: [{ path: "", severity: "error" }] });
  });
});

describe("jsonPositions", () => {
  it("finds object keys and list items by the server's path syntax", () => {
    const text = '{"a": {"b c": [10, {"d": null}]}, "e": true}';
    const pos = jsonPositions(text);
    const at = (p: string) => { const [f, t] = pos.get(p)!; return text.slice(f, t); };
    expect(at("a")).toBe('"a"');
    expect(at('a["b c"]')).toBe('"b c"');
    expect(at('a["b c"][0]')).toBe("10");
    expect(at('a["b c"][1].d')).toBe('"d"');
    expect(at("e")).toBe('"e"');
    expect(keyPath("a", "b c")).toBe('a["b c"]');
  });

  it("places an unknown path at its nearest known parent", () => {
    const text = '{"items": [{"sku": "a"}]}';
    const pos = jsonPositions(text);
    const [from, to] = placeOf(pos, "items[0].sku.deeper");
    expect(text.slice(from, to)).toBe('"sku"');
  });

  it("keeps what it found before a syntax error", () => {
    const pos = jsonPositions('{"a": 1, "b": ');
    expect(pos.has("a")).toBe(true);
  });
});

describe("serverProblems", () => {
  it("maps state_patch field errors onto the edited text and keeps the rest apart", () => {
    const text = '{\n  "greeting": "x",\n  "items": [1]\n}';
    const { problems, other } = serverProblems({ "state_patch.items[0]": ["too big"], "state_patch.nope": ["not a state key of this graph"], step: ["No step 9."] }, text);
    expect(problems.map((p) => p.path)).toEqual(["items[0]", "nope"]);
    expect(text.slice(problems[0]!.from, problems[0]!.to)).toBe("1");
    expect(other).toEqual(["step: No step 9."]);
  });
});

describe("estimate texts", () => {
  it("shows unknown prices as unknown, never as $0", () => {
    expect(estimateText({ estimate: { usd: "0.0042", tokens: 1200, unpriced: [] } })).toBe("up to $0.0042 · 1,200 tokens");
    expect(estimateText({ estimate: { usd: "0.0042", tokens: 1200, unpriced: ["ask"] } })).toBe("up to $0.0042 + unknown · 1,200 tokens");
    expect(estimateText({ estimate: { usd: "0", tokens: 10, unpriced: ["ask"] } })).toBe("up to unknown · 10 tokens");
    expect(stepEstimateText({ usd: null, tokens: 90 })).toBe("unknown price · 90 tokens");
    expect(stepEstimateText({ usd: "0", tokens: 0 })).toBe("free");
    expect(stepEstimateText(null)).toBe("counted in its parent");
  });
});

describe("compare helpers", () => {
  const side = compareSide({ output: 1, seconds: 1 });
  it("words a node's difference", () => {
    expect(nodeDifference({ node_id: "n", kind: "k", a: side, b: side, same_output: true })).toBe("same");
    expect(nodeDifference({ node_id: "n", kind: "k", a: side, b: { ...side, output: 2 }, same_output: false })).toBe("different output");
    expect(nodeDifference({ node_id: "n", kind: "k", a: side, b: { ...side, status: "failed" }, same_output: false })).toBe("status differs");
    expect(nodeDifference({ node_id: "n", kind: "k", a: null, b: side, same_output: false })).toBe("only in B");
  });
  it("reads the page's query", () => {
    expect(compareParams("?a=3&b=9")).toEqual({ a: 3, b: 9 });
    expect(compareParams("?a=x&b=-1")).toEqual({ a: null, b: null });
  });
});

describe("retryAdvice", () => {
  it("warns that a deterministic error comes back, naming its code", () => {
    const advice = retryAdvice({ code: "expression", message: "division by zero", retryable: false, node_id: "boom" });
    expect(advice).toContain("(expression)");
    expect(advice).toContain("will most likely fail again");
  });
  it("says nothing for a passing error or one the engine did not classify", () => {
    expect(retryAdvice({ code: "timeout", message: "slow", retryable: true })).toBeNull();
    expect(retryAdvice({ code: "budget_exceeded", message: "over" })).toBeNull();
    expect(retryAdvice("boom")).toBeNull();
    expect(retryAdvice(null)).toBeNull();
  });
});
