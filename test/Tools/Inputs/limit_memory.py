"""limit_memory.py MIB [--rank R] -- COMMAND...: runs COMMAND with its
address space limited to MIB mebibytes; with --rank, only in the MPI
process of that rank (Open MPI's or MPICH's environment), the others
unlimited."""

import os
import resource
import sys

limit = int(sys.argv[1]) << 20
args = sys.argv[2 : sys.argv.index("--")]
cmd = sys.argv[sys.argv.index("--") + 1 :]
rank = None
if args[:1] == ["--rank"]:
    rank = args[1]
mine = os.environ.get("OMPI_COMM_WORLD_RANK", os.environ.get("PMI_RANK"))
if rank is None or mine == rank:
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
os.execvp(cmd[0], cmd)
