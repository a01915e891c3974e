// The example graphs a new graph can start from: the repository's examples/*.json, bundled as one chunk fetched when the New graph dialog asks.
/// <reference types="vite/client" />

/** One example: its file's stem, the spec's name and description, and the spec itself. */
export interface GraphExample {
  id: string;
  name: string;
  description: string;
  nodes: number;
  spec: Record<string, unknown>;
}

// Lazy: each file is its own small chunk, loaded only by loadExamples().
const FILES = import.meta.glob<Record<string, unknown>>("../../../examples/*.json", { import: "default" });

/** Every example, sorted by name (an unreadable one is left out). */
export async function loadExamples(): Promise<GraphExample[]> {
  const all = await Promise.all(Object.entries(FILES).map(async ([path, load]) => {
    try {
      const spec = await load();
      const id = (path.split("/").pop() ?? path).replace(/\.json$/, "");
      return {
        id,
        name: typeof spec.name === "string" ? spec.name : id,
        description: typeof spec.description === "string" ? spec.description : "",
        nodes: Array.isArray(spec.nodes) ? spec.nodes.length : 0,
        spec,
      };
    } catch {
      return null;
    }
  }));
  return all.filter((e): e is GraphExample => e !== null).sort((a, b) => a.name.localeCompare(b.name));
}
