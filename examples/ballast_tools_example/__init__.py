"""An example package of your own Ballast tools: ``send_message`` (not safe to repeat) and ``wait_for_reply`` (safe to repeat, stops when cancelled).

Enable it in every web and worker process (both import it)::

    export PYTHONPATH=examples                      # or install your package in the venv
    export BALLAST_EXTRA_TOOL_MODULES=ballast_tools_example.tools

The tools live in :mod:`ballast_tools_example.tools`; :mod:`ballast_tools_example.outbox`
stands in for the messaging service they call. See README.md beside this file.
"""
