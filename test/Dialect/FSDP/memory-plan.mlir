// RUN: fsdp-opt %s -split-input-file -verify-diagnostics | FileCheck %s

// A module's memory plans round-trip.
// CHECK: module attributes {fsdp.memory_plans = {step = #fsdp.memory_plan<arena = 4096, outside = 64, buffers = 3, largest = [2048, 1024]>}}
module attributes {fsdp.memory_plans = {step = #fsdp.memory_plan<arena = 4096, outside = 64, buffers = 3, largest = [2048, 1024]>}} {
}

// -----

// expected-error @+1 {{memory plan buffer of 8192 bytes does not fit its arena of 4096 bytes}}
module attributes {fsdp.memory_plans = {step = #fsdp.memory_plan<arena = 4096, outside = 0, buffers = 1, largest = [8192]>}} {
}

// -----

// expected-error @+1 {{memory plan sizes and counts must be non-negative}}
module attributes {fsdp.memory_plans = {step = #fsdp.memory_plan<arena = -1, outside = 0, buffers = 0, largest = []>}} {
}

// -----

// expected-error @+1 {{'fsdp.memory_plans' must be a module's dictionary of #fsdp.memory_plan}}
module attributes {fsdp.memory_plans = {step = 5}} {
}
