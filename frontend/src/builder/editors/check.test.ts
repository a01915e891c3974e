// problemText / unshownProblems: each problem of a code field is listed once, in plain words.
import { describe, expect, it } from "vitest";
import { problemText, unshownProblems } from "./check";

describe("problemText", () => {
  it("puts the place first, unless the message already names it", () => {
    expect(problemText({ code: "invalid", message: "unknown variable 'x'", line: 1, column: 5 })).toBe("line 1, column 5: unknown variable 'x'");
    const syntax = "syntax error at line 1, column 15: unexpected end of expression in `input.amount >`";
    expect(problemText({ code: "invalid", message: syntax, line: 1, column: 15 })).toBe(syntax);
    expect(problemText({ code: "invalid", message: "bad", line: null, column: null })).toBe("bad");
  });
});

describe("unshownProblems", () => {
  it("drops the editor's problem when the field shows the validation's message for it", () => {
    const syntax = "syntax error at line 1, column 15: unexpected end of expression in `input.amount >`";
    expect(unshownProblems([syntax], [`invalid expression: ${syntax}`])).toEqual([]);
    expect(unshownProblems(["line 1, column 1: unknown variable 'prority'"], ["unknown variable 'prority'"])).toEqual([]);
  });
  it("keeps problems the field does not show", () => {
    expect(unshownProblems(["line 2, column 4: unexpected '}'"], ["required field is missing"])).toEqual(["line 2, column 4: unexpected '}'"]);
  });
});
