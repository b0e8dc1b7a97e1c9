"""Stops one rank of an mpirun job and checks that the whole job still ends.

mpi_stop_rank.py RANK TIMEOUT SLACK -- MPIRUN-COMMAND...

Starts the command, waits until every rank of it runs (its processes are
found by the --outputs directory on their command line), sends SIGSTOP to
RANK and waits for the job to end. Prints the job's output, then "ENDED" if
every process exited within TIMEOUT + SLACK seconds of the stop, else "HANG"
(and kills what is left).
"""

import os
import signal
import subprocess
import sys
import time


def rank_pids(marker):
    """{rank: pid} of the fsdp-run processes whose command line holds marker."""
    found = {}
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                cmd = f.read().split(b"\0")
            if not cmd or not cmd[0].endswith(b"fsdp-run") or marker not in cmd:
                continue
            with open(f"/proc/{pid}/environ", "rb") as f:
                env = dict(e.split(b"=", 1) for e in f.read().split(b"\0") if b"=" in e)
        except OSError:
            continue
        rank = env.get(b"OMPI_COMM_WORLD_RANK", env.get(b"PMI_RANK"))
        if rank is not None:
            found[int(rank)] = int(pid)
    return found


def main():
    rank, timeout, slack = int(sys.argv[1]), float(sys.argv[2]), float(sys.argv[3])
    cmd = sys.argv[sys.argv.index("--") + 1 :]
    marker = cmd[cmd.index("--outputs") + 1].encode()
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    start = time.time()
    while rank not in rank_pids(marker) and time.time() - start < 60:
        time.sleep(0.2)
    time.sleep(1.5)  # let every rank reach the loop of collectives
    pids = rank_pids(marker)
    if rank not in pids:
        print("rank not found; job output:", job.communicate()[0].decode())
        return 1
    os.kill(pids[rank], signal.SIGSTOP)
    stopped = time.time()
    try:
        out = job.communicate(timeout=timeout + slack)[0]
        verdict = "ENDED"
    except subprocess.TimeoutExpired:
        verdict = "HANG"
        for pid in rank_pids(marker).values():
            os.kill(pid, signal.SIGKILL)
        job.kill()
        out = job.communicate()[0]
    left = rank_pids(marker)
    for pid in left.values():
        os.kill(pid, signal.SIGKILL)
    if left:
        verdict = "HANG"
    sys.stdout.write(out.decode(errors="replace"))
    print(
        f"{verdict} (exit status {job.returncode}, {time.time() - stopped:.1f} s after the stop)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
