"""Graphs that call graphs: the subgraph node kind and its child runs."""
