import { dialogOpen, inTextField, shortcutsBlocked } from "./shortcuts";

afterEach(() => { document.body.innerHTML = ""; });

describe("shortcutsBlocked", () => {
  it("blocks in fields, contenteditable, CodeMirror and .nokey, and while a dialog is open", () => {
    document.body.innerHTML = `
      <input id="i"><textarea id="t"></textarea><select id="s"></select>
      <div contenteditable="true"><span id="ce">x</span></div>
      <div class="cm-editor"><div id="cm">x</div></div>
      <div class="nokey"><button id="nk">b</button></div>
      <button id="b">plain</button>`;
    for (const id of ["i", "t", "s", "ce", "cm", "nk"]) expect(inTextField(document.getElementById(id))).toBe(true);
    const plain = document.getElementById("b")!;
    expect(inTextField(plain)).toBe(false);
    expect(shortcutsBlocked({ target: plain })).toBe(false);
    const modal = document.createElement("div");
    modal.setAttribute("role", "dialog");
    document.body.append(modal);
    expect(dialogOpen()).toBe(true);
    expect(shortcutsBlocked({ target: plain })).toBe(true);
  });
});
