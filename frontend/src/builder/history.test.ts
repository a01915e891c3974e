import { historyOf, historyPush, historyRedo, historyUndo } from "./history";

describe("history", () => {
  it("undoes and redoes each change", () => {
    let h = historyOf(1);
    h = historyPush(h, 2);
    h = historyPush(h, 3);
    h = historyUndo(h);
    expect(h.present).toBe(2);
    h = historyUndo(h);
    expect(h.present).toBe(1);
    expect(historyUndo(h)).toBe(h);
    h = historyRedo(h);
    expect(h.present).toBe(2);
    h = historyPush(h, 9);
    expect(h.future).toEqual([]);
  });

  it("coalesces changes that share a key into one undo step", () => {
    let h = historyOf("");
    h = historyPush(h, "a", "field:x");
    h = historyPush(h, "ab", "field:x");
    h = historyPush(h, "abc", "field:x");
    expect(h.past).toEqual([""]);
    h = historyPush(h, "abc!", "field:y");
    expect(historyUndo(h).present).toBe("abc");
  });

  it("bounds the past", () => {
    let h = historyOf(0);
    for (let i = 1; i <= 10; i++) h = historyPush(h, i, null, 3);
    expect(h.past).toEqual([7, 8, 9]);
  });
});
