"""limit_memory.py MIB -- COMMAND...: runs COMMAND with its address space
limited to MIB mebibytes."""

import os
import resource
import sys

limit = int(sys.argv[1]) << 20
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
cmd = sys.argv[sys.argv.index("--") + 1 :]
os.execvp(cmd[0], cmd)
