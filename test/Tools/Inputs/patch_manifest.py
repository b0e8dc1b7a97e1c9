"""Rewrites the manifest of a step library in place, for the error tests.

    patch_manifest.py in.so out.so --set abi_version=999
    patch_manifest.py in.so out.so --set target.features='["+fsdp-none"]'
    patch_manifest.py in.so out.so --set entries.0.args.1.read_only=true
    patch_manifest.py in.so out.so --garbage

The new text must fit the section (it is padded with spaces).
"""

import argparse
import json
import shutil
from pathlib import Path

from fsdp_mlir.aot import MANIFEST_SECTION, elf_section_range

ap = argparse.ArgumentParser()
ap.add_argument("input")
ap.add_argument("output")
ap.add_argument("--set", action="append", default=[], help="dotted.key=json")
ap.add_argument("--garbage", action="store_true")
a = ap.parse_args()
shutil.copyfile(a.input, a.output)
data = bytearray(Path(a.output).read_bytes())
offset, size = elf_section_range(bytes(data), MANIFEST_SECTION, a.input)
raw = bytes(data[offset : offset + size]).split(b"\0", 1)[0]
if a.garbage:
    text = raw.decode()[: len(raw) // 2]  # truncated
else:
    manifest = json.loads(raw)
    for item in a.set:
        key, value = item.split("=", 1)
        *path, last = key.split(".")
        node = manifest
        for k in path:
            node = node[int(k)] if isinstance(node, list) else node[k]
        node[last] = json.loads(value)
    text = json.dumps(manifest)
new = text.encode()
assert len(new) < size, "the new manifest does not fit"
data[offset : offset + size] = new + b" " * (size - 1 - len(new)) + b"\0"
Path(a.output).write_bytes(bytes(data))
