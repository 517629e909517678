import sys

from mcphost.cli import main

sys.exit(main())
