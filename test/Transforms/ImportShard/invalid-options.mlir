// RUN: fsdp-opt %s --fsdp-import-shard="axis-names=dp,fsdp,tp" -verify-diagnostics

// One name per grid axis, for every grid.
// expected-error @+1 {{'shard.grid' op has 2 axes but axis-names gives 3 name(s)}}
shard.grid @grid(shape = 2x2)
