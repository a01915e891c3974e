"""The graph format, Ballast's ground floor: graphs, graph versions, the spec document and its topology."""
