"""Pure graph facts of a spec (adjacency, reachability, cycles) shared by validation and the scheduler."""
from __future__ import annotations

from collections import defaultdict
from functools import cached_property

from graphs.spec import EdgeSpec, GraphSpec, NodeSpec


class Topology:
    """Adjacency and reachability of a GraphSpec; tolerates dangling edges (validation
    reports them) by ignoring edges whose endpoints are not nodes.

    Instances are immutable views; the scheduler caches one per graph version.
    """

    def __init__(self, spec: GraphSpec):
        self.spec = spec
        self.nodes: dict[str, NodeSpec] = {}
        for n in spec.nodes:
            self.nodes.setdefault(n.id, n)
        self.out_edges: dict[str, list[EdgeSpec]] = defaultdict(list)
        self.in_edges: dict[str, list[EdgeSpec]] = defaultdict(list)
        for e in spec.edges:
            if e.source in self.nodes and e.target in self.nodes:
                self.out_edges[e.source].append(e)
                self.in_edges[e.target].append(e)
        self._reach: dict[tuple[str, str | None], frozenset[str]] = {}

    @cached_property
    def start_ids(self) -> list[str]:
        """Ids of nodes of kind ``start`` (a valid graph has exactly one)."""
        return [n.id for n in self.spec.nodes if n.kind == "start"]

    @cached_property
    def end_ids(self) -> list[str]:
        """Ids of nodes of kind ``end``."""
        return [n.id for n in self.spec.nodes if n.kind == "end"]

    def successors(self, node_id: str) -> list[str]:
        """Targets of the node's outgoing edges, in spec order (duplicates removed)."""
        return list(dict.fromkeys(e.target for e in self.out_edges.get(node_id, ())))

    def reachable_from(self, node_id: str, *, avoid: str | None = None) -> frozenset[str]:
        """Nodes reachable from ``node_id`` through one or more edges.

        ``avoid``: a node that the walk may reach but not pass through (the scheduler asks
        "can this branch still reach the join's inputs without going through the join").
        ``node_id`` itself is included only when it lies on a cycle.
        """
        key = (node_id, avoid)
        cached = self._reach.get(key)
        if cached is not None:
            return cached
        seen: set[str] = set()
        stack = list(self.successors(node_id))
        while stack:
            current = stack.pop()
            if current in seen:
                continue
            seen.add(current)
            if current == avoid:
                continue
            stack.extend(self.successors(current))
        result = frozenset(seen)
        self._reach[key] = result
        return result

    def can_reach(self, source: str, target: str, *, avoid: str | None = None) -> bool:
        """Whether ``target`` is reachable from ``source`` (``source == target`` counts)."""
        return source == target or target in self.reachable_from(source, avoid=avoid)

    @cached_property
    def cycles(self) -> list[list[str]]:
        """Strongly connected components that contain a cycle (size > 1, or a self-loop),
        each as a sorted list of node ids (Tarjan's algorithm, iterative)."""
        index: dict[str, int] = {}
        low: dict[str, int] = {}
        on_stack: set[str] = set()
        stack: list[str] = []
        result: list[list[str]] = []
        counter = 0
        for root in self.nodes:
            if root in index:
                continue
            work = [(root, iter(self.successors(root)))]
            index[root] = low[root] = counter
            counter += 1
            stack.append(root)
            on_stack.add(root)
            while work:
                node, children = work[-1]
                advanced = False
                for child in children:
                    if child not in index:
                        index[child] = low[child] = counter
                        counter += 1
                        stack.append(child)
                        on_stack.add(child)
                        work.append((child, iter(self.successors(child))))
                        advanced = True
                        break
                    if child in on_stack:
                        low[node] = min(low[node], index[child])
                if advanced:
                    continue
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    if len(component) > 1 or node in self.successors(node):
                        result.append(sorted(component))
        return result
