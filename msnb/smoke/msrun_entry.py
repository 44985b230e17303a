"""msrun runs a script, not a module: this file starts the smoke worker for each rank."""

import sys

from msnb.smoke.worker import main

if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))
