"""Prints keys of a step library's manifest, read from its section.

    manifest_of.py step.so version gpu
"""

import json
import sys
from pathlib import Path

from fsdp_mlir.aot import MANIFEST_SECTION, elf_section_range

data = Path(sys.argv[1]).read_bytes()
offset, size = elf_section_range(data, MANIFEST_SECTION, sys.argv[1])
manifest = json.loads(data[offset : offset + size].split(b"\0", 1)[0])
print(" ".join(json.dumps(manifest.get(k), sort_keys=True) for k in sys.argv[2:]))
