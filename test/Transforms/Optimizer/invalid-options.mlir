// Bad option values are reported once, with the accepted values or range,
// and the pass fails.
// RUN: not fsdp-opt %s --fsdp-optimizer=optimizer=adam 2>&1 | FileCheck %s --check-prefix=KIND
// RUN: not fsdp-opt %s --fsdp-optimizer=optimizer=none 2>&1 | FileCheck %s --check-prefix=KIND-NONE
// RUN: not fsdp-opt %s --fsdp-pipeline=optimizer=sgdw 2>&1 | FileCheck %s --check-prefix=PIPE-KIND
// RUN: not fsdp-opt %s --fsdp-optimizer=momentum=-0.5 2>&1 | FileCheck %s --check-prefix=MOMENTUM
// RUN: not fsdp-opt %s --fsdp-optimizer=momentum=inf 2>&1 | FileCheck %s --check-prefix=MOMENTUM-INF
// RUN: not fsdp-opt %s --fsdp-optimizer=dampening=nan 2>&1 | FileCheck %s --check-prefix=DAMPENING
// RUN: not fsdp-opt %s --fsdp-optimizer=nesterov=true 2>&1 | FileCheck %s --check-prefix=NESTEROV
// RUN: not fsdp-opt %s --fsdp-optimizer="nesterov=true momentum=0.9 dampening=0.1" 2>&1 | FileCheck %s --check-prefix=NESTEROV-DAMP
// RUN: not fsdp-opt %s --fsdp-optimizer=weight-decay=-1 2>&1 | FileCheck %s --check-prefix=WD
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw betas=0.9" 2>&1 | FileCheck %s --check-prefix=BETAS-ONE
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw betas=0.9,1.0" 2>&1 | FileCheck %s --check-prefix=BETAS-RANGE
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw betas=0.9,x" 2>&1 | FileCheck %s --check-prefix=BETAS-PARSE
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw eps=-1e-8" 2>&1 | FileCheck %s --check-prefix=EPS
// RUN: not fsdp-opt %s --fsdp-optimizer=max-grad-norm=-1 2>&1 | FileCheck %s --check-prefix=CLIP
// RUN: not fsdp-opt %s --fsdp-optimizer=max-grad-norm=nan 2>&1 | FileCheck %s --check-prefix=CLIP-NAN
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=sgd betas=0.9,0.99" 2>&1 | FileCheck %s --check-prefix=SGD-BETAS
// RUN: not fsdp-opt %s --fsdp-optimizer="optimizer=adamw momentum=0.9" 2>&1 | FileCheck %s --check-prefix=ADAMW-MOMENTUM
// RUN: not fsdp-opt %s --fsdp-pipeline="momentum=0.9" 2>&1 | FileCheck %s --check-prefix=PIPE-NONE
// RUN: not fsdp-opt %s --fsdp-optimizer=keep-grads=maybe 2>&1 | FileCheck %s --check-prefix=BOOL

// KIND: error: option optimizer: 'adam' is not one of sgd, adamw
// KIND-NONE: error: option optimizer: 'none' is not one of sgd, adamw
// PIPE-KIND: error: option optimizer: 'sgdw' is not one of none, sgd, adamw
// MOMENTUM: error: option momentum must be a finite number >= 0, got -0.5
// MOMENTUM-INF: error: option momentum must be a finite number >= 0, got {{inf|INF}}
// DAMPENING: error: option dampening must be a finite number, got {{nan|NAN}}
// NESTEROV: error: option nesterov needs momentum > 0 and dampening = 0, got momentum 0 and dampening 0
// NESTEROV-DAMP: error: option nesterov needs momentum > 0 and dampening = 0, got momentum 0.9 and dampening 0.1
// WD: error: option weight-decay must be a finite number >= 0, got -1
// BETAS-ONE: error: option betas takes two values beta1,beta2, got 1
// BETAS-RANGE: error: option betas: each value must be in [0, 1), got 1
// BETAS-PARSE: for the --betas option: 'x' value invalid for floating point argument!
// EPS: error: option eps must be a finite number >= 0, got -1e-08
// CLIP: error: option max-grad-norm must be a finite number >= 0 (0 = no clipping), got -1
// CLIP-NAN: error: option max-grad-norm must be a finite number >= 0 (0 = no clipping), got {{nan|NAN}}
// SGD-BETAS: error: options betas and eps are AdamW's; optimizer=sgd takes momentum, dampening, nesterov, weight-decay and max-grad-norm
// ADAMW-MOMENTUM: error: options momentum, dampening and nesterov are SGD's; optimizer=adamw takes betas, eps, weight-decay and max-grad-norm
// PIPE-NONE: error: the optimizer options (momentum, dampening, nesterov, weight-decay, betas, eps, max-grad-norm, keep-grads) need optimizer=sgd or optimizer=adamw
// BOOL: for the --keep-grads option: 'maybe' is invalid value for boolean argument

fsdp.mesh @mesh [shard = 4]
