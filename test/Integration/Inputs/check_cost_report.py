"""Checks fsdp-gpu-cost-report's JSON against itself and the lowered step
(test/Integration/gpu-cost-report.test).

    check_cost_report.py REPORT.json LOWERED.mlir

Every operation's count x device time adds up to the device's work; the
streamed step is that work, the device's gaps and its waits for the host
(at least the work and the gaps), the graph replay the work and the graph
gaps; the estimate is the graph replay of a capturable step (no device
allocation, no host synchronization), else the streamed one; no estimate is
below its ideal; the h100 (less bandwidth, the same compute) costs no less
than the h200; every launch, gemm call and allocation site of the lowered
step is counted at least once (a buffer of the device arena is no
allocation).
"""

import json
import math
import re
import sys


def main() -> int:
    with open(sys.argv[1]) as f:
        report = json.load(f)
    with open(sys.argv[2]) as f:
        lowered = f.read()
    sites = {
        "launches": len(re.findall(r"gpu\.launch_func ", lowered)),
        "gemm_calls": len(re.findall(r"llvm\.call @fsdprt_gpu_gemm_(?:f32|bf16)\(", lowered)),
        "device_allocations": len(re.findall(r"llvm\.call @mgpuMemAlloc\(", lowered)),
    }
    assert sites["launches"] > 0 and sites["gemm_calls"] > 0, sites
    estimates = {}
    for r in report["reports"]:
        (step,) = [f for f in r["functions"] if f["function"] == "step"]
        total = sum(op["count"] * op["seconds"] for op in step["operations"]) * 1e3
        assert math.isclose(total, step["device_ms"], rel_tol=1e-9), (total, step["device_ms"])
        streamed = step["device_ms"] + step["streamed_gap_ms"] + step["host_bound_ms"]
        assert step["streamed_ms"] >= streamed * (1 - 1e-9), step
        assert step["graph_ms"] >= (step["device_ms"] + step["graph_gap_ms"]) * (1 - 1e-9), step
        capturable = step["device_allocations"] == 0 and step["host_synchronizations"] == 0
        assert step["capturable"] == capturable, step
        expected = step["graph_ms"] if capturable else step["streamed_ms"]
        assert step["estimate_ms"] == expected, step
        assert 0 < step["ideal_ms"] <= step["estimate_ms"], step
        for key, n in sites.items():
            assert step[key] >= n, (r["gpu"], key, step[key], n)
        estimates[r["gpu"]] = step["estimate_ms"]
    assert estimates["h100"] >= estimates["h200"] > 0, estimates
    print(f"ok: {estimates}, sites {sites}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
