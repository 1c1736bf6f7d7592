import sys

from gpuchecks.cli import main

sys.exit(main())
