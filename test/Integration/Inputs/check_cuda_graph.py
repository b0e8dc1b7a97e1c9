"""check_cuda_graph.py ON.json OFF.json FALLBACK.json STEPS: fsdp-run --json of a
compute=gpu training run with CUDA graphs (the default, ON), with
--cuda-graphs=off (OFF), and of a step that cannot be captured (FALLBACK:
lowered with arena=false, its steps allocate device memory). ON captured its
third step and launched the graph for every step from there on each rank;
OFF launched none and says it was disabled; FALLBACK launched none and says
why."""

import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)


def main():
    on, off, fallback = (load(p) for p in sys.argv[1:4])
    steps = int(sys.argv[4])
    launches = on["device_graph_launches"]
    if launches != [steps - 2] * len(launches) or not on["cuda_graph"].startswith("replayed"):
        print(f"FAIL: graph launches {launches}, cuda_graph {on['cuda_graph']!r}")
        sys.exit(1)
    for name, run in (("off", off), ("fallback", fallback)):
        if any(n != 0 for n in run["device_graph_launches"]):
            print(f"FAIL: {name} launched graphs: {run['device_graph_launches']}")
            sys.exit(1)
    print(f"GRAPH: {on['cuda_graph']}")
    print(f"OFF: {off['cuda_graph']}")
    print(f"FALLBACK: {fallback['cuda_graph']}")


if __name__ == "__main__":
    main()
