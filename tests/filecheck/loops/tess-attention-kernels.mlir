// tess-attention-kernels writes the loop nest of each declaration tess-to-linalg made for
// an attention op (here already bufferized: out-params), and marks it tess.kernel. The
// forward: parallel over batch and query blocks of 64; per key block, the block's scores
// (a 64x64 scratch, never the (L, S) scores) as micro.mma register tiles of the packed q
// rows and transposed k block, the mask applied (a bool mask's size-1 dim read at index
// 0), the running maximum and sum per row in block scratch, P @ v as register tiles into
// the block's output accumulator. The key/value gradients: parallel over key blocks, the
// causal query blocks from the key block's first key on, four products per block pair.
// vector-bits pins the register tile (host-independent). (canonicalize and cse only tidy.)
// RUN: tessc-opt %s -p 'tess-attention-kernels{vector-bits=512},canonicalize,cse' | filecheck %s
// RUN: tessc-opt %s -p 'tess-attention-kernels{block=16 vector-bits=128}' | filecheck %s --check-prefix=BLOCK

func.func private @forward(memref<2x3x4xf32>, memref<2x150x4xf32>, memref<2x150x6xf32>, memref<1x3x150xi1>, memref<2x3x6xf32>, memref<2x3xf32>) attributes {tess.attention_kernel = {computes = ["out", "lse"], scale = 5.000000e-01 : f64, causal = false}, tess.num_outputs = 2 : i64}
func.func private @dkv(memref<3x4xf64>, memref<5x4xf64>, memref<5x6xf64>, memref<3xf64>, memref<3xf64>, memref<3x6xf64>, memref<5x4xf64>, memref<5x6xf64>) attributes {tess.attention_kernel = {computes = ["dk", "dv"], scale = 5.000000e-01 : f64, causal = true}, tess.num_outputs = 2 : i64}

// CHECK-LABEL: func.func private @forward(%0: memref<2x3x4xf32>, %1: memref<2x150x4xf32>, %2: memref<2x150x6xf32>, %3: memref<1x3x150xi1>, %4: memref<2x3x6xf32>, %5: memref<2x3xf32>)
// CHECK-SAME:    tess.kernel
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^bb0(%b0: index, %blk: index):
// CHECK-NOT:       memref<3x150xf32>
// CHECK:           %[[SCORES:.*]] = memref.alloc() : memref<64x64xf32>
// CHECK:           %[[ACC:.*]] = memref.alloc() : memref<64x16xf32>
// CHECK:           scf.for %j0 =
// CHECK:             micro.mma %{{.*}}, %{{.*}}, %[[SCORES]][%r0, %{{.*}}], %{{.*}} {rows = 8 : i64, cols = 32 : i64, lanes = 16 : i64, strides = array<i64: 16, 1, 64>}
// CHECK:             scf.for %c_1 = {{.*}} iter_args({{.*}}) -> (f32) {
// CHECK:               memref.load %3[%c0, %{{.*}}, %{{.*}}] : memref<1x3x150xi1>
// CHECK-NEXT:          arith.select %{{.*}}, %{{.*}}, %{{.*}} : f32
// CHECK-NEXT:          memref.store %{{.*}}, %[[SCORES]][%r_2, %c_1] : memref<64x64xf32>
// CHECK-NEXT:          arith.maximumf
// CHECK:               math.exp
// CHECK:             micro.mma %[[SCORES]][%{{.*}}], %{{.*}}, %[[ACC]][%r0_1, %c0], %{{.*}} {rows = 8 : i64, cols = 16 : i64, lanes = 16 : i64, strides = array<i64: 64, 1, 16>}
// CHECK:           math.log
// CHECK:           memref.store %{{.*}}, %5[%b0, %{{.*}}] : memref<2x3xf32>
// CHECK:         func.return

// CHECK-LABEL: func.func private @dkv(
// CHECK:         "scf.parallel"
// CHECK-NEXT:    ^bb0(%blk: index):
// CHECK:           %[[ROWS:.*]] = arith.constant 3 : index
// CHECK-NEXT:      %[[FIRST:.*]] = arith.minsi %{{.*}}, %[[ROWS]] : index
// CHECK:           scf.for %i0 = %[[FIRST]] to %[[ROWS]] step
// CHECK-COUNT-2:     micro.mma {{.*}} {rows = 8 : i64, cols = 16 : i64, lanes = 8 : i64, strides = array<i64: 8, 1, 16>}
// CHECK:             memref.load %3[%{{.*}}] : memref<3xf64>
// CHECK:             math.exp
// CHECK:             micro.mma {{.*}} {rows = 8 : i64, cols = 8 : i64, lanes = 8 : i64, strides = array<i64: 1, 16, 8>}
// CHECK:             micro.mma {{.*}} {rows = 8 : i64, cols = 8 : i64, lanes = 8 : i64, strides = array<i64: 1, 16, 8>}
// CHECK:           memref.store %{{.*}}, %6[%{{.*}}, %{{.*}}] : memref<5x4xf64>
// CHECK:           memref.store %{{.*}}, %7[%{{.*}}, %{{.*}}] : memref<5x6xf64>

// BLOCK: memref.alloc() : memref<16x16xf32>
// BLOCK: micro.mma {{.*}} {rows = 4 : i64, cols = 8 : i64, lanes = 4 : i64, strides = array<i64: 4, 1, 16>}
