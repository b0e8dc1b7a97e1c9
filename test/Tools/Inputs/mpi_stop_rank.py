"""Stops one rank of an mpirun job and checks that the whole job still ends.

mpi_stop_rank.py RANK SLACK [--at busy|start] [--signal STOP|KILL] -- MPIRUN-COMMAND...

Starts the command and waits until every rank of it runs (its processes are
found by the --outputs directory on their command line). With `--at busy`
(the default) it then waits until every rank has used 0.5 s of CPU (it is
inside its collectives); with `--at start` it signals at once, while the
rank is still starting (loading, JIT compilation, MPI initialization). It
sends the signal (default SIGSTOP) to RANK and waits for the job to end.
Prints the job's output, then "ENDED" if every process exited within SLACK
seconds of the first error line (the peers' timeout), or of the signal when
no error is printed (`--at start --signal KILL`: mpirun ends the job); else
"HANG" (and kills what is left after 120 s).
"""

import os
import signal
import subprocess
import sys
import threading
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


def cpu_seconds(pid):
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wait_until_busy(marker, ranks, seconds, limit=90):
    """Waits until every rank has used `seconds` of CPU: past MPI start-up
    and JIT compilation (which cannot time out), inside the collectives."""
    start = time.time()
    while time.time() - start < limit:
        pids = rank_pids(marker)
        if len(pids) == ranks and all(cpu_seconds(p) >= seconds for p in pids.values()):
            return pids
        time.sleep(0.2)
    return rank_pids(marker)


def read_lines(stream, lines):
    for raw in stream:
        lines.append((time.time(), raw.decode(errors="replace")))


def main():
    rank, slack = int(sys.argv[1]), float(sys.argv[2])
    opts = sys.argv[3 : sys.argv.index("--")]
    at = opts[opts.index("--at") + 1] if "--at" in opts else "busy"
    sig = opts[opts.index("--signal") + 1] if "--signal" in opts else "STOP"
    cmd = sys.argv[sys.argv.index("--") + 1 :]
    marker = cmd[cmd.index("--outputs") + 1].encode()
    job = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    lines = []
    reader = threading.Thread(target=read_lines, args=(job.stdout, lines))
    reader.start()
    ranks = int(cmd[cmd.index("-np") + 1])
    if at == "start":
        # The rank's own process, as soon as it is there.
        start = time.time()
        pids = rank_pids(marker)
        while rank not in pids and time.time() - start < 90:
            time.sleep(0.01)
            pids = rank_pids(marker)
    else:
        pids = wait_until_busy(marker, ranks, 0.5)
    signalled = time.time()
    if rank in pids:
        os.kill(pids[rank], getattr(signal, "SIG" + sig))
    try:
        job.wait(timeout=120)
    except subprocess.TimeoutExpired:
        pass
    ended = time.time()
    left = rank_pids(marker)
    for pid in left.values():
        os.kill(pid, signal.SIGKILL)
    if job.poll() is None:
        job.kill()
    job.wait()
    reader.join()
    errors = [t for t, line in lines if "error:" in line]
    if not errors and at == "start":
        errors = [signalled]  # a killed rank: mpirun ends the job itself
    sys.stdout.write("".join(line for _, line in lines))
    if rank not in pids:
        print("rank not found")
    elif left or not errors or ended - errors[0] > slack:
        after = (
            f"{ended - errors[0]:.1f} s after the first error" if errors else "no error"
        )
        print(f"HANG (exit status {job.returncode}, {after})")
    else:
        print(
            f"ENDED (exit status {job.returncode}, {ended - errors[0]:.1f} s after the first error)"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
