"""compare_memory.py A.json B.json [C.json ...] CHECK...: checks memory
reports (fsdp-memory-report format=json, first function of each) against
relations between them, printing one line per check and failing on any.

  lower:KIND         B's peak of KIND is below A's
  same:KIND          every report has the same peak of KIND
  scale:KIND         report i (world size W_i) has A's peak * W_A / W_i
"""

import json
import sys


def load(path):
    with open(path) as f:
        return json.load(f)["functions"][0]


def main():
    paths = [a for a in sys.argv[1:] if a.endswith(".json")]
    checks = [a for a in sys.argv[1:] if not a.endswith(".json")]
    reports = [load(p) for p in paths]
    ok = True
    for check in checks:
        rel, kind = check.split(":")
        peaks = [r["peak_bytes"][kind] for r in reports]
        if rel == "lower":
            good = peaks[1] < peaks[0]
        elif rel == "same":
            good = len(set(peaks)) == 1
        elif rel == "scale":
            w0 = reports[0]["ranks"]
            good = all(p * r["ranks"] == peaks[0] * w0 for p, r in zip(peaks, reports))
        else:
            raise SystemExit(f"unknown check {check}")
        print(f"{'OK' if good else 'FAIL'} {check}: {peaks}")
        ok &= good
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
