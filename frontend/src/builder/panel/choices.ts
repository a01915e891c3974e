// Choices for node forms: registered tools (GET /api/v1/tools/) and providers' models (GET /api/v1/models/).
import { useEffect, useState } from "react";
import type { ModelList, ProviderModels, ProviderRow, ToolInfo, ToolList } from "../../api/types";
import { api } from "../../lib/api";

/**
 * The first sentence of a docstring's first paragraph, as plain text: reST markup
 * (````code````, ``:role:`target```, ``*emphasis*``) removed and line breaks joined, so a
 * tool picker shows "Send one HTTP request and return its status, a few headers and its
 * body." instead of the whole docstring.
 */
export function docSummary(doc: string): string {
  const paragraph = doc.trim().split(/\n\s*\n/)[0] ?? "";
  const text = paragraph
    .replace(/:[a-z]+:`~?([^`]+)`/g, "$1")
    .replace(/``([^`]+)``/g, "$1")
    .replace(/`([^`]+)`/g, "$1")
    .replace(/\*\*?([^*]+)\*\*?/g, "$1")
    .replace(/\s+/g, " ")
    .trim();
  // A sentence ends at ". " before a capital letter (not "e.g. x" or "v1.2").
  const end = text.search(/[.!?](?=\s+[A-Z(])/);
  return end >= 0 ? text.slice(0, end + 1) : text;
}

export interface Choices {
  tools: ToolInfo[];
  providers: ProviderModels[];
  /** Provider name -> whether its API key is set (or none is needed), from GET /api/v1/providers/. */
  ready?: Readonly<Record<string, boolean>>;
}

const EMPTY: Choices = { tools: [], providers: [] };
let cached: Promise<Choices> | null = null;

/** Both catalogues, fetched once per page; a catalogue that fails to load is empty (the fields stay free text). */
export function loadChoices(): Promise<Choices> {
  cached ??= Promise.all([
    api<ToolList>("tools/").then((r) => r.tools ?? [], () => []),
    api<ModelList>("models/").then((r) => r.providers ?? [], () => []),
    api<ProviderRow[]>("providers/").then(
      (r) => Object.fromEntries((Array.isArray(r) ? r : []).map((p) => [p.name, p.ready])),
      () => ({}),
    ),
  ]).then(([tools, providers, ready]) => ({ tools, providers, ready }));
  return cached;
}

/** Forget the cached catalogues (tests). */
export function resetChoices(): void {
  cached = null;
}

/** The catalogues once loaded (empty until then). */
export function useChoices(): Choices {
  const [choices, setChoices] = useState<Choices>(EMPTY);
  useEffect(() => {
    let live = true;
    void loadChoices().then((c) => live && setChoices(c));
    return () => {
      live = false;
    };
  }, []);
  return choices;
}

/** ``{value, label}`` options for a ``ui:options.choices`` name, given the node's config. */
export function optionsFor(which: string, choices: Choices, config: Record<string, unknown>): { value: string; label: string }[] {
  if (which === "tool") return choices.tools.map((t) => ({ value: t.name, label: t.description ? `${t.name} — ${docSummary(t.description)}` : t.name }));
  if (which === "provider") {
    // A provider without its API key is offered, but says so (nodes naming it fail until a key is set).
    return choices.providers.map((p) => ({ value: p.provider, label: choices.ready?.[p.provider] === false ? `${p.provider} — no API key set (Providers page)` : p.provider }));
  }
  if (which === "model") {
    const provider = typeof config.provider === "string" ? config.provider : "mock";
    const p = choices.providers.find((x) => x.provider === provider);
    return (p?.models ?? []).map((m) => ({ value: m.id, label: m.name && m.name !== m.id ? `${m.id} — ${m.name}` : m.id }));
  }
  return [];
}

/** Which config fields of which kinds offer a catalogue (``*`` = each item of a list). */
export const CHOICE_FIELDS: Readonly<Record<string, Readonly<Record<string, string>>>> = {
  llm: { provider: "provider", model: "model" },
  agent: { provider: "provider", model: "model", "tools.*": "tool" },
  tool: { tool: "tool" },
};
