"""count_calls.py NAME A B: prints MORE when program B calls NAME more often
than program A (e.g. the matrix products of a recomputed forward)."""

import re
import sys


def count(path, name):
    with open(path) as f:
        return len(re.findall(r"llvm\.call @" + re.escape(name) + r"\b", f.read()))


def main():
    name, a, b = sys.argv[1:4]
    na, nb = count(a, name), count(b, name)
    print(f"{name}: {na} -> {nb}: {'MORE' if nb > na else 'NOT MORE'}")
    sys.exit(0 if nb > na else 1)


if __name__ == "__main__":
    main()
