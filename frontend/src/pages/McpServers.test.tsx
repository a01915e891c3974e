// The MCP servers page: the list, an add refused at its field then sent as typed, Test connection showing the tools and their hints, an edit that keeps the stored headers, remove after a confirm.
import { screen, waitFor, within } from "@testing-library/react";
import userEvent from "@testing-library/user-event";
import { afterEach, describe, expect, it, vi } from "vitest";
import { makeContext, renderWith, stubFetch } from "../shell/testing";
import { ApiError } from "../lib/api";
import type { McpServerRow } from "../api/types";
import McpServers, { mcpFieldErrors } from "./McpServers";

afterEach(() => vi.unstubAllGlobals());

const LISTED = "2026-12-07T02:00:00Z";
const tool = (name: string, annotations: Record<string, unknown>, repeat_safe: boolean) => ({
  name: `mcp__files__${name}`, tool: name, description: `The ${name} tool.`, input_schema: { type: "object" }, annotations, repeat_safe,
});
const FILES: McpServerRow = {
  name: "files", label: "Local files", transport: "stdio", command: "/usr/bin/python3", args: ["-P", "server.py", "two words"], url: "",
  has_headers: false, trust_annotations: true, enabled: true, tools: [], tools_listed_at: null, last_error: "",
};
const REMOTE: McpServerRow = {
  name: "remote", label: "", transport: "http", command: "", args: [], url: "https://mcp.example.com/mcp",
  has_headers: true, trust_annotations: false, enabled: false, tools: [], tools_listed_at: LISTED, last_error: "connection refused",
};
const refused = (fields: Record<string, string[]>) => ({ status: 400, body: { error: { code: "invalid", message: "Invalid input.", fields } } });

describe("MCP servers page", () => {
  it("lists the servers with their transport, command or URL, trust, state and tool count", async () => {
    stubFetch({ "GET /api/v1/mcp-servers/": () => ({ body: [FILES, REMOTE] }) });
    renderWith(<McpServers stdioCommands={["/usr/bin/python3"]} />, makeContext({ admin: true }, "mcpservers"));
    const files = await screen.findByRole("row", { name: "MCP server files" });
    expect(within(files).getByText("stdio")).toBeTruthy();
    expect(within(files).getByText('/usr/bin/python3 -P server.py "two words"')).toBeTruthy();
    expect(within(files).getByText("Trusted")).toBeTruthy();
    expect(within(files).getByText("Enabled")).toBeTruthy();
    expect(within(files).getByRole("button", { name: "Show the tools of files" }).textContent).toBe("not listed");
    const remote = screen.getByRole("row", { name: "MCP server remote" });
    expect(within(remote).getByText("https://mcp.example.com/mcp")).toBeTruthy();
    expect(within(remote).getByText("headers set")).toBeTruthy();
    expect(within(remote).getByText("Not trusted")).toBeTruthy();
    expect(within(remote).getByText("Disabled")).toBeTruthy();
    expect(within(remote).getByText("Last listing failed")).toBeTruthy();
  });

  it("adds a stdio server: a refused command is shown at its field, the arguments go one a line", async () => {
    let posts = 0;
    const calls = stubFetch({
      "GET /api/v1/mcp-servers/": () => ({ body: posts > 1 ? [FILES] : [] }),
      "POST /api/v1/mcp-servers/": () => (++posts === 1
        ? refused({ command: ["not in the operator's allow-list BALLAST_MCP_STDIO_COMMANDS (/usr/bin/python3)"], "args.1": ["too long"] })
        : { status: 201, body: FILES }),
    });
    const user = userEvent.setup();
    renderWith(<McpServers stdioCommands={["/usr/bin/python3", "/usr/bin/npx"]} />, makeContext({ admin: true }, "mcpservers"));
    await screen.findByText("No MCP servers yet");
    await user.click(screen.getByRole("button", { name: "Add MCP server" }));
    const dialog = screen.getByRole("dialog", { name: "Add an MCP server" });
    await user.type(within(dialog).getByLabelText("Name"), "files");
    await user.selectOptions(within(dialog).getByLabelText("Command"), "/usr/bin/npx");
    await user.type(within(dialog).getByLabelText("Arguments"), "-P{Enter}server.py{Enter}two words{Enter}{Enter}");
    await user.click(within(dialog).getByRole("button", { name: "Add server" }));
    const command = within(dialog).getByLabelText("Command");
    await waitFor(() => expect(command.getAttribute("aria-invalid")).toBe("true"));
    expect(within(dialog).getByText(/not in the operator's allow-list/)).toBeTruthy();
    expect(within(dialog).getByText("1: too long")).toBeTruthy();
    expect(calls.find((c) => c.method === "POST")?.body).toEqual({
      name: "files", label: "", transport: "stdio", command: "/usr/bin/npx", args: ["-P", "server.py", "two words"], trust_annotations: false, enabled: true,
    });
    await user.selectOptions(command, "/usr/bin/python3");
    await user.click(within(dialog).getByRole("button", { name: "Add server" }));
    expect(await screen.findByRole("row", { name: "MCP server files" })).toBeTruthy();
    expect(screen.queryByRole("dialog")).toBeNull();
  });

  it("tests the connection and shows the tools with their hints, or the failure", async () => {
    let listed = false;
    const tools = [tool("read_file", { readOnlyHint: true }, true), tool("write_file", { idempotentHint: true, destructiveHint: true }, true), tool("shell", {}, false)];
    stubFetch({
      "GET /api/v1/mcp-servers/": () => ({ body: [listed ? { ...FILES, tools, tools_listed_at: LISTED } : FILES, REMOTE] }),
      "POST /api/v1/mcp-servers/files/test/": () => { listed = true; return { body: { ok: true, message: "3 tools", latency_ms: 41, server: { ...FILES, tools, tools_listed_at: LISTED } } }; },
      "POST /api/v1/mcp-servers/remote/test/": () => ({ body: { ok: false, message: "connection refused by 127.0.0.1:9", latency_ms: 3, server: REMOTE } }),
    });
    const user = userEvent.setup();
    renderWith(<McpServers stdioCommands={[]} />, makeContext({ admin: true }, "mcpservers"));
    await user.click(await screen.findByRole("button", { name: "Test connection of files" }));
    const detail = await screen.findByRole("region", { name: "Connection of files" });
    expect((await within(detail).findByRole("status")).textContent).toBe("Connected · 41 ms · 3 tools");
    const table = await within(detail).findByRole("table", { name: "Tools of files" });
    const rows = within(table).getAllByRole("row").slice(1).map((r) => within(r).getAllByRole("cell").map((c) => c.textContent));
    expect(rows).toEqual([
      ["read_filemcp__files__read_file", "The read_file tool.", "yes", "no", "yes"],
      ["write_filemcp__files__write_file", "The write_file tool.", "no", "yes", "yes"],
      ["shellmcp__files__shell", "The shell tool.", "no", "no", "no"],
    ]);
    expect(screen.getByRole("button", { name: "Hide the tools of files" }).textContent).toBe("3");
    await user.click(screen.getByRole("button", { name: "Test connection of remote" }));
    const failed = await screen.findByRole("region", { name: "Connection of remote" });
    expect((await within(failed).findByRole("status")).textContent).toContain("Failed · 3 ms · connection refused by 127.0.0.1:9");
  });

  it("edits an HTTP server without sending its headers unless they are replaced, and removes one after a confirm", async () => {
    const calls = stubFetch({
      "GET /api/v1/mcp-servers/": () => ({ body: [REMOTE] }),
      "PATCH /api/v1/mcp-servers/remote/": () => ({ body: REMOTE }),
      "DELETE /api/v1/mcp-servers/remote/": () => ({ status: 204 }),
    });
    const user = userEvent.setup();
    renderWith(<McpServers stdioCommands={[]} />, makeContext({ admin: true }, "mcpservers"));
    await user.click(await screen.findByRole("button", { name: "Edit remote" }));
    let dialog = screen.getByRole("dialog", { name: "Edit remote" });
    expect((within(dialog).getByLabelText("Name") as HTMLInputElement).disabled).toBe(true);
    await user.clear(within(dialog).getByLabelText("URL"));
    await user.type(within(dialog).getByLabelText("URL"), "https://mcp.example.com/v2");
    await user.click(within(dialog).getByRole("button", { name: "Save changes" }));
    await waitFor(() => expect(screen.queryByRole("dialog")).toBeNull());
    expect(calls.filter((c) => c.method === "PATCH")[0]!.body).toEqual({ label: "", transport: "http", url: "https://mcp.example.com/v2", trust_annotations: false, enabled: false });
    await user.click(screen.getByRole("button", { name: "Edit remote" }));
    dialog = screen.getByRole("dialog", { name: "Edit remote" });
    await user.click(within(dialog).getByLabelText("Replace them"));
    await user.type(within(dialog).getByLabelText("Header 1 name"), "Authorization");
    await user.type(within(dialog).getByLabelText("Header 1 value"), "Bearer s3cret");
    await user.click(within(dialog).getByRole("button", { name: "Save changes" }));
    await waitFor(() => expect(calls.filter((c) => c.method === "PATCH")).toHaveLength(2));
    expect(calls.filter((c) => c.method === "PATCH")[1]!.body).toMatchObject({ headers: { Authorization: "Bearer s3cret" } });
    await user.click(screen.getByRole("button", { name: "Remove remote" }));
    const confirm = screen.getByRole("dialog", { name: "Remove remote?" });
    expect(calls.some((c) => c.method === "DELETE")).toBe(false);
    await user.click(within(confirm).getByRole("button", { name: "Remove server" }));
    await waitFor(() => expect(calls.some((c) => c.method === "DELETE")).toBe(true));
  });
});

describe("mcpFieldErrors", () => {
  it("puts nested paths under their field and ignores unknown ones", () => {
    const error = new ApiError(400, { error: { code: "invalid", message: "Invalid input.", fields: { url: ["bad"], "headers.X-Key": ["no"], "args[2]": ["long"], other: ["x"] } } }, "");
    expect(mcpFieldErrors(error)).toEqual({ url: "bad", headers: "X-Key: no", args: "2: long" });
    expect(mcpFieldErrors(new Error("down"))).toEqual({});
  });
});
