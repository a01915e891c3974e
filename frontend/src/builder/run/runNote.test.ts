// runVersionNote / runBlocked: the run dialog says which version runs when the draft differs.
import { describe, expect, it } from "vitest";
import { draftNotice, publishBlocked, runBlocked, runVersionNote } from "./runNote";

describe("runVersionNote", () => {
  it("warns that an invalid draft is not what runs, with its problem count", () => {
    const note = runVersionNote(1, "abc", { problems: 2, contentHash: null });
    expect(note.warn).toBe(true);
    expect(note.text).toContain("Runs version 1, not your draft");
    expect(note.text).toContain("2 problems");
  });
  it("warns about unpublished changes in a valid draft", () => {
    const note = runVersionNote(3, "abc", { problems: 0, contentHash: "def" });
    expect(note).toEqual({ text: "Runs version 3, not your draft: the draft has unpublished changes. Publish to run them.", warn: true });
  });
  it("is calm when the draft is the version, or on a version's own page", () => {
    expect(runVersionNote(3, "abc", { problems: 0, contentHash: "abc" }).warn).toBe(false);
    expect(runVersionNote(3, "abc", null)).toEqual({ text: "Runs version 3.", warn: false });
  });
});

describe("runBlocked", () => {
  it("gives the reason when no version exists", () => {
    expect(runBlocked(null)).toMatch(/publish the draft first/i);
    expect(runBlocked(1)).toBeNull();
  });
});

describe("publishBlocked", () => {
  it("waits for validation, then blocks on problems", () => {
    expect(publishBlocked(null, null)).toBe("Checking the graph…");
    expect(publishBlocked({ problems: 2, contentHash: null }, { number: 1, hash: "h1" })).toBe("Fix 2 problems before publishing");
  });
  it("blocks a draft equal to the latest version, and allows a changed or never-published one", () => {
    expect(publishBlocked({ problems: 0, contentHash: "h1" }, { number: 3, hash: "h1" })).toBe("No changes since version 3");
    expect(publishBlocked({ problems: 0, contentHash: "h2" }, { number: 3, hash: "h1" })).toBeNull();
    expect(publishBlocked({ problems: 0, contentHash: "h1" }, null)).toBeNull();
    // The latest version's hash not known yet: the server answers a repeat with that version.
    expect(publishBlocked({ problems: 0, contentHash: "h1" }, { number: 3, hash: undefined })).toBeNull();
  });
});

describe("draftNotice", () => {
  const base = { latestVersion: null, onDraft: true, canBuild: true, canOperate: true, problems: 0 };
  it("gives a never-published draft one note, pointing at the problems without repeating them", () => {
    expect(draftNotice({ ...base, problems: 3 })).toBe("Never published: fix the problems below, then run the draft to try it or publish it.");
    expect(draftNotice(base)).toBe("Never published: run the draft to try it here; publish it to make a version that triggers and others can run.");
    expect(draftNotice({ ...base, canBuild: false })).toMatch(/no published version/);
    expect(draftNotice({ ...base, canBuild: false, canOperate: false })).toBeNull();
  });
  it("says nothing once a version exists (problems stay in the Problems list) or on a version's page", () => {
    expect(draftNotice({ ...base, latestVersion: 2, problems: 3 })).toBeNull();
    expect(draftNotice({ ...base, onDraft: false })).toBeNull();
  });
});
