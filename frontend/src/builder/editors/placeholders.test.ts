// Examples in empty code fields fit what the named state key holds (a list is not compared with 0.5).
import { describe, expect, it } from "vitest";
import type { GraphSpec } from "../spec";
import { KINDS } from "../../test/fixtures/nodeKinds";
import { stateKeyKinds, stateKeyNames } from "./fields";
import { examplePlaceholder } from "./formContext";

/** The research example's shape: an appended list of findings, LLM replies, a text input. */
function research(): GraphSpec {
  return {
    name: "research",
    input_schema: { type: "object", properties: { topic: { type: "string" } } },
    state: { findings: { reducer: "append" } },
    nodes: [
      { id: "start", kind: "start", config: {} },
      { id: "plan", kind: "llm", config: { prompt: "x", output_key: "plan" } },
      { id: "web", kind: "llm", config: { prompt: "x", output_key: "findings" } },
      { id: "route", kind: "condition", config: {} },
    ],
    edges: [],
  };
}

describe("expression examples", () => {
  it("knows what keys hold from reducers, the input schema and LLM replies", () => {
    expect(stateKeyKinds(research(), KINDS)).toEqual({ plan: "text", findings: "list", topic: "text" });
  });

  it("never compares a list with a number", () => {
    const spec = research();
    const names = stateKeyNames(spec, KINDS);
    expect(names).toEqual(["findings", "input", "plan", "topic"]);
    expect(examplePlaceholder("expression", names, stateKeyKinds(spec, KINDS))).toBe("e.g. len(findings) > 0");
  });

  it("prefers a number, uses text with `in`, and falls back to a test that fits any value", () => {
    expect(examplePlaceholder("expression", ["articles", "input", "score"], { articles: "list", score: "number" })).toBe("e.g. score > 0.5");
    expect(examplePlaceholder("expression", ["input", "reply"], { reply: "text" })).toBe('e.g. "refund" in reply');
    expect(examplePlaceholder("expression", ["input", "thing"], {})).toBe("e.g. thing is not None");
    expect(examplePlaceholder("expression", ["input"], {})).toBe("e.g. input.score > 0.5");
  });
});
