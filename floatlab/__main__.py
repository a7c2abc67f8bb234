"""``python -m floatlab`` runs the command line (see floatlab.cli)."""

import sys

from floatlab.cli import main

if __name__ == "__main__":
    sys.exit(main())
