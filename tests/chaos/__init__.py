"""The chaos suite (issue 23): real qclusters on worker hosts in network namespaces, faults below the engine, figures per fault kind."""
