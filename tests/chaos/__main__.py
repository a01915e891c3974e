"""``python -m tests.chaos`` (``make chaos``): the chaos suite's long run; ``--cleanup`` removes namespaces a killed run left."""
import sys

from tests.chaos.suite import main

sys.exit(main(sys.argv[1:]))
