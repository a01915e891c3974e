// The user and group picker: suggestions as you type from the server, chips for chosen names, plain names out.
import type { Principal } from "../api/types";
import { act, render, screen, waitFor } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { useState } from "react";
import { afterEach, describe, expect, it, vi } from "vitest";
import { PrincipalPicker, type PrincipalKind } from "./PrincipalPicker";
import { stubFetch } from "./testing";

afterEach(() => vi.unstubAllGlobals());

const PEOPLE: Principal[] = [
  { kind: "user", name: "ada", label: "Ada Lovelace (ada)" },
  { kind: "user", name: "grace", label: "grace" },
  { kind: "group", name: "approvers", label: "approvers" },
  { kind: "group", name: "finance", label: "finance" },
];

function fakeSearch(q: string, kind?: PrincipalKind): Promise<Principal[]> {
  return Promise.resolve(PEOPLE.filter((p) => (!kind || p.kind === kind) && (p.name.includes(q) || p.label.includes(q))));
}

function Harness({ onChange = () => undefined, kinds, search = fakeSearch }: {
  onChange?: (u: string[], g: string[]) => void;
  kinds?: PrincipalKind[];
  search?: (q: string, kind?: PrincipalKind) => Promise<Principal[]>;
}) {
  const [users, setUsers] = useState<string[]>(["grace"]);
  const [groups, setGroups] = useState<string[]>([]);
  return (
    <PrincipalPicker id="p" label="Approvers" users={users} groups={groups} kinds={kinds} search={search}
      onChange={(u, g) => { setUsers(u); setGroups(g); onChange(u, g); }} />
  );
}

describe("PrincipalPicker", () => {
  it("suggests users and groups as you type, adds the chosen one as plain names, and never offers a chosen one again", async () => {
    const user = userEvent.setup();
    const changes: [string[], string[]][] = [];
    render(<Harness onChange={(u, g) => changes.push([u, g])} />);
    const box = screen.getByRole("combobox", { name: "Approvers" });
    await user.type(box, "a");
    const list = await screen.findByRole("listbox");
    await waitFor(() => expect(screen.getAllByRole("option").map((o) => o.textContent)).toEqual(["userAda Lovelace (ada)", "groupapprovers", "groupfinance"]));
    expect(list.textContent).not.toContain("grace"); // already chosen
    await user.keyboard("{ArrowDown}{Enter}"); // the second suggestion: the group approvers
    expect(changes.at(-1)).toEqual([["grace"], ["approvers"]]);
    expect(screen.queryByRole("listbox")).toBeNull(); // closed after a pick
    await user.keyboard("{ArrowDown}");
    await user.click(await screen.findByRole("option", { name: /Ada Lovelace/ }));
    expect(changes.at(-1)).toEqual([["grace", "ada"], ["approvers"]]);
    expect(screen.getByRole("list", { name: "Approvers: chosen" }).textContent).toContain("group approvers");
    await user.click(screen.getByRole("button", { name: "Remove user grace" }));
    expect(changes.at(-1)).toEqual([["ada"], ["approvers"]]);
    await user.click(box);
    await user.keyboard("{Backspace}"); // empty box: removes the last chip
    expect(changes.at(-1)).toEqual([["ada"], []]);
  });

  it("offers only the kind it is for and says when nothing matches", async () => {
    const user = userEvent.setup();
    render(<Harness kinds={["group"]} />);
    await user.type(screen.getByRole("combobox"), "fin");
    await waitFor(() => expect(screen.getAllByRole("option").map((o) => o.textContent)).toEqual(["groupfinance"]));
    await user.clear(screen.getByRole("combobox"));
    await user.type(screen.getByRole("combobox"), "zzz");
    expect(await screen.findByText("No user or group matches “zzz”.")).toBeTruthy();
  });

  it("keeps the newest answer when an older, slower one arrives last", async () => {
    const pending: Record<string, (p: Principal[]) => void> = {};
    const slow = (q: string) => new Promise<Principal[]>((resolve) => { pending[q] = resolve; });
    const user = userEvent.setup();
    render(<Harness search={slow} />);
    const box = screen.getByRole("combobox");
    await user.type(box, "f");
    await waitFor(() => expect(pending.f).toBeDefined());
    await user.type(box, "i");
    await waitFor(() => expect(pending.fi).toBeDefined());
    await act(async () => pending.fi!([PEOPLE[3]!]));
    await act(async () => pending.f!([PEOPLE[0]!]));
    expect(screen.getAllByRole("option").map((o) => o.textContent)).toEqual(["groupfinance"]);
  });

  it("asks the principals API by default, with the kind when it offers one", async () => {
    const calls = stubFetch({ "GET /api/v1/principals/": () => ({ body: { results: [PEOPLE[2]] } }) });
    const user = userEvent.setup();
    render(<PrincipalPicker id="g" label="Approver groups" users={[]} groups={[]} kinds={["group"]} onChange={() => undefined} />);
    await user.type(screen.getByRole("combobox"), "appr");
    expect(await screen.findByRole("option", { name: /approvers/ })).toBeTruthy();
    expect(calls.at(-1)?.path).toBe("/api/v1/principals/?q=appr&kind=group");
  });

  it("shows the chosen names without an input when read-only", () => {
    render(<PrincipalPicker id="r" label="Operators" users={["ada"]} groups={["finance"]} onChange={() => undefined} readOnly />);
    expect(screen.queryByRole("combobox")).toBeNull();
    expect(screen.queryByRole("button")).toBeNull();
    expect(screen.getByRole("list", { name: "Operators: chosen" }).textContent).toBe("adagroup finance");
  });
});
