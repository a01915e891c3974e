"""The run API: views, serializers and fields of runs, steps, events and run actions."""
