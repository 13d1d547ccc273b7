import sys

from llmload.cli import main

sys.exit(main())
