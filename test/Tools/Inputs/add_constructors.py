"""Adds a global constructor and destructor to a lowered module (as the GPU
lowering's module loads and unloads are): each prints a line through puts.

    add_constructors.py in.mlir out.mlir
"""

import sys
from pathlib import Path

EXTRA = """
  llvm.mlir.global_ctors ctors = [@fsdp_test_ctor],
    priorities = [0 : i32], data = [#llvm.zero]
  llvm.mlir.global_dtors dtors = [@fsdp_test_dtor],
    priorities = [0 : i32], data = [#llvm.zero]
  llvm.mlir.global internal constant @fsdp_test_ctor_msg("constructor ran\\00")
    {addr_space = 0 : i32}
  llvm.mlir.global internal constant @fsdp_test_dtor_msg("destructor ran\\00")
    {addr_space = 0 : i32}
  llvm.func @puts(!llvm.ptr) -> i32
  llvm.func @fflush(!llvm.ptr) -> i32
  llvm.func @fsdp_test_ctor() {
    %0 = llvm.mlir.addressof @fsdp_test_ctor_msg : !llvm.ptr
    %1 = llvm.call @puts(%0) : (!llvm.ptr) -> i32
    %2 = llvm.mlir.zero : !llvm.ptr
    %3 = llvm.call @fflush(%2) : (!llvm.ptr) -> i32
    llvm.return
  }
  llvm.func @fsdp_test_dtor() {
    %0 = llvm.mlir.addressof @fsdp_test_dtor_msg : !llvm.ptr
    %1 = llvm.call @puts(%0) : (!llvm.ptr) -> i32
    %2 = llvm.mlir.zero : !llvm.ptr
    %3 = llvm.call @fflush(%2) : (!llvm.ptr) -> i32
    llvm.return
  }
"""

text = Path(sys.argv[1]).read_text().rstrip()
assert text.endswith("}"), "not a module"
Path(sys.argv[2]).write_text(text[:-1] + EXTRA + "}\n")
