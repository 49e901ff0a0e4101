// tess-gpu-attention: each attention kernel call becomes one flash-attention launch of 32
// threads, a thread per query row (forward, dq) or key (dk/dv): Q (K) rows staged in
// workgroup memory with a padding column, K/V (Q/dO) tiles streamed between barriers, the
// row's maximum, sum and accumulators carried in registers; no (L, S) buffer, the causal
// bound is index arithmetic. tess-decompose-attention{fallback-only} keeps what the
// kernels take (the E = 80 op of @wide is decomposed into matmuls).
// RUN: tessc-opt %s -p 'tess-decompose-attention{fallback-only=true},tess-to-linalg,tess-bufferize,tess-memory-plan,tess-outline-kernels,tess-gpu-attention,canonicalize,cse' | filecheck %s
// RUN: tessc-opt %s -p 'tess-decompose-attention{fallback-only=true}' | filecheck %s --check-prefix=FALLBACK

// CHECK-LABEL: func.func @forward
// CHECK:       "gpu.launch_func"(%{{.*}}, %q, %k, %v, %m, %out0) <{kernel = @kernels::@attention_kernel_0_forward
// CHECK-NOT:   func.call @attention_kernel
// dq, dk and dv of the same operands: one call (tess-to-linalg), two launches.
// CHECK-LABEL: func.func @backward
// CHECK:       "gpu.launch_func"({{.*}}) <{kernel = @kernels::@attention_kernel_1_dq
// CHECK-NEXT:  "gpu.launch_func"({{.*}}) <{kernel = @kernels::@attention_kernel_1_dkv
// CHECK-NOT:   func.func private @attention_kernel
// CHECK:       "gpu.module"() <{sym_name = "kernels"}>

// The forward: grid = batch x query blocks, bool mask broadcast over the batch (index 0).
// CHECK:       known_block_size = array<i32: 32, 1, 1>, known_grid_size = array<i32: 2, 1, 1>
// CHECK-NEXT:  ^bb0(%q: memref<2x5x8xf32>, %k: memref<2x7x8xf32>, %v: memref<2x7x3xf32>, %mask: memref<1x5x7xi1>, %out: memref<2x5x3xf32>, %q_block: memref<32x9xf32, #gpu.address_space<workgroup>>, %k_tile: memref<7x8xf32, #gpu.address_space<workgroup>>, %v_tile: memref<7x3xf32, #gpu.address_space<workgroup>>, %scores: memref<32x8xf32, #gpu.address_space<workgroup>>):
// CHECK:         memref.store %{{.*}}, %q_block
// CHECK:         "gpu.barrier"()
// CHECK:         memref.store %{{.*}}, %k_tile
// CHECK:         memref.store %{{.*}}, %v_tile
// CHECK:         "gpu.barrier"()
// CHECK:         %[[PEAK:.*]] = scf.for %jj = {{.*}} iter_args(%{{.*}}) -> (f32) {
// CHECK:           memref.load %q_block
// CHECK:           memref.load %k_tile
// CHECK:           %[[MASK:.*]] = memref.load %mask[%{{.*}}, %{{.*}}, %jj] : memref<1x5x7xi1>
// CHECK-NEXT:      %[[S:.*]] = arith.select %[[MASK]], %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:      memref.store %[[S]], %scores
// CHECK-NEXT:      arith.maximumf
// CHECK:         arith.cmpf one
// CHECK:         math.exp
// CHECK:         scf.for %jj_1 = {{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32) {
// CHECK:           memref.load %scores
// CHECK:           math.exp
// CHECK-COUNT-3:   memref.load %v_tile
// CHECK:         scf.if
// CHECK:           arith.divf
// CHECK-COUNT-3:   memref.store %{{.*}}, %out
// CHECK:       sym_name = "attention_kernel_0_forward", gpu.kernel, workgroup_attributions = 4 : i64

// dq: the key tiles stop at the block's diagonal (min(S, q0 + 32)); dq in 8 registers.
// CHECK:       ^bb0(%q: memref<40x8xf32>, %k: memref<37x8xf32>, %v: memref<37x3xf32>, %lse: memref<40xf32>, %delta: memref<40xf32>, %dout: memref<40x3xf32>, %dq: memref<40x8xf32>, %q_block: memref<32x9xf32, {{.*}}>, %dout_block: memref<32x4xf32, {{.*}}>, %k_tile: memref<32x8xf32, {{.*}}>, %v_tile: memref<32x3xf32, {{.*}}>):
// CHECK:         memref.load %lse
// CHECK:         memref.load %delta
// CHECK-NEXT:    %[[DIAGONAL:.*]] = arith.addi %{{.*}}, %{{.*}} : index
// CHECK-NEXT:    %[[END:.*]] = arith.minsi %{{.*}}, %[[DIAGONAL]] : index
// CHECK-NEXT:    scf.for %j0 = %{{.*}} to %[[END]] step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK:           "gpu.barrier"()
// CHECK:           "gpu.barrier"()
// CHECK:           scf.for %jj = {{.*}} -> (f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK:             arith.cmpi ule, %{{.*}}, %{{.*}} : index
// CHECK:             math.exp
// CHECK:       sym_name = "attention_kernel_1_dq", gpu.kernel, workgroup_attributions = 4 : i64

// dk/dv: the query tiles start at the one holding the block's first key (causal).
// CHECK:       %dk: memref<37x8xf32>, %dv: memref<37x3xf32>, %k_block: memref<32x9xf32, {{.*}}>, %v_block: memref<32x4xf32, {{.*}}>, %q_tile: memref<32x8xf32, {{.*}}>, %dout_tile: memref<32x3xf32, {{.*}}>, %lse_tile: memref<32xf32, {{.*}}>, %delta_tile: memref<32xf32, {{.*}}>):
// CHECK:         %[[FIRST:.*]] = arith.divui %{{[0-9]+}}, %{{[0-9]+}} : index
// CHECK-NEXT:    %[[START:.*]] = arith.muli %[[FIRST]], %{{.*}} : index
// CHECK-NEXT:    scf.for %i0 = %[[START]] to %{{.*}} step %{{.*}} iter_args({{.*}}) -> (f32, f32, f32, f32, f32, f32, f32, f32, f32, f32, f32) {
// CHECK-NOT:     memref.atomic_rmw
// CHECK:       sym_name = "attention_kernel_1_dkv", gpu.kernel, workgroup_attributions = 6 : i64

// FALLBACK-LABEL: func.func @forward
// FALLBACK:       tess.attention %q, %k, %v mask %m
// FALLBACK-LABEL: func.func @wide
// FALLBACK-NOT:   tess.attention
// FALLBACK:       tess.matmul

func.func @forward(%q: tensor<2x5x8xf32>, %k: tensor<2x7x8xf32>, %v: tensor<2x7x3xf32>, %m: tensor<1x5x7xi1>) -> tensor<2x5x3xf32> {
  %0 = tess.attention %q, %k, %v mask %m scale = 0.5 : tensor<2x5x8xf32>, tensor<2x7x8xf32>, tensor<2x7x3xf32>, tensor<1x5x7xi1> -> tensor<2x5x3xf32>
  %1 = tess.add %0, %0 : tensor<2x5x3xf32>, tensor<2x5x3xf32> -> tensor<2x5x3xf32>
  func.return %1 : tensor<2x5x3xf32>
}

func.func @backward(%q: tensor<40x8xf32>, %k: tensor<37x8xf32>, %v: tensor<37x3xf32>, %l: tensor<40xf32>, %d: tensor<40xf32>, %g: tensor<40x3xf32>) -> (tensor<40x8xf32>, tensor<37x8xf32>, tensor<37x3xf32>) {
  %dq = tess.attention_grad %q, %k, %v, %l, %d, %g wrt = "q" scale = 0.5 causal : tensor<40x8xf32>, tensor<37x8xf32>, tensor<37x3xf32>, tensor<40xf32>, tensor<40xf32>, tensor<40x3xf32> -> tensor<40x8xf32>
  %dk = tess.attention_grad %q, %k, %v, %l, %d, %g wrt = "k" scale = 0.5 causal : tensor<40x8xf32>, tensor<37x8xf32>, tensor<37x3xf32>, tensor<40xf32>, tensor<40xf32>, tensor<40x3xf32> -> tensor<37x8xf32>
  %dv = tess.attention_grad %q, %k, %v, %l, %d, %g wrt = "v" scale = 0.5 causal : tensor<40x8xf32>, tensor<37x8xf32>, tensor<37x3xf32>, tensor<40xf32>, tensor<40xf32>, tensor<40x3xf32> -> tensor<37x3xf32>
  %e = tess.add %dq, %dq : tensor<40x8xf32>, tensor<40x8xf32> -> tensor<40x8xf32>
  func.return %e, %dk, %dv : tensor<40x8xf32>, tensor<37x8xf32>, tensor<37x3xf32>
}

func.func @wide(%q: tensor<3x80xf32>, %k: tensor<5x80xf32>, %v: tensor<5x2xf32>) -> tensor<3x2xf32> {
  %0 = tess.attention %q, %k, %v scale = 0.125 : tensor<3x80xf32>, tensor<5x80xf32>, tensor<5x2xf32> -> tensor<3x2xf32>
  func.return %0 : tensor<3x2xf32>
}
