import signal
import sys

try:
    from llmload.cli import main
except KeyboardInterrupt:  # Ctrl-C while Python imports: nothing started yet
    sys.exit(128 + signal.SIGINT)

sys.exit(main())
